"""Draw every figure of one experiment into results/figures/ and write its caption.

Figure files are named <experiment>-<figure>.{png,pdf}. Captions state what the figure shows
and the headline numbers measured on the run, so index.md reads without opening the data.

results/figures/index.md: every figure with its caption, grouped by experiment, plus the claims.

Figures decide no verdict: a caption gives the measured numbers, and where a claim judges them
it names the claims table's row (topkscope.claims).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from topkscope import plots
from topkscope.analysis.snapshots import SnapshotAnalysis
from topkscope.io import write_bytes_atomic
from topkscope.plots.contraction import every_step
from topkscope.plots.frames import approximate_selectors
from topkscope.plots.titles import describe_run, sparsifier_name
from topkscope.schema import GLOBAL

BATTERY_EFFECT_SIZES = ("ks_D", "qq_r", "shapiro_W")  # the normality figure's panels


def _save(fig, out_dir: Path, experiment: str, figure: str, caption: str) -> FigureEntry:
    from matplotlib.figure import Figure

    assert isinstance(fig, Figure)
    name = f"{experiment}-{figure}"
    files = plots.save_figure(fig, out_dir, name)
    return FigureEntry(name=name, experiment=experiment, caption=caption, files=tuple(files))


def _global_u(stats: pd.DataFrame) -> pd.DataFrame:
    return stats[(stats["layer"] == GLOBAL) & (stats["kind"] == "u")]


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
    from topkscope.analysis.contraction import CONVEXITY_SHARE

    fig = plots.sorted_magnitudes(analysis.curves, manifest=run.manifest, densities=densities)
    conv, ratios = analysis.convexity, analysis.ratios
    gaps = ", ".join(f"{g:.3g}" for g in conv["convexity_gap"]) if len(conv) else "n/a"
    held = "; ".join(f"at ρ = {rho:g} on {_pct(g['condition_holds'].astype(bool).mean())}"
                     for rho, g in ratios.groupby("density")) if len(ratios) else "n/a"
    caption = (f"Sorted magnitudes |u|_(i)/|u|_(1) against i/d at the snapshot steps. The paper's "
               f"(1-k/d)^2 bound assumes this curve is convex: the convexity gap of the squared "
               f"curve is {gaps} (0 = convex). The condition (the gap may move δ at most "
               f"{CONVEXITY_SHARE:.0%} of the way from (1-k/d)^2 to 1-k/d) held {held} of the "
               f"snapshots. {describe_run(run.manifest)}.")
    return _save(fig, out_dir, experiment, "sorted_magnitudes", caption)


def contraction_figure(run, analysis: SnapshotAnalysis | None, out_dir: Path,
                       experiment: str) -> FigureEntry:
    from topkscope.analysis.criteria import contraction_shares
    from topkscope.analysis.fitted_value import analysis_units

    fitted = (analysis_units(analysis.ratios, analysis.fits) if analysis is not None
              else pd.DataFrame())
    fig = plots.contraction_over_iterations(run.stats, manifest=run.manifest, fitted=fitted,
                                            train=run.train)
    every = every_step(run.train, run.manifest, GLOBAL, "u")
    u = _global_u(run.stats).dropna(subset=["topk_ratio"])
    shares = contraction_shares(u, "density").set_index("density")
    parts = []
    for rho, g in u.groupby("density"):
        parts.append(
            f"ρ = {rho:g}: median δ_emp {g['topk_ratio'].median():.3f} vs 1-k/d "
            f"{g['classic_bound'].median():.4f}, (1-k/d)^2 {g['paper_bound'].median():.4f}, "
            f"Gaussian {g['gaussian_ratio'].median():.4f}; below (1-k/d)^2 in "
            f"{_pct(shares.loc[rho, 'share_at_most_paper'])} and at most the Gaussian value in "
            f"{_pct(shares.loc[rho, 'share_at_most_gaussian'])} of "
            f"{len(g)} (step, worker) records")
        fit = fitted[fitted["density"] == rho] if len(fitted) else fitted
        if len(fit):
            parts[-1] += (f"; at the {len(fit)} snapshots the fitted generalised normal (median "
                          f"β {fit['beta'].median():.2f}, zero share "
                          f"{fit['zero_share'].median():.2f}) gives {fit['fitted_ratio'].median():.4f}, "
                          f"median error in units of 1 − δ {fit['fit_error'].median():.3g} "
                          f"against the Gaussian value's {fit['gaussian_error'].median():.3g}")
    caption = ("Measured Top-k contraction δ_emp = ‖u − TopK(u)‖²/‖u‖² per iteration (median over "
               "workers, band min–max) against 1−k/d, (1−k/d)², the Gaussian value and, at the "
               "snapshot steps, the value of the fitted generalised normal with the measured "
               "share of exact zeros. " + "; ".join(parts) + "." + (
                   "" if every is None else
                   f" At the density training used, the line is δ at each of the {len(every)} "
                   "training steps (the training loop's own Top-k selection, mean over "
                   "workers) and the recorder's steps are points on it.")
               + f" {describe_run(run.manifest)}.")
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
    from topkscope.analysis.criteria import count_band_text, in_count_band

    fig = plots.selected_over_k(run.stats, manifest=run.manifest)
    u = _global_u(run.stats)
    u = u[u["k"] > 0]
    parts = []
    for s in approximate_selectors(u.columns):
        have = u.dropna(subset=[f"{s}_count"])
        if len(have):
            ratio = have[f"{s}_count"].astype(float) / have["k"]
            inside = in_count_band(have[f"{s}_count"], have["k"]).mean()
            parts.append(f"{sparsifier_name(s)} median {ratio.median():.2f}, inside "
                         f"{count_band_text()} {_pct(inside)}")
    caption = ("Elements selected by approximate selectors as a multiple of k over training (1 = "
               f"exact; the published Gaussian-k band {count_band_text()} shaded) and their "
               "recall of the "
               "exact top-k set, evaluated by the recorder on the same u as training. Selected/k "
               "over all recorded (step, worker, density): " + "; ".join(parts)
               + f". {describe_run(run.manifest)}.")
    return _save(fig, out_dir, experiment, "selectors", caption)


def run_frames(runs: Sequence) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train, eval) of every run, each row tagged with its run's sparsifier, seed, condition
    (claims.condition_of: density warm-up and named deviations; an imported published run:
    its logged setting too, and its job id for a seed, so no two jobs are pooled) and
    density; eval also gets
    `elements`: the elements all workers sent up to and including its step (cumulative sum of
    train `selected`, the mean per worker, times the number of workers)."""
    from topkscope.claims import published as published_claims
    from topkscope.manifest import condition_of

    trains, evals = [], []
    for r in runs:
        m = r.manifest
        tags = {"sparsifier": m["sparsifier"], "seed": int(m.get("seed", 0) or 0),
                "condition": condition_of(m), "density": float(m["density"])}
        if published_claims.is_published(m):  # no seed: each job its own series, by setting
            tags.update(seed=int(m["run_id"]), condition=f"{tags['condition']}; "
                        f"{published_claims.condition(m)}")
        tr = r.train.sort_values("step", kind="stable").assign(**tags)
        # one count per step (an imported run's train rows are per worker and interval)
        per_step = tr.drop_duplicates("step")
        count = per_step["selected"].astype("float64")
        if published_claims.is_published(m):  # a row is the mean over its interval's steps
            count = count * per_step["step"].diff().fillna(per_step["step"]).to_numpy()
        sent = count.cumsum() * int(m.get("world_size", 1))
        elements = pd.Series(sent.to_numpy(), index=per_step["step"].to_numpy())
        ev = r.eval.assign(**tags)
        ev["elements"] = elements.reindex(ev["step"].to_numpy()).to_numpy()
        trains.append(tr)
        evals.append(ev)
    return pd.concat(trains, ignore_index=True), pd.concat(evals, ignore_index=True)


