"""Predicted wall-clock time to an accuracy target, from the seeded convergence runs.

    table, notes = time_to_accuracy_table(results_root)      # one row per run, network, P
    claims = claims_rows(table)                              # <family>_time_to_accuracy, P = 16
    claims, figures = write_time_to_accuracy(results_root)   # results/time_to_accuracy.csv

Runs are found by manifest content (topkscope.manifest.find_runs, complete and failed runs) and
grouped by experiment, profile, density and training condition (topkscope.manifest.condition_of).
Per seed s of a method m, paired with Top-k's run of the same seed under the same condition
(its warm-up part, as the accuracy claims pair them):

    target_s   Top-k's final evaluation metric (topkscope.analysis.claims.final_metric) less the
               claims' margin: a value v reaches it when the paired difference to Top-k's final
               (claims.paired_difference) is >= -ACCURACY_LIMIT_POINTS (accuracy, in points) or
               <= PERPLEXITY_LIMIT_PCT (perplexity, in % of Top-k's)
    n_m,s      the training steps done at m's first evaluated step at or past the target (an
               eval row at step t follows t + 1 steps); not interpolated between evaluations,
               so a run that crosses the target between two of them is counted at the later;
               none (never) when no evaluation reaches it, and for a failed run (e.g. diverged)
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

Claim `<family>_time_to_accuracy` (claims.claim_family: gaussiank for gaussiank-2019), per
(experiment, density, condition, method, network) at P = 16, over the paired seeds, with e the
model's validated error (topkscope.perf.report.comparison_error): fails when the method never
reaches the target on a seed (the row says on how many); else, with selection counted, holds
when on every seed Top-k's time / the method's exceeds 1 + e, fails when on every seed it is
below 1 - e, else inconclusive (within the error, or the seeds disagree); fewer than
claims.MIN_SEEDS paired seeds: insufficient-data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

from topkscope.analysis.claims import (
    ACCURACY_LIMIT_POINTS,
    MIN_SEEDS,
    PERPLEXITY_LIMIT_PCT,
    claim_family,
    final_metric,
    paired_difference,
)
from topkscope.manifest import FoundRun, condition_of, find_runs
from topkscope.perf import inputs as inp
from topkscope.perf import model as pm
from topkscope.perf import report
from topkscope.perf.networks import resolve
from topkscope.plots.scaling import CLUSTER_NETWORKS

CLAIM_SUFFIX = "_time_to_accuracy"
FIGURE = "time-to-accuracy-p16"
CSV_NAME = "time_to_accuracy.csv"
# the evaluation splits final_metric prefers, in its order (then any split)
EVAL_SPLITS = ("test", "valid", "val")
REFERENCE, BASELINE = "topk", "dense"
CAPTION = (
    "Predicted wall-clock time at P = 16 to reach the accuracy target (Top-k's final accuracy "
    f"of the same seed and condition less {ACCURACY_LIMIT_POINTS:g} point; perplexity: plus "
    f"{PERPLEXITY_LIMIT_PCT:g}%), per method and training condition (bars: mean over seeds; "
    "line: the seeds' range; seeds that never reach it written beside), one panel per "
    "experiment and network: the steps each seed's run needed (first evaluation at or past "
    "the target) times the step-time model's step with that run's own counts")


# ------------------------------------------------------------------ one run's curve
def eval_curve(eval_table: pd.DataFrame | None) -> tuple[pd.DataFrame, str] | None:
    """(rows of finite metric sorted by step, metric name) of the split the claims' final
    metric reads (test, else valid/val, else any); None without an evaluation."""
    if eval_table is None or eval_table.empty or "metric" not in eval_table:
        return None
    for split in (*EVAL_SPLITS, None):
        rows = eval_table if split is None else eval_table[eval_table["split"] == split]
        rows = rows[np.isfinite(rows["metric"].astype("float64").to_numpy())]
        if not rows.empty:
            rows = rows.sort_values("step", kind="stable")
            name = rows["metric_name"].iloc[-1] if "metric_name" in rows else None
            return rows[["step", "metric"]].reset_index(drop=True), str(name or "accuracy")
    return None


def reaches(metric_name: str, topk_final: float, value: float) -> bool:
    """Whether `value` reaches the target set by Top-k's final metric: the claims' paired
    difference within their margin (accuracy: >= -ACCURACY_LIMIT_POINTS points; perplexity:
    <= +PERPLEXITY_LIMIT_PCT %)."""
    diff = paired_difference(metric_name, topk_final, value)
    if metric_name == "perplexity":
        return diff <= PERPLEXITY_LIMIT_PCT
    return diff >= -ACCURACY_LIMIT_POINTS


def target_value(metric_name: str, topk_final: float) -> float:
    """The metric value at the margin (for display; `reaches` decides): the paired difference is
    linear in the method's value near Top-k's, so the value is solved from its slope there."""
    h = 1e-6 * max(1.0, abs(topk_final))
    slope = (paired_difference(metric_name, topk_final, topk_final)
             - paired_difference(metric_name, topk_final, topk_final - h)) / h
    limit = PERPLEXITY_LIMIT_PCT if metric_name == "perplexity" else -ACCURACY_LIMIT_POINTS
    return topk_final + limit / slope


def steps_to_target(curve: pd.DataFrame, metric_name: str, topk_final: float) -> int | None:
    """Training steps done at the first evaluated step whose metric reaches the target (eval
    row at step t: t + 1 steps; not interpolated); None when none does."""
    for step, value in zip(curve["step"], curve["metric"]):
        if reaches(metric_name, topk_final, float(value)):
            return int(step) + 1
    return None


def warmup_part(condition: str) -> str:
    """The part of a condition Top-k is paired on, as the accuracy claims pair it: the density
    warm-up ("warmup=paper; empty_fallback=topk" -> "warmup=paper")."""
    return condition.split("; ")[0]


# ------------------------------------------------------------------ the runs
@dataclass(frozen=True)
class SeedRun:
    """The run that stands for one seed: a complete run with an evaluation (the first by path),
    else a failed run (which never reaches the target). curve: eval_curve of its evaluation
    (None for a failed run); final: the claims' final metric (metric, name) or None."""

    run: FoundRun
    curve: tuple[pd.DataFrame, str] | None
    final: tuple[float, str] | None


