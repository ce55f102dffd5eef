"""Top-k of every row, once per vector: the exact contraction and the sparsifiers' recall.

The largest magnitudes of every row, for all densities at once (`topk_ratio_rows`):

    delta(x, k) = ||x - TopK(x)||^2 / ||x||^2 = 1 - (sum of the k largest x_i^2) / sum x_i^2

One selection per (vector, row) at k_max = the largest k over the configured densities gives
every smaller k from the same sorted values (the kernel's tail engine `tail_sums`); delta itself is the kernel's
(`topkscope.kernel.delta_from_kept`). On the CPU all rows are selected together from one
thresholded pass (`threshold_tops`, below); a row it cannot answer exactly, and every row of a
vector on another device, gets a selection of its own (the threshold-then-verify engine
`topkscope.sparsify.engine.top_values`, exact: on a host row's numpy view, else through
`top_magnitudes`). The small per-row tables are then host
numpy arrays. This many-rows pass stays here, not in the kernel: it answers every row of a
vector and every density from one pass, with the recorder's row plan.

The k_max largest magnitudes of many rows at once, from one pass over the whole vector
(`threshold_tops`). For each row r (the whole model or a layer: n_r elements, root-mean-square q_r, target k_r)
a Gaussian guess of its k_r-th largest magnitude (`topkscope.sparsify.engine.gaussian_threshold`),

    tau_r = q_r * Phi^{-1}(1 - k_r / (2 n_r))        (|x| > tau_r has mass k_r/n_r if x ~ N(0, q^2))

and for the whole model, when its layers' rows cover it, the lower of that and the guess of a
mixture of Gaussian layers, the largest t with sum_s n_s erfc(t / (q_s sqrt 2)) >= k_0
(`_mixture_threshold`: a model whose few large layers set q, as ResNet-20's, would otherwise
leave fewer than k_0 candidates and need a selection of its own)

marks candidates |x_i| >= tau_r in one comparison over the vector (each element against its
own layer's tau, or the whole model's if lower); the candidates of a layer are a contiguous run
of them, and a partition of each run at k_r, then a sort of those k_r alone, gives every
layer's top block. The result is exact: a row is answered only when its candidates number at
least k_r (the kernel's accept step `verified`; for the whole model `verified_candidates`: all
elements at or above the threshold are candidates, so its top k_r are among them); rows with
too few are returned as misses and selected directly by the caller. Real gradients have heavier tails than
the Gaussian, so misses are rare and the candidates number a few times k_r.

How approximate sparsifiers would do on the recorded u, without touching training
(`selection_rows`). For an approximate sparsifier S selecting the index set I from a row x at target count k:

    S_count  = |I|
    S_ratio  = ||x - x_I||^2 / ||x||^2        (x_I keeps x on I, zero elsewhere)
    S_recall = |I intersect T_k| / k          T_k = the exact top-k set
    S_ratio_vs_topk = S_ratio / topk_ratio    (1: as tight as the exact Top-k)

With a quantizer (the recorder's `quantize`), the sent values are Q(x_I) rather than x_I:

    S_quantized_ratio    = ||x - Q(x_I)||^2 / ||x||^2 = (||x||^2 - ||x_I||^2 + ||x_I - Q(x_I)||^2)
                           / ||x||^2, Q per parameter tensor (the row's segments)
    topk_quantized_ratio = the same for the exact top-k set (`quantized_topk_rows`)

S_ratio and S_recall are the kernel's (`delta_from_kept`, `recall_given_kth`: ties at the k-th
magnitude counted as favourably as T_k allows), from the row's sum of squares and the k-th
largest magnitudes found above.

The recorder's own sparsifier instances run under a forked random state (torch, numpy, and
Python's `random` are restored afterwards), so recording never changes what training draws.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import numpy as np
import torch
from scipy import special

from topkscope import kernel
from topkscope.columns import selector_columns
from topkscope.hooks.power_sums import starts_of
from topkscope.hooks.rows import RowPlan
from topkscope.schema import column_prefix
from topkscope.sparsify import Sparsifier
from topkscope.sparsify.engine import (
    descending_top,
    gaussian_threshold,
    top_k_indices,
    top_values,
)
from topkscope.sparsify.quantize import Quantizer

_F64 = torch.float64
_ROW_LOOP_MIN_N = 1 << 12     # above this, rows are selected one at a time


def top_magnitudes(a: torch.Tensor, kmax: int) -> torch.Tensor:
    """The kmax largest values of each row of a (K, n) of magnitudes, sorted descending."""
    n = a.shape[-1]
    if not 1 <= kmax <= n:
        raise ValueError(f"kmax = {kmax} is outside the allowed range [1, n = {n}]")
    if n < _ROW_LOOP_MIN_N:
        return torch.topk(a, kmax, dim=-1, sorted=True).values
    # row by row on 1-D views: CPU top-k over a long 2-D row is slower than over 1-D
    return torch.stack([top_values(row, kmax) for row in a])


class RowTops:
    """Sorted top magnitudes of every plan row, concatenated: tops (K, T) for T = sum of k_max,
    as a host numpy array.

    Rows whose k_max is 1 come first, as one block taken from the row maxima; then every other
    row's block, in row order, each sorted descending. On the CPU the blocks come from one
    thresholded pass over each vector (`threshold_tops`, needs the rows' sums of squares:
    given as sumsq (K, R), else computed); rows it cannot answer, and vectors elsewhere, are
    selected row by row (the engine's `top_values`: in numpy for a host vector, whose
    candidates numpy gathers and sorts faster than torch; method="rows" forces torch's row
    selection everywhere).
    """

    def __init__(self, absx: torch.Tensor, max_abs: torch.Tensor, plan: RowPlan,
                 sumsq: torch.Tensor | np.ndarray | None = None, method: str = "auto") -> None:
        if method not in ("auto", "rows"):
            raise ValueError(f"method = {method!r}; allowed: 'auto', 'rows'")
        self.plan = plan
        self._index = _index_tables(plan)
        kmax = plan.kmax
        many = np.flatnonzero(kmax > 1)
        singles = kernel.to_numpy(max_abs)[:, self._index["singles"]]
        fast = method == "auto" and absx.device.type == "cpu"
        if fast and sumsq is None:
            sumsq = _row_sumsq(absx, plan)
        blocks = []
        for kv in range(absx.shape[0]):
            found: dict[int, np.ndarray] = {}
            if fast:
                ab = absx[kv].contiguous().numpy()
                row_sq = kernel.to_numpy(sumsq)[kv]
                found = threshold_tops(ab, plan, row_sq, eligible_rows(plan, row_sq))
            missing = [int(r) for r in many if int(r) not in found]
            if fast:  # host rows with too few candidates: the engine, in numpy
                found.update((r, top_values(ab[int(plan.starts[r]) :
                                               int(plan.starts[r] + plan.numel[r])],
                                            int(kmax[r]))) for r in missing)
            elif missing:  # selected on the vector's device, brought over in one transfer
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
        """(K, R, D) float64: sum of the k largest squares for each row and density: the
        row's block minus what Top-k leaves of it (the kernel's tail engine, `tail_sums`, one
        call per vector over all row blocks)."""
        plan = self.plan
        order = self._index["laid_out"]  # rows with a block, in the order of the blocks
        ks = np.concatenate([np.zeros((plan.rows, 1), dtype=np.int64), plan.k], axis=1)[order]
        out = np.zeros((self.tops.shape[0], *plan.k.shape))  # k_max = 0: nothing kept
        for kv, tops in enumerate(self.tops):
            tails = kernel.tail_sums(tops, ks, starts=self._index["block_start"][order])
            out[kv, order] = tails[:, :1] - tails[:, 1:]
        return torch.from_numpy(out)

    def hill(self) -> np.ndarray:
        """(K, R, D) float64: the Hill tail index of each row's k largest magnitudes for each
        density (the kernel's `hill`, m = k - 1 over the k-th; NaN where k - 1 < 10)."""
        plan = self.plan
        order = self._index["laid_out"]
        out = np.full((self.tops.shape[0], *plan.k.shape), np.nan)
        for kv, tops in enumerate(self.tops):
            out[kv, order] = kernel.hill(tops, plan.k[order],
                                         starts=self._index["block_start"][order])
        return out

    def kth(self) -> torch.Tensor:
        """(K, R, D): the k-th largest magnitude of each row for each density."""
        return torch.from_numpy(self.tops[:, self._index["kth_pos"]])

    def count_above(self, tau: torch.Tensor | np.ndarray) -> torch.Tensor:
        """(K, R, D) int64: elements of each row strictly above tau (K, R, D); tau >= row's k-th."""
        row_id, in_prefix = self._index["row_id"], self._index["in_prefix"]
        tau = kernel.to_numpy(tau)
        k_vecs, (rows, dens) = tau.shape[0], self.plan.k.shape
        out = np.zeros((k_vecs, rows, dens), dtype=np.int64)
        for kv in range(k_vecs):
            above = (self.tops[kv][:, None] > tau[kv][row_id]) & in_prefix  # (T, D)
            for j in range(dens):
                out[kv, :, j] = np.bincount(row_id, weights=above[:, j], minlength=rows)
        return torch.from_numpy(out)


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
        "block_start": block_start,
        "laid_out": order,
        "full": plan.k == plan.numel[:, None],
    }
    plan._device_cache["tops_index"] = tables
    return tables


