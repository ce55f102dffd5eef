"""A worker's sparse contribution and how contributions are summed.

Worker p sends (values_p, indices_p) with values_p = u_p[indices_p]. The aggregate is

    sum_p scatter(values_p, indices_p)   (a dense d-vector; the caller divides by P)

Counts may differ between workers (approximate sparsifiers), including zero.

What a message costs (`Payload`) is counted from its encoding (`WireFormat`): b_v bits per
value (32 for float32; b for b-bit quantization), b_i bits per index (32 for int32 positions
in the flat vector; ceil(log2 C) for chunk-local indices of chunk-wise Top-k, whose per-chunk
counts the receiver knows), side information per worker (a quantizer's tables) and the
announced count. The all-gather pads every worker to the largest count m:

    values   P * ceil(m b_v / 8)     indices  P * ceil(m b_i / 8)
    side     P * side_bytes          counts   P * 8

Their sum is `bytes_sent`. The selected pairs alone, without counts, padding or side
information, are `payload_bytes`: sum_p ceil(c_p b_v / 8) + ceil(c_p b_i / 8), c_p worker p's
count.

With float32 values and int32 indices this is what the exchange puts on the wire; with
quantization or chunk-local indices it is the size of the encoded message (the exchange
itself still moves float32 and int32 between simulated or gloo workers).
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


@dataclass(frozen=True)
class WireFormat:
    """How one worker's sparse message is encoded: bits per value and per index, and bytes
    of side information per exchange (a quantizer's tables)."""

    value_bits: int = 32
    index_bits: int = 32
    side_bytes: int = 0


@dataclass(frozen=True)
class Payload:
    """Bytes of one exchange over all workers, by part (see the module docstring), and
    `selected`: the selected (value, index) pairs alone as encoded, without the counts, the
    padding or the side information (the tables' `payload_bytes`)."""

    values: int = 0
    indices: int = 0
    side: int = 0
    counts: int = 0
    selected: int = 0

    @property
    def total(self) -> int:
        """Bytes on the wire (the tables' `bytes_sent`): every part, padding included."""
        return self.values + self.indices + self.side + self.counts

    def columns(self) -> dict[str, int]:
        """The wire bytes by part: bytes_values, bytes_indices, bytes_quantization,
        bytes_counts (outer.parquet)."""
        return {"bytes_values": self.values, "bytes_indices": self.indices,
                "bytes_quantization": self.side, "bytes_counts": self.counts}


def packed_bytes(count: int, bits: int) -> int:
    """Bytes of `count` fields of `bits` bits each, packed back to back."""
    return -(-count * bits // 8)


def sparse_payload(counts: list[int], fmt: WireFormat) -> Payload:
    """The variable-count all-gather's bytes, summed over workers: each worker announces its
    count (COUNT_BYTES), then max(counts) encoded (value, index) pairs (a worker that selected
    fewer is padded to the largest count, as a fixed-size all-gather needs), then its side
    information; `selected` counts each worker's own pairs, unpadded."""
    padded, P = (max(counts) if counts else 0), len(counts)
    selected = sum(packed_bytes(c, fmt.value_bits) + packed_bytes(c, fmt.index_bits)
                   for c in counts)
    return Payload(P * packed_bytes(padded, fmt.value_bits),
                   P * packed_bytes(padded, fmt.index_bits), P * fmt.side_bytes,
                   P * COUNT_BYTES, selected)


def sparse_payload_bytes(counts: list[int], value_bytes: int, index_bytes: int) -> int:
    """Bytes the variable-count all-gather of plain (value, index) pairs puts on the wire,
    summed over workers (train table's `bytes_sent`): sparse_payload's total with value_bytes
    and index_bytes per pair."""
    return sparse_payload(counts, WireFormat(8 * value_bytes, 8 * index_bytes)).total


def selected_payload_bytes(counts: list[int], value_bytes: int, index_bytes: int) -> int:
    """Bytes of the plain (value, index) pairs the workers selected, summed over workers,
    without the counts or the padding of sparse_payload_bytes (train table's
    `payload_bytes`): sparse_payload's `selected`."""
    return sparse_payload(counts, WireFormat(8 * value_bytes, 8 * index_bytes)).selected


def dense_payload_bytes(world_size: int, d: int, value_bytes: int) -> int:
    """Bytes a dense all-reduce contributes, summed over workers (one d-vector each)."""
    return world_size * d * value_bytes


def dense_payload(world_size: int, d: int, value_bytes: int) -> Payload:
    """dense_payload_bytes as a Payload: values only, every one of them selected."""
    nbytes = dense_payload_bytes(world_size, d, value_bytes)
    return Payload(values=nbytes, selected=nbytes)