def _seed_run(runs: list[FoundRun]) -> SeedRun | None:
    for run in runs:
        if run.manifest.get("status") == "complete":
            path = run.path / "eval.parquet"
            table = pd.read_parquet(path) if path.is_file() else None
            curve = eval_curve(table)
            if curve is not None:
                return SeedRun(run, curve, final_metric(SimpleNamespace(eval=table)))
    failed = [r for r in runs if r.manifest.get("status") == "failed"]
    return SeedRun(failed[0], None, None) if failed else None


def _seeds(by_seed: dict[int, list[FoundRun]]) -> dict[int, SeedRun]:
    return {s: r for s, runs in by_seed.items() if (r := _seed_run(runs)) is not None}


def _group(results_root) -> dict[tuple, dict[tuple, dict[int, list[FoundRun]]]]:
    """(experiment, profile) -> (method, condition, density) -> seed -> runs (path order)."""
    out: dict[tuple, dict[tuple, dict[int, list[FoundRun]]]] = {}
    for run in find_runs(results_root, status=("complete", "failed")):
        m = run.manifest
        if m.get("density") is None or m.get("sparsifier") is None:
            continue
        key = (m.get("sparsifier"), condition_of(m), float(m["density"]))
        out.setdefault((m.get("experiment"), m.get("profile")), {}).setdefault(
            key, {}).setdefault(int(m.get("seed") or 0), []).append(run)
    return out


# ------------------------------------------------------------------ the table
@dataclass(frozen=True)
class _Setting:
    """What the step-time model needs of one experiment's model, at one selection basis."""

    model: str
    d: int
    compute: inp.Input
    selection: pd.DataFrame
    inputs_label: str


def _count(method: str, seed_run: SeedRun, density: float, d: int) -> inp.Input:
    if inp.sends_k(method):
        return inp.Input(1.0, "exact (k by definition)")
    got = inp.run_count_ratio(seed_run.run.path, method, density,
                              inp.run_k(seed_run.run.manifest, density, d))
    if got is None:
        return inp.Input(1.0, f"nominal k (run {seed_run.run.path.name} has no counts)")
    return inp.Input(got[0], f"measured (run {seed_run.run.path.name}: mean over steps of "
                             f"{got[1]})")


def _selection(setting: _Setting, method: str, density: float) -> inp.Input | None:
    return inp.selection_time(setting.selection, pm.SELECTOR_OF.get(method, method), setting.d,
                              density)


