"""The stats table's value columns, declared once: per-tensor statistics and per-selector columns.

Everything else is derived from these two lists: `topkscope.schema.STATS_VALUES` and the stats
parquet schema, the recorder's moment columns (`MOMENT_COLUMNS`), the per-selector column names
(`selector_columns`), and the stats rows of docs/results-schema.md and docs/results.md
(`schema_rows`, `meaning_rows`; tests/test_columns.py checks the docs hold exactly these rows).

A per-tensor statistic (`Statistic`) has one value per (step, rank, layer, kind) row, repeated
over the densities unless it depends on k. Its `source` says who computes it:

    layout   from the row plan alone (numel, k, the reference curves), once per layout
    moment   a field of `topkscope.hooks.power_sums.Moments` (one float64 pass per kind)
    topk     the exact top-k contraction (`topkscope.hooks.topk_sums`)
    row      `of_row(x)`: any function of one row's vector x (a 1-D tensor) -> float; the
             recorder calls it per (kind, row). This is how a new statistic is added without
             touching the recorder: `register_statistic(Statistic(..., source="row", of_row=f))`.

A selector column (`SelectorColumn`) is `<S>_<suffix>` for each approximate selector S the
recorder evaluates on u (S = its registry name with '-' as '_'); the values come from
`topkscope.hooks.topk_sums.selection_rows`, which fills every declared suffix.

`RECORDED_SELECTORS` names the approximate selectors a comparison records on Top-k's u; adding
one there (a name `get_sparsifier` knows) is all a new selector needs. A stateful selector
(class attribute `stateful`, e.g. tail-k's previous threshold) keeps one state per (rank, row,
density) in the recorder, advanced on each recorded u (see `selection_rows`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

SOURCES = ("layout", "moment", "topk", "row")
_TYPES = {"int64": pa.int64(), "float64": pa.float64()}


@dataclass(frozen=True)
class Statistic:
    """One per-tensor column of the stats table (see the module docstring)."""

    name: str
    dtype: str      # "int64" or "float64"
    meaning: str    # the docs/results.md text
    unit: str = "—"
    source: str = "row"
    of_row: Callable | None = None  # source "row": x (1-D tensor) -> float

    def __post_init__(self) -> None:
        if self.dtype not in _TYPES:
            raise ValueError(f"dtype = {self.dtype!r}; allowed: {sorted(_TYPES)}")
        if self.source not in SOURCES:
            raise ValueError(f"source = {self.source!r}; allowed: {list(SOURCES)}")
        if (self.source == "row") != (self.of_row is not None):
            raise ValueError(f"statistic {self.name!r}: of_row is given exactly when source "
                             f"is 'row' (source = {self.source!r})")

    @property
    def arrow(self) -> pa.DataType:
        return _TYPES[self.dtype]


@dataclass(frozen=True)
class SelectorColumn:
    """One `<S>_<suffix>` column per recorded selector S; integer ones are nullable (Int64)."""

    suffix: str
    dtype: str
    meaning: str
    unit: str = "fraction"

    @property
    def arrow(self) -> pa.DataType:
        return _TYPES[self.dtype]

    @property
    def documented_dtype(self) -> str:
        return "Int64" if self.dtype == "int64" else self.dtype


_BUILT_IN = (
    Statistic("numel", "int64", "n, elements in this row's vector", "count", "layout"),
    Statistic("k", "int64", "max(1, round(rho n))", "count", "layout"),
    Statistic("norm", "float64", "sqrt(sum x^2)", "gradient units", "moment"),
    Statistic("mean", "float64", "sum x / n", "gradient units", "moment"),
    Statistic("std", "float64", "sqrt(sum (x - mean)^2 / n)", "gradient units", "moment"),
    Statistic("skew", "float64", "(M3/n) / std^3; NaN when std = 0", "—", "moment"),
    Statistic("excess_kurtosis", "float64",
              "(M4/n) / std^4 - 3 (0 for a Gaussian); NaN when std = 0", "—", "moment"),
    Statistic("max_abs", "float64", "max abs(x)", "gradient units", "moment"),
    Statistic("zero_frac", "float64", "fraction of entries exactly 0", "fraction", "moment"),
    Statistic("nonfinite", "int64",
              "NaN/Inf entries; when > 0 the moment and contraction columns are NaN", "count",
              "moment"),
    Statistic("topk_ratio", "float64",
              "delta = norm(x - TopK(x))^2 / norm(x)^2, exact, float64 (NaN when x = 0, or for "
              "kinds not in `topk_kinds`; by default only `u` is ranked)", "fraction", "topk"),
    Statistic("topk_quantized_ratio", "float64",
              "delta of Top-k with its values quantized: norm(x - Q(x_T))^2 / norm(x)^2, T the "
              "exact top-k set, Q the recorder's `quantize` (b-bit, per parameter tensor: "
              "sparsify.quantize); NaN without `quantize` and for kinds not ranked",
              "fraction", "topk"),
    Statistic("hill_alpha", "float64",
              "Hill tail index of abs(x) on the k largest magnitudes, the k-th as threshold: "
              "alpha = m / sum_{i<=m} ln(abs(x)_(i) / abs(x)_(k)), m = k - 1 (kernel.hill; "
              "P(abs(X) > t) ~ t^-alpha: Student-t(v) has v, a Gaussian none, its estimate "
              "grows with rho); NaN when m < 10, abs(x)_(k) = 0 or for kinds not ranked",
              "—", "topk"),
    Statistic("hill_alpha_low", "float64",
              "lower end of hill_alpha's 95% interval, alpha (1 - 1.96 / sqrt(m)): asymptotic "
              "normal, the sampling error at this m only (not the bias of a tail that is not "
              "Pareto above the k-th)", "—", "topk"),
    Statistic("hill_alpha_high", "float64",
              "upper end of hill_alpha's 95% interval, alpha (1 + 1.96 / sqrt(m))", "—", "topk"),
    Statistic("classic_bound", "float64", "1 - k/n (= E over Rand-k)", "fraction", "layout"),
    Statistic("paper_bound", "float64", "(1 - k/n)^2, the paper's bound", "fraction", "layout"),
    Statistic("gaussian_ratio", "float64",
              "1 - rho' - 2 t phi(t), t = Phi^-1(1 - rho'/2), rho' = k/n: delta if x were "
              "Gaussian", "fraction", "layout"),
)

SELECTOR_COLUMNS = (
    SelectorColumn("count", "int64",
                   "for each approximate sparsifier S in `sparsifiers` (name with `-` as `_`, "
                   "e.g. `gaussiank_2019_count`): how many entries S selects at target k",
                   "count"),
    SelectorColumn("ratio", "float64",
                   "norm(x - x_I)^2 / norm(x)^2 for S's set I (its own contraction)"),
    SelectorColumn("recall", "float64",
                   "share of the exact top-k set that S selects, abs(I ∩ TopK) / k; ties at "
                   "the k-th magnitude count as hits up to the places left"),
    SelectorColumn("quantized_ratio", "float64",
                   "norm(x - Q(x_I))^2 / norm(x)^2: S's contraction with its values quantized by "
                   "the recorder's `quantize` (NaN without it)"),
    SelectorColumn("ratio_vs_topk", "float64",
                   "S_ratio / topk_ratio of the same row: S's contraction relative to Top-k's "
                   "(1 = as tight as Top-k; NaN where topk_ratio is 0 or NaN)", "—"),
)

# the approximate selectors compared on Top-k's u (issue 27 item 3); one line per selector
RECORDED_SELECTORS = ("gaussiank-2019", "gaussiank", "dgc", "redsync", "sidco", "tail-k")

_STATISTICS: list[Statistic] = list(_BUILT_IN)


def statistics() -> tuple[Statistic, ...]:
    """The registered per-tensor statistics, in column order."""
    return tuple(_STATISTICS)


def register_statistic(stat: Statistic) -> Statistic:
    """Add a per-tensor statistic (a column after the built-in ones); returns it."""
    if any(s.name == stat.name for s in _STATISTICS):
        raise ValueError(f"statistic {stat.name!r} is already registered")
    _STATISTICS.append(stat)
    return stat


def unregister_statistic(name: str) -> None:
    """Remove a statistic added with register_statistic (built-in ones stay)."""
    if any(s.name == name for s in _BUILT_IN):
        raise ValueError(f"{name!r} is a built-in statistic and cannot be removed")
    _STATISTICS[:] = [s for s in _STATISTICS if s.name != name]


def stats_values() -> dict[str, pa.DataType]:
    """{column: arrow type} of every registered statistic, in order."""
    return {s.name: s.arrow for s in _STATISTICS}


def of_source(source: str) -> tuple[str, ...]:
    """Names of the registered statistics computed by `source`."""
    return tuple(s.name for s in _STATISTICS if s.source == source)


def selector_columns(prefixes) -> dict[str, pa.DataType]:
    """{<S>_<suffix>: arrow type} for each selector column prefix S."""
    return {f"{p}_{c.suffix}": c.arrow for p in prefixes for c in SELECTOR_COLUMNS}


def schema_rows(keys: dict[str, str]) -> list[str]:
    """The stats rows of docs/results-schema.md: keys {column: documented dtype} first."""
    rows = [f"| stats | {name} | {dtype} |" for name, dtype in keys.items()]
    rows += [f"| stats | {s.name} | {s.dtype} |" for s in _STATISTICS]
    rows += [f"| stats | `<S>_{c.suffix}` | {c.documented_dtype} |" for c in SELECTOR_COLUMNS]
    return rows


def meaning_rows() -> list[str]:
    """The rows of docs/results.md's stats table for the registered value columns."""
    rows = [f"| `{s.name}` | {s.dtype} | {s.meaning} | {s.unit} |" for s in _STATISTICS]
    rows += [f"| `S_{c.suffix}` | {c.documented_dtype} | {c.meaning} | {c.unit} |"
             for c in SELECTOR_COLUMNS]
    return rows