def main_density(runs: Sequence) -> float:
    """The density most runs used (the experiment's; the sensitivity runs differ)."""
    return float(pd.Series([float(r.manifest["density"]) for r in runs]).mode().iloc[0])


def _finals(ev: pd.DataFrame) -> pd.DataFrame:
    """Per (sparsifier, condition, density, seed): the metric at the last evaluated step."""
    last = ev.sort_values("step").groupby(["sparsifier", "condition", "density", "seed"]).tail(1)
    return last[["sparsifier", "condition", "density", "seed", "metric", "elements"]]


def _mean_text(values: pd.Series) -> str:
    v = values.astype("float64")
    return f"{v.mean():.4g}" + (f" ({v.min():.4g}-{v.max():.4g})" if len(v) > 1 else "")


def _by_condition(finals: pd.DataFrame, value) -> str:
    """'warmup=paper: Top-k 0.91, ...; warmup=none: ...' with dense stated once."""
    from topkscope.plots.convergence import ordered

    parts = []
    dense = finals[finals["sparsifier"] == "dense"]
    if len(dense):
        parts.append(f"{sparsifier_name('dense')} {value(dense)}")
    for cond, g in finals[finals["sparsifier"] != "dense"].groupby("condition", sort=False):
        methods = ", ".join(f"{sparsifier_name(n)} {value(g[g['sparsifier'] == n])}"
                            for n in ordered(g["sparsifier"]))
        parts.append(f"{cond}: {methods}")
    return "; ".join(parts)


