"""The result folder's layout: file names, table columns and types, the whole-model layer name.

One definition, shared by the code that writes a result folder (the training loop, the
recorder in topkscope.hooks) and the code that reads it (topkscope.analysis.runs):

    train.parquet, eval.parquet   one row per step / evaluation (TRAIN_COLUMNS, EVAL_COLUMNS)
    stats/part-r{rank:05d}-{seq:06d}.parquet   one row per (step, rank, layer, kind, density)
    hist/part-r{rank:05d}-{seq:06d}.parquet    one row per (step, rank, layer, kind, bin)
    coords/part-r{rank:05d}-{seq:06d}.parquet  one row per (step, rank, kind, coordinate)
    snapshots/step{t}-rank{r}.npy  (u; other kinds step{t}-rank{r}-{kind}.npy), float32

    run.parquet                    one row: the run's manifest as a table (RUN_COLUMNS)

Every row of every table carries the run's identity, RUN_KEYS = (experiment, run_id)
(`run_identity`), so the tables of many runs read as one (a glob) and join run.parquet on
them. Layer "__global__" (GLOBAL) is the whole model. A sparsifier S recorded by the recorder adds
the stats columns S_count, S_ratio, ..., with S's registry name '-' turned into '_'. The stats
value columns are declared in topkscope.columns, which also generates their rows of
docs/results.md and docs/results-schema.md (a test checks the docs hold them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from topkscope import columns

GLOBAL = "__global__"
KINDS = ("g", "u", "e")

PART_GLOB = "part-*.parquet"
PART_RE = re.compile(r"^part-r(\d+)-(\d+)\.parquet$")
SNAPSHOT_RE = re.compile(r"^step(\d+)-rank(\d+)(?:-([gue]))?\.npy$")


# the run's identity, the first columns of every table a run folder holds
RUN_KEYS = ("experiment", "run_id")
RUN_TABLE = "run.parquet"
# run.parquet: the manifest's fields that select runs, one row per run (manifest.run_row);
# `train_density` is training's target density (the manifest's `density`), apart from the
# recorder's `recorder_densities` and from the stats rows' `density`
RUN_COLUMNS: dict[str, pa.DataType] = {
    "experiment": pa.string(), "run_id": pa.string(), "status": pa.string(),
    "launcher": pa.string(), "profile": pa.string(), "model": pa.string(),
    "dataset": pa.string(), "dataset_substitute": pa.string(), "sparsifier": pa.string(),
    "train_density": pa.float64(), "condition": pa.string(), "seed": pa.int64(),
    "world_size": pa.int64(), "selection": pa.string(), "optimizer": pa.string(),
    "num_parameters": pa.int64(), "total_steps": pa.int64(), "steps_done": pa.int64(),
    "recorder_densities": pa.list_(pa.float64()), "recorder_sparsifiers": pa.list_(pa.string()),
    "start_time": pa.string(), "end_time": pa.string(), "git_commit": pa.string(),
}  # fmt: skip


def run_schema() -> pa.Schema:
    """run.parquet's arrow schema (RUN_COLUMNS), with the pandas metadata under which plain
    pd.read_parquet gives its integer columns as pandas' nullable Int64 (a seed may be null)."""

    fields = pa.schema(list(RUN_COLUMNS.items()))
    empty = fields.empty_table().to_pandas()
    for f in fields:
        if pa.types.is_integer(f.type):
            empty[f.name] = empty[f.name].astype("Int64")
    return fields.with_metadata(pa.Schema.from_pandas(empty, preserve_index=False).metadata)


def run_identity(run_dir: str | Path, manifest: Mapping[str, Any] | None = None
                 ) -> dict[str, str]:
    """{experiment, run_id} of a run folder: the manifest's, else the names of the folder
    holding the run and of the run folder (a Recorder's own manifest names neither)."""
    folder = Path(run_dir).resolve()
    m = manifest or {}
    return {"experiment": str(m.get("experiment") or folder.parent.name),
            "run_id": str(m.get("run_id") or folder.name)}


def part_name(rank: int, seq: int) -> str:
    return f"part-r{rank:05d}-{seq:06d}.parquet"


def snapshot_name(step: int, rank: int, kind: str = "u") -> str:
    suffix = "" if kind == "u" else f"-{kind}"
    return f"step{int(step)}-rank{int(rank)}{suffix}.npy"


def column_prefix(name: str) -> str:
    """Column prefix of a sparsifier: its registry name with '-' turned into '_'."""
    return name.replace("-", "_")


