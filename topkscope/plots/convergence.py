"""Figures: convergence of TopK-SGD against its baselines, over seeds and conditions.

convergence           training loss and held-out metric per iteration, one row of panels per
                      condition (density warm-up and any named deviation)
accuracy_vs_elements  held-out metric against the cumulative elements communicated (the paper's
                      comm-vs-accuracy view), one panel per condition
density_sensitivity   held-out metric per iteration at each density, one panel per method,
                      the dense reference in every panel

Input frames are the runs' train/eval tables concatenated with a `sparsifier` column naming
the run and, optionally, `seed`, `condition` and `density` columns (absent: one seed, one
condition). Several seeds are drawn as their mean with a band from the lowest to the highest
seed (seed_band). Methods in `reference` (dense) have no density warm-up and are drawn in every
condition's panel. Each method has its colour and line style in every figure
(plots.style.method_styles), so runs that coincide stay visible. The training
loss is smoothed by a running mean over `smooth` steps (a display aid only).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from topkscope.plots.frames import require_columns, require_rows
from topkscope.plots.style import (
    figure_style,
    fit_texts,
    legends,
    linestyles,
    method_styles,
    new_figure,
    palette,
)
from topkscope.plots.titles import figure_title, format_density, sparsifier_name

METRIC_UNITS = {"accuracy": "accuracy (fraction correct)", "perplexity": "perplexity (log scale)"}
REFERENCE = ("dense",)


def ordered(names) -> list[str]:
    """Sparsifier names in the figures' order (each sparsifier's `plot_order`: dense, topk,
    then the approximate methods)."""
    from topkscope.sparsify import in_plot_order

    return in_plot_order(names)


def seed_band(df: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """Per x: mean of y over seeds, the lowest and highest seed (lo, hi) and the seed count n.
    Without a `seed` column every row is its own seed's value."""
    seeds = df["seed"] if "seed" in df.columns else pd.Series(0, index=df.index)
    per_seed = df.assign(_seed=seeds).groupby([x, "_seed"])[y].mean().reset_index()
    out = per_seed.groupby(x)[y].agg(["mean", "min", "max", "count"]).reset_index()
    return out.rename(columns={"min": "lo", "max": "hi", "count": "n"}).sort_values(x)


def draw_band(ax, agg: pd.DataFrame, x: str, *, color, ls: str, label: str,
              marker: str | None = "o") -> None:
    """The mean line, and the seed band where more than one seed was drawn."""
    ax.plot(agg[x], agg["mean"], color=color, ls=ls, lw=1.6, marker=marker, ms=2.5, label=label)
    if (agg["n"] > 1).any():
        ax.fill_between(agg[x], agg["lo"], agg["hi"], color=color, alpha=0.15, lw=0)


def conditions_of(*frames: pd.DataFrame, reference: Sequence[str] = REFERENCE) -> list[str]:
    """The conditions of the non-reference rows (the paper's warm-up first, then by name);
    those of the reference rows when there are no others; [''] without a condition column."""
    found: set[str] = set()
    for df in frames:
        if "condition" in df.columns:
            own = df[~df["sparsifier"].isin(reference)]
            found |= set((own if len(own) else df)["condition"].astype(str))
    return sorted(found, key=lambda c: (not c.startswith("warmup=paper"), c)) or [""]


def in_condition(df: pd.DataFrame, condition: str, reference: Sequence[str]) -> pd.DataFrame:
    """Rows of one condition, plus the reference methods' rows whatever their condition."""
    if "condition" not in df.columns or not condition:
        return df
    return df[(df["condition"].astype(str) == condition) | df["sparsifier"].isin(reference)]


def seeds_note(*frames: pd.DataFrame) -> str:
    seeds = sorted({int(s) for df in frames if "seed" in df.columns for s in df["seed"].unique()})
    if len(seeds) <= 1:
        return "one seed"
    return f"mean over {len(seeds)} seeds, band: lowest to highest seed"


