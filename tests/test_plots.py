"""Each plot function on real run outputs: expected axes, series, data, title; bad input."""

from __future__ import annotations

import matplotlib as mpl
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PathCollection

from tests._figures_results import shared_small_results
from topkscope import plots
from topkscope.analysis import contraction
from topkscope.analysis.runs import load
from topkscope.plots.titles import describe_run


@pytest.fixture(scope="session")
def small(tmp_path_factory, data_root):
    return shared_small_results(tmp_path_factory, data_root)


@pytest.fixture(scope="session")
def run(small):
    (path,) = [p for p in (small.root / "tiny-fnn3").iterdir() if (p / "manifest.json").exists()]
    return load(path)


@pytest.fixture(scope="session")
def convergence_runs(small):
    return [load(p) for p in sorted((small.root / "tiny-convergence").iterdir())
            if (p / "manifest.json").exists()]


def panels(fig):
    return [ax for ax in fig.axes if ax.get_visible()]


def assert_no_empty_panels(fig):
    for ax in panels(fig):
        has = (any(len(line.get_xdata()) for line in ax.lines) or len(ax.patches)
               or any(len(c.get_offsets()) for c in ax.collections if isinstance(c, PathCollection))
               or len(ax.collections))
        assert has, f"empty panel {ax.get_title()!r}"
        assert ax.get_xlabel() or ax.get_ylabel() or ax.get_title()


def assert_run_title(fig, manifest):
    title = fig._suptitle.get_text()
    for part in ("FNN-3", "MNIST (first 2,560 samples)", f"{manifest['world_size']} workers",
                 "ρ = 0.01"):
        assert part in title, (part, title)


def legend_labels(ax):
    leg = ax.get_legend()
    return [t.get_text() for t in leg.get_texts()] if leg else []


def global_u(stats):
    return stats[(stats["layer"] == "__global__") & (stats["kind"] == "u")]


# --- histogram -------------------------------------------------------------------------------


def test_histogram_bars_are_the_standardised_histogram_of_the_snapshot(run):
    """Bar heights = numpy float64 histogram of (u - mean)/std of the saved snapshot."""
    step = 10
    fig = plots.gradient_histogram(run.hist, run.stats, manifest=run.manifest, steps=[step])
    ax = fig.axes[0]
    bars = [p for p in ax.patches]
    left = np.array([b.get_x() for b in bars])
    width = np.array([b.get_width() for b in bars])
    height = np.array([b.get_height() for b in bars])
    row = global_u(run.stats)
    row = row[(row["step"] == step) & (row["rank"] == 0)].iloc[0]
    u = run.snapshot(step, 0).astype(np.float64)
    z = (u - row["mean"]) / row["std"]
    edges = np.append(left, left[-1] + width[-1])
    ref_counts, _ = np.histogram(z, bins=edges)
    counts = height * width * u.size
    # values within rounding of an edge may fall on either side (documented in hooks.histogram)
    assert np.max(np.abs(counts - ref_counts)) <= 2
    assert abs(counts.sum() - ref_counts.sum()) <= 2
    normal = [line for line in ax.lines if line.get_label() == "fitted normal"][0]
    x, y = normal.get_xdata(), normal.get_ydata()
    assert y[np.argmin(np.abs(x))] == pytest.approx(1 / np.sqrt(2 * np.pi), rel=1e-3)


def test_histogram_layout_title_and_series(run):
    fig = plots.gradient_histogram(run.hist, run.stats, manifest=run.manifest, max_panels=2)
    assert len(panels(fig)) == 4  # 2 steps x (linear, log)
    assert_run_title(fig, run.manifest)
    assert_no_empty_panels(fig)
    assert {"fitted normal", "fitted Laplace", "u histogram"} <= set(legend_labels(fig.axes[0]))
    assert fig.axes[2].get_yscale() == "log" or fig.axes[3].get_yscale() == "log"
    assert [ax.get_title().split()[:2] for ax in fig.axes[:2]] == [["step", "10"], ["step", "38"]]


# --- contraction -----------------------------------------------------------------------------


