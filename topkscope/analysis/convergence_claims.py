"""The convergence claims: each approximate method against exact Top-k, paired over seeds.

    <family>_accuracy  "<method> trains as well as exact Top-k"
    <family>_traffic   "<method> reaches Top-k's accuracy while sending at most 4/3 of Top-k's
                       elements"

One row of each per (experiment, density, condition, method); the rules are in
topkscope.analysis.verdicts. A unit is a seed with a run of both the method and Top-k under
the same condition (Top-k's condition is the method's density warm-up, without the method's
own deviations), each run complete, failed or unfinished — a failed run (manifest status
`failed`, e.g. "training diverged at step N") or an unfinished one (status `interrupted` or
`running`: it never reached its last step) counts with its last evaluated metric, or the
metric's worst value when it never evaluated, and never lets the claim hold, the method's and
Top-k's alike (n_failed_seeds, n_unfinished_seeds count the seeds where either run failed /
is unfinished); a seed with a complete run never uses a failed or unfinished attempt of it.

Elements sent: train.parquet `selected` (mean per worker) summed over the steps both runs of
a seed logged, per phase of the density warm-up (topkscope.analysis.phases): `traffic_warmup`
and `traffic_target` (the target-density phase, which the traffic-matched verdict uses) and
`traffic_ratio` (the whole run), each the method's sum over Top-k's, mean over seeds; and
`traffic_vs_plain_topk`: the whole run's elements against Top-k WITHOUT a density warm-up
(condition warmup=none) of the same seed, so the warm-up's own cost shows. Seeds that disagree
in kind (some above 4/3, some below 2/3 of Top-k's) are named with their spread: the mean of
such an outcome describes no seed, and the traffic-matched claim cannot hold.
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
UNFINISHED_STATUSES = ("interrupted", "running")  # counted, as unfinished seeds
CLAIMED_STATUSES = (*USED_STATUSES, *UNFINISHED_STATUSES)
PLAIN = "warmup=none"  # the condition of Top-k without a density warm-up


def accuracy_rule(margin: float, perplexity_margin: float) -> str:
    return (
        "unit = one seed with runs (complete, failed or unfinished) of the method and Top-k under "
        "the same condition; a failed or unfinished (interrupted, running) run counts with its "
        "last evaluated metric (never evaluated: accuracy 0, perplexity infinite) and never lets "
        "the claim hold, the method's or Top-k's; paired difference of the final held-out metric "
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
    "(traffic_warmup, traffic_target, traffic_ratio: means over seeds), and the whole run "
    "against Top-k without warm-up (traffic_vs_plain_topk); the verdict uses traffic_target: "
    "holds if the accuracy claim holds and every seed's target-density ratio <= 4/3; fails if "
    "the accuracy claim fails or every seed's target-density ratio > 4/3; else inconclusive "
    "(seeds above 4/3 and below 2/3 at once: the per-seed spread is named); without a verdict "
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
    unfinished: bool = False  # interrupted or running: it never reached its last step


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
                   unfinished=m.get("status") in UNFINISHED_STATUSES,
                   sent=sent, warmup=warm, run=run)


def seed_cells(runs: list, dense: bool = False) -> dict[tuple, dict[int, SeedRun]]:
    """(experiment, density, condition, method) -> {seed: SeedRun}: the run standing for each
    seed, complete, failed or unfinished (a complete run of a seed wins over a failed or
    unfinished one, a failed one over an unfinished one; a complete run without an evaluation
    stands for nothing). Top-k runs sit under method "topk" of their own
    condition; dense runs are left out unless `dense`; imported published runs (no seed) are
    left out: their claims are topkscope.analysis.published_claims's."""
    cells: dict[tuple, dict[int, SeedRun]] = {}
    for run in runs:
        m = run.manifest
        if m.get("status") not in CLAIMED_STATUSES or (m.get("sparsifier") == "dense"
                                                       and not dense):
            continue
        if is_published(m):  # no seed was published: never a seed cell (published_claims)
            continue
        seed_run = _seed_run(run)
        if seed_run.name is None and not (seed_run.failed or seed_run.unfinished):
            continue  # a complete run without an evaluation: nothing to compare
        key = (m.get("experiment"), m.get("density"), condition_of(m), m.get("sparsifier"))
        seeds = cells.setdefault(key, {})
        seed = m.get("seed", 0)
        if seed not in seeds or _standing(seed_run) < _standing(seeds[seed]):
            seeds[seed] = seed_run
    return cells


