"""Figures of the predicted scaling table (topkscope.perf.report, results/scaling.csv).

    breakdown   step time at one P, split into compute / selection / communication: one panel
                per model (at most three per row), one horizontal stacked bar per method and
                network (the published clusters' networks when the table has them)
    efficiency  scaling efficiency t_compute / t_step against P: one panel per model, one line
                per method (colour) and network (line style)
    crossover   the bandwidth below which each sparse method's step beats dense SGD's, per model
                and method, at one P, with the published clusters' networks marked
    breakeven   the break-even selection times at one P: per model panel, one horizontal bar
                per sparse method (and training condition) and network, the longest
                selection that still beats Dense, with a marker for the most it may exceed
                Top-k's selection (a linear axis: below zero means never / faster than Top-k)
    time_to_target  predicted wall-clock to the accuracy target (topkscope.perf.
                time_to_accuracy): one panel per experiment and network, one bar per method
                (mean over seeds, the seeds' range as a line), the seeds that never reached it
                written beside

Every figure has one shared legend and a value axis that is linear unless its values span 10x
or more (the breakdown's is always linear: a log axis would hide the stacked compute part).
Every figure is a prediction: the titles say so, with P.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from topkscope.plots.frames import require_columns, require_rows, text_column
from topkscope.plots.style import (
    figure_style,
    fit_texts,
    linestyles,
    new_figure,
    palette,
    shared_legend,
)
from topkscope.plots.titles import model_name, sparsifier_name

PARTS = (("t_compute", "compute"), ("t_select", "selection"), ("t_comm", "communication"))
NEEDED = ("model", "network", "method", "workers", "t_compute", "t_select", "t_comm", "t_step")
MAX_COLUMNS = 3
# the networks of the published clusters (topkscope.perf.published), drawn when present
CLUSTER_NETWORKS = ("10gbe", "ib100")
LINKS = {"1gbe": "1 GbE", "10gbe": "10 GbE", "25gbe": "25 GbE", "ib100": "100 Gb IB",
         "nvlink": "NVLink"}
FITTED, LINE_RATE = "fitted on published measurements", "line rate"
LOG_SPAN = 10.0  # a value axis turns logarithmic when its positive values span this factor
DENSE_METHODS = ("dense", "dense-wfbp", "dense-fp16")


def network_name(name: str) -> str:
    """'10 GbE, fitted on published measurements' / '1 GbE, line rate' for a preset of
    topkscope.perf.networks (the clusters' links are fitted; `<link>-line` and the links no
    cluster measured are line rates); any other network (a calibration, user values) by its
    own name."""
    name = str(name)
    link = LINKS.get(name.removesuffix("-line"))
    if link is None:
        return name
    return f"{link}, {FITTED if name in CLUSTER_NETWORKS else LINE_RATE}"


def _at(table: pd.DataFrame, workers: int, what: str) -> pd.DataFrame:
    require_columns(table, NEEDED, what)
    rows = table[table["workers"] == workers]
    require_rows(rows, f"{what} at P = {workers}")
    return rows


def _networks(table: pd.DataFrame) -> list[str]:
    """The published clusters' networks when the table has them, else every network."""
    present = list(dict.fromkeys(table["network"]))
    clusters = [n for n in CLUSTER_NETWORKS if n in present]
    return clusters or present


def _grid(n: int, **kwargs):
    """A figure of n panels, at most MAX_COLUMNS per row; unused panels hidden."""
    ncols = min(n, MAX_COLUMNS)
    nrows = math.ceil(n / ncols)
    fig, axes = new_figure(ncols, nrows, **kwargs)
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _scale_for(ax, values, axis: str) -> None:
    """Linear unless the positive values span LOG_SPAN x or more (then log)."""
    v = np.asarray([x for x in values if np.isfinite(x) and x > 0], dtype=float)
    if v.size and v.max() / v.min() >= LOG_SPAN:
        (ax.set_xscale if axis == "x" else ax.set_yscale)("log")