# train.parquet, one row per step (written with topkscope.io.Table by the training loop and by
# the DDP hook's run log): loss and metric (accuracy, or perplexity for language models) over
# all workers' batches; `k` = the target count per worker at the step's density; `selected` =
# mean elements sent per worker, and `selected_min` / `selected_median` / `selected_max` the
# same count over the P workers (0 when a worker sent nothing); times in seconds per worker
# (mean over the simulated workers; rank 0's own under torchrun), where time_communicate
# includes waiting for the slowest worker; traffic in elements is `selected` (per worker), in
# bytes over all workers, as encoded (comm.sparse.sparse_payload): bytes_sent = what the
# all-gather puts on the wire (each worker's 8-byte count, then its pairs padded to the largest
# count, then a quantizer's tables), payload_bytes = the selected (value, index) pairs alone (no
# count, no padding, no tables; null in runs written before it was recorded); dense: P d value
# bytes in both; contraction =
# ||u - C(u)||^2 / ||u||^2 of the step's selection (0 for dense; the mean over the P workers in
# `topkscope run`, the rank's own in a DDP-hook run; absent from runs written before it was
# recorded). epoch is nullable (Int64): a DDP-hook run knows no epochs unless the script notes
# them.
TRAIN_COLUMNS = {
    "step": "int64", "epoch": "Int64", "loss": "float64", "lr": "float64", "metric": "float64",
    "metric_name": "object", "density": "float64", "k": "int64", "selected": "float64",
    "selected_min": "int64", "selected_median": "float64", "selected_max": "int64",
    "time_compute": "float64", "time_select": "float64", "time_communicate": "float64",
    "bytes_sent": "int64", "payload_bytes": "Int64", "contraction": "float64",
}  # fmt: skip
# outer.parquet (outer-loop runs only, train/outer.py), one row per exchange: `outer_step`
# 0, 1, ...; `step` = the inner step whose end triggered it (its train.parquet row carries the
# same bytes_sent, and the recorder's rows of this exchange carry this step); `inner_steps` =
# the round's length H (shorter for a last partial round); bytes_sent and payload_bytes as in
# train.parquet, bytes_values/_indices/_quantization/_counts = bytes_sent by part
# (comm.sparse.Payload.columns); contraction =
# ||u - C(u)||^2 / ||u||^2 of what was sent (quantization included), contraction_selection
# the same for the selection alone, both means over the P workers; pseudo_gradient_norm =
# the mean over workers of ||theta_global - theta_local|| (u's norms: the recorder's rows),
# update_norm = ||mean of what was sent||; outer_lr the outer step's learning rate.
OUTER_COLUMNS = {
    "outer_step": "int64", "step": "int64", "inner_steps": "int64", "density": "float64",
    "k": "int64", "selected": "float64", "selected_min": "int64", "selected_median": "float64",
    "selected_max": "int64", "bytes_sent": "int64", "payload_bytes": "Int64",
    "bytes_values": "int64",
    "bytes_indices": "int64", "bytes_quantization": "int64", "bytes_counts": "int64",
    "contraction": "float64", "contraction_selection": "float64",
    "pseudo_gradient_norm": "float64", "update_norm": "float64",
    "outer_lr": "float64", "time_select": "float64", "time_communicate": "float64",
}  # fmt: skip
OUTER_FILE = "outer.parquet"
EVAL_COLUMNS = {
    "step": "int64", "epoch": "int64", "split": "object", "loss": "float64", "metric": "float64",
    "metric_name": "object",
}  # fmt: skip


STATS_KEYS: dict[str, pa.DataType] = {
    "step": pa.int64(),
    "rank": pa.int64(),  # step and rank are int64 in every table
    "layer": pa.string(),
    "kind": pa.string(),
    "density": pa.float64(),
}
# the value columns are declared once, in topkscope.columns (built-in ones here; the schema
# below also holds any statistic registered later)
STATS_VALUES: dict[str, pa.DataType] = columns.stats_values()
SPARSIFIER_SUFFIXES: dict[str, pa.DataType] = {c.suffix: c.arrow
                                               for c in columns.SELECTOR_COLUMNS}
HIST_KEYS = ("step", "rank", "layer", "kind", "bin")
HIST_COLUMNS: dict[str, pa.DataType] = {
    "step": pa.int64(),
    "rank": pa.int64(),
    "layer": pa.string(),
    "kind": pa.string(),
    "bin": pa.int32(),
    "left": pa.float64(),
    "right": pa.float64(),
    "count": pa.int64(),
}


# coords/ (the recorder's `coordinates`): the values of a fixed seeded sample of coordinates of
# the whole-model vectors at every stats step, so that each one's tail over time can be tested
# (topkscope.analysis.tails.per_coordinate); `coordinate` is the index into the flat vector,
# `layer` the layer holding it (GLOBAL for a gap of no layer), `value` the float64 value
COORD_KEYS = ("step", "rank", "kind", "coordinate")
COORD_COLUMNS: dict[str, pa.DataType] = {
    "step": pa.int64(),
    "rank": pa.int64(),
    "kind": pa.string(),
    "coordinate": pa.int64(),
    "layer": pa.string(),
    "value": pa.float64(),
}
# the folders of rank-local parquet parts a recorder writes
PART_FOLDERS = ("stats", "hist", "coords")


def sparsifier_columns(prefixes: Sequence[str]) -> dict[str, pa.DataType]:
    """S_count, S_ratio, ... (topkscope.columns.SELECTOR_COLUMNS) for each column prefix S."""
    return columns.selector_columns(prefixes)


def selector_prefixes(names: Iterable[str]) -> list[str]:
    """The selector column prefixes S among column `names`: each S with `<S>_count` and another
    of its columns (SPARSIFIER_SUFFIXES: `<S>_ratio`, `<S>_recall`, ...), so a statistic that
    happens to end in `_count` is not taken for a selector."""
    names = list(names)
    present = set(names)
    others = [suffix for suffix in SPARSIFIER_SUFFIXES if suffix != "count"]
    prefixes = [c[: -len("_count")] for c in names if c.endswith("_count")]
    return [p for p in prefixes if any(f"{p}_{suffix}" in present for suffix in others)]


def stats_schema(prefixes: Sequence[str] = ()) -> pa.Schema:
    fields = {**STATS_KEYS, **columns.stats_values(), **sparsifier_columns(prefixes)}
    return pa.schema(list(fields.items()))


def hist_schema() -> pa.Schema:
    return pa.schema(list(HIST_COLUMNS.items()))


def coords_schema() -> pa.Schema:
    return pa.schema(list(COORD_COLUMNS.items()))