def titled(what: str, manifest, conditions: Sequence[str], *frames: pd.DataFrame) -> str:
    """figure_title plus the seeds and every condition drawn (warm-up and named deviations)."""
    named = [c for c in conditions if c]
    extra = seeds_note(*frames) + (f" · conditions: {' | '.join(named)}" if named else "")
    return figure_title(f"{what} ({extra})", manifest, with_sparsifier=False)


def pick_split(ev: pd.DataFrame, split: str | None) -> tuple[pd.DataFrame, str | None]:
    if split is None and len(ev):
        splits = list(ev["split"].unique())
        split = next((s for s in ("test", "valid", "val") if s in splits), splits[0])
    ev = ev[ev["split"] == split] if split is not None else ev
    require_rows(ev, "eval", f"for split {split!r}")
    return ev, split


def metric_axis(ax, split: str | None, metric: str) -> None:
    ax.set_ylabel(f"{split} {METRIC_UNITS.get(metric, metric)}")
    if metric == "perplexity":
        ax.set_yscale("log")


def convergence(
    train: pd.DataFrame, evaluation: pd.DataFrame | None = None, *,
    manifest: Mapping[str, Any] | None = None, smooth: int = 20, split: str | None = None,
    reference: Sequence[str] = REFERENCE,
) -> Figure:
    """Training loss vs step and held-out metric vs step, one line per sparsifier (mean over
    seeds with a band), one row of panels per condition. Without evaluation rows (None or
    empty: a DDP-hook run, whose hook sees no evaluation) only the training-loss panels are
    drawn. Steps without a loss (a hook run's rows the script did not note()) are left out."""
    require_columns(train, ["sparsifier", "step", "loss"], "train")
    train = train[train["loss"].notna()]
    require_rows(train, "train", "with a loss")
    if smooth < 1:
        raise ValueError(f"smooth = {smooth} must be at least 1 (steps in the running mean)")
    with_eval = evaluation is not None and len(evaluation) > 0
    if with_eval:
        require_columns(evaluation, ["sparsifier", "step", "split", "metric", "metric_name"],
                        "eval")
        ev, split = pick_split(evaluation, split)
        metric = str(ev["metric_name"].iloc[0])
    else:
        ev = train.iloc[:0]
    names = ordered(set(train["sparsifier"]) | set(ev["sparsifier"]))
    colors, styles = method_styles(names)
    keys = [c for c in ("seed", "condition") if c in train.columns]
    smoothed = train.sort_values("step").assign(
        loss=lambda d: d.groupby(["sparsifier", *keys])["loss"].transform(
            lambda s: s.rolling(smooth, min_periods=1).mean()))
    conditions = conditions_of(train, ev, reference=reference)
    with figure_style():
        fig, axes = new_figure(2 if with_eval else 1, nrows=len(conditions))
        for row, cond in enumerate(conditions):
            lax = axes[row][0]
            tr_c, ev_c = in_condition(smoothed, cond, reference), in_condition(ev, cond, reference)
            for name in names:
                tr = tr_c[tr_c["sparsifier"] == name]
                if len(tr):
                    draw_band(lax, seed_band(tr, "step", "loss"), "step", color=colors[name],
                              ls=styles[name], label=sparsifier_name(name), marker=None)
            where = f" · {cond}" if cond else ""
            lax.set_xlabel("iteration (step)")
            lax.set_ylabel("training loss (cross-entropy, nats)")
            lax.set_title(f"training loss (running mean over {smooth} steps){where}")
            if not with_eval:
                continue
            max_ = axes[row][1]
            for name in names:
                e = ev_c[ev_c["sparsifier"] == name]
                if len(e):
                    draw_band(max_, seed_band(e, "step", "metric"), "step", color=colors[name],
                              ls=styles[name], label=sparsifier_name(name))
            max_.set_xlabel("iteration (step)")
            metric_axis(max_, split, metric)
            max_.set_title(f"{split} {metric}{where}")
        legends(fig, [ax for row in axes for ax in row], loc="best")
        what = "Convergence: dense vs sparsified SGD" + ("" if with_eval else
                                                         " (training loss; no evaluation rows)")
        fig.suptitle(titled(what, manifest, conditions, train, ev))
        fit_texts(fig)
    return fig


