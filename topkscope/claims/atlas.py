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
power_law_coordinates       unit: one snapshot of u; criterion: across its coordinates the
                            power law beats an exponential tail by Vuong's likelihood ratio
                            (p < 0.1), a lognormal does not beat it, and its tail index is at
                            most 4 (tails.tail_class: heavy, infinite kurtosis; a steeper power
                            law is not heavy); the Hill index beside. Xie, Tang, Sun and Li
                            (NeurIPS 2023).
power_law_over_time         unit: one of rank 0's sampled coordinates of u (the recorder's
                            coords/, at most 128 a run) over the steps of the condition, at
                            least 50; passes when it is not heavy-tailed by the same test.
                            Both tails claims count only the units whose ratios decided
                            (either way) and say how many did not; fewer than a quarter
                            decided: inconclusive (not-significant), the tests lacked power.
heavy_tail_pseudo_gradient  scope model: the SparseLoCo-style training at H = 1, 15, 30 (the
                            plan's sparseloco-h1 / -h30), the median whole-model Hill index of
                            the pseudo-gradient per seed, paired by seed against H = 1; holds
                            when the difference's 95% t-interval lies above 0 (lighter-tailed:
                            the generalised CLT's prediction for steps of index >= 2).
heavy_tail_quantizer_range  unit: (snapshot, selector) at one density: the values Top-k and
                            chunk-wise Top-k select; criterion: the 2-bit quantizer's range
                            (topkscope.sparsify.quantize, SparseLoCo's statistical rule: 6
                            standard deviations of the sent values wide) holds every one of
                            them (share held >= 0.999); the share within ±6σ beside.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd

from topkscope.analysis import criteria, tails
from topkscope.analysis.criteria import COUNT_BAND, in_count_band
from topkscope.analysis.units import ConditionUnits, floats, unit_conditions, with_runs
from topkscope.claims import outer, phrases, verdicts
from topkscope.claims.build import run_ids
from topkscope.claims.distribution import fraction_row, per_density
from topkscope.claims.inputs import ModelRuns
from topkscope.claims.registry import Claim, Presentation, Question, register_claim
from topkscope.condition import Condition, run_condition
from topkscope.schema import GLOBAL

GAUSSIAN_TOLERANCE = 0.1   # RMS of ln(1 - δ) over the grid: ~10% of the kept energy
HELD_SHARE = 0.999         # the quantizer's range holds a selection when it holds this share
MIN_STEPS_OVER_TIME = 50   # a coordinate's series is tested over time from this many steps
MAX_COORDINATES_OVER_TIME = 128   # of a run's sampled coordinates (~10 ms of fits each)
MIN_DECIDED_SHARE = 0.25   # the tails' verdicts need the likelihood ratios to decide this share


def _deltas(units: ConditionUnits) -> list[tuple[dict, object]]:
    """(snapshot analysis, its δ(k) tables) of each analysed snapshot of the units."""
    return [(s, s["delta"]()) for s in units.snaps if callable(s.get("delta"))]


def _at_own_density(units: ConditionUnits, table: str,
                    keep=None) -> list[tuple[dict, tuple]]:
    """(snapshot analysis, row) of each analysed snapshot's δ(k) table `table` (a
    SnapshotDelta field) at the snapshot's own density (the claims are per density), rows
    where `keep(frame)` holds when given."""
    out = []
    for s, tables in _deltas(units):
        t = getattr(tables, table)
        if t.empty:
            continue
        at = np.isclose(t["density"].astype(float), s.get("density", np.nan))
        if keep is not None:
            at &= keep(t)
        out += [(s, r) for r in t[at].itertuples(index=False)]
    return out


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
    rows = [{"run": s["_run"], "step": s["step"], "dist": r.dist,
             "count_over_k": float(r.count_over_k),
             "threshold_over_kth": float(r.threshold_over_kth)}
            for s, r in _at_own_density(units, "sidco_thresholds",
                                        lambda t: t["adapted"].astype(bool))]
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
    rows = [{"run": s["_run"], "step": s["step"], "selector": r.selector,
             "held": float(r.share_held_2bit), "six": float(r.share_within_6sd),
             "z": float(r.max_abs_z)}
            for s, r in _at_own_density(units, "sent_range")]
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


# ------------------------------------------------------------------ power-law tails
def _class_counts(classes: np.ndarray) -> str:
    n = len(classes)
    return (f"a power law of tail index <= {tails.HEAVY_INDEX:g} won (p < {tails.TAIL_LEVEL:g}) "
            f"in {np.count_nonzero(classes == tails.POWER_LAW)}/{n}, a steeper one in "
            f"{np.count_nonzero(classes == tails.STEEP)}/{n}, an exponential or lognormal tail "
            f"in {np.count_nonzero(classes == tails.ALTERNATIVE)}/{n}, neither in "
            f"{np.count_nonzero(classes == tails.UNDECIDED)}/{n}")


def _decided_row(classes: np.ndarray, passes: bool, evidence: str, runs, steps) -> dict:
    """The fraction rule over the units whose likelihood ratios decided (not UNDECIDED), a
    unit passing when it is heavy (POWER_LAW) and `passes` is true, when it is not and
    `passes` is false; where fewer than MIN_DECIDED_SHARE of the units
    decided, the row is inconclusive (not-significant): the tests lacked the power to tell
    the tails apart, and the few that decided do not speak for the rest."""
    decided = classes != tails.UNDECIDED
    row = fraction_row((classes[decided] == tails.POWER_LAW) == passes, evidence,
                       np.asarray(runs)[decided],
                       np.asarray(steps)[decided])
    share = float(np.mean(decided)) if len(classes) else 0.0
    if len(classes) and share < MIN_DECIDED_SHARE and row["verdict"] != "insufficient-data":
        row.update(verdict="inconclusive", reason="not-significant",
                   cause=f"the likelihood ratios decided in {phrases.pct(share)} of "
                         f"{len(classes)} units (at least {MIN_DECIDED_SHARE:.0%} needed)")
    return row


def power_law_coordinates(units: ConditionUnits) -> list[dict]:
    """Across the coordinates of each analysed snapshot of u: the power law against
    exponential and lognormal tails (tails.tail_class)."""
    rows = [(s["_run"], s["step"], s["tails"]) for s in units.snaps if s.get("tails")]
    if not rows:
        return [fraction_row(np.zeros(0, bool), "no analysed snapshot of u with a tail fit")]
    classes = np.array([tails.tail_class(t) for _, _, t in rows], dtype=object)
    hill = np.array([t.get("hill_alpha", math.nan) for _, _, t in rows], float)
    csn = np.array([t.get("pl_tail_index", math.nan) for _, _, t in rows], float)
    evidence = (_class_counts(classes) + f"; Hill tail index median {np.nanmedian(hill):.3g} "
                f"(range {np.nanmin(hill):.3g}–{np.nanmax(hill):.3g}), power-law fit's "
                f"{np.nanmedian(csn):.3g}" if np.isfinite(hill).any() else _class_counts(classes))
    row = _decided_row(classes, True, evidence, [r for r, _, _ in rows],
                       [st for _, st, _ in rows])
    row.update(diff_mean=float(np.nanmedian(hill)) if np.isfinite(hill).any() else math.nan,
               diff_unit="Hill tail index")
    return [row]


def _coordinate_series(run, cond) -> pd.DataFrame:
    """Rank 0's recorded coordinates of u over the steps of `run` in condition `cond`: a
    (step x coordinate) table of at most MAX_COORDINATES_OVER_TIME of them, empty when the run
    recorded none."""
    coords = getattr(run, "coords", None)
    if coords is None or coords.empty:
        return pd.DataFrame()
    mine = coords[(coords["kind"] == "u") & (coords["rank"] == 0)]
    if mine.empty:
        return pd.DataFrame()
    steps = sorted({int(x) for x in mine["step"]})
    kept = [st for st, c in zip(steps, unit_conditions(run, steps)) if c == cond]
    mine = mine[mine["step"].isin(kept)]
    table = mine.pivot_table(index="step", columns="coordinate", values="value",
                             aggfunc="first")
    # the recorder's sample is seeded and uniform: its first columns are a sample too
    return table.iloc[:, :MAX_COORDINATES_OVER_TIME]


def power_law_over_time(units: ConditionUnits) -> list[dict]:
    """Per coordinate over time: each sampled coordinate of rank 0's u over the steps of this
    condition (at least MIN_STEPS_OVER_TIME), its deviations from its mean tested like a
    vector's coordinates (tails.per_coordinate); of the coordinates whose ratios decided, a
    unit passes when it is not heavy-tailed (tails.tail_class not POWER_LAW: an exponential or
    lognormal tail won, or a power law steeper than tails.HEAVY_INDEX; _decided_row)."""
    found, runs_of, short = [], [], 0
    for i, run in enumerate(units.runs):
        table = _coordinate_series(run, units.condition)
        if table.empty:
            continue
        if len(table) < MIN_STEPS_OVER_TIME:
            short += 1
            continue
        fitted = tails.per_coordinate(table.to_numpy(float), list(table.columns))
        found.append(fitted)
        runs_of += [i] * len(fitted)
    if not found:
        why = (f"{short} run(s) recorded fewer than {MIN_STEPS_OVER_TIME} steps of their "
               "sampled coordinates in this condition" if short
               else "no run recorded sampled coordinates of u")
        return [fraction_row(np.zeros(0, bool), why)]
    frame = pd.concat(found, ignore_index=True)
    classes = np.array([tails.tail_class(r) for r in frame.to_dict("records")], dtype=object)
    steps = int(frame["steps"].median())
    index = frame["pl_tail_index"].astype(float)
    evidence = (f"{len(frame)} coordinates of rank 0's u over a median {steps} steps: "
                + _class_counts(classes)
                + (f"; power-law fit's tail index median {index.median():.3g}"
                   if index.notna().any() else ""))
    row = _decided_row(classes, False, evidence, runs_of,
                       frame["coordinate"].to_numpy())
    row.update(diff_mean=float(np.mean(classes == tails.POWER_LAW)),
               diff_unit="share of coordinates power-law")
    return [row]


def _median_alpha(run, kind: str = "g") -> float:
    """The median over a run's recorded (step, rank) of the whole-model Hill index of `kind`."""
    st = getattr(run, "stats", None)
    if st is None or st.empty or "hill_alpha" not in st:
        return math.nan
    rows = st[(st["kind"] == kind) & (st["layer"] == GLOBAL)].drop_duplicates(["step", "rank"])
    values = floats(rows["hill_alpha"])
    values = values[np.isfinite(values)]
    return float(np.median(values)) if values.size else math.nan


def pseudo_gradient_tails(model: ModelRuns) -> list[dict]:
    """Per outer experiment: the SparseLoCo-style training (outer.training_of 'sparseloco')
    at each H it ran, the median whole-model Hill index of its pseudo-gradient (the recorder's
    kind g at the exchanges) per seed, each H > the smallest paired by seed with the smallest
    (the generalised CLT: a sum of H steps is lighter-tailed, a larger index, unless the
    steps' index is below 2)."""
    out = []
    for experiment in sorted(outer.outer_experiments(model.runs), key=str):
        by: dict[int, dict[int, object]] = {}
        per_step = []
        for run in model.runs:
            m = run.manifest
            if m.get("experiment") != experiment or m.get("status") != "complete":
                continue
            if outer.training_of(m) == "sparseloco":
                by.setdefault(outer.inner_steps(m), {})[int(m.get("seed", 0))] = run
            elif not outer.is_outer(m):
                per_step.append(run)
        if len(by) < 2:
            continue
        base = min(by)
        raw = [a for a in (_median_alpha(r) for r in per_step) if math.isfinite(a)]
        for h in sorted(by)[1:]:
            seeds = sorted(set(by[h]) & set(by[base]))
            alphas = {s: (_median_alpha(by[h][s]), _median_alpha(by[base][s])) for s in seeds}
            seeds = [s for s in seeds if all(map(math.isfinite, alphas[s]))]
            diffs = [alphas[s][0] - alphas[s][1] for s in seeds]
            mean, low, high = criteria.paired_interval(diffs) if diffs else (math.nan,) * 3
            verdict = verdicts.interval_verdict(low, high, len(seeds), 0.0)
            runs = [*(by[h][s] for s in seeds), *(by[base][s] for s in seeds)]
            fields = with_runs(replace(run_condition(by[h][seeds[0]].manifest) if seeds else
                                       Condition(experiment=experiment),
                                       reference=f"H = {base}"), runs)
            per_seed = ", ".join(f"seed {s} {alphas[s][0]:.3g} vs {alphas[s][1]:.3g}"
                                 for s in seeds)
            evidence = (f"{experiment}: Hill tail index of the pseudo-gradient (median over "
                        f"exchanges and workers), H = {h} vs H = {base}: {per_seed}"
                        if seeds else f"{experiment}: no seed ran at both H = {h} and {base}")
            if raw:
                evidence += (f"; one step's raw gradient (TopK-SGD per step) "
                             f"{np.median(raw):.3g}")
            out.append({
                "statement": f"the pseudo-gradient summed over H = {h} steps is lighter-tailed "
                             f"(a larger Hill index) than at H = {base}",
                "sparsifier": "chunk-topk", "condition": fields,
                "run_ids": run_ids(runs), "n_runs": len(runs), "n_units": len(seeds),
                "n_seeds": len(seeds), "diff_mean": mean, "ci_low": low, "ci_high": high,
                "diff_unit": "Hill tail index", "evidence": evidence, "verdict": verdict,
                "reason": "" if verdict in verdicts.DECIDED else
                ("interval-contains-zero" if verdict == "inconclusive" else
                 "too-few-seeds" if seeds else "not-measured"),
                "cause": (f"paired difference {criteria.signed(mean)} [{criteria.signed(low)}, "
                          f"{criteria.signed(high)}] over {len(seeds)} seed(s)") if seeds
                else "no paired seed"})
    return out


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


def _power_law_numbers(rows: pd.DataFrame) -> str:
    share = phrases.pct_span(rows["fraction"])
    won = (f"a heavy power-law tail (index ≤ {tails.HEAVY_INDEX:g}) won in {share} of the "
           "snapshots whose tests decided" if share else
           "no snapshot's likelihood ratios decided between a power law and its alternatives")
    hill = phrases.span(rows["diff_mean"], 3)
    return won + (f"; Hill tail index {hill}" if hill else "")


def _over_time_numbers(rows: pd.DataFrame) -> str:
    share = phrases.pct_span(rows["fraction"])
    if not share:
        return "no coordinate followed over time had tests that decided"
    return (f"no heavy power-law tail in {share} of the coordinates followed over time whose "
            "tests decided")


def _pseudo_numbers(rows: pd.DataFrame) -> str:
    return (f"Hill index of the pseudo-gradient minus H = 1's "
            f"{phrases.signed_span(rows['diff_mean'], 3)} over {int(rows['n_seeds'].max())} "
            f"seeds (lighter-tailed: above 0)")


_CLASSES = (f"tails.tail_class: the power law beats the exponential (likelihood ratio > 0, "
            f"p < {tails.TAIL_LEVEL:g}), the lognormal does not beat it significantly, and its "
            f"tail index is at most {tails.HEAVY_INDEX:g} (infinite kurtosis)")
_UNDECIDED = (f"; the share is over the units whose ratios decided (significant either way); "
              f"where fewer than {MIN_DECIDED_SHARE:.0%} of units decided: inconclusive, "
              "not-significant")
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
    Claim("power_law_coordinates", "Is u power-law heavy-tailed across its coordinates?",
          "across the coordinates of u the magnitudes have a heavy power-law tail (Xie et al., "
          "NeurIPS 2023)",
          f"unit = one analysed snapshot of u (every coordinate); criterion {_CLASSES}; "
          + verdicts.FRACTION_RULE + _UNDECIDED,
          "distribution", "condition", power_law_coordinates, "delta_curve",
          questions=(Question("power_law_coordinates", "Is u power-law heavy-tailed across "
                              "its coordinates (Xie et al. 2023), the direction Top-k "
                              "selects along?", on="any", order=330),),
          show=Presentation("other", "", _power_law_numbers)),
    Claim("power_law_over_time", "Is one coordinate of u power-law over time?",
          "one coordinate's values over time have no heavy power-law tail (Xie et al., "
          "NeurIPS 2023)",
          f"unit = one of rank 0's sampled coordinates of u over the steps of the condition "
          f"(at least {MIN_STEPS_OVER_TIME}), its deviations from its mean; passes when it is "
          f"not heavy ({_CLASSES}); "
          + verdicts.FRACTION_RULE + _UNDECIDED,
          "distribution", "condition", power_law_over_time, "",
          questions=(Question("power_law_over_time", "Is each coordinate of u, followed over "
                              "time, free of a power-law tail (Xie et al. 2023)?", on="any",
                              order=340),),
          show=Presentation("other", "", _over_time_numbers)),
    Claim("heavy_tail_pseudo_gradient", "Is the pseudo-gradient lighter-tailed than one "
          "step's?", "the pseudo-gradient summed over H steps is lighter-tailed (a larger Hill "
          "index) than at H = 1",
          "unit = one seed with SparseLoCo-style runs at H and at H = 1; the paired difference "
          "of the median whole-model Hill index of the pseudo-gradient (recorder kind g, at "
          "the exchanges), its 95% t-interval against 0: holds above, fails below, else "
          f"inconclusive; fewer than {criteria.MIN_SEEDS} seeds: insufficient-data",
          "distribution", "model", pseudo_gradient_tails, "", family="outer",
          questions=(Question("heavy_tail_pseudo_gradient", "Is the pseudo-gradient summed "
                              "over H steps lighter-tailed than one step's (H = 15, 30 "
                              "against 1)?", on="outer", order=350),),
          show=Presentation("outer", "lighter-tailed than H = 1", _pseudo_numbers)),
):
    register_claim(_claim)
