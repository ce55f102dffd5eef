"""Predicted scaling for a results folder: the tidy table, its figures, the claims rows.

    table = scaling_table(models, networks, workers, results_root=..., selection=...)
    claims = claims_rows(table)                 # rows of results/claims.csv (P = 16)
    claims, figures = write_scaling(results_root, profile)  # results/scaling.csv + figures

Inputs per model (topkscope.perf.inputs): compute from the user's value, else the model's
complete runs under results_root, else the model-compute benchmark CSV (this machine's CPU);
selection times from a selection-benchmark CSV (or the user's); counts from each method's own run (else nominal k); each row names its sources.
A model without a compute time is left out (and listed in the returned notes).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from topkscope.perf import inputs as inp
from topkscope.perf import model as pm
from topkscope.perf.networks import Network, available, resolve
from topkscope.perf.workload import model_size

REFERENCE_BENCH = Path(__file__).resolve().parents[2] / "results" / "reference" / "bench-cpu"
CLAIM = "gaussiank_speedup_p16"
CLAIM_P = 16
STATEMENT = "Gaussian-k gives an end-to-end speed-up over Dense and over Top-k at P = 16"
RULE = ("prediction of the step-time model (topkscope.perf) at P = 16, density 0.001, "
        "published exchange (two all-gathers, padded); holds if Gaussian-k's predicted step is "
        "shorter than both Dense's and Top-k's, fails if longer than both, else mixed")
FIGURES = {"scaling-breakdown-p16": "breakdown", "scaling-efficiency": "efficiency",
           "scaling-crossover": "crossover"}
CAPTIONS = {
    "scaling-breakdown-p16": (
        "Predicted time of one TopK-SGD step at P = 16 workers, split into forward + backward "
        "compute, selection and communication, per model (panels), network preset (groups) and "
        "method (bars); log scale"),
    "scaling-efficiency": (
        "Predicted scaling efficiency t_compute / t_step (throughput over P times one worker's "
        "dense SGD) against the number of workers P, per model, method and network preset"),
    "scaling-crossover": (
        "Predicted bandwidth (Gbit/s) at P = 16 below which each sparse method's step beats "
        "dense SGD's ring all-reduce, per model ('any': at every bandwidth; one bar per "
        "latency, the presets sharing alpha coincide)"),
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


def selection_table(results_root: str | Path | None = None,
                    path: str | Path | None = None) -> pd.DataFrame:
    """The selection CSV: `path`, else <results_root>/bench/selection.csv, else the committed
    reference (results/reference/bench-cpu/selection.csv of the repository)."""
    return _bench_table("selection.csv", inp.read_selection_csv, results_root, path,
                        "run benchmarks/selection.py or give one")


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


def compute_input(model: str, results_root=None, compute_s: float | None = None,
                  bench: pd.DataFrame | None = None) -> tuple[inp.Input | None, int | None]:
    """(compute Input, batch per worker) of `model`: the user's value, else its complete runs'
    time_compute, else the model-compute benchmark; (None, None) when none has it."""
    batch = _batch(results_root, model)
    if compute_s is not None:
        return inp.Input(float(compute_s), "user"), batch
    measured = inp.compute_time(results_root, model) if results_root is not None else None
    if measured is not None:
        return measured, batch
    found = inp.benchmark_compute_time(bench, model) if bench is not None else None
    return found if found is not None else (None, None)


def model_inputs(model: str, methods: Sequence[str], density: float, selection: pd.DataFrame,
                 results_root=None, compute_s: float | None = None,
                 select_s: dict[str, float] | None = None, d: int | None = None,
                 bench: pd.DataFrame | None = None):
    """(d, batch, compute Input or None, {method: MethodInputs}, notes); without a compute
    time the model is not built and d, the methods' inputs are None, {}."""
    select_s = select_s or {}
    compute, batch = compute_input(model, results_root, compute_s, bench)
    if compute is None:
        return None, None, None, {}, [f"{model}: no compute time (no complete run here, not in "
                                      "the model-compute benchmark; give --compute-s)"]
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
        out[m] = pm.MethodInputs(sel, inp.count_ratio(results_root, model, m, density, d))
    return d, batch, compute, out, notes