def breakdown(table: pd.DataFrame, workers: int = 16) -> Figure:
    rows = _at(table, workers, "scaling table")
    nets = _networks(rows)
    rows = _with_conditions(rows[rows["network"].isin(nets)])
    models = list(dict.fromkeys(rows["model"]))
    methods = _variants(rows)  # a method under each training condition of its inputs
    colors = dict(zip([p for p, _ in PARTS], palette(["compute", "selection", "comm"]).values()))
    # one bar per (network, method), networks as blocks, first at the top
    bars = [(n, m) for n in nets for m in methods]
    y = np.arange(len(bars))[::-1].astype(float)
    for i in range(1, len(nets)):  # a gap between network blocks
        y[: i * len(methods)] += 0.6
    labels = [f"{variant_name(*m)} · {network_name(n)}" for n, m in bars]
    with figure_style():
        fig, axes = _grid(len(models), sharey=True)
        for ax, model in zip(axes, models):
            sub = rows[rows["model"] == model].set_index(["network", "method", "condition"])
            keys = [(n, *v) for n, v in bars]
            base = np.zeros(len(bars))
            totals = [float(sub.loc[k, "t_step"]) * 1e3 if k in sub.index else np.nan
                      for k in keys]
            for part, label in PARTS:
                vals = np.array([float(sub.loc[k, part]) * 1e3 if k in sub.index else 0.0
                                 for k in keys])
                ax.barh(y, vals, 0.8, left=base, color=colors[part], label=label)
                base += vals
            ax.set_xlim(0, np.nanmax(totals) * 1.02)  # stacked parts need a linear axis
            ax.set_title(model_name(model))
            ax.set_xlabel("ms per step")
            ax.grid(axis="y", visible=False)
        axes[0].set_yticks(y, labels)
        handles, names = axes[0].get_legend_handles_labels()
        shared_legend(fig, handles, names, len(PARTS))
        fig.suptitle(f"Predicted step time at P = {workers}, split into compute, selection "
                     "and communication")
        fit_texts(fig)
    return fig


def efficiency(table: pd.DataFrame) -> Figure:
    require_columns(table, (*NEEDED, "efficiency"), "scaling table")
    nets = _networks(table)
    table = _with_conditions(table[table["network"].isin(nets)])
    models = list(dict.fromkeys(table["model"]))
    methods = _variants(table)  # a method under each training condition of its inputs
    colors, styles = palette([variant_name(*v) for v in methods]), linestyles(nets)
    with figure_style():
        fig, axes = _grid(len(models))
        for ax, model in zip(axes, models):
            sub = table[table["model"] == model]
            for method, condition in methods:
                for net in nets:
                    s = sub[(sub["method"] == method) & (sub["condition"] == condition)
                            & (sub["network"] == net)]
                    s = s.sort_values("workers")
                    ax.plot(s["workers"], s["efficiency"],
                            color=colors[variant_name(method, condition)],
                            linestyle=styles[net], marker=".")
            _scale_for(ax, sub["efficiency"], "y")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("workers P")
            ax.set_ylabel("efficiency")
            ax.set_title(model_name(model))
        from matplotlib.lines import Line2D

        handles = [Line2D([], [], color=colors[variant_name(*v)], marker=".")
                   for v in methods] + \
            [Line2D([], [], color="0.3", linestyle=styles[n]) for n in nets]
        names = [variant_name(*v) for v in methods] + [network_name(n) for n in nets]
        shared_legend(fig, handles, names, min(len(names), 4))
        fig.suptitle("Predicted scaling efficiency t_compute / t_step against P")
        fit_texts(fig)
    return fig


