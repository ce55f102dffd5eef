"""Predicted scaling for a results folder: the tidy table, its figures, the claims rows.

    table = scaling_table(models, networks, workers, results_root=..., selection=...)
    claims = claims_rows(table)                 # rows of results/claims.csv (P = 16; p16_claims)
    claims, figures = write_scaling(results_root, profile)  # results/scaling.csv + figures

Inputs per model (topkscope.perf.inputs): compute from the user's value, else by `inputs`:
"published" (the default; "GPU inputs from published measurements"): the GPU compute table of
topkscope.perf.published; "here" ("this machine"): the model's complete runs under
results_root, else the model-compute benchmark CSV (this machine's CPU). Selection times from
a selection-benchmark CSV (or the user's); counts from each method's own run (else nominal k);
dense-wfbp's overlap from the model's FLOPs. Each row names its sources, and warns when the
selection was measured on another device than the compute. A model without a compute time is
left out (and listed in the returned notes).

The claims rows (claims_rows, CLAIM_SPARSIFIERS ...) live in topkscope.perf.p16_claims and are
imported here, where write_scaling makes them from the table.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from topkscope.perf import inputs as inp
from topkscope.perf import model as pm
from topkscope.perf.networks import Network, available, resolve
from topkscope.perf.p16_claims import (  # noqa: F401  (part of this module's API)
    BREAKEVEN_EVIDENCE,
    CLAIM,
    CLAIM_P,
    CLAIM_SPARSIFIERS,
    CLAIMS,
    SELECTION_BREAKEVEN,
    SELECTION_MEASURED,
    SPEEDUP_CLAIMS,
    breakeven_text,
    claims_rows,
    comparison_error,
    prediction_columns,
    speedup_verdict,
)
from topkscope.perf.workload import backward_fraction, model_size

REFERENCE_BENCH = Path(__file__).resolve().parents[2] / "results" / "reference" / "bench-cpu"
# a selection benchmark run on a GPU, committed here by whoever has one (docs/scaling.md)
REFERENCE_GPU_BENCH = REFERENCE_BENCH.parent / "bench-gpu"
# where the compute (and batch) of a prediction come from: "published" is the default
INPUTS = {"published": "GPU inputs from published measurements", "here": "this machine"}
DEFAULT_INPUTS = "published"
RUN_INPUTS = "measured in a run"  # the inputs of `topkscope scale --from-run`
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


def _bench_table(name: str, reader, results_root, path, hint: str) -> pd.DataFrame:
    """`path`, else <results_root>/bench/<name>, else the committed CPU reference
    (results/reference/bench-cpu/<name> of the repository), read by `reader`."""
    candidates = [Path(path)] if path is not None else []
    if path is None and results_root is not None:
        candidates.append(Path(results_root) / "bench" / name)
    if path is None:
        candidates.append(REFERENCE_BENCH / name)
    for c in candidates:
        if c.is_file():
            return reader(c)
    raise ValueError(f"no {name}: looked at {', '.join(map(str, candidates))}; {hint}")


def selection_device(inputs: str = DEFAULT_INPUTS, compute_s: float | inp.Input | None = None) -> str | None:
    """The device whose selection times a prediction wants: "gpu" for the published GPU
    inputs, "cpu" for this machine's, None for a compute time the user gave (any device)."""
    if compute_s is not None:  # a run's measurement (an Input) names its device
        return getattr(compute_s, "device", None)
    return "gpu" if inputs == "published" else "cpu"


def selection_table(results_root: str | Path | None = None, path: str | Path | None = None,
                    device: str | None = None) -> pd.DataFrame:
    """The selection CSV: `path` when given; else the first of <results_root>/bench/
    selection.csv and the committed references (results/reference/bench-gpu/selection.csv for
    device "gpu", then bench-cpu/selection.csv) that was measured on `device` ("cpu", "gpu"),
    else the first of them that exists (None: <results_root>/bench, then the CPU reference)."""
    if path is not None:
        return inp.read_selection_csv(path)
    candidates = [Path(results_root) / "bench" / "selection.csv"] if results_root else []
    candidates += [REFERENCE_GPU_BENCH / "selection.csv"] if device == "gpu" else []
    candidates += [REFERENCE_BENCH / "selection.csv"]
    tables = [inp.read_selection_csv(c) for c in candidates if c.is_file()]
    if not tables:
        raise ValueError(f"no selection.csv: looked at {', '.join(map(str, candidates))}; run "
                         "benchmarks/selection.py or give one")
    same = [t for t in tables if device is not None and inp.table_device(t) == device]
    return (same or tables)[0]