def test_contraction_lines_are_the_recorded_ratios_and_the_exact_bounds(run):
    fig = plots.contraction_over_iterations(run.stats, manifest=run.manifest)
    u = global_u(run.stats)
    densities = sorted(u["density"].unique())
    assert len(panels(fig)) == len(densities)
    assert_run_title(fig, run.manifest)
    assert_no_empty_panels(fig)
    for ax, rho in zip(fig.axes, densities):
        part = u[u["density"] == rho]
        lines = {line.get_label(): line for line in ax.lines}
        measured = [v for k, v in lines.items() if k.startswith("measured")][0]
        ref = part.groupby("step")["topk_ratio"].median()
        np.testing.assert_allclose(measured.get_ydata(), ref.to_numpy(), rtol=1e-12)
        k, d = int(part["k"].iloc[0]), int(part["numel"].iloc[0])
        paper = [v for k_, v in lines.items() if k_.startswith("(1 − k/d)²")][0]
        classic = [v for k_, v in lines.items() if k_.startswith("1 − k/d")][0]
        gauss = [v for k_, v in lines.items() if k_.startswith("Gaussian")][0]
        np.testing.assert_allclose(paper.get_ydata(), contraction.paper_bound(k, d), rtol=1e-12)
        np.testing.assert_allclose(classic.get_ydata(), 1 - k / d, rtol=1e-12)
        np.testing.assert_allclose(gauss.get_ydata(), contraction.gaussian_ratio(k, d), rtol=1e-9)
        assert f"k = {k:,}" in ax.get_title()


# --- normality, Q-Q, sorted magnitudes ---------------------------------------------------------


def test_normality_panels_show_g_and_u_moments_and_battery(run):
    battery = pd.DataFrame([{"step": s, "statistic": "ks_D", "value": v}
                            for s, v in [(10, 0.08), (20, 0.07)]])
    fig = plots.normality_over_training(run.stats, battery, manifest=run.manifest)
    assert len(panels(fig)) == 3  # skew, kurtosis, ks_D (unused grid cells removed)
    assert_no_empty_panels(fig)
    labels = legend_labels(fig.axes[0])
    assert any(lab.startswith("g ") for lab in labels) and any(lab.startswith("u ") for lab in labels)
    kurt_ax = fig.axes[1]
    u_line = [line for line in kurt_ax.lines if line.get_label().startswith("u ")][0]
    ref = global_u(run.stats).drop_duplicates(["step", "rank"]).groupby("step")["excess_kurtosis"].median()
    np.testing.assert_allclose(u_line.get_ydata(), ref.to_numpy(), rtol=1e-12)


def test_qq_plot_points_and_identity_line(run):
    from topkscope.analysis import normality

    frames = [normality.qq(run.snapshot(s, 0)).assign(step=s) for s in (10, 38)]
    qq = pd.concat(frames, ignore_index=True)
    fig = plots.qq_plot(qq, manifest=run.manifest)
    assert len(panels(fig)) == 2
    assert_run_title(fig, run.manifest)
    for ax, frame in zip(fig.axes, frames):
        pts = ax.collections[0].get_offsets()
        np.testing.assert_allclose(pts[:, 0], frame["theoretical"])
        np.testing.assert_allclose(pts[:, 1], frame["sample"])
        diag = ax.lines[0]
        assert diag.get_xdata()[0] == diag.get_ydata()[0]


def test_sorted_magnitudes_normalised_curves(run):
    curves = pd.concat([contraction.sorted_magnitudes(run.snapshot(s, 0)).assign(step=s)
                        for s in (10, 20, 38)], ignore_index=True)
    fig = plots.sorted_magnitudes(curves, manifest=run.manifest, densities=[0.001, 0.01])
    assert len(panels(fig)) == 2
    assert_no_empty_panels(fig)
    lin, loglog = fig.axes
    assert loglog.get_xscale() == "log" and loglog.get_yscale() == "log"
    curves_drawn = [line for line in lin.lines if line.get_label().startswith("step")]
    assert [line.get_label() for line in curves_drawn] == ["step 10", "step 20", "step 38"]
    u = np.abs(run.snapshot(38, 0).astype(np.float64))
    y = curves_drawn[-1].get_ydata()
    assert y[0] == 1.0 and np.all(np.diff(y) <= 0)
    np.testing.assert_allclose(y[-1], np.min(u) / np.max(u), atol=1e-12)


