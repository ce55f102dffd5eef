"""Column names and types of the recorder's tables (stats/ and hist/ parquet parts).

stats: one row per (step, rank, layer, kind, density); layer "__global__" is the whole model.
hist:  one row per (step, rank, layer, kind, bin).
The README section "Results schema" documents every column; keep the two in step.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

KINDS = ("g", "u", "e")

STATS_KEYS: dict[str, pa.DataType] = {
    "step": pa.int64(),
    "rank": pa.int32(),
    "layer": pa.string(),
    "kind": pa.string(),
    "density": pa.float64(),
}
STATS_VALUES: dict[str, pa.DataType] = {
    "numel": pa.int64(),
    "k": pa.int64(),
    "norm": pa.float64(),
    "mean": pa.float64(),
    "std": pa.float64(),
    "skew": pa.float64(),
    "excess_kurtosis": pa.float64(),
    "max_abs": pa.float64(),
    "zero_frac": pa.float64(),
    "nonfinite": pa.int64(),
    "topk_ratio": pa.float64(),
    "classic_bound": pa.float64(),
    "paper_bound": pa.float64(),
    "gaussian_ratio": pa.float64(),
}
SPARSIFIER_SUFFIXES: dict[str, pa.DataType] = {
    "count": pa.int64(),
    "ratio": pa.float64(),
    "recall": pa.float64(),
}
HIST_COLUMNS: dict[str, pa.DataType] = {
    "step": pa.int64(),
    "rank": pa.int32(),
    "layer": pa.string(),
    "kind": pa.string(),
    "bin": pa.int32(),
    "left": pa.float64(),
    "right": pa.float64(),
    "count": pa.int64(),
}


def sparsifier_columns(prefixes: Sequence[str]) -> dict[str, pa.DataType]:
    """S_count, S_ratio, S_recall for each sparsifier column prefix S."""
    return {f"{p}_{suffix}": t for p in prefixes for suffix, t in SPARSIFIER_SUFFIXES.items()}


def stats_schema(prefixes: Sequence[str] = ()) -> pa.Schema:
    columns = {**STATS_KEYS, **STATS_VALUES, **sparsifier_columns(prefixes)}
    return pa.schema(list(columns.items()))


def hist_schema() -> pa.Schema:
    return pa.schema(list(HIST_COLUMNS.items()))
