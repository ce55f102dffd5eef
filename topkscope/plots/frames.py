"""Checks and selections shared by the plot functions (no statistics are computed here)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd


def require_columns(df: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    """ValueError naming the missing columns (and the ones present) if df lacks any of columns."""
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{what} must be a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what} lacks column(s) {missing}; it has {sorted(map(str, df.columns))}")


def text_column(df: pd.DataFrame, column: str) -> pd.Series:
    """`column` as text with "" where it is missing: NaN, a column that is all NaN (as a CSV
    read gives an all-empty one, typed float), or a frame without the column."""
    if column not in df:
        return pd.Series("", index=df.index, dtype=object)
    return df[column].astype(object).fillna("").astype(str)


def require_rows(df: pd.DataFrame, what: str, where: str = "") -> None:
    """ValueError if df is empty: a figure never gets an empty panel."""
    if len(df) == 0:
        raise ValueError(f"{what} has no rows{(' ' + where) if where else ''}: nothing to plot")


def select_tensor(df: pd.DataFrame, *, layer: str, kind: str, what: str) -> pd.DataFrame:
    """Rows of one tensor (layer, kind), with a clear error naming what exists instead."""
    require_columns(df, ["layer", "kind"], what)
    sel = df[(df["layer"] == layer) & (df["kind"] == kind)]
    if len(sel) == 0:
        layers = sorted(df["layer"].astype(str).unique())[:8]
        kinds = sorted(df["kind"].astype(str).unique())
        raise ValueError(
            f"{what} has no rows for layer={layer!r}, kind={kind!r}; "
            f"layers present (first 8): {layers}, kinds present: {kinds}"
        )
    return sel


def pick_evenly(values: Sequence, n: int) -> list:
    """At most n items of the sorted unique values, evenly spread, first and last included."""
    uniq = sorted(set(values))
    if n < 1:
        raise ValueError(f"the number of panels must be at least 1, got {n}")
    if len(uniq) <= n:
        return uniq
    idx = np.unique(np.round(np.linspace(0, len(uniq) - 1, n)).astype(int))
    return [uniq[i] for i in idx]


def approximate_selectors(columns: Iterable[str]) -> list[str]:
    """Sparsifier prefixes S for which the stats table has S_count, S_ratio or S_recall columns."""
    cols = set(map(str, columns))
    names = {c[: -len("_count")] for c in cols if c.endswith("_count")}
    return sorted(n for n in names if n and f"{n}_count" in cols)
