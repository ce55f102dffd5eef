"""The measured inputs of the step-time model, each returned with where it came from.

- compute: seconds of forward + backward per worker and step, the median `time_compute` of
  train.parquet over a model's complete runs (warm-up steps dropped); else the model-compute
  benchmark (benchmarks/model_compute.py: this machine's CPU, the paper's per-worker batch,
  the fastest thread count); or given by the user.
- selection: seconds to select k of d elements, from a selection-benchmark CSV
  (benchmarks/selection.py: columns method, d, density, distribution, median_ms, device),
  interpolated linearly in log d - log t between the two nearest sizes, extrapolated from the
  last two sizes outside the measured range (and said so), or given by the user.
- counts: elements a worker sends. Dense methods send d and exact or fixed-count sparsifiers
  k (sends_k). Every other method's ratio is measured in its own complete runs, per training
  condition (topkscope.manifest.condition_of: "warmup=none", "warmup=paper", ...; two
  conditions are never mixed) and seed: per run the mean over steps of (largest count over
  workers) / k (run_count_ratio: train.parquet `selected_max` over the run's own `k` column,
  else `count_max` or per-worker `count_<rank>` columns, else the run's recorded
  `<method>_count`, else the mean `selected`, an underestimate); per condition the mean over
  seeds, with each seed's ratio (Counts). Without runs of the method, what the recorder
  measured of it on other methods' u under that condition (never dense runs), else the
  nominal k. The source says which.

Every value is an `Input(value, source, device)` (topkscope.perf.model.Input, importable from
here too); the model and the tables print the sources, and `device_mismatch` warns when a
selection time was measured on another device than the compute time it is added to.

Choosing a model's inputs (model_inputs, what topkscope.perf.report's scaling table predicts
from): compute from the user's value (seconds, or an Input measured in a run), else by
`inputs` (INPUTS): "published" (the default; "GPU inputs from published measurements"): the
GPU compute table of topkscope.perf.published; "here" ("this machine"): the model's complete
runs, else the model-compute benchmark CSV (compute_table). Selection times from a
selection-benchmark CSV (selection_table, preferring one measured on the device that
selection_device names for the compute) or the user's; with GPU compute and no benchmark
measured on a GPU, the published GPU selection inputs where a method has them
(topkscope.perf.gpu_bands.gpu_selection_input: exact Top-k's logged or fitted GPU times, the
published threshold rules' memory-traffic model, topkscope.perf.traffic), the benchmark's
times for the others; counts from each method's own runs (count_ratios, else
nominal k); dense-wfbp's overlap from the model's FLOPs (topkscope.perf.workload).
selection_basis and inputs_warning say where a selection time is another device's or
modelled.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from topkscope.manifest import condition_of, find_runs
from topkscope.perf import model as pm
from topkscope.perf import published
from topkscope.perf.model import Input  # defined with the model; inputs.Input stays importable
from topkscope.perf.workload import backward_fraction, model_size

WARMUP_STEPS = 2
SELECTION_COLUMNS = {"method", "d", "density", "median_ms"}
COMPUTE_COLUMNS = {"model", "threads", "batch_per_worker", "compute_s"}
# the methods whose selection costs nothing (dense SGD and its baselines send everything)
NO_SELECTION = ("dense", "dense-wfbp", "dense-fp16")
SELECTION_MEASURED = "measured"     # the selection time is the compute's device's (or none)
SELECTION_BREAKEVEN = "break-even"  # another device's: judged by break-even selection times
MODELLED = "modelled"  # how a selection time's source begins when no device measured it


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


def runs_here(results_root: str | Path, **wanted) -> list:
    """The one index of the runs whose numbers are inputs here: topkscope.manifest.find_runs
    (complete runs; `wanted`: its fields), less the imported published runs, which were
    measured elsewhere, on GPUs (their inputs: topkscope.perf.gpu_runs)."""
    from topkscope.manifest import is_published

    return [r for r in find_runs(results_root, **wanted) if not is_published(r.manifest)]


def complete_runs(results_root: str | Path, model: str | None = None) -> list[tuple[Path, dict]]:
    """(run folder, manifest) of every complete run under results_root (of `model` if given):
    runs_here, as a list of pairs."""
    return [(r.path, r.manifest) for r in runs_here(results_root, model=model)]


def compute_time(results_root: str | Path, model: str) -> Input | None:
    """Median over `model`'s complete runs of each run's median time_compute (None: no run).

    Runs of a resized model (non-empty `model_args`, e.g. the quick profile's narrow VGG-16)
    are skipped: their compute time is not the paper model's, whose d the prediction uses."""
    medians, devices, batches = [], set(), set()
    for run_dir, man in complete_runs(results_root, model):
        if (man.get("config") or {}).get("model_args"):
            continue
        t = measured_compute(run_dir)
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


def measured_compute(run_dir: str | Path) -> pd.Series:
    """The run's measured time_compute per step from step WARMUP_STEPS on (train.parquet; the
    first steps warm caches up); empty when it has no train.parquet or no value there."""
    path = Path(run_dir) / "train.parquet"
    if not path.is_file():
        return pd.Series(dtype="float64")
    t = pd.read_parquet(path, columns=["step", "time_compute"])
    return t[t["step"] >= WARMUP_STEPS]["time_compute"].astype("float64").dropna()


def recorded_size(run_dir: str | Path) -> int | None:
    """d from a run's recorded layout: the largest numel of its stats rows of layer __global__
    (None when it recorded none)."""
    from topkscope.analysis.runs import read_parts
    from topkscope.schema import GLOBAL, STATS_KEYS

    stats = read_parts(Path(run_dir) / "stats", STATS_KEYS, [("layer", "==", GLOBAL)],
                       dedupe=False)
    if stats is None or stats.empty or "numel" not in stats:
        return None
    return int(stats["numel"].max())


MANIFEST_SIZE = "the run's manifest (num_parameters)"
LAYOUT_SIZE = "the recorded layout (numel of the stats rows of layer __global__)"


def run_size(run_dir: str | Path, manifest: dict) -> tuple[int, str]:
    """(d, where from) of one run: its manifest's num_parameters, else its recorded layout (a
    Recorder in a loop of one's own names no size). ValueError naming the run when neither
    gives one."""
    d = manifest.get("num_parameters")
    if isinstance(d, int) and d >= 1:
        return d, MANIFEST_SIZE
    d = recorded_size(run_dir)
    if d is None:
        raise ValueError(f"{str(run_dir)!r} gives no model size: its manifest has no "
                         "num_parameters and it recorded no __global__ row; give --params N")
    return d, LAYOUT_SIZE


def run_compute(run_dir: str | Path, manifest: dict) -> tuple[int, Input | None, int | None]:
    """(d, compute Input or None, per-worker batch or None) of one run: its size (run_size),
    the median of its measured time_compute (None when it timed no step), its config's
    batch_size. ValueError when neither the manifest nor the recorded layout gives d."""
    d, _ = run_size(run_dir, manifest)
    t = measured_compute(run_dir)
    batch = (manifest.get("config") or {}).get("batch_size")
    if t.empty:
        return d, None, batch
    device = manifest.get("device", "?")
    return d, Input(float(t.median()), f"measured in {run_dir} (median time_compute of "
                                       f"{len(t)} steps, device {device})",
                    _device_kind({device})), batch


def missing_compute(run_dir: str | Path) -> str:
    """The one line saying what to pass for a run that timed no step."""
    why = ("time_compute is null in every train.parquet row"
           if (Path(run_dir) / "train.parquet").is_file()
           else "it has no train.parquet: a Recorder in a loop of your own times no step")
    return (f"{str(run_dir)!r} has no measured compute time ({why}); give --compute-s "
            "SECONDS (one worker's forward + backward of a step)")


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
    df = pm.read_csv_with(path, columns, what)
    df.attrs["name"] = Path(path).name
    return df


def read_selection_csv(path: str | Path) -> pd.DataFrame:
    return _read_bench_csv(path, SELECTION_COLUMNS, "selection benchmark")


def table_device(table: pd.DataFrame) -> str | None:
    """"cpu" or "gpu": the device a benchmark CSV was measured on (its `device` column; None
    when it has none, or several)."""
    return _device_kind(set(table["device"].astype(str))) if "device" in table else None


def selection_time(table: pd.DataFrame, method: str, d: int, density: float,
                   distribution: str = "normal") -> Input | None:
    """Seconds to select at (d, density) by log-log interpolation in d (None: not measured).

    Rows of the nearest measured density (in log) and `distribution` (all distributions'
    median when that one is absent) are used.
    """
    if method in NO_SELECTION:
        return Input(0.0, "none (dense sends everything)")
    rows = table[(table["method"] == method) & table["median_ms"].notna()]  # NaN: not timed
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
    seconds, how = pm.loglog(per_d.index, per_d.to_numpy(dtype=float) / 1e3, d)
    device = str(rows["device"].iloc[0]) if "device" in rows else "?"
    name = table.attrs.get("name", "selection CSV")
    density_note = f"rho={near:g}" + ("" if np.isclose(near, density) else f" for {density:g}")
    return Input(seconds, f"measured ({name}, {device}, {dist_label}, {density_note}, {how})",
                 _device_kind({device}))


# ------------------------------------------------------------------ counts
_PER_WORKER = re.compile(r"^count_(?:rank)?(\d+)$")
# train.parquet columns holding the per-step largest count over workers, preferred first
MAX_COUNT_COLUMNS = ("selected_max", "count_max")
# methods of the step-time model whose count is k by construction (gtopk: Top-k, then a tree)
_SENDS_K = ("torch.topk", "gtopk")


@dataclass(frozen=True)
class Counts(Input):
    """A count ratio measured in runs: `value` is the mean over seeds of each seed's ratio;
    `condition` the training condition (topkscope.manifest.condition_of) of every run behind
    it; `per_seed` ((seed, ratio), ...), each ratio the mean over that seed's runs."""

    condition: str = ""
    per_seed: tuple[tuple[int, float], ...] = ()

    @property
    def low(self) -> float:
        return min((r for _, r in self.per_seed), default=self.value)

    @property
    def high(self) -> float:
        return max((r for _, r in self.per_seed), default=self.value)


def sends_k(method: str) -> bool:
    """True when a method's count needs no measurement: the dense methods send d, and exact or
    fixed-count sparsifiers (topk, gaussiank, randk; `exact` / `fixed_count`) exactly k."""
    from topkscope.sparsify import available, get_sparsifier

    if method in NO_SELECTION or method in _SENDS_K:
        return True
    if method not in available():
        return False
    try:
        sparsifier = get_sparsifier(method)
    except ValueError:  # a method that needs parameters (threshold): not fixed by its name
        return False
    return bool(sparsifier.exact or sparsifier.fixed_count)


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


def run_count_ratio(run_dir: str | Path, method: str, density: float,
                    k_nominal: int) -> tuple[float, str] | None:
    """(ratio, where it was read) of one run of `method`: the mean over its steps of the
    largest count over workers / k. Step time is linear in that largest count (the padded
    exchange moves it from every worker), so the mean over steps gives the run's whole
    exchange time; every step counts (a median would drop the steps that cost the most).

    Read from train.parquet `selected_max` (else `count_max`, else the largest of the
    per-worker `count_<rank>` columns) over the run's own `k` column (the target per worker at
    that step's density), or over `k_nominal` where the run has no k; else the run's recorded
    `<method>_count` (max over ranks per recorded step / the recorded k); else train.parquet
    `selected` / k (a mean over workers: below the largest). None: the run has none of them.
    """
    run_dir = Path(run_dir)
    path = run_dir / "train.parquet"
    train = pd.read_parquet(path) if path.is_file() else pd.DataFrame()
    own_k = ("k" in train.columns and train["k"].notna().all()
             and bool((train["k"].astype(float) > 0).all()))
    k = train["k"].astype(float) if own_k else float(k_nominal)
    over = "k" if own_k else f"k of rho={density:g} ({k_nominal})"
    found = _max_over_workers_columns(train)
    if found is not None:
        series, how = found
        ratio = (series / k)[series.notna()]
        return float(ratio.mean()), f"train.parquet {how} / {over}"
    recorded = _stats_counts(run_dir, method, density)
    if recorded is not None:
        return float(recorded.mean()), f"recorded {method}_count / k, max over ranks per step"
    if "selected" in train.columns and train["selected"].notna().any():
        ratio = (train["selected"].astype(float) / k)[train["selected"].notna()]
        return float(ratio.mean()), (f"train.parquet selected / {over} (a mean over workers, "
                                     "below the largest)")
    return None


def run_k(manifest: dict, density: float, d: int) -> int:
    """k at `density` of the run's own parameter count (manifest num_parameters), else of d."""
    from topkscope.sparsify.base import k_from_density

    return k_from_density(density, int(manifest.get("num_parameters") or d))


def seed_counts(results_root: str | Path, model: str, method: str, density: float, d: int,
                condition: str) -> Counts | None:
    """`method`'s count ratio under one training condition, per seed, from its own complete
    runs of `model` at `density` (run_count_ratio of each; several runs of one seed: their
    mean). Without such runs, the `<method>_count` the recorder measured on the u of the
    model's complete non-dense runs under that condition (another method's training: the
    source says so). None when neither exists. Dense runs never count."""
    per_seed: dict[int, list[float]] = {}
    hows, workers = set(), set()
    for run in runs_here(results_root, model=model, sparsifier=method, density=density,
                         condition=condition):
        got = run_count_ratio(run.path, method, density, run_k(run.manifest, density, d))
        if got is not None:
            per_seed.setdefault(int(run.manifest.get("seed") or 0), []).append(got[0])
            hows.add(got[1])
            workers.add(str(run.manifest.get("world_size")))
    whose = f"{method}'s own runs"
    if not per_seed:
        for run in runs_here(results_root, model=model, condition=condition):
            trained = run.manifest.get("sparsifier")
            if trained in NO_SELECTION or trained == method:
                continue
            recorded = _stats_counts(run.path, method, density)
            if recorded is not None:
                per_seed.setdefault(int(run.manifest.get("seed") or 0), []).append(
                    float(recorded.mean()))
                hows.add(f"recorded {method}_count / k on {trained}'s u, max over ranks per "
                         "step")
                workers.add(str(run.manifest.get("world_size")))
        whose = f"not {method}'s own training"
    if not per_seed:
        return None
    ratios = tuple(sorted((seed, float(np.mean(v))) for seed, v in per_seed.items()))
    values = [r for _, r in ratios]
    n_runs = sum(len(v) for v in per_seed.values())
    return Counts(float(np.mean(values)),
                  f"measured ({whose}, {condition}: mean over steps of "
                  f"{'; '.join(sorted(hows))}; mean over {len(ratios)} seed(s), "
                  f"{min(values):.3g}-{max(values):.3g}; {n_runs} run(s), "
                  f"P={'/'.join(sorted(workers))})", None, condition, ratios,
                  grade="measured")


def method_conditions(results_root: str | Path, model: str, method: str,
                      density: float) -> list[str]:
    """The training conditions of `method`'s complete runs of `model` at `density`, sorted;
    without any, those of the model's complete runs of another sparsifier (whose recorder may
    have measured `method`'s count on their u; seed_counts says whether it did)."""
    own = runs_here(results_root, model=model, sparsifier=method, density=density)
    runs = own or [r for r in runs_here(results_root, model=model)
                   if r.manifest.get("sparsifier") not in (*NO_SELECTION, method)]
    return sorted({condition_of(r.manifest) for r in runs})


def count_ratios(results_root: str | Path | None, model: str, method: str, density: float,
                 d: int) -> list[Input]:
    """`method`'s count ratio per training condition (a Counts each, never mixing two
    conditions): one Input of ratio 1 for a method that sends k by construction (sends_k), and
    one nominal Input (ratio 1, "nominal k") when no run measured its counts."""
    if sends_k(method):
        return [Input(1.0, "exact (k by definition)")]
    found = [] if results_root is None else [
        c for cond in method_conditions(results_root, model, method, density)
        if (c := seed_counts(results_root, model, method, density, d, cond)) is not None]
    return found or [Input(1.0, "nominal k (no run of this method measured its counts)",
                           grade="assumed")]


def count_ratio(results_root: str | Path | None, model: str, method: str, density: float,
                d: int, condition: str | None = None) -> Input:
    """`method`'s count ratio under `condition` (count_ratios). condition None: the runs' only
    condition; ValueError when they ran under several (conditions are never mixed)."""
    if condition is not None and not sends_k(method) and results_root is not None:
        found = seed_counts(results_root, model, method, density, d, condition)
        return found if found is not None else Input(
            1.0, f"nominal k (no {condition} run of this method measured its counts)",
            grade="assumed")
    found = count_ratios(results_root, model, method, density, d)
    if len(found) > 1:
        conditions = ", ".join(c.condition for c in found if isinstance(c, Counts))
        raise ValueError(f"{method} runs of {model} ran under several conditions ({conditions}); "
                         "give condition= one of them")
    return found[0]


# ------------------------------------------------------------------ a model's inputs
REFERENCE_BENCH = Path(__file__).resolve().parents[2] / "results" / "reference" / "bench-cpu"
# a selection benchmark run on a GPU, committed here by whoever has one (docs/scaling.md)
REFERENCE_GPU_BENCH = REFERENCE_BENCH.parent / "bench-gpu"
# where the compute (and batch) of a prediction come from: "published" is the default
INPUTS = {"published": "GPU inputs from published measurements", "here": "this machine"}
DEFAULT_INPUTS = "published"
RUN_INPUTS = "measured in a run"  # the inputs of `topkscope scale --from-run`


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


def selection_device(inputs: str = DEFAULT_INPUTS,
                     compute_s: float | Input | None = None) -> str | None:
    """The device whose selection times a prediction wants: "gpu" for the published GPU
    inputs, "cpu" for this machine's, None for a compute time the user gave (any device)."""
    if compute_s is not None:  # a run's measurement (an Input) names its device
        return getattr(compute_s, "device", None)
    return "gpu" if inputs == "published" else "cpu"


# a selection table's attrs key: prefer the published GPU selection inputs
# (topkscope.perf.gpu_bands.gpu_selection_input) for GPU compute, the table for the rest
PUBLISHED_GPU = "published_gpu_selection"


def selection_table(results_root: str | Path | None = None, path: str | Path | None = None,
                    device: str | None = None) -> pd.DataFrame:
    """The selection CSV: `path` when given; else the first of <results_root>/bench/
    selection.csv and the committed references (results/reference/bench-gpu/selection.csv for
    device "gpu", then bench-cpu/selection.csv) that was measured on `device` ("cpu", "gpu"),
    else the first of them that exists (None: <results_root>/bench, then the CPU reference).
    For device "gpu" without a GPU benchmark the table is marked (attrs PUBLISHED_GPU):
    model_inputs then takes the published GPU selection inputs where a method has them."""
    if path is not None:
        return read_selection_csv(path)
    candidates = [Path(results_root) / "bench" / "selection.csv"] if results_root else []
    candidates += [REFERENCE_GPU_BENCH / "selection.csv"] if device == "gpu" else []
    candidates += [REFERENCE_BENCH / "selection.csv"]
    tables = [read_selection_csv(c) for c in candidates if c.is_file()]
    if not tables:
        raise ValueError(f"no selection.csv: looked at {', '.join(map(str, candidates))}; run "
                         "benchmarks/selection.py or give one")
    same = [t for t in tables if device is not None and table_device(t) == device]
    chosen = (same or tables)[0]
    if device == "gpu" and not same:  # no GPU benchmark: the published GPU inputs first
        chosen.attrs[PUBLISHED_GPU] = True
    return chosen


def compute_table(results_root: str | Path | None = None,
                  path: str | Path | None = None) -> pd.DataFrame | None:
    """The model-compute CSV, found as selection_table's; None when there is none (and no
    `path` was asked for)."""
    try:
        return _bench_table("model_compute.csv", read_compute_csv, results_root, path,
                            "run benchmarks/model_compute.py or give one")
    except ValueError:
        if path is not None:
            raise
        return None


def _batch(results_root, model: str) -> int | None:
    batches = {(m.get("config") or {}).get("batch_size")
               for _, m in complete_runs(results_root, model)} if results_root else set()
    batches.discard(None)
    return int(next(iter(batches))) if len(batches) == 1 else None


def check_inputs(inputs: str) -> None:
    """ValueError unless `inputs` is one of INPUTS."""
    if inputs not in INPUTS:
        raise ValueError(f"inputs must be one of {', '.join(INPUTS)}, got {inputs!r}")


def compute_input(model: str, results_root=None, compute_s: float | Input | None = None,
                  bench: pd.DataFrame | None = None, inputs: str = DEFAULT_INPUTS,
                  batch: int | None = None) -> tuple[Input | None, int | None]:
    """(compute Input, batch per worker) of `model`: the user's value (compute_s: seconds,
    or an Input measured in a run, kept as it is); else, with inputs
    "published", the published GPU compute table (topkscope.perf.published); with "here", its
    complete runs' time_compute, else the model-compute benchmark of this machine. (None, None)
    when none has it. `batch` (the user's per-worker batch) rescales a table's compute time
    linearly from the batch it was measured at, and is the batch returned."""
    check_inputs(inputs)
    if batch is not None and not batch >= 1:
        raise ValueError(f"batch must be >= 1, got {batch!r}")
    if isinstance(compute_s, Input):  # measured in a run (topkscope scale --from-run)
        return compute_s, batch
    if compute_s is not None:
        return Input(float(compute_s), "user"), batch or _batch(results_root, model)
    if inputs == "published":
        found = published.gpu_compute(model)
    else:
        measured = compute_time(results_root, model) if results_root is not None else None
        found = (measured, _batch(results_root, model)) if measured is not None else (
            benchmark_compute_time(bench, model) if bench is not None else None)
    if found is None:
        return None, None
    compute, at = found
    if batch is not None and at is not None and batch != at:
        compute = Input(compute.value * batch / at,
                            f"{compute.source}, scaled linearly from batch {at} to {batch}",
                            compute.device)
    return compute, batch or at


def model_inputs(model: str, methods: Sequence[str], density: float, selection: pd.DataFrame,
                 results_root=None, compute_s: float | Input | None = None,
                 select_s: dict[str, float | Input] | None = None, d: int | None = None,
                 bench: pd.DataFrame | None = None, inputs: str = DEFAULT_INPUTS,
                 batch: int | None = None):
    """(d, batch, compute Input or None, {label: MethodInputs}, notes); without a compute
    time the model is not built and d, the methods' inputs are None, {}. A method whose counts
    were measured in runs under several training conditions gets one entry per condition,
    labelled "<method> [<condition>]" (count_ratios: conditions are never
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
        sel = None
        if m in select_s:  # seconds the user gave, or an Input measured in a run
            sel = select_s[m] if isinstance(select_s[m], Input) else \
                Input(float(select_s[m]), "user")
        elif selection.attrs.get(PUBLISHED_GPU) and compute.device == "gpu":
            from topkscope.perf.gpu_bands import gpu_selection_input

            sel = gpu_selection_input(m, model, d)
        if sel is None:
            sel = selection_time(selection, selector, d, density)
        if sel is None:
            notes.append(f"{model}/{m}: no selection time (not in the selection CSV; give "
                         f"--select-s {m}=SECONDS)")
            continue
        overlap = None
        if m == "dense-wfbp":
            fraction, source = backward_fraction(model)
            overlap = Input(fraction, f"backward share of compute: {source}")
        for counts in count_ratios(results_root, model, m, density, d):
            condition = getattr(counts, "condition", "")
            out[f"{m} [{condition}]" if condition else m] = pm.MethodInputs(
                sel, counts, overlap, method=m, condition=condition)
    return d, batch, compute, out, notes


def selection_basis(compute: Input, select: Input) -> str:
    """How a row's selection time may be used: "measured" when it was measured on the
    compute's device, given by the user, or zero (nothing selected); "break-even" when it is
    another device's (device_mismatch) or modelled, not measured (a published GPU input of
    topkscope.perf.traffic): a claim then rests on the break-even selection times, never on
    that time."""
    if device_mismatch(compute, select) or select.source.startswith(MODELLED):
        return SELECTION_BREAKEVEN
    return SELECTION_MEASURED


def inputs_warning(compute: Input, methods: dict[str, pm.MethodInputs]) -> str:
    """One warning naming the methods whose selection time comes from another device than the
    compute time ("" when every one agrees)."""
    found = {mi.method or m: device_mismatch(compute, mi.select) for m, mi in methods.items()}
    found = {m: w for m, w in found.items() if w}
    if not found:
        return ""
    return f"{', '.join(found)}: {next(iter(found.values()))}"


# ------------------------------------------------------------------ count bands (P = 16)
def count_steps(run, method: str, density: float) -> pd.Series | None:
    """Per step of one loaded run (topkscope.analysis.runs.load) that trained at the target
    density: `method`'s largest count over workers / k, the count the padded all-gather pays.
    In its own training (the run trained `method`): train.parquet's largest count over workers
    (MAX_COUNT_COLUMNS, else the per-worker columns) over the step's k; on another run's u: its
    recorder's `<method>_count` / k of the whole-model u rows at `density`, largest over ranks.
    Steps of a density warm-up are left out (topkscope.analysis.units.unit_conditions). None:
    the run holds neither."""
    from topkscope.analysis.units import unit_conditions
    from topkscope.schema import GLOBAL, column_prefix

    if run.manifest.get("sparsifier") == method:
        train = run.train.drop_duplicates("step", keep="last") if len(run.train) else run.train
        found = _max_over_workers_columns(train) if "k" in train else None
        if found is None:
            return None
        k = train["k"].astype(float)
        ok = found[0].notna() & (k > 0)
        ratio = pd.Series((found[0][ok] / k[ok]).to_numpy(),
                          index=train.loc[ok, "step"].astype(int).to_numpy())
    else:
        st, col = run.stats, column_prefix(method) + "_count"
        if st is None or st.empty or col not in st:
            return None
        rows = st[(st["kind"] == "u") & (st["layer"] == GLOBAL)
                  & np.isclose(st["density"].astype(float), density)]
        rows = rows[rows[col].notna() & (rows["k"].astype(float) > 0)]
        ratio = (rows[col].astype(float) / rows["k"].astype(float)).groupby(
            rows["step"].astype(int)).max()
    if ratio.empty:
        return None
    steps = [int(s) for s in ratio.index]
    target = [c.phase not in ("warm-up", "unknown")
              for c in unit_conditions(run, steps)] if steps else []
    ratio = ratio[np.asarray(target, dtype=bool)]
    return ratio if len(ratio) else None