def topk_ratio_rows(sums: torch.Tensor, sumsq: torch.Tensor, plan: RowPlan) -> torch.Tensor:
    """(K, R, D) delta = (||x||^2 - top sum) / ||x||^2 (the kernel's `delta_from_kept`); 0 where
    k = n; NaN where ||x|| = 0."""
    return torch.from_numpy(kernel.delta_from_kept(
        kernel.to_numpy(sums), kernel.to_numpy(sumsq)[:, :, None], _index_tables(plan)["full"]))


_DENSE_SHARE = 8  # rows with k_max > n / 8 are selected directly (most would be candidates)


def _z(plan: RowPlan) -> np.ndarray:
    """(R,) Phi^{-1}(1 - kmax / (2 n)) per row, 0 where kmax >= n (cached on the plan)."""
    cached = plan._device_cache.get("tops_z")
    if cached is None:
        tails = np.array([k / n if n else 1.0 for k, n in zip(plan.kmax, plan.numel)])
        cached = plan._device_cache["tops_z"] = gaussian_threshold(1.0, tails)
    return cached


def _segment_table(plan: RowPlan) -> tuple[np.ndarray, np.ndarray]:
    """(starts, lengths) of the plan's segments as arrays (cached on the plan)."""
    cached = plan._device_cache.get("segment_arrays")
    if cached is None:
        lengths = np.asarray(plan.segments.lengths, dtype=np.int64)
        cached = plan._device_cache["segment_arrays"] = (starts_of(plan.segments.lengths),
                                                         lengths)
    return cached


