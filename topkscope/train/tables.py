"""train.parquet and eval.parquet: rows kept in memory, rewritten atomically on flush.

A reader always sees a complete file (the previous flush or this one). On resume the rows
at or after the checkpoint's step are dropped: they are recomputed.

train.parquet, one row per step: loss and metric (accuracy, or perplexity for language
models) over all workers' batches; `k` = the target count per worker at the step's density;
`selected` = mean elements sent per worker, and `selected_min` / `selected_median` /
`selected_max` the same count over the P workers (0 when a worker sent nothing); times in
seconds per worker (mean over the simulated workers; rank 0's own under torchrun), where
time_communicate includes waiting for the slowest worker; bytes_sent = payload put on the wire
by all workers together (comm.sparse).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from topkscope.io import write_parquet_atomic


class Table:
    """An append-only table with a fixed schema, flushed to one parquet file."""

    def __init__(self, path: Path, columns: dict[str, str]) -> None:
        self.path = Path(path)
        self.columns = columns
        self.rows: list[dict[str, Any]] = []
        self._flushed = 0

    def append(self, row: dict[str, Any]) -> None:
        missing = set(self.columns) - set(row)
        if missing:
            raise ValueError(f"row for {self.path.name} lacks {sorted(missing)}")
        self.rows.append({c: row[c] for c in self.columns})

    def frame(self) -> pd.DataFrame:
        df = pd.DataFrame(self.rows, columns=list(self.columns))
        return df.astype(self.columns)

    def flush(self) -> None:
        if self._flushed != len(self.rows) or not self.path.exists():
            write_parquet_atomic(self.path, self.frame())
            self._flushed = len(self.rows)

    def reload_before(self, step: int) -> None:
        """Resume: keep the rows already on disk whose step is below `step`."""
        if self.path.exists():
            df = pd.read_parquet(self.path)
            self.rows = df[df["step"] < step].to_dict("records")
        self._flushed = -1  # rewrite on the next flush
