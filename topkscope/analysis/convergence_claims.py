"""The convergence claims: each approximate method against exact Top-k, paired over seeds.

    <family>_accuracy  "<method> trains as well as exact Top-k"
    <family>_traffic   "<method> reaches Top-k's accuracy while sending at most 4/3 of Top-k's
                       elements"

One row of each per (experiment, density, condition, method); the rules are in
topkscope.analysis.verdicts. A unit is a seed with a run of both the method and Top-k under
the same condition (Top-k's condition is the method's density warm-up, without the method's
own deviations), each run complete or failed — a failed run (manifest status `failed`, e.g.
"training diverged at step N") counts with its last evaluated metric, or the metric's worst
value when it never evaluated; a seed with a complete run never uses a failed attempt of it.

Elements sent: train.parquet `selected` (mean per worker) summed over the steps both runs of
a seed logged, per phase of the density warm-up (topkscope.analysis.phases): `traffic_warmup`
and `traffic_target` (the target-density phase, which the traffic-matched verdict uses) and
`traffic_ratio` (the whole run), each the method's sum over Top-k's, mean over seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from topkscope.analysis import phases, verdicts
from topkscope.analysis.published_claims import is_published
from topkscope.manifest import condition_of

ACCURACY_STATEMENT = "{method} trains as well as exact Top-k"
# {metric}: the held-out metric the runs evaluate (accuracy; perplexity for language models)
TRAFFIC_STATEMENT = ("{method} reaches Top-k's {metric} while sending at most 4/3 of Top-k's "
                     "elements")
USED_STATUSES = ("complete", "failed")


def accuracy_rule(margin: float, perplexity_margin: float) -> str:
    return (
        "unit = one seed with runs (complete or failed) of the method and Top-k under the same "
        "condition; a failed run counts with its last evaluated metric (never evaluated: "
        "accuracy 0, perplexity infinite); paired difference of the final held-out metric "
        "(accuracy in points, perplexity in % of Top-k's), mean and 95% t-interval, against "
        f"the non-inferiority margin m = {margin:g} point(s) (accuracy) or {perplexity_margin:g}% "
        "(perplexity): holds if the interval lies on the good side of the margin (above -m; "
        "perplexity below +m), fails if on the other side, inconclusive if it contains it; a "
        "method failing on some seeds is at best inconclusive, and fails when it failed on "
        f"every seed; fewer than {verdicts.MIN_SEEDS} seeds: insufficient-data (inconclusive "
        "if one failed)"
    )


TRAFFIC_RULE = (
    "traffic per seed = elements sent (train selected, summed over the steps both runs logged) "
    "relative to Top-k's, per phase: density warm-up, target density, whole run "
    "(traffic_warmup, traffic_target, traffic_ratio: means over seeds); holds if the accuracy "
    "claim holds and every seed's target-density ratio <= 4/3; fails if the accuracy claim "
    "fails or every seed's target-density ratio > 4/3; else inconclusive; without a verdict "
    "on the accuracy claim: insufficient-data"
)


@dataclass
class SeedRun:
    """What one run of one seed contributes: its final metric, whether it failed, and the
    elements it sent per step with the step's phase."""

    metric: float
    name: str | None          # accuracy | perplexity; None: never evaluated
    failed: bool
    error: str
    sent: pd.Series           # selected per step (index: step)
    warmup: pd.Series         # per step (index: step): 1.0 warm-up, 0.0 target, NaN unknown
    run: object = None        # the loaded run it stands for


EVAL_SPLITS = ("test", "valid", "val")  # the held-out splits the final metric prefers, in order


def evaluated(run) -> tuple[pd.DataFrame, str] | None:
    """(rows, metric_name): the run's evaluation rows with a finite metric of the split the
    final metric reads (test, else valid/val, else any), sorted by step (stable), and the
    metric's name at the last of them; None without an evaluation."""
    ev = run.eval
    if ev is None or ev.empty or "metric" not in ev:
        return None
    for split in (*EVAL_SPLITS, None):
        rows = ev if split is None else ev[ev["split"] == split]
        rows = rows[np.isfinite(rows["metric"].astype("float64").to_numpy())]
        if not rows.empty:
            rows = rows.sort_values("step", kind="stable").reset_index(drop=True)
            return rows, str(rows.iloc[-1].get("metric_name", "accuracy"))
    return None


def final_metric(run) -> tuple[float, str] | None:
    """(metric, metric_name) at the last evaluated step of the split `evaluated` reads."""
    found = evaluated(run)
    if found is None:
        return None
    rows, name = found
    return float(rows["metric"].iloc[-1]), name


def topk_condition(condition: str) -> str:
    """The condition of the Top-k runs a method's runs under `condition` are paired with: the
    method's density warm-up, without its own deviations ("warmup=paper; empty_fallback=topk"
    -> "warmup=paper")."""
    return condition.split("; ")[0]


