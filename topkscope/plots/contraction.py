"""Figure: measured Top-k contraction over training against the three reference curves.

    delta_emp(t) = ||u_t - TopK(u_t)||^2 / ||u_t||^2     (stats column topk_ratio)
    1 - k/d          classic bound        (classic_bound)
    (1 - k/d)^2      the paper's bound    (paper_bound)
    1 - rho - 2 t phi(t), t = Phi^-1(1 - rho/2)   Gaussian value (gaussian_ratio)
    gennorm_ratio(k, d, beta, z)   the fitted value: a generalised normal with the snapshot's
                     fitted shape beta and its share z of exact zeros (`fitted`, optional; drawn
                     at the snapshot steps only, where a fit exists)

One panel per recorder density, its title saying whether training ran at it; the recorder's δ
is the median over workers, the band spans min..max over workers. Given the run's train table
(`train`), a panel whose density and k training used draws δ at every training step from its
`contraction` column (the mean over workers of ‖u − C(u)‖² / ‖u‖² of the step's own selection)
as the line, and the recorder's steps as points on it. That is the same δ only when training
selected with exact global Top-k, so the line is drawn for such runs alone (a run of another
method or of layer-wise selection keeps the recorder's line).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from topkscope.bounds import gennorm_ratio
from topkscope.plots.frames import require_columns, require_rows, select_tensor
from topkscope.plots.style import (
    REFERENCE_COLORS,
    figure_style,
    fit_texts,
    new_figure,
    shared_legend,
)
from topkscope.plots.titles import figure_title, recorder_panel_title
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
TRAIN_COLUMNS = ["step", "density", "k", "contraction"]
EVERY_STEP_LABEL = "δ at every step (training's Top-k, mean over workers)"
MEASURED_COLOR = "#1f77b4"


def every_step(train: pd.DataFrame | None, manifest: Mapping[str, Any] | None, layer: str,
               kind: str) -> pd.DataFrame | None:
    """The train rows whose `contraction` is the recorder's whole-model δ of u: a run that
    trained with exact global Top-k (manifest), rows with a finite contraction; else None."""
    m = manifest or {}
    if train is None or layer != GLOBAL or kind != "u" or m.get("sparsifier") != "topk" \
            or m.get("selection", "global") != "global":
        return None
    require_columns(train, TRAIN_COLUMNS, "train")
    rows = train[train["contraction"].notna()]
    return rows if len(rows) else None


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
    train: pd.DataFrame | None = None,
) -> Figure:
    """delta_emp per iteration (median over workers, min-max band) against the reference curves;
    `fitted` (FITTED_COLUMNS, e.g. topkscope.analysis.fitted_value.analysis_units of the
    snapshots of u) adds the fitted generalised normal's value at the snapshot steps; `train`
    (TRAIN_COLUMNS, the run's train table) draws δ at every step where it is the same δ
    (`every_step`), with the recorder's steps as points."""
    require_columns(stats, COLUMNS, "stats")
    df = select_tensor(stats, layer=layer, kind=kind, what="stats")
    df = df[df["topk_ratio"].notna()]
    require_rows(df, "stats", f"with a finite topk_ratio for layer={layer!r}, kind={kind!r}")
    densities = sorted(df["density"].unique())
    steps = every_step(train, manifest, layer, kind)
    with figure_style():
        fig, axes = new_figure(len(densities))
        for ax, rho in zip(axes[0], densities):
            part = df[df["density"] == rho]
            by_step = part.groupby("step")
            emp = by_step["topk_ratio"].agg(["median", "min", "max"])
            k = int(part["k"].median())
            line = None if steps is None else steps[
                (steps["density"] - rho).abs().le(1e-12 * rho) & (steps["k"] == k)]
            if line is not None and len(line):
                ax.plot(line["step"], line["contraction"], color=MEASURED_COLOR, lw=1.0,
                        label=EVERY_STEP_LABEL)
                ax.plot(emp.index, emp["median"], color="#0b3c5d", ls="none", marker="o",
                        ms=3.5, label="measured δ at the recorded steps (recorder, median)")
                xs = [min(line["step"].min(), emp.index.min()),
                      max(line["step"].max(), emp.index.max())]
            else:
                ax.plot(emp.index, emp["median"], color=MEASURED_COLOR, lw=1.6,
                        label="measured δ = ‖u − TopK(u)‖² / ‖u‖²")
                xs = list(emp.index)
            if part["rank"].nunique() > 1:
                ax.fill_between(emp.index, emp["min"], emp["max"], color=MEASURED_COLOR,
                                alpha=0.2, lw=0, label="min–max over workers")
            # the references depend on k and the vector's length alone: one value per panel
            refs = part[list(REFERENCE_LABELS)].median()
            for col, label in REFERENCE_LABELS.items():
                ax.plot(xs, [refs[col]] * len(xs), color=REFERENCE_COLORS[col], lw=1.2,
                        ls="--" if col != "gaussian_ratio" else ":", label=label)
            curve = fitted_curve(fitted, rho) if fitted is not None and len(fitted) else None
            if curve is not None and len(curve):
                ax.plot(curve.index, curve.to_numpy(), color=REFERENCE_COLORS["fitted_ratio"],
                        lw=1.2, ls="-.", marker="o", ms=4, label=FITTED_LABEL)
            ax.set_title(recorder_panel_title(
                rho, k, manifest, None if train is None else train.get("density")))
            ax.set_xlabel("iteration (step)")
            ax.set_ylabel("δ (ratio of squared norms)")
        # one legend for every panel's series: the every-step line is drawn only in the
        # panel of the training's density, whichever panel that is
        named: dict[str, object] = {}
        for ax in axes[0]:
            for handle, label in zip(*ax.get_legend_handles_labels()):
                named.setdefault(label, handle)
        shared_legend(fig, list(named.values()), list(named))
        where = f" — {kind}, {'whole model' if layer == GLOBAL else layer}"
        fig.suptitle(figure_title(f"Top-k contraction vs bounds{where}", manifest))
        fit_texts(fig)
    return fig