def _experiment_note(runs: Sequence) -> str:
    seeds = sorted({int(r.manifest.get("seed", 0) or 0) for r in runs})
    return (f"{len(runs)} runs, seeds {', '.join(map(str, seeds))}. "
            f"{describe_run(runs[0].manifest, with_sparsifier=False)}")


def convergence_figure(runs: Sequence, out_dir: Path, experiment: str) -> FigureEntry:
    rho = main_density(runs)
    runs = [r for r in runs if float(r.manifest["density"]) == rho]
    train, ev = run_frames(runs)
    fig = plots.convergence(train, ev, manifest=dict(runs[0].manifest))
    metric = str(ev["metric_name"].iloc[0]) if len(ev) else "metric"
    finals = _finals(ev)
    caption = (f"Training loss per iteration and held-out {metric} for dense SGD and "
               f"TopK-SGD variants with error feedback, at ρ = {rho:g}, one row per condition "
               f"(density warm-up and any named deviation); lines are the mean over seeds, bands "
               f"span the lowest to the highest seed (same seeds and data order for every "
               f"method). Final {metric}, mean (range over seeds): "
               + _by_condition(finals, lambda g: _mean_text(g["metric"]))
               + f". {_experiment_note(runs)}.")
    return _save(fig, out_dir, experiment, "convergence", caption)


def traffic_figure(runs: Sequence, out_dir: Path, experiment: str) -> FigureEntry:
    from topkscope.analysis.phases import TARGET
    from topkscope.analysis.seeds import WHOLE_RUN, traffic_ratios
    from topkscope.manifest import condition_of

    rho = main_density(runs)
    runs = [r for r in runs if float(r.manifest["density"]) == rho]
    _, ev = run_frames(runs)
    fig = plots.accuracy_vs_elements(ev, manifest=dict(runs[0].manifest))
    topk = {(condition_of(r.manifest), int(r.manifest.get("seed", 0) or 0)): r
            for r in runs if r.manifest["sparsifier"] == "topk"}
    rows = []
    for r in runs:
        m = r.manifest
        ref = topk.get((condition_of(m).split("; ")[0], int(m.get("seed", 0) or 0)))
        if m["sparsifier"] not in ("dense", "topk") and ref is not None:
            rows.append({"sparsifier": m["sparsifier"], "condition": condition_of(m),
                         **traffic_ratios(r, ref)})
    ratios = pd.DataFrame(rows, columns=["sparsifier", "condition", TARGET, WHOLE_RUN])

    def ratio(g: pd.DataFrame) -> str:
        return (_mean_text(g[TARGET]) + "x at the target density, "
                + _mean_text(g[WHOLE_RUN]) + "x over the whole run")

    metric = str(ev["metric_name"].iloc[0]) if len(ev) else "metric"
    caption = (f"Held-out {metric} against the elements communicated so far by all workers "
               f"(cumulative train `selected` x workers; log scale), at ρ = {rho:g}, one panel "
               f"per condition; mean over seeds, band over seeds on the {metric}. Elements sent "
               f"relative to Top-k's (same seed and condition; the claims' traffic_target and "
               f"traffic_ratio), mean (range over seeds): "
               + _by_condition(ratios, ratio) + f". {_experiment_note(runs)}.")
    return _save(fig, out_dir, experiment, "traffic", caption)


