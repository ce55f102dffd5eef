"""Chunk-wise Top-k: the largest |u| within each fixed-size chunk of the flat vector.

Rule (the selection of SparseLoCo, Sarfi et al., arXiv 2508.15706, on consecutive chunks of
the flattened vector):

    chunks   c = 0, 1, ..., n_c - 1: u[c C : (c + 1) C], C = chunk_size (the last chunk is
             shorter when C does not divide d; one chunk when C >= d)
    counts   k_c = floor(k len_c / d), plus one for the r chunks with the largest remainders
             (k len_c mod d), lowest chunk first among equal remainders, r = k - sum_c floor(.):
             every count is fixed by (d, k, C) before u is seen, and sum_c k_c = k
    select   in chunk c its k_c largest |u_i|, lowest index first among ties at the cut

With d a multiple of C and rho C an integer (SparseLoCo: C = 4096, 64 per chunk) every chunk
sends exactly rho C; with C >= d the rule is exact global Top-k. Because the counts do not
depend on u, a receiver that knows (d, k, C) can read a chunk-local index of
ceil(log2 C) bits for each value when the values come chunk by chunk (`local_index_bits`):
the index traffic of SparseLoCo's 12-bit indices at C = 4096.

SparseLoCo's own chunks are 2-D tiles of each weight matrix (64 x 64 for C = 4096) and, for a
1-D tensor, runs of a divisor of its length near 64; here chunks are consecutive runs of the
flat vector and may straddle tensor boundaries (with `selection: layerwise` they run within
each tensor). A run names this in its manifest (train.outer.settings_against_papers).

Cost: one torch.topk of the k_max + 1 largest per chunk; a stable sort only of the chunks where
a tie straddles the cut. `exact` is False: the set is each chunk's exact Top-k, not global
Top-k's (they coincide only when C >= d).
"""

from __future__ import annotations

import math

import torch

from topkscope.sparsify.base import Sparsifier, check_param

SPARSELOCO_CHUNK = 4096  # 64 x 64 tiles: SparseLoCo's chunk (arXiv 2508.15706)


def chunk_counts(d: int, chunk_size: int, k: int) -> torch.Tensor:
    """k_c of every chunk (int64, n_c = ceil(d / C) entries), the rule of the module doc."""
    n_chunks = -(-d // chunk_size)
    lengths = torch.full((n_chunks,), chunk_size, dtype=torch.int64)
    lengths[-1] = d - (n_chunks - 1) * chunk_size
    exact = k * lengths                         # k len_c, exact integers
    counts, remainders = exact // d, exact % d
    short = int(k - counts.sum())
    if short:
        # largest remainder first, lowest chunk first among equals (stable sort)
        order = torch.sort(-remainders, stable=True).indices[:short]
        counts[order] += 1
    return counts


class ChunkTopK(Sparsifier):
    """Top-k within each chunk of `chunk_size` consecutive elements (see the module doc)."""

    name = "chunk-topk"
    family = "chunk_topk"
    plot_order = 15      # beside Top-k, before the approximate selectors
    exact = False        # the per-chunk sets, not global Top-k's (unless chunk_size >= d)
    fixed_count = True   # exactly k in all; each chunk exactly its k_c

    def __init__(self, chunk_size: int = SPARSELOCO_CHUNK) -> None:
        self.chunk_size = int(check_param("chunk_size", chunk_size, 1, 2**31 - 1, integer=True))

    def local_index_bits(self, d: int) -> int:
        """Bits of one chunk-local index: ceil(log2(min(C, d))), at least 1."""
        return max(1, math.ceil(math.log2(min(self.chunk_size, d))))

    def _select(self, u: torch.Tensor, k: int) -> torch.Tensor:
        d = u.numel()
        size = min(self.chunk_size, d)
        counts = chunk_counts(d, size, k).to(u.device)
        mags = u.abs()
        n_full = d // size
        parts = []
        if n_full:
            parts.append(_top_of_rows(mags[: n_full * size].view(n_full, size),
                                      counts[:n_full], 0))
        if n_full * size < d:
            rest = mags[n_full * size :].view(1, -1)
            parts.append(_top_of_rows(rest, counts[n_full:], n_full * size))
        return torch.cat(parts)

    def __repr__(self) -> str:
        return f"ChunkTopK(chunk_size={self.chunk_size})"


def _top_of_rows(rows: torch.Tensor, counts: torch.Tensor, start: int) -> torch.Tensor:
    """Flat indices of the counts[r] largest entries of each row r, lowest index first among
    ties at the cut. One torch.topk of the k_max + 1 largest per row decides the rows whose
    cut is strict (the count-th largest above the next): their set is unique. Rows where a
    tie straddles the cut are sorted in full, stably (equal magnitudes keep index order)."""
    kmax = int(counts.max())
    if kmax == 0:
        return torch.empty(0, dtype=torch.int64, device=rows.device)
    n, size = rows.shape
    take = min(kmax + 1, size)
    values, order = torch.topk(rows, take, dim=1, sorted=True)
    kth = values.gather(1, (counts - 1).clamp(min=0)[:, None])[:, 0]
    after = values.gather(1, counts.clamp(max=take - 1)[:, None])[:, 0]
    tied = (counts > 0) & (counts < size) & (kth == after)
    if bool(tied.any()):
        stable = torch.sort(rows[tied], dim=1, descending=True, stable=True).indices[:, :take]
        order[tied] = stable
    keep = torch.arange(take, device=rows.device)[None, :] < counts[:, None]
    offsets = start + torch.arange(n, device=rows.device, dtype=torch.int64)[:, None] * size
    return (order + offsets)[keep]
