"""Figure: sorted magnitudes |u|_(1) >= |u|_(2) >= ... >= |u|_(d) at snapshot steps.

x = i/d (fraction of elements), y = |u|_(i) / |u|_(1). The paper's bound (1 - k/d)^2 holds when this
curve is convex and decreasing; vertical lines mark k/d for the densities studied. Left: linear axes
(the paper's view); right: log-log (the tail). Data: columns step, fraction (rank/d), magnitude
(as returned by topkscope.analysis.contraction.sorted_magnitudes; each curve is divided by its
value at the smallest fraction, i.e. by the largest magnitude, for display).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from topkscope.plots.frames import pick_evenly, require_columns, require_rows
from topkscope.plots.style import figure_style, fit_texts, new_figure, palette
from topkscope.plots.titles import figure_title, format_density


def sorted_magnitudes(
    curves: pd.DataFrame, *, manifest: Mapping[str, Any] | None = None,
    densities: Sequence[float] = (), kind: str = "u", max_curves: int = 6,
) -> Figure:
    """Normalised sorted-magnitude curves, one line per snapshot step."""
    require_columns(curves, ["step", "fraction", "magnitude"], "curves")
    require_rows(curves, "curves")
    steps = pick_evenly(curves["step"].unique(), max_curves)
    colors = palette([str(s) for s in steps])
    with figure_style():
        fig, axes = new_figure(2)
        for ax, loglog in zip(axes[0], (False, True)):
            for step in steps:
                part = curves[curves["step"] == step].sort_values("fraction")
                top = float(part["magnitude"].iloc[0])
                scale = top if top > 0 else 1.0
                ax.plot(part["fraction"], part["magnitude"] / scale, color=colors[str(step)],
                        lw=1.3, label=f"step {step}")
            for rho in densities:
                ax.axvline(rho, color="k", lw=0.8, ls=":")
                if loglog:  # on linear axes the markers crowd at 0
                    ax.annotate(format_density(rho), (rho, 0.02), rotation=90, fontsize=7,
                                va="bottom", ha="right", xycoords=("data", "axes fraction"))
            if loglog:
                ax.set_xscale("log")
                ax.set_yscale("log")
                ax.set_title("log–log (tail)")
            else:
                ax.set_title("linear axes")
            ax.set_xlabel("rank i / d (fraction of elements)")
            ax.set_ylabel(rf"$|{kind}|_{{(i)}}\, /\, |{kind}|_{{(1)}}$ (unitless)")
        axes[0][0].legend(loc="upper right")
        fig.suptitle(figure_title(f"Sorted magnitudes of {kind} (whole model)", manifest))
        fit_texts(fig)
    return fig