# --- selectors, selection speed, convergence ---------------------------------------------------


def test_selected_over_k_one_series_per_selector(run):
    fig = plots.selected_over_k(run.stats, manifest=run.manifest)
    u = global_u(run.stats)
    densities = sorted(u["density"].unique())
    assert len(panels(fig)) == 2 * len(densities)  # count row + recall row
    assert_no_empty_panels(fig)
    top = fig.axes[0]
    labels = [line.get_label() for line in top.lines if not line.get_label().startswith("_")]
    assert {"Gaussian-k", "Gaussian-k (2019)", "Rand-k"} <= set(labels)
    gk = [line for line in top.lines if line.get_label() == "Gaussian-k"][0]
    part = u[u["density"] == densities[0]]
    ref = (part["gaussiank_count"] / part["k"]).groupby(part["step"]).median()
    np.testing.assert_allclose(gk.get_ydata(), ref.to_numpy(dtype=float), rtol=1e-12)
    rand = [line for line in top.lines if line.get_label() == "Rand-k"][0]
    np.testing.assert_allclose(rand.get_ydata(), 1.0)  # Rand-k is exact in count


def test_selected_over_k_joins_the_steps_the_selectors_ran(run):
    """With a sparser sparsifier_schedule the S_* columns of the other stats steps are null:
    the lines join the evaluated steps (a NaN between two points would break the line into
    dots that draw nothing)."""
    stats = run.stats.copy()
    steps = sorted(stats["step"].unique())
    skipped = stats["step"].isin(steps[1::2])
    selector = [c for c in stats.columns if c.endswith(("_count", "_recall", "_ratio"))
                and not c.startswith("topk")]
    stats.loc[skipped, selector] = np.nan
    fig = plots.selected_over_k(stats, manifest=run.manifest)
    for ax in fig.axes[:2]:  # count and recall of the first density
        (gk,) = [line for line in ax.lines if line.get_label() == "Gaussian-k"]
        np.testing.assert_array_equal(gk.get_xdata(), steps[::2])
        assert np.isfinite(gk.get_ydata()).all()


def test_selection_time_from_the_benchmark_table(small):
    bench = pd.read_csv(small.root / "bench" / "selection.csv")
    fig = plots.selection_time(bench, density=0.001, context={"device": "cpu"})
    assert len(panels(fig)) == 2
    assert_no_empty_panels(fig)
    tax, rax = fig.axes
    assert tax.get_xscale() == "log" and tax.get_yscale() == "log"
    assert "(ms)" in tax.get_ylabel()
    baseline = [line for line in rax.lines if line.get_label() == "torch.topk (baseline)"][0]
    np.testing.assert_allclose(baseline.get_ydata(), 1.0)
    labels = {line.get_label() for line in tax.lines}
    assert labels == {"torch.topk (baseline)", "Top-k", "Gaussian-k", "Gaussian-k (2019)", "Rand-k"}
    part = bench[(bench["density"] == 0.001) & (bench["method"] == "gaussiank")].sort_values("d")
    gk = [line for line in tax.lines if line.get_label() == "Gaussian-k"][0]
    np.testing.assert_allclose(gk.get_ydata(), part["median_ms"])
    assert "ρ = 0.001" in fig._suptitle.get_text()


def test_convergence_one_line_per_sparsifier(convergence_runs):
    train = pd.concat([r.train.assign(sparsifier=r.manifest["sparsifier"]) for r in convergence_runs])
    ev = pd.concat([r.eval.assign(sparsifier=r.manifest["sparsifier"]) for r in convergence_runs])
    fig = plots.convergence(train, ev, manifest=convergence_runs[0].manifest)
    assert len(panels(fig)) == 2
    assert_no_empty_panels(fig)
    lax, max_ = fig.axes
    names = ["Dense", "Top-k", "Gaussian-k", "Rand-k"]
    assert legend_labels(lax) == names and legend_labels(max_) == names
    for r in convergence_runs:
        label = plots.titles.sparsifier_name(r.manifest["sparsifier"])
        line = [line for line in max_.lines if line.get_label() == label][0]
        np.testing.assert_allclose(line.get_ydata(), r.eval.sort_values("step")["metric"])
    assert "accuracy" in max_.get_ylabel()
    title = fig._suptitle.get_text()
    assert "FNN-3 on MNIST" in title and "2 workers" in title


