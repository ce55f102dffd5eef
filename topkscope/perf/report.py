"""Predicted scaling for a results folder: the tidy table and its figures.

    table = scaling_table(models, networks, workers, results_root=..., selection=...)
    table, figures = write_scaling(results_root, profile)  # results/scaling.csv + figures

Each model's inputs (compute, selection times, counts, dense-wfbp's overlap, by `inputs`
"published" or "here") are chosen by topkscope.perf.inputs (model_inputs, selection_table,
compute_table); each row names their sources and carries inputs.inputs_warning when the
selection was measured on another device than the compute. A model without a compute time is
left out (and listed in the returned notes).

The P = 16 claims rows made from the table are topkscope.claims.speedup's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from topkscope.perf import inputs as inp
from topkscope.perf import model as pm
from topkscope.perf.networks import Network, available, resolve

CLAIM_P = 16  # the workers of the paper's speed-up question

FIGURES = {"scaling-breakdown-p16": "breakdown", "scaling-efficiency": "efficiency",
           "scaling-crossover": "crossover", "scaling-breakeven-p16": "breakeven"}
CAPTIONS = {
    "scaling-breakdown-p16": (
        "Predicted time of one step at P = 16 workers, split into forward + backward compute, "
        "selection and communication (linear axis), per model (panels), method and network "
        "(bars; the published clusters' measured 10 GbE and 100 Gb IB when the table has "
        "them)"),
    "scaling-efficiency": (
        "Predicted scaling efficiency t_compute / t_step (throughput over P times one worker's "
        "dense SGD) against the number of workers P, per model (panels), method (colour) and "
        "network (line style)"),
    "scaling-crossover": (
        "Predicted bandwidth (Gbit/s) at P = 16 below which each sparse method's step beats "
        "Dense's ring all-reduce, per model; dashed lines: the published clusters' measured "
        "bandwidths (a method beats Dense on a cluster whose line its bar crosses; 'any "
        "bandwidth': faster at every bandwidth)"),
    "scaling-breakeven-p16": (
        "Predicted break-even selection time at P = 16: the longest selection (ms per step) at "
        "which each sparse method's step is still shorter than Dense's (bar), and the most its "
        "selection may exceed Top-k's (marker; below zero: it must select faster than Top-k), "
        "per model (panels), method and network; they need no selection time, so they stand "
        "where none was measured on the compute's device (GPU)"),
}


def breakeven_text(reference: str, seconds: float) -> str:
    """A break-even selection time (topkscope.perf.model.breakeven_select) in words."""
    from topkscope.plots.titles import sparsifier_name

    name = sparsifier_name(reference)
    if reference in pm.DENSE_METHODS:
        return (f"beats {name} while its selection takes below {seconds * 1e3:.3g} ms"
                if seconds > 0 else f"slower than {name} even with free selection")
    sign = "+" if seconds >= 0 else "-"
    return (f"beats {name} while its selection takes below {name}'s {sign} "
            f"{abs(seconds) * 1e3:.3g} ms")


def scaling_table(models: Iterable[str], networks: Iterable[Network | str],
                  workers: Sequence[int] = pm.PAPER_WORKERS,
                  methods: Sequence[str] = pm.DEFAULT_METHODS, *,
                  density: float = pm.PAPER_DENSITY, results_root=None,
                  selection: pd.DataFrame | None = None, compute_s: float | inp.Input | None = None,
                  select_s: dict[str, float | inp.Input] | None = None,
                  opts: pm.Options | None = None,
                  compute: pd.DataFrame | None = None, inputs: str = inp.DEFAULT_INPUTS,
                  batch: int | None = None, d: int | None = None,
                  ) -> tuple[pd.DataFrame, list[str]]:
    """The tidy table: one row per (model, network, method, training condition, workers);
    and notes on what was left out. opts: the exchange options (default: the published setting); inputs: "published"
    (GPU inputs from published measurements) or "here" (this machine's runs and benchmarks);
    compute: the model-compute benchmark of "here" (default: topkscope.perf.inputs.compute_table);
    batch: the per-worker batch (rescales a table's compute, gives the throughput); d: the
    parameter count (default: the model's; for a model given only by its size)."""
    inp.check_inputs(inputs)
    opts = opts or pm.Options()
    selection = selection if selection is not None else inp.selection_table(
        results_root, device=inp.selection_device(inputs, compute_s))
    if inputs == "here" and compute is None:
        compute = inp.compute_table(results_root)
    nets = [n if isinstance(n, Network) else resolve(n) for n in networks]
    rows, notes = [], []
    for model in models:
        size, per_worker, t_compute, mi, more = inp.model_inputs(
            model, methods, density, selection, results_root, compute_s, select_s, d,
            compute, inputs, batch)
        notes += more
        if t_compute is None:
            continue
        warning = inp.inputs_warning(t_compute, mi)
        label = (inp.RUN_INPUTS if isinstance(compute_s, inp.Input) else
                 "user" if compute_s is not None else inp.INPUTS[inputs])
        basis = {m.method or key: inp.selection_basis(t_compute, m.select) for key, m in mi.items()}
        for net in nets:
            rows += [{**row, "inputs": label, "inputs_warning": warning,
                      "selection_basis": basis[row["method"]]}
                     for row in pm.predict(model, size, per_worker, density, net, workers,
                                           t_compute, mi, opts)]
    return pd.DataFrame(rows), notes


def runs_scaling(runs: Sequence, networks: Iterable[Network | str], workers: Sequence[int],
                 results_root=None, own_density: bool = False,
                 selection: pd.DataFrame | None = None,
                 methods: Sequence[str] = pm.DEFAULT_METHODS) -> tuple[pd.DataFrame, list[str]]:
    """(table, notes): scaling_table for each model the loaded `runs` trained — a model of
    topkscope.models from its inputs (published GPU compute by default), a model of the
    user's own from its size (its manifest's parameter count, else its recorded layout) and
    the compute time its run measured (topkscope.perf.inputs.run_compute) — at the paper's
    density, or with own_density at each model's first run's density; of `methods`. A model
    without a compute time or parameter count is left out, named in the notes with the
    command that predicts it."""
    from topkscope import models
    from topkscope.perf.inputs import missing_compute, run_compute

    frames, notes, seen = [], [], set()
    for run in runs:
        m = run.manifest
        model, d = str(m.get("model")), m.get("num_parameters")
        if (model, d) in seen:
            continue
        seen.add((model, d))
        density = float(m.get("density") or pm.PAPER_DENSITY) if own_density \
            else pm.PAPER_DENSITY
        try:
            if model in models.available():
                table, more = scaling_table([model], networks, workers, methods,
                                            density=density, results_root=results_root,
                                            selection=selection)
            else:
                d, compute, _ = run_compute(run.path, m)  # d: the manifest's or the layout's
                if compute is None:
                    size = f"{int(d):,}" if d else "unknown"
                    notes.append(f"{model} (d = {size}): {missing_compute(run.path)}; "
                                 f"`topkscope scale --from-run {run.path} --compute-s SECONDS "
                                 "--network 10gbe --workers 16` predicts it")
                    continue
                table, more = scaling_table([f"params:{int(d)}"], networks, workers, methods,
                                            d=int(d),
                                            compute_s=compute, density=density,
                                            selection=selection)
                table = table.assign(model=model)
        except ValueError as exc:
            notes.append(f"{model}: no prediction ({' '.join(str(exc).split())})")
            continue
        notes += more
        frames.append(table)
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), notes


def breakeven_markdown(table: pd.DataFrame, methods: Sequence[str] = ("gaussiank",),
                       workers: int = CLAIM_P,
                       references: Sequence[str] = pm.DENSE_METHODS) -> str:
    """The break-even selection times at P as docs/scaling.md shows them (ms): one row per
    (model, network, method [training condition]), one column per baseline in `references`
    that the table has (Top-k: the excess over Top-k's own selection time)."""
    from topkscope.plots.titles import sparsifier_name

    at = table[(table["workers"] == workers) & table["method"].isin(methods)]
    refs = [r for r in references if r in set(table["method"])]
    heads = [f"over {sparsifier_name(r)}'s" if r not in pm.DENSE_METHODS
             else f"vs {sparsifier_name(r)}" for r in refs]
    lines = ["| model | network | method | " + " | ".join(heads) + " |",
             "|---|---|---|" + "---|" * len(refs)]
    for _, row in at.iterrows():
        condition = row["condition"] if isinstance(row["condition"], str) else ""
        cells = [f"{row[pm.breakeven_column(r)] * 1e3:+.3g}" if r not in pm.DENSE_METHODS
                 else f"{row[pm.breakeven_column(r)] * 1e3:.3g}" for r in refs]
        lines.append(f"| {row['model']} | {row['network']} | {sparsifier_name(row['method'])}"
                     f"{f' [{condition}]' if condition else ''} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def draw(table: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """The figures of topkscope.plots.scaling (FIGURES) into out_dir (png/pdf)."""
    return [p for _, _, paths in draw_captioned(table, out_dir) for p in paths]


def draw_captioned(table: pd.DataFrame, out_dir: str | Path) -> list[tuple[str, str, list[Path]]]:
    """(name, caption, files) of each figure of topkscope.plots.scaling drawn into out_dir;
    each caption ends with where the table's inputs came from."""
    from topkscope.plots import scaling
    from topkscope.plots.style import save_figure

    tail = inputs_caption(table)
    return [(name, f"{CAPTIONS[name]}. {tail}",
             save_figure(getattr(scaling, func)(table), out_dir, name))
            for name, func in FIGURES.items()]


def inputs_caption(table: pd.DataFrame) -> str:
    """One sentence: a prediction, its density and exchange, and each model's compute source."""
    first = table.iloc[0]
    compute = "; ".join(f"{m}: {src}" for m, src in
                        table.drop_duplicates("model")[["model", "compute_source"]].itertuples(
                            index=False))
    warned = sorted(set(table.loc[table["inputs_warning"].fillna("") != "", "model"])) \
        if "inputs_warning" in table else []
    warning = (f" Warning: for {', '.join(warned)} the selection times were measured on another "
               "device than the compute (scaling.csv column inputs_warning)." if warned else "")
    return (f"A prediction of the step-time model (topkscope.perf), not a measurement: "
            f"{first.get('inputs', inp.INPUTS['here'])}; density {first['density']:g}, "
            f"{first['options']}; selection times from the selection benchmark (scaling.csv "
            f"column select_source); compute per worker: {compute}.{warning}")


def write_scaling(results_root: str | Path, profile: str = "quick", log=print,
                  inputs: str = inp.DEFAULT_INPUTS, selection_csv: str | Path | None = None,
                  ) -> tuple[pd.DataFrame, list[tuple[str, str, list[Path]]]]:
    """results_root/scaling.csv and the figures under results_root/figures/; returns the
    table and the figures drawn as (name, caption, files). The paper's models and any
    other model with a complete run, each with a compute time (inputs "published": the
    published GPU compute table; "here": its runs, else the model-compute benchmark); quick:
    P up to 64; full: P up to 1024. Every preset in both. selection_csv: the selection
    benchmark to use (default: selection_table's choice for the compute's device)."""
    from topkscope.io import write_bytes_atomic

    root = Path(results_root)
    measured = {m.get("model") for _, m in inp.complete_runs(root)} - {None}
    models = list(pm.PAPER_MODELS) + sorted(measured - set(pm.PAPER_MODELS))
    workers = pm.PAPER_WORKERS if profile == "full" else tuple(2**i for i in range(1, 7))
    selection = inp.selection_table(root, selection_csv, inp.selection_device(inputs))
    table, notes = scaling_table(models, available(), workers, results_root=root, inputs=inputs,
                                 selection=selection)
    for note in notes:
        log(f"  scaling: {note}")
    for model, warning in (table.drop_duplicates("model")[["model", "inputs_warning"]]
                           .itertuples(index=False) if not table.empty else []):
        if warning:
            log(f"  scaling: {model}: warning: {warning}")
    if table.empty:
        log("  scaling: no model with a compute time; nothing predicted")
        return pd.DataFrame(), []
    write_bytes_atomic(root / "scaling.csv", table.to_csv(index=False).encode())
    figures = draw_captioned(table, root / "figures")
    return table, figures
