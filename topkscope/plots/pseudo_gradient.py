"""Figures of outer-loop (DiLoCo-style) training: the pseudo-gradient's distribution beside
the per-step u's, its contraction against the bounds for global and chunk-wise Top-k (with
and without quantization), and the held-out metric against the bytes sent.

    pseudo_gradient_distribution   standardised histograms (log density) of the outer run's
                                   u = beta e + Delta and a per-step run's u = e + g, whole
                                   model, worker 0, at a few recorded steps each, with the
                                   standard normal and the unit-variance uniform for reference
    outer_contraction              delta per recorded exchange (median over workers):
                                   topk_ratio, chunk_topk_ratio and their quantized columns,
                                   against 1 - k/d, (1 - k/d)^2 and the Gaussian value
    metric_vs_bytes                held-out metric against the cumulative bytes sent (all
                                   workers, log scale), one line per training (mean over seeds,
                                   band: lowest to highest seed)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from topkscope.plots.convergence import draw_band, metric_axis, pick_split, seed_band
from topkscope.plots.frames import pick_evenly, require_columns, require_rows, select_tensor
from topkscope.plots.histogram import normal_pdf
from topkscope.plots.style import (
    REFERENCE_COLORS,
    figure_style,
    fit_texts,
    linestyles,
    new_figure,
    palette,
)
from topkscope.plots.titles import figure_title
from topkscope.schema import GLOBAL

HIST_COLUMNS = ["step", "rank", "layer", "kind", "bin", "left", "right", "count"]
# delta columns of the outer u, each with its legend label
CONTRACTIONS = {
    "topk_ratio": "global Top-k",
    "topk_quantized_ratio": "global Top-k, quantized",
    "chunk_topk_ratio": "chunk-wise Top-k",
    "chunk_topk_quantized_ratio": "chunk-wise Top-k, quantized",
}
BOUNDS = {"classic_bound": "1 − k/d", "paper_bound": "(1 − k/d)²",
          "gaussian_ratio": "Gaussian value"}


def _standardised(hist: pd.DataFrame, stats: pd.DataFrame, step: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(left, width, density) in units of the row's std, worker 0, whole model, kind u."""
    row = stats[(stats["step"] == step) & (stats["rank"] == 0) & (stats["layer"] == GLOBAL)
                & (stats["kind"] == "u")].iloc[0]
    part = hist[(hist["step"] == step) & (hist["rank"] == 0)].sort_values("bin")
    total = float(part["count"].sum())
    finite = part[np.isfinite(part["left"]) & np.isfinite(part["right"])]
    left = (finite["left"].to_numpy() - row["mean"]) / row["std"]
    width = (finite["right"].to_numpy() - finite["left"].to_numpy()) / row["std"]
    return left, width, finite["count"].to_numpy() / (total * width)


def pseudo_gradient_distribution(
    outer_hist: pd.DataFrame, outer_stats: pd.DataFrame, step_hist: pd.DataFrame,
    step_stats: pd.DataFrame, *, outer_manifest: Mapping[str, Any] | None = None,
    step_manifest: Mapping[str, Any] | None = None, max_steps: int = 3,
) -> Figure:
    """Two panels: the outer run's u and the per-step run's u, standardised, log density."""
    panels = []
    for what, hist, stats, manifest in (("pseudo-gradient u = βe + Δ (outer loop)", outer_hist,
                                         outer_stats, outer_manifest),
                                        ("per-step u = e + g (TopK-SGD)", step_hist,
                                         step_stats, step_manifest)):
        require_columns(hist, HIST_COLUMNS, "hist")
        h = select_tensor(hist, layer=GLOBAL, kind="u", what="hist")
        h = h[h["rank"] == 0]
        require_rows(h, "hist", "for worker 0's u")
        steps = pick_evenly(sorted(set(h["step"])), max_steps)
        panels.append((what, h, stats, manifest, steps))
    with figure_style():
        fig, axes = new_figure(2, sharey=True)
        z = np.linspace(-6, 6, 400)
        half = math.sqrt(3.0)   # the unit-variance uniform on [-sqrt 3, sqrt 3]
        for ax, (what, h, stats, manifest, steps) in zip(axes[0], panels):
            colors = palette([str(s) for s in steps])
            for step in steps:
                left, width, dens = _standardised(h, stats, step)
                keep = dens > 0
                ax.step(left[keep] + width[keep] / 2, dens[keep], where="mid",
                        color=colors[str(step)], lw=1.3, label=f"step {step}")
            ax.plot(z, normal_pdf(z), color=REFERENCE_COLORS["gaussian_ratio"], ls="--", lw=1,
                    label="normal")
            ax.plot([-half, -half, half, half], [1e-6, 1 / (2 * half), 1 / (2 * half), 1e-6],
                    color="#7f7f7f", ls=":", lw=1, label="uniform")
            ax.set_yscale("log")
            ax.set_ylim(1e-5, 2)
            ax.set_xlabel("value in units of its standard deviation")
            ax.set_ylabel("density (log scale)")
            run = figure_title(what, manifest, width=60)
            ax.set_title(run)
            ax.legend(loc="upper right")
        fig.suptitle("Distribution of the compressed vector: outer loop against per step "
                     "(whole model, worker 0)")
        fit_texts(fig)
    return fig