# --- titles, saving, no global state, bad input ------------------------------------------------


def test_titles_declare_substitution_and_model_arguments():
    manifest = {"model": "vgg16", "dataset": "cifar10", "dataset_substitute": "mnist",
                "world_size": 4, "sparsifier": "gaussiank", "density": 0.001, "profile": "quick",
                "config": {"model_args": {"width_multiplier": 0.25}, "train_subset": 6400}}
    text = describe_run(manifest)
    assert text == ("VGG-16-BN (width_multiplier=0.25) on CIFAR-10 (substituted by MNIST, first "
                    "6,400 samples) · 4 workers · Gaussian-k, ρ = 0.001 · quick profile")
    ptb = describe_run({"model": "lstm-ptb-small", "dataset": "ptb", "world_size": 2,
                        "sparsifier": "topk", "density": 0.001, "config": {"train_subset": 200000}},
                       with_sparsifier=False)
    assert ptb == "LSTM-PTB (small) on PTB (first 200,000 tokens) · 2 workers · ρ = 0.001"
    gpt = describe_run({"model": "gpt-mini", "dataset": "ptb", "world_size": 2,
                        "sparsifier": "topk", "density": 0.001,
                        "optimizer": {"name": "adamw", "betas": [0.9, 0.99]}})
    assert gpt == "GPT (mini, 2x64) on PTB · 2 workers · Top-k, ρ = 0.001 · AdamW"
    assert "SGD" not in describe_run({"model": "fnn3", "optimizer": {"name": "sgd"}})


def test_contraction_is_a_line_over_every_training_step_with_the_recorder_as_points(run):
    """tiny-fnn3 trains exact Top-k at ρ = 0.01 and records ρ = 0.001 and 0.01: the 0.01 panel
    draws train.parquet's δ at each of the 40 steps, equal to the recorder's δ at its steps;
    the 0.001 panel keeps the recorder's line and says training ran at another density."""
    from topkscope.plots.contraction import EVERY_STEP_LABEL

    assert run.manifest["sparsifier"] == "topk" and run.manifest["density"] == 0.01
    fig = plots.contraction_over_iterations(run.stats, manifest=run.manifest, train=run.train)
    low, high = panels(fig)
    assert "recorder only (training: ρ = 0.01)" in low.get_title()
    assert EVERY_STEP_LABEL not in [ln.get_label() for ln in low.lines]
    assert high.get_title().endswith("as trained")
    lines = {ln.get_label(): ln for ln in high.lines}
    every = lines[EVERY_STEP_LABEL]
    assert list(every.get_xdata()) == run.train["step"].tolist() == list(range(40))
    np.testing.assert_array_equal(every.get_ydata(), run.train["contraction"])
    u = global_u(run.stats)
    recorded = u[u["density"] == 0.01].groupby("step")["topk_ratio"].median()
    points = lines["measured δ at the recorded steps (recorder, median)"]
    np.testing.assert_array_equal(points.get_xdata(), recorded.index)
    on_line = run.train.set_index("step").loc[recorded.index, "contraction"]
    np.testing.assert_allclose(on_line.to_numpy(), recorded.to_numpy(), rtol=1e-12)
    # the references span the whole line, at the exact bound
    paper = next(ln for label, ln in lines.items() if label.startswith("(1 − k/d)²"))
    assert list(paper.get_xdata()) == [0, 39]
    # another method's selection is not Top-k's δ: no every-step line
    other = plots.contraction_over_iterations(
        run.stats, manifest={**run.manifest, "sparsifier": "gaussiank"}, train=run.train)
    assert EVERY_STEP_LABEL not in [ln.get_label() for ax in other.axes for ln in ax.lines]


