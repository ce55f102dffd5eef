"""Predicted wall-clock time to an accuracy target, from the seeded convergence runs.

    table, notes = time_to_accuracy_table(results_root, runs)  # one row per run, network, P
    claims = claims_rows(table)                                # <family>_time_to_accuracy
    claims, figures = write_time_to_accuracy(results_root, runs=runs)  # time_to_accuracy.csv

The runs are the convergence claims' (topkscope.analysis.convergence_claims): the figures
driver passes the same loaded runs, complete and failed, that its claims use; without them,
every complete, failed or unfinished run under results_root (topkscope.manifest.find_runs).
Each seed of a method under a condition is stood for by the run the claims pair
(convergence_claims.seed_cells: a complete run wins over a failed one, a failed one over an
unfinished one; a failed Top-k seed or an unfinished run never lets a row hold), and paired with Top-k's run of the same
seed under Top-k's condition (convergence_claims.topk_condition: the method's density warm-up).
Per seed s of a method m:

    target_s   Top-k's final metric of seed s as the claims count it (convergence_claims.
               seed_value: a failed Top-k run its last evaluated metric) and the claims'
               non-inferiority margin m (verdicts.default_margin: `margin` points of accuracy,
               `perplexity_margin` % of perplexity; the figures driver's Options, so one margin
               sets both): a value v reaches it when the paired difference to Top-k's final
               (verdicts.paired_difference) is on the good side of verdicts.limit_of, i.e.
               >= -m points (accuracy) or <= +m % (perplexity)
    n_m,s      the training steps done at m's first evaluated step at or past the target, in
               the split the final metric reads (convergence_claims.evaluated; an eval row at
               step t follows t + 1 steps); not interpolated between evaluations, so a run
               that crosses the target between two of them is counted at the later; none
               (never) when no evaluation reaches it. A failed run (e.g. diverged) counts with
               the evaluations it made before failing, as the claims count its last one
    t_m,s      the step-time model's t_step (topkscope.perf.model.step) of m at P workers on the
               network: compute of the run's model (inputs "published": the published GPU
               compute table; "here": this machine), m's selection time (selection benchmark)
               and the count ratio of m's seed-s run (topkscope.perf.inputs.run_count_ratio: the
               mean over its steps of the largest count over workers / k). The step is modelled
               at the run's density for every step: the warm-up's denser first epochs are not
               modelled, for every method alike
    T_m,s      n_m,s x t_m,s, the predicted wall-clock seconds to the target

Top-k reaches its own target at its final evaluation at the latest. Dense's run of the seed (it
has no warm-up: whatever its condition) is reported beside, against the same target.

Selection basis. When a selection time in the comparison was measured on another device than
the compute (the committed CPU selection benchmark beside GPU compute), no method's selection is
counted (t_select = 0; column selection_counted False) and no verdict rests on it: such a claim
is at most inconclusive.

Claim `<family>_time_to_accuracy` (convergence_claims.claim_family: gaussiank for
gaussiank-2019), per (experiment, density, condition, method, network) at P = 16, over the
paired seeds, with e the model's validated error (topkscope.perf.report.comparison_error) and
speed-up_s = T_topk,s / T_m,s (time_verdict), the same seed-and-interval rule as the accuracy
claim: a seed on which the method never reaches the target counts with speed-up 0 (its worst
value, as a failed run that never evaluated counts with accuracy 0) and never lets the claim
hold; no paired seed: insufficient-data; every seed's run of the method failed, or no seed
reached the target: fails; fewer than verdicts.MIN_SEEDS paired seeds: insufficient-data
(inconclusive when one failed); selection not counted: inconclusive; else the mean speed-up's
95% Student-t interval over the seeds (verdicts.t_interval) against 1 ± e: holds if it lies
above 1 + e, fails if below 1 - e, else inconclusive (within the error, or the seeds
disagree); holds becomes inconclusive when a seed failed or never reached the target.

The steps to the target are measured in the runs at their own P (manifest world_size, column
run_workers); only the step time is modelled at P = 16: the row's condition says both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from topkscope import validate
from topkscope.analysis import convergence_claims, verdicts
from topkscope.analysis.contraction_convergence import (  # noqa: F401  (public here too)
    reaches,
    steps_to_target,
)
from topkscope.analysis.convergence_claims import (
    SeedRun,
    claim_family,
    evaluated,
    seed_cells,
    seed_value,
    topk_condition,
)
from topkscope.analysis.verdicts import speedup_interval, time_verdict
from topkscope.perf import inputs as inp
from topkscope.perf import model as pm
from topkscope.perf import report
from topkscope.perf.networks import resolve
from topkscope.plots.scaling import CLUSTER_NETWORKS

CLAIM_SUFFIX = "_time_to_accuracy"
FIGURE = "time-to-accuracy-p16"
CSV_NAME = "time_to_accuracy.csv"
REFERENCE, BASELINE = "topk", "dense"
SELECTION_NOT_COUNTED = "not counted"  # claims column selection_basis of such a row


def caption(margin: float, perplexity_margin: float) -> str:
    return (
        "Predicted wall-clock time at P = 16 to reach the accuracy target (Top-k's final "
        f"accuracy of the same seed and condition less {margin:g} point(s); perplexity: plus "
        f"{perplexity_margin:g}%), per method and training condition (bars: mean over seeds; "
        "line: the seeds' range; seeds that never reach it written beside), one panel per "
        "experiment and network: the steps each seed's run needed (first evaluation at or past "
        "the target) times the step-time model's step with that run's own counts")


# ------------------------------------------------------------------ one run's curve
def target_value(metric_name: str, topk_final: float, margin: float) -> float:
    """The metric value at the margin (for display; `reaches` decides): the paired difference is
    linear in the method's value, so the value is solved from its slope at Top-k's final."""
    h = 1e-6 * max(1.0, abs(topk_final))
    slope = (verdicts.paired_difference(metric_name, topk_final, topk_final)
             - verdicts.paired_difference(metric_name, topk_final, topk_final - h)) / h
    return topk_final + verdicts.limit_of(metric_name, margin) / slope


def found_runs(results_root: str | Path) -> list:
    """The complete, failed and unfinished runs under results_root, loaded (topkscope.analysis.
    runs.load, the whole-model u statistics only: nothing here reads the others), the statuses
    the convergence claims count."""
    from topkscope.analysis.runs import load
    from topkscope.manifest import find_runs

    return [load(r.path, layers="__global__", kinds="u")
            for r in find_runs(results_root, status=convergence_claims.CLAIMED_STATUSES)]


# ------------------------------------------------------------------ the table
@dataclass(frozen=True)
class _Setting:
    """What the step-time model needs of one experiment's model, at one selection basis."""

    model: str
    d: int
    compute: pm.Input
    selection: pd.DataFrame
    inputs_label: str


