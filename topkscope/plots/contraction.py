"""Figure: measured Top-k contraction over training against the three reference curves.

    delta_emp(t) = ||u_t - TopK(u_t)||^2 / ||u_t||^2     (stats column topk_ratio)
    1 - k/d          classic bound        (classic_bound)
    (1 - k/d)^2      the paper's bound    (paper_bound)
    1 - rho - 2 t phi(t), t = Phi^-1(1 - rho/2)   Gaussian value (gaussian_ratio)
    gennorm_ratio(k, d, beta, z)   the fitted value: a generalised normal with the snapshot's
                     fitted shape beta and its share z of exact zeros (`fitted`, optional; drawn
                     at the snapshot steps only, where a fit exists)

One panel per density; the line is the median over workers, the band spans min..max over workers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from topkscope.bounds import gennorm_ratio
from topkscope.plots.frames import require_columns, require_rows, select_tensor
from topkscope.plots.style import REFERENCE_COLORS, figure_style, fit_texts, new_figure
from topkscope.plots.titles import figure_title, format_density
from topkscope.schema import GLOBAL

COLUMNS = ["step", "rank", "layer", "kind", "density", "k", "topk_ratio",
           "classic_bound", "paper_bound", "gaussian_ratio"]
REFERENCE_LABELS = {
    "classic_bound": "1 − k/d (classic bound)",
    "paper_bound": "(1 − k/d)² (paper's bound)",
    "gaussian_ratio": "Gaussian value 1 − ρ − 2tφ(t)",
}
FITTED_COLUMNS = ["step", "rank", "density", "k", "d", "beta", "zero_share"]
FITTED_LABEL = "fitted value (generalised normal β, zero share; snapshots)"


def fitted_curve(fitted: pd.DataFrame, density: float) -> pd.Series:
    """The fourth reference curve of one panel: gennorm_ratio(k, d, beta, zero_share) of each
    fitted unit at `density`, median over workers per step (indexed by step)."""
    require_columns(fitted, FITTED_COLUMNS, "fitted")
    part = fitted[fitted["density"] == density]
    values = [gennorm_ratio(int(k), int(d), float(b), float(z))
              for k, d, b, z in zip(part["k"], part["d"], part["beta"], part["zero_share"])]
    return pd.Series(values, index=part["step"].to_numpy(), dtype=float).groupby(level=0).median()


def contraction_over_iterations(
    stats: pd.DataFrame, *, manifest: Mapping[str, Any] | None = None,
    layer: str = GLOBAL, kind: str = "u", fitted: pd.DataFrame | None = None,
) -> Figure:
    """delta_emp per iteration (median over workers, min-max band) against the reference curves;
    `fitted` (FITTED_COLUMNS, e.g. topkscope.analysis.fitted_value.analysis_units of the
    snapshots of u) adds the fitted generalised normal's value at the snapshot steps."""
    require_columns(stats, COLUMNS, "stats")
    df = select_tensor(stats, layer=layer, kind=kind, what="stats")
    df = df[df["topk_ratio"].notna()]
    require_rows(df, "stats", f"with a finite topk_ratio for layer={layer!r}, kind={kind!r}")
    densities = sorted(df["density"].unique())
    with figure_style():
        fig, axes = new_figure(len(densities))
        for ax, rho in zip(axes[0], densities):
            part = df[df["density"] == rho]
            by_step = part.groupby("step")
            emp = by_step["topk_ratio"].agg(["median", "min", "max"])
            ax.plot(emp.index, emp["median"], color="#1f77b4", lw=1.6,
                    label="measured δ = ‖u − TopK(u)‖² / ‖u‖²")
            if part["rank"].nunique() > 1:
                ax.fill_between(emp.index, emp["min"], emp["max"], color="#1f77b4", alpha=0.2,
                                lw=0, label="min–max over workers")
            refs = by_step[list(REFERENCE_LABELS)].median()
            for col, label in REFERENCE_LABELS.items():
                ax.plot(refs.index, refs[col], color=REFERENCE_COLORS[col], lw=1.2,
                        ls="--" if col != "gaussian_ratio" else ":", label=label)
            curve = fitted_curve(fitted, rho) if fitted is not None and len(fitted) else None
            if curve is not None and len(curve):
                ax.plot(curve.index, curve.to_numpy(), color=REFERENCE_COLORS["fitted_ratio"],
                        lw=1.2, ls="-.", marker="o", ms=4, label=FITTED_LABEL)
            k = int(part["k"].median())
            ax.set_title(f"{format_density(rho)} (k = {k:,})")
            ax.set_xlabel("iteration (step)")
            ax.set_ylabel("δ (ratio of squared norms)")
        axes[0][0].legend(loc="lower left")
        where = f" — {kind}, {'whole model' if layer == GLOBAL else layer}"
        fig.suptitle(figure_title(f"Top-k contraction vs bounds{where}", manifest))
        fit_texts(fig)
    return fig
