"""A worker's sparse contribution and how contributions are summed.

Worker p sends (values_p, indices_p) with values_p = u_p[indices_p]. The aggregate is

    sum_p scatter(values_p, indices_p)   (a dense d-vector; the caller divides by P)

Counts may differ between workers (approximate sparsifiers), including zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

COUNT_BYTES = 8  # each worker announces its count as one int64


@dataclass(frozen=True)
class SparseUpdate:
    """Values and their positions in the flat d-vector (int32 when d < 2^31, else int64)."""

    values: torch.Tensor
    indices: torch.Tensor

    @property
    def count(self) -> int:
        return int(self.indices.numel())


def index_dtype(d: int) -> torch.dtype:
    """The narrowest index type that addresses d elements (int32 halves index traffic)."""
    return torch.int32 if d < 2**31 else torch.int64


def scatter_sum(updates: list[SparseUpdate], d: int, dtype: torch.dtype,
                device: torch.device | str, out: torch.Tensor | None = None,
                scale: float = 1.0) -> torch.Tensor:
    """scale * dense sum of all contributions, added in list (rank) order; duplicates
    accumulate. scale = 1/P gives the mean without another pass over d elements.

    out: a d-vector to reuse (zeroed here); a fresh one is allocated when None.
    """
    if out is None:
        out = torch.zeros(d, dtype=dtype, device=device)
    else:
        if out.shape != (d,) or out.dtype != dtype:
            raise ValueError(f"out must be a {dtype} vector of d = {d}, got {out.dtype} "
                             f"{tuple(out.shape)}")
        out.zero_()
    for upd in updates:
        if upd.count:
            if int(upd.indices.min()) < 0 or int(upd.indices.max()) >= d:
                raise ValueError(f"sparse indices outside [0, {d}) in a contribution")
            out.index_add_(0, upd.indices, upd.values.to(dtype), alpha=scale)
    return out


def sparse_payload_bytes(counts: list[int], value_bytes: int, index_bytes: int) -> int:
    """Bytes the variable-count all-gather puts on the wire, summed over workers (train
    table's `bytes_sent`).

    Each worker sends its count (COUNT_BYTES), then max(counts) (value, index) pairs: a worker
    that selected fewer is padded to the largest count, as a fixed-size all-gather needs.
    """
    padded = max(counts) if counts else 0
    return len(counts) * (COUNT_BYTES + padded * (value_bytes + index_bytes))


def selected_payload_bytes(counts: list[int], value_bytes: int, index_bytes: int) -> int:
    """Bytes of the (value, index) pairs the workers selected, summed over workers, without
    the counts or the padding of sparse_payload_bytes (train table's `payload_bytes`)."""
    return sum(counts) * (value_bytes + index_bytes)


def dense_payload_bytes(world_size: int, d: int, value_bytes: int) -> int:
    """Bytes a dense all-reduce contributes, summed over workers (one d-vector each)."""
    return world_size * d * value_bytes
