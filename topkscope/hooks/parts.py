"""What the recorder writes: parquet parts of stats/hist/coords rows, and raw snapshots.

Rank-local parquet part files (`PartWriter`): rows buffered as column chunks, flushed as one
part. Each flush writes `part-r{rank:05d}-{seq:06d}.parquet` under a temporary name and renames it
(topkscope.io.atomic_write), so a crash leaves only complete parts. Every process writes its
own parts (the rank is in the name), so ranks never collide; a reopened folder continues the
sequence after the parts already there. Nothing is kept after a flush.

The recorder's rows as plain numpy columns, ready for a PartWriter (`stats_columns`,
`hist_columns`). stats: one row per (kind, row, density) of a record, in that order. The columns that depend
only on the layout, the densities and the kinds (layer, kind, density, numel, k and the three
reference curves) are built once per combination and reused; a record adds only its numbers.

Raw whole-model vectors at scheduled steps (`write_snapshot`): float32 .npy; u is saved as `step{t}-rank{r}.npy`; other kinds, when asked for, as
`step{t}-rank{r}-{kind}.npy`. Each file is written under a temporary name and renamed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from topkscope import columns
from topkscope.hooks.power_sums import Moments
from topkscope.hooks.rows import RowPlan
from topkscope.io import atomic_write
from topkscope.schema import (
    PART_FOLDERS,
    PART_GLOB,
    PART_RE,
    SNAPSHOT_RE,
    part_name,
    snapshot_name,
)


def rank_parts(folder: Path, rank: int) -> dict[int, Path]:
    """This rank's part files in folder, by sequence number."""
    if not folder.is_dir():
        return {}
    return {int(m.group(2)): p for p in folder.glob(PART_GLOB)
            if (m := PART_RE.match(p.name)) and int(m.group(1)) == rank}


def next_sequence(folder: Path, rank: int) -> int:
    """One past the highest part number this rank already has in folder (0 if none)."""
    return max(rank_parts(folder, rank), default=-1) + 1


def rank_files(run_dir: Path, rank: int) -> list[Path]:
    """What the recorder of process `rank` writes into a run folder: its stats, hist and
    coords parts, and the snapshots of worker `rank`."""
    found = [f for sub in PART_FOLDERS for f in rank_parts(run_dir / sub, rank).values()]
    snaps = run_dir / "snapshots"
    if snaps.is_dir():
        found += [f for f in snaps.iterdir()
                  if (m := SNAPSHOT_RE.match(f.name)) and int(m.group(2)) == rank]
    return found


def _column(chunks: list[np.ndarray], dtype: pa.DataType) -> pa.Array:
    values = np.concatenate(chunks) if len(chunks) > 1 else chunks[0]
    if pa.types.is_integer(dtype) and values.dtype.kind == "f":
        missing = np.isnan(values)  # integer columns may carry NaN for "not computed"
        ints = np.where(missing, 0, values).astype(dtype.to_pandas_dtype())
        return pa.array(ints, type=dtype, mask=missing if missing.any() else None)
    if pa.types.is_string(dtype):
        return pa.array(values.astype(object), type=dtype)
    return pa.array(values, type=dtype)


def pandas_metadata(schema: pa.Schema) -> dict:
    """Schema metadata under which plain pd.read_parquet gives the nullable counts
    (columns named *_count: a sparsifier not evaluated at a row) as pandas' Int64, not float64."""
    empty = schema.empty_table().to_pandas()
    for f in schema:
        if pa.types.is_integer(f.type) and f.name.endswith("_count"):
            empty[f.name] = empty[f.name].astype("Int64")
    return pa.Schema.from_pandas(empty, preserve_index=False).metadata


