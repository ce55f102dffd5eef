"""The convergence claims: each approximate method against exact Top-k, paired over seeds.

    <family>_accuracy  "<method> trains as well as exact Top-k"
    <family>_traffic   "<method> reaches Top-k's accuracy while sending at most 4/3 of Top-k's
                       elements"

One row of each per (experiment, density, condition, method); the condition always names the
target density ("warmup=none; rho=0.001"), so every profile's rows join. A unit is a seed with
a run of both the method and Top-k under the same condition (topkscope.analysis.seeds: failed
and unfinished runs count, never letting the claim hold). The rules are
topkscope.claims.verdicts's paired-seed and traffic-matched rules.

Traffic: `traffic_warmup`, `traffic_target` (the target-density phase, which the
traffic-matched verdict uses) and `traffic_ratio` (the whole run): elements sent (train
`selected`, the mean per worker) over Top-k's, mean over seeds; `traffic_vs_plain_topk`: the
whole run against Top-k WITHOUT a density warm-up of the same seed; `bytes_ratio`: wire bytes
(train `bytes_sent`, which holds the padding and counts of the exchange too) over Top-k's,
whole run. `diff_mean`, `ci_low`, `ci_high` and `margin` are in `diff_unit` (points of
accuracy; % of Top-k's perplexity), method minus Top-k.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from topkscope.analysis import criteria, phases
from topkscope.analysis.seeds import (
    PLAIN,
    disagree_in_kind,
    phase_ratio,
    seed_cells,
    seed_value,
    topk_condition,
)
from topkscope.analysis.units import with_runs
from topkscope.claims import phrases, verdicts
from topkscope.claims.build import run_ids
from topkscope.claims.inputs import ModelRuns
from topkscope.claims.registry import Claim, Presentation, Question, register_claim

DIFF_UNITS = {"accuracy": "points", "perplexity": "% of Top-k's"}


def accuracy_rule(options) -> str:
    margin = options.margin if options else criteria.ACCURACY_MARGIN_POINTS
    perplexity_margin = (options.perplexity_margin if options
                         else criteria.PERPLEXITY_MARGIN_PCT)
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
        f"every seed; fewer than {criteria.MIN_SEEDS} seeds: insufficient-data (inconclusive "
        "if one failed)"
    )


TRAFFIC_RULE = (
    "traffic per seed = elements sent (train selected, summed over the steps both runs logged) "
    "relative to Top-k's, per phase: density warm-up, target density, whole run "
    "(traffic_warmup, traffic_target, traffic_ratio: means over seeds), and the whole run "
    "against Top-k without warm-up (traffic_vs_plain_topk); wire bytes (bytes_ratio) beside; "
    "the verdict uses traffic_target: holds if the accuracy claim holds and every seed's "
    "target-density ratio <= 4/3; fails if the accuracy claim fails or every seed's "
    "target-density ratio > 4/3; else inconclusive (seeds above 4/3 and below 2/3 at once: the "
    "per-seed spread is named); without a verdict on the accuracy claim: insufficient-data"
)


def rows(model: ModelRuns) -> list[dict]:
    """The accuracy and traffic rows of one model's runs (both claims' rows: they share the
    paired seeds)."""
    from topkscope.claims.outer import outer_experiments

    outer = outer_experiments(model.runs)  # their trainings are compared by claims.outer
    cells = seed_cells([r for r in model.runs if r.manifest.get("experiment") not in outer])
    out = []
    for (experiment, density, condition, method), by_seed in sorted(
            cells.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]),
                                           kv[0][2].training_key(), str(kv[0][3]))):
        if method == "topk":
            continue
        topk = cells.get((experiment, density, topk_condition(condition), "topk"), {})
        plain = cells.get((experiment, density, PLAIN, "topk"), {})
        runs = [s.run for s in (*by_seed.values(), *topk.values())]
        named = with_runs(replace(condition, training_density=float(density),
                                  reference="topk"), runs)
        out += _method_rows(experiment, density, named, method, by_seed, topk, model.options,
                            plain)
    return out


def _mean(values: list[float]) -> float:
    x = np.asarray(values, dtype=np.float64)
    return float(x.mean()) if x.size and np.isfinite(x).all() else math.nan


def _method_rows(experiment, density, condition, method, mine, topk, options,
                 plain=None) -> list[dict]:
    seeds = sorted(set(mine) & set(topk))
    name = next((r.name for r in [*(topk[s] for s in seeds), *(mine[s] for s in seeds)]
                 if r.name), "accuracy")
    row_margin = criteria.default_margin(name, options.margin, options.perplexity_margin)
    bad = sum(mine[s].failed or topk[s].failed or mine[s].unfinished or topk[s].unfinished
              for s in seeds)
    base = {"sparsifier": method, "condition": condition,
            "run_ids": run_ids([r.run for r in (*mine.values(), *topk.values())]),
            "section": "convergence", "metric": name, "margin": row_margin,
            "diff_unit": DIFF_UNITS.get(name, ""),
            "n_runs": len(mine) + len(topk), "n_units": len(seeds), "n_seeds": len(seeds),
            "n_failed_seeds": sum(mine[s].failed or topk[s].failed for s in seeds),
            "n_unfinished_seeds": sum(mine[s].unfinished or topk[s].unfinished for s in seeds)}
    where = f"{experiment} density {density} ({condition.key()})"
    if not seeds:
        verdict, cause = verdicts.convergence_verdict(math.nan, math.nan, 0, 0, name, row_margin)
        acc = {**base, "evidence": f"{where}: no seed has runs of both topk and {method}",
               "verdict": verdict, "cause": cause, "reason": "not-measured"}
        return [acc, {**acc, "claim_key": "traffic"}]
    mine_vals = {s: seed_value(mine[s], name) for s in seeds}
    topk_vals = {s: seed_value(topk[s], name) for s in seeds}
    diffs = [criteria.paired_difference(name, topk_vals[s][0], mine_vals[s][0]) for s in seeds]
    mean, low, high = criteria.paired_interval(diffs)
    own_bad = sum(mine[s].failed for s in seeds)  # the method's failed seeds decide 'fails'
    verdict, cause = verdicts.convergence_verdict(low, high, len(seeds), own_bad, name,
                                                  row_margin, _blocking(seeds, mine, topk))
    reason = verdicts.convergence_reason(verdict, len(seeds), low, high, bad)
    unit = criteria.diff_unit(name)
    ratios = {phase: [phase_ratio(mine[s], topk[s], phase) for s in seeds]
              for phase in (phases.WARMUP, phases.TARGET, None)}
    from topkscope.analysis.seeds import bytes_ratio

    wire = [bytes_ratio(mine[s], topk[s]) for s in seeds]
    has_warmup = any(bool((mine[s].warmup == 1.0).any()) for s in seeds)
    per_seed = ", ".join(f"seed {s} {criteria.signed(d)}" for s, d in zip(seeds, diffs))
    notes = [f"method seed {s} {mine_vals[s][1]}" for s in seeds if mine_vals[s][1]]
    notes += [f"Top-k seed {s} {topk_vals[s][1]}" for s in seeds if topk_vals[s][1]]
    finals = (f"{name} Top-k {np.mean([topk_vals[s][0] for s in seeds]):.4g} vs {method} "
              f"{np.mean([mine_vals[s][0] for s in seeds]):.4g} (means over {len(seeds)} seeds)")
    ci = (f"paired difference {criteria.signed(mean)}{unit}, 95% interval "
          f"{criteria.interval_text(low, high, name)}" if math.isfinite(low)
          else f"paired difference {criteria.signed(mean)}{unit}, no interval")
    vs_plain = {s: phase_ratio(mine[s], plain[s], None) for s in seeds if s in (plain or {})}
    sent = _sent_text(ratios, has_warmup)
    if math.isfinite(_mean(wire)):
        sent += f"; wire bytes, whole run, {_mean(wire):.3g}× Top-k's"
    if vs_plain:
        sent += (f", whole run against Top-k without warm-up {_spread_text(vs_plain)} "
                 f"({len(vs_plain)} of {len(seeds)} seeds have a {PLAIN.training_key()} Top-k run)")
    evidence = "; ".join([f"{where}: {finals}", ci, f"per seed ({method} − Top-k) {per_seed}",
                          *notes, sent])
    acc = {**base, "fraction": math.nan, "ci_low": low, "ci_high": high, "diff_mean": mean,
           "traffic_ratio": _mean(ratios[None]), "bytes_ratio": _mean(wire),
           "traffic_warmup": _mean(ratios[phases.WARMUP]) if has_warmup else math.nan,
           "traffic_target": _mean(ratios[phases.TARGET]),
           "traffic_vs_plain_topk": (_mean(list(vs_plain.values()))
                                     if len(vs_plain) == len(seeds) else math.nan),
           "evidence": evidence, "verdict": verdict, "cause": cause, "reason": reason}
    target = dict(zip(seeds, ratios[phases.TARGET]))
    spread = _spread_text(target) if disagree_in_kind(target.values()) else ""
    tv, tcause = verdicts.traffic_verdict(verdict, cause, ratios[phases.TARGET], spread)
    treason = verdicts.traffic_reason(tv, reason, ratios[phases.TARGET])
    return [acc, {**acc, "claim_key": "traffic", "verdict": tv, "cause": tcause,
                  "reason": treason}]


def _spread_text(by_seed: dict) -> str:
    """'0.721× (seed 0 0.106×, seed 1 1.95×)': the mean and every seed's value."""
    x = np.asarray(list(by_seed.values()), dtype=np.float64)
    each = ", ".join(f"seed {s} {v:.3g}×" for s, v in by_seed.items())
    return f"{x.mean():.3g}× ({each})" if np.isfinite(x).all() else f"unknown ({each})"


