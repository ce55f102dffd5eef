"""The measured inputs of the step-time model, each returned with where it came from.

- compute: seconds of forward + backward per worker and step, the median `time_compute` of
  train.parquet over a model's complete runs (warm-up steps dropped); else the model-compute
  benchmark (benchmarks/model_compute.py: this machine's CPU, the paper's per-worker batch,
  the fastest thread count); or given by the user.
- selection: seconds to select k of d elements, from a selection-benchmark CSV
  (benchmarks/selection.py: columns method, d, density, distribution, median_ms, device),
  interpolated linearly in log d - log t between the two nearest sizes, extrapolated from the
  last two sizes outside the measured range (and said so), or given by the user.
- counts: elements a worker sends. For approximate selectors the per-step largest count over
  workers, from that method's own run: train.parquet `selected_max` (the training loop's
  largest count over workers; divided by the run's own `k` column, the target count per
  worker, when present), else `count_max`, else per-worker `count_<rank>` columns; else the recorded stats' `<method>_count` (global layer, u, the
  density) maxed over ranks per step; else train.parquet `selected` (a mean over workers:
  an underestimate of the largest); else the nominal k. The source says which.

Every value is an `Input(value, source, device)`; the model and the tables print the sources,
and `device_mismatch` warns when a selection time was measured on another device than the
compute time it is added to.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from topkscope.manifest import find_runs

WARMUP_STEPS = 2
SELECTION_COLUMNS = {"method", "d", "density", "median_ms"}
COMPUTE_COLUMNS = {"model", "threads", "batch_per_worker", "compute_s"}
# the methods whose selection costs nothing (dense SGD and its baselines send everything)
NO_SELECTION = ("dense", "dense-wfbp", "dense-fp16")


@dataclass(frozen=True)
class Input:
    """A model input, where it came from (measured here, published, preset, user, nominal) and
    the device it was measured on ("cpu", "gpu"; None: not a device's time, or not known)."""

    value: float
    source: str
    device: str | None = None


def device_mismatch(compute: Input, select: Input) -> str | None:
    """A warning when the selection time was measured on another device than the compute
    time (or the compute's device is not known), None when they agree or nothing is selected."""
    if select.device is None or select.value == 0:
        return None
    if compute.device == select.device:
        return None
    where = f"on a {compute.device.upper()}" if compute.device else "given without a device"
    return (f"compute {where} but selection measured on a {select.device.upper()}: the "
            "selection times are another device's (give --select-s METHOD=SECONDS or a "
            "selection CSV of the compute's device)")


def complete_runs(results_root: str | Path, model: str | None = None) -> list[tuple[Path, dict]]:
    """(run folder, manifest) of every complete run under results_root (of `model` if given):
    topkscope.manifest.find_runs, as a list of pairs."""
    return [(r.path, r.manifest) for r in find_runs(results_root, model=model)]


def compute_time(results_root: str | Path, model: str) -> Input | None:
    """Median over `model`'s complete runs of each run's median time_compute (None: no run).

    Runs of a resized model (non-empty `model_args`, e.g. the quick profile's narrow VGG-16)
    are skipped: their compute time is not the paper model's, whose d the prediction uses."""
    medians, devices, batches = [], set(), set()
    for run_dir, man in complete_runs(results_root, model):
        if (man.get("config") or {}).get("model_args"):
            continue
        path = run_dir / "train.parquet"
        if not path.is_file():
            continue
        t = pd.read_parquet(path, columns=["step", "time_compute"])
        t = t[t["step"] >= WARMUP_STEPS]["time_compute"].dropna()
        if t.empty:
            continue
        medians.append(float(t.median()))
        devices.add(str(man.get("device", "?")))
        batches.add(str((man.get("config") or {}).get("batch_size", "?")))
    if not medians:
        return None
    return Input(float(np.median(medians)),
                 f"measured here (median time_compute of {len(medians)} {model} run(s), "
                 f"device {'/'.join(sorted(devices))}, batch {'/'.join(sorted(batches))})",
                 _device_kind(devices))


def _device_kind(devices) -> str | None:
    """"cpu" or "gpu" of a set of torch device strings (None: unknown or mixed)."""
    kinds = {"gpu" if str(d).startswith("cuda") else str(d).split(":")[0] for d in devices}
    return kinds.pop() if len(kinds) == 1 and kinds <= {"cpu", "gpu"} else None


def read_compute_csv(path: str | Path) -> pd.DataFrame:
    """The model-compute benchmark CSV (benchmarks/model_compute.py), checked."""
    return _read_bench_csv(path, COMPUTE_COLUMNS, "model-compute benchmark")


def benchmark_compute_time(table: pd.DataFrame, model: str) -> tuple[Input, int] | None:
    """(compute Input, per-worker batch) of `model` from the model-compute benchmark: its
    fastest row over the thread counts measured (on a loaded machine more threads can be far
    slower), None when the model has no measured row in it."""
    rows = table[(table["model"] == model) & table["compute_s"].notna()]
    if rows.empty:
        return None
    row = rows.loc[rows["compute_s"].astype(float).idxmin()]
    batch = int(row["batch_per_worker"])
    scaled = (f", measured at batch {int(row['batch_measured'])} and scaled linearly"
              if "batch_measured" in row and int(row["batch_measured"]) != batch else "")
    load = f", load average {row['load_avg_1min']}" if "load_avg_1min" in row else ""
    name = table.attrs.get("name", "model-compute CSV")
    device = str(row.get("device", "?"))
    return Input(float(row["compute_s"]),
                 f"measured here, {device.upper()}, benchmark ({name}, "
                 f"{int(row['threads'])} thread(s), batch {batch}{scaled}{load})",
                 _device_kind({device})), batch


def _read_bench_csv(path: str | Path, columns: set[str], what: str) -> pd.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{what} CSV {str(path)!r} does not exist")
    df = pd.read_csv(path)
    missing = columns - set(df.columns)
    if missing:
        raise ValueError(f"{str(path)!r} is not a {what} CSV: it lacks {sorted(missing)}")
    df.attrs["name"] = path.name
    return df


def read_selection_csv(path: str | Path) -> pd.DataFrame:
    return _read_bench_csv(path, SELECTION_COLUMNS, "selection benchmark")


def selection_time(table: pd.DataFrame, method: str, d: int, density: float,
                   distribution: str = "normal") -> Input | None:
    """Seconds to select at (d, density) by log-log interpolation in d (None: not measured).

    Rows of the nearest measured density (in log) and `distribution` (all distributions'
    median when that one is absent) are used.
    """
    if method in NO_SELECTION:
        return Input(0.0, "none (dense sends everything)")
    rows = table[table["method"] == method]
    if rows.empty:
        return None
    if "distribution" in rows and (rows["distribution"] == distribution).any():
        rows, dist_label = rows[rows["distribution"] == distribution], distribution
    else:
        dist_label = "all distributions"
    dens = np.unique(rows["density"].to_numpy(dtype=float))
    near = dens[np.argmin(np.abs(np.log(dens) - math.log(density)))]
    rows = rows[rows["density"] == near]
    per_d = rows.groupby("d")["median_ms"].median().sort_index()
    ds = per_d.index.to_numpy(dtype=float)
    ts = per_d.to_numpy(dtype=float) / 1e3
    if len(ds) == 1:
        seconds, how = float(ts[0]) * d / ds[0], "scaled linearly from one size"
    else:
        x, y = np.log(ds), np.log(ts)
        lx = math.log(d)
        i = int(np.clip(np.searchsorted(x, lx) - 1, 0, len(x) - 2))
        slope = (y[i + 1] - y[i]) / (x[i + 1] - x[i])
        seconds = float(math.exp(y[i] + slope * (lx - x[i])))
        how = "interpolated in d" if ds[0] <= d <= ds[-1] else (
            f"extrapolated in d beyond {ds[0]:.3g}-{ds[-1]:.3g}")
    device = str(rows["device"].iloc[0]) if "device" in rows else "?"
    name = table.attrs.get("name", "selection CSV")
    density_note = f"rho={near:g}" + ("" if np.isclose(near, density) else f" for {density:g}")
    return Input(seconds, f"measured here ({name}, {device}, {dist_label}, {density_note}, {how})",
                 _device_kind({device}))


# ------------------------------------------------------------------ counts
_PER_WORKER = re.compile(r"^count_(?:rank)?(\d+)$")
# train.parquet columns holding the per-step largest count over workers, preferred first
MAX_COUNT_COLUMNS = ("selected_max", "count_max")


def _max_over_workers_columns(train: pd.DataFrame) -> tuple[pd.Series, str] | None:
    for col in MAX_COUNT_COLUMNS:
        if col in train.columns and train[col].notna().any():
            return train[col].astype(float), col
    cols = [c for c in train.columns if _PER_WORKER.match(c)]
    if cols:
        return train[cols].astype(float).max(axis=1), f"max of {len(cols)} per-worker columns"
    return None


def _stats_counts(run_dir: Path, method: str, density: float) -> pd.Series | None:
    """Per-step max over ranks of the recorded `<method>_count` / k (global layer, kind u):
    a ratio to the recorded run's own k, so that it transfers to a model of another d."""
    folder = run_dir / "stats"
    col = method.replace("-", "_") + "_count"
    if not folder.is_dir():
        return None
    from topkscope.analysis.runs import STATS_KEYS, read_parts

    try:
        stats = read_parts(folder, STATS_KEYS, [("layer", "==", "__global__"), ("kind", "==", "u")])
    except (ValueError, OSError):  # a damaged part (runs.read_table says which): no stats
        return None
    if stats is None or col not in stats.columns:
        return None
    rows = stats[np.isclose(stats["density"].astype(float), density)]
    rows = rows.dropna(subset=[col])
    rows = rows[rows["k"].astype(float) > 0]
    if rows.empty:
        return None
    ratio = rows[col].astype(float) / rows["k"].astype(float)
    return ratio.groupby(rows["step"]).max()


def count_ratio(results_root: str | Path | None, model: str, method: str, density: float,
                d: int) -> Input:
    """Median over steps of (largest count over workers) / k for `method`, with its source.

    Exact Top-k (and dense) send exactly k (d): ratio 1 from the definition.
    """
    from topkscope.sparsify.base import k_from_density

    if method in ("topk", "torch.topk", "randk", *NO_SELECTION):
        return Input(1.0, "exact (k by definition)")
    runs = complete_runs(results_root, model) if results_root is not None else []
    k = k_from_density(density, d)
    own = [(r, m) for r, m in runs if m.get("sparsifier") == method
           and np.isclose(float(m.get("density", -1)), density)]
    for run_dir, man in own:
        path = run_dir / "train.parquet"
        if not path.is_file():
            continue
        train = pd.read_parquet(path)
        train = train[train["step"] >= WARMUP_STEPS]
        found = _max_over_workers_columns(train)
        if found is not None and found[0].notna().any():
            series, how = found
            if "k" in train.columns and train["k"].notna().all() and (train["k"] > 0).all():
                # the run's own per-worker target: the ratio stays right if its d differs
                return Input(float(np.nanmedian(series / train["k"].astype(float))),
                             f"measured ({method} run {run_dir.name}, train.parquet {how} / k, "
                             f"P={man.get('world_size')})")
            return Input(float(np.nanmedian(series)) / k,
                         f"measured ({method} run {run_dir.name}, train.parquet {how}, "
                         f"P={man.get('world_size')})")
    for run_dir, man in own + [(r, m) for r, m in runs if (r, m) not in own]:
        series = _stats_counts(run_dir, method, density)
        if series is not None:
            series = series[series.index >= WARMUP_STEPS] if len(series) > 1 else series
            return Input(float(series.median()),
                         f"measured (recorded {method}_count / k of run {run_dir.name}, max over "
                         f"{man.get('world_size')} ranks per step)")
    for run_dir, _man in own:
        train = pd.read_parquet(run_dir / "train.parquet", columns=["step", "selected"])
        sel = train[train["step"] >= WARMUP_STEPS]["selected"].dropna()
        if not sel.empty:
            return Input(float(sel.median()) / k,
                         f"measured ({method} run {run_dir.name}, train.parquet selected: a "
                         "mean over workers, below the largest)")
    return Input(1.0, "nominal k (no run of this method measured its counts)")
