"""Claim `fitted_value`: does the Top-k contraction the fitted distribution predicts come closer
to the measured one than the Gaussian value?

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
0; insufficient-data with fewer than verdicts.MIN_UNITS steps. The recorder's per-step stats hold
no fitted beta (only skew, excess kurtosis and zero_frac), so the units are the snapshots.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from topkscope import validate
from topkscope.analysis import verdicts
from topkscope.bounds import gennorm_ratio

CLAIM = "fitted_value"
STATEMENT = ("the Top-k contraction of the fitted generalised normal (with the measured zero "
             "share) is closer to delta_emp than the Gaussian value")
N_BOOT = 2000
BOOT_SEED = 0
UNIT_COLUMNS = ["step", "rank", "density", "k", "d", "delta", "beta", "zero_share",
                "fitted_ratio", "gaussian_ratio", "fit_error", "gaussian_error"]
RULE = ("unit = (snapshot of u, density); delta_fit = gennorm_ratio(k, d, beta, zeros/d) with "
        "the snapshot's maximum-likelihood generalised-normal beta; error |delta - x| / "
        "(1 - delta); statistic median Gaussian error - median fitted error, 95% cluster "
        f"bootstrap over steps ({N_BOOT} resamples, seed {BOOT_SEED}): holds if the interval "
        f"lies above 0, fails if below, else inconclusive; insufficient-data with fewer than "
        f"{verdicts.MIN_UNITS} steps")


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


def claim(units: pd.DataFrame, n_boot: int = N_BOOT, seed: int = BOOT_SEED) -> dict:
    """The claims row's measured fields (n_units, fraction, evidence, verdict, cause, ci_low,
    ci_high, diff_mean) from the units (UNIT_COLUMNS, plus an optional `run` column: steps of
    different runs are different clusters) of one condition. fraction: the share of units where
    the fitted value is the closer one; diff_mean: median Gaussian error - median fitted error."""
    if len(units):
        units = units[np.isfinite(units["fit_error"].astype(float))
                      & np.isfinite(units["gaussian_error"].astype(float))]
    fit = units["fit_error"].to_numpy(float) if len(units) else np.zeros(0)
    gau = units["gaussian_error"].to_numpy(float) if len(units) else np.zeros(0)
    runs = units["run"] if "run" in units else [0] * len(units)
    clusters = list(zip(runs, units["step"])) if len(units) else []
    n_steps = len(set(clusters))
    row = {"n_units": int(fit.size), "fraction": float(np.mean(fit < gau)) if fit.size else math.nan,
           "ci_low": math.nan, "ci_high": math.nan, "diff_mean": math.nan,
           "evidence": _evidence(units) if fit.size else
           "no snapshot of u with a generalised-normal fit and a finite delta"}
    if n_steps < verdicts.MIN_UNITS:
        row.update(verdict="insufficient-data",
                   cause=f"{n_steps} snapshot step(s) with a generalised-normal fit, "
                         f"{verdicts.MIN_UNITS} needed")
        return row
    diff, low, high = cluster_bootstrap(
        lambda i: float(np.median(gau[i]) - np.median(fit[i])), clusters, n_boot, seed)
    verdict = verdicts.interval_verdict(low, high, n_steps, 0.0)
    side = {"holds": "above 0: the fitted value is closer",
            "fails": "below 0: the Gaussian value is closer",
            "inconclusive": "contains 0"}.get(verdict, "undefined")
    row.update(verdict=verdict, ci_low=low, ci_high=high, diff_mean=diff,
               cause=f"median Gaussian error − median fitted error {verdicts.signed(diff)} "
                     f"(in units of 1 − δ), interval [{verdicts.signed(low)}, "
                     f"{verdicts.signed(high)}] over {n_steps} steps {side}")
    return row


def _evidence(units: pd.DataFrame) -> str:
    parts = []
    for density, g in units.groupby("density"):
        parts.append(f"density {density:g}: median delta {g['delta'].median():.4g}, fitted "
                     f"{g['fitted_ratio'].median():.4g} (median beta {g['beta'].median():.3g}, "
                     f"zero share {g['zero_share'].median():.3g}), Gaussian "
                     f"{g['gaussian_ratio'].median():.4g}; median error in units of 1 − δ: "
                     f"fitted {g['fit_error'].median():.3g}, Gaussian "
                     f"{g['gaussian_error'].median():.3g}")
    return f"{len(units)} units; " + "; ".join(parts)