def test_save_figure_writes_png_and_pdf(run, tmp_path):
    fig = plots.contraction_over_iterations(run.stats, manifest=run.manifest)
    paths = plots.save_figure(fig, tmp_path, "c")
    assert [p.name for p in paths] == ["c.png", "c.pdf"]
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert paths[1].read_bytes()[:5] == b"%PDF-"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.pdf", "c.png"]  # no temporaries left
    with pytest.raises(ValueError, match="unsupported figure format"):
        plots.save_figure(fig, tmp_path, "c", formats=("jpg",))
    with pytest.raises(ValueError, match="plain file stem"):
        plots.save_figure(fig, tmp_path, "../c")


def test_plots_leave_global_matplotlib_state_alone(run):
    import matplotlib.pyplot as plt

    before = dict(mpl.rcParams)
    figs_before = plt.get_fignums()
    plots.contraction_over_iterations(run.stats, manifest=run.manifest)
    assert plt.get_fignums() == figs_before  # not registered with pyplot: nothing leaks
    assert dict(mpl.rcParams) == before


def test_bad_input_is_a_value_error_naming_the_problem(run):
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['topk_ratio'\]"):
        plots.contraction_over_iterations(run.stats.drop(columns=["topk_ratio"]))
    with pytest.raises(ValueError, match="no rows for layer='nope'"):
        plots.contraction_over_iterations(run.stats, layer="nope")
    with pytest.raises(ValueError, match="no rows"):
        plots.qq_plot(pd.DataFrame(columns=["step", "theoretical", "sample"]))
    with pytest.raises(ValueError, match="selector"):
        plots.selected_over_k(run.stats, selectors=["dgc"])
    with pytest.raises(ValueError, match="step"):
        plots.gradient_histogram(run.hist, run.stats, steps=[999])
    with pytest.raises(ValueError, match="must be a pandas DataFrame"):
        plots.convergence([], [])
    with pytest.raises(ValueError, match="smooth"):
        plots.convergence(run.train.assign(sparsifier="topk"), run.eval.assign(sparsifier="topk"),
                          smooth=0)


# --- convergence over seeds and conditions (the tiny-seeds design) ------------------------------


@pytest.fixture(scope="session")
def seeds_runs(small):
    return [load(p) for p in sorted((small.root / "tiny-seeds").iterdir())
            if (p / "manifest.json").exists()]


def seed_mean(runs, sparsifier, warmup, density=0.01, column="metric"):
    """Mean over seeds per eval step, straight from each run's eval.parquet."""
    chosen = [r for r in runs if r.manifest["sparsifier"] == sparsifier
              and float(r.manifest["density"]) == density
              and (warmup is None or r.manifest["density_schedule"] == warmup)]
    assert len(chosen) == 3, (sparsifier, warmup, density)
    return pd.concat([r.eval for r in chosen]).groupby("step")[column].mean()


def line(ax, label):
    (found,) = [ln for ln in ax.lines if ln.get_label() == label]
    return found


def test_convergence_over_seeds_one_row_per_condition(seeds_runs):
    from topkscope.publish.figures import run_frames

    main = [r for r in seeds_runs if float(r.manifest["density"]) == 0.01]
    train, ev = run_frames(main)
    fig = plots.convergence(train, ev, manifest=main[0].manifest)
    assert len(panels(fig)) == 4
    assert_no_empty_panels(fig)
    for row, warmup in enumerate(["paper", "none"]):
        lax, max_ = fig.axes[2 * row], fig.axes[2 * row + 1]
        assert f"warmup={warmup}" in lax.get_title() and f"warmup={warmup}" in max_.get_title()
        assert legend_labels(max_) == ["Dense", "Top-k", "Gaussian-k (2019)"]  # dense in both
        for name, label in [("topk", "Top-k"), ("gaussiank-2019", "Gaussian-k (2019)")]:
            ref = seed_mean(main, name, warmup)
            np.testing.assert_allclose(line(max_, label).get_ydata(), ref.to_numpy())
            np.testing.assert_array_equal(line(max_, label).get_xdata(), ref.index.to_numpy())
        assert len(max_.collections) == 3  # a seed band per line
    title = fig._suptitle.get_text()
    assert "mean over 3 seeds" in title and "warmup=paper | warmup=none" in title


