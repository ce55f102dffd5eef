"""The published step-time measurements in one frame, and the nearest of them to a setting.

Every source under results/reference/ that measured a training step on a cluster is read into
one common frame (FRAME_COLUMNS), one row per measured (setting, method):

    source        short name of the measurement's origin ("ddl-benchmarks", "gtopkssgd", ...)
    citation      owner/repo@commit path (function) the number was read from
    model         the model's name as this repository spells it
    params        d, its parameter count
    workers       P
    network       the link: a preset name of topkscope.perf.networks ("1gbe", "10gbe",
                  "ib100"), or a description ("one node, NCCL P2P/IPC")
    bandwidth_gbit  the link's line rate (NaN when the source does not say)
    method        dense, dense-wfbp, topk, gtopk, randk, ... (this repository's names)
    density       k / d (NaN for the dense methods)
    batch         per-worker batch
    step_s        measured seconds per step
    setting       what else two rows must share to be compared (node, batch): rows of one
                  (source, model, workers, network, setting) are one measured setting

SOURCES lists the readers, one line each; a source arriving later (the GRACE data release,
converted under results/reference/published/) is one more line: a function that returns its
rows in the frame (`read_frame_csv` reads a CSV already written in it).

`settings(frame)` turns the rows into one row per setting: the dense step, Top-k's step (else
the fastest sparse method's) and its measured speed-up over dense, every sparse method's
speed-up (NaN, empty where the setting has no dense or no sparse row). `nearest(d, workers, network, density)` ranks the settings by

    |ln(d / d_s)| + |ln(P / P_s)| + |ln(bw / bw_s)| + |ln(rho / rho_s)|

(a term left out where the question or the setting does not give it; an unknown bandwidth
counts ln(100)) and returns the nearest, always including the nearest setting that measured a
sparse method against dense.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from topkscope.perf import model as pm

REFERENCE = Path(__file__).resolve().parents[2] / "results" / "reference"
FRAME_COLUMNS = ("source", "citation", "model", "params", "workers", "network",
                 "bandwidth_gbit", "method", "density", "batch", "step_s", "setting")
UNKNOWN_BANDWIDTH_PENALTY = math.log(100.0)
ONE_NODE = "one node, NCCL P2P/IPC"


def _line_rate(network: str) -> float:
    from topkscope.perf.networks import LINE_RATES

    net = LINE_RATES.get(str(network))
    return net.bandwidth_gbit if net is not None else math.nan


def _framed(rows: pd.DataFrame) -> pd.DataFrame:
    missing = set(FRAME_COLUMNS) - set(rows.columns)
    if missing:
        raise ValueError(f"a published source's rows lack {sorted(missing)}")
    return rows[list(FRAME_COLUMNS)].reset_index(drop=True)


def read_frame_csv(path: str | Path) -> pd.DataFrame:
    """A CSV already in the common frame (FRAME_COLUMNS)."""
    return _framed(pm.read_csv_with(path, set(FRAME_COLUMNS), "published step-time frame"))


def ddl_benchmarks() -> pd.DataFrame:
    """HKBU-HPML/ddl-benchmarks: dense and MG-WFBP on 16 and 32 GPUs, 10 GbE and 100 Gb IB
    (results/reference/scaling/published_measurements.csv)."""
    from topkscope.perf.published import measurements, seconds_per_step
    from topkscope.perf.workload import model_size

    table = measurements()
    table = table[table["gpus"] >= 2]
    params = [int(p) if pd.notna(p) else model_size(m)
              for m, p in zip(table["model"], table["params"])]
    return _framed(pd.DataFrame({
        "source": "ddl-benchmarks", "citation": table["source"], "model": table["model"],
        "params": params, "workers": table["gpus"].astype(int), "network": table["network"],
        "bandwidth_gbit": table["network"].map(_line_rate), "method": table["method"],
        "density": math.nan, "batch": table["batch_per_gpu"],
        "step_s": [seconds_per_step(r) for _, r in table.iterrows()],
        "setting": [f"batch {b}" for b in table["batch_per_gpu"]]}))


def gtopkssgd() -> pd.DataFrame:
    """hclhkbu/gtopkssgd: Dense, Top-k and gTop-k at 4-32 workers on 1 GbE
    (results/reference/published/gtopkssgd.csv; k = 0.001 d)."""
    from topkscope.perf import gtopkssgd as g
    from topkscope.perf.workload import model_size

    table = g.measurements()
    table = table[(table["quantity"] == "throughput") & table["method"].isin(g.METHODS)]
    return _framed(pd.DataFrame({
        "source": "gtopkssgd", "citation": table["source"], "model": table["model"],
        "params": table["model"].map(model_size), "workers": table["workers"].astype(int),
        "network": table["network"], "bandwidth_gbit": table["network"].map(_line_rate),
        "method": table["method"],
        "density": np.where(table["method"] == "dense", math.nan, g.DENSITY),
        "batch": table["batch_per_worker"].astype(int),
        "step_s": table["batch_per_worker"] / table["value"],
        "setting": [f"batch {int(b)}" for b in table["batch_per_worker"]]}))


def kljp() -> pd.DataFrame:
    """kljp/topk_results: the Gaussian-k authors' runs on one GPU node, 2-8 GPUs
    (results/reference/published/runs.csv: median time per iteration at the target density)."""
    table = pd.read_csv(REFERENCE / "published" / "runs.csv")
    table = table.dropna(subset=["median_iteration_s", "model", "workers"])
    dense = table["sparsifier"] == "dense"
    return _framed(pd.DataFrame({
        "source": "kljp", "citation": table["source"], "model": table["model"],
        "params": table["params"].astype(int), "workers": table["workers"].astype(int),
        "network": ONE_NODE, "bandwidth_gbit": math.nan, "method": table["sparsifier"],
        "density": np.where(dense, math.nan, table["density"]),
        "batch": table["batch_per_worker"].astype(int), "step_s": table["median_iteration_s"],
        "setting": [f"node {n}, batch {int(b)}" for n, b in
                    zip(table["node"], table["batch_per_worker"])]}))


@dataclass(frozen=True)
class Source:
    """One published source: its name and the function that reads it into the frame."""

    name: str
    read: Callable[[], pd.DataFrame]


# one line per source (the GRACE release: Source("grace", <its reader>))
SOURCES: tuple[Source, ...] = (
    Source("ddl-benchmarks", ddl_benchmarks),
    Source("gtopkssgd", gtopkssgd),
    Source("kljp", kljp),
)


def published_frame(sources: tuple[Source, ...] = SOURCES) -> pd.DataFrame:
    """Every source's rows in the common frame."""
    return pd.concat([s.read() for s in sources], ignore_index=True)


