"""The largest magnitudes of every row, once per vector, for all densities at once.

    delta(x, k) = ||x - TopK(x)||^2 / ||x||^2 = 1 - (sum of the k largest x_i^2) / sum x_i^2

One selection per (vector, row) at k_max = the largest k over the configured densities gives
every smaller k by prefix sums of the same sorted values. On the CPU all rows are selected
together from one thresholded pass (`threshold_tops`); a row it cannot answer exactly, and
every row of a vector on another device, gets a selection of its own (`top_magnitudes`), which
for long rows first narrows to candidates above a threshold estimated from a strided
subsample (exact: the candidates are checked to number at least k_max, else a full top-k
runs). The small per-row tables are then host numpy arrays.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from topkscope.hooks.device_sums import starts_of
from topkscope.hooks.segments import RowPlan
from topkscope.hooks.threshold_tops import eligible_rows, threshold_tops

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
    """Sorted top magnitudes of every plan row, concatenated: tops (K, T) for T = sum of k_max,
    as a host numpy array.

    Rows whose k_max is 1 come first, as one block taken from the row maxima; then every other
    row's block, in row order, each sorted descending. On the CPU the blocks come from one
    thresholded pass over each vector (`threshold_tops`, needs the rows' sums of squares:
    given as sumsq (K, R), else computed); rows it cannot answer, and vectors elsewhere, are
    selected row by row (method="rows" forces that everywhere).
    """

    def __init__(self, absx: torch.Tensor, max_abs: torch.Tensor, plan: RowPlan,
                 sumsq: torch.Tensor | np.ndarray | None = None, method: str = "auto") -> None:
        if method not in ("auto", "rows"):
            raise ValueError(f"method = {method!r}; allowed: 'auto', 'rows'")
        self.plan = plan
        self._index = _index_tables(plan)
        kmax = plan.kmax
        many = np.flatnonzero(kmax > 1)
        singles = _as_numpy(max_abs)[:, self._index["singles"]]
        fast = method == "auto" and absx.device.type == "cpu"
        if fast and sumsq is None:
            sumsq = _row_sumsq(absx, plan)
        blocks = []
        for kv in range(absx.shape[0]):
            found: dict[int, np.ndarray] = {}
            if fast:
                ab = absx[kv].contiguous().numpy()
                row_sq = _as_numpy(sumsq)[kv]
                found = threshold_tops(ab, plan, row_sq, eligible_rows(plan, row_sq))
            missing = [int(r) for r in many if int(r) not in found]
            if missing:  # selected on the vector's device, brought over in one transfer
                tops = [top_magnitudes(absx[kv : kv + 1, int(plan.starts[r]) :
                                            int(plan.starts[r] + plan.numel[r])],
                                       int(kmax[r]))[0] for r in missing]
                host = torch.cat(tops).cpu().numpy()
                cuts = np.cumsum(kmax[missing])[:-1]
                found.update(zip(missing, np.split(host, cuts)))
            parts = [singles[kv].astype(_host_dtype(absx))] + [found[int(r)] for r in many]
            blocks.append(np.concatenate(parts))
        self.tops = np.stack(blocks)  # (K, T)

    def top_sums(self) -> torch.Tensor:
        """(K, R, D) float64: sum of the k largest squares for each row and density."""
        sq = np.square(self.tops.astype(np.float64))
        sq = np.concatenate([sq, np.zeros((sq.shape[0], 1))], axis=1)  # reduceat may end at T
        pairs = self._index["prefix_pairs"]  # [start, start + k] for every (row, density)
        sums = np.add.reduceat(sq, pairs, axis=1)[:, ::2]
        return torch.from_numpy(sums.reshape(sq.shape[0], *self.plan.k.shape))

    def kth(self) -> torch.Tensor:
        """(K, R, D): the k-th largest magnitude of each row for each density."""
        return torch.from_numpy(self.tops[:, self._index["kth_pos"]])

    def count_above(self, tau: torch.Tensor | np.ndarray) -> torch.Tensor:
        """(K, R, D) int64: elements of each row strictly above tau (K, R, D); tau >= row's k-th."""
        row_id, in_prefix = self._index["row_id"], self._index["in_prefix"]
        tau = _as_numpy(tau)
        k_vecs, (rows, dens) = tau.shape[0], self.plan.k.shape
        out = np.zeros((k_vecs, rows, dens), dtype=np.int64)
        for kv in range(k_vecs):
            above = (self.tops[kv][:, None] > tau[kv][row_id]) & in_prefix  # (T, D)
            for j in range(dens):
                out[kv, :, j] = np.bincount(row_id, weights=above[:, j], minlength=rows)
        return torch.from_numpy(out)


def _as_numpy(x: torch.Tensor | np.ndarray) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def _host_dtype(x: torch.Tensor) -> np.dtype:
    return np.float64 if x.dtype == torch.float64 else np.float32


def _row_sumsq(absx: torch.Tensor, plan: RowPlan) -> np.ndarray:
    """(K, R) float64 sums of squares of every row."""
    seg = plan.segments
    sq = np.square(absx.to(torch.float64).numpy())
    per_seg = np.add.reduceat(sq, starts_of(seg.lengths), axis=1)
    cols = list(seg.named) if plan.per_layer else []
    return np.concatenate([per_seg.sum(1, keepdims=True), per_seg[:, cols]], axis=1)


def _index_tables(plan: RowPlan) -> dict[str, np.ndarray]:
    """Per-position row ids, per-density prefix masks and sum ranges over the concatenated
    tops (cached on the plan)."""
    cached = plan._device_cache.get("tops_index")
    if cached is not None:
        return cached
    kmax = plan.kmax
    order = np.concatenate([np.flatnonzero(kmax == 1), np.flatnonzero(kmax > 1)])
    block_start = np.empty(plan.rows, dtype=np.int64)
    block_start[order] = np.concatenate([[0], np.cumsum(kmax[order])[:-1]])
    row_id = np.repeat(order, kmax[order])
    pos_in_row = np.arange(int(kmax.sum())) - block_start[row_id]
    ends = block_start[:, None] + plan.k  # (R, D)
    tables = {
        "singles": np.flatnonzero(kmax == 1),
        "row_id": row_id,
        "in_prefix": pos_in_row[:, None] < plan.k[row_id],  # (T, D)
        "kth_pos": ends - 1,
        "prefix_pairs": np.stack([np.broadcast_to(block_start[:, None], ends.shape), ends],
                                 axis=-1).reshape(-1),
        "full": plan.k == plan.numel[:, None],
    }
    plan._device_cache["tops_index"] = tables
    return tables


def topk_ratio_rows(sums: torch.Tensor, sumsq: torch.Tensor, plan: RowPlan) -> torch.Tensor:
    """(K, R, D) delta = (||x||^2 - top sum) / ||x||^2; 0 where k = n; NaN where ||x|| = 0."""
    total = _as_numpy(sumsq)[:, :, None]
    with np.errstate(all="ignore"):
        ratio = np.maximum((total - _as_numpy(sums)) / total, 0.0)
    ratio = np.where(_index_tables(plan)["full"], 0.0, ratio)
    return torch.from_numpy(np.where(total == 0, np.nan, ratio))