def outer_contraction(stats: pd.DataFrame, *, manifest: Mapping[str, Any] | None = None,
                      density: float | None = None) -> Figure:
    """delta of the recorded outer u per exchange (median over workers) for every contraction
    column the run recorded, against the three reference curves."""
    require_columns(stats, ["step", "rank", "layer", "kind", "density", "topk_ratio",
                            *BOUNDS], "stats")
    u = stats[(stats["layer"] == GLOBAL) & (stats["kind"] == "u")]
    require_rows(u, "stats", "for the whole model's u")
    if density is None:
        density = float(sorted(u["density"].unique())[0])
    u = u[np.isclose(u["density"], density)]
    present = [c for c in CONTRACTIONS if c in u.columns and u[c].notna().any()]
    per_step = u.groupby("step")[[*present, *BOUNDS]].median().reset_index()
    with figure_style():
        fig, axes = new_figure(1)
        ax = axes[0][0]
        styles = linestyles(present)
        colors = palette(present)
        for col in present:
            ax.plot(per_step["step"], per_step[col], color=colors[col], ls=styles[col],
                    marker="o", ms=2.5, lw=1.4, label=CONTRACTIONS[col])
        for col, label in BOUNDS.items():
            ax.plot(per_step["step"], per_step[col], color=REFERENCE_COLORS[col], lw=1,
                    ls="--", label=label)
        ax.set_xlabel("inner step that ended the round (one point per exchange)")
        ax.set_ylabel("δ = ‖u − C(u)‖² / ‖u‖²")
        ax.legend(loc="best")
        fig.suptitle(figure_title(f"Contraction of the pseudo-gradient at ρ = {density:g} "
                                  f"(median over workers)", manifest))
        fit_texts(fig)
    return fig


def metric_vs_bytes(evaluation: pd.DataFrame, *, manifest: Mapping[str, Any] | None = None,
                    split: str | None = None, order: Sequence[str] | None = None) -> Figure:
    """Held-out metric against cumulative bytes sent. evaluation: columns training (the
    legend label), seed, step, split, metric, metric_name, bytes (cumulative, all workers,
    through the evaluated step)."""
    require_columns(evaluation, ["training", "step", "split", "metric", "metric_name", "bytes"],
                    "eval")
    ev, split = pick_split(evaluation, split)
    names = list(order) if order is not None else sorted(ev["training"].unique())
    colors, styles = palette(names), linestyles(names)
    metric = str(ev["metric_name"].iloc[0])
    with figure_style():
        fig, axes = new_figure(1)
        ax = axes[0][0]
        for name in names:
            e = ev[(ev["training"] == name) & (ev["bytes"] > 0)]
            if not len(e):
                continue
            agg = seed_band(e, "step", "metric")
            agg["bytes"] = seed_band(e, "step", "bytes")["mean"].to_numpy()
            draw_band(ax, agg, "bytes", color=colors[name], ls=styles[name], label=name)
        ax.set_xscale("log")
        ax.set_xlabel("bytes sent so far (all workers, encoded; log scale)")
        metric_axis(ax, split, metric)
        ax.legend(loc="best")
        seeds = sorted(ev["seed"].unique()) if "seed" in ev.columns else [0]
        note = "one seed" if len(seeds) == 1 else \
            f"mean over {len(seeds)} seeds, band: lowest to highest seed"
        fig.suptitle(figure_title(f"{split} {metric} against bytes sent ({note})", manifest,
                                  with_sparsifier=False))
        fit_texts(fig)
    return fig