SETTING_KEYS = ["source", "model", "params", "workers", "network", "bandwidth_gbit", "setting"]


def settings(frame: pd.DataFrame, method: str = "topk") -> pd.DataFrame:
    """One row per measured setting: its dense step (median over its dense rows), the sparse
    method it reports (`method` where the setting measured it, else its fastest sparse
    method), that method's step and density, its measured speed-up over dense, every sparse
    method's speed-up in words, the citation."""
    from topkscope.plots.titles import sparsifier_name

    rows = []
    for key, group in frame.groupby(SETTING_KEYS, dropna=False, sort=False):
        steps = group.groupby("method")["step_s"].median()
        sparse = steps.drop(index=[m for m in pm.DENSE_METHODS if m in steps.index])
        shown = method if method in sparse.index else (sparse.idxmin() if len(sparse) else "")
        dense = float(steps["dense"]) if "dense" in steps.index else math.nan
        density = group.loc[group["method"] == shown, "density"]
        rows.append({**dict(zip(SETTING_KEYS, key)), "methods": ", ".join(steps.index),
                     "dense_s": dense, "sparse": shown,
                     "sparse_s": float(sparse[shown]) if shown else math.nan,
                     "density": float(density.iloc[0]) if len(density) else math.nan,
                     "speedup_vs_dense": dense / float(sparse[shown]) if shown else math.nan,
                     "speedups": ", ".join(f"{sparsifier_name(m)} {dense / t:.3g}x"
                                           for m, t in sparse.items()) if dense == dense
                     else "",
                     "citation": "; ".join(dict.fromkeys(
                         c for cs in group["citation"].astype(str) for c in cs.split("; ")))})
    return pd.DataFrame(rows)


def distance(table: pd.DataFrame, d: int, workers: int, bandwidth_gbit: float | None,
             density: float | None) -> pd.Series:
    """The module docstring's distance of every setting of `table` to the question."""
    out = (np.log(table["params"].astype(float) / d)).abs() \
        + (np.log(table["workers"].astype(float) / workers)).abs()
    if bandwidth_gbit is not None and math.isfinite(bandwidth_gbit):
        bw = (np.log(table["bandwidth_gbit"].astype(float) / bandwidth_gbit)).abs()
        out = out + bw.fillna(UNKNOWN_BANDWIDTH_PENALTY)
    if density is not None:
        rho = (np.log(table["density"].astype(float) / density)).abs()
        out = out + rho.fillna(0.0)
    return out


def nearest(d: int, workers: int, network: str | None = None, density: float | None = None,
            n: int = 2, frame: pd.DataFrame | None = None) -> pd.DataFrame:
    """The n settings nearest to the question, with `distance`; the nearest one that measured
    a sparse method against dense is always among them (the last row when it is not nearer)."""
    table = settings(published_frame() if frame is None else frame)
    bandwidth = _line_rate(network) if network is not None else None
    table = table.assign(distance=distance(table, d, workers, bandwidth, density))
    table = table.sort_values("distance", kind="stable").reset_index(drop=True)
    chosen = table.head(n)
    compared = table[table["speedup_vs_dense"].notna()]
    if len(compared) and not chosen["speedup_vs_dense"].notna().any():
        chosen = pd.concat([chosen.head(n - 1), compared.head(1)], ignore_index=True)
    return chosen.reset_index(drop=True)


def describe(row) -> str:
    """'gtopkssgd: VGG-16, d = 14.7M, 16 workers, 1gbe, batch 128: Dense 3.24e+03 ms per step;
    Top-k 2.48x, gTop-k 3.2x Dense's speed [citation]'."""
    from topkscope.plots.titles import model_name

    head = (f"{row['source']}: {model_name(row['model']).split(' (')[0]}, d = "
            f"{row['params'] / 1e6:.3g}M, {int(row['workers'])} workers, {row['network']}, "
            f"{row['setting']}")
    if row["speedups"]:
        told = f"Dense {row['dense_s'] * 1e3:.3g} ms per step; {row['speedups']} Dense's speed"
    elif math.isfinite(row["dense_s"]):
        told = f"Dense {row['dense_s'] * 1e3:.3g} ms per step (no sparse method measured)"
    else:
        told = f"{row['methods']} measured, no Dense to compare with"
    return f"{head}: {told} [{row['citation']}]"
