"""Draw every figure of one experiment into results/figures/ and write its caption.

Figure files are named <experiment>-<figure>.{png,pdf}. Captions state what the figure shows
and the headline numbers measured on the run, so index.md reads without opening the data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from topkscope import plots
from topkscope.plots.frames import GLOBAL_LAYER, approximate_selectors
from topkscope.plots.titles import describe_run, sparsifier_name
from topkscope.reproduce.index import FigureEntry
from topkscope.reproduce.prepare import BATTERY_EFFECT_SIZES, SnapshotAnalysis


def _save(fig, out_dir: Path, experiment: str, figure: str, caption: str) -> FigureEntry:
    from matplotlib.figure import Figure

    assert isinstance(fig, Figure)
    name = f"{experiment}-{figure}"
    files = plots.save_figure(fig, out_dir, name)
    return FigureEntry(name=name, experiment=experiment, caption=caption, files=tuple(files))


def _global_u(stats: pd.DataFrame) -> pd.DataFrame:
    return stats[(stats["layer"] == GLOBAL_LAYER) & (stats["kind"] == "u")]


def _pct(x: float) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{100 * x:.0f}%"


def histogram_figure(run, analysis: SnapshotAnalysis, out_dir: Path, experiment: str) -> FigureEntry:
    fig = plots.gradient_histogram(run.hist, run.stats, manifest=run.manifest, kind="u")
    steps = sorted(run.hist.loc[run.hist["kind"] == "u", "step"].unique())
    best = ""
    if len(analysis.fits):
        from topkscope.analysis.fits import best as best_family

        winners = {int(s): best_family(g, on="x") for s, g in analysis.fits.groupby("step")}
        best = (" Best family by BIC on the snapshots (normal, Laplace, Student-t, generalised "
                "normal): " + ", ".join(f"step {s}: {f}" for s, f in winners.items()) + ".")
    caption = (f"Histogram of the error-compensated gradient u (whole model, worker 0) at steps "
               f"{', '.join(map(str, steps))}, in units of its standard deviation, with the "
               f"moment-matched normal and Laplace densities (linear and log density).{best} "
               f"{describe_run(run.manifest)}.")
    return _save(fig, out_dir, experiment, "histogram", caption)


def sorted_magnitudes_figure(run, analysis: SnapshotAnalysis, densities: Sequence[float],
                             out_dir: Path, experiment: str) -> FigureEntry:
    fig = plots.sorted_magnitudes(analysis.curves, manifest=run.manifest, densities=densities)
    conv = analysis.convexity
    held = conv["condition_holds"].astype(bool).mean() if len(conv) else float("nan")
    gaps = ", ".join(f"{g:.3f}" for g in conv["convexity_gap"]) if len(conv) else "n/a"
    caption = (f"Sorted magnitudes |u|_(i)/|u|_(1) against i/d at the snapshot steps. The paper's "
               f"(1-k/d)^2 bound assumes this curve is convex: the convexity gap of the squared "
               f"curve is {gaps} (0 = convex), so the condition held on {_pct(held)} of the "
               f"snapshots. {describe_run(run.manifest)}.")
    return _save(fig, out_dir, experiment, "sorted_magnitudes", caption)


def contraction_figure(run, out_dir: Path, experiment: str) -> FigureEntry:
    fig = plots.contraction_over_iterations(run.stats, manifest=run.manifest)
    u = _global_u(run.stats).dropna(subset=["topk_ratio"])
    parts = []
    for rho, g in u.groupby("density"):
        parts.append(
            f"ρ = {rho:g}: median δ_emp {g['topk_ratio'].median():.3f} vs 1-k/d "
            f"{g['classic_bound'].median():.4f}, (1-k/d)^2 {g['paper_bound'].median():.4f}, "
            f"Gaussian {g['gaussian_ratio'].median():.4f}; below (1-k/d)^2 in "
            f"{_pct((g['topk_ratio'] <= g['paper_bound']).mean())} of "
            f"{len(g)} (step, worker) records")
    caption = ("Measured Top-k contraction δ_emp = ‖u − TopK(u)‖²/‖u‖² per iteration (median over "
               "workers, band min–max) against 1−k/d, (1−k/d)² and the Gaussian value. "
               + "; ".join(parts) + f". {describe_run(run.manifest)}.")
    return _save(fig, out_dir, experiment, "contraction", caption)


def normality_figure(run, analysis: SnapshotAnalysis, out_dir: Path, experiment: str) -> FigureEntry:
    battery = analysis.battery[analysis.battery["statistic"].isin(BATTERY_EFFECT_SIZES)]
    fig = plots.normality_over_training(run.stats, battery, manifest=run.manifest,
                                        battery_statistics=BATTERY_EFFECT_SIZES)
    u = _global_u(run.stats).drop_duplicates(["step", "rank"])
    kurt = u["excess_kurtosis"].median()
    skew = u["skew"].median()
    ks = battery.loc[battery["statistic"] == "ks_D", "value"]
    caption = (f"Skewness and excess kurtosis of g and u per iteration (0 for a normal "
               f"distribution, 3 for Laplace) and, on the snapshots, the KS distance to the fitted "
               f"normal, the Q-Q correlation and Shapiro-Wilk W. Median over training for u: skew "
               f"{skew:.2f}, excess kurtosis {kurt:.2f}"
               + (f"; KS distance {ks.median():.3f}" if len(ks) else "")
               + f". {describe_run(run.manifest)}.")
    return _save(fig, out_dir, experiment, "normality", caption)


def qq_figure(run, analysis: SnapshotAnalysis, out_dir: Path, experiment: str) -> FigureEntry:
    fig = plots.qq_plot(analysis.qq, manifest=run.manifest)
    r = analysis.battery.loc[analysis.battery["statistic"] == "qq_r"]
    caption = ("Normal Q-Q plots of the standardised u at the snapshot steps; points on y = x "
               "mean normal, points bending away at both ends mean heavier tails. Q-Q correlation "
               + (", ".join(f"step {int(s)}: {v:.4f}" for s, v in zip(r["step"], r["value"]))
                  or "n/a")
               + f". {describe_run(run.manifest)}.")
    return _save(fig, out_dir, experiment, "qq", caption)


def selectors_figure(run, out_dir: Path, experiment: str) -> FigureEntry:
    fig = plots.selected_over_k(run.stats, manifest=run.manifest)
    u = _global_u(run.stats)
    u = u[u["k"] > 0]
    parts = []
    for s in approximate_selectors(u.columns):
        col = f"{s}_count"
        ratio = (u[col] / u["k"]).dropna()
        if len(ratio):
            parts.append(f"{sparsifier_name(s)} median {ratio.median():.2f}, inside "
                         f"[2/3, 4/3] {_pct(((ratio >= 2 / 3) & (ratio <= 4 / 3)).mean())}")
    caption = ("Elements selected by approximate selectors as a multiple of k over training (1 = "
               "exact; the published Gaussian-k band [2k/3, 4k/3] shaded) and their recall of the "
               "exact top-k set, evaluated by the recorder on the same u as training. Selected/k "
               "over all recorded (step, worker, density): " + "; ".join(parts)
               + f". {describe_run(run.manifest)}.")
    return _save(fig, out_dir, experiment, "selectors", caption)


def convergence_figure(runs: Sequence, out_dir: Path, experiment: str) -> FigureEntry:
    train = pd.concat([r.train.assign(sparsifier=r.manifest["sparsifier"]) for r in runs],
                      ignore_index=True)
    ev = pd.concat([r.eval.assign(sparsifier=r.manifest["sparsifier"]) for r in runs],
                   ignore_index=True)
    manifest = dict(runs[0].manifest)
    fig = plots.convergence(train, ev, manifest=manifest)
    finals = []
    for r in runs:
        e = r.eval.sort_values("step")
        if len(e):
            last = e.iloc[-1]
            finals.append(f"{sparsifier_name(r.manifest['sparsifier'])} {last['metric']:.4g}")
    metric = str(ev["metric_name"].iloc[0]) if len(ev) else "metric"
    caption = (f"Training loss per iteration and held-out {metric} for dense SGD and "
               f"TopK-SGD variants with error feedback, same seed and data order. Final {metric}: "
               + ", ".join(finals) + f". {describe_run(manifest, with_sparsifier=False)}.")
    return _save(fig, out_dir, experiment, "convergence", caption)


def selection_speed_figure(bench: pd.DataFrame, out_dir: Path, experiment: str) -> list[FigureEntry]:
    out = []
    context = {}
    for col in ("device", "threads"):
        if col in bench.columns:
            context[col] = ", ".join(map(str, bench[col].unique()))
    for rho in sorted(bench["density"].unique()):
        fig = plots.selection_time(bench, density=rho, context=context)
        caption = (f"Median selection time per call against the vector size d at ρ = {rho:g} on "
                   f"normal vectors, and the time relative to torch.topk measured in the same run "
                   f"(from results/bench/selection.csv).")
        out.append(_save(fig, out_dir, experiment, f"time_vs_d-rho{rho:g}", caption))
    return out


DISTRIBUTION_DRAWERS: dict[str, Callable] = {
    "histogram": lambda run, a, dens, out, exp: histogram_figure(run, a, out, exp),
    "sorted_magnitudes": sorted_magnitudes_figure,
    "contraction": lambda run, a, dens, out, exp: contraction_figure(run, out, exp),
    "normality": lambda run, a, dens, out, exp: normality_figure(run, a, out, exp),
    "qq": lambda run, a, dens, out, exp: qq_figure(run, a, out, exp),
    "selectors": lambda run, a, dens, out, exp: selectors_figure(run, out, exp),
}