@dataclass(frozen=True)
class _Target:
    """Top-k's final metric of one seed as the claims count it, the metric and the margin."""

    topk_final: float
    name: str
    margin: float


def _count(method: str, seed_run: SeedRun, density: float, d: int) -> pm.Input:
    if inp.sends_k(method):
        return pm.Input(1.0, "exact (k by definition)")
    run = seed_run.run
    got = inp.run_count_ratio(run.path, method, density, inp.run_k(run.manifest, density, d))
    if got is None:
        return pm.Input(1.0, f"nominal k (run {Path(run.path).name} has no counts)")
    return pm.Input(got[0], f"measured (run {Path(run.path).name}: mean over steps of "
                             f"{got[1]})")


def _selection(setting: _Setting, method: str, density: float) -> pm.Input | None:
    return inp.selection_time(setting.selection, pm.SELECTOR_OF.get(method, method), setting.d,
                              density)


def _rows_for(setting: _Setting, experiment: str, density: float, condition: str,
              method: str, seeds: dict, targets: dict[int, _Target], select: pm.Input,
              counted: bool, nets, workers) -> list[dict]:
    rows = []
    for seed, seed_run in sorted(seeds.items()):
        if seed not in targets:
            continue
        target = targets[seed]
        found = evaluated(seed_run.run)
        steps = None if found is None else steps_to_target(
            found[0], target.name, target.topk_final, target.margin)
        count = _count(method, seed_run, density, setting.d)
        total = int(found[0]["step"].iloc[-1]) + 1 if found is not None else np.nan
        manifest = seed_run.run.manifest
        for net in nets:
            for P in workers:
                part = pm.step(method, P, setting.d, density, net, setting.compute,
                               pm.MethodInputs(select, count))
                rows.append({
                    "experiment": experiment, "profile": manifest.get("profile"),
                    "model": setting.model, "dataset": manifest.get("dataset"),
                    "dataset_substitute": manifest.get("dataset_substitute"),
                    "density": density, "condition": condition, "method": method,
                    "seed": seed, "status": manifest.get("status") or "complete",
                    "run": Path(seed_run.run.path).name, "metric_name": target.name,
                    "margin": target.margin, "topk_final": target.topk_final,
                    "target": target_value(target.name, target.topk_final, target.margin),
                    "reached": steps is not None,
                    "steps_to_target": np.nan if steps is None else steps,
                    "steps_run": total, "count_ratio": count.value,
                    "count_source": count.source, "t_compute": part["t_compute"],
                    "t_select": part["t_select"], "t_comm": part["t_comm"],
                    "t_step": part["t_step"], "selection_counted": counted,
                    "time_to_target_s": np.nan if steps is None else steps * part["t_step"],
                    "network": net.name, "workers": int(P), "inputs": setting.inputs_label,
                    "run_workers": manifest.get("world_size"),
                    "compute_source": setting.compute.source, "select_source": select.source,
                })
    return rows


