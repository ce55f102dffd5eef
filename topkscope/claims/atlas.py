"""The atlas claims: what the whole curve δ(k) and the tails of u say, beyond one density —
each judged per condition (and, where it depends on one, per density the recorder evaluated
Top-k at) on the analysed snapshots of u (topkscope.analysis.delta_curve, fitted_thresholds,
sent_range through snapshots.analyze_delta_loaded), by the fraction rule over snapshots.

delta_curve_gaussian        unit: one snapshot of u; criterion: the Gaussian fitted to u
                            predicts the measured δ(k) over k/d from 1e-4 to 0.5 within
                            GAUSSIAN_TOLERANCE in RMS of ln(1 − δ) (about 10% of the energy
                            Top-k keeps, on average over the grid) — the curve the paper's
                            Gaussian value assumes, at every density; `diff_mean` the median
                            RMS error, the evidence the family that predicts it best.
heavy_tail_sidco_threshold  unit: (snapshot, law) at one density, SIDCo's threshold at the
                            stage count its adaptation reaches (Abdelmoniem et al., MLSys 2021:
                            exponential, gamma, generalised Pareto fitted in stages); criterion:
                            it selects within [2k/3, 4k/3] (its count over k, the true k-th
                            largest |u| beside).
heavy_tail_quantizer_range  unit: (snapshot, selector) at one density: the values Top-k and
                            chunk-wise Top-k select; criterion: the 2-bit quantizer's range
                            (topkscope.sparsify.quantize, SparseLoCo's statistical rule: 6
                            standard deviations of the sent values wide) holds every one of
                            them (share held >= 0.999); the share within ±6σ beside.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from topkscope.analysis.criteria import COUNT_BAND, in_count_band
from topkscope.analysis.units import ConditionUnits
from topkscope.claims import phrases, verdicts
from topkscope.claims.distribution import fraction_row, per_density
from topkscope.claims.registry import Claim, Presentation, Question, register_claim

GAUSSIAN_TOLERANCE = 0.1   # RMS of ln(1 - δ) over the grid: ~10% of the kept energy
HELD_SHARE = 0.999         # the quantizer's range holds a selection when it holds this share


def _deltas(units: ConditionUnits) -> list[tuple[dict, object]]:
    """(snapshot analysis, its δ(k) tables) of each analysed snapshot of the units."""
    return [(s, s["delta"]()) for s in units.snaps if callable(s.get("delta"))]


def delta_curve_gaussian(units: ConditionUnits) -> list[dict]:
    found = _deltas(units)
    rows = []
    for s, tables in found:
        fam = tables.delta_families
        fam = fam[(fam["kind"] == "u") & (fam["on"] == "x")] if "on" in fam else fam
        if fam.empty:
            continue
        by = fam.set_index("family")
        if "normal" not in by.index or not math.isfinite(float(by.loc["normal", "error"])):
            continue
        best = fam.loc[fam["best"].astype(bool), "family"]
        rows.append({"run": s["_run"], "step": s["step"],
                     "error": float(by.loc["normal", "error"]),
                     "best": str(best.iloc[0]) if len(best) else "none",
                     "best_error": float(fam["error"].min())})
    if not rows:
        return [fraction_row(np.zeros(0, bool), "no analysed snapshot of u with a δ(k) curve")]
    frame = pd.DataFrame(rows)
    passed = frame["error"].to_numpy(float) <= GAUSSIAN_TOLERANCE
    winners = frame["best"].value_counts()
    evidence = (f"Gaussian's RMS error in ln(1 − δ) over k/d 1e-4–0.5: median "
                f"{frame['error'].median():.3g} (tolerance {GAUSSIAN_TOLERANCE:g}); best "
                "family by that error " + ", ".join(f"{f} {n}/{len(frame)}"
                                                    for f, n in winners.items())
                + f" (its median error {frame['best_error'].median():.3g})")
    row = fraction_row(passed, evidence, frame["run"].to_numpy(), frame["step"].to_numpy())
    row.update(diff_mean=float(frame["error"].median()), diff_unit="RMS of ln(1 − δ)")
    return [row]


def sidco_threshold(units: ConditionUnits) -> list[dict]:
    """At one density (per_density): SIDCo's adapted stage per law."""
    rows = []
    for s, tables in _deltas(units):
        t = tables.sidco_thresholds
        if t.empty:
            continue
        t = t[np.isclose(t["density"].astype(float), s.get("density", np.nan))
              & t["adapted"].astype(bool)]
        for r in t.itertuples(index=False):
            rows.append({"run": s["_run"], "step": s["step"], "dist": r.dist,
                         "count_over_k": float(r.count_over_k),
                         "threshold_over_kth": float(r.threshold_over_kth)})
    if not rows:
        return [fraction_row(np.zeros(0, bool), "no analysed snapshot of u with SIDCo's fits")]
    frame = pd.DataFrame(rows)
    passed = np.asarray(in_count_band(frame["count_over_k"].to_numpy(float), 1.0))
    per = "; ".join(f"{dist}: count/k median {g['count_over_k'].median():.3g}, threshold / "
                    f"true k-th largest {g['threshold_over_kth'].median():.3g}"
                    for dist, g in frame.groupby("dist"))
    row = fraction_row(passed, f"adapted stage, {per}", frame["run"].to_numpy(),
                       frame["step"].to_numpy())
    row.update(count_over_k=float(frame["count_over_k"].median()),
               count_p5=float(frame["count_over_k"].quantile(0.05)),
               count_p95=float(frame["count_over_k"].quantile(0.95)))
    return [row]


