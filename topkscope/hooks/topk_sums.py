"""The largest magnitudes of every row, once per vector, for all densities at once.

    delta(x, k) = ||x - TopK(x)||^2 / ||x||^2 = 1 - (sum of the k largest x_i^2) / sum x_i^2

One selection per (vector, row) at k_max = the largest k over the configured densities gives
every smaller k by prefix sums of the same sorted values. For long rows the selection first
narrows to candidates above a threshold estimated from a strided subsample; the result is
exact because the candidates are checked to number at least k_max (else a full top-k runs).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from topkscope.hooks.segments import RowPlan

_F64 = torch.float64
_CANDIDATE_MIN_N = 1 << 14    # below this a plain torch.topk is as fast
_ROW_LOOP_MIN_N = 1 << 12     # above this, rows are selected one at a time
_SUBSAMPLE_TOP = 64           # expected top elements that land in the subsample


def top_magnitudes(a: torch.Tensor, kmax: int) -> torch.Tensor:
    """The kmax largest values of each row of a (K, n) of magnitudes, sorted descending."""
    n = a.shape[-1]
    if not 1 <= kmax <= n:
        raise ValueError(f"kmax = {kmax} is outside the allowed range [1, n = {n}]")
    if n < _ROW_LOOP_MIN_N:
        return torch.topk(a, kmax, dim=-1, sorted=True).values
    # row by row on 1-D views: CPU top-k over a long 2-D row is slower than over 1-D
    return torch.stack([_top_of_row(row, kmax) for row in a])


def _top_of_row(row: torch.Tensor, kmax: int) -> torch.Tensor:
    if row.numel() >= _CANDIDATE_MIN_N and 8 * kmax <= row.numel():
        return _top_by_candidates(row, kmax)
    return torch.topk(row, kmax, sorted=True).values


def _top_by_candidates(row: torch.Tensor, kmax: int) -> torch.Tensor:
    stride = kmax // _SUBSAMPLE_TOP
    if stride < 2:  # small k: a direct selection is cheapest
        return torch.topk(row, kmax, sorted=True).values
    sub = row[::stride]
    expect = kmax / stride  # how many of the top kmax a stride sample holds, on average
    j = min(sub.numel(), int(expect * 1.1 + 4.0 * math.sqrt(expect) + 2))
    tau = torch.topk(sub, j, sorted=False).values.min()
    cand = row[row >= tau]
    if cand.numel() < kmax:  # the estimate was too high: fall back to the exact full selection
        return torch.topk(row, kmax, sorted=True).values
    return torch.topk(cand, kmax, sorted=True).values


class RowTops:
    """Sorted top magnitudes of every plan row, concatenated: tops (K, T) for T = sum of k_max.

    Rows whose k_max is 1 come first, as one block taken from the row maxima; then every other
    row's block, in row order, each sorted descending.
    """

    def __init__(self, absx: torch.Tensor, max_abs: torch.Tensor, plan: RowPlan) -> None:
        self.plan = plan
        self._index = _index_tables(plan, absx.device)
        singles = self._index["singles"]
        parts = [max_abs[:, singles].to(absx.dtype)] if singles.numel() else []
        kmax = plan.kmax
        for r in np.flatnonzero(kmax > 1):
            a = int(plan.starts[r])
            parts.append(top_magnitudes(absx[:, a : a + int(plan.numel[r])], int(kmax[r])))
        self.tops = torch.cat(parts, dim=1)  # (K, T)

    def top_sums(self) -> torch.Tensor:
        """(K, R, D) float64: sum of the k largest squares for each row and density."""
        row_id, in_prefix = self._index["row_id"], self._index["in_prefix"]
        sq = self.tops.to(_F64).square()  # (K, T)
        k_vecs = sq.shape[0]
        masked = sq[:, None, :] * in_prefix  # (K, D, T)
        out = torch.zeros((k_vecs, in_prefix.shape[0], self.plan.rows), dtype=_F64,
                          device=sq.device)
        out.index_add_(2, row_id, masked)
        return out.transpose(1, 2)  # (K, R, D)

    def kth(self) -> torch.Tensor:
        """(K, R, D): the k-th largest magnitude of each row for each density."""
        return self.tops[:, self._index["kth_pos"]]

    def count_above(self, tau: torch.Tensor) -> torch.Tensor:
        """(K, R, D) int64: elements of each row strictly above tau (K, R, D); tau >= row's k-th."""
        row_id, in_prefix = self._index["row_id"], self._index["in_prefix"]
        per_pos = tau.transpose(1, 2)[:, :, row_id]  # (K, D, T): the threshold of each position
        above = (self.tops[:, None, :] > per_pos) & in_prefix.bool()
        out = torch.zeros((above.shape[0], above.shape[1], self.plan.rows), dtype=torch.int64,
                          device=above.device)
        out.index_add_(2, row_id, above.to(torch.int64))
        return out.transpose(1, 2)


def _index_tables(plan: RowPlan, device: torch.device) -> dict[str, torch.Tensor]:
    """Per-position row ids and per-density prefix masks over the concatenated tops (cached)."""
    cached = plan._device_cache.get(("tops", str(device)))
    if cached is not None:
        return cached
    kmax = plan.kmax
    order = np.concatenate([np.flatnonzero(kmax == 1), np.flatnonzero(kmax > 1)])
    block_start = np.empty(plan.rows, dtype=np.int64)
    block_start[order] = np.concatenate([[0], np.cumsum(kmax[order])[:-1]])
    row_id = np.repeat(order, kmax[order])
    pos_in_row = np.arange(int(kmax.sum())) - block_start[row_id]
    in_prefix = (pos_in_row[None, :] < plan.k.T[:, row_id]).astype(np.float64)  # (D, T)
    kth_pos = block_start[:, None] + plan.k - 1  # (R, D)
    tables = {
        "singles": torch.as_tensor(np.flatnonzero(kmax == 1), dtype=torch.int64, device=device),
        "row_id": torch.as_tensor(row_id, dtype=torch.int64, device=device),
        "in_prefix": torch.as_tensor(in_prefix, dtype=_F64, device=device),
        "kth_pos": torch.as_tensor(kth_pos, dtype=torch.int64, device=device),
        "full": torch.as_tensor(plan.k == plan.numel[:, None], device=device),
    }
    plan._device_cache[("tops", str(device))] = tables
    return tables


def topk_ratio_rows(sums: torch.Tensor, sumsq: torch.Tensor, plan: RowPlan) -> torch.Tensor:
    """(K, R, D) delta = (||x||^2 - top sum) / ||x||^2; 0 where k = n; NaN where ||x|| = 0."""
    total = sumsq[:, :, None]
    ratio = ((total - sums) / total).clamp_min(0.0)
    full = _index_tables(plan, ratio.device)["full"]
    ratio = torch.where(full, torch.zeros_like(ratio), ratio)
    return torch.where(total == 0, torch.full_like(ratio, float("nan")), ratio)
