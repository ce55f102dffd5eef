"""Turn a loaded run into the DataFrames the plot functions take (the analysis step).

Per snapshot of u (whole model, one worker): the sorted-magnitude curve and its convexity
(topkscope.analysis.contraction.analyze), the normality battery and normal Q-Q points
(topkscope.analysis.normality), and the distribution-family fits (topkscope.analysis.fits).
Each function returns a tidy frame with a `step` column, ready for plotting or for claims.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pandas as pd

BATTERY_EFFECT_SIZES = ("ks_D", "qq_r", "shapiro_W")


@dataclasses.dataclass
class SnapshotAnalysis:
    """Everything measured on the snapshots of one run (one rank)."""

    curves: pd.DataFrame      # step, rank, fraction, magnitude, exact
    convexity: pd.DataFrame   # step, convexity_gap, magnitude_convexity_gap, condition_holds
    ratios: pd.DataFrame      # step, density, topk_ratio, bounds, below_classic, below_paper
    battery: pd.DataFrame     # step, statistic, value (tidy)
    qq: pd.DataFrame          # step, p, theoretical, sample
    fits: pd.DataFrame        # step + fits.compare columns


def snapshot_steps(run, rank: int = 0) -> list[int]:
    snaps = run.snapshots
    if len(snaps) == 0:
        return []
    mine = snaps["rank"] == rank
    if "kind" in snaps.columns:
        mine &= snaps["kind"] == "u"
    return sorted(int(s) for s in snaps.loc[mine, "step"].unique())


def analyze_snapshots(run, densities: Sequence[float], rank: int = 0, seed: int = 0,
                      with_fits: bool = True) -> SnapshotAnalysis:
    """Run the analysis functions on every snapshot of `rank` in the run."""
    from topkscope.analysis import contraction, fits, normality

    curves, conv, ratios, battery, qq, fit_rows = [], [], [], [], [], []
    for step in snapshot_steps(run, rank):
        u = run.snapshot(step, rank)
        report = contraction.analyze(u, list(densities), seed=seed)
        curves.append(report.curve.assign(step=step))
        conv.append({"step": step, **{k: report.convexity[k] for k in
                                      ("convexity_gap", "magnitude_convexity_gap",
                                       "condition_holds")}})
        ratios.append(report.ratios.assign(step=step))
        stats = normality.battery(u, seed=seed)
        battery += [{"step": step, "statistic": k, "value": float(stats[k])}
                    for k in normality.KEYS if k not in ("note",)]
        qq.append(normality.qq(u, seed=seed).assign(step=step))
        if with_fits:
            fit_rows.append(fits.compare(u, seed=seed).assign(step=step))
    return SnapshotAnalysis(
        curves=_concat(curves, ["step", "rank", "fraction", "magnitude", "exact"]),
        convexity=pd.DataFrame(conv, columns=["step", "convexity_gap", "magnitude_convexity_gap",
                                              "condition_holds"]),
        ratios=_concat(ratios, ["step", *contraction.RATIO_COLUMNS]),
        battery=pd.DataFrame(battery, columns=["step", "statistic", "value"]),
        qq=_concat(qq, ["step", "p", "theoretical", "sample"]),
        fits=_concat(fit_rows, ["step"]),
    )


def _concat(frames: list[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True)