def _standing(seed_run: SeedRun) -> int:
    """Which run of a seed stands for it: complete (0) before failed (1) before unfinished."""
    return 2 if seed_run.unfinished else 1 if seed_run.failed else 0


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
        plain = cells.get((experiment, density, PLAIN, "topk"), {})
        out += _method_rows(experiment, density, named, method, by_seed, topk, margin,
                            perplexity_margin, plain)
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
    """(metric, note) a seed's run counts with: its final metric; a failed or unfinished run
    its last evaluated metric, or the metric's worst value (verdicts.WORST) when it never
    evaluated."""
    if not (seed_run.failed or seed_run.unfinished):
        return seed_run.metric, ""
    why = (f"unfinished, {seed_run.run.manifest.get('status')}" if seed_run.unfinished
           else seed_run.error or "run failed")
    if seed_run.unfinished:
        if seed_run.name is None or not math.isfinite(seed_run.metric):
            worst = verdicts.WORST.get(name, math.nan)
            return worst, f"is {why} before any evaluation: counted as {name} {worst:g}"
        return seed_run.metric, f"is {why}: counted with its last evaluated {name}"
    if seed_run.name is None or not math.isfinite(seed_run.metric):
        worst = verdicts.WORST.get(name, math.nan)
        return worst, f"failed ({why}) before any evaluation: counted as {name} {worst:g}"
    return seed_run.metric, f"failed ({why}): counted with its last evaluated {name}"


def _method_rows(experiment, density, condition, method, mine, topk, margin,
                 perplexity_margin, plain=None) -> list[dict]:
    family = claim_family(method)
    seeds = sorted(set(mine) & set(topk))
    name = next((r.name for r in [*(topk[s] for s in seeds), *(mine[s] for s in seeds)]
                 if r.name), "accuracy")
    row_margin = verdicts.default_margin(name, margin, perplexity_margin)
    base = {"claim": f"{family}_accuracy", "sparsifier": method, "condition": condition,
            "section": "convergence", "metric": name, "margin": row_margin,
            "n_runs": len(mine) + len(topk), "n_units": len(seeds), "n_seeds": len(seeds),
            "n_failed_seeds": sum(mine[s].failed or topk[s].failed for s in seeds),
            "n_unfinished_seeds": sum(mine[s].unfinished or topk[s].unfinished for s in seeds)}
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
    own_bad = sum(mine[s].failed for s in seeds)  # the method's failed seeds decide 'fails'
    verdict, cause = verdicts.convergence_verdict(low, high, len(seeds), own_bad, name,
                                                  row_margin)
    verdict, cause = _not_holding(verdict, cause, seeds, mine, topk)
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
    vs_plain = {s: _phase_ratio(mine[s], plain[s], None) for s in seeds if s in (plain or {})}
    sent = _sent_text(ratios, has_warmup)
    if vs_plain:
        sent += (f", whole run against Top-k without warm-up {_spread_text(vs_plain)} "
                 f"({len(vs_plain)} of {len(seeds)} seeds have a {PLAIN} Top-k run)")
    evidence = "; ".join([f"{where}: {finals}", ci, f"per seed ({method} − Top-k) {per_seed}",
                          *notes, sent])
    acc = {**base, "fraction": math.nan, "ci_low": low, "ci_high": high, "diff_mean": mean,
           "traffic_ratio": _mean(ratios[None]),
           "traffic_warmup": _mean(ratios[phases.WARMUP]) if has_warmup else math.nan,
           "traffic_target": _mean(ratios[phases.TARGET]),
           "traffic_vs_plain_topk": (_mean(list(vs_plain.values()))
                                     if len(vs_plain) == len(seeds) else math.nan),
           "evidence": evidence, "verdict": verdict, "cause": cause}
    tv, tcause = verdicts.traffic_verdict(verdict, cause, ratios[phases.TARGET])
    target = dict(zip(seeds, ratios[phases.TARGET]))
    tcause = f"{tcause} (ratio used: traffic_target, against Top-k under the same warm-up)"
    if disagree_in_kind(target.values()):
        tcause += (f"; seeds disagree in kind, {_spread_text(target)}: the mean describes no "
                   "seed")
        tv = "inconclusive" if tv == "holds" else tv
    return [acc, {**acc, "claim": f"{family}_traffic", "verdict": tv, "cause": tcause}]


def disagree_in_kind(ratios) -> bool:
    """Some seeds sent more than 4/3 of the reference's elements and some less than 2/3: a
    bimodal outcome whose mean describes no seed."""
    x = np.asarray(list(ratios), dtype=np.float64)
    x = x[np.isfinite(x)]
    return bool((x > verdicts.TRAFFIC_LIMIT).any() and (x < 2.0 / 3.0).any())


def _spread_text(by_seed: dict) -> str:
    """'0.721× (seed 0 0.106×, seed 1 1.95×)': the mean and every seed's value."""
    x = np.asarray(list(by_seed.values()), dtype=np.float64)
    each = ", ".join(f"seed {s} {v:.3g}×" for s, v in by_seed.items())
    return f"{x.mean():.3g}× ({each})" if np.isfinite(x).all() else f"unknown ({each})"


def _not_holding(verdict: str, cause: str, seeds, mine, topk) -> tuple[str, str]:
    """A failed Top-k seed or an unfinished run (either method's) never lets a claim hold:
    holds becomes inconclusive, and the cause names them."""
    named = [f"Top-k seed {s} failed" for s in seeds if topk[s].failed]
    named += [f"{who} seed {s} unfinished ({runs[s].run.manifest.get('status')})"
              for who, runs in (("method", mine), ("Top-k", topk)) for s in seeds
              if runs[s].unfinished]
    if not named:
        return verdict, cause
    return ("inconclusive" if verdict == "holds" else verdict), f"{'; '.join(named)}; {cause}"


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
