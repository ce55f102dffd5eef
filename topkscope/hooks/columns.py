"""The recorder's rows as plain numpy columns, ready for a PartWriter.

stats: one row per (kind, row, density) of a record, in that order. The columns that depend
only on the layout, the densities and the kinds (layer, kind, density, numel, k and the three
reference curves) are built once per combination and reused; a record adds only its numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from topkscope.hooks.moments import Moments
from topkscope.hooks.segments import RowPlan

MOMENT_COLUMNS = ("norm", "mean", "std", "skew", "excess_kurtosis", "max_abs", "zero_frac")


def _static_stats_columns(plan: RowPlan, kinds: tuple[str, ...]) -> dict[str, np.ndarray]:
    key = ("stats_columns", kinds)
    cached = plan._device_cache.get(key)
    if cached is None:
        nk, nd = len(kinds), len(plan.densities)
        nr = plan.rows
        cached = {
            "layer": np.tile(np.repeat(np.array(plan.layers, dtype=object), nd), nk),
            "kind": np.repeat(np.array(kinds, dtype=object), nr * nd),
            "density": np.tile(np.array(plan.densities), nk * nr),
            "numel": np.tile(np.repeat(plan.numel, nd), nk),
            "k": np.tile(plan.k.ravel(), nk),
            "classic_bound": np.tile(plan.classic_bound.ravel(), nk),
            "paper_bound": np.tile(plan.paper_bound.ravel(), nk),
            "gaussian_ratio": np.tile(plan.gaussian_ratio.ravel(), nk),
        }
        for col in cached.values():
            col.flags.writeable = False  # shared by every record's rows
        plan._device_cache[key] = cached
    return cached


def stats_columns(step: int, rank: int, kinds: Sequence[str], plan: RowPlan, mom: Moments,
                  ratio: np.ndarray, sel: dict[str, np.ndarray] | None,
                  sel_names: Sequence[str]) -> dict[str, np.ndarray]:
    """Columns of one record: mom (K, R) moments, ratio (K, R, D), sel {S_x: (R, D)} of u."""
    kinds = tuple(kinds)
    nk, (nr, nd) = len(kinds), plan.k.shape
    n = nk * nr * nd
    cols = dict(_static_stats_columns(plan, kinds))
    cols["step"] = np.full(n, step, dtype=np.int64)
    cols["rank"] = np.full(n, rank, dtype=np.int32)
    cols["topk_ratio"] = np.asarray(ratio, dtype=np.float64).reshape(n)
    for name in MOMENT_COLUMNS:
        cols[name] = np.repeat(getattr(mom, name).numpy().reshape(nk * nr), nd)
    cols["nonfinite"] = np.repeat(mom.nonfinite.numpy().reshape(nk * nr), nd).astype(np.int64)
    for name in sel_names:
        values = np.full(n, np.nan)
        if sel is not None:
            ku = kinds.index("u")
            values[ku * nr * nd : (ku + 1) * nr * nd] = sel[name].ravel()
        cols[name] = values
    return cols


def hist_columns(step: int, rank: int, kinds: Sequence[str], plan: RowPlan, bins: int,
                 found: list) -> dict[str, np.ndarray]:
    """Columns of one record's histograms: found = [(kind index, row, left, right, counts)]."""
    nb = bins + 2
    n = nb * len(found)
    layer = np.empty(n, dtype=object)
    kind = np.empty(n, dtype=object)
    for i, (kv, r, _, _, _) in enumerate(found):
        layer[i * nb : (i + 1) * nb] = plan.layers[r]
        kind[i * nb : (i + 1) * nb] = kinds[kv]
    return {
        "step": np.full(n, step, dtype=np.int64),
        "rank": np.full(n, rank, dtype=np.int32),
        "layer": layer,
        "kind": kind,
        "bin": np.tile(np.arange(nb, dtype=np.int32), len(found)),
        "left": np.concatenate([f[2] for f in found]),
        "right": np.concatenate([f[3] for f in found]),
        "count": np.concatenate([f[4] for f in found]).astype(np.int64),
    }
