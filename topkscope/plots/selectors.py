"""Figures: how many elements approximate selectors pick, and how much of the true top-k they find.

selected_over_k    the recorder's view. Top row: S_count / k over iterations per density (1 =
                   exact; shaded: the published Gaussian-k band [2k/3, 4k/3]). Bottom row (when
                   recorded): recall |S ∩ TopK| / k. Computed by the recorder on the same u as
                   training (stats columns S_count, S_recall for each approximate sparsifier S);
                   median over workers.
selected_per_step  each method in its own training run (train.parquet): selected / k per step,
                   median over workers (mean over seeds) with the band from the fewest to the
                   most any worker sent (selected_min, selected_max, over seeds too); one panel
                   per method, one line per condition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from topkscope.plots.frames import (
    approximate_selectors,
    require_columns,
    require_rows,
    select_tensor,
)
from topkscope.plots.style import (
    figure_style,
    fit_texts,
    linestyles,
    method_styles,
    new_figure,
    palette,
)
from topkscope.plots.titles import figure_title, recorder_panel_title, sparsifier_name
from topkscope.schema import GLOBAL

BAND = (2.0 / 3.0, 4.0 / 3.0)


def selected_over_k(
    stats: pd.DataFrame, *, manifest: Mapping[str, Any] | None = None,
    selectors: Sequence[str] | None = None, layer: str = GLOBAL, kind: str = "u",
) -> Figure:
    """S_count / k (and S_recall when present) over iterations, one column of panels per density."""
    require_columns(stats, ["step", "rank", "layer", "kind", "density", "k"], "stats")
    found = approximate_selectors(stats.columns)
    if selectors is None:
        selectors = found
    unknown = [s for s in selectors if s not in found]
    if unknown or not selectors:
        raise ValueError(f"stats has no count columns for selector(s) {unknown or '(none given)'}; "
                         f"selectors with S_count columns: {found}")
    df = select_tensor(stats, layer=layer, kind=kind, what="stats")
    df = df[df["k"] > 0]
    require_rows(df, "stats", "with k > 0")
    with_recall = [s for s in selectors
                   if f"{s}_recall" in df.columns and df[f"{s}_recall"].notna().any()]
    densities = sorted(df["density"].unique())
    colors, styles = method_styles(list(selectors))
    with figure_style():
        fig, axes = new_figure(len(densities), nrows=2 if with_recall else 1, sharex=True)
        for col, rho in enumerate(densities):
            part = df[df["density"] == rho]
            ax = axes[0][col]
            ax.axhspan(*BAND, color="#bbbbbb", alpha=0.3, lw=0, label="band [2k/3, 4k/3]")
            ax.axhline(1.0, color="k", lw=0.8, ls="--", label="exactly k")
            for s in selectors:  # null where the selectors did not run (sparsifier_schedule)
                ratio = (part[f"{s}_count"] / part["k"]).groupby(part["step"]).median().dropna()
                ax.plot(ratio.index, ratio.values, color=colors[s], ls=styles[s], lw=1.4,
                        label=sparsifier_name(s))
            ax.set_yscale("log")
            ax.set_title(recorder_panel_title(rho, int(part["k"].median()), manifest))
            ax.set_ylabel("selected / k (ratio, log)")
            ax.set_xlabel("iteration (step)")
            if with_recall:
                rax = axes[1][col]
                for s in with_recall:
                    rec = part.groupby("step")[f"{s}_recall"].median().dropna()
                    rax.plot(rec.index, rec.values, color=colors[s], ls=styles[s], lw=1.4,
                             label=sparsifier_name(s))
                rax.set_ylim(-0.02, 1.02)
                rax.set_ylabel("recall of exact top-k (fraction)")
                rax.set_xlabel("iteration (step)")
        axes[0][0].legend(loc="best")
        if with_recall:
            axes[1][0].legend(loc="best")
        fig.suptitle(figure_title("Approximate selectors: count and recall vs exact top-k",
                                  manifest, with_sparsifier=True))
        fit_texts(fig)
    return fig




def selected_per_step(
    train: pd.DataFrame, *, manifest: Mapping[str, Any] | None = None,
    methods: Sequence[str] | None = None,
) -> Figure:
    """selected / k per step in each method's own run (log scale, the band [2k/3, 4k/3]
    shaded), median over workers with the min-max over workers; one panel per method."""
    from topkscope.plots.convergence import conditions_of, ordered, seeds_note

    require_columns(train, ["sparsifier", "step", "k", "selected_min", "selected_median",
                            "selected_max"], "train")
    df = train[train["k"] > 0]
    require_rows(df, "train", "with k > 0")
    found = ordered(df["sparsifier"])
    methods = found if methods is None else list(methods)
    missing = [m for m in methods if m not in found]
    if missing or not methods:
        raise ValueError(f"train has no rows for method(s) {missing or '(none given)'}; "
                         f"methods present: {found}")
    conditions = conditions_of(df)
    colors, styles = palette(conditions), linestyles(conditions)
    ncols = min(3, len(methods))
    nrows = -(-len(methods) // ncols)
    with figure_style():
        fig, axes = new_figure(ncols, nrows=nrows, sharey=True)
        flat = [ax for row in axes for ax in row]
        for ax, name in zip(flat, methods):
            ax.axhspan(*BAND, color="#bbbbbb", alpha=0.3, lw=0, label="band [2k/3, 4k/3]")
            ax.axhline(1.0, color="k", lw=0.8, ls="--", label="exactly k")
            part = df[df["sparsifier"] == name]
            for cond in conditions:
                rows = part if "condition" not in part else part[part["condition"] == cond]
                if not len(rows):
                    continue
                ratio = rows.assign(mid=rows["selected_median"] / rows["k"],
                                    lo=rows["selected_min"] / rows["k"],
                                    hi=rows["selected_max"] / rows["k"]).groupby("step")
                mid, lo, hi = ratio["mid"].mean(), ratio["lo"].min(), ratio["hi"].max()
                ax.plot(mid.index, mid.values, color=colors[cond], ls=styles[cond], lw=1.2,
                        label=cond or "median over workers")
                ax.fill_between(lo.index, lo.values, hi.values, color=colors[cond], alpha=0.2,
                                lw=0)
            ax.set_yscale("log")
            ax.set_title(f"{sparsifier_name(name)}: selected / k (own run)")
            ax.set_xlabel("iteration (step)")
            ax.set_ylabel("selected / k (ratio, log)")
            ax.legend(loc="best")
        for ax in flat[len(methods):]:
            ax.set_visible(False)
        named = [c for c in conditions if c]
        note = seeds_note(df) + (f" · conditions: {' | '.join(named)}" if named else "")
        fig.suptitle(figure_title(f"Elements sent per step in each method's own run ({note}; "
                                  "band: min-max over workers)", manifest, with_sparsifier=False))
        fit_texts(fig)
    return fig