class PartWriter:
    """Collects rows of one table for one process; `flush()` writes them as a new part.

    identity: the run's RUN_KEYS columns (schema.run_identity), written first in every row.
    absent: columns of `schema` that add() is never given, written null (the columns of the
    selectors a recorder does not evaluate: every part of a table has one schema)."""

    def __init__(self, folder: str | Path, rank: int, schema: pa.Schema,
                 identity: Mapping[str, str] | None = None, absent: Sequence[str] = ()) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.rank = int(rank)
        self.schema = schema
        self.identity = dict(identity or {})
        self.file_schema = pa.schema([pa.field(k, pa.string()) for k in self.identity]
                                     + list(schema))
        self.absent = frozenset(absent)
        self._given = [n for n in schema.names if n not in self.absent]
        self._seq = next_sequence(self.folder, self.rank)
        self._chunks: dict[str, list[np.ndarray]] = {name: [] for name in self._given}
        self.rows = 0
        self.parts_written = 0
        self.last_part: Path | None = None
        self._pandas_metadata = pandas_metadata(self.file_schema)

    def add(self, columns: dict[str, np.ndarray]) -> None:
        """Append rows given as equal-length 1-D arrays, one per schema column not absent."""
        missing = [n for n in self._given if n not in columns]
        if missing:
            raise ValueError(f"rows lack column(s) {missing}")
        lengths = {len(columns[n]) for n in self._given}
        if len(lengths) != 1:
            raise ValueError(f"columns have different lengths {sorted(lengths)}")
        for name in self._given:
            self._chunks[name].append(np.asarray(columns[name]))
        self.rows += lengths.pop()

    def flush(self) -> Path | None:
        """Write the buffered rows as one part (atomically); None when there were none."""
        if self.rows == 0:
            return None
        arrays = [pa.array([value] * self.rows, pa.string()) for value in self.identity.values()]
        arrays += [pa.nulls(self.rows, f.type) if f.name in self.absent
                   else _column(self._chunks[f.name], f.type) for f in self.schema]
        table = pa.Table.from_arrays(arrays, schema=self.file_schema) \
            .replace_schema_metadata(self._pandas_metadata)
        path = self.folder / part_name(self.rank, self._seq)
        atomic_write(path, lambda tmp: pq.write_table(table, tmp))
        self._seq += 1
        self._chunks = {name: [] for name in self._given}
        self.rows = 0
        self.parts_written += 1
        self.last_part = path
        return path


MOMENT_COLUMNS = columns.of_source("moment")  # fields of Moments, one value per (kind, row)
TOPK_COLUMNS = columns.of_source("topk")  # from the exact top-k selection, per (kind, row, rho)


def _static_stats_columns(plan: RowPlan, kinds: tuple[str, ...]) -> dict[str, np.ndarray]:
    key = ("stats_columns", kinds)
    cached = plan._device_cache.get(key)
    if cached is None:
        nk, nd = len(kinds), len(plan.densities)
        nr = plan.rows
        cached = {
            "layer": np.tile(np.repeat(np.array(plan.layers, dtype=object), nd), nk),
            "kind": np.repeat(np.array(kinds, dtype=object), nr * nd),
            "density": np.tile(np.array(plan.densities), nk * nr),
            "numel": np.tile(np.repeat(plan.numel, nd), nk),
            "k": np.tile(plan.k.ravel(), nk),
            "classic_bound": np.tile(plan.classic_bound.ravel(), nk),
            "paper_bound": np.tile(plan.paper_bound.ravel(), nk),
            "gaussian_ratio": np.tile(plan.gaussian_ratio.ravel(), nk),
        }
        for col in cached.values():
            col.flags.writeable = False  # shared by every record's rows
        plan._device_cache[key] = cached
    return cached


def row_statistics(vectors: Sequence[torch.Tensor], plan: RowPlan) -> dict[str, np.ndarray]:
    """{name: (K, R)} of every registered statistic with source "row" (topkscope.columns):
    its of_row on each plan row of each vector."""
    out = {}
    for stat in columns.statistics():
        if stat.source != "row":
            continue
        values = np.empty((len(vectors), plan.rows))
        for kv, x in enumerate(vectors):
            for r in range(plan.rows):
                a = int(plan.starts[r])
                values[kv, r] = float(stat.of_row(x[a : a + int(plan.numel[r])]))
        out[stat.name] = values
    return out