def compute_table(results_root: str | Path | None = None,
                  path: str | Path | None = None) -> pd.DataFrame | None:
    """The model-compute CSV, found as selection_table's; None when there is none (and no
    `path` was asked for)."""
    try:
        return _bench_table("model_compute.csv", inp.read_compute_csv, results_root, path,
                            "run benchmarks/model_compute.py or give one")
    except ValueError:
        if path is not None:
            raise
        return None


def _batch(results_root, model: str) -> int | None:
    batches = {(m.get("config") or {}).get("batch_size")
               for _, m in inp.complete_runs(results_root, model)} if results_root else set()
    batches.discard(None)
    return int(next(iter(batches))) if len(batches) == 1 else None


def _check_inputs(inputs: str) -> None:
    if inputs not in INPUTS:
        raise ValueError(f"inputs must be one of {', '.join(INPUTS)}, got {inputs!r}")


def compute_input(model: str, results_root=None, compute_s: float | inp.Input | None = None,
                  bench: pd.DataFrame | None = None, inputs: str = DEFAULT_INPUTS,
                  batch: int | None = None) -> tuple[inp.Input | None, int | None]:
    """(compute Input, batch per worker) of `model`: the user's value (compute_s: seconds,
    or an Input measured in a run, kept as it is); else, with inputs
    "published", the published GPU compute table (topkscope.perf.published); with "here", its
    complete runs' time_compute, else the model-compute benchmark of this machine. (None, None)
    when none has it. `batch` (the user's per-worker batch) rescales a table's compute time
    linearly from the batch it was measured at, and is the batch returned."""
    from topkscope.perf import published

    _check_inputs(inputs)
    if batch is not None and not batch >= 1:
        raise ValueError(f"batch must be >= 1, got {batch!r}")
    if isinstance(compute_s, inp.Input):  # measured in a run (topkscope scale --from-run)
        return compute_s, batch
    if compute_s is not None:
        return inp.Input(float(compute_s), "user"), batch or _batch(results_root, model)
    if inputs == "published":
        found = published.gpu_compute(model)
    else:
        measured = inp.compute_time(results_root, model) if results_root is not None else None
        found = (measured, _batch(results_root, model)) if measured is not None else (
            inp.benchmark_compute_time(bench, model) if bench is not None else None)
    if found is None:
        return None, None
    compute, at = found
    if batch is not None and at is not None and batch != at:
        compute = inp.Input(compute.value * batch / at,
                            f"{compute.source}, scaled linearly from batch {at} to {batch}",
                            compute.device)
    return compute, batch or at


def model_inputs(model: str, methods: Sequence[str], density: float, selection: pd.DataFrame,
                 results_root=None, compute_s: float | inp.Input | None = None,
                 select_s: dict[str, float] | None = None, d: int | None = None,
                 bench: pd.DataFrame | None = None, inputs: str = DEFAULT_INPUTS,
                 batch: int | None = None):
    """(d, batch, compute Input or None, {label: MethodInputs}, notes); without a compute
    time the model is not built and d, the methods' inputs are None, {}. A method whose counts
    were measured in runs under several training conditions gets one entry per condition,
    labelled "<method> [<condition>]" (topkscope.perf.inputs.count_ratios: conditions are never
    mixed); every other method one entry under its name. dense-wfbp overlaps the backward
    share of the compute (topkscope.perf.workload.backward_fraction)."""
    select_s = select_s or {}
    compute, batch = compute_input(model, results_root, compute_s, bench, inputs, batch)
    if compute is None:
        where = ("the published GPU compute table" if inputs == "published" else
                 "no complete run here, not in the model-compute benchmark")
        return None, None, None, {}, [f"{model}: no compute time ({where}; give --compute-s)"]
    d = d or model_size(model)
    notes = []
    out = {}
    for m in methods:
        selector = pm.SELECTOR_OF.get(m, m)
        if m in select_s:
            sel = inp.Input(float(select_s[m]), "user")
        else:
            sel = inp.selection_time(selection, selector, d, density)
        if sel is None:
            notes.append(f"{model}/{m}: no selection time (not in the selection CSV; give "
                         f"--select-s {m}=SECONDS)")
            continue
        overlap = None
        if m == "dense-wfbp":
            fraction, source = backward_fraction(model)
            overlap = inp.Input(fraction, f"backward share of compute: {source}")
        for counts in inp.count_ratios(results_root, model, m, density, d):
            condition = getattr(counts, "condition", "")
            out[f"{m} [{condition}]" if condition else m] = pm.MethodInputs(
                sel, counts, overlap, method=m, condition=condition)
    return d, batch, compute, out, notes




