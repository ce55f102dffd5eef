"""Published GPU training runs (imported): validation accuracy per epoch of each run, and the
split of a logged iteration into compute, selection, exchange and the rest."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from topkscope.plots.frames import require_columns, require_rows
from topkscope.plots.style import figure_style, fit_texts, new_figure, palette

PARTS = ("compute", "selection", "exchange", "other")


def published_runs(evals: pd.DataFrame, splits: pd.DataFrame, title: str) -> Figure:
    """Left: `metric` (validation accuracy, fraction) against `epoch`, one line per `run`
    (label). Right: one horizontal bar per row of `splits` (`run`, `iteration_s` and the PARTS in seconds,
    `other` = iteration less the logged parts), stacked."""
    require_columns(evals, ("run", "epoch", "metric"), "evaluation rows")
    require_rows(evals, "evaluation rows")
    with figure_style():
        fig, axes = new_figure(2)
        left, right = axes[0]
        runs = list(dict.fromkeys(evals["run"]))
        colors = palette(runs)
        for run in runs:
            rows = evals[evals["run"] == run].sort_values("epoch")
            left.plot(rows["epoch"], 100 * rows["metric"], color=colors[run], label=run, lw=1.2)
        left.set_xlabel("epoch")
        left.set_ylabel("validation top-1 accuracy (%)")
        left.legend(loc="best")
        if len(splits):
            require_columns(splits, ("run", *PARTS), "iteration splits")
            bottom = pd.Series(0.0, index=splits.index)
            part_colors = palette(list(PARTS))
            for part in PARTS:  # horizontal bars: a run's label reads along its bar
                right.barh(splits["run"], 1e3 * splits[part], left=1e3 * bottom,
                           color=part_colors[part], label=part)
                bottom = bottom + splits[part]
            right.invert_yaxis()
            right.set_xlabel("median time per iteration (ms)")
            right.legend(loc="best")
        else:
            right.set_axis_off()
        fig.suptitle(title)
        fit_texts(fig)
    return fig
