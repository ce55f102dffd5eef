"""Language-model batching: a token stream as B parallel columns, cut into bptt windows.

batchify(tokens, B): drop the last len % B tokens, then column b holds the b-th contiguous
chunk:  out[t, b] = tokens[b * T + t],  T = len // B.
bptt_batch(source, i, bptt): inputs source[i : i+s], targets source[i+1 : i+1+s],
s = min(bptt, T - 1 - i).
"""

from __future__ import annotations

import torch


def batchify(tokens: torch.Tensor, batch_size: int) -> torch.Tensor:
    """(T, B) int64 tensor of B contiguous streams, T = len(tokens) // B."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 1:
        raise ValueError("tokens must be a 1-D tensor")
    steps = tokens.numel() // batch_size
    if steps < 2:
        raise ValueError(
            f"batch_size = {batch_size} leaves {steps} steps of {tokens.numel()} tokens; "
            f"allowed batch_size in [1, {max(1, tokens.numel() // 2)}]"
        )
    return tokens[: steps * batch_size].view(batch_size, steps).t().contiguous()


def num_windows(source: torch.Tensor, bptt: int) -> int:
    """How many bptt windows cover a (T, B) source: ceil((T - 1) / bptt)."""
    return -(-(source.shape[0] - 1) // bptt)


def bptt_batch(source: torch.Tensor, i: int, bptt: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs (s, B), targets (s, B)) starting at row i of a batchified source."""
    if bptt < 1:
        raise ValueError(f"bptt = {bptt} must be >= 1")
    if not 0 <= i < source.shape[0] - 1:
        raise ValueError(f"i = {i} outside the allowed range [0, {source.shape[0] - 2}]")
    s = min(bptt, source.shape[0] - 1 - i)
    return source[i : i + s], source[i + 1 : i + 1 + s]