def selection_basis(compute: inp.Input, select: inp.Input) -> str:
    """How a row's selection time may be used: "measured" when it was measured on the
    compute's device, given by the user, or zero (nothing selected); "break-even" when it is
    another device's (topkscope.perf.inputs.device_mismatch): a claim then rests on the
    break-even selection times, never on that time."""
    return SELECTION_BREAKEVEN if inp.device_mismatch(compute, select) else SELECTION_MEASURED


def inputs_warning(compute: inp.Input, methods: dict[str, pm.MethodInputs]) -> str:
    """One warning naming the methods whose selection time comes from another device than the
    compute time ("" when every one agrees)."""
    found = {mi.method or m: inp.device_mismatch(compute, mi.select) for m, mi in methods.items()}
    found = {m: w for m, w in found.items() if w}
    if not found:
        return ""
    return f"{', '.join(found)}: {next(iter(found.values()))}"


def scaling_table(models: Iterable[str], networks: Iterable[Network | str],
                  workers: Sequence[int] = pm.PAPER_WORKERS,
                  methods: Sequence[str] = pm.DEFAULT_METHODS, *,
                  density: float = pm.PAPER_DENSITY, results_root=None,
                  selection: pd.DataFrame | None = None, compute_s: float | inp.Input | None = None,
                  select_s: dict[str, float] | None = None,
                  opts: pm.Options | None = None,
                  compute: pd.DataFrame | None = None, inputs: str = DEFAULT_INPUTS,
                  batch: int | None = None, d: int | None = None,
                  ) -> tuple[pd.DataFrame, list[str]]:
    """The tidy table: one row per (model, network, method, training condition, workers);
    and notes on what was left out. opts: the exchange options (default: the published setting); inputs: "published"
    (GPU inputs from published measurements) or "here" (this machine's runs and benchmarks);
    compute: the model-compute benchmark of "here" (default: compute_table(results_root));
    batch: the per-worker batch (rescales a table's compute, gives the throughput); d: the
    parameter count (default: the model's; for a model given only by its size)."""
    _check_inputs(inputs)
    opts = opts or pm.Options()
    selection = selection if selection is not None else selection_table(
        results_root, device=selection_device(inputs, compute_s))
    if inputs == "here" and compute is None:
        compute = compute_table(results_root)
    nets = [n if isinstance(n, Network) else resolve(n) for n in networks]
    rows, notes = [], []
    for model in models:
        size, per_worker, t_compute, mi, more = model_inputs(
            model, methods, density, selection, results_root, compute_s, select_s, d,
            compute, inputs, batch)
        notes += more
        if t_compute is None:
            continue
        warning = inputs_warning(t_compute, mi)
        label = (RUN_INPUTS if isinstance(compute_s, inp.Input) else
                 "user" if compute_s is not None else INPUTS[inputs])
        basis = {m.method or key: selection_basis(t_compute, m.select) for key, m in mi.items()}
        for net in nets:
            rows += [{**row, "inputs": label, "inputs_warning": warning,
                      "selection_basis": basis[row["method"]]}
                     for row in pm.predict(model, size, per_worker, density, net, workers,
                                           t_compute, mi, opts)]
    return pd.DataFrame(rows), notes


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
            f"{first.get('inputs', INPUTS['here'])}; density {first['density']:g}, "
            f"{first['options']}; selection times from the selection benchmark (scaling.csv "
            f"column select_source); compute per worker: {compute}.{warning}")


def write_scaling(results_root: str | Path, profile: str = "quick", log=print,
                  inputs: str = DEFAULT_INPUTS, selection_csv: str | Path | None = None,
                  ) -> tuple[pd.DataFrame, list[tuple[str, str, list[Path]]]]:
    """results_root/scaling.csv and the figures under results_root/figures/; returns the
    claims rows and the figures drawn as (name, caption, files). The paper's models and any
    other model with a complete run, each with a compute time (inputs "published": the
    published GPU compute table; "here": its runs, else the model-compute benchmark); quick:
    P up to 64; full: P up to 1024. Every preset in both. selection_csv: the selection
    benchmark to use (default: selection_table's choice for the compute's device)."""
    from topkscope.io import write_bytes_atomic

    root = Path(results_root)
    measured = {m.get("model") for _, m in inp.complete_runs(root)} - {None}
    models = list(pm.PAPER_MODELS) + sorted(measured - set(pm.PAPER_MODELS))
    workers = pm.PAPER_WORKERS if profile == "full" else tuple(2**i for i in range(1, 7))
    selection = selection_table(root, selection_csv, selection_device(inputs))
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
    return claims_rows(table), figures
