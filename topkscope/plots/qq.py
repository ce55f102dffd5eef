"""Figure: normal Q-Q plots of u at snapshot steps.

Points (Phi^-1(p_i), z_(i)) with z = (u - mean)/std sorted and p_i plotting positions; a normal
vector lies on the line y = x, heavy tails bend away from it at both ends. The data come from
snapshots (topkscope.analysis.normality Q-Q data): columns step, theoretical, sample.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from topkscope.plots.frames import pick_evenly, require_columns, require_rows
from topkscope.plots.style import figure_style, fit_texts, new_figure
from topkscope.plots.titles import figure_title


def qq_plot(
    qq: pd.DataFrame, *, manifest: Mapping[str, Any] | None = None, kind: str = "u",
    max_panels: int = 4,
) -> Figure:
    """One normal Q-Q panel per snapshot step (at most max_panels, evenly spread)."""
    require_columns(qq, ["step", "theoretical", "sample"], "qq")
    require_rows(qq, "qq")
    steps = pick_evenly(qq["step"].unique(), max_panels)
    with figure_style():
        fig, axes = new_figure(len(steps), sharey=True)
        for ax, step in zip(axes[0], steps):
            part = qq[qq["step"] == step]
            ax.scatter(part["theoretical"], part["sample"], s=5, color="#4c72b0", alpha=0.7,
                       lw=0, label=f"{kind} quantiles")
            lim = float(np.nanmax(np.abs(part["theoretical"].to_numpy())))
            ax.plot([-lim, lim], [-lim, lim], color="#d62728", lw=1.0, ls="--",
                    label="normal (y = x)")
            ax.set_title(f"step {step}")
            ax.set_xlabel("normal quantile (std units)")
        axes[0][0].set_ylabel(f"sample quantile of {kind} (std units)")
        axes[0][0].legend(loc="upper left")
        fig.suptitle(figure_title(f"Normal Q-Q plots of {kind} (whole model)", manifest))
        fit_texts(fig)
    return fig
