"""Figure: convergence of TopK-SGD against its baselines (Dense, Top-k, Gaussian-k, Rand-k, ...).

Left: training loss per iteration (thin: raw; thick: running mean over `smooth` steps, a display
aid only). Right: the held-out metric (accuracy or perplexity, from eval.parquet) at the steps it
was evaluated. Line styles differ too, so runs that coincide (e.g. Gaussian-k selecting exactly
the top-k set) stay visible.
Input frames are the runs' train/eval tables concatenated with a `sparsifier` column naming the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from topkscope.plots.frames import require_columns, require_rows
from topkscope.plots.style import figure_style, linestyles, new_figure, palette
from topkscope.plots.titles import figure_title, sparsifier_name

METRIC_UNITS = {"accuracy": "accuracy (fraction correct)", "perplexity": "perplexity (log scale)"}
ORDER = ["dense", "topk", "gaussiank", "gaussiank-2019", "randk", "dgc", "redsync", "sidco"]


def convergence(
    train: pd.DataFrame, evaluation: pd.DataFrame, *, manifest: Mapping[str, Any] | None = None,
    smooth: int = 20, split: str | None = None,
) -> Figure:
    """Training loss vs step and held-out metric vs step, one line per sparsifier."""
    require_columns(train, ["sparsifier", "step", "loss"], "train")
    require_columns(evaluation, ["sparsifier", "step", "split", "metric", "metric_name"], "eval")
    require_rows(train, "train")
    if smooth < 1:
        raise ValueError(f"smooth = {smooth} must be at least 1 (steps in the running mean)")
    ev = evaluation
    if split is None and len(ev):
        splits = list(ev["split"].unique())
        split = next((s for s in ("test", "valid", "val") if s in splits), splits[0])
    ev = ev[ev["split"] == split] if split is not None else ev
    require_rows(ev, "eval", f"for split {split!r}")
    names = sorted(set(train["sparsifier"]) | set(ev["sparsifier"]),
                   key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))
    colors = palette(names)
    styles = linestyles(names)
    metric = str(ev["metric_name"].iloc[0])
    with figure_style():
        fig, axes = new_figure(2)
        lax, max_ = axes[0]
        for name in names:
            tr = train[train["sparsifier"] == name].sort_values("step")
            if len(tr):
                lax.plot(tr["step"], tr["loss"], color=colors[name], lw=0.5, alpha=0.35)
                lax.plot(tr["step"], tr["loss"].rolling(smooth, min_periods=1).mean(),
                         color=colors[name], ls=styles[name], lw=1.6, label=sparsifier_name(name))
            e = ev[ev["sparsifier"] == name].sort_values("step")
            if len(e):
                max_.plot(e["step"], e["metric"], color=colors[name], ls=styles[name], lw=1.6,
                          marker="o", ms=3, label=sparsifier_name(name))
        lax.set_xlabel("iteration (step)")
        lax.set_ylabel("training loss (cross-entropy, nats)")
        lax.set_title(f"training loss (running mean over {smooth} steps)")
        lax.legend(loc="upper right")
        max_.set_xlabel("iteration (step)")
        max_.set_ylabel(f"{split} {METRIC_UNITS.get(metric, metric)}")
        if metric == "perplexity":
            max_.set_yscale("log")
        max_.set_title(f"{split} {metric}")
        max_.legend(loc="best")
        fig.suptitle(figure_title("Convergence: dense vs sparsified SGD", manifest,
                                  with_sparsifier=False))
    return fig