def _rows_for(setting: _Setting, experiment: str, profile, density: float, condition: str,
              method: str, seeds: dict[int, SeedRun], finals: dict[int, tuple[float, str]],
              select: inp.Input, counted: bool, nets, workers) -> list[dict]:
    rows = []
    for seed, seed_run in sorted(seeds.items()):
        if seed not in finals:
            continue
        topk_final, name = finals[seed]
        steps = None if seed_run.curve is None else steps_to_target(
            seed_run.curve[0], name, topk_final)
        count = _count(method, seed_run, density, setting.d)
        total = (int(seed_run.curve[0]["step"].iloc[-1]) + 1) if seed_run.curve else np.nan
        for net in nets:
            for P in workers:
                part = pm.step(method, P, setting.d, density, net, setting.compute,
                               pm.MethodInputs(select, count))
                rows.append({
                    "experiment": experiment, "profile": profile, "model": setting.model,
                    "dataset": seed_run.run.manifest.get("dataset"),
                    "dataset_substitute": seed_run.run.manifest.get("dataset_substitute"),
                    "density": density, "condition": condition, "method": method,
                    "seed": seed, "status": seed_run.run.manifest.get("status"),
                    "run": seed_run.run.path.name, "metric_name": name,
                    "topk_final": topk_final, "target": target_value(name, topk_final),
                    "reached": steps is not None,
                    "steps_to_target": np.nan if steps is None else steps,
                    "steps_run": total, "count_ratio": count.value,
                    "count_source": count.source, "t_compute": part["t_compute"],
                    "t_select": part["t_select"], "t_comm": part["t_comm"],
                    "t_step": part["t_step"], "selection_counted": counted,
                    "time_to_target_s": np.nan if steps is None else steps * part["t_step"],
                    "network": net.name, "workers": int(P), "inputs": setting.inputs_label,
                    "compute_source": setting.compute.source, "select_source": select.source,
                })
    return rows


def time_to_accuracy_table(results_root: str | Path, *, networks: Sequence[str] = CLUSTER_NETWORKS,
                           workers: Sequence[int] = (report.CLAIM_P,),
                           inputs: str = report.DEFAULT_INPUTS,
                           selection: pd.DataFrame | None = None,
                           ) -> tuple[pd.DataFrame, list[str]]:
    """One row per (run standing for a seed, network, P) of every approximate method, Top-k
    and Dense, in each experiment, profile, density and training condition with Top-k runs
    and at least one other method; and notes on what was left out (see the module doc).
    selection: the selection benchmark (default: report.selection_table's choice for the
    compute's device)."""
    nets = [resolve(n) for n in networks]
    selection = selection if selection is not None else report.selection_table(
        results_root, device=report.selection_device(inputs))
    rows, notes = [], []
    for (experiment, profile), cells in _group(results_root).items():
        dense = {s: r for k, v in cells.items() if k[0] == BASELINE
                 for s, r in _seeds(v).items()}
        for (method, condition, density), by_seed in cells.items():
            if method != REFERENCE or condition != warmup_part(condition):
                continue
            others = {k[:2]: _seeds(v) for k, v in cells.items()
                      if k[0] not in (REFERENCE, BASELINE) and k[2] == density
                      and warmup_part(k[1]) == condition}
            topk = _seeds(by_seed)
            finals = {s: r.final for s, r in topk.items() if r.final is not None}
            if not others or not finals:
                continue
            setting, note = _setting(topk[next(iter(finals))].run.manifest, results_root,
                                     inputs, selection)
            if setting is None:
                notes.append(f"{experiment}: {note}")
                continue
            group = {(REFERENCE, condition): topk, (BASELINE, condition): dense, **others}
            selects = {m: _selection(setting, m, density) for m, _ in group}
            for m in [m for m, sel in selects.items() if sel is None]:
                notes.append(f"{experiment}/{m}: no selection time (not in the selection CSV)")
            counted = all(inp.device_mismatch(setting.compute, sel) is None
                          for sel in selects.values() if sel is not None)
            for (m, cond), seeds in group.items():
                if selects[m] is None:
                    continue
                select = selects[m] if counted or selects[m].value == 0 else inp.Input(
                    0.0, f"not counted (measured on another device than the compute: "
                         f"{selects[m].source})")
                rows += _rows_for(setting, experiment, profile, density, cond, m, seeds, finals,
                                  select, counted, nets, workers)
    return pd.DataFrame(rows), notes


def _setting(manifest: dict, results_root, inputs: str,
             selection: pd.DataFrame) -> tuple[_Setting | None, str]:
    """The model, d and compute of an experiment's runs; (None, why) when the model has no
    compute time or was resized (the compute tables are the full models')."""
    model = str(manifest.get("model"))
    if (manifest.get("config") or {}).get("model_args"):
        return None, f"{model} was resized (model_args): no compute time for it"
    compute, _ = report.compute_input(model, results_root, inputs=inputs)
    if compute is None:
        return None, f"{model}: no compute time ({inputs} inputs)"
    from topkscope.perf.workload import model_size

    d = int(manifest.get("num_parameters") or model_size(model))
    return _Setting(model, d, compute, selection, report.INPUTS[inputs]), ""


