"""Figures of the predicted scaling table (topkscope.perf.report, results/scaling.csv).

    breakdown   step time at one P, split into compute / selection / communication, per model
                (panels) and network (groups), one bar per method
    efficiency  scaling efficiency t_compute / t_step against P, per model (panels), one line
                per method and network
    crossover   the bandwidth below which each method's step beats dense SGD's, per model,
                at one P (log scale; an arrow at the top: faster at every bandwidth)

Every figure is a prediction: the titles say so, with P and the density.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from topkscope.plots.frames import require_columns, require_rows
from topkscope.plots.style import figure_style, linestyles, new_figure, palette
from topkscope.plots.titles import model_name, sparsifier_name

PARTS = (("t_compute", "compute"), ("t_select", "selection"), ("t_comm", "communication"))
NEEDED = ("model", "network", "method", "workers", "t_compute", "t_select", "t_comm", "t_step")


def _at(table: pd.DataFrame, workers: int, what: str) -> pd.DataFrame:
    require_columns(table, NEEDED, what)
    rows = table[table["workers"] == workers]
    require_rows(rows, f"{what} at P = {workers}")
    return rows


def breakdown(table: pd.DataFrame, workers: int = 16) -> Figure:
    rows = _at(table, workers, "scaling table")
    models = list(dict.fromkeys(rows["model"]))
    nets = list(dict.fromkeys(rows["network"]))
    methods = list(dict.fromkeys(rows["method"]))
    shades = dict(zip([p for p, _ in PARTS], (1.0, 0.65, 0.35)))
    colors = palette(methods)
    with figure_style():
        fig, axes = new_figure(len(models))
        width = 0.8 / max(len(methods), 1)
        for ax, model in zip(axes[0], models):
            sub = rows[rows["model"] == model]
            for j, method in enumerate(methods):
                base = np.zeros(len(nets))
                for part, label in PARTS:
                    vals = np.array([float(sub[(sub["network"] == n) & (sub["method"] == method)]
                                           [part].sum()) for n in nets])
                    ax.bar(np.arange(len(nets)) + (j - (len(methods) - 1) / 2) * width, vals,
                           width, bottom=base, color=colors[method], alpha=shades[part],
                           label=f"{sparsifier_name(method)}: {label}" if model == models[0]
                           else None)
                    base += vals
            ax.set_xticks(np.arange(len(nets)), nets, rotation=30)
            ax.set_yscale("log")
            ax.set_ylabel("seconds per step")
            ax.set_title(model_name(model))
        axes[0][0].legend(ncol=1, fontsize=6)
        fig.suptitle(f"Predicted step time at P = {workers}: compute (dark), selection, "
                     "communication (light)")
    return fig


def efficiency(table: pd.DataFrame) -> Figure:
    require_columns(table, (*NEEDED, "efficiency"), "scaling table")
    models = list(dict.fromkeys(table["model"]))
    methods = list(dict.fromkeys(table["method"]))
    nets = list(dict.fromkeys(table["network"]))
    colors, styles = palette(methods), linestyles(nets)
    with figure_style():
        fig, axes = new_figure(len(models), sharey=True)
        for ax, model in zip(axes[0], models):
            sub = table[table["model"] == model]
            for method in methods:
                for net in nets:
                    s = sub[(sub["method"] == method) & (sub["network"] == net)]
                    s = s.sort_values("workers")
                    ax.plot(s["workers"], s["efficiency"], color=colors[method],
                            linestyle=styles[net], marker=".",
                            label=f"{sparsifier_name(method)}, {net}" if model == models[0]
                            else None)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("workers P")
            ax.set_title(model_name(model))
        axes[0][0].set_ylabel("scaling efficiency t_compute / t_step")
        axes[0][0].legend(fontsize=6, ncol=2)
        fig.suptitle("Predicted scaling efficiency against P")
    return fig


def crossover(table: pd.DataFrame, workers: int = 16) -> Figure:
    rows = _at(table, workers, "scaling table")
    require_columns(rows, ("crossover_gbit",), "scaling table")
    rows = rows[rows["method"] != "dense"]
    require_rows(rows, "sparse methods in the scaling table")
    # the crossover depends on the network's latency, not on its bandwidth: one per alpha
    rows = rows.drop_duplicates(["model", "method", "alpha"])
    models = list(dict.fromkeys(rows["model"]))
    methods = list(dict.fromkeys(rows["method"]))
    colors = palette(methods)
    with figure_style():
        fig, axes = new_figure(1)
        ax = axes[0][0]
        width = 0.8 / len(methods)
        finite = rows["crossover_gbit"].replace([np.inf, 0], np.nan).dropna()
        top = float(finite.max() * 10) if not finite.empty else 1e3
        for j, method in enumerate(methods):
            s = rows[rows["method"] == method].drop_duplicates("model").set_index("model")
            vals = np.array([float(s["crossover_gbit"].get(m, np.nan)) for m in models])
            shown = np.where(np.isinf(vals), top, vals)
            x = np.arange(len(models)) + (j - (len(methods) - 1) / 2) * width
            ax.bar(x, shown, width, color=colors[method], label=sparsifier_name(method))
            for xi, v in zip(x, vals):
                if np.isinf(v):
                    ax.annotate("any", (xi, top), ha="center", va="bottom", fontsize=6)
        ax.set_xticks(np.arange(len(models)), [model_name(m) for m in models], rotation=30)
        ax.set_yscale("log")
        ax.set_ylabel("crossover bandwidth (Gbit/s)")
        ax.legend(fontsize=7)
        fig.suptitle(f"Predicted bandwidth below which each method beats dense SGD (P = "
                     f"{workers}; 'any': at every bandwidth)")
    return fig
