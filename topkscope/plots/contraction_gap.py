"""Figure: the measured convergence gap to Dense against the error-feedback bound's compression
term (1 - q)/q^2, q = 1 - delta, one point per (method, condition, density).

Input: the points of topkscope.analysis.contraction_convergence.points (POINT_COLUMNS). Two
panels: the final-metric gap and the steps-to-target gap; x is the term of one contraction
(default the measured delta_C; log scale when every term is positive). Points whose gap is
infinite (the target never reached) sit on the panel's top edge, marked with a triangle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import NullFormatter

from topkscope.plots.frames import require_columns, require_rows
from topkscope.plots.style import figure_style, fit_texts, new_figure, palette
from topkscope.plots.titles import figure_title, sparsifier_name

COLUMNS = ["method", "condition", "density", "metric", "gap_final", "gap_steps"]
GAP_LABELS = {"final": "final {metric} behind Dense ({unit})",
              "steps": "steps to Dense's final / Dense's − 1"}
CONTRACTION_LABELS = {"measured": "measured δ_C", "classic": "δ = 1 − k/d",
                      "paper": "δ = (1 − k/d)²", "gaussian": "Gaussian value",
                      "fitted": "fitted value"}


def gap_against_term(points: pd.DataFrame, *, manifest: Mapping[str, Any] | None = None,
                     contraction: str = "measured") -> Figure:
    """The gap of each point against its term (1 - q)/q^2 for `contraction` (a key of
    CONTRACTION_LABELS); one marker colour per method, one marker shape per condition."""
    if contraction not in CONTRACTION_LABELS:
        raise ValueError(f"contraction = {contraction!r}; allowed: {', '.join(CONTRACTION_LABELS)}")
    term = f"term_{contraction}"
    require_columns(points, [*COLUMNS, term], "points")
    df = points[np.isfinite(points[term].astype(float))]
    require_rows(df, "points", f"with a finite {term}")
    metric = str(df["metric"].iloc[0] or "accuracy")
    unit = "% of Dense's" if metric == "perplexity" else "points"
    colors = palette(list(dict.fromkeys(df["method"])))
    conditions = list(dict.fromkeys(f"{c}; ρ={d:g}" for c, d in zip(df["condition"], df["density"])))
    markers = dict(zip(conditions, "osDvP*Xh"))
    with figure_style():
        fig, axes = new_figure(2)
        for ax, gap in zip(axes[0], ("final", "steps")):
            y = df[f"gap_{gap}"].astype(float).to_numpy()
            finite = np.isfinite(y)
            top = float(np.nanmax(y[finite])) * 1.1 if finite.any() else 1.0
            for row, value in zip(df.itertuples(index=False), y):
                cond = f"{row.condition}; ρ={row.density:g}"
                never = np.isinf(value)
                ax.scatter([getattr(row, term)], [top if never else value],
                           color=colors[row.method], marker="^" if never else markers[cond],
                           s=40, zorder=3)
            if (df[term].astype(float) > 0).all():
                ax.set_xscale("log")
                ax.xaxis.set_minor_formatter(NullFormatter())  # 2x10^1, 3x10^1, ... collide
            ax.axhline(0.0, color="#7f7f7f", lw=0.8)
            ax.set_xlabel(f"(1 − q)/q², q = 1 − {CONTRACTION_LABELS[contraction]}")
            ax.set_ylabel(GAP_LABELS[gap].format(metric=metric, unit=unit))
        # one entry per method (colour) and per condition (shape), not one per point
        handles = [Line2D([], [], ls="", marker="o", color=colors[m], label=sparsifier_name(m))
                   for m in colors]
        handles += [Line2D([], [], ls="", marker=markers[c], color="#555555", label=c)
                    for c in conditions]
        if np.isinf(df[["gap_final", "gap_steps"]].astype(float).to_numpy()).any():
            handles.append(Line2D([], [], ls="", marker="^", color="#555555",
                                  label="target never reached (top edge)"))
        fig.legend(handles=handles, loc="outside lower center", ncol=2, fontsize="x-small")
        fig.suptitle(figure_title("Convergence gap to Dense vs the error-feedback bound's "
                                  "compression term", manifest, with_sparsifier=False))
        fit_texts(fig)
    return fig
