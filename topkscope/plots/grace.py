"""The step-time model against the GRACE release's measurements: predicted against measured
throughput, and the speed-up over dense SGD each says (the pays / does not pay quadrants)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullFormatter

from topkscope.plots.frames import require_columns, require_rows
from topkscope.plots.style import figure_style, fit_texts, new_figure, palette

COLUMNS = ("compressor", "measured", "predicted", "dense_throughput", "task")
BAND = 0.25  # the relative error band drawn around the diagonal
SPEEDUP_TICKS = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)


def model_vs_measured(rows: pd.DataFrame, title: str) -> Figure:
    """Left: predicted against measured throughput, each over the dense run's of its setting
    (log-log; diagonal and a ±25% band), one colour per `compressor`, one marker per `task`.
    Right: predicted against measured speed-up over dense SGD, lines at 1: the upper-right
    quadrant pays in both, the lower-left in neither, the other two are the disagreements."""
    require_columns(rows, COLUMNS, "GRACE model rows")
    require_rows(rows, "GRACE model rows")
    markers = dict(zip(sorted(set(rows["task"])), "osD^vP*X"))
    with figure_style():
        fig, axes = new_figure(2)
        left, right = axes[0]
        colors = palette(sorted(set(rows["compressor"])))
        measured = rows["measured"] / rows["dense_throughput"]
        predicted = rows["predicted"] / rows["dense_throughput"]
        for (compressor, task), g in rows.groupby(["compressor", "task"], sort=True):
            kw = {"color": colors[compressor], "marker": markers[task], "s": 22, "alpha": 0.8,
                  "label": f"{compressor}, {task}"}
            left.scatter(g["measured"], g["predicted"], **kw)
            right.scatter(measured[g.index], predicted[g.index], **kw)
        low = float(np.nanmin([rows["measured"].min(), rows["predicted"].min()])) * 0.8
        high = float(np.nanmax([rows["measured"].max(), rows["predicted"].max()])) * 1.25
        line = np.geomspace(low, high, 50)
        left.plot(line, line, color="0.3", lw=1)
        left.fill_between(line, line * (1 - BAND), line * (1 + BAND), color="0.85", zorder=0)
        left.set_xscale("log")
        left.set_yscale("log")
        left.set_xlabel("measured throughput (the task's unit, all workers)")
        left.set_ylabel("predicted throughput")
        left.legend(loc="best", fontsize="x-small")
        for axis in (right.axhline, right.axvline):
            axis(1.0, color="0.3", lw=1)
        right.set_xscale("log")
        right.set_yscale("log")
        ticks = [t for t in SPEEDUP_TICKS
                 if 0.8 * min(measured.min(), predicted.min()) <= t
                 <= 1.25 * max(measured.max(), predicted.max())]
        for axis in (right.xaxis, right.yaxis):
            axis.set_major_locator(FixedLocator(ticks))
            axis.set_major_formatter(FormatStrFormatter("%g"))
            axis.set_minor_formatter(NullFormatter())
        right.set_xlabel("measured speed-up over dense SGD")
        right.set_ylabel("predicted speed-up over dense SGD")
        fig.suptitle(title)
        fit_texts(fig)
    return fig
