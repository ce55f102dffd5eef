"""Figure: how far from normal the gradients are over training.

Panels: sample skewness  E[(x-m)^3]/s^3  and excess kurtosis  E[(x-m)^4]/s^4 - 3  of g and u per
iteration (both 0 for a normal; Laplace has excess kurtosis 3), median over workers; then, when a
battery table is given (tidy: step, statistic, value — computed on snapshots by
topkscope.analysis.normality.battery), one panel per effect-size statistic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from topkscope.plots.frames import require_columns, require_rows
from topkscope.plots.style import figure_style, fit_texts, new_figure, palette
from topkscope.plots.titles import figure_title
from topkscope.schema import GLOBAL

MOMENT_PANELS = {
    "skew": ("skewness (unitless)", 0.0),
    "excess_kurtosis": ("excess kurtosis (unitless, symlog)", 0.0),
}
KIND_LABELS = {"g": "g (raw gradient)", "u": "u = g + e (error-compensated)", "e": "e (residual)"}


def normality_over_training(
    stats: pd.DataFrame, battery: pd.DataFrame | None = None, *,
    manifest: Mapping[str, Any] | None = None, layer: str = GLOBAL,
    kinds: Sequence[str] = ("g", "u"), battery_statistics: Sequence[str] | None = None,
) -> Figure:
    """Skewness and excess kurtosis over iterations (+ battery statistics over snapshot steps)."""
    require_columns(stats, ["step", "rank", "layer", "kind", *MOMENT_PANELS], "stats")
    df = stats[(stats["layer"] == layer) & stats["kind"].isin(list(kinds))]
    require_rows(df, "stats", f"for layer={layer!r} and kinds {list(kinds)}")
    # moments repeat across the density rows of one tensor: one value per (step, rank, kind)
    df = df.drop_duplicates(["step", "rank", "kind"])
    stat_names: list[str] = []
    if battery is not None and len(battery):
        require_columns(battery, ["step", "statistic", "value"], "battery")
        present = list(dict.fromkeys(battery["statistic"].astype(str)))
        stat_names = [s for s in (battery_statistics or present) if s in present]
    colors = palette(list(KIND_LABELS))
    with figure_style():
        ncols = max(len(MOMENT_PANELS), len(stat_names))
        fig, axes = new_figure(ncols, nrows=2 if stat_names else 1)
        for ax in list(axes[0][len(MOMENT_PANELS):]) + (
                list(axes[1][len(stat_names):]) if stat_names else []):
            ax.remove()  # no empty panels
        for ax, (col, (ylabel, normal_value)) in zip(axes[0], MOMENT_PANELS.items()):
            for kind in kinds:
                med = df[df["kind"] == kind].groupby("step")[col].median().dropna()
                if len(med):
                    ax.plot(med.index, med.values, color=colors[kind], lw=1.4,
                            label=KIND_LABELS.get(kind, kind))
            ax.axhline(normal_value, color="k", lw=0.8, ls="--", label="normal distribution")
            if col == "excess_kurtosis":
                ax.set_yscale("symlog", linthresh=1.0)
                ax.axhline(3.0, color="#9467bd", lw=0.8, ls=":", label="Laplace (3)")
            ax.set_xlabel("iteration (step)")
            ax.set_ylabel(ylabel)
            ax.set_title(col.replace("_", " "))
            ax.legend(loc="best")
        for ax, name in zip(axes[1] if stat_names else [], stat_names):
            part = battery[battery["statistic"] == name]
            med = part.groupby("step")["value"].median()
            ax.plot(med.index, med.values, marker="o", color="#8c564b", lw=1.2, label=name)
            ax.set_xlabel("iteration (step)")
            ax.set_ylabel(f"{name} (unitless)")
            ax.set_title(f"{name} on snapshots of u")
            ax.legend(loc="best")
        fig.suptitle(figure_title("Normality statistics over training", manifest))
        fit_texts(fig)
    return fig
