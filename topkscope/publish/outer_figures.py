"""Draw the figures of an outer-loop experiment (issue 37) with their captions: the
pseudo-gradient's distribution beside the per-step u's, its contraction against the bounds
(global and chunk-wise Top-k, with and without quantization), the held-out metric against the
bytes sent. Each drawer takes the experiment's runs and returns None when they hold no data
for its figure (e.g. no recorded per-step run)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from topkscope.analysis.outer import metric_by_bytes, run_summary
from topkscope.plots.pseudo_gradient import (
    metric_vs_bytes,
    outer_contraction,
    pseudo_gradient_distribution,
)
from topkscope.plots.titles import training_label
from topkscope.publish.figures import FigureEntry, _save
from topkscope.schema import GLOBAL


def _recorded(runs: Sequence, outer: bool, hist: bool = False) -> list:
    """Runs with recorder rows of the whole model's u (and histograms), outer-loop or per-step,
    sparse, lowest seed first."""
    found = []
    for run in runs:
        if bool(run.manifest.get("outer")) != outer or run.manifest.get("sparsifier") == "dense":
            continue
        table = run.hist if hist else run.stats
        if len(table) and ((table["layer"] == GLOBAL) & (table["kind"] == "u")).any():
            found.append(run)
    return sorted(found, key=lambda r: (r.manifest.get("seed") or 0, str(r.path)))


def _fmt(x: float, digits: int = 3) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.{digits}f}"


def pseudo_gradient_figure(runs: Sequence, out_dir: Path, experiment: str) -> FigureEntry | None:
    outer, step = _recorded(runs, True, hist=True), _recorded(runs, False, hist=True)
    if not outer or not step:
        return None
    a, b = outer[0], step[0]
    fig = pseudo_gradient_distribution(a.hist, a.stats, b.hist, b.stats,
                                       outer_manifest=a.manifest, step_manifest=b.manifest)
    s = run_summary([a, b], density=a.manifest["density"])
    caption = (f"Standardised histograms (log density) of the compressed vector, whole model, "
               f"worker 0: left the pseudo-gradient u = βe + Δ of {training_label(a.manifest)}, "
               f"right the per-step u = e + g of {training_label(b.manifest)}, with the standard "
               f"normal and the unit-variance uniform. Median excess kurtosis over the recorded "
               f"steps: {_fmt(s['u_excess_kurtosis'][0], 2)} (outer loop) and "
               f"{_fmt(s['u_excess_kurtosis'][1], 2)} (per step); 0 for a normal, −1.2 for a "
               f"uniform. Seed {a.manifest.get('seed')} and {b.manifest.get('seed')}.")
    return _save(fig, out_dir, experiment, "pseudo_gradient", caption)


def outer_contraction_figure(runs: Sequence, out_dir: Path, experiment: str
                             ) -> FigureEntry | None:
    outer = _recorded(runs, True)
    if not outer:
        return None
    run = outer[0]
    fig = outer_contraction(run.stats, manifest=run.manifest, density=run.manifest["density"])
    s = run_summary([run]).iloc[0]
    caption = (f"Contraction δ = ‖u − C(u)‖²/‖u‖² of the pseudo-gradient u at every recorded "
               f"exchange (median over workers) of {training_label(run.manifest)}: global Top-k "
               f"{_fmt(s['u_topk_ratio'], 4)}, chunk-wise Top-k "
               f"{_fmt(s['u_chunk_topk_ratio'], 4)}, quantized "
               f"{_fmt(s['u_topk_quantized_ratio'], 4)} and "
               f"{_fmt(s['u_chunk_topk_quantized_ratio'], 4)} (medians over the exchanges), "
               f"against 1 − k/d {_fmt(s['u_classic_bound'], 4)}, (1 − k/d)² "
               f"{_fmt(s['u_paper_bound'], 4)} and the Gaussian value "
               f"{_fmt(s['u_gaussian_ratio'], 4)}. Seed {run.manifest.get('seed')}.")
    return _save(fig, out_dir, experiment, "outer_contraction", caption)


def metric_vs_bytes_figure(runs: Sequence, out_dir: Path, experiment: str
                           ) -> FigureEntry | None:
    frame = metric_by_bytes(runs, label=training_label)
    if not len(frame):
        return None
    summary = run_summary(runs).assign(training=[training_label(r.manifest) for r in runs])
    per = summary.groupby("training").agg(final=("final_metric", "mean"),
                                          bytes=("bytes_total", "mean"),
                                          seeds=("seed", "nunique"))
    parts = [f"{name}: {row['final']:.4g} after {row['bytes'] / 1e6:.3g} MB "
             f"({int(row['seeds'])} seed{'' if int(row['seeds']) == 1 else 's'})"
             for name, row in per.iterrows()]
    order = list(per.sort_values("bytes").index)
    # the runs differ in sparsifier and density: the title names what they share
    fig = metric_vs_bytes(frame, manifest={**runs[0].manifest, "density": None}, order=order)
    metric = str(frame["metric_name"].iloc[0])
    caption = (f"Held-out {metric} against the bytes all workers sent so far (encoded: b-bit "
               f"values, chunk-local indices and quantization tables where the method uses "
               f"them; comm.sparse), mean over seeds. Final {metric} and total traffic: "
               + "; ".join(parts) + ".")
    return _save(fig, out_dir, experiment, "metric_vs_bytes", caption)


OUTER_DRAWERS: dict[str, Callable] = {
    "pseudo_gradient": pseudo_gradient_figure,
    "outer_contraction": outer_contraction_figure,
    "metric_vs_bytes": metric_vs_bytes_figure,
}