def scaling_table(models: Iterable[str], networks: Iterable[Network | str],
                  workers: Sequence[int] = pm.PAPER_WORKERS,
                  methods: Sequence[str] = pm.DEFAULT_METHODS, *,
                  density: float = pm.PAPER_DENSITY, results_root=None,
                  selection: pd.DataFrame | None = None, compute_s: float | None = None,
                  select_s: dict[str, float] | None = None,
                  opts: pm.Options | None = None,
                  compute: pd.DataFrame | None = None) -> tuple[pd.DataFrame, list[str]]:
    """The tidy table: one row per (model, network, method, workers); and notes on what was
    left out. opts: the exchange options (default: the published setting); compute: the
    model-compute benchmark (default: compute_table(results_root))."""
    opts = opts or pm.Options()
    selection = selection if selection is not None else selection_table(results_root)
    compute = compute if compute is not None else compute_table(results_root)
    nets = [n if isinstance(n, Network) else resolve(n) for n in networks]
    rows, notes = [], []
    for model in models:
        d, batch, t_compute, mi, more = model_inputs(model, methods, density, selection,
                                                     results_root, compute_s, select_s,
                                                     bench=compute)
        notes += more
        if t_compute is None:
            continue
        for net in nets:
            rows += pm.predict(model, d, batch, density, net, workers, t_compute, mi, opts)
    return pd.DataFrame(rows), notes


def _claim_row(sub: pd.DataFrame, model: str, network: str) -> dict | None:
    by = sub.set_index("method")
    if not {"dense", "topk", "gaussiank"} <= set(by.index):
        return None
    g = by.loc["gaussiank"]
    vs_dense, vs_topk = float(g["speedup_vs_dense"]), float(g["speedup_vs_topk"])
    faster = (vs_dense > 1) + (vs_topk > 1)
    verdict = {2: "holds", 0: "fails"}.get(faster, "mixed")
    parts = lambda m: (f"{m} {by.loc[m, 't_step'] * 1e3:.3g} ms (compute "  # noqa: E731
                       f"{by.loc[m, 't_compute'] * 1e3:.3g}, select {by.loc[m, 't_select'] * 1e3:.3g}"
                       f", comm {by.loc[m, 't_comm'] * 1e3:.3g})")
    evidence = (f"predicted speed-up over Dense {vs_dense:.3f}x, over Top-k {vs_topk:.3f}x; "
                + "; ".join(parts(m) for m in ("dense", "topk", "gaussiank")))
    condition = (f"prediction, not a measurement: network {network} ({g['comm_source']}); "
                 f"compute {g['compute_source']}; selection {g['select_source']}; "
                 f"Gaussian-k counts {g['count_source']}; {g['options']}")
    from topkscope.models import DATASET

    return {"model": model, "dataset": DATASET.get(model), "dataset_substitute": None, "claim": CLAIM,
            "sparsifier": "gaussiank", "statement": f"{STATEMENT} ({network})",
            "n_runs": np.nan, "n_units": 2, "fraction": faster / 2, "evidence": evidence,
            "verdict": verdict, "rule": RULE, "profile": None, "model_args": "",
            "condition": condition, "n_seeds": np.nan, "ci_low": np.nan, "ci_high": np.nan,
            "traffic_ratio": float(g["count_ratio"])}


def claims_rows(table: pd.DataFrame, workers: int = CLAIM_P) -> pd.DataFrame:
    """One claims.csv row per (model, network): Gaussian-k's predicted speed-ups at P."""
    rows = []
    at = table[table["workers"] == workers] if not table.empty else table
    for (model, network), sub in at.groupby(["model", "network"], sort=False):
        row = _claim_row(sub, model, network)
        if row is not None:
            rows.append(row)
    return pd.DataFrame(rows)


def draw(table: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """The three figures of topkscope.plots.scaling into out_dir (png/pdf)."""
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
    return (f"A prediction of the step-time model (topkscope.perf), not a measurement: density "
            f"{first['density']:g}, {first['options']}; selection times from the selection "
            f"benchmark (scaling.csv column select_source); compute per worker: {compute}.")


def write_scaling(results_root: str | Path, profile: str = "quick",
                  log=print) -> tuple[pd.DataFrame, list[tuple[str, str, list[Path]]]]:
    """results_root/scaling.csv and the figures under results_root/figures/; returns the
    claims rows and the figures drawn as (name, caption, files). The paper's models and any
    other model with a complete run, each with a compute time (its runs, else the
    model-compute benchmark); quick: P up to 64; full: P up to 1024. Every preset in both."""
    from topkscope.io import write_bytes_atomic

    root = Path(results_root)
    measured = {m.get("model") for _, m in inp.complete_runs(root)} - {None}
    models = list(pm.PAPER_MODELS) + sorted(measured - set(pm.PAPER_MODELS))
    workers = pm.PAPER_WORKERS if profile == "full" else tuple(2**i for i in range(1, 7))
    table, notes = scaling_table(models, available(), workers, results_root=root)
    for note in notes:
        log(f"  scaling: {note}")
    if table.empty:
        log("  scaling: no model with a compute time; nothing predicted")
        return pd.DataFrame(), []
    write_bytes_atomic(root / "scaling.csv", table.to_csv(index=False).encode())
    figures = draw_captioned(table, root / "figures")
    return claims_rows(table), figures
