"""Predicted wall-clock time to an accuracy target, from the seeded convergence runs.

    table, notes = time_to_accuracy_table(results_root, runs)  # one row per run, network, P
    claims = claims_rows(table)                                # <family>_time_to_accuracy
    claims, figures = write_time_to_accuracy(results_root, runs=runs)  # time_to_accuracy.csv

The runs are the convergence claims' (topkscope.analysis.seeds): the figures
driver passes the same loaded runs, complete and failed, that its claims use; without them,
every complete, failed or unfinished run under results_root (topkscope.manifest.find_runs).
Each seed of a method under a condition is stood for by the run the claims pair
(seeds.seed_cells: a complete run wins over a failed one, a failed one over an
unfinished one; a failed Top-k seed or an unfinished run never lets a row hold), and paired with Top-k's run of the same
seed under Top-k's condition (seeds.topk_condition: the method's density warm-up).
Per seed s of a method m:

    target_s   Top-k's final metric of seed s as the claims count it (seeds.
               seed_value: a failed Top-k run its last evaluated metric) and the claims'
               non-inferiority margin m (criteria.default_margin: `margin` points of accuracy,
               `perplexity_margin` % of perplexity; the figures driver's Options, so one margin
               sets both): a value v reaches it when the paired difference to Top-k's final
               (criteria.paired_difference) is on the good side of criteria.limit_of, i.e.
               >= -m points (accuracy) or <= +m % (perplexity)
    n_m,s      the training steps done at m's first evaluated step at or past the target, in
               the split the final metric reads (seeds.evaluated; an eval row at
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

The claims made from this table (`<family>_time_to_accuracy`, its verdict rule) are
topkscope.claims.time_to_accuracy's.

The steps to the target are measured in the runs at their own P (manifest world_size, column
run_workers); only the step time is modelled at P = 16: the row's condition says both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from topkscope import validate
from topkscope.analysis import criteria
from topkscope.analysis.contraction_convergence import (  # noqa: F401  (public here too)
    reaches,
    steps_to_target,
)
from topkscope.analysis.seeds import (
    CLAIMED_STATUSES,
    SeedRun,
    evaluated,
    seed_cells,
    seed_value,
    topk_condition,
)
from topkscope.condition import Condition
from topkscope.perf import inputs as inp
from topkscope.perf import model as pm
from topkscope.perf import report
from topkscope.perf.networks import resolve
from topkscope.plots.scaling import CLUSTER_NETWORKS

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
    slope = (criteria.paired_difference(metric_name, topk_final, topk_final)
             - criteria.paired_difference(metric_name, topk_final, topk_final - h)) / h
    return topk_final + criteria.limit_of(metric_name, margin) / slope


def found_runs(results_root: str | Path) -> list:
    """The complete, failed and unfinished runs under results_root, loaded (topkscope.analysis.
    runs.load, the whole-model u statistics only: nothing here reads the others), the statuses
    the convergence claims count."""
    from topkscope.analysis.runs import load
    from topkscope.manifest import find_runs

    return [load(r.path, layers="__global__", kinds="u")
            for r in find_runs(results_root, status=CLAIMED_STATUSES)]


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


def _rows_for(setting: _Setting, experiment: str, density: float, condition: Condition,
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
        training = {k: v for k, v in condition.record().items() if k in TRAINING_FIELDS}
        for net in nets:
            for P in workers:
                part = pm.step(method, P, setting.d, density, net, setting.compute,
                               pm.MethodInputs(select, count))
                rows.append({
                    "experiment": experiment, "profile": manifest.get("profile"),
                    "model": setting.model, "dataset": manifest.get("dataset"),
                    "dataset_substitute": manifest.get("dataset_substitute"),
                    "density": density, "condition": condition.training_key(),
                    "topk_condition": topk_condition(condition).training_key(), **training,
                    "method": method,
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


# the training condition's typed columns in the table (topkscope.condition.Condition)
TRAINING_FIELDS = ("warmup", "warmup_schedule", "k_rule", "outer_step", "outer_inner_steps",
                   "outer_lr", "outer_momentum", "outer_error_decay", "quantize_bits",
                   "deviations")


def _targets(topk: dict[int, SeedRun], margin: float, perplexity_margin: float
             ) -> dict[int, _Target]:
    """Per Top-k seed its final metric as the claims count it (seed_value) and the margin."""
    name = next((r.name for r in topk.values() if r.name), "accuracy")
    row_margin = criteria.default_margin(name, margin, perplexity_margin)
    return {s: _Target(seed_value(r, name)[0], name, row_margin) for s, r in topk.items()}


def time_to_accuracy_table(results_root: str | Path, runs: Sequence | None = None, *,
                           networks: Sequence[str] = CLUSTER_NETWORKS,
                           workers: Sequence[int] = (report.CLAIM_P,),
                           inputs: str = inp.DEFAULT_INPUTS,
                           selection: pd.DataFrame | None = None,
                           margin: float = criteria.ACCURACY_MARGIN_POINTS,
                           perplexity_margin: float = criteria.PERPLEXITY_MARGIN_PCT,
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
# ------------------------------------------------------------------ the table and its figure
def write_time_to_accuracy(results_root: str | Path, log=print,
                           inputs: str = inp.DEFAULT_INPUTS,
                           selection_csv: str | Path | None = None,
                           runs: Sequence | None = None,
                           margin: float = criteria.ACCURACY_MARGIN_POINTS,
                           perplexity_margin: float = criteria.PERPLEXITY_MARGIN_PCT,
                           ) -> tuple[pd.DataFrame, list[tuple[str, str, list[Path]]]]:
    """results_root/time_to_accuracy.csv and its figure under results_root/figures/; returns
    the table and the figure as (name, caption, files). runs, margin,
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
    return table, [(FIGURE, text, files)]