def _targets(topk: dict[int, SeedRun], margin: float, perplexity_margin: float
             ) -> dict[int, _Target]:
    """Per Top-k seed its final metric as the claims count it (seed_value) and the margin."""
    name = next((r.name for r in topk.values() if r.name), "accuracy")
    row_margin = verdicts.default_margin(name, margin, perplexity_margin)
    return {s: _Target(seed_value(r, name)[0], name, row_margin) for s, r in topk.items()}


def time_to_accuracy_table(results_root: str | Path, runs: Sequence | None = None, *,
                           networks: Sequence[str] = CLUSTER_NETWORKS,
                           workers: Sequence[int] = (report.CLAIM_P,),
                           inputs: str = inp.DEFAULT_INPUTS,
                           selection: pd.DataFrame | None = None,
                           margin: float = verdicts.ACCURACY_MARGIN_POINTS,
                           perplexity_margin: float = verdicts.PERPLEXITY_MARGIN_PCT,
                           ) -> tuple[pd.DataFrame, list[str]]:
    """One row per (run standing for a seed, network, P) of every approximate method, Top-k
    and Dense, in each experiment, density and training condition with Top-k runs and at least
    one other method; and notes on what was left out (see the module doc).

    Args:
        results_root: where the compute inputs ("here") and the selection CSV are found.
        runs: loaded runs, complete and failed (default: found_runs(results_root)).
        selection: the selection benchmark (default: topkscope.perf.inputs.selection_table's
            choice for the compute's device).
        margin, perplexity_margin: the claims' non-inferiority margins that set the target.
    """
    margin = validate.number("margin", margin, 0.0)
    perplexity_margin = validate.number("perplexity_margin", perplexity_margin, 0.0)
    nets = [resolve(n) for n in networks]
    selection = selection if selection is not None else inp.selection_table(
        results_root, device=inp.selection_device(inputs))
    cells = seed_cells(found_runs(results_root) if runs is None else list(runs), dense=True)
    rows, notes = [], []
    for (experiment, density, condition, method), topk in cells.items():
        if method != REFERENCE:
            continue
        others = {(k[3], k[2]): v for k, v in cells.items()
                  if k[0] == experiment and k[1] == density and k[3] not in (REFERENCE, BASELINE)
                  and topk_condition(k[2]) == condition}
        targets = _targets(topk, margin, perplexity_margin)
        if not others or not targets:
            continue
        setting, note = _setting(next(iter(topk.values())).run.manifest, results_root,
                                 inputs, selection)
        if setting is None:
            notes.append(f"{experiment}: {note}")
            continue
        dense: dict[int, SeedRun] = {}  # Dense has no warm-up: its runs of any condition
        for k, v in cells.items():
            if k[0] == experiment and k[3] == BASELINE:
                dense = {**v, **dense}
        group = {(REFERENCE, condition): topk, (BASELINE, condition): dense, **others}
        selects = {m: _selection(setting, m, float(density)) for m, _ in group}
        for m in [m for m, sel in selects.items() if sel is None]:
            notes.append(f"{experiment}/{m}: no selection time (not in the selection CSV)")
        counted = all(inp.device_mismatch(setting.compute, sel) is None
                      for sel in selects.values() if sel is not None)
        for (m, cond), seeds in group.items():
            if selects[m] is None:
                continue
            select = selects[m] if counted or selects[m].value == 0 else pm.Input(
                0.0, f"{SELECTION_NOT_COUNTED} (measured on another device than the compute: "
                     f"{selects[m].source})")
            rows += _rows_for(setting, experiment, float(density), cond, m, seeds, targets,
                              select, counted, nets, workers)
    return pd.DataFrame(rows), notes