def density_sensitivity_figure(runs: Sequence, out_dir: Path, experiment: str) -> FigureEntry | None:
    """None when no run used another density than the experiment's."""
    rho = main_density(runs)
    other = [r for r in runs if float(r.manifest["density"]) != rho]
    if not other:
        return None
    from topkscope.manifest import condition_of

    methods = {r.manifest["sparsifier"] for r in other}
    conditions = {condition_of(r.manifest) for r in other}
    chosen = [r for r in runs if r.manifest["sparsifier"] == "dense"
              or (r.manifest["sparsifier"] in methods and condition_of(r.manifest) in conditions)]
    _, ev = run_frames(chosen)
    fig = plots.density_sensitivity(ev, manifest=dict(chosen[0].manifest))
    finals = _finals(ev)
    metric = str(ev["metric_name"].iloc[0]) if len(ev) else "metric"
    parts = [f"{sparsifier_name(n)} at ρ = {d:g}: {_mean_text(g['metric'])}"
             for (n, d), g in finals.groupby(["sparsifier", "density"]) if n != "dense"]
    dense = finals[finals["sparsifier"] == "dense"]
    if len(dense):
        parts.append(f"Dense {_mean_text(dense['metric'])}")
    robust = (" The robust Gaussian-k is left out: it selects the exact top-k set by "
              "construction, so its curves are Top-k's." if "topk" in methods else "")
    rhos = sorted(finals.loc[finals["sparsifier"] != "dense", "density"].unique())
    caption = (f"Held-out {metric} per iteration at each density ρ = k/d "
               f"({', '.join(f'{d:g}' for d in rhos)}) "
               f"against dense SGD, one panel per method, condition "
               f"{' | '.join(sorted(conditions))}; mean over seeds with a band over seeds. Final "
               f"{metric}, mean (range over seeds): " + "; ".join(parts) + "." + robust
               + f" {_experiment_note(chosen)}.")
    return _save(fig, out_dir, experiment, "density_sensitivity", caption)


def selected_per_step_figure(runs: Sequence, out_dir: Path, experiment: str) -> FigureEntry | None:
    """None when the experiment ran no approximate method."""
    from topkscope.analysis.criteria import count_band_text, in_count_band

    rho = main_density(runs)
    runs = [r for r in runs if float(r.manifest["density"]) == rho
            and r.manifest["sparsifier"] not in ("dense", "topk")]
    if not runs:
        return None
    train, _ = run_frames(runs)
    fig = plots.selected_per_step(train, manifest=dict(runs[0].manifest))
    train = train[train["k"] > 0]
    ratio = train["selected_median"] / train["k"]
    inside = pd.Series(in_count_band(train["selected_median"], train["k"]), index=train.index)
    parts = []
    for (name, cond), idx in train.groupby(["sparsifier", "condition"], sort=False).groups.items():
        lo = (train.loc[idx, "selected_min"] / train.loc[idx, "k"]).min()
        hi = (train.loc[idx, "selected_max"] / train.loc[idx, "k"]).max()
        parts.append(f"{sparsifier_name(name)} ({cond}) median {ratio[idx].median():.2f}, in "
                     f"the band on {_pct(inside[idx].mean())} of steps, workers {lo:.2g}-{hi:.2g}")
    caption = ("Elements each approximate method sent per step in its own training run, as a "
               "multiple of that step's k (log scale; the published Gaussian-k band "
               f"{count_band_text()} shaded): median over workers, mean over seeds, band from the fewest to the most "
               "any worker sent (train.parquet selected_min / selected_max, over seeds too). "
               "Selected/k over all (step, seed): " + "; ".join(parts)
               + f". {_experiment_note(runs)}.")
    return _save(fig, out_dir, experiment, "selected_per_step", caption)