def claim_family(sparsifier: str) -> str:
    """gaussiank-2019 -> gaussiank, redsync-2019 -> redsync: the family a claim is named after."""
    return str(sparsifier).split("-")[0]


def _seed_run(run) -> SeedRun:
    m = run.manifest
    final = final_metric(run)
    tr = getattr(run, "train", None)
    if tr is None or tr.empty or "selected" not in tr or "step" not in tr:
        sent = pd.Series(dtype="float64")
        warm = pd.Series(dtype="float64")
    else:
        tr = tr.drop_duplicates("step", keep="last").sort_values("step")
        sent = pd.Series(tr["selected"].astype("float64").to_numpy(), index=tr["step"].to_numpy())
        try:
            epochs = tr["epoch"].to_numpy() if "epoch" in tr else None
            in_warmup, _ = phases.step_phases(m, tr["step"].to_numpy(), epochs)
        except ValueError:
            in_warmup = np.full(len(tr), np.nan)
        warm = pd.Series(np.asarray(in_warmup, dtype=np.float64), index=tr["step"].to_numpy())
    return SeedRun(metric=final[0] if final else math.nan, name=final[1] if final else None,
                   failed=m.get("status") == "failed", error=str(m.get("error") or ""),
                   sent=sent, warmup=warm, run=run)


def seed_cells(runs: list, dense: bool = False) -> dict[tuple, dict[int, SeedRun]]:
    """(experiment, density, condition, method) -> {seed: SeedRun}: the run standing for each
    seed, complete or failed (a complete run of a seed wins over a failed one; a complete run
    without an evaluation stands for nothing). Top-k runs sit under method "topk" of their own
    condition; dense runs are left out unless `dense`; imported published runs (no seed) are
    left out: their claims are topkscope.analysis.published_claims's."""
    cells: dict[tuple, dict[int, SeedRun]] = {}
    for run in runs:
        m = run.manifest
        if m.get("status") not in USED_STATUSES or (m.get("sparsifier") == "dense"
                                                    and not dense):
            continue
        if is_published(m):  # no seed was published: never a seed cell (published_claims)
            continue
        seed_run = _seed_run(run)
        if seed_run.name is None and not seed_run.failed:
            continue  # a complete run without an evaluation: nothing to compare
        key = (m.get("experiment"), m.get("density"), condition_of(m), m.get("sparsifier"))
        seeds = cells.setdefault(key, {})
        seed = m.get("seed", 0)
        if seed not in seeds or (seeds[seed].failed and not seed_run.failed):
            seeds[seed] = seed_run
    return cells


def rows(runs: list, margin: float = verdicts.ACCURACY_MARGIN_POINTS,
         perplexity_margin: float = verdicts.PERPLEXITY_MARGIN_PCT) -> list[dict]:
    """The accuracy and traffic rows (claims COLUMNS, less model/dataset) of `runs`."""
    cells = seed_cells(runs)
    densities: dict = {}
    for experiment, density, _, _ in cells:
        densities.setdefault(experiment, set()).add(density)
    out = []
    for (experiment, density, condition, method), by_seed in sorted(
            cells.items(), key=lambda kv: tuple(str(v) for v in kv[0])):
        if method == "topk":
            continue
        topk = cells.get((experiment, density, topk_condition(condition), "topk"), {})
        named = (f"{condition}; rho={float(density):g}" if len(densities[experiment]) > 1
                 else condition)  # a density sensitivity: one row per density, named
        out += _method_rows(experiment, density, named, method, by_seed, topk, margin,
                            perplexity_margin)
    return out


def _phase_ratio(mine: SeedRun, topk: SeedRun, phase: str | None) -> float:
    """The method's elements over Top-k's on the steps both logged (phase: warm-up, target or
    None for every step); NaN when Top-k sent nothing there or the phases are unknown."""
    steps = mine.sent.index.intersection(topk.sent.index)
    if phase is not None:
        warm = mine.warmup.reindex(steps)
        if warm.isna().any():
            return math.nan
        steps = steps[(warm.to_numpy() == 1.0) == (phase == phases.WARMUP)]
    ref = float(topk.sent.reindex(steps).sum())
    return float(mine.sent.reindex(steps).sum()) / ref if ref > 0 else math.nan


def traffic_ratios(method_run, topk_run) -> dict[str, float]:
    """The elements a method's run sent over those of Top-k's run of the same seed, on the
    steps both logged, per phase: {"warm-up": ..., "target": ..., "whole run": ...} (NaN where
    a phase is empty or unknown)."""
    mine, topk = _seed_run(method_run), _seed_run(topk_run)
    return {phases.WARMUP: _phase_ratio(mine, topk, phases.WARMUP),
            phases.TARGET: _phase_ratio(mine, topk, phases.TARGET),
            WHOLE_RUN: _phase_ratio(mine, topk, None)}


WHOLE_RUN = "whole run"


def _mean(values: list[float]) -> float:
    x = np.asarray(values, dtype=np.float64)
    return float(x.mean()) if x.size and np.isfinite(x).all() else math.nan