def eligible_rows(plan: RowPlan, sumsq: np.ndarray) -> np.ndarray:
    """Rows this method should try: k_max > 1, not dense, finite non-zero spread."""
    kmax, n = plan.kmax, plan.numel
    ok = (kmax > 1) & (kmax * _DENSE_SHARE <= n) & np.isfinite(sumsq) & (sumsq > 0)
    return np.flatnonzero(ok)


_GRID = np.geomspace(1e-3, 1e3, 241)  # thresholds over the largest layer RMS tried (x 1.06)


def _mixture_threshold(plan: RowPlan, sumsq: np.ndarray) -> float:
    """A guess of the whole model's k_0-th largest magnitude when its layers differ in scale:
    the largest t at which Gaussian layers of their own root-mean-square q_s would leave at
    least k_0 magnitudes above it, sum_s n_s erfc(t / (q_s sqrt 2)) >= k_0 (a single Gaussian
    of the whole model's q lies far too high when a few large layers set q). inf when the
    layer rows do not cover the vector (no per-layer rows, or gaps) or say nothing."""
    covered = plan._device_cache.get("layers_cover")
    if covered is None:
        covered = plan._device_cache["layers_cover"] = plan.per_layer and all(
            name is not None for name in plan.segments.names)
    if not covered or plan.rows < 3:
        return math.inf
    n = plan.numel[1:].astype(np.float64)
    q = np.sqrt(sumsq[1:] / n)
    q = np.where(np.isfinite(q), q, 0.0)
    top = q.max()
    if not top > 0:
        return math.inf
    grid = top * _GRID
    scale = np.maximum(q, 1e-300) * math.sqrt(2.0)
    k0 = plan.kmax[0]
    # sum_s n_s erfc(t / scale_s) does not increase along the grid, so the grid points that
    # leave k_0 are a prefix: a bisection finds its last one in 8 evaluations, not 241
    lo, hi = -1, grid.size  # expected(lo) >= k_0 > expected(hi), the ends virtual
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if (n * special.erfc(grid[mid] / scale)).sum() >= k0:
            lo = mid
        else:
            hi = mid
    return float(grid[lo]) if lo >= 0 else math.inf