def _setting(manifest: dict, results_root, inputs: str,
             selection: pd.DataFrame) -> tuple[_Setting | None, str]:
    """The model, d and compute of an experiment's runs; (None, why) when the model has no
    compute time or was resized (the compute tables are the full models')."""
    model = str(manifest.get("model"))
    if (manifest.get("config") or {}).get("model_args"):
        return None, f"{model} was resized (model_args): no compute time for it"
    compute, _ = inp.compute_input(model, results_root, inputs=inputs)
    if compute is None:
        return None, f"{model}: no compute time ({inputs} inputs)"
    from topkscope.perf.workload import model_size

    d = int(manifest.get("num_parameters") or model_size(model))
    return _Setting(model, d, compute, selection, inp.INPUTS[inputs]), ""


# ------------------------------------------------------------------ the claims
def target_text(metric: str, margin: float) -> str:
    """"Top-k's final accuracy − 1 point" / "Top-k's final perplexity + 3%": the target."""
    return f"Top-k's final {metric} {verdicts.limit_text(metric, margin)}"


def _rule(metric: str, margin: float) -> str:
    return (f"per seed: target = {target_text(metric, margin)} (same seed, same condition, as "
            "the convergence claims pair them; a failed run counts with its evaluations); "
            "steps = the first evaluated step at or past the target (not interpolated), "
            "measured in the runs at their own P (the row's condition names it); "
            "predicted time = steps x the step-time model's t_step at P = "
            f"{report.CLAIM_P} with that run's own counts (topkscope.perf.time_to_accuracy); "
            "speed-up = Top-k's time / the method's, 0 on a seed that never reaches the target; "
            "with e the model's validated error, the 95% t-interval of the mean speed-up over "
            "the seeds: holds if it lies above 1 + e and every seed finished and reached the "
            "target (else inconclusive), fails if it lies below 1 - e or the method failed or "
            "never reached the target on every seed, else inconclusive; selection times measured on another device than the compute are "
            f"not counted and the verdict is at most inconclusive; fewer than "
            f"{verdicts.MIN_SEEDS} paired seeds: insufficient-data (inconclusive if one failed)")


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
    if n < verdicts.MIN_SEEDS:
        return f"{failed}{n} paired seed(s), {verdicts.MIN_SEEDS} needed"
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
    from topkscope.plots.titles import sparsifier_name

    first = rows.iloc[0]
    method, network, condition = str(first["method"]), str(first["network"]), first["condition"]
    density, metric, margin = float(first["density"]), str(first["metric_name"]), float(
        first["margin"])
    name = sparsifier_name(method)
    mine, ref, base = _times(rows), _times(topk), _times(dense)
    seeds = sorted(set(mine) & set(ref))
    speedups = [_speedup(ref[s], mine[s]) for s in seeds]
    failed_seeds = set(rows.loc[rows["status"] == "failed", "seed"].astype(int))
    n_failed = len(failed_seeds & set(seeds))
    error = report.comparison_error(method, REFERENCE, errors)
    counted = bool(rows["selection_counted"].all())
    verdict, faster, _ = time_verdict(speedups, error, counted, n_failed)
    where = network + (f", rho={density:g}" if n_densities > 1 else "")
    cause = _cause(speedups, n_failed, counted, error, where)
    # Top-k's failed seeds and either side's unfinished runs are counted and never let it hold
    others = [f"Top-k seed {s} {st}" for s, st in _statuses(topk, seeds)
              if st != "complete"]
    others += [f"seed {s} {st}" for s, st in _statuses(rows, seeds)
               if st in convergence_claims.UNFINISHED_STATUSES]
    if others:
        verdict = "inconclusive" if verdict == "holds" else verdict
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
    return {
        "model": first["model"], "dataset": first["dataset"] or DATASET.get(first["model"]),
        "dataset_substitute": first["dataset_substitute"],
        "claim": f"{claim_family(method)}{CLAIM_SUFFIX}", "sparsifier": method,
        "statement": f"{name} reaches the target ({target_text(metric, margin)}) sooner than "
                     f"Top-k at P = {int(first['workers'])} ({network})",
        "n_runs": len(rows["run"].unique()) + len(topk["run"].unique()),
        "n_units": len(seeds), "fraction": faster / len(seeds) if counted and seeds else np.nan,
        "evidence": evidence, "verdict": verdict, "rule": _rule(metric, margin),
        "profile": first["profile"], "model_args": "",
        "condition": (f"prediction, not a measurement: {first['inputs']}; training condition "
                      f"{training}; network {network}; compute {first['compute_source']}; "
                      f"{selection}; {name} counts per seed from each run's own training "
                      f"(train.parquet); steps to the target measured in the runs at "
                      f"{_run_p(rows, topk)}, the step time modelled at P = "
                      f"{int(first['workers'])}"),
        "n_seeds": len(seeds), "ci_low": np.nan, "ci_high": np.nan,
        "traffic_ratio": float(rows["count_ratio"].mean()), "section": "prediction",
        "cause": cause, "metric": metric, "margin": margin, "n_failed_seeds": n_failed,
        **report.prediction_columns(
            network=network, inputs=first["inputs"], baselines=sparsifier_name(REFERENCE),
            training_condition=training, model_error=error,
            selection_basis=inp.SELECTION_MEASURED if counted else SELECTION_NOT_COUNTED),
    }


