"""Figures: delta(k) over the whole range of k, measured, against what fitted families predict.

x = k/d (log), y = 1 - delta(k): the share of ||u||^2 the k largest entries hold (log). Black
with points: measured on the whole vector; one line per family, its colour and line style its
own and the same in every panel and figure: the prediction of its maximum-likelihood fit
(topkscope.analysis.delta_curve); grey dotted: k/d, what a flat vector keeps (1 - delta at the
classic bound 1 - k/d). Data: the delta_curve rows of topkscope.analysis.snapshots (columns
density, k, d, family, delta, delta_predicted, and step, kind or panel); with the
delta_families rows each panel's title names the best family and its error.

    delta_curve(curve, families=None, manifest=None)   one panel per saved vector (step, kind)
    delta_atlas(curve, families=None)                   one panel per `panel` (model and vector)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from topkscope.plots.frames import pick_evenly, require_columns, require_rows
from topkscope.plots.style import figure_style, fit_texts, linestyles, new_figure, palette
from topkscope.plots.titles import figure_title

FAMILY_LABELS = {
    "normal": "Gaussian", "laplace": "Laplace", "gennorm": "generalised normal",
    "student_t": "Student-t", "power_law": "power-law tail (body measured)",
}  # fmt: skip
FAMILIES = tuple(FAMILY_LABELS)  # the order of the lines and of the legend
COLORS = palette(FAMILIES)
STYLES = linestyles(FAMILIES)
KIND_ORDER = {"u": 0, "g": 1, "e": 2}
CURVE_COLUMNS = ["density", "k", "d", "family", "delta", "delta_predicted"]
MAX_COLUMNS = 3


def delta_curve(curve: pd.DataFrame, families: pd.DataFrame | None = None, *,
                manifest: Mapping[str, Any] | None = None, max_panels: int = 6) -> Figure:
    """1 - delta against k/d for the saved vectors of one run: a panel per (step, kind) of
    `curve` (at most max_panels, steps spread evenly within each kind)."""
    require_columns(curve, [*CURVE_COLUMNS, "step", "kind"], "curve")
    require_rows(curve, "curve")
    per_kind = max(1, max_panels // max(curve["kind"].nunique(), 1))
    keys = [(kind, step) for kind in sorted(curve["kind"].unique(),
                                            key=lambda k: (KIND_ORDER.get(k, 9), k))
            for step in pick_evenly(curve.loc[curve["kind"] == kind, "step"], per_kind)]
    panels = []
    for kind, step in keys[:max_panels]:
        rows = curve[(curve["kind"] == kind) & (curve["step"] == step)]
        fams = None if families is None else families[
            (families["kind"] == kind) & (families["step"] == step)]
        panels.append((f"{kind} at step {step}", rows, fams))
    return _draw(panels, figure_title("Energy the k largest entries hold, measured and as "
                                      "fitted families predict it", manifest))


def delta_atlas(curve: pd.DataFrame, families: pd.DataFrame | None = None, *,
                title: str = "Atlas: energy the k largest entries hold, per model and vector"
                ) -> Figure:
    """The atlas page: one panel per value of `panel` (a model and a vector, as
    analysis.snapshots.atlas names them), in the order they first appear."""
    require_columns(curve, [*CURVE_COLUMNS, "panel"], "curve")
    require_rows(curve, "curve")
    panels = []
    for name in dict.fromkeys(curve["panel"]):
        fams = None if families is None else families[families["panel"] == name]
        panels.append((str(name), curve[curve["panel"] == name], fams))
    return _draw(panels, title)


def _draw(panels: Sequence[tuple[str, pd.DataFrame, pd.DataFrame | None]], suptitle: str
          ) -> Figure:
    ncols = min(len(panels), MAX_COLUMNS)
    nrows = -(-len(panels) // ncols)
    with figure_style():
        fig, axes = new_figure(ncols, nrows)
        flat = axes.ravel()
        for ax, (name, rows, fams) in zip(flat, panels):
            _panel(ax, rows)
            ax.set_title(name + _best_text(fams))
            ax.set_xlabel("k/d (log)")
            ax.set_ylabel("1 − δ(k), share of the energy kept (log)")
        for ax in flat[len(panels):]:
            ax.set_visible(False)
        flat[0].legend(loc="lower right", fontsize=7)
        fig.suptitle(suptitle)
        fit_texts(fig)
    return fig


def _panel(ax, rows: pd.DataFrame) -> None:
    measured = rows.drop_duplicates("density").sort_values("density")
    x = measured["k"].to_numpy(float) / measured["d"].to_numpy(float)
    ax.plot(x, x, color="0.6", ls=":", lw=1.0, label="k/d (a flat vector)")
    for family in FAMILIES:
        part = rows[rows["family"] == family].sort_values("density")
        if len(part):
            kept = 1.0 - part["delta_predicted"].to_numpy(float)
            ax.plot(part["k"].to_numpy(float) / part["d"].to_numpy(float),
                    np.where(kept > 0, kept, np.nan), color=COLORS[family],
                    ls=STYLES[family], lw=1.4, label=FAMILY_LABELS[family])
    ax.plot(x, 1.0 - measured["delta"].to_numpy(float), color="k", lw=2.0, marker="o", ms=2.5,
            label="measured", zorder=5)
    ax.set_xscale("log")
    ax.set_yscale("log")


def _best_text(fams: pd.DataFrame | None) -> str:
    """' · best: Gaussian (error 0.21)': the family marked best and its RMS error of ln(1 - δ)."""
    if fams is None or not len(fams) or "best" not in fams:
        return ""
    best = fams[fams["best"].astype(bool)]
    if best.empty:
        return ""
    row = best.iloc[0]
    return f" · best: {FAMILY_LABELS.get(row['family'], row['family'])} (error {row['error']:.2g})"