def test_accuracy_vs_elements_counts_what_every_worker_sent(seeds_runs):
    from topkscope.publish.figures import run_frames

    main = [r for r in seeds_runs if float(r.manifest["density"]) == 0.01]
    _, ev = run_frames(main)
    fig = plots.accuracy_vs_elements(ev, manifest=main[0].manifest)
    assert len(panels(fig)) == 2
    assert_no_empty_panels(fig)
    ax = fig.axes[0]
    assert "warmup=paper" in ax.get_title() and ax.get_xscale() == "log"
    topk = [r for r in main if r.manifest["sparsifier"] == "topk"
            and r.manifest["density_schedule"] == "paper"]
    sent = []
    for r in topk:  # elements by all workers up to each eval step, from train.parquet
        tr = r.train.set_index("step")["selected"]
        sent.append([tr.loc[:s].sum() * r.manifest["world_size"] for s in r.eval["step"]])
    np.testing.assert_allclose(line(ax, "Top-k").get_xdata(), np.mean(sent, axis=0))
    np.testing.assert_allclose(line(ax, "Top-k").get_ydata(),
                               seed_mean(main, "topk", "paper").to_numpy())
    dense = line(ax, "Dense").get_xdata()
    assert dense[-1] == pytest.approx(20 * 2 * main[0].manifest["num_parameters"])


def test_density_sensitivity_one_line_per_density_and_dense(seeds_runs):
    from topkscope.publish.figures import run_frames

    chosen = [r for r in seeds_runs if r.manifest["density_schedule"] == "none"
              and r.manifest["sparsifier"] in ("dense", "topk")]
    _, ev = run_frames(chosen)
    fig = plots.density_sensitivity(ev, manifest=chosen[0].manifest)
    (ax,) = panels(fig)
    assert legend_labels(ax) == ["Dense", "ρ = 0.01", "ρ = 0.05"]
    for rho in (0.01, 0.05):
        np.testing.assert_allclose(line(ax, f"ρ = {rho:g}").get_ydata(),
                                   seed_mean(chosen, "topk", "none", rho).to_numpy())
    np.testing.assert_allclose(line(ax, "Dense").get_ydata(),
                               seed_mean(chosen, "dense", None).to_numpy())
    assert "ρ =" not in fig._suptitle.get_text().split("\n", 1)[1]  # no single density named
    with pytest.raises(ValueError, match=r"no rows for method\(s\) \['sidco'\]"):
        plots.density_sensitivity(ev, methods=["sidco"])


def test_selected_per_step_in_each_methods_own_run(seeds_runs):
    from topkscope.publish.figures import run_frames

    mine = [r for r in seeds_runs if r.manifest["sparsifier"] == "gaussiank-2019"]
    train, _ = run_frames(mine)
    fig = plots.selected_per_step(train, manifest=mine[0].manifest)
    (ax,) = panels(fig)
    assert ax.get_yscale() == "log" and "Gaussian-k (2019)" in ax.get_title()
    (band,) = ax.patches  # the shaded [2k/3, 4k/3] band
    assert band.get_y() == pytest.approx(2 / 3)
    assert band.get_y() + band.get_height() == pytest.approx(4 / 3)
    for warmup in ("paper", "none"):
        runs = [r for r in mine if r.manifest["density_schedule"] == warmup]
        ref = pd.concat([r.train.assign(q=r.train["selected_median"] / r.train["k"])
                         for r in runs]).groupby("step")["q"].mean()
        np.testing.assert_allclose(line(ax, f"warmup={warmup}").get_ydata(), ref.to_numpy())
    assert len(ax.collections) == 2  # min-max over workers, per condition
    assert "min-max over workers" in fig._suptitle.get_text()
    with pytest.raises(ValueError, match="selected_min"):
        plots.selected_per_step(train.drop(columns=["selected_min"]))
