"""The units of claim `fitted_value` (topkscope.claims.distribution): does the Top-k contraction
the fitted distribution predicts come closer to the measured one than the Gaussian value?

On a snapshot of u (whole model), fits.compare gives the maximum-likelihood generalised-normal
shape beta of the non-zero entries and counts the exact zeros apart; with z = zeros / d,

    delta_fit = gennorm_ratio(k, d, beta, z)   (topkscope.bounds: P(3/beta, Q^-1(1/beta, rho/(1-z))))
    delta_gau = gaussian_ratio(k, d)          = 1 - rho - 2 t phi(t)

A unit is (snapshot, density): the densities the recorder measured at that step, delta the
measured Top-k contraction of the same snapshot (contraction.analyze). Its errors are stated on
the scale of the energy Top-k keeps, the gap 1 - delta:

    fit_error = |delta - delta_fit| / (1 - delta),    gaussian_error = |delta - delta_gau| / (1 - delta)

The claim, per condition: median gaussian_error - median fit_error > 0 (the fitted family comes
closer). Its 95% interval is a cluster bootstrap over steps (`cluster_bootstrap`: every unit of a
resampled (run, step) comes with it, so densities and workers of one step are never treated as
independent). holds when the interval lies above 0, fails below 0, inconclusive when it contains
0; insufficient-data with fewer than criteria.MIN_UNITS steps. The recorder's per-step stats hold
no fitted beta (only skew, excess kurtosis and zero_frac), so the units are the snapshots.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from topkscope import validate
from topkscope.bounds import gennorm_ratio

N_BOOT = 2000
BOOT_SEED = 0
UNIT_COLUMNS = ["step", "rank", "density", "k", "d", "delta", "beta", "zero_share",
                "fitted_ratio", "gaussian_ratio", "fit_error", "gaussian_error"]


def cluster_bootstrap(statistic: Callable[[np.ndarray], float], clusters: Sequence,
                      n_boot: int = N_BOOT, seed: int = BOOT_SEED,
                      level: float = 0.95) -> tuple[float, float, float]:
    """(estimate, low, high): `statistic` of the row indices of every unit, and the percentile
    interval of the same over `n_boot` resamples of whole clusters with replacement (every row
    of a drawn cluster enters as often as the cluster is drawn). NaN ends with fewer than 2
    clusters or when no resample gives a finite value."""
    validate.integer("n_boot", n_boot, 1)
    labels = pd.factorize(pd.Series(list(clusters), dtype=object))[0]
    rows = [np.flatnonzero(labels == c) for c in range(labels.max() + 1 if labels.size else 0)]
    estimate = float(statistic(np.arange(labels.size))) if labels.size else math.nan
    if len(rows) < 2:
        return estimate, math.nan, math.nan
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(rows), size=(n_boot, len(rows)))
    values = np.array([statistic(np.concatenate([rows[c] for c in draw])) for draw in draws])
    values = values[np.isfinite(values)]
    if not values.size:
        return estimate, math.nan, math.nan
    tail = 100.0 * (1.0 - level) / 2.0
    low, high = np.percentile(values, [tail, 100.0 - tail])
    return estimate, float(low), float(high)


def snapshot_units(contraction_rows: pd.DataFrame, fits_table: pd.DataFrame) -> pd.DataFrame:
    """UNIT_COLUMNS for one snapshot: its contraction rows (step, rank, density, k, d,
    topk_ratio, gaussian_ratio) with the generalised-normal beta fitted on x and the zero share
    of its fits table. Empty when the snapshot has no gennorm fit (a degenerate vector)."""
    gennorm = fits_table[(fits_table["family"] == "gennorm") & (fits_table["on"] == "x")] \
        if len(fits_table) else fits_table
    rows = contraction_rows[np.isfinite(contraction_rows["topk_ratio"].astype(float))]
    if gennorm.empty or rows.empty:
        return pd.DataFrame(columns=UNIT_COLUMNS)
    beta = float(gennorm["shape"].iloc[0])
    zeros = int(gennorm["zeros"].iloc[0])
    out = []
    for row in rows.itertuples(index=False):
        d, k, delta = int(row.d), int(row.k), float(row.topk_ratio)
        z = zeros / d
        fitted = gennorm_ratio(k, d, beta, z)
        gap = 1.0 - delta
        out.append({"step": int(row.step), "rank": int(row.rank), "density": float(row.density),
                    "k": k, "d": d, "delta": delta, "beta": beta, "zero_share": z,
                    "fitted_ratio": fitted, "gaussian_ratio": float(row.gaussian_ratio),
                    "fit_error": abs(delta - fitted) / gap if gap > 0 else math.nan,
                    "gaussian_error": (abs(delta - float(row.gaussian_ratio)) / gap
                                       if gap > 0 else math.nan)})
    return pd.DataFrame(out, columns=UNIT_COLUMNS)


def analysis_units(ratios: pd.DataFrame, fits_rows: pd.DataFrame) -> pd.DataFrame:
    """snapshot_units over every snapshot step of one worker's SnapshotAnalysis (its `ratios`
    and `fits` frames, keyed by step)."""
    parts = [snapshot_units(g, fits_rows[fits_rows["step"] == step])
             for step, g in ratios.groupby("step")] if len(ratios) and len(fits_rows) else []
    parts = [p for p in parts if len(p)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=UNIT_COLUMNS)
