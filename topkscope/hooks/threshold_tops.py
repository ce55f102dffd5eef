"""The k_max largest magnitudes of many rows at once, from one pass over the whole vector.

For each row r (the whole model or a layer: n_r elements, root-mean-square q_r, target k_r)
a Gaussian guess of its k_r-th largest magnitude,

    tau_r = q_r * Phi^{-1}(1 - k_r / (2 n_r))        (|x| > tau_r has mass k_r/n_r if x ~ N(0, q^2))

marks candidates |x_i| >= tau_r in one comparison over the vector (each element against its
own layer's tau, or the whole model's if lower), and one sort of the few candidates by
(layer, magnitude descending) gives every layer's top block. The result is exact: a row is
answered only when its candidates number at least k_r (all elements at or above tau_r are
candidates, so its top k_r are among them); rows with too few are returned as misses and
selected directly by the caller. Real gradients have heavier tails than the Gaussian, so
misses are rare and the candidates number a few times k_r.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

from topkscope.hooks.device_sums import starts_of
from topkscope.hooks.segments import RowPlan

_DENSE_SHARE = 8  # rows with k_max > n / 8 are selected directly (most would be candidates)


def _z(plan: RowPlan) -> np.ndarray:
    """(R,) Phi^{-1}(1 - kmax / (2 n)) per row (cached on the plan)."""
    cached = plan._device_cache.get("tops_z")
    if cached is None:
        inv = NormalDist().inv_cdf
        cached = np.array([inv(1.0 - min(0.5, k / (2.0 * n))) if n else 0.0
                           for k, n in zip(plan.kmax, plan.numel)])
        plan._device_cache["tops_z"] = cached
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


def _sorted_by_segment(mag: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """mag ordered by segment ascending, then magnitude descending (exact, ties kept)."""
    if mag.dtype == np.float32:  # one int64 sort: segment in the high bits, ~bits in the low
        key = (seg.astype(np.int64) << 32) | (0x7FFFFFFF - mag.view(np.int32)).astype(np.int64)
        key.sort(kind="stable")  # already grouped by segment: timsort uses the runs
        return (0x7FFFFFFF - (key & 0xFFFFFFFF)).astype(np.int32).view(np.float32)
    return mag[np.lexsort((-mag, seg))]


def threshold_tops(ab: np.ndarray, plan: RowPlan, sumsq: np.ndarray,
                   rows: np.ndarray) -> dict[int, np.ndarray]:
    """{row: its k_max largest values of ab (d,), descending} for the rows answered exactly.

    sumsq (R,) are the rows' sums of squares; rows lists the rows to try (see eligible_rows).
    Rows missing from the answer had too few candidates.
    """
    out: dict[int, np.ndarray] = {}
    if not len(rows):
        return out
    seg = plan.segments
    seg_starts, seg_lengths = _segment_table(plan)
    kmax, n = plan.kmax, plan.numel
    tau = (np.sqrt(sumsq / n) * _z(plan)).astype(ab.dtype)  # (R,), in ab's precision
    layer_rows = [int(r) for r in rows if r > 0]
    named = seg.named
    seg_of_row = {r: named[r - 1] for r in layer_rows}
    whole = 0 in rows
    inf = np.array(np.inf, dtype=ab.dtype)
    global_tau = tau[0] if whole else inf

    if layer_rows:
        seg_tau = np.full(len(seg.lengths), inf, dtype=ab.dtype)
        for r in layer_rows:
            seg_tau[seg_of_row[r]] = tau[r]
        elem_tau = np.repeat(np.minimum(seg_tau, global_tau), seg_lengths)
        cand = np.flatnonzero(ab >= elem_tau)
    else:
        cand = np.flatnonzero(ab >= global_tau)
    mag = ab[cand]

    if whole:
        k0 = int(kmax[0])
        top = mag[mag >= global_tau]
        if top.size >= k0:
            top = np.partition(top, top.size - k0)[top.size - k0 :]
            out[0] = np.sort(top)[::-1].copy()
    if layer_rows:
        bounds = np.searchsorted(cand, seg_starts)
        seg_c = np.repeat(np.arange(len(seg.lengths)), np.diff(bounds, append=cand.size))
        keep = mag >= seg_tau[seg_c]
        lseg = seg_c[keep]
        counts = np.bincount(lseg, minlength=len(seg.lengths))
        first = np.concatenate([[0], np.cumsum(counts)[:-1]])
        ordered = _sorted_by_segment(mag[keep], lseg)
        for r in layer_rows:
            s, k = seg_of_row[r], int(kmax[r])
            if counts[s] >= k:
                out[r] = ordered[first[s] : first[s] + k]
    return out
