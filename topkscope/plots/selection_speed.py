"""Figure: selection time against vector size d (from benchmarks/selection.py's CSV).

Left: median time per call (ms, log-log) per method; right: time relative to torch.topk measured
in the same run (ratio < 1: faster than exact Top-k). One distribution and density per figure;
one legend below both panels, each method in its own colour and line style (method_styles).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from topkscope.plots.frames import require_columns, require_rows
from topkscope.plots.style import figure_style, fit_texts, method_styles, new_figure, shared_legend
from topkscope.plots.titles import format_density, sparsifier_name
from topkscope.sparsify import in_plot_order

# the columns benchmarks/selection.py writes
TIME_COLUMN = "median_ms"
RATIO_COLUMN = "ratio_to_topk"


def selection_time(
    bench: pd.DataFrame, *, distribution: str | None = None, density: float | None = None,
    context: Mapping[str, Any] | None = None,
) -> Figure:
    """Median selection time vs d per method, and the ratio to torch.topk in the same run."""
    require_columns(bench, ["method", "d", "density", "distribution", TIME_COLUMN, RATIO_COLUMN],
                    "bench")
    require_rows(bench, "bench")
    if distribution is None:
        dists = list(bench["distribution"].unique())
        distribution = next((d for d in dists if str(d).lower() in ("normal", "gaussian", "n(0,1)")),
                            dists[0])
    if density is None:
        density = float(bench["density"].min())
    df = bench[(bench["distribution"] == distribution) & (bench["density"] == density)]
    require_rows(df, "bench", f"for distribution={distribution!r}, density={density}")
    methods = in_plot_order(df["method"])
    colors, styles = method_styles(methods)
    with figure_style():
        fig, axes = new_figure(2)
        tax = axes[0][0]
        for m in methods:
            part = df[df["method"] == m].sort_values("d")
            tax.plot(part["d"], part[TIME_COLUMN], marker="o", ms=3, lw=1.4, color=colors[m], ls=styles[m],
                     label=sparsifier_name(m))
        tax.set_xscale("log")
        tax.set_yscale("log")
        tax.set_xlabel("vector size d (elements)")
        tax.set_ylabel("median time per selection (ms)")
        tax.set_title("time per call")
        rax = axes[0][1]
        for m in methods:
            part = df[df["method"] == m].sort_values("d")
            rax.plot(part["d"], part[RATIO_COLUMN], marker="o", ms=3, lw=1.4, color=colors[m],
                     ls=styles[m], label=sparsifier_name(m))
        rax.axhline(1.0, color="k", lw=0.8, ls="--")
        rax.set_xscale("log")
        rax.set_yscale("log")
        rax.set_xlabel("vector size d (elements)")
        rax.set_ylabel("time / torch.topk time (ratio, log)")
        rax.set_title("relative to exact top-k (same run)")
        handles, labels = tax.get_legend_handles_labels()
        shared_legend(fig, handles, labels)  # both panels draw the same methods
        where = ", ".join(f"{k}: {v}" for k, v in (context or {}).items())
        fig.suptitle(f"Selection speed — {distribution} vectors, {format_density(density)}"
                     + (f"\n{where}" if where else ""))
        fit_texts(fig)
    return fig