def _blocking(seeds, mine, topk) -> list[str]:
    """What keeps a comparison from holding besides the method's own failed seeds: a failed
    Top-k seed, an unfinished run of either method (topkscope.claims.verdicts)."""
    named = [f"Top-k seed {s} failed" for s in seeds if topk[s].failed]
    named += [f"{who} seed {s} unfinished ({runs[s].run.manifest.get('status')})"
              for who, runs in (("method", mine), ("Top-k", topk)) for s in seeds
              if runs[s].unfinished]
    return named


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


GAUSSIAN_K = ("gaussiank", "gaussiank-2019")  # the paper's selector, robust and as published

register_claim(Claim(
    "accuracy", "Does each approximate method train as well as exact Top-k?",
    "{method} trains as well as exact Top-k", accuracy_rule, "convergence", "model", rows,
    "convergence", per_method=True,
    questions=(Question("gaussiank_accuracy", "Does Gaussian-k train as well as Top-k?",
                        sparsifiers=GAUSSIAN_K, summary=4, order=50,
                        short="Does Gaussian-k train as well as Top-k?"),
               Question("other_accuracy", "Do the other approximate methods train as well as "
                        "Top-k?", order=55)),
    show=Presentation("convergence", "trains as well as Top-k", phrases.accuracy,
                      phrases.accuracy_lead)))
# the traffic rows come with the accuracy rows (rows() makes both from the same seeds)
register_claim(Claim(
    "traffic", "Does it do so while sending at most 4/3 of Top-k's elements?",
    "{method} reaches Top-k's {metric} while sending at most 4/3 of Top-k's elements",
    TRAFFIC_RULE, "convergence", "model", lambda model: [], "convergence", per_method=True,
    show=Presentation("convergence", "traffic-matched")))