def _run_p(rows: pd.DataFrame, topk: pd.DataFrame) -> str:
    """'P = 4' / 'P = 1/4' / 'P unknown': the workers of the runs the steps came from."""
    found = pd.concat([rows.get("run_workers", pd.Series(dtype=object)),
                       topk.get("run_workers", pd.Series(dtype=object))]).dropna()
    if found.empty:
        return "P unknown (no world_size in the manifests)"
    return "P = " + "/".join(str(int(p)) for p in sorted(set(found.astype(int))))


def claims_rows(table: pd.DataFrame, workers: int = report.CLAIM_P,
                errors: dict[str, float] | None = None) -> pd.DataFrame:
    """claims.csv rows `<family>_time_to_accuracy` per (experiment, profile, density,
    condition, method, network) at P = `workers` (see the module doc)."""
    if errors is None:
        from topkscope.perf.published import validated_errors

        errors = validated_errors()
    if table.empty:
        return pd.DataFrame()
    at = table[table["workers"] == workers]
    out = []
    for _, sub in at.groupby(["experiment", "profile", "network"], sort=False, dropna=False):
        n_densities = sub["density"].nunique()
        for (method, condition, density), rows in sub.groupby(
                ["method", "condition", "density"], sort=False):
            if method in (REFERENCE, BASELINE):
                continue
            paired = sub[sub["density"] == density]
            topk = paired[(paired["method"] == REFERENCE)
                          & (paired["condition"] == topk_condition(condition))]
            dense = paired[(paired["method"] == BASELINE)
                           & (paired["condition"] == topk_condition(condition))]
            if topk.empty:
                continue
            out.append(_claim(rows, topk, dense, n_densities, errors))
    return pd.DataFrame(out)


def write_time_to_accuracy(results_root: str | Path, log=print,
                           inputs: str = inp.DEFAULT_INPUTS,
                           selection_csv: str | Path | None = None,
                           runs: Sequence | None = None,
                           margin: float = verdicts.ACCURACY_MARGIN_POINTS,
                           perplexity_margin: float = verdicts.PERPLEXITY_MARGIN_PCT,
                           ) -> tuple[pd.DataFrame, list[tuple[str, str, list[Path]]]]:
    """results_root/time_to_accuracy.csv and its figure under results_root/figures/; returns
    the claims rows and the figure as (name, caption, files). runs, margin,
    perplexity_margin: time_to_accuracy_table's. Nothing (and an empty frame) when no
    experiment has seeded runs of Top-k and another method."""
    from topkscope.io import write_bytes_atomic
    from topkscope.plots.scaling import time_to_target
    from topkscope.plots.style import save_figure

    root = Path(results_root)
    selection = inp.selection_table(root, selection_csv, inp.selection_device(inputs))
    table, notes = time_to_accuracy_table(root, runs, inputs=inputs, selection=selection,
                                          margin=margin, perplexity_margin=perplexity_margin)
    for note in notes:
        log(f"  time to accuracy: {note}")
    if table.empty:
        log("  time to accuracy: no experiment with runs of Top-k and another method")
        return pd.DataFrame(), []
    write_bytes_atomic(root / CSV_NAME, table.to_csv(index=False).encode())
    counted = bool(table["selection_counted"].all())
    tail = ("" if counted else " Selection is not counted: the selection times were measured "
            "on another device than the compute (column selection_counted).")
    text = f"{caption(margin, perplexity_margin)}. {inp.INPUTS[inputs]}.{tail}"
    files = save_figure(time_to_target(table), root / "figures", FIGURE)
    return claims_rows(table), [(FIGURE, text, files)]