def threshold_tops(ab: np.ndarray, plan: RowPlan, sumsq: np.ndarray,
                   rows: np.ndarray) -> dict[int, np.ndarray]:
    """{row: its k_max largest values of ab (d,), descending} for the rows answered exactly.

    sumsq (R,) are the rows' sums of squares; rows lists the rows to try (see eligible_rows).
    Rows missing from the answer had too few candidates.

    Each element is compared with its segment's threshold t_s = min(tau_r, tau_0) (tau_r of
    the segment's layer row, tau_0 of the whole model; inf for a segment of neither), so the
    candidates of segment s, a contiguous run of the candidate indices, are all its elements
    >= t_s. A layer row is accepted when they number at least k_r (the kernel's `verified`:
    then its k_r largest are among them), the whole model when at least k_0 candidates reach
    tau_0 (`verified_candidates`). Each accepted row's block is partitioned at k_r and only
    those k_r are sorted.
    """
    out: dict[int, np.ndarray] = {}
    if not len(rows):
        return out
    seg_starts, seg_lengths = _segment_table(plan)
    kmax, n = plan.kmax, plan.numel
    tau = (np.sqrt(sumsq / n) * _z(plan)).astype(ab.dtype)  # (R,), in ab's precision
    rows = np.asarray(rows)
    layer_rows = rows[rows > 0]
    whole = bool((rows == 0).any())
    inf = np.array(np.inf, dtype=ab.dtype)
    global_tau = tau[0] if whole else inf
    if whole:
        global_tau = min(global_tau, ab.dtype.type(_mixture_threshold(plan, sumsq)))

    if layer_rows.size:
        layer_seg = np.asarray(plan.segments.named)[layer_rows - 1]
        seg_tau = np.full(seg_lengths.size, inf, dtype=ab.dtype)
        seg_tau[layer_seg] = tau[layer_rows]
        np.minimum(seg_tau, global_tau, out=seg_tau)
        cand = np.flatnonzero(ab >= np.repeat(seg_tau, seg_lengths))
    else:
        cand = np.flatnonzero(ab >= global_tau)
    mag = ab[cand]

    if whole:
        k0 = int(kmax[0])
        top = kernel.verified_candidates(mag, k0, global_tau)
        if top is not None:
            out[0] = descending_top(top, k0)
    if layer_rows.size:
        bounds = np.searchsorted(cand, np.append(seg_starts, ab.size))
        lo, hi = bounds[layer_seg], bounds[layer_seg + 1]
        ks = kmax[layer_rows]
        accepted = kernel.verified(hi - lo, ks)
        for r, a, b, k, ok in zip(layer_rows.tolist(), lo.tolist(), hi.tolist(), ks.tolist(),
                                  accepted.tolist()):
            if ok:
                out[r] = descending_top(mag[a:b], k)
    return out




@contextmanager
def isolated_rng(device: torch.device) -> Iterator[None]:
    """Run a block without consuming any global random state (torch, numpy, random)."""
    py_state = random.getstate()
    np_state = np.random.get_state()
    devices = [device] if device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)


class RowStates:
    """The recorder's instances of one stateful selector (class attribute `stateful`, e.g.
    tail-k's previous threshold, sidco's stage count): one per (rank, row, density), made by
    `make()`, so each row's state follows that row's sequence of recorded u alone.

    The recorder sees u only at its `sparsifier_schedule` steps: the state then carries from
    one recorded step to the next (steps in between are never seen), which is what the selector
    would do if it ran only at those steps; with a schedule of every step it follows training's
    u sequence. The state is not saved in checkpoints: a resumed recorder starts each row afresh
    (tail-k: its first-call sample threshold).
    """

    def __init__(self, make) -> None:
        self._make = make
        self._by_key: dict[tuple, Sparsifier] = {}

    def at_row(self, key: tuple) -> Sparsifier:
        if key not in self._by_key:
            self._by_key[key] = self._make()
        return self._by_key[key]


def quantized_ratio(x: torch.Tensor, idx: torch.Tensor, total: float, quantizer: Quantizer,
                    segment_starts: torch.Tensor) -> float:
    """||x - Q(x_I)||^2 / ||x||^2 (float64) for the indices idx of a row x whose parameter
    tensors start at segment_starts (row-relative, ascending; the row's first at 0)."""
    if total == 0 or not math.isfinite(total):
        return math.nan
    vals = x[idx]
    groups = torch.bucketize(idx, segment_starts, right=True) - 1
    sent = quantizer.quantize(vals, groups, segment_starts.numel()).values
    v64 = vals.to(_F64)
    lost = total - float(v64.square().sum()) + float((v64 - sent.to(_F64)).square().sum())
    return max(0.0, lost) / total


