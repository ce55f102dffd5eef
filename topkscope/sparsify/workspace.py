"""Reusable scratch buffers, owned by one sparsifier instance.

Allocating a fresh 100 MB tensor costs more than the pass that fills it (page faults
on first touch), so the per-call temporaries of a selection — |u|, a boolean mask,
block maxima — live here and are reused while the vector size is stable. Each slot
keeps one grow-only buffer per (dtype, device); `take` returns a view of the first n
elements. A buffer is scratch: its content is undefined until the caller writes it.
"""

from __future__ import annotations

import torch


class Workspace:
    """Named grow-only scratch buffers; one instance per sparsifier (no shared state)."""

    def __init__(self) -> None:
        self._buffers: dict[tuple[str, torch.dtype, torch.device], torch.Tensor] = {}

    def take(self, slot: str, n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """A 1-D scratch tensor of n elements (a view into a buffer of at least n)."""
        key = (slot, dtype, torch.device(device))
        buf = self._buffers.get(key)
        if buf is None or buf.numel() < n:
            buf = torch.empty(n, dtype=dtype, device=device)
            self._buffers[key] = buf
        return buf[:n]

    def nbytes(self) -> int:
        """Bytes held by all buffers."""
        return sum(b.numel() * b.element_size() for b in self._buffers.values())

    def clear(self) -> None:
        """Release every buffer."""
        self._buffers.clear()