def crossover(table: pd.DataFrame, workers: int = 16) -> Figure:
    rows = _at(table, workers, "scaling table")
    require_columns(rows, ("crossover_gbit", "alpha", "beta"), "scaling table")
    sparse = rows[~rows["method"].isin(DENSE_METHODS)]
    require_rows(sparse, "sparse methods in the scaling table")
    # the crossover depends on the network's latency, not on its bandwidth: the clusters' one
    alpha = float(rows[rows["network"] == _networks(rows)[0]]["alpha"].iloc[0])
    sparse = _with_conditions(sparse[np.isclose(sparse["alpha"], alpha)])
    sparse = sparse.drop_duplicates(["model", "method", "condition"])
    models = list(dict.fromkeys(sparse["model"]))
    methods = _variants(sparse)  # a method under each training condition of its inputs
    colors = palette([variant_name(*v) for v in methods])
    marks = (rows[rows["network"].isin(_networks(rows))]
             .drop_duplicates("network")[["network", "beta"]])
    with figure_style():
        fig, axes = new_figure(1)
        fig.set_size_inches(7.5, 1.6 + 0.18 * len(models) * len(methods))
        ax = axes[0][0]
        height = 0.8 / len(methods)
        finite = sparse["crossover_gbit"].replace([np.inf, 0], np.nan).dropna()
        cluster_gbit = [8.0 / b / 1e9 for b in marks["beta"]]
        span = list(finite) + cluster_gbit
        low, high = min(span) / 3, max(span) * 6
        for j, (method, condition) in enumerate(methods):
            s = sparse[(sparse["method"] == method) & (sparse["condition"] == condition)]
            s = s.set_index("model")["crossover_gbit"]
            vals = np.array([float(s.get(m, np.nan)) for m in models])
            yy = np.arange(len(models))[::-1] + (len(methods) - 1) / 2 * height - j * height
            shown = np.where(np.isinf(vals), high, np.where(vals == 0, np.nan, vals))
            ax.barh(yy, shown - low, height, left=low,
                    color=colors[variant_name(method, condition)],
                    label=variant_name(method, condition))
            for yi, v in zip(yy, vals):
                if np.isinf(v) or v == 0:
                    ax.annotate("any bandwidth" if np.isinf(v) else "never",
                                (high if np.isinf(v) else low, yi),
                                xytext=(-3 if np.isinf(v) else 3, 0),
                                textcoords="offset points", va="center",
                                ha="right" if np.isinf(v) else "left", fontsize=7)
        for net, gbit in zip(marks["network"], cluster_gbit):
            ax.axvline(gbit, color="0.2", linestyle="--", linewidth=1)
            ax.annotate(f"{LINKS.get(net, net)}\n{gbit:.3g} Gbit/s", (gbit, 1.0),
                        xycoords=("data", "axes fraction"), xytext=(0, 3),
                        textcoords="offset points", ha="center", va="bottom", fontsize=7)
        ax.set_xscale("log")
        ax.set_xlim(low, high)
        ax.set_yticks(np.arange(len(models))[::-1], [model_name(m) for m in models])
        ax.set_xlabel("bandwidth (Gbit/s) below which the method beats Dense\n(dashed: the "
                      "bandwidth fitted on the published clusters)")
        ax.grid(axis="y", visible=False)
        handles, names = ax.get_legend_handles_labels()
        shared_legend(fig, handles, names, len(methods))
        fig.suptitle(f"Predicted crossover with Dense at P = {workers}")
        fit_texts(fig)
    return fig


def _with_conditions(rows: pd.DataFrame) -> pd.DataFrame:
    """A copy of rows whose `condition` is text ("" where a row has none: dense baselines,
    nominal counts), so a method under each training condition is its own series."""
    return rows.assign(condition=text_column(rows, "condition"))


def _variants(rows: pd.DataFrame) -> list[tuple[str, str]]:
    """(method, training condition) pairs in the table's order ("" where none)."""
    return list(dict.fromkeys(zip(rows["method"], text_column(rows, "condition"))))


def variant_name(method: str, condition: str) -> str:
    """'Gaussian-k (2019) [warmup=none]': a method and the training condition of its inputs."""
    return sparsifier_name(method) + (f" [{condition}]" if condition else "")