def stats_columns(step: int, rank: int, kinds: Sequence[str], plan: RowPlan, mom: Moments,
                  per_density: dict[str, np.ndarray], sel: dict[str, np.ndarray] | None,
                  sel_names: Sequence[str],
                  rows: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Columns of one record: mom (K, R) moments, per_density {name: (K, R, D)} the statistics
    that depend on k (topk_ratio, the Hill columns, ...; a "topk" statistic missing there is
    NaN), sel {S_x: (R, D)} of u, rows {name: (K, R)} of the "row" statistics
    (`row_statistics`)."""
    kinds = tuple(kinds)
    nk, (nr, nd) = len(kinds), plan.k.shape
    n = nk * nr * nd
    cols = dict(_static_stats_columns(plan, kinds))
    cols["step"] = np.full(n, step, dtype=np.int64)
    cols["rank"] = np.full(n, rank, dtype=np.int64)
    for name in TOPK_COLUMNS:
        given = per_density.get(name)
        cols[name] = np.full(n, np.nan) if given is None else \
            np.asarray(given, dtype=np.float64).reshape(n)
    per_row = {name: getattr(mom, name).numpy() for name in MOMENT_COLUMNS}
    per_row.update(rows or {})
    for stat in columns.statistics():
        if stat.name in per_row:
            values = np.repeat(np.asarray(per_row[stat.name]).reshape(nk * nr), nd)
            cols[stat.name] = values.astype(np.int64) if stat.dtype == "int64" else values
    for name in sel_names:
        values = np.full(n, np.nan)
        if sel is not None:
            ku = kinds.index("u")
            values[ku * nr * nd : (ku + 1) * nr * nd] = sel[name].ravel()
        cols[name] = values
    return cols


def hist_columns(step: int, rank: int, kinds: Sequence[str], plan: RowPlan, bins: int,
                 found: list) -> dict[str, np.ndarray]:
    """Columns of one record's histograms: found = [(kind index, row, left, right, counts)]."""
    nb = bins + 2
    n = nb * len(found)
    layer = np.empty(n, dtype=object)
    kind = np.empty(n, dtype=object)
    for i, (kv, r, _, _, _) in enumerate(found):
        layer[i * nb : (i + 1) * nb] = plan.layers[r]
        kind[i * nb : (i + 1) * nb] = kinds[kv]
    return {
        "step": np.full(n, step, dtype=np.int64),
        "rank": np.full(n, rank, dtype=np.int64),
        "layer": layer,
        "kind": kind,
        "bin": np.tile(np.arange(nb, dtype=np.int32), len(found)),
        "left": np.concatenate([f[2] for f in found]),
        "right": np.concatenate([f[3] for f in found]),
        "count": np.concatenate([f[4] for f in found]).astype(np.int64),
    }


def coord_columns(step: int, rank: int, kinds: Sequence[str], coordinates: np.ndarray,
                  layers: np.ndarray, values: np.ndarray,
                  cache: dict | None = None) -> dict[str, np.ndarray]:
    """Columns of one record's sampled coordinates: values (K, C) of the K kinds at the C
    coordinates (flat indices, their layers). cache: a dict kept by the caller for the
    columns that depend only on the kinds and the sample."""
    nk, nc = values.shape
    key = ("coord_columns", tuple(kinds))
    static = None if cache is None else cache.get(key)
    if static is None:
        static = {"kind": np.repeat(np.array(kinds, dtype=object), nc),
                  "coordinate": np.tile(coordinates, nk), "layer": np.tile(layers, nk)}
        for col in static.values():
            col.flags.writeable = False  # shared by every record's rows
        if cache is not None:
            cache[key] = static
    return {"step": np.full(nk * nc, step, dtype=np.int64),
            "rank": np.full(nk * nc, rank, dtype=np.int64),
            **static, "value": values.astype(np.float64).reshape(-1)}


def write_snapshot(folder: Path, step: int, rank: int, x: torch.Tensor, kind: str = "u") -> Path:
    """Save the 1-D x as float32 .npy, atomically."""
    arr = x.detach().to("cpu", torch.float32).contiguous().numpy()

    def _write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            np.save(fh, arr, allow_pickle=False)

    return atomic_write(Path(folder) / snapshot_name(step, rank, kind), _write)
