"""Predicted scaling for a results folder: the tidy table, its figures, the claims rows.

    table = scaling_table(models, networks, workers, results_root=..., selection=...)
    claims = claims_rows(table)                 # rows of results/claims.csv (P = 16)
    write_scaling(results_root, profile)        # results/scaling.csv + figures, returns claims

Inputs per model (topkscope.perf.inputs): compute from the model's complete runs under
results_root (or the user's value), selection times from a selection-benchmark CSV (or the
user's), counts from each method's own run (else nominal k); each row names its sources.
A model without a compute time is left out (and listed in the returned notes).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from topkscope.perf import inputs as inp
from topkscope.perf import model as pm
from topkscope.perf.networks import Network, available, resolve

CLAIM = "gaussiank_speedup_p16"
CLAIM_P = 16
STATEMENT = "Gaussian-k gives an end-to-end speed-up over Dense and over Top-k at P = 16"
RULE = ("prediction of the step-time model (topkscope.perf) at P = 16, density 0.001, "
        "published exchange (two all-gathers, padded); holds if Gaussian-k's predicted step is "
        "shorter than both Dense's and Top-k's, fails if longer than both, else mixed")
FIGURES = {"scaling-breakdown-p16": "breakdown", "scaling-efficiency": "efficiency",
           "scaling-crossover": "crossover"}


@cache
def model_size(name: str) -> int:
    """Trainable parameters d of a topkscope model (built once, on the CPU)."""
    from topkscope import models

    return models.count_parameters(models.create(name))


def selection_table(results_root: str | Path | None = None,
                    path: str | Path | None = None) -> pd.DataFrame:
    """The selection CSV: `path`, else <results_root>/bench/selection.csv, else the committed
    reference (results/reference/bench-cpu/selection.csv of the repository)."""
    candidates = [Path(path)] if path is not None else []
    if path is None and results_root is not None:
        candidates.append(Path(results_root) / "bench" / "selection.csv")
    if path is None:
        candidates.append(Path(__file__).resolve().parents[2] / "results" / "reference"
                          / "bench-cpu" / "selection.csv")
    for c in candidates:
        if c.is_file():
            return inp.read_selection_csv(c)
    raise ValueError(f"no selection benchmark CSV: looked at {', '.join(map(str, candidates))}; "
                     "run benchmarks/selection.py or give one")


def _batch(results_root, model: str) -> int | None:
    batches = {(m.get("config") or {}).get("batch_size")
               for _, m in inp.complete_runs(results_root, model)} if results_root else set()
    batches.discard(None)
    return int(next(iter(batches))) if len(batches) == 1 else None


def model_inputs(model: str, methods: Sequence[str], density: float, selection: pd.DataFrame,
                 results_root=None, compute_s: float | None = None,
                 select_s: dict[str, float] | None = None, d: int | None = None):
    """(d, batch, compute Input or None, {method: MethodInputs}, notes)."""
    d = d or model_size(model)
    select_s = select_s or {}
    notes = []
    if compute_s is not None:
        compute = inp.Input(float(compute_s), "user")
    else:
        compute = inp.compute_time(results_root, model) if results_root is not None else None
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
    return d, _batch(results_root, model), compute, out, notes


def scaling_table(models: Iterable[str], networks: Iterable[Network | str],
                  workers: Sequence[int] = pm.PAPER_WORKERS,
                  methods: Sequence[str] = pm.DEFAULT_METHODS, *,
                  density: float = pm.PAPER_DENSITY, results_root=None,
                  selection: pd.DataFrame | None = None, compute_s: float | None = None,
                  select_s: dict[str, float] | None = None,
                  opts: pm.Options | None = None) -> tuple[pd.DataFrame, list[str]]:
    """The tidy table: one row per (model, network, method, workers); and notes on what was
    left out. opts: the exchange options (default: the published setting)."""
    opts = opts or pm.Options()
    selection = selection if selection is not None else selection_table(results_root)
    nets = [n if isinstance(n, Network) else resolve(n) for n in networks]
    rows, notes = [], []
    for model in models:
        d, batch, compute, mi, more = model_inputs(model, methods, density, selection,
                                                   results_root, compute_s, select_s)
        notes += more
        if compute is None:
            notes.append(f"{model}: no compute time (no complete run here; give --compute-s)")
            continue
        for net in nets:
            rows += pm.predict(model, d, batch, density, net, workers, compute, mi, opts)
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
    from topkscope.plots import scaling
    from topkscope.plots.style import save_figure

    paths = []
    for name, func in FIGURES.items():
        paths += save_figure(getattr(scaling, func)(table), out_dir, name)
    return paths


def write_scaling(results_root: str | Path, profile: str = "quick",
                  log=print) -> pd.DataFrame:
    """results_root/scaling.csv and the figures under results_root/figures/; returns the
    claims rows. quick: the models with a measured compute time, P up to 64; full: the
    paper's models (those with a compute time), P up to 1024. Every preset in both."""
    from topkscope.io import write_bytes_atomic

    root = Path(results_root)
    measured = {m.get("model") for _, m in inp.complete_runs(root)}
    models = [m for m in pm.PAPER_MODELS if m in measured] if profile == "full" \
        else sorted(m for m in measured if m)
    workers = pm.PAPER_WORKERS if profile == "full" else tuple(2**i for i in range(1, 7))
    table, notes = scaling_table(models, available(), workers, results_root=root)
    for note in notes:
        log(f"  scaling: {note}")
    if table.empty:
        log("  scaling: no model with a measured compute time; nothing predicted")
        return pd.DataFrame()
    write_bytes_atomic(root / "scaling.csv", table.to_csv(index=False).encode())
    draw(table, root / "figures")
    return claims_rows(table)