def quantizer_range(units: ConditionUnits) -> list[dict]:
    """At one density (per_density): the 2-bit range over each selection's sent values."""
    rows = []
    for s, tables in _deltas(units):
        t = tables.sent_range
        if t.empty:
            continue
        t = t[np.isclose(t["density"].astype(float), s.get("density", np.nan))]
        for r in t.itertuples(index=False):
            rows.append({"run": s["_run"], "step": s["step"], "selector": r.selector,
                         "held": float(r.share_held_2bit), "six": float(r.share_within_6sd),
                         "z": float(r.max_abs_z)})
    if not rows:
        return [fraction_row(np.zeros(0, bool), "no analysed snapshot of u")]
    frame = pd.DataFrame(rows)
    passed = frame["held"].to_numpy(float) >= HELD_SHARE
    per = "; ".join(f"{phrases.method(sel)}: 2-bit range holds a median "
                    f"{phrases.pct(g['held'].median())} (least {phrases.pct(g['held'].min())}), "
                    f"within ±6σ {phrases.pct(g['six'].median())}, max |z| "
                    f"{g['z'].max():.3g}" for sel, g in frame.groupby("selector"))
    row = fraction_row(passed, per, frame["run"].to_numpy(), frame["step"].to_numpy())
    row.update(diff_mean=float(frame["held"].min()), diff_unit="least share held")
    return [row]


# ------------------------------------------------------------------ how answers tell them
def _gaussian_numbers(rows: pd.DataFrame) -> str:
    return (f"a fitted Gaussian predicted δ(k) over k/d 1e-4–0.5 within {GAUSSIAN_TOLERANCE:g} "
            f"(RMS of ln(1 − δ)) in {phrases.pct_span(rows['fraction'])} of snapshots; median "
            f"error {phrases.span(rows['diff_mean'], 2)}")


def _sidco_numbers(rows: pd.DataFrame) -> str:
    return (f"SIDCo's adapted threshold selected within [2k/3, 4k/3] in "
            f"{phrases.pct_span(rows['fraction'])} of snapshot fits; median count "
            f"{phrases.span(rows['count_over_k'], 3)}·k")


def _range_numbers(rows: pd.DataFrame) -> str:
    return (f"the 2-bit range held every sent value in {phrases.pct_span(rows['fraction'])} of "
            f"snapshots; least share held {phrases.pct(pd.to_numeric(rows['diff_mean']).min())}")


_BAND = f"{COUNT_BAND[0]:.3f} <= count/k <= {COUNT_BAND[1]:.3f}"
for _claim in (
    Claim("delta_curve_gaussian", "Does a Gaussian predict δ(k) over the whole range of k?",
          "the Gaussian fitted to u predicts the measured delta(k) over k/d from 1e-4 to 0.5 "
          f"within {GAUSSIAN_TOLERANCE:g} RMS of ln(1 - delta)",
          "unit = one analysed snapshot of u; criterion RMS over the k/d grid of "
          f"ln(1 - delta_gauss) - ln(1 - delta) <= {GAUSSIAN_TOLERANCE:g}; "
          + verdicts.FRACTION_RULE,
          "distribution", "condition", delta_curve_gaussian, "delta_curve",
          questions=(Question("delta_curve_gaussian", "Does a Gaussian predict how much energy "
                              "Top-k keeps at every k (δ(k), k/d from 1e-4 to 0.5)?", on="any",
                              order=300),),
          show=Presentation("other", "", _gaussian_numbers)),
    Claim("heavy_tail_sidco_threshold", "Do SIDCo's fitted laws predict the k-th largest |u|?",
          "SIDCo's staged exponential, gamma and generalised-Pareto fits select about k",
          f"unit = (snapshot of u, law) at one density, the stage count SIDCo's adaptation "
          f"reaches; criterion {_BAND}; " + verdicts.FRACTION_RULE,
          "distribution", "condition", lambda units: per_density(units, sidco_threshold),
          "delta_curve",
          questions=(Question("heavy_tail_sidco_threshold", "Do SIDCo's fitted tail laws "
                              "predict the k-th largest |u| (so select about k)?", on="any",
                              order=310),),
          show=Presentation("other", "", _sidco_numbers)),
    Claim("heavy_tail_quantizer_range", "Does the quantizer's range hold the values Top-k "
          "sends?", "the 2-bit quantizer's range (6 standard deviations of the sent values "
          "wide) holds every value Top-k and chunk-wise Top-k select",
          f"unit = (snapshot of u, selector) at one density; criterion share held >= "
          f"{HELD_SHARE:g}; " + verdicts.FRACTION_RULE,
          "distribution", "condition", lambda units: per_density(units, quantizer_range),
          "delta_curve",
          questions=(Question("heavy_tail_quantizer_range", "Does the quantizers' ±6σ range "
                              "(6σ wide, as SparseLoCo's) hold every value Top-k sends?",
                              on="any", order=320),),
          show=Presentation("other", "", _range_numbers)),
):
    register_claim(_claim)