def breakeven(table: pd.DataFrame, workers: int = 16) -> Figure:
    rows = _at(table, workers, "scaling table")
    require_columns(rows, ("breakeven_select_vs_dense", "breakeven_select_over_topk"),
                    "scaling table")
    nets = _networks(rows)
    sparse = _with_conditions(rows[~rows["method"].isin(DENSE_METHODS)
                                   & rows["network"].isin(nets)])
    require_rows(sparse, "sparse methods in the scaling table")
    variants = _variants(sparse)
    models = list(dict.fromkeys(sparse["model"]))
    present = set(zip(sparse["network"], sparse["method"], sparse["condition"]))
    bars = [(n, v) for n in nets for v in variants if (n, *v) in present]  # no empty rows
    y = np.arange(len(bars))[::-1].astype(float)
    for i in range(1, len(bars)):  # a gap between network blocks
        if bars[i][0] != bars[i - 1][0]:
            y[:i] += 0.6
    colors = palette(["dense", "topk"])
    with figure_style():
        fig, axes = _grid(len(models), sharey=True)
        for ax, model in zip(axes, models):
            sub = sparse[sparse["model"] == model].set_index(["network", "method", "condition"])

            def value(bar, column, sub=sub):
                key = (bar[0], *bar[1])
                return float(sub.loc[key, column]) * 1e3 if key in sub.index else np.nan

            vs_dense = np.array([value(b, "breakeven_select_vs_dense") for b in bars])
            over_topk = np.array([np.nan if b[1][0] == "topk" else
                                  value(b, "breakeven_select_over_topk") for b in bars])
            ax.barh(y, vs_dense, 0.7, color=colors["dense"],
                    label="longest selection that beats Dense")
            ax.plot(over_topk, y, "D", color="0.15", markersize=4, linestyle="none",
                    label="most it may exceed Top-k's selection")
            ax.axvline(0, color="0.3", linewidth=0.8)
            ax.set_title(model_name(model))
            ax.set_xlabel("ms of selection per step")
            ax.grid(axis="y", visible=False)
        axes[0].set_yticks(y, [f"{variant_name(*v)} · {network_name(n)}" for n, v in bars])
        handles, names = axes[0].get_legend_handles_labels()
        shared_legend(fig, handles, names, 2)
        fig.suptitle(f"Predicted break-even selection time at P = {workers}")
        fit_texts(fig)
    return fig


TIME_TO_TARGET_NEEDED = ("experiment", "method", "condition", "seed", "network", "workers",
                         "time_to_target_s")


def time_to_target(table: pd.DataFrame, workers: int = 16) -> Figure:
    """Mean over seeds of the predicted time to the target per (method, condition), one panel
    per (experiment, network); the seeds' range as a line; "never on n/m seeds" beside."""
    require_columns(table, TIME_TO_TARGET_NEEDED, "time-to-accuracy table")
    rows = _with_conditions(table[table["workers"] == workers])
    require_rows(rows, f"time-to-accuracy table at P = {workers}")
    panels = list(dict.fromkeys(zip(rows["experiment"], rows["network"])))
    variants = _variants(rows)
    colors = palette(list(dict.fromkeys(m for m, _ in variants)))
    with figure_style():
        fig, axes = _grid(len(panels), sharey=True)
        y = np.arange(len(variants))[::-1].astype(float)
        for ax, (experiment, net) in zip(axes, panels):
            sub = rows[(rows["experiment"] == experiment) & (rows["network"] == net)]
            for yi, (method, cond) in zip(y, variants):
                seeds = sub[(sub["method"] == method) & (sub["condition"] == cond)]
                times = seeds["time_to_target_s"].astype(float)
                reached = times[np.isfinite(times)]
                if len(reached):
                    ax.barh(yi, reached.mean(), 0.7, color=colors[method])
                    ax.plot([reached.min(), reached.max()], [yi, yi], color="0.15",
                            linewidth=1)
                never = int((~np.isfinite(times)).sum())
                if never:
                    ax.annotate(f"never on {never}/{len(times)} seeds",
                                (reached.mean() if len(reached) else 0.0, yi),
                                xytext=(3, 0), textcoords="offset points", va="center",
                                fontsize=7)
            ax.set_xlim(left=0)
            ax.set_title(f"{experiment} · {network_name(net)}")
            ax.set_xlabel("seconds to the target (predicted)")
            ax.grid(axis="y", visible=False)
        axes[0].set_yticks(y, [variant_name(*v) for v in variants])
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch

        shared_legend(fig, [Patch(color="0.6"), Line2D([], [], color="0.15", linewidth=1)],
                       ["mean over seeds", "the seeds' range"], 2)
        fig.suptitle(f"Predicted wall-clock to the accuracy target at P = {workers}")
        fit_texts(fig)
    return fig