# ------------------------------------------------------------------ the claims
def time_verdict(speedups: Sequence[float | None], error: float, counted: bool,
                 ) -> tuple[str, int, int]:
    """(verdict, seeds faster beyond the error, seeds that never reached the target) of one
    method's per-seed speed-ups to the target over Top-k (None: never reached); see the
    module doc. counted False (selection not counted): at most inconclusive."""
    never = sum(s is None for s in speedups)
    reached = [s for s in speedups if s is not None]
    faster = sum(s > 1 + error for s in reached)
    if len(speedups) < MIN_SEEDS:
        return "insufficient-data", faster, never
    if never:
        return "fails", faster, never
    if not counted:
        return "inconclusive", faster, never
    if faster == len(reached):
        return "holds", faster, never
    if all(s < 1 - error for s in reached):
        return "fails", faster, never
    return "inconclusive", faster, never


def _rule(metric: str) -> str:
    target = (f"Top-k's final perplexity + {PERPLEXITY_LIMIT_PCT:g}%" if metric == "perplexity"
              else f"Top-k's final accuracy - {ACCURACY_LIMIT_POINTS:g} point")
    return (f"per seed: target = {target} (same seed, same condition); steps = the first "
            "evaluated step at or past the target (not interpolated); predicted time = steps x "
            f"the step-time model's t_step at P = {report.CLAIM_P} with that run's own counts "
            "(topkscope.perf.time_to_accuracy); speed-up = Top-k's time / the method's; with e "
            "the model's validated error: fails if the method never reaches the target on a "
            "seed (a failed run never does), holds if every seed's speed-up exceeds 1 + e, "
            "fails if every one is below 1 - e, else inconclusive (within the error, or the "
            "seeds disagree); selection times measured on another device than the compute are "
            f"not counted and the verdict is at most inconclusive; fewer than {MIN_SEEDS} "
            "paired seeds: insufficient-data")


def _times(rows: pd.DataFrame) -> dict[int, float | None]:
    return {int(r.seed): (None if not r.reached else float(r.time_to_target_s))
            for r in rows.itertuples(index=False)}