def row_segment_starts(plan: RowPlan, r: int, device: torch.device) -> torch.Tensor:
    """The starts of the parameter tensors within row r, relative to the row (row 0: every
    segment of the vector; a layer row: its own tensor alone)."""
    if r > 0:
        return torch.zeros(1, dtype=torch.int64, device=device)
    return torch.tensor(plan.segments.starts, dtype=torch.int64, device=device)


def quantized_topk_rows(x: torch.Tensor, plan: RowPlan, sumsq: torch.Tensor,
                        quantizer: Quantizer) -> np.ndarray:
    """(R, D) topk_quantized_ratio of a vector x (d,): the exact top-k set of every row and
    density (sparsify.engine.top_k_indices), its values quantized per parameter tensor."""
    rows, dens = plan.k.shape
    out = np.full((rows, dens), np.nan)
    total = kernel.to_numpy(sumsq).tolist()
    for r in range(rows):
        a, n = int(plan.starts[r]), int(plan.numel[r])
        row = x[a : a + n]
        starts = row_segment_starts(plan, r, x.device)
        mag = row.abs()
        for j in range(dens):
            idx = top_k_indices(mag, int(plan.k[r, j]))
            out[r, j] = quantized_ratio(row, idx, total[r], quantizer, starts)
    return out


def selection_rows(
    u: torch.Tensor,
    plan: RowPlan,
    sumsq: torch.Tensor,
    kth: torch.Tensor,
    n_above: torch.Tensor,
    sparsifiers: Mapping[str, Sparsifier | RowStates],
    topk_ratio: np.ndarray | torch.Tensor | None = None,
    per_layer: bool = True,
    quantizer: Quantizer | None = None,
) -> dict[str, np.ndarray]:
    """Columns {S_<suffix>} (topkscope.columns.SELECTOR_COLUMNS) of shape (R, D) for u (d,).

    sumsq (R,), kth (R, D) and n_above (R, D) are u's row sums of squares, k-th largest
    magnitudes and counts strictly above them; topk_ratio (R, D) u's exact Top-k contraction
    (S_ratio_vs_topk is NaN without it). A `RowStates` value gives each (row, density) its own
    instance (keyed by layer name, numel and density). A sparsifier that refuses a row
    (ValueError, e.g. an all-zero row) leaves NaN there. per_layer=False evaluates row 0 (the
    whole model) alone and leaves the layers' rows NaN; row 0's values are the same either way
    (it is evaluated first, and each (row, density) of a stateful selector has its own state).
    S_quantized_ratio is NaN without a quantizer.
    """
    rows, dens = plan.k.shape
    out = {name: np.full((rows, dens), np.nan) for name in selector_columns(
        [column_prefix(n) for n in sparsifiers])}
    total = sumsq.tolist()
    kth_l, above_l = kth.tolist(), n_above.tolist()
    with torch.no_grad(), isolated_rng(u.device):
        for r in range(rows if per_layer else 1):
            a, n = int(plan.starts[r]), int(plan.numel[r])
            x = u[a : a + n]
            starts = row_segment_starts(plan, r, u.device) if quantizer is not None else None
            for j in range(dens):
                k = int(plan.k[r, j])
                for name, given in sparsifiers.items():
                    sparsifier = given.at_row((plan.layers[r], n, float(plan.densities[j]))) \
                        if isinstance(given, RowStates) else given
                    try:
                        idx = sparsifier.select(x, k)
                    except ValueError:
                        continue
                    vals = x[idx]
                    kept = float(vals.to(_F64).square().sum())
                    p = column_prefix(name)
                    out[f"{p}_count"][r, j] = idx.numel()
                    out[f"{p}_ratio"][r, j] = kernel.delta_from_kept(kept, total[r])
                    out[f"{p}_recall"][r, j] = kernel.recall_given_kth(
                        vals.abs(), kth_l[r][j], above_l[r][j], k)
                    if quantizer is not None and idx.numel():
                        out[f"{p}_quantized_ratio"][r, j] = quantized_ratio(
                            x, idx, total[r], quantizer, starts)
    if topk_ratio is not None:
        exact = kernel.to_numpy(topk_ratio).astype(np.float64)
        with np.errstate(all="ignore"):
            for name in sparsifiers:
                p = column_prefix(name)
                rel = out[f"{p}_ratio"] / exact
                out[f"{p}_ratio_vs_topk"] = np.where(exact > 0, rel, np.nan)
    return out
