"""Published measurements of PyTorch's CUDA `torch.topk` on one large slice, and the selection
time they give a model of d parameters.

Why a version matters: PyTorch's CUDA topk searched each slice with one thread block until
2022 (pytorch/pytorch pull request #71081, opened 2022-01-10, lets the radix search of the
k-th value use several blocks per slice; #74267, opened 2022-03-15, the gather of the top k),
and for very large slices it regressed in 2.7-2.8 (pytorch/pytorch#164459's description:
redundant memory accesses from #145536). "Exact selection is slow on a GPU" therefore depends on
the torch. Every number used is one row of the committed results/reference/published/
torch_topk.csv with its source: the table in the description of pytorch/pytorch#164459
(2025-10-02; H20, float32, top-100 of one slice of 1e6, 1e8 and 1e9 elements under torch
2.6.0, 2.8.0 and 2.8.0 with that pull request). Its two batched rows, (512, 128000) and
(8192, 128000), are many short slices, not one slice of d: not used.

    band(d)                  CURRENT: torch 2.8.0 with pytorch/pytorch#164459, the default of
                             the P = 16 rows (a point: one published time per size)
    band(d, torch="2.6.0")   an older version, a named variant
    band(d, torch=ALL)       the span over every published version

Each version is interpolated log-log in d between the published sizes (topkscope.perf.model.
loglog): grade `published` inside 1e6-1e9, `modelled` where d lies outside them
(extrapolated from the nearest two, said so). The measurements select k = 100 on an H20; the
P = 16 steps select k = 0.001 d on the compute's GPU: the rows state both (a radix select's
passes over the slice do not depend on k; the gather of k values does, little).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from topkscope.perf.model import Band, loglog, read_csv_with

MEASUREMENTS_CSV = Path(__file__).resolve().parents[2] / "results" / "reference" / "published" \
    / "torch_topk.csv"
COLUMNS = {"source", "gpu", "torch", "d", "k", "ms"}
SOURCE = "pytorch/pytorch#164459"
CURRENT = "2.8.0 + #164459"  # the default of the P = 16 rows: the fix of the 2.7-2.8 regression
ALL = "all published versions"


def measurements(path: str | Path = MEASUREMENTS_CSV) -> pd.DataFrame:
    """The committed published rows, checked (every time > 0, every row sourced)."""
    table = read_csv_with(path, COLUMNS, "published torch.topk measurements")
    if not (table["ms"] > 0).all() or table["source"].isna().any():
        raise ValueError(f"{str(path)!r} has a time that is not > 0 or a row without source")
    return table


def seconds(table: pd.DataFrame, torch: str, d: int) -> tuple[float, str]:
    """(seconds at d, how) for one torch version: log-log interpolation between its two
    nearest published sizes (topkscope.perf.model.loglog)."""
    rows = table[table["torch"] == torch].groupby("d")["ms"].median().sort_index()
    if rows.empty:
        raise ValueError(f"no published torch.topk time for torch {torch!r}")
    return loglog(rows.index, rows.to_numpy(float) / 1e3, d)


def band(d: int, table: pd.DataFrame | None = None, torch: str | None = CURRENT) -> Band:
    """The published time at d of `torch` (CURRENT by default; ALL: the span over every
    published version), graded (module docstring)."""
    table = measurements() if table is None else table
    versions = sorted(set(table["torch"])) if torch == ALL else [torch]
    found = {v: seconds(table, v, d) for v in versions}
    values = [t for t, _ in found.values()]
    how = sorted({h for _, h in found.values()})
    grade = "modelled" if any(h.startswith("extrapolated") for h in how) else "published"
    return Band(min(values), max(values), (
        f"{SOURCE}'s table (H20, not the compute's GPU; k = 100, here k = 0.001 d): "
        + ", ".join(f"torch {v} {t * 1e3:.3g} ms" for v, (t, _) in found.items())
        + f" at d = {d:,} ({'; '.join(how)})"), grade)


def note(table: pd.DataFrame | None = None, torch: str | None = CURRENT) -> str:
    """Which torch (`torch`, or ALL) and GPU the measurement is of, and its source."""
    table = measurements() if table is None else table
    rows = table if torch == ALL else table[table["torch"] == torch]
    gpus = ", ".join(sorted(set(rows["gpu"].astype(str))))
    versions = ", ".join(sorted(set(rows["torch"].astype(str))))
    ks = ", ".join(str(int(k)) for k in sorted(set(rows["k"])))
    sources = "; ".join(sorted(set(rows["source"].astype(str))))
    return f"torch {versions} on {gpus}, k = {ks} (measured), k = 0.001 d here; {sources}"


def markdown(table: pd.DataFrame | None = None) -> str:
    """The published rows as docs/scaling.md shows them."""
    table = measurements() if table is None else table
    versions = list(dict.fromkeys(table["torch"].astype(str)))
    lines = ["| d | " + " | ".join(f"torch {v} ms" for v in versions) + " | GPU | k |",
             "|---|" + "---|" * len(versions) + "---|---|"]
    for d, rows in table.groupby("d", sort=True):
        by = rows.set_index("torch")["ms"]
        lines.append(f"| {int(d):,} | " + " | ".join(f"{by.get(v, math.nan):g}" for v in versions)
                     + f" | {rows['gpu'].iloc[0]} | {int(rows['k'].iloc[0])} |")
    return "\n".join(lines)