def _claim(rows: pd.DataFrame, topk: pd.DataFrame, dense: pd.DataFrame, n_densities: int,
           errors: dict[str, float]) -> dict:
    from topkscope.models import DATASET
    from topkscope.plots.titles import sparsifier_name

    first = rows.iloc[0]
    method, network, condition = str(first["method"]), str(first["network"]), first["condition"]
    name = sparsifier_name(method)
    mine, ref, base = _times(rows), _times(topk), _times(dense)
    seeds = sorted(set(mine) & set(ref))
    speedups = [None if mine[s] is None else ref[s] / mine[s] for s in seeds]
    error = report.comparison_error(method, REFERENCE, errors)
    counted = bool(rows["selection_counted"].all())
    verdict, faster, never = time_verdict(speedups, error, counted)
    reached = [s for s in speedups if s is not None]
    spread = (f"{np.mean(reached):.3g}x (seeds {min(reached):.3g}-{max(reached):.3g})"
              if reached else "-")
    vs_dense = [base[s] / mine[s] for s in seeds
                if mine[s] is not None and base.get(s) is not None]
    dense_text = (f"Dense reaches it on {sum(base.get(s) is not None for s in seeds)} of "
                  f"{len(seeds)} seeds; the method is {np.mean(vs_dense):.3g}x sooner than Dense"
                  if vs_dense else "Dense: no paired run that reaches it")
    by_seed = ", ".join(
        f"seed {s}: {'never' if mine[s] is None else f'{mine[s]:.3g} s'} vs Top-k "
        f"{ref[s]:.3g} s" for s in seeds)
    steps = rows.set_index("seed")["steps_to_target"]
    top_steps = topk.set_index("seed")["steps_to_target"]
    where = network + (f", rho={float(first['density']):g}" if n_densities > 1 else "")
    if verdict == "insufficient-data":
        cause = f"{len(seeds)} paired seed(s), {MIN_SEEDS} needed"
    elif never:
        cause = f"never reaches the target on {never} of {len(seeds)} seeds"
    elif not counted:
        cause = (f"with selection not counted, speed-up to the target over Top-k {spread} at "
                 f"{where}; its selection time on the compute's device decides")
    elif verdict == "holds":
        cause = (f"reaches the target sooner than Top-k at {where}: speed-up {spread}, beyond "
                 f"the validated error ±{error:.1%}")
    elif verdict == "fails":
        cause = (f"reaches the target later than Top-k at {where}: speed-up {spread}, beyond "
                 f"the validated error ±{error:.1%}")
    else:
        cause = (f"within the validated error ±{error:.1%} of Top-k or the seeds disagree at "
                 f"{where}: speed-up {spread}")
    metric = str(first["metric_name"])
    target = ("Top-k's final perplexity + 3%" if metric == "perplexity" else
              f"Top-k's final accuracy - {ACCURACY_LIMIT_POINTS:g} point")
    evidence = (f"{first['experiment']} density {float(first['density']):g} ({condition}), "
                f"P = {int(first['workers'])}, {network}: time to the target ({metric} "
                f"target {rows['target'].mean():.4g}, mean over seeds) {by_seed}; speed-up over "
                f"Top-k {spread}; steps to the target {name} "
                + "/".join("never" if pd.isna(steps.get(s)) else str(int(steps[s]))
                           for s in seeds)
                + " vs Top-k " + "/".join(str(int(top_steps[s])) for s in seeds)
                + f"; step {rows['t_step'].mean() * 1e3:.3g} ms vs Top-k "
                f"{topk['t_step'].mean() * 1e3:.3g} ms (count ratio "
                f"{rows['count_ratio'].mean():.3g}); {dense_text}")
    selection = (f"selection {first['select_source']}" if counted else
                 "selection not counted (the selection CSV was measured on another device than "
                 "the compute)")
    named = condition + (f"; rho={float(first['density']):g}" if n_densities > 1 else "")
    return {
        "model": first["model"], "dataset": first["dataset"] or DATASET.get(first["model"]),
        "dataset_substitute": first["dataset_substitute"],
        "claim": f"{claim_family(method)}{CLAIM_SUFFIX}", "sparsifier": method,
        "statement": f"{name} reaches the target ({target}) sooner than Top-k at P = "
                     f"{int(first['workers'])} ({network})",
        "n_runs": len(rows["run"].unique()) + len(topk["run"].unique()),
        "n_units": len(seeds), "fraction": faster / len(seeds) if counted and seeds else np.nan,
        "evidence": evidence, "verdict": verdict, "rule": _rule(metric),
        "profile": first["profile"], "model_args": "",
        "condition": (f"prediction, not a measurement: {first['inputs']}; training condition "
                      f"{named}; network {network}; compute {first['compute_source']}; "
                      f"{selection}; {name} counts per seed from each run's train.parquet; "
                      "steps to the target measured in the runs"),
        "n_seeds": len(seeds), "ci_low": np.nan, "ci_high": np.nan,
        "traffic_ratio": float(rows["count_ratio"].mean()), "section": "prediction",
        "cause": cause, "margin": error, "n_failed_seeds": never,
    }


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
                          & (paired["condition"] == warmup_part(condition))]
            dense = paired[(paired["method"] == BASELINE)
                           & (paired["condition"] == warmup_part(condition))]
            if topk.empty:
                continue
            out.append(_claim(rows, topk, dense, n_densities, errors))
    return pd.DataFrame(out)


def write_time_to_accuracy(results_root: str | Path, log=print,
                           inputs: str = report.DEFAULT_INPUTS,
                           selection_csv: str | Path | None = None,
                           ) -> tuple[pd.DataFrame, list[tuple[str, str, list[Path]]]]:
    """results_root/time_to_accuracy.csv and its figure under results_root/figures/; returns
    the claims rows and the figure as (name, caption, files). Nothing (and an empty frame)
    when no experiment has seeded runs of Top-k and another method."""
    from topkscope.io import write_bytes_atomic
    from topkscope.plots.scaling import time_to_target
    from topkscope.plots.style import save_figure

    root = Path(results_root)
    selection = report.selection_table(root, selection_csv, report.selection_device(inputs))
    table, notes = time_to_accuracy_table(root, inputs=inputs, selection=selection)
    for note in notes:
        log(f"  time to accuracy: {note}")
    if table.empty:
        log("  time to accuracy: no experiment with runs of Top-k and another method")
        return pd.DataFrame(), []
    write_bytes_atomic(root / CSV_NAME, table.to_csv(index=False).encode())
    counted = bool(table["selection_counted"].all())
    tail = ("" if counted else " Selection is not counted: the selection times were measured "
            "on another device than the compute (column selection_counted).")
    caption = f"{CAPTION}. {report.INPUTS[inputs]}.{tail}"
    files = save_figure(time_to_target(table), root / "figures", FIGURE)
    return claims_rows(table), [(FIGURE, caption, files)]