def accuracy_vs_elements(
    evaluation: pd.DataFrame, *, manifest: Mapping[str, Any] | None = None,
    split: str | None = None, reference: Sequence[str] = REFERENCE,
) -> Figure:
    """Held-out metric against the elements communicated so far (all workers, log scale), one
    line per sparsifier (mean over seeds of both, band over seeds on the metric), one panel
    per condition. evaluation needs an `elements` column: cumulative elements sent up to and
    including the evaluated step."""
    require_columns(evaluation, ["sparsifier", "step", "split", "metric", "metric_name",
                                 "elements"], "eval")
    ev, split = pick_split(evaluation, split)
    names = ordered(ev["sparsifier"])
    colors, styles = method_styles(names)
    metric = str(ev["metric_name"].iloc[0])
    conditions = conditions_of(ev, reference=reference)
    with figure_style():
        fig, axes = new_figure(len(conditions))
        for ax, cond in zip(axes[0], conditions):
            part = in_condition(ev, cond, reference)
            for name in names:
                e = part[part["sparsifier"] == name]
                if not len(e):
                    continue
                agg = seed_band(e, "step", "metric")
                agg["elements"] = seed_band(e, "step", "elements")["mean"].to_numpy()
                draw_band(ax, agg, "elements", color=colors[name], ls=styles[name],
                          label=sparsifier_name(name))
            ax.set_xscale("log")
            ax.set_xlabel("elements communicated so far (all workers, log scale)")
            metric_axis(ax, split, metric)
            ax.set_title(f"{split} {metric} vs traffic" + (f" · {cond}" if cond else ""))
        legends(fig, list(axes[0]), loc="best")
        fig.suptitle(titled("Accuracy against communicated elements", manifest, conditions, ev))
        fit_texts(fig)
    return fig


def density_sensitivity(
    evaluation: pd.DataFrame, *, manifest: Mapping[str, Any] | None = None,
    split: str | None = None, methods: Sequence[str] | None = None,
    reference: Sequence[str] = REFERENCE,
) -> Figure:
    """Held-out metric per iteration at each density (mean over seeds with a band), one panel
    per method, the reference (dense) in every panel. evaluation needs a `density` column."""
    require_columns(evaluation, ["sparsifier", "step", "split", "metric", "metric_name",
                                 "density"], "eval")
    ev, split = pick_split(evaluation, split)
    found = [n for n in ordered(ev["sparsifier"]) if n not in reference]
    methods = found if methods is None else list(methods)
    missing = [m for m in methods if m not in found]
    if missing or not methods:
        raise ValueError(f"eval has no rows for method(s) {missing or '(none given)'}; "
                         f"methods present: {found}")
    densities = sorted(ev.loc[ev["sparsifier"].isin(methods), "density"].unique())
    labels = [format_density(r) for r in densities]
    colors, styles = palette(labels), linestyles(labels)
    metric = str(ev["metric_name"].iloc[0])
    conditions = conditions_of(ev, reference=reference)
    with figure_style():
        fig, axes = new_figure(len(methods), sharey=True)
        for ax, name in zip(axes[0], methods):
            for ref in reference:
                e = ev[ev["sparsifier"] == ref]
                if len(e):
                    draw_band(ax, seed_band(e, "step", "metric"), "step", color="k", ls="-",
                              label=sparsifier_name(ref))
            part = ev[ev["sparsifier"] == name]
            for rho, label in zip(densities, labels):
                e = part[part["density"] == rho]
                if len(e):
                    draw_band(ax, seed_band(e, "step", "metric"), "step", color=colors[label],
                              ls=styles[label], label=label)
            ax.set_xlabel("iteration (step)")
            metric_axis(ax, split, metric)
            ax.set_title(f"{sparsifier_name(name)}: {split} {metric} by density")
            ax.legend(loc="best")
        general = None if manifest is None else {k: v for k, v in manifest.items()
                                                  if k != "density"}  # the panels vary it
        fig.suptitle(titled("Sensitivity to the density ρ = k/d", general, conditions, ev))
        fit_texts(fig)
    return fig
