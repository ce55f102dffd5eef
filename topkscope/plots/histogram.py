"""Figure: histograms of the gradient, standardised, with fitted normal and Laplace overlays.

The recorder's bins (hist table) have raw-unit edges placed by the vector's own mean m and std s;
the plot shows them standardised, z = (edge - m)/s, with m and s from the stats row of the same
(step, rank, layer, kind). Bars: count / (N * bin width in z), N including the under/overflow bins
(whose share is printed in the panel title). Overlays, moment-matched (zero mean, unit variance
in z):

    normal   f(z) = exp(-z^2 / 2) / sqrt(2 pi)
    Laplace  f(z) = exp(-|z| / b) / (2b),  b = 1/sqrt(2)

Top row linear density, bottom row log density (where the tails differ).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from topkscope.plots.frames import pick_evenly, require_columns, select_tensor
from topkscope.plots.style import figure_style, fit_texts, new_figure
from topkscope.plots.titles import figure_title
from topkscope.schema import GLOBAL

COLUMNS = ["step", "rank", "layer", "kind", "bin", "left", "right", "count"]


def normal_pdf(z: np.ndarray) -> np.ndarray:
    """Standard normal density at z."""
    return np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)


def laplace_pdf(z: np.ndarray) -> np.ndarray:
    """Zero-mean, unit-variance Laplace density at z (scale b = 1/sqrt(2))."""
    b = 1.0 / math.sqrt(2.0)
    return np.exp(-np.abs(z) / b) / (2.0 * b)


def gradient_histogram(
    hist: pd.DataFrame, stats: pd.DataFrame, *, manifest: Mapping[str, Any] | None = None,
    kind: str = "u", layer: str = GLOBAL, rank: int = 0, steps: Sequence[int] | None = None,
    max_panels: int = 4,
) -> Figure:
    """Standardised histogram of one tensor at a few steps, with normal and Laplace overlays."""
    require_columns(hist, COLUMNS, "hist")
    df = select_tensor(hist, layer=layer, kind=kind, what="hist")
    if rank not in set(df["rank"]):
        raise ValueError(f"hist has no rows for rank {rank}; ranks present: {sorted(df['rank'].unique())}")
    df = df[df["rank"] == rank]
    moments = _moments(stats, kind=kind, layer=layer, rank=rank)
    available = sorted(set(df["step"]) & set(moments))
    if not available:
        raise ValueError(f"no step has both hist rows and stats mean/std for layer={layer!r}, "
                         f"kind={kind!r}, rank={rank}; hist steps: {sorted(df['step'].unique())}")
    if steps is None:
        steps = pick_evenly(available, max_panels)
    missing = [s for s in steps if s not in available]
    if missing:
        raise ValueError(f"step(s) {missing} lack hist rows or stats; steps with both: {available}")
    with figure_style():
        fig, axes = new_figure(len(steps), nrows=2, sharex=True)
        for col, step in enumerate(steps):
            mean, std = moments[step]
            part = df[df["step"] == step].sort_values("bin")
            total = float(part["count"].sum())
            finite = part[np.isfinite(part["left"]) & np.isfinite(part["right"])]
            outside = 1.0 - float(finite["count"].sum()) / total if total > 0 else 0.0
            left = (finite["left"].to_numpy() - mean) / std
            right = (finite["right"].to_numpy() - mean) / std
            width = right - left
            dens = finite["count"].to_numpy() / (total * width)
            z = np.linspace(left.min(), right.max(), 400)
            for row in (0, 1):
                ax = axes[row][col]
                ax.bar(left, dens, width=width, align="edge", color="#4c72b0", alpha=0.6, lw=0,
                       label=f"{kind} histogram")
                ax.plot(z, normal_pdf(z), color="#d62728", lw=1.3, label="fitted normal")
                ax.plot(z, laplace_pdf(z), color="#2ca02c", lw=1.3, ls="--", label="fitted Laplace")
                ax.set_ylabel("density (per std unit)" + (", log scale" if row else ""))
                if row:
                    positive = dens[dens > 0]
                    ax.set_yscale("log")
                    ax.set_ylim(bottom=max(positive.min() / 2, 1e-7) if positive.size else 1e-7)
                    ax.set_xlabel(f"({kind} − mean) / std (standard deviations)")
                else:
                    ax.set_title(f"step {step}  ({outside:.2%} beyond the range)")
        axes[0][0].legend(loc="upper left")
        where = "whole model" if layer == GLOBAL else layer
        fig.suptitle(figure_title(f"Distribution of {kind} ({where}, worker {rank})", manifest))
        fit_texts(fig)
    return fig


def _moments(stats: pd.DataFrame, *, kind: str, layer: str, rank: int) -> dict:
    """{step: (mean, std)} of the histogrammed tensor, from the stats table (std > 0 only)."""
    require_columns(stats, ["step", "rank", "layer", "kind", "mean", "std"], "stats")
    s = stats[(stats["layer"] == layer) & (stats["kind"] == kind) & (stats["rank"] == rank)]
    s = s.drop_duplicates("step")
    s = s[np.isfinite(s["std"]) & (s["std"] > 0)]
    return {int(t): (float(m), float(v)) for t, m, v in zip(s["step"], s["mean"], s["std"])}
