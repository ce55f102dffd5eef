"""Claim `<family>_time_to_accuracy`: does the method reach Top-k's accuracy target sooner on
P = 16 workers (predicted from the measured convergence)? The table of per-seed times is
topkscope.perf.time_to_accuracy's (its module doc gives how each time is predicted).

Per (experiment, density, condition, method, network) at P = 16, over the paired seeds, with e
the model's validated error (topkscope.perf.published.comparison_error) and speed-up_s =
T_topk,s / T_m,s (topkscope.claims.verdicts.time_verdict), the same seed-and-interval rule as
the accuracy claim: a seed on which the method never reaches the target counts with speed-up 0
(its worst value) and never lets the claim hold; no paired seed: insufficient-data; every
seed's run of the method failed, or no seed reached the target: fails; fewer than 3 paired
seeds: insufficient-data (inconclusive when one failed); selection not counted: inconclusive;
else the mean speed-up's 95% Student-t interval over the seeds against 1 ± e: holds if it lies
above 1 + e, fails if below 1 - e, else inconclusive. `diff_mean`, `ci_low`, `ci_high`: the
mean speed-up and its interval; `speedup_low`, `speedup_high`: the seeds' range; `n_never`:
the seeds that never reached the target.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from topkscope.analysis.criteria import MIN_SEEDS, limit_text, speedup_interval
from topkscope.analysis.seeds import UNFINISHED_STATUSES
from topkscope.claims import phrases
from topkscope.claims.registry import Claim, Presentation, Question, register_claim
from topkscope.claims.row import ClaimRow, frame
from topkscope.claims.verdicts import blocked_time_reason, time_reason, time_verdict
from topkscope.condition import from_record
from topkscope.perf.inputs import SELECTION_MEASURED
from topkscope.perf.published import comparison_error
from topkscope.perf.report import CLAIM_P
from topkscope.perf.time_to_accuracy import BASELINE, REFERENCE, SELECTION_NOT_COUNTED

CLAIM_SUFFIX = "_time_to_accuracy"


def target_text(metric: str, margin: float) -> str:
    """"Top-k's final accuracy − 1 point" / "Top-k's final perplexity + 3%": the target."""
    return f"Top-k's final {metric} {limit_text(metric, margin)}"


def rule(metric: str, margin: float) -> str:
    return (f"per seed: target = {target_text(metric, margin)} (same seed, same condition, as "
            "the convergence claims pair them; a failed run counts with its evaluations); "
            "steps = the first evaluated step at or past the target (not interpolated), "
            "measured in the runs at their own P (the row's condition names it); "
            "predicted time = steps x the step-time model's t_step at P = "
            f"{CLAIM_P} with that run's own counts (topkscope.perf.time_to_accuracy); "
            "speed-up = Top-k's time / the method's, 0 on a seed that never reaches the target; "
            "with e the model's validated error, the 95% t-interval of the mean speed-up over "
            "the seeds: holds if it lies above 1 + e and every seed finished and reached the "
            "target (else inconclusive), fails if it lies below 1 - e or the method failed or "
            "never reached the target on every seed, else inconclusive; selection times measured on another device than the compute are "
            f"not counted and the verdict is at most inconclusive; fewer than "
            f"{MIN_SEEDS} paired seeds: insufficient-data (inconclusive if one failed)")


def _statuses(rows: pd.DataFrame, seeds) -> list[tuple[int, str]]:
    """(seed, run status) of the paired seeds."""
    by = dict(zip(rows["seed"].astype(int), rows["status"].astype(str)))
    return [(s, by[s]) for s in seeds if s in by]


def _times(rows: pd.DataFrame) -> dict[int, float | None]:
    return {int(r.seed): (None if not r.reached else float(r.time_to_target_s))
            for r in rows.itertuples(index=False)}


def _speedup(topk: float | None, mine: float | None) -> float | None:
    """Top-k's time over the method's; None when the method never reached the target, inf
    when Top-k never did (its run failed before evaluating) and the method did."""
    if mine is None:
        return None
    return math.inf if topk is None else topk / mine


def _spread(speedups: Sequence[float | None]) -> str:
    reached = [s for s in speedups if s is not None]
    if not reached:
        return "-"
    low, high = f"{min(reached):.3g}", f"{max(reached):.3g}"
    return f"{np.mean(reached):.3g}x" + (f" (seeds {low}-{high})" if low != high else "")


def _cause(speedups: Sequence[float | None], n_failed: int, counted: bool, error: float,
           where: str) -> str:
    """Why time_verdict decided as it did, in its order (see the module doc)."""
    n, never = len(speedups), sum(s is None for s in speedups)
    failed = f"{n_failed} of {n} seeds failed; " if n_failed else ""
    spread = _spread(speedups)
    if n == 0:
        return "no seed has runs of both the method and Top-k"
    if n_failed and n_failed == n:
        return f"{n_failed} of {n} seeds failed (every seed)"
    if never == n:
        return f"{failed}never reaches the target on {never} of {n} seeds"
    failed += f"never reaches the target on {never} of {n} seeds (counted as 0); " if never else ""
    if n < MIN_SEEDS:
        return f"{failed}{n} paired seed(s), {MIN_SEEDS} needed"
    if not counted:
        return (f"{failed}with selection not counted, speed-up to the target over Top-k "
                f"{spread} at {where}; its selection time on the compute's device decides")
    mean, low, high = speedup_interval(speedups)
    interval = (f"mean speed-up {mean:.3g}x, 95% interval [{low:.3g}, {high:.3g}]"
                if np.isfinite(low) else f"mean speed-up {mean:.3g}x, no finite interval")
    said = f"{failed}speed-up to the target over Top-k {spread} at {where}; {interval}"
    if np.isfinite(low) and (low > 1 + error or high < 1 - error):
        side = "above" if low > 1 + error else "below"
        return f"{said}, {side} 1 beyond the validated error ±{error:.1%}"
    return f"{said} reaches within the validated error ±{error:.1%} of 1"


def _claim(rows: pd.DataFrame, topk: pd.DataFrame, dense: pd.DataFrame, n_densities: int,
           errors: dict[str, float]) -> dict:
    from topkscope.models import DATASET
    from topkscope.sparsify import family_of, label_of

    first = rows.iloc[0]
    method, network, condition = str(first["method"]), str(first["network"]), first["condition"]
    density, metric, margin = float(first["density"]), str(first["metric_name"]), float(
        first["margin"])
    name = label_of(method)
    mine, ref, base = _times(rows), _times(topk), _times(dense)
    seeds = sorted(set(mine) & set(ref))
    speedups = [_speedup(ref[s], mine[s]) for s in seeds]
    failed_seeds = set(rows.loc[rows["status"] == "failed", "seed"].astype(int))
    n_failed = len(failed_seeds & set(seeds))
    error = comparison_error(method, REFERENCE, errors)
    counted = bool(rows["selection_counted"].all())
    # Top-k's failed seeds and either side's unfinished runs are counted and never let it hold
    others = [f"Top-k seed {s} {st}" for s, st in _statuses(topk, seeds)
              if st != "complete"]
    others += [f"seed {s} {st}" for s, st in _statuses(rows, seeds)
               if st in UNFINISHED_STATUSES]
    verdict, faster, never = time_verdict(speedups, error, counted, n_failed, bool(others))
    reason = (blocked_time_reason(speedups, error, counted, n_failed, never)
              if others and verdict not in ("holds", "fails", "mixed") else
              time_reason(verdict, len(seeds), n_failed, never, counted))
    where = network + (f", rho={density:g}" if n_densities > 1 else "")
    cause = _cause(speedups, n_failed, counted, error, where)
    if others:
        cause = f"{'; '.join(others)}; {cause}"
    spread = _spread(speedups)
    vs_dense = [base[s] / mine[s] for s in seeds
                if mine[s] is not None and base.get(s) is not None]
    dense_text = (f"Dense reaches it on {sum(base.get(s) is not None for s in seeds)} of "
                  f"{len(seeds)} seeds; the method is {np.mean(vs_dense):.3g}x sooner than Dense"
                  if vs_dense else "Dense: no paired run that reaches it")
    by_seed = ", ".join(
        f"seed {s}{' (failed)' if s in failed_seeds else ''}: "
        f"{'never' if mine[s] is None else f'{mine[s]:.3g} s'} vs Top-k "
        f"{'never' if ref[s] is None else f'{ref[s]:.3g} s'}" for s in seeds)
    steps = rows.set_index("seed")["steps_to_target"]
    top_steps = topk.set_index("seed")["steps_to_target"]

    def _steps(table: pd.Series) -> str:
        return "/".join("never" if pd.isna(table.get(s)) else str(int(table[s])) for s in seeds)

    evidence = (f"{first['experiment']} density {density:g} ({condition}), "
                f"P = {int(first['workers'])}, {network}: time to the target ({metric} "
                f"target {rows['target'].mean():.4g}, mean over seeds) {by_seed}; speed-up over "
                f"Top-k {spread}; steps to the target {name} {_steps(steps)} vs Top-k "
                f"{_steps(top_steps)}; step {rows['t_step'].mean() * 1e3:.3g} ms vs Top-k "
                f"{topk['t_step'].mean() * 1e3:.3g} ms (count ratio "
                f"{rows['count_ratio'].mean():.3g}); {dense_text}")
    selection = (f"selection {first['select_source']}" if counted else
                 f"selection {SELECTION_NOT_COUNTED} (the selection CSV was measured on another "
                 "device than the compute)")
    training = f"{condition}; rho={density:g}"
    reached = [s for s in speedups if s is not None and math.isfinite(s)]
    mean, low, high = speedup_interval(speedups) if seeds else (math.nan,) * 3
    row = ClaimRow(
        model=first["model"], dataset=first["dataset"] or DATASET.get(first["model"]),
        dataset_substitute=first["dataset_substitute"],
        claim=f"{family_of(method)}{CLAIM_SUFFIX}", sparsifier=method,
        statement=f"{name} reaches the target ({target_text(metric, margin)}) sooner than "
                  f"Top-k at P = {int(first['workers'])} ({network})",
        n_runs=len(rows["run"].unique()) + len(topk["run"].unique()),
        n_units=len(seeds), fraction=faster / len(seeds) if counted and seeds else math.nan,
        evidence=evidence, verdict=verdict, reason=reason, rule=rule(metric, margin),
        profile=str(first["profile"] or ""),
        condition=(f"prediction, not a measurement: {first['inputs']}; training condition "
                   f"{training}; network {network}; compute {first['compute_source']}; "
                   f"{selection}; {name} counts per seed from each run's own training "
                   f"(train.parquet); steps to the target measured in the runs at "
                   f"{_run_p(rows, topk)}, the step time modelled at P = "
                   f"{int(first['workers'])}"),
        n_seeds=len(seeds), diff_mean=mean, ci_low=low, ci_high=high,
        diff_unit="speed-up × over Top-k",
        speedup_low=min(reached) if reached else math.nan,
        speedup_high=max(reached) if reached else math.nan, n_never=never,
        traffic_ratio=float(rows["count_ratio"].mean()), section="prediction",
        cause=cause, metric=metric, margin=margin, n_failed_seeds=n_failed,
        network=network, inputs=str(first["inputs"]), baselines=label_of(REFERENCE),
        training_condition=training, model_error=error,
        selection_basis=SELECTION_MEASURED if counted else SELECTION_NOT_COUNTED,
        claim_key="time_to_accuracy", claim_family="prediction")
    row.set_condition(replace(from_record(first), experiment=str(first["experiment"]),
                              training_density=density, reference=REFERENCE))
    return row


def _run_p(rows: pd.DataFrame, topk: pd.DataFrame) -> str:
    """'P = 4' / 'P = 1/4' / 'P unknown': the workers of the runs the steps came from."""
    found = pd.concat([rows.get("run_workers", pd.Series(dtype=object)),
                       topk.get("run_workers", pd.Series(dtype=object))]).dropna()
    if found.empty:
        return "P unknown (no world_size in the manifests)"
    return "P = " + "/".join(str(int(p)) for p in sorted(set(found.astype(int))))


def claim_rows(table: pd.DataFrame, workers: int = CLAIM_P,
               errors: dict[str, float] | None = None) -> list[ClaimRow]:
    """The rows `<family>_time_to_accuracy` per (experiment, profile, density, condition,
    method, network) at P = `workers` (see the module doc)."""
    if errors is None:
        from topkscope.perf.published import validated_errors

        errors = validated_errors()
    if table.empty:
        return []
    at = table[table["workers"] == workers]
    out = []
    for _, sub in at.groupby(["experiment", "profile", "network"], sort=False, dropna=False):
        n_densities = sub["density"].nunique()
        for (method, _condition, density), rows in sub.groupby(
                ["method", "condition", "density"], sort=False):
            if method in (REFERENCE, BASELINE):
                continue
            paired = sub[sub["density"] == density]
            reference = rows["topk_condition"].iloc[0]
            topk = paired[(paired["method"] == REFERENCE) & (paired["condition"] == reference)]
            dense = paired[(paired["method"] == BASELINE) & (paired["condition"] == reference)]
            if topk.empty:
                continue
            out.append(_claim(rows, topk, dense, n_densities, errors))
    return out


def claims_rows(table: pd.DataFrame, **options) -> pd.DataFrame:
    """claim_rows as a claims table (topkscope.claims.row.COLUMNS)."""
    return frame(claim_rows(table, **options))


def _rule_now(options=None) -> str:
    return rule("accuracy", options.margin if options else 1.0)


register_claim(Claim(
    "time_to_accuracy", "Does Gaussian-k reach Top-k's accuracy sooner on 16 workers "
    "(predicted from the measured convergence)?",
    "{method} reaches the target sooner than Top-k at P = 16", _rule_now, "prediction", "table",
    lambda context: claim_rows(context.time_to_accuracy), "time-to-accuracy-p16",
    per_method=True,
    questions=(Question("gaussiank_time_to_accuracy", "Does Gaussian-k reach Top-k's accuracy "
                        "sooner on 16 GPUs (predicted from the measured convergence)?",
                        sparsifiers=("gaussiank", "gaussiank-2019"), order=70),),
    show=Presentation("time", "sooner than Top-k", phrases.time_to_target)))
