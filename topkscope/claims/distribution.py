"""The distribution claims: what u, the whole-model error-compensated gradient, looks like and
how tightly Top-k contracts it, per (model, training sparsifier, condition) of recorded u
(topkscope.analysis.units: stats rows kind u, layer __global__; raw snapshots where a statistic
needs every value). Each is judged by the fraction rule over its units
(topkscope.claims.verdicts):

gaussian_like        unit: one recorded u (step, rank); criterion |skew| <= 0.5 and |excess
                     kurtosis| <= 1; evidence and `gennorm_beta`: the generalised-normal shape
                     beta of the snapshot fits (2 = normal, 1 = Laplace).
below_classic        unit: (step, rank, density); criterion delta_emp < 1 - k/d; true for any
                     vector that is not flat (Top-k keeps at least the mean energy): section
                     check, not a finding.
below_paper          unit: (step, rank, density); criterion delta_emp <= (1 - k/d)^2.
gaussian_value       unit: (step, rank, density); criterion delta_emp <= the Gaussian value
                     1 - rho - 2 t phi(t), t = Phi^-1(1 - rho/2). Both give `bound_margin`:
                     the median over units of (bound - delta) / ((1 - k/d) - (1 - k/d)^2), and
                     `delta_uniform` = (1 - k/d)^3, `delta_gaussian`: the delta of a uniform and
                     of a Gaussian u of the same d and k.
convexity_condition  unit: (snapshot of u, density); criterion contraction's condition_holds.
gaussian_tail        unit: (snapshot of u, density); criterion 2/3 <= count/k <= 4/3 with
                     count = #{|u_i| > mean + |Phi^-1(rho/2)| std}, the published Gaussian-k's
                     first threshold, on Top-k's u.
fitted_value         unit: (snapshot of u, density); the median error of the fitted generalised
                     normal's delta against the Gaussian value's, with a cluster bootstrap.
<family>_count       unit: (step, rank, density); criterion 2/3 <= count/k <= 4/3 for every
                     approximate selector the recorder ran on Top-k's u (its `<S>_count`
                     column); a selector exact by construction is a check; `count_p5`,
                     `count_over_k`, `count_p95` the count/k percentiles.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from topkscope import bounds
from topkscope.analysis import contraction, criteria, fitted_value, selection
from topkscope.analysis.criteria import COUNT_BAND, MAX_ABS_EXCESS_KURTOSIS, MAX_ABS_SKEW
from topkscope.analysis.units import ConditionUnits, floats
from topkscope.claims import phrases, verdicts
from topkscope.claims.registry import Claim, Presentation, Question, register_claim
from topkscope.columns import RECORDED_SELECTORS
from topkscope.schema import column_prefix, selector_prefixes

UNIT_RULE = ("units recorded during a density warm-up, or at an outer loop's first exchanges, "
             "form their own condition (never pooled with the rest); one row per experiment, "
             "world size and density the recorder evaluated Top-k at")
MARGIN_RULE = ("bound_margin = median over units of (bound - delta_emp) / ((1 - k/d) - "
               "(1 - k/d)^2); a uniform u's delta (1 - k/d)^3 and a Gaussian u's beside it")
MARGIN_CLAIMS = ("below_paper", "gaussian_value")


def fraction_row(passed: np.ndarray, evidence: str, runs=(), steps=(),
                 check: bool = False) -> dict:
    """The fraction rule on the units `passed`, each labelled by its run and step (the blocks
    of criteria.share_interval): n_units, fraction and its interval, evidence, verdict, cause
    and reason; check True: the check rule instead (verdicts.check_verdict: a row true by
    construction is never inconclusive)."""
    n, k = int(passed.size), int(np.count_nonzero(passed))
    low, high = criteria.share_interval(passed, runs, steps) if n else (math.nan, math.nan)
    blocks = len(set(zip(np.asarray(runs).tolist(), np.asarray(steps).tolist()))) if n else 0
    if check:
        verdict, cause, reason = verdicts.check_verdict(k, n)
    else:
        verdict = verdicts.fraction_verdict(k, n, low, high)
        cause = verdicts.fraction_cause(k, n, low, high)
        reason = verdicts.fraction_reason(verdict, n, blocks)
    return {"n_units": n, "fraction": k / n if n else math.nan,
            "fraction_low": low, "fraction_high": high,
            "evidence": f"{k} of {n} units; {evidence}" if n else evidence,
            "verdict": verdict, "cause": cause, "reason": reason}  # fmt: skip


def per_density(units: ConditionUnits, evaluate) -> list[dict]:
    """evaluate(units at one recorder density) for each density the recorder evaluated Top-k
    at, each row with its `recorder_density` (a row never pools densities); evaluate(units)
    as they are when they hold none."""
    densities = units.densities
    if not densities:
        return evaluate(units)
    return [{**row, "recorder_density": d} for d in densities
            for row in evaluate(units.at_density(d))]


def gaussian_like(units: ConditionUnits) -> list[dict]:
    u, snaps = units.u, units.snaps
    frame = pd.DataFrame(columns=["_run", "step", "rank", "skew", "excess_kurtosis"])
    if not u.empty and {"skew", "excess_kurtosis"} <= set(u.columns):
        frame = u.drop_duplicates(["_run", "step", "rank"])[list(frame.columns)]
    seen = set(zip(frame["_run"], frame["step"], frame["rank"]))
    extra = [s for s in snaps if (s["_run"], s["step"], s["rank"]) not in seen]
    if extra:
        frame = pd.concat([frame, pd.DataFrame([
            {c: s[c] for c in ("_run", "step", "rank")}
            | {"skew": s["battery"]["skew"], "excess_kurtosis": s["battery"]["excess_kurtosis"]}
            for s in extra
        ])], ignore_index=True)  # fmt: skip
    skew, kurt = floats(frame["skew"]), floats(frame["excess_kurtosis"])
    defined = np.isfinite(skew) & np.isfinite(kurt)
    passed = criteria.gaussian_like(skew[defined], kurt[defined])
    parts = []
    if defined.any():
        parts.append(f"median skew {np.median(skew[defined]):.3g}, median excess kurtosis "
                     f"{np.median(kurt[defined]):.3g}")  # fmt: skip
    if (~defined).any():
        parts.append(f"{int((~defined).sum())} constant/empty vectors skipped")
    betas = np.array([s["beta"] for s in snaps if math.isfinite(s["beta"])])
    if snaps:
        ks = [s["battery"]["ks_D"] for s in snaps]
        qq = [s["battery"]["qq_r"] for s in snaps]
        best = pd.Series([s["best_family"] for s in snaps]).value_counts()
        parts.append(f"snapshots: median KS D {np.nanmedian(ks):.3g}, median Q-Q r "
                     f"{np.nanmedian(qq):.4g}, best fit by BIC "
                     + ", ".join(f"{fam} {cnt}/{len(snaps)}" for fam, cnt in best.items()))
    if betas.size:
        q1, med, q3 = np.percentile(betas, [25, 50, 75])
        parts.append(f"generalised-normal shape beta median {med:.3g} (IQR {q1:.3g}-{q3:.3g}; "
                     f"2 = normal, 1 = Laplace) over {betas.size} snapshots")
    if frame.empty:
        parts.append("no recorded u (stats kind u, layer __global__) and no snapshots")
    row = fraction_row(passed, "; ".join(parts), frame["_run"].to_numpy()[defined],
                       frame["step"].to_numpy()[defined])
    row["gennorm_beta"] = float(np.median(betas)) if betas.size else math.nan
    return [row]


def _per_kd(closed_form, k: np.ndarray, d: np.ndarray) -> np.ndarray:
    """closed_form(k, d) of topkscope.bounds per unit, evaluated once per distinct (k, d)."""
    pairs, index = np.unique(np.stack([k, d], axis=1), axis=0, return_inverse=True)
    values = np.array([closed_form(int(a), int(b)) for a, b in pairs], dtype=np.float64)
    return values[np.asarray(index).reshape(-1)] if len(k) else np.zeros(0)


def _below(units: ConditionUnits, claim: str) -> list[dict]:
    u = units.u
    check = claim == "below_classic"
    if u.empty or "topk_ratio" not in u:
        return [fraction_row(np.zeros(0, bool), "no recorded topk_ratio for u", check=check)]
    ratio = floats(u["topk_ratio"])
    k, d = floats(u["k"]), floats(u["numel"])
    ok = np.isfinite(ratio) & (k > 0) & (d > 0)
    ratio, k, d, dens = ratio[ok], k[ok], d[ok], floats(u["density"])[ok]
    blocks = u["_run"].to_numpy()[ok], u["step"].to_numpy()[ok]
    rho = k / d
    gaussian = _per_kd(bounds.gaussian_ratio, k, d)
    if claim == "below_classic":
        bound = 1.0 - rho
        passed = criteria.is_below_classic(ratio, bound)
    elif claim == "below_paper":
        bound = (1.0 - rho) ** 2
        passed = criteria.is_below_paper(ratio, bound)
    else:
        bound = gaussian
        passed = criteria.is_at_most(ratio, bound)
    if not passed.size:
        return [fraction_row(passed, "no finite topk_ratio for u", check=check)]
    gap = rho * (1.0 - rho)  # (1 - k/d) - (1 - k/d)^2
    with np.errstate(divide="ignore", invalid="ignore"):
        margin = np.where(gap > 0, (bound - ratio) / gap, np.nan)
    uniform = _per_kd(bounds.uniform_ratio, k, d)
    per = []
    for density in np.unique(dens):
        sel = dens == density
        gain = np.median((1.0 - ratio[sel]) / rho[sel])
        text = (f"density {density:g}: median delta {np.median(ratio[sel]):.4g} vs "
                f"{'Gaussian value' if claim == 'gaussian_value' else 'bound'} "
                f"{np.median(bound[sel]):.4g}, Top-k keeps {gain:.3g}x the energy share k/d")
        if claim in MARGIN_CLAIMS and np.isfinite(margin[sel]).any():
            text += (f", margin median {np.nanmedian(margin[sel]):.3g} (least "
                     f"{np.nanmin(margin[sel]):.3g}) gaps; a uniform u gives delta "
                     f"{np.median(uniform[sel]):.4g}, a Gaussian u "
                     f"{np.median(gaussian[sel]):.4g}")
        per.append(text)
    row = fraction_row(passed, "; ".join(per), *blocks, check=check)
    row["energy_gain"] = float(np.median((1.0 - ratio) / rho))
    if claim in MARGIN_CLAIMS:
        row.update(bound_margin=float(np.nanmedian(margin)) if np.isfinite(margin).any()
                   else math.nan, delta_uniform=float(np.median(uniform)),
                   delta_gaussian=float(np.median(gaussian)))
    return [row]


def convexity(units: ConditionUnits) -> list[dict]:
    snaps = units.snaps
    if not snaps:
        return [fraction_row(np.zeros(0, bool),
                             "no snapshots of u (the curve needs every value)")]
    ratios = pd.concat([s["ratios"].assign(_run=s["_run"], _step=s["step"]) for s in snaps],
                       ignore_index=True)
    ratios = ratios[np.isfinite(floats(ratios["convexity_gap"]))]
    held = ratios["condition_holds"].astype(bool).to_numpy()
    evidence = (f"median convexity gap {np.nanmedian(floats(ratios['convexity_gap'])):.3g} "
                f"against tolerances {floats(ratios['convexity_tol']).min():.3g}-"
                f"{floats(ratios['convexity_tol']).max():.3g} over {len(snaps)} snapshots")
    failed = ratios[~held]
    if len(failed):
        evidence += (f"; where the condition failed the bound (1-k/d)^2 still held in "
                     f"{int(failed['below_paper'].astype(bool).sum())} of {len(failed)} "
                     "(snapshot, density) checks")
    return [fraction_row(held, evidence, ratios["_run"].to_numpy(), ratios["_step"].to_numpy())]


def gaussian_tail(units: ConditionUnits) -> list[dict]:
    """Units: (snapshot, density): the count needs every value of u, which only a snapshot
    holds; blocks of the share's interval are the snapshots' (run, step)."""
    snaps = units.snaps
    tails = [(*t, s["_run"], s["step"]) for s in snaps for t in s["tail"]]
    if not tails:
        return [fraction_row(np.zeros(0, bool), "no snapshots of u (the tail count needs "
                                                "every value)")]
    density, count, k = (np.array(c, dtype=np.float64) for c in list(zip(*tails))[:3])
    runs, steps = (np.array(c) for c in list(zip(*tails))[3:])
    passed = criteria.in_count_band(count, k)
    per = []
    for rho in np.unique(density):
        lo, med, hi = np.percentile(count[density == rho] / k[density == rho], [5, 50, 95])
        per.append(f"density {rho:g}: count/k at the first threshold median {med:.3g}, "
                   f"5th-95th percentile {lo:.3g}-{hi:.3g}")
    row = fraction_row(passed, "; ".join(per) + f" over {len(snaps)} snapshots", runs, steps)
    lo, med, hi = np.percentile(count / k, [5, 50, 95])
    row.update(count_p5=float(lo), count_over_k=float(med), count_p95=float(hi))
    return [row]


def fitted(units: ConditionUnits) -> list[dict]:
    """The fitted_value claim (topkscope.analysis.fitted_value's units): fraction is the share
    of units where the fitted value is the closer one; diff_mean the median Gaussian error
    minus the median fitted error (in units of 1 - delta) with its cluster-bootstrap
    interval over steps."""
    parts = [s["fitted"].assign(run=s["_run"]) for s in units.snaps if len(s["fitted"])]
    frame = (pd.concat(parts, ignore_index=True) if parts
             else pd.DataFrame(columns=fitted_value.UNIT_COLUMNS))
    if len(frame):
        frame = frame[np.isfinite(frame["fit_error"].astype(float))
                      & np.isfinite(frame["gaussian_error"].astype(float))]
    fit = frame["fit_error"].to_numpy(float) if len(frame) else np.zeros(0)
    gau = frame["gaussian_error"].to_numpy(float) if len(frame) else np.zeros(0)
    runs = frame["run"] if "run" in frame else [0] * len(frame)
    clusters = list(zip(runs, frame["step"])) if len(frame) else []
    n_steps = len(set(clusters))
    row = {"n_units": int(fit.size), "diff_unit": "of 1 − δ",
           "fraction": float(np.mean(fit < gau)) if fit.size else math.nan,
           "evidence": _fitted_evidence(frame) if fit.size else
           "no snapshot of u with a generalised-normal fit and a finite delta"}
    if n_steps < criteria.MIN_UNITS:
        row.update(verdict="insufficient-data", reason="not-measured" if not n_steps
                   else "too-few-units",
                   cause=f"{n_steps} snapshot step(s) with a generalised-normal fit, "
                         f"{criteria.MIN_UNITS} needed")
        return [row]
    diff, low, high = fitted_value.cluster_bootstrap(
        lambda i: float(np.median(gau[i]) - np.median(fit[i])), clusters)
    verdict = verdicts.interval_verdict(low, high, n_steps, 0.0)
    side = {"holds": "above 0: the fitted value is closer",
            "fails": "below 0: the Gaussian value is closer",
            "inconclusive": "contains 0"}.get(verdict, "undefined")
    row.update(verdict=verdict, ci_low=low, ci_high=high, diff_mean=diff,
               reason=("" if verdict in verdicts.DECIDED else "interval-contains-zero"
                       if verdict == "inconclusive" else "too-few-units"),
               cause=f"median Gaussian error − median fitted error {criteria.signed(diff)} "
                     f"(in units of 1 − δ), interval [{criteria.signed(low)}, "
                     f"{criteria.signed(high)}] over {n_steps} steps {side}")
    return [row]


def _fitted_evidence(units: pd.DataFrame) -> str:
    parts = []
    for density, g in units.groupby("density"):
        parts.append(f"density {density:g}: median delta {g['delta'].median():.4g}, fitted "
                     f"{g['fitted_ratio'].median():.4g} (median beta {g['beta'].median():.3g}, "
                     f"zero share {g['zero_share'].median():.3g}), Gaussian "
                     f"{g['gaussian_ratio'].median():.4g}; median error in units of 1 − δ: "
                     f"fitted {g['fit_error'].median():.3g}, Gaussian "
                     f"{g['gaussian_error'].median():.3g}")
    return f"{len(units)} units; " + "; ".join(parts)


def compared_selectors(u: pd.DataFrame) -> list[str]:
    """The selectors whose counts the recorded rows `u` hold: one per `<S>_count` column with a
    value (topkscope.schema.selector_prefixes), named by the registry — a column no registered
    sparsifier has (a plugin's, not imported here) keeps its prefix as its name — the
    compared ones (columns.RECORDED_SELECTORS) first, then the others in plot order. The
    recorded columns decide, never the registry, so the same runs give the same rows in any
    process."""
    from topkscope.sparsify import available, in_plot_order

    registered = [*RECORDED_SELECTORS, *available()]
    found = [next((n for n in registered if column_prefix(n) == prefix), prefix)
             for prefix in selector_prefixes(u.columns) if u[f"{prefix}_count"].notna().any()]
    found = [s for s in found if s not in selection.NOT_SELECTORS]
    return [*(s for s in RECORDED_SELECTORS if s in found),
            *in_plot_order(s for s in found if s not in RECORDED_SELECTORS)]


def count_on_topk(units: ConditionUnits) -> list[dict]:
    """One `<family>_count` row per selector the recorder evaluated on these units (its
    `<S>_count` column holds a value): the share of units in the count band, the count/k
    percentiles, the median recall and delta relative to Top-k's in the evidence."""
    rows = []
    for selector in compared_selectors(units.u):
        found = _count_of(units.u, selector)
        if found is not None:
            exact = selection.by_construction(selector)
            rows.append({**found, "sparsifier": selector,
                         "section": "check" if exact else "distribution"})
    return rows


def _count_of(u: pd.DataFrame, selector: str) -> dict | None:
    prefix = column_prefix(selector)
    col = prefix + "_count"
    if u.empty or col not in u:
        return None
    count, k = floats(u[col]), floats(u["k"])
    ok = np.isfinite(count) & np.isfinite(k) & (k > 0)  # NaN / NA: not evaluated there
    if not ok.any():  # not evaluated in these runs (a column another run's recorder wrote)
        return None
    passed = criteria.in_count_band(count[ok], k[ok])
    lo, med, hi = np.percentile(count[ok] / k[ok], [5, 50, 95])
    evidence = f"count/k median {med:.3g}, 5th-95th percentile {lo:.3g}-{hi:.3g}"
    for suffix, label in (("recall", "recall of the exact top-k"),
                          ("ratio_vs_topk", "delta / Top-k's")):
        values = floats(u[f"{prefix}_{suffix}"])[ok] if f"{prefix}_{suffix}" in u else []
        values = np.asarray(values)[np.isfinite(values)]
        if values.size:
            evidence += f"; {label} median {np.median(values):.3g}"
    if selection.by_construction(selector):
        evidence += "; true by construction (it selects exactly k)"
    row = fraction_row(passed, evidence, u["_run"].to_numpy()[ok], u["step"].to_numpy()[ok],
                       check=selection.by_construction(selector))
    row.update(count_over_k=float(med), count_p5=float(lo), count_p95=float(hi))
    return row


_BAND = f"{COUNT_BAND[0]:.3f} <= count/k <= {COUNT_BAND[1]:.3f}"
FRACTION = verdicts.FRACTION_RULE
PUBLISHED_RULE = ("gaussiank-2019",)  # the questions on the published Gaussian-k's count

for _claim in (
    Claim("gaussian_like", "Is u bell-shaped (Gaussian-like) during training?",
          "u is bell-shaped during training (its skew and excess kurtosis lie in the moment "
          "window of a Gaussian)",
          f"unit = one recorded u (step, rank); criterion |skew| <= {MAX_ABS_SKEW} and |excess "
          f"kurtosis| <= {MAX_ABS_EXCESS_KURTOSIS}; {UNIT_RULE}; {FRACTION}",
          "distribution", "condition", gaussian_like, "normality",
          questions=(Question("gaussian_like", "Is u bell-shaped (Gaussian-like) during "
                              "training?", summary=1, order=10, short="Is u bell-shaped?"),
                     Question("outer_gaussian_like", "Is the accumulated pseudo-gradient "
                              "bell-shaped?", on="outer", order=110)),
          show=Presentation("distribution", "Gaussian-like", phrases.gaussian_like,
                            phrases.gaussian_like_lead)),
    Claim("below_classic", "Is Top-k's contraction below the classic bound 1 - k/d?",
          "delta_emp = ||u - TopK(u)||^2/||u||^2 is below 1 - k/d",
          "unit = (step, rank, density); criterion delta_emp < 1 - k/d (a check: true for any "
          f"vector that is not flat); {UNIT_RULE}; {FRACTION}",
          "check", "condition",
          lambda units: per_density(units, lambda at: _below(at, "below_classic")),
          "contraction",
          show=Presentation("check")),
    Claim("below_paper", "Does Top-k's contraction stay below the paper's bound (1 - k/d)^2?",
          "delta_emp is below the paper's bound (1 - k/d)^2",
          f"unit = (step, rank, density); criterion delta_emp <= (1 - k/d)^2; {UNIT_RULE}; "
          f"{FRACTION}; {MARGIN_RULE}",
          "distribution", "condition",
          lambda units: per_density(units, lambda at: _below(at, "below_paper")),
          "contraction",
          questions=(Question("below_paper", "Does Top-k's contraction δ stay below the "
                              "paper's bound (1 − k/d)²?", summary=2, order=20,
                              short="Does δ stay below (1 − k/d)²?"),
                     Question("outer_below_paper", "Does Top-k's δ on the pseudo-gradient "
                              "stay below (1 − k/d)²?", on="outer", order=120)),
          show=Presentation("distribution", "δ ≤ (1 − k/d)²", phrases.bound,
                            phrases.bound_lead)),
    Claim("gaussian_value", "Is Top-k's contraction at most its value for a Gaussian u?",
          "delta_emp is at most the Gaussian value 1 - rho - 2 t phi(t)",
          "unit = (step, rank, density); criterion delta_emp <= 1 - rho - 2 t phi(t), t = "
          f"Phi^-1(1 - rho/2); {UNIT_RULE}; {FRACTION}; {MARGIN_RULE}",
          "distribution", "condition",
          lambda units: per_density(units, lambda at: _below(at, "gaussian_value")),
          "contraction", show=Presentation("distribution", "δ ≤ Gaussian value")),
    Claim("convexity_condition", "Are u's sorted squared magnitudes convex, as the bound "
          "assumes?", "the sorted squared magnitudes of u are convex, decreasing to 0",
          "unit = (snapshot of u, density); criterion convexity_gap <= "
          f"{contraction.CONVEXITY_SHARE:g} (1 - k/d)/(2 - k/d) + {contraction.SAMPLE_NOISE:g}/d, "
          "i.e. the excess over (1 - k/d)^2 the gap allows, gap (1 - (1 - k/d)^2), is at most "
          f"{contraction.CONVEXITY_SHARE:.0%} of the gap between 1 - k/d and (1 - k/d)^2 (+ "
          f"sample noise); {UNIT_RULE}; {FRACTION}",
          "distribution", "condition", lambda units: per_density(units, convexity),
          "sorted_magnitudes",
          show=Presentation("distribution", "convex sorted u²")),
    Claim("gaussian_tail", "Does the tail above Gaussian-k's first threshold hold about k "
          "elements?", "the count above Gaussian-k's first threshold mean + |Phi^-1(rho/2)| "
          "sigma is about k (the tail the published rule relies on)",
          f"unit = (snapshot of u, density); criterion {_BAND}, count = #{{|u_i| > mean + "
          "|Phi^-1(rho/2)| std}} (std unbiased: the published Gaussian-k's first threshold); "
          f"{UNIT_RULE}; {FRACTION}",
          "distribution", "condition", lambda units: per_density(units, gaussian_tail),
          "selectors",
          show=Presentation("counts", "tail at the first threshold (Top-k's u)")),
    Claim("fitted_value", "Does the fitted distribution predict Top-k's contraction better "
          "than the Gaussian value?",
          "the Top-k contraction of the fitted generalised normal (with the measured zero "
          "share) is closer to delta_emp than the Gaussian value",
          "unit = (snapshot of u, density); delta_fit = gennorm_ratio(k, d, beta, zeros/d) "
          "with the snapshot's maximum-likelihood generalised-normal beta; error |delta - x| / "
          "(1 - delta); statistic median Gaussian error - median fitted error, 95% cluster "
          f"bootstrap over steps ({fitted_value.N_BOOT} resamples, seed "
          f"{fitted_value.BOOT_SEED}): holds if the interval lies above 0, fails if below, "
          f"else inconclusive; insufficient-data with fewer than {criteria.MIN_UNITS} steps; "
          f"{UNIT_RULE}", "distribution", "condition",
          lambda units: per_density(units, fitted), "contraction",
          questions=(Question("fitted_value", "Does the fitted generalised normal predict δ "
                              "better than the Gaussian value?", order=25),),
          show=Presentation("other", "", phrases.effect)),
    Claim("count", "Does each approximate selector select about k on Top-k's u?",
          "{method} selects about k elements on Top-k's u",
          f"unit = (step, rank, density) of Top-k's u; criterion {_BAND}; {UNIT_RULE}; "
          f"{FRACTION}", "distribution", "condition",
          lambda units: per_density(units, count_on_topk), "selectors",
          per_method=True,
          questions=(Question("gaussiank_count", "Does the published Gaussian-k select about "
                              "k on Top-k's u?", sparsifiers=PUBLISHED_RULE, order=30),
                     Question("outer_counts", "Does the published Gaussian-k select about k "
                              "on the pseudo-gradient?", on="outer",
                              sparsifiers=PUBLISHED_RULE, order=150)),
          show=Presentation("counts", "count on Top-k's u", phrases.count)),
):
    register_claim(_claim)