def seed_value(seed_run: SeedRun, name: str) -> tuple[float, str]:
    """(metric, note) a seed's run counts with: its final metric; a failed run its last
    evaluated metric, or the metric's worst value (verdicts.WORST) when it never evaluated."""
    if not seed_run.failed:
        return seed_run.metric, ""
    why = seed_run.error or "run failed"
    if seed_run.name is None or not math.isfinite(seed_run.metric):
        worst = verdicts.WORST.get(name, math.nan)
        return worst, f"failed ({why}) before any evaluation: counted as {name} {worst:g}"
    return seed_run.metric, f"failed ({why}): counted with its last evaluated {name}"


def _method_rows(experiment, density, condition, method, mine, topk, margin,
                 perplexity_margin) -> list[dict]:
    family = claim_family(method)
    seeds = sorted(set(mine) & set(topk))
    name = next((r.name for r in [*(topk[s] for s in seeds), *(mine[s] for s in seeds)]
                 if r.name), "accuracy")
    row_margin = verdicts.default_margin(name, margin, perplexity_margin)
    base = {"claim": f"{family}_accuracy", "sparsifier": method, "condition": condition,
            "section": "convergence", "metric": name, "margin": row_margin,
            "n_runs": len(mine) + len(topk), "n_units": len(seeds), "n_seeds": len(seeds),
            "n_failed_seeds": sum(mine[s].failed for s in seeds)}
    where = f"{experiment} density {density} ({condition})"
    if not seeds:
        verdict, cause = verdicts.convergence_verdict(math.nan, math.nan, 0, 0, name, row_margin)
        acc = {**base, "evidence": f"{where}: no seed has runs of both topk and {method}",
               "verdict": verdict, "cause": cause}
        return [acc, {**acc, "claim": f"{family}_traffic"}]
    mine_vals = {s: seed_value(mine[s], name) for s in seeds}
    topk_vals = {s: seed_value(topk[s], name) for s in seeds}
    diffs = [verdicts.paired_difference(name, topk_vals[s][0], mine_vals[s][0]) for s in seeds]
    mean, low, high = verdicts.paired_interval(diffs)
    verdict, cause = verdicts.convergence_verdict(low, high, len(seeds), base["n_failed_seeds"],
                                                  name, row_margin)
    unit = verdicts.diff_unit(name)
    ratios = {phase: [_phase_ratio(mine[s], topk[s], phase) for s in seeds]
              for phase in (phases.WARMUP, phases.TARGET, None)}
    has_warmup = any(bool((mine[s].warmup == 1.0).any()) for s in seeds)
    per_seed = ", ".join(f"seed {s} {verdicts.signed(d)}" for s, d in zip(seeds, diffs))
    notes = [f"method seed {s} {mine_vals[s][1]}" for s in seeds if mine_vals[s][1]]
    notes += [f"Top-k seed {s} {topk_vals[s][1]}" for s in seeds if topk_vals[s][1]]
    finals = (f"{name} Top-k {np.mean([topk_vals[s][0] for s in seeds]):.4g} vs {method} "
              f"{np.mean([mine_vals[s][0] for s in seeds]):.4g} (means over {len(seeds)} seeds)")
    ci = (f"paired difference {verdicts.signed(mean)}{unit}, 95% interval "
          f"{verdicts.interval_text(low, high, name)}" if math.isfinite(low)
          else f"paired difference {verdicts.signed(mean)}{unit}, no interval")
    sent = _sent_text(ratios, has_warmup)
    evidence = "; ".join([f"{where}: {finals}", ci, f"per seed ({method} − Top-k) {per_seed}",
                          *notes, sent])
    acc = {**base, "fraction": math.nan, "ci_low": low, "ci_high": high, "diff_mean": mean,
           "traffic_ratio": _mean(ratios[None]),
           "traffic_warmup": _mean(ratios[phases.WARMUP]) if has_warmup else math.nan,
           "traffic_target": _mean(ratios[phases.TARGET]),
           "evidence": evidence, "verdict": verdict, "cause": cause}
    tv, tcause = verdicts.traffic_verdict(verdict, cause, ratios[phases.TARGET])
    return [acc, {**acc, "claim": f"{family}_traffic", "verdict": tv, "cause": tcause}]


def _sent_text(ratios: dict, has_warmup: bool) -> str:
    def one(values: list[float]) -> str:
        x = np.asarray(values, dtype=np.float64)
        if not x.size or not np.isfinite(x).all():
            return "unknown"
        spread = f" (seeds {x.min():.3g}–{x.max():.3g})" if x.size > 1 else ""
        return f"{x.mean():.3g}× Top-k's{spread}"

    parts = [f"target density {one(ratios[phases.TARGET])}"]
    if has_warmup:
        parts.insert(0, f"warm-up {one(ratios[phases.WARMUP])}")
    parts.append(f"whole run {one(ratios[None])}")
    return "elements sent: " + ", ".join(parts)