def contraction_gap_figure(runs: Sequence, out_dir: Path, experiment: str) -> FigureEntry | None:
    """None when no method has a point (no Dense run of a seed, or no evaluation)."""
    from topkscope.analysis import contraction_convergence as cc

    frame, seeded = cc.points(runs)
    drawn = [c for c in cc.CONTRACTIONS if len(frame)
             and np.isfinite(frame[f"term_{c}"].astype(float)).any()]
    if not drawn:
        return None
    # the measured delta_C where any was recorded, else the first contraction that has a term
    fig = plots.gap_against_term(frame, manifest=dict(runs[0].manifest), contraction=drawn[0])
    table = cc.correlations(frame, seeded)
    parts = []
    for gap, part in table.groupby("gap", sort=False):
        told = [f"{r.contraction} ρ {r.rho:.2f} [{r.ci_low:.2f}, {r.ci_high:.2f}] (p {r.p:.3g})"
                for r in part.itertuples() if np.isfinite(r.ci_low) and np.isfinite(r.ci_high)]
        parts.append(f"{gap} gap: " + ("; ".join(told) or "no interval (too few points or "
                                                         "seeds)"))
    caption = ("The convergence gap to Dense of each method and condition (mean over seeds: the "
               "final held-out metric behind the same seed's Dense run; median over seeds: the "
               "steps to Dense's final metric within the margin, relative to Dense's) against "
               "the compression term (1 − q)/q² of the error-feedback bound (Karimireddy et al. "
               f"2019, Theorem II), q = 1 − δ from the {drawn[0]} contraction"
               + (" (δ_C, the method's own in the target-density phase; its source per point "
                  "in the claims' evidence)" if drawn[0] == "measured" else
                  " (no method's own contraction δ_C was recorded in these runs)")
               + ". "
               "Spearman ρ with 95% bootstrap interval over seeds and the permutation p of the "
               "ordering, per contraction: " + " | ".join(parts)
               + ". The verdict is the claims' contraction_explains_convergence row. "
               + f"{_experiment_note(runs)}.")
    return _save(fig, out_dir, experiment, "contraction_gap", caption)


CONVERGENCE_DRAWERS: dict[str, Callable] = {
    "convergence": convergence_figure,
    "traffic": traffic_figure,
    "density_sensitivity": density_sensitivity_figure,
    "selected_per_step": selected_per_step_figure,
    "contraction_gap": contraction_gap_figure,
}


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
    "contraction": lambda run, a, dens, out, exp: contraction_figure(run, a, out, exp),
    "normality": lambda run, a, dens, out, exp: normality_figure(run, a, out, exp),
    "qq": lambda run, a, dens, out, exp: qq_figure(run, a, out, exp),
    "selectors": lambda run, a, dens, out, exp: selectors_figure(run, out, exp),
}


@dataclasses.dataclass(frozen=True)
class FigureEntry:
    """One drawn figure: file stem, the experiment it comes from, its caption and files."""

    name: str
    experiment: str
    caption: str
    files: tuple[Path, ...]

    @property
    def png(self) -> Path | None:
        return next((f for f in self.files if f.suffix == ".png"), None)


