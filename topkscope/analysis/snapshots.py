"""The analysis of one raw snapshot of u, as three tidy tables (what `topkscope analyze` writes).

For a whole-model vector u saved at (step, rank):

    normality    one row:    normality.battery(u, max_n, seed)              (keys: normality.KEYS)
    fits         one row per family: fits.compare(u, max_n, seed), its `rank` (1 = best BIC)
                 renamed `family_rank`
    contraction  one row per density rho, k = max(1, round(rho d)):
                 delta_emp = ||u - TopK(u)||^2 / ||u||^2 against 1 - k/d, (1 - k/d)^2 and the
                 Gaussian value 1 - rho - 2 t phi(t); the convexity gap of the sorted squared
                 magnitudes and whether (1 - k/d)^2 held (`below_paper`)
                 = contraction.analyze(u, densities, max_n=max_n, seed=seed).ratios

Every row starts with step, rank and ends with the seed and the max_n the statistic used
(each module's own default when max_n is None), so a table says how it was computed.
`merge` replaces the rows of re-analyzed snapshots in an existing table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from topkscope.analysis import contraction, fits, normality

KEY_COLUMNS = ["step", "rank"]
FAMILY_RANK = "family_rank"
PARAM_COLUMNS = ["seed", "max_n"]
NORMALITY_COLUMNS = [*KEY_COLUMNS, *normality.KEYS, *PARAM_COLUMNS]
# fits.compare's own `rank` (1 = lowest BIC) is renamed: here rank is the worker's rank
FITS_COLUMNS = [*KEY_COLUMNS, *(FAMILY_RANK if c == "rank" else c for c in fits.COLUMNS),
                *PARAM_COLUMNS]  # fmt: skip
CONTRACTION_COLUMNS = [*KEY_COLUMNS, *contraction.RATIO_COLUMNS, "convexity_tol",
                       *PARAM_COLUMNS]  # fmt: skip


@dataclass(frozen=True)
class SnapshotTables:
    """The rows measured on one snapshot; any of them may be empty when not asked for."""

    normality: pd.DataFrame  # NORMALITY_COLUMNS, one row
    fits: pd.DataFrame  # FITS_COLUMNS, one row per family (none for degenerate vectors)
    contraction: pd.DataFrame  # CONTRACTION_COLUMNS, one row per density


def analyze_snapshot(
    u,
    step: int,
    rank: int,
    densities: Sequence[float],
    *,
    max_n: int | None = None,
    seed: int = 0,
    distribution: bool = True,
) -> SnapshotTables:
    """Normality battery, family fits and contraction at `densities` of the vector u.

    distribution=False skips the battery and the fits (only contraction rows are computed,
    e.g. for densities added after a snapshot was analyzed); an empty `densities` skips
    contraction. ValueError for a bad density or max_n (the analysis modules' messages).
    """
    keys = {"step": int(step), "rank": int(rank)}
    norm_rows = fit_rows = contr_rows = None
    if distribution:
        n_max = normality.DEFAULT_MAX_N if max_n is None else max_n
        battery = normality.battery(u, max_n=n_max, seed=seed)
        norm_rows = pd.DataFrame([{**keys, **battery, "seed": seed, "max_n": n_max}])
        f_max = fits.DEFAULT_MAX_N if max_n is None else max_n
        table = fits.compare(u, max_n=f_max, seed=seed).rename(columns={"rank": FAMILY_RANK})
        fit_rows = _with_keys(table, keys, seed, f_max)
    if len(densities):
        c_max = contraction.DEFAULT_MAX_N if max_n is None else max_n
        report = contraction.analyze(u, list(densities), max_n=c_max, seed=seed)
        ratios = report.ratios.assign(convexity_tol=report.convexity["tol_effective"])
        contr_rows = _with_keys(ratios, keys, seed, c_max)
    return SnapshotTables(
        normality=_typed(norm_rows, NORMALITY_COLUMNS),
        fits=_typed(fit_rows, FITS_COLUMNS),
        contraction=_typed(contr_rows, CONTRACTION_COLUMNS),
    )


def _with_keys(frame: pd.DataFrame, keys: dict, seed: int, max_n: int) -> pd.DataFrame:
    frame = frame.copy()
    for name, value in reversed(keys.items()):
        frame.insert(0, name, np.full(len(frame), value, dtype=np.int64))
    frame["seed"] = np.full(len(frame), seed, dtype=np.int64)
    frame["max_n"] = np.full(len(frame), max_n, dtype=np.int64)
    return frame


def _typed(frame: pd.DataFrame | None, columns: list[str]) -> pd.DataFrame:
    """frame in the given column order; an empty frame with those columns when None."""
    if frame is None:
        return pd.DataFrame({c: pd.Series(dtype=_empty_dtype(c)) for c in columns})
    frame = frame.reindex(columns=columns)
    for column in (*KEY_COLUMNS, *PARAM_COLUMNS):
        frame[column] = frame[column].astype(np.int64)
    return frame


def _empty_dtype(column: str) -> str:
    if column in (*KEY_COLUMNS, *PARAM_COLUMNS):
        return "int64"
    return "object" if column in ("note", "family", "on", "shape_name") else "float64"


def merge(old: pd.DataFrame | None, new: pd.DataFrame, replace: pd.DataFrame) -> pd.DataFrame:
    """old without the rows matching a row of `replace`, then new; sorted by step, rank
    (and density, in the contraction table).

    replace holds key rows: columns step, rank (every row of a re-analyzed snapshot goes, even
    if its new analysis has fewer rows) or step, rank, density (only recomputed densities go).
    """
    if old is None or old.empty:
        out = new
    else:
        cols = list(replace.columns)
        stale = pd.MultiIndex.from_frame(old[cols]).isin(pd.MultiIndex.from_frame(replace))
        kept = old[~stale]
        if kept.empty or new.empty:
            out = new if kept.empty else kept
        else:
            out = pd.concat([kept, new], ignore_index=True)
    order = [*KEY_COLUMNS, "density"] if "density" in out.columns else KEY_COLUMNS
    return out.sort_values(order, kind="stable").reset_index(drop=True)
