"""Rank-local parquet part files: rows buffered as column chunks, flushed as one part.

Each flush writes `part-r{rank:05d}-{seq:06d}.parquet` under a temporary name and renames it
(topkscope.io.atomic_write), so a crash leaves only complete parts. Every process writes its
own parts (the rank is in the name), so ranks never collide; a reopened folder continues the
sequence after the parts already there. Nothing is kept after a flush.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from topkscope.io import atomic_write

PART_GLOB = "part-*.parquet"


def part_name(rank: int, seq: int) -> str:
    return f"part-r{rank:05d}-{seq:06d}.parquet"


def next_sequence(folder: Path, rank: int) -> int:
    """One past the highest part number this rank already has in folder (0 if none)."""
    pattern = re.compile(rf"part-r{rank:05d}-(\d+)\.parquet$")
    seqs = [int(m.group(1)) for p in folder.glob(PART_GLOB) if (m := pattern.match(p.name))]
    return max(seqs, default=-1) + 1


def _column(chunks: list[np.ndarray], dtype: pa.DataType) -> pa.Array:
    values = np.concatenate(chunks) if len(chunks) > 1 else chunks[0]
    if pa.types.is_integer(dtype) and values.dtype.kind == "f":
        missing = np.isnan(values)  # integer columns may carry NaN for "not computed"
        ints = np.where(missing, 0, values).astype(dtype.to_pandas_dtype())
        return pa.array(ints, type=dtype, mask=missing if missing.any() else None)
    if pa.types.is_string(dtype):
        return pa.array(values.astype(object), type=dtype)
    return pa.array(values, type=dtype)


class PartWriter:
    """Collects rows of one table for one process; `flush()` writes them as a new part."""

    def __init__(self, folder: str | Path, rank: int, schema: pa.Schema) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.rank = int(rank)
        self.schema = schema
        self._seq = next_sequence(self.folder, self.rank)
        self._chunks: dict[str, list[np.ndarray]] = {name: [] for name in schema.names}
        self.rows = 0
        self.parts_written = 0
        self.last_part: Path | None = None

    def add(self, columns: dict[str, np.ndarray]) -> None:
        """Append rows given as equal-length 1-D arrays, one per schema column."""
        missing = [n for n in self.schema.names if n not in columns]
        if missing:
            raise ValueError(f"rows lack column(s) {missing}")
        lengths = {len(columns[n]) for n in self.schema.names}
        if len(lengths) != 1:
            raise ValueError(f"columns have different lengths {sorted(lengths)}")
        for name in self.schema.names:
            self._chunks[name].append(np.asarray(columns[name]))
        self.rows += lengths.pop()

    def flush(self) -> Path | None:
        """Write the buffered rows as one part (atomically); None when there were none."""
        if self.rows == 0:
            return None
        arrays = [_column(self._chunks[f.name], f.type) for f in self.schema]
        table = pa.Table.from_arrays(arrays, schema=self.schema)
        path = self.folder / part_name(self.rank, self._seq)
        atomic_write(path, lambda tmp: pq.write_table(table, tmp))
        self._seq += 1
        self._chunks = {name: [] for name in self.schema.names}
        self.rows = 0
        self.parts_written += 1
        self.last_part = path
        return path