def render_index(
    entries: Sequence[FigureEntry], out_dir: Path, *, profile: str, claims_markdown: str = "",
    notes: Sequence[str] = (),
) -> str:
    """Markdown: per experiment, each figure (PNG inline, PDF linked) with its caption."""
    lines = [f"# topkscope figures — `{profile}` profile", ""]
    lines += [f"- {n}" for n in notes]
    if notes:
        lines.append("")
    by_exp: dict[str, list[FigureEntry]] = {}
    for e in entries:
        by_exp.setdefault(e.experiment, []).append(e)
    lines.append("Contents: " + ", ".join(f"[{x}](#{_anchor(x)})" for x in by_exp)
                 + (", [claims](#claims)" if claims_markdown else ""))
    lines.append("")
    for exp, group in by_exp.items():
        lines += [f"## {exp}", ""]
        for e in group:
            png = e.png
            links = " · ".join(f"[{f.suffix[1:]}]({_rel(f, out_dir)})" for f in e.files)
            lines.append(f"### {e.name}")
            lines.append("")
            if png is not None:
                lines.append(f"![{e.name}]({_rel(png, out_dir)})")
                lines.append("")
            lines.append(f"{e.caption} ({links})")
            lines.append("")
    if claims_markdown:
        lines += ["## claims", "", claims_markdown.strip(), ""]
    return "\n".join(lines)


INDEX_CSV = "index.csv"  # the figures drawn, as data: name, experiment, caption (in order)


def write_index(entries: Sequence[FigureEntry], out_dir: str | Path, **kwargs) -> Path:
    """index.md (for people) and index.csv (the same figures and captions as data: the gallery
    and the report read it, never the markdown) under out_dir; returns index.md's path."""
    out_dir = Path(out_dir)
    text = render_index(entries, out_dir, **kwargs)
    table = pd.DataFrame([{"name": e.name, "experiment": e.experiment, "caption": e.caption}
                          for e in entries], columns=["name", "experiment", "caption"])
    write_bytes_atomic(out_dir / INDEX_CSV, table.to_csv(index=False).encode())
    return write_bytes_atomic(out_dir / "index.md", text.encode())


def read_index(figures_dir: str | Path) -> dict[str, str]:
    """{figure name: caption} of the figures a results root's figures folder holds, in the
    order they were drawn (index.csv; empty without one)."""
    path = Path(figures_dir) / INDEX_CSV
    if not path.is_file():
        return {}
    table = pd.read_csv(path, keep_default_na=False)
    return dict(zip(table["name"].astype(str), table["caption"].astype(str)))


def _rel(path: Path, base: Path) -> str:
    return Path(os.path.relpath(Path(path).resolve(), Path(base).resolve())).as_posix()


def _anchor(title: str) -> str:
    return "".join(c for c in title.lower().replace(" ", "-") if c.isalnum() or c in "-_")


GRACE_FIGURE = "grace-model"
GRACE_CAPTION = (
    "The step-time model on the field's own measurements (GRACE data release, "
    "sands-lab/grace-data@41915bb, V100 GPUs, 1-25 Gbit/s): each Top-k, Random-k and DGC "
    "throughput row predicted from the release's dense 1-worker and dense rows, the model's "
    "exchange and the compression cost measured at another bandwidth (left: predicted against "
    "measured throughput, ±25% band; right: the speed-up over dense SGD each says, the "
    "off-diagonal quadrants being where model and measurement disagree on whether it pays)")


def grace_model_figure(out_dir: Path, model_csv: Path | None = None) -> FigureEntry:
    """The GRACE model figure (plots.model_vs_measured) from the committed model.csv
    (topkscope.perf.grace, `python -m topkscope.perf.grace`): its predicted throughput rows."""
    from topkscope.perf import grace

    rows = pd.read_csv(model_csv or grace.MODEL_CSV, keep_default_na=False,
                       na_values={c: [""] for c in ("predicted", "measured",
                                                    "dense_throughput")})
    rows = rows[(rows["mode"] == "throughput") & (rows["reason"] == "")].reset_index(drop=True)
    fig = plots.model_vs_measured(
        rows, "Step-time model against the GRACE release (Top-k, Random-k, DGC throughput "
              "rows)")
    return _save(fig, out_dir, "published", GRACE_FIGURE, GRACE_CAPTION)
