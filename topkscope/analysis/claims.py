"""The paper's claims, per model and condition, with the measured evidence and a verdict:
`claims.csv`.

Input: loaded runs (`topkscope.analysis.runs.load`), i.e. objects with `.manifest` (dict),
`.train`, `.eval`, `.stats`, `.snapshots` (DataFrames) and `.snapshot(step, rank)`. Output: one
row per (model, dataset, claim, sparsifier, condition) with columns COLUMNS. Verdicts are
holds | fails | mixed | inconclusive | insufficient-data, decided by the rules of
topkscope.analysis.verdicts (the `rule` column repeats the one applied, `cause` says in words
why this verdict, e.g. "12 of 16 units (75%) meet the criterion", "interval [−41.8, −21.7]
points below −1 point", "2 of 5 seeds failed").

Sections (`section`): distribution (claims 1-4: u and Top-k's contraction), convergence
(claims 5-6, topkscope.analysis.convergence_claims), prediction (the predicted speed-ups,
topkscope.perf.report), check (rows true by construction, e.g. the robust Gaussian-k's count),
published (runs imported from published logs, topkscope.analysis.published_claims: no seeds,
so never pooled; they feed no other section), explanation (does a contraction's term in the
error-feedback bound order the methods' convergence gap to Dense,
topkscope.analysis.contraction_convergence: one row per model and gap).

Distribution claims look at the whole-model error-compensated gradient u (stats rows kind
"u", layer "__global__"; raw snapshots where the statistic needs every value) of runs trained
with the sparsifiers in `sparsifiers` (default: exact Top-k, the paper's TopK-SGD), one row
per training sparsifier and condition. A condition is the run's condition_of (density warm-up,
k rule, deviations) and its target density, "warmup=paper; rho=0.001". A unit recorded while
a density warm-up trained at another density is not pooled with them: it belongs to the
condition "<condition>; during warm-up at rho=<the density trained>". When a model has
several target-density conditions, a row "all conditions (target density)" pools their units
(never the warm-up ones) as a summary. Fraction rule over units:

1. gaussian_like      unit: one recorded u (step, rank); criterion |skew| <= 0.5 and
                      |excess kurtosis| <= 1; evidence and `gennorm_beta`: the generalised-
                      normal shape beta of the snapshot fits (2 = normal, 1 = Laplace).
2. below_classic      unit: (step, rank, density); criterion delta_emp < 1 - k/d; true for
                      any vector that is not flat (Top-k keeps at least the mean energy):
                      section check, not a finding.
3. below_paper        unit: (step, rank, density); criterion delta_emp <= (1 - k/d)^2.
3a. gaussian_value    unit: (step, rank, density); criterion delta_emp <= the Gaussian value
                      1 - rho - 2 t phi(t), t = Phi^-1(1 - rho/2) (the paper's third curve).
                      Both give `bound_margin`: the median over units of (bound - delta) /
                      ((1 - k/d) - (1 - k/d)^2), how far delta stayed from the bound in units
                      of the gap between the two bounds (0: on the bound, < 0: above it), and
                      `delta_uniform` = (1 - k/d)^3, `delta_gaussian` = the Gaussian value:
                      the delta of a uniform and of a Gaussian u of the same d and k (a uniform
                      u meets (1 - k/d)^2 with margin 1 - k/d: a "holds" with a margin near 1 is
                      no flatter than uniform noise).
3b. convexity_condition  unit: (snapshot of u, density); criterion contraction's
                      condition_holds (the convexity gap allows delta at most 2% of the gap
                      between the bounds above (1 - k/d)^2); evidence says how often the bound
                      held where the condition failed.
3c. fitted_value      unit: (snapshot of u, density); the median error of the fitted
                      generalised normal's delta (topkscope.analysis.fitted_value) against the
                      Gaussian value's, in units of 1 - delta, with a bootstrap interval.
4. gaussiank_count    unit: (step, rank, density); criterion 2/3 <= count/k <= 4/3, per
                      Gaussian-k variant, on Top-k's u (the recorder applies the rule to the u
                      Top-k trains on); the robust `gaussiank` selects exactly k by
                      construction: section check. Every other recorded selector S
                      (columns.RECORDED_SELECTORS) gets the same claim as <family>_count
                      (dgc_count, redsync_count, sidco_count, tail_count), its evidence with
                      the median recall of the exact top-k set and delta relative to Top-k's
                      (S_recall, S_ratio_vs_topk).
4a. <family>_count_in_training  unit: one step of a method's OWN training run (train.parquet
                      selected_median / k), every approximate method that trains
                      (topkscope.analysis.selection.count_in_training_rows); column
                      count_over_k: the median count/k.
4b. gaussian_tail     unit: (snapshot of u, density); criterion 2/3 <= count/k <= 4/3 with
                      count = #{|u_i| > mean + |Phi^-1(rho/2)| std}, the published Gaussian-k's
                      first threshold (selection.gaussian_tail_count), on Top-k's u.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from topkscope import bounds, validate
from topkscope.analysis import (
    contraction,
    contraction_convergence,
    convergence_claims,
    fits,
    fitted_value,
    phases,
    published_claims,
    selection,
    snapshots,
    verdicts,
)
from topkscope.analysis.convergence_claims import (  # noqa: F401  (part of this module's API)
    claim_family,
    final_metric,
)
from topkscope.analysis.verdicts import (  # noqa: F401  (part of this module's API)
    COUNT_BAND,
    MIN_SEEDS,
    MIN_UNITS,
    TRAFFIC_LIMIT,
    VERDICTS,
    fraction_verdict,
    interval_verdict,
    paired_difference,
    paired_interval,
)
from topkscope.columns import RECORDED_SELECTORS
from topkscope.io import atomic_write
from topkscope.manifest import condition_of, diverged_at, not_ours
from topkscope.schema import GLOBAL, column_prefix

COLUMNS = [
    "model", "dataset", "dataset_substitute", "claim", "sparsifier", "statement", "n_runs",
    "n_units", "fraction", "evidence", "verdict", "rule",
    "condition", "n_seeds", "ci_low", "ci_high", "traffic_ratio",
    "section", "cause", "metric", "margin", "diff_mean", "n_failed_seeds", "traffic_warmup",
    "traffic_target", "gennorm_beta", "traffic_vs_plain_topk", "count_over_k",
    "n_unfinished_seeds", "bound_margin", "delta_uniform", "delta_gaussian",
    "fraction_low", "fraction_high",
]  # fmt: skip
# what the prediction rows (section "prediction": topkscope.perf.report's speed-ups and
# topkscope.perf.time_to_accuracy's times to the target) add to COLUMNS (docs/design.md)
PREDICTION_COLUMNS = [
    "network", "inputs", "baselines", "training_condition", "selection_basis", "breakeven_ms",
    "breakeven_topk_ms", "model_error",
]  # fmt: skip
SECTIONS = ("distribution", "convergence", "prediction", "check", published_claims.SECTION,
            contraction_convergence.SECTION)
ALL_CONDITIONS = "all conditions (target density)"
NO_UNITS = "no units recorded"
DURING_WARMUP = "during warm-up at rho="
COUNT_ON_TOPK = "_count"  # claim suffix: <family>_count, a recorded selector on Top-k's u
# claims true for any vector that is not flat (Top-k keeps at least the mean energy): checks
CHECK_CLAIMS = frozenset({"below_classic"})
# claims whose rows give bound_margin, delta_uniform and delta_gaussian (see _below)
MARGIN_CLAIMS = ("below_paper", "gaussian_value")

STATEMENTS = {
    "gaussian_like": "u is bell-shaped during training (its skew and excess kurtosis lie in "
                     "the moment window of a Gaussian)",
    "below_classic": "delta_emp = ||u - TopK(u)||^2/||u||^2 is below 1 - k/d",
    "below_paper": "delta_emp is below the paper's bound (1 - k/d)^2",
    "gaussian_value": "delta_emp is at most the Gaussian value 1 - rho - 2 t phi(t)",
    "convexity_condition": "the sorted squared magnitudes of u are convex, decreasing to 0",
    "gaussiank_count": "Gaussian-k selects about k elements on Top-k's u",
    "gaussian_tail": "the count above Gaussian-k's first threshold mean + |Phi^-1(rho/2)| "
                     "sigma is about k (the tail the published rule relies on)",
    "gaussiank_count_in_training": "Gaussian-k selects about k elements in its own training",
    fitted_value.CLAIM: fitted_value.STATEMENT,
}
DISTRIBUTION_CLAIMS = tuple(c for c in STATEMENTS
                            if c not in ("gaussiank_count", "gaussiank_count_in_training"))
IN_TRAINING_STATEMENT = "{method} selects about k elements in its own training"
ON_TOPK_STATEMENT = "{method} selects about k elements on Top-k's u"
_UNIT_RULE = ("units recorded during a density warm-up form their own condition (never "
              "pooled with the target density's)")
_MARGIN_RULE = ("bound_margin = median over units of (bound - delta_emp) / ((1 - k/d) - "
                "(1 - k/d)^2); a uniform u's delta (1 - k/d)^3 and a Gaussian u's beside it")
RULES = {
    "gaussian_like": f"unit = one recorded u (step, rank); criterion |skew| <= "
    f"{verdicts.MAX_ABS_SKEW} and |excess kurtosis| <= {verdicts.MAX_ABS_EXCESS_KURTOSIS}; "
    f"{_UNIT_RULE}; {verdicts.FRACTION_RULE}",
    "below_classic": f"unit = (step, rank, density); criterion delta_emp < 1 - k/d (a check: "
    f"true for any vector that is not flat); {_UNIT_RULE}; {verdicts.FRACTION_RULE}",
    "below_paper": f"unit = (step, rank, density); criterion delta_emp <= (1 - k/d)^2; "
    f"{_UNIT_RULE}; {verdicts.FRACTION_RULE}; {_MARGIN_RULE}",
    "gaussian_value": "unit = (step, rank, density); criterion delta_emp <= 1 - rho - 2 t "
    f"phi(t), t = Phi^-1(1 - rho/2); {_UNIT_RULE}; {verdicts.FRACTION_RULE}; {_MARGIN_RULE}",
    "convexity_condition": "unit = (snapshot of u, density); criterion convexity_gap <= "
    f"{contraction.CONVEXITY_SHARE:g} (1 - k/d)/(2 - k/d) + {contraction.SAMPLE_NOISE:g}/d, i.e. "
    "the excess over (1 - k/d)^2 the gap allows, gap (1 - (1 - k/d)^2), is at most "
    f"{contraction.CONVEXITY_SHARE:.0%} of the gap between 1 - k/d and (1 - k/d)^2 (+ sample "
    f"noise); {_UNIT_RULE}; {verdicts.FRACTION_RULE}",
    "gaussiank_count": "unit = (step, rank, density) of Top-k's u; criterion "
    f"{COUNT_BAND[0]:.3f} <= count/k <= {COUNT_BAND[1]:.3f}; {_UNIT_RULE}; "
    f"{verdicts.FRACTION_RULE}",
    "gaussian_tail": "unit = (snapshot of u, density); criterion "
    f"{COUNT_BAND[0]:.3f} <= count/k <= {COUNT_BAND[1]:.3f}, count = #{{|u_i| > mean + "
    "|Phi^-1(rho/2)| std}} (std unbiased: the published Gaussian-k's first threshold); "
    f"{_UNIT_RULE}; {verdicts.FRACTION_RULE}",
    "gaussiank_count_in_training": "unit = one step of the method's own training run; "
    f"criterion {COUNT_BAND[0]:.3f} <= count/k <= {COUNT_BAND[1]:.3f}, count = train "
    "selected_median (the median over workers; selected where not logged); steps of a density "
    f"warm-up form their own condition; {verdicts.FRACTION_RULE}; a holds needs every seed's "
    "median count/k in the band too (else mixed)",
    fitted_value.CLAIM: f"{fitted_value.RULE}; {_UNIT_RULE}",
}


# the model or sparsifier of a run whose manifest names none (Recorder(run_fields=) names them)
UNNAMED = "unnamed"


def build(
    runs: Iterable,
    sparsifiers: Sequence[str] = ("topk",),
    max_snapshots: int = 30,
    max_n: int | None = None,
    margin: float = verdicts.ACCURACY_MARGIN_POINTS,
    perplexity_margin: float = verdicts.PERPLEXITY_MARGIN_PCT,
) -> pd.DataFrame:
    """The claims table (COLUMNS) for every (model, dataset, substitute) among `runs`.

    Args:
        runs: loaded runs; complete ones feed every claim; failed ones (manifest status
            `failed`) count as failed seeds in the convergence claims, and the steps they
            recorded before they stopped (a killed worker, a crash) feed the distribution
            claims too, except a run whose training diverged (`diverged_at_step`: its u blew
            up, a failed seed, not a sample of training's u).
        sparsifiers: training sparsifiers whose runs feed the distribution claims.
        max_snapshots: at most this many snapshots per condition (pick_snapshots) get
            the full normality / fit / curve analysis (topkscope.analysis.snapshots.
            analyze_loaded, seed SEED, each snapshot analysed once per loaded run).
        max_n: the subsample size for their sort-based statistics (None: each statistic's
            own default).
        margin: the non-inferiority margin of the accuracy claims, in points (>= 0).
        perplexity_margin: the same for perplexity, in % of Top-k's perplexity (>= 0).
    """
    runs = list(runs)
    for run in runs:  # a Recorder in a loop of one's own may name neither: tabulated as unnamed
        for key in ("model", "sparsifier"):
            if run.manifest.get(key) is None:
                run.manifest[key] = UNNAMED
    sparsifiers = (sparsifiers,) if isinstance(sparsifiers, str) else tuple(sparsifiers)
    validate.integer("max_snapshots", max_snapshots, 0, whole_floats=True)
    margin = validate.number("margin", margin, 0.0)
    perplexity_margin = validate.number("perplexity_margin", perplexity_margin, 0.0)
    groups: dict[tuple, list] = {}
    for run in runs:
        groups.setdefault(model_key(run.manifest), []).append(run)
    rows: list[dict] = []
    for key in sorted(groups, key=lambda k: tuple("" if v is None else str(v) for v in k)):
        model_runs = [r for r in groups[key] if not published_claims.is_published(r.manifest)]
        base = {"model": key[0], "dataset": key[1], "dataset_substitute": key[2]}
        # published runs (no seeds, no recorder): their own rows (published_claims)
        rows += [{**base, **row} for row in published_claims.rows(groups[key])]
        if not model_runs:
            continue
        unnamed = (UNNAMED,) if any(r.manifest["sparsifier"] == UNNAMED for r in model_runs) \
            else ()
        trained = [r for r in model_runs if r.manifest.get("sparsifier") in (*sparsifiers,
                                                                                 *unnamed)
                   and diverged_at(r.manifest) is None]
        rows += [{**base, **row} for row in _distribution_rows(trained, (*sparsifiers, *unnamed),
                                                               int(max_snapshots), max_n)]
        rows += [{**base, **row,
                  "statement": STATEMENTS.get(row["claim"]) or IN_TRAINING_STATEMENT.format(
                      method=row["sparsifier"]),
                  "rule": RULES["gaussiank_count_in_training"]}
                 for row in selection.count_in_training_rows(model_runs, unit_conditions)]
        rule = convergence_claims.accuracy_rule(margin, perplexity_margin)
        for row in convergence_claims.rows(model_runs, margin, perplexity_margin):
            traffic = row["claim"].endswith("_traffic")
            statement = (convergence_claims.TRAFFIC_STATEMENT if traffic
                         else convergence_claims.ACCURACY_STATEMENT)
            rows.append({**base, **row, "statement": statement.format(
                method=row["sparsifier"], metric=row.get("metric") or "accuracy"),
                         "rule": convergence_claims.TRAFFIC_RULE if traffic else rule})
        rows += [{**base, **row} for row in contraction_convergence.rows(
            model_runs, margin, perplexity_margin)]
    return pd.DataFrame(rows, columns=COLUMNS)


def write(runs: Iterable, path: str | Path, **options) -> pd.DataFrame:
    """build(runs, **options), written atomically as CSV to path; returns the table."""
    table = build(runs, **options)
    atomic_write(path, lambda tmp: table.to_csv(tmp, index=False))
    return table


def what_is_missing(run) -> str | None:
    """Why the claims cannot read a loaded run, in words (None: they can): a manifest.json
    that is not topkscope's, a run that failed at set-up (before its first step), or one with
    no recorded rows. A run whose manifest names no model or sparsifier is read as UNNAMED."""
    m = run.manifest
    foreign = not_ours(m)
    if foreign is not None:
        return foreign
    rows = {name: len(getattr(run, name)) for name in ("train", "eval", "stats")}
    if not any(rows.values()):
        if m.get("status") == "failed":
            return (f"it failed at set-up, before its first step ({m.get('error')}): no "
                    "recorded rows (train.parquet, eval.parquet, stats/) to tabulate")
        return ("it holds no recorded rows (train.parquet, eval.parquet and stats/ are empty "
                "or absent): nothing to tabulate")
    return None


def model_key(manifest: dict) -> tuple:
    """(model, dataset, dataset_substitute) from a manifest; missing entries become None."""
    return manifest.get("model"), manifest.get("dataset"), manifest.get("dataset_substitute")


def section_of(claim: str, sparsifier: str, condition=None) -> str:
    """The section a claims row belongs to, from its claim, sparsifier and condition (the
    rule build() applies, usable on a table written before the column existed)."""
    if "speedup" in str(claim) or str(condition or "").startswith("prediction"):
        return "prediction"
    # a count claim of a method exact by construction (the robust gaussiank, randk) is a check
    if str(claim) in CHECK_CLAIMS or (str(claim).endswith((selection.IN_TRAINING, COUNT_ON_TOPK))
                                      and selection.by_construction(str(sparsifier))):
        return "check"
    if str(claim) == contraction_convergence.CLAIM:
        return contraction_convergence.SECTION
    if str(claim).endswith(("_accuracy", "_traffic")):
        return "convergence"
    return "distribution"


# --- distribution claims, per training sparsifier and condition ---------------------------


def _floats(column: pd.Series) -> np.ndarray:
    """A column as float64, nullable NA (e.g. Int64 counts with gaps) as NaN."""
    return column.astype("float64").to_numpy()


def unit_conditions(run, steps: Sequence[int]) -> list[str]:
    """The condition of each recorded step of a run: condition_of and the target density,
    plus the density trained at when the step lies in the density warm-up
    ("warmup=paper; rho=0.001; during warm-up at rho=0.015625")."""
    m = run.manifest
    density = m.get("density")
    base = condition_of(m) + (f"; rho={float(density):g}" if density is not None else "")
    tr = getattr(run, "train", None)
    epochs = None
    if tr is not None and not tr.empty and {"step", "epoch"} <= set(tr.columns):
        noted = tr[tr["epoch"].notna()]  # a hook run's epoch is null unless the script notes it
        by_step = dict(zip(noted["step"].astype(int), noted["epoch"].astype(int)))
        if all(int(s) in by_step for s in steps):
            epochs = [by_step[int(s)] for s in steps]
    try:
        warm, trained = phases.step_phases(m, steps, epochs)
    except ValueError:
        return [f"{base}; warm-up phase unknown"] * len(steps)
    return [f"{base}; {DURING_WARMUP}{t:g}" if w else base for w, t in zip(warm, trained)]


def _u_rows(runs: list) -> pd.DataFrame:
    frames = []
    for i, run in enumerate(runs):
        st = run.stats
        if st is None or st.empty or "kind" not in st or "layer" not in st:
            continue
        rows = st[(st["kind"] == "u") & (st["layer"] == GLOBAL)]
        if not rows.empty:
            steps = rows["step"].astype(int).to_numpy()
            unique = sorted(set(steps.tolist()))
            label = dict(zip(unique, unit_conditions(run, unique)))
            frames.append(rows.assign(_run=i, _sparsifier=run.manifest.get("sparsifier"),
                                      _condition=[label[s] for s in steps]))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _distribution_rows(runs: list, sparsifiers: tuple, max_snapshots: int,
                       max_n: int | None) -> list[dict]:
    u = _u_rows(runs)
    snaps = _snapshot_analyses(runs, max_snapshots, max_n)
    found = set()
    if not u.empty:
        found |= set(zip(u["_sparsifier"], u["_condition"]))
    found |= {(s["sparsifier"], s["condition"]) for s in snaps}
    if not found:
        return _claim_rows(",".join(sparsifiers), NO_UNITS, pd.DataFrame(), [], 0)
    out = []
    for sparsifier in [s for s in sparsifiers if any(f[0] == s for f in found)]:
        conditions = sorted(c for s, c in found if s == sparsifier)
        target = [c for c in conditions if DURING_WARMUP not in c]
        ordered = target + [c for c in conditions if c not in target]
        if len(target) > 1:
            ordered.append(ALL_CONDITIONS)
        for cond in ordered:
            wanted = set(target) if cond == ALL_CONDITIONS else {cond}
            sub = (u[(u["_sparsifier"] == sparsifier) & u["_condition"].isin(wanted)]
                   if not u.empty else u)
            picked = [s for s in snaps if s["sparsifier"] == sparsifier
                      and s["condition"] in wanted]
            used = (set(sub["_run"]) if not sub.empty else set()) | {s["_run"] for s in picked}
            out += _claim_rows(sparsifier, cond, sub, picked, len(used))
    return out


def _claim_rows(sparsifier: str, condition: str, u: pd.DataFrame, snaps: list[dict],
                n_runs: int) -> list[dict]:
    per_claim = {
        "gaussian_like": _gaussian_like(u, snaps),
        "below_classic": _below(u, "below_classic"),
        "below_paper": _below(u, "below_paper"),
        "gaussian_value": _below(u, "gaussian_value"),
        "convexity_condition": _convexity(snaps),
        "gaussian_tail": _gaussian_tail(snaps),
        fitted_value.CLAIM: fitted_value.claim(_fitted_units(snaps)),
    }
    rows = [{"claim": c, "sparsifier": sparsifier, **found} for c, found in per_claim.items()]
    for selector in RECORDED_SELECTORS:
        row = _count_on_topk(u, selector)
        if row is not None:
            rows.append({"claim": count_on_topk_claim(selector), "sparsifier": selector, **row})
    for row in rows:
        row.update(statement=STATEMENTS.get(row["claim"]) or ON_TOPK_STATEMENT.format(
                       method=row["sparsifier"]),
                   rule=RULES.get(row["claim"], RULES["gaussiank_count"]),
                   condition=condition, n_runs=n_runs,
                   section=section_of(row["claim"], row["sparsifier"]))
    return rows


def _fraction_row(passed: np.ndarray, evidence: str, runs=(), steps=()) -> dict:
    """The fraction rule on the units `passed`, each labelled by its run and step (the
    blocks of verdicts.share_interval)."""
    n, k = int(passed.size), int(np.count_nonzero(passed))
    low, high = verdicts.share_interval(passed, runs, steps) if n else (math.nan, math.nan)
    return {"n_units": n, "fraction": k / n if n else math.nan,
            "fraction_low": low, "fraction_high": high,
            "evidence": f"{k} of {n} units; {evidence}" if n else evidence,
            "verdict": verdicts.fraction_verdict(k, n, low, high),
            "cause": verdicts.fraction_cause(k, n, low, high)}  # fmt: skip


def _gaussian_like(u: pd.DataFrame, snaps: list[dict]) -> dict:
    units = pd.DataFrame(columns=["_run", "step", "rank", "skew", "excess_kurtosis"])
    if not u.empty and {"skew", "excess_kurtosis"} <= set(u.columns):
        units = u.drop_duplicates(["_run", "step", "rank"])[list(units.columns)]
    seen = set(zip(units["_run"], units["step"], units["rank"]))
    extra = [s for s in snaps if (s["_run"], s["step"], s["rank"]) not in seen]
    if extra:
        units = pd.concat([units, pd.DataFrame([
            {c: s[c] for c in ("_run", "step", "rank")}
            | {"skew": s["battery"]["skew"], "excess_kurtosis": s["battery"]["excess_kurtosis"]}
            for s in extra
        ])], ignore_index=True)  # fmt: skip
    skew, kurt = _floats(units["skew"]), _floats(units["excess_kurtosis"])
    defined = np.isfinite(skew) & np.isfinite(kurt)
    passed = verdicts.gaussian_like(skew[defined], kurt[defined])
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
    if units.empty:
        parts.append("no recorded u (stats kind u, layer __global__) and no snapshots")
    row = _fraction_row(passed, "; ".join(parts), units["_run"].to_numpy()[defined],
                        units["step"].to_numpy()[defined])
    row["gennorm_beta"] = float(np.median(betas)) if betas.size else math.nan
    return row


def _per_kd(closed_form, k: np.ndarray, d: np.ndarray) -> np.ndarray:
    """closed_form(k, d) of topkscope.bounds per unit, evaluated once per distinct (k, d)."""
    pairs, index = np.unique(np.stack([k, d], axis=1), axis=0, return_inverse=True)
    values = np.array([closed_form(int(a), int(b)) for a, b in pairs], dtype=np.float64)
    return values[np.asarray(index).reshape(-1)] if len(k) else np.zeros(0)


def _below(u: pd.DataFrame, claim: str) -> dict:
    if u.empty or "topk_ratio" not in u:
        return _fraction_row(np.zeros(0, bool), "no recorded topk_ratio for u")
    ratio = _floats(u["topk_ratio"])
    k, d = _floats(u["k"]), _floats(u["numel"])
    ok = np.isfinite(ratio) & (k > 0) & (d > 0)
    ratio, k, d, dens = ratio[ok], k[ok], d[ok], _floats(u["density"])[ok]
    blocks = u["_run"].to_numpy()[ok], u["step"].to_numpy()[ok]
    rho = k / d
    gaussian = _per_kd(bounds.gaussian_ratio, k, d)
    if claim == "below_classic":
        bound = 1.0 - rho
        passed = verdicts.is_below_classic(ratio, bound)
    elif claim == "below_paper":
        bound = (1.0 - rho) ** 2
        passed = verdicts.is_below_paper(ratio, bound)
    else:
        bound = gaussian
        passed = verdicts.is_at_most(ratio, bound)
    if not passed.size:
        return _fraction_row(passed, "no finite topk_ratio for u")
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
    row = _fraction_row(passed, "; ".join(per), *blocks)
    if claim in MARGIN_CLAIMS:
        row.update(bound_margin=float(np.nanmedian(margin)) if np.isfinite(margin).any()
                   else math.nan, delta_uniform=float(np.median(uniform)),
                   delta_gaussian=float(np.median(gaussian)))
    return row


def _convexity(snaps: list[dict]) -> dict:
    if not snaps:
        return _fraction_row(np.zeros(0, bool), "no snapshots of u (the curve needs every value)")
    ratios = pd.concat([s["ratios"].assign(_run=s["_run"], _step=s["step"]) for s in snaps],
                       ignore_index=True)
    ratios = ratios[np.isfinite(_floats(ratios["convexity_gap"]))]
    held = ratios["condition_holds"].astype(bool).to_numpy()
    evidence = (f"median convexity gap {np.nanmedian(_floats(ratios['convexity_gap'])):.3g} "
                f"against tolerances {_floats(ratios['convexity_tol']).min():.3g}-"
                f"{_floats(ratios['convexity_tol']).max():.3g} over {len(snaps)} snapshots")
    failed = ratios[~held]
    if len(failed):
        evidence += (f"; where the condition failed the bound (1-k/d)^2 still held in "
                     f"{int(failed['below_paper'].astype(bool).sum())} of {len(failed)} "
                     "(snapshot, density) checks")
    return _fraction_row(held, evidence, ratios["_run"].to_numpy(), ratios["_step"].to_numpy())


def _gaussian_tail(snaps: list[dict]) -> dict:
    """Units: (snapshot, density): the count needs every value of u, which only a snapshot
    holds; blocks of the share's interval are the snapshots' (run, step)."""
    tails = [(*t, s["_run"], s["step"]) for s in snaps for t in s["tail"]]
    if not tails:
        return _fraction_row(np.zeros(0, bool), "no snapshots of u (the tail count needs every "
                                                "value)")
    density, count, k = (np.array(c, dtype=np.float64) for c in list(zip(*tails))[:3])
    runs, steps = (np.array(c) for c in list(zip(*tails))[3:])
    passed = verdicts.in_count_band(count, k)
    per = []
    for rho in np.unique(density):
        lo, med, hi = np.percentile(count[density == rho] / k[density == rho], [5, 50, 95])
        per.append(f"density {rho:g}: count/k at the first threshold median {med:.3g}, "
                   f"5th-95th percentile {lo:.3g}-{hi:.3g}")
    return _fraction_row(passed, "; ".join(per) + f" over {len(snaps)} snapshots", runs, steps)


def _fitted_units(snaps: list[dict]) -> pd.DataFrame:
    parts = [s["fitted"].assign(run=s["_run"]) for s in snaps if len(s["fitted"])]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=fitted_value.UNIT_COLUMNS)


def count_on_topk_claim(selector: str) -> str:
    """gaussiank-2019 -> gaussiank_count, tail-k -> tail_count: the claim naming a recorded
    selector's count on Top-k's u."""
    return f"{claim_family(selector)}{COUNT_ON_TOPK}"


def _count_on_topk(u: pd.DataFrame, selector: str) -> dict | None:
    """The count claim of one recorded selector on Top-k's u (its `<S>_count` column), with
    the median recall and delta relative to Top-k's in the evidence; None where the column is
    absent or has no value (the selector was not evaluated on these units)."""
    prefix = column_prefix(selector)
    col = prefix + "_count"
    if u.empty or col not in u:
        return None
    count, k = _floats(u[col]), _floats(u["k"])
    ok = np.isfinite(count) & np.isfinite(k) & (k > 0)  # NaN / NA: not evaluated there
    if not ok.any():  # not evaluated in these runs (a column another run's recorder wrote)
        return None
    passed = verdicts.in_count_band(count[ok], k[ok])
    lo, med, hi = np.percentile(count[ok] / k[ok], [5, 50, 95])
    evidence = f"count/k median {med:.3g}, 5th-95th percentile {lo:.3g}-{hi:.3g}"
    for suffix, label in (("recall", "recall of the exact top-k"),
                          ("ratio_vs_topk", "delta / Top-k's")):
        values = _floats(u[f"{prefix}_{suffix}"])[ok] if f"{prefix}_{suffix}" in u else []
        values = np.asarray(values)[np.isfinite(values)]
        if values.size:
            evidence += f"; {label} median {np.median(values):.3g}"
    if selection.by_construction(selector):
        evidence += "; true by construction (it selects exactly k)"
    row = _fraction_row(passed, evidence, u["_run"].to_numpy()[ok], u["step"].to_numpy()[ok])
    row["count_over_k"] = float(med)
    return row


def pick_snapshots(found: list[tuple[int, int, int]], most: int) -> list[tuple[int, int, int]]:
    """At most `most` of the (run, step, rank) snapshots `found`, as many distinct (run, step)
    blocks as possible (the ranks of one step are one block of verdicts.share_interval, so a
    second rank adds less than another step): blocks evenly spaced over (step, run), one rank
    each (cycling over the ranks); then, while room is left, more ranks of those blocks."""
    by_step = sorted(found, key=lambda t: (t[1], t[0], t[2]))
    blocks: dict[tuple[int, int], list[int]] = {}
    for i, step, rank in by_step:
        blocks.setdefault((i, step), []).append(rank)
    order = list(blocks)
    chosen = np.unique(np.linspace(0, len(order) - 1, min(most, len(order))).round()).astype(int)
    picked = [(order[j][0], order[j][1], blocks[order[j]][n % len(blocks[order[j]])])
              for n, j in enumerate(chosen)]
    taken = set(picked)
    rest = [t for t in by_step if t not in taken]
    room = max(0, min(most, len(found)) - len(picked))
    if room and rest:
        extra = np.unique(np.linspace(0, len(rest) - 1, room).round()).astype(int)
        picked += [rest[j] for j in extra]
    return sorted(picked, key=lambda t: (t[1], t[0], t[2]))


def _snapshot_analyses(runs: list, max_snapshots: int, max_n: int | None) -> list[dict]:
    """The snapshot pipeline (analysis.snapshots.analyze_loaded: battery, fits, contraction at
    the recorder's densities, seed SEED) on at most max_snapshots snapshots of u per (training
    sparsifier, condition), chosen by pick_snapshots."""
    listed: dict[tuple, list[tuple[int, int, int]]] = {}
    for i, run in enumerate(runs):
        keys = snapshots.snapshot_keys(run)
        if not keys:
            continue
        steps = sorted({s for s, _ in keys})
        label = dict(zip(steps, unit_conditions(run, steps)))
        for step, rank in keys:
            where = (run.manifest.get("sparsifier"), label[step])
            listed.setdefault(where, []).append((i, step, rank))
    if max_snapshots == 0:
        return []
    out = []
    for (sparsifier, condition), found in sorted(listed.items()):
        for i, step, rank in pick_snapshots(found, max_snapshots):
            tables = snapshots.analyze_loaded(runs[i], step, rank, max_n=max_n)
            vector = runs[i].snapshot(step, rank)
            tail = [(rho, selection.gaussian_tail_count(vector, k), k)
                    for rho in snapshots.snapshot_densities(runs[i], step, rank)
                    if 1 <= (k := contraction.k_from_density(rho, vector.size)) <= vector.size]
            gennorm = tables.fits[(tables.fits["family"] == "gennorm")
                                  & (tables.fits["on"] == "x")]["shape"]
            out.append({
                "_run": i, "step": step, "rank": rank, "sparsifier": sparsifier,
                "condition": condition, "battery": tables.normality.iloc[0].to_dict(),
                "best_family": fits.best(tables.fits, "x") if not tables.fits.empty else "none",
                "beta": float(gennorm.iloc[0]) if len(gennorm) else math.nan,
                "ratios": tables.contraction, "tail": tail,
                "fitted": fitted_value.snapshot_units(tables.contraction, tables.fits),
            })  # fmt: skip
    return out
