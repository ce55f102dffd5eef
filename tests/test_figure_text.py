"""No clipped or overlapping text in any figure (tests/_figure_text.py is the one check).

Every figure builder of the figures driver (topkscope.publish.figures: the distribution
drawers, the convergence drawers, the selection-speed figure) is drawn on the small result
tree, once with the runs' own manifests and once with long ones like the real titles: a model
with arguments, a dataset that stood in with a training subset, 16 workers, AdamW, a named
profile and a condition with a k rule and a deviation. Every plot function of topkscope.plots
is drawn directly too, with the long titles and the shapes the builders do not reach (a
hook run without evaluation, perplexity on a log axis, more methods and conditions). The
scaling figures are checked in tests/test_plots_scaling.py with the same check.
"""

from __future__ import annotations

import dataclasses
import types

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from tests._figure_series import assert_series_decodable
from tests._figure_text import assert_text_fits, text_problems
from tests._figures_results import shared_small_results
from topkscope import plots
from topkscope.analysis.runs import load
from topkscope.plots.style import new_figure
from topkscope.publish import figures as draw
from topkscope.reproduce import plan
from topkscope.sparsify import available

LONG = {"model": "resnet20", "dataset": "cifar10", "dataset_substitute": "mnist",
        "world_size": 16, "optimizer": {"name": "adamw"}, "profile": "standard",
        "k_rule": "ceil", "deviations": ["empty_fallback=topk"]}
LONG_CONFIG = {"model_args": {"width": 0.25}, "train_subset": 6400}


def lengthen(manifest: dict) -> dict:
    """The manifest with everything a title names made as long as real runs make it."""
    config = {**(manifest.get("config") or {}), **LONG_CONFIG}
    return {**manifest, **LONG, "config": config}


def long_runs(runs):
    return [dataclasses.replace(r, manifest=lengthen(r.manifest)) for r in runs]


@pytest.fixture(scope="session")
def small(tmp_path_factory, data_root):
    return shared_small_results(tmp_path_factory, data_root)


def _runs(small, experiment):
    return [load(p) for p in sorted((small.root / experiment).iterdir())
            if (p / "manifest.json").exists()]


@pytest.fixture(scope="module")
def results(small):
    """The runs, the snapshot analysis and the benchmark table the driver draws from."""
    from topkscope.analysis.snapshots import analyze_run

    (fnn3,) = _runs(small, "tiny-fnn3")
    analysis = analyze_run(fnn3)
    return types.SimpleNamespace(
        fnn3=fnn3, analysis=analysis, densities=sorted(set(analysis.ratios["density"])),
        seeds=_runs(small, "tiny-seeds"),
        bench=pd.read_csv(small.root / "bench" / "selection.csv"))


@pytest.fixture
def saved(monkeypatch):
    """The figures the builders hand to plots.save_figure (not written: only drawn here)."""
    figures: list[Figure] = []

    def keep(fig, out_dir, name, *args, **kwargs):
        figures.append(fig)
        return []

    monkeypatch.setattr(plots, "save_figure", keep)
    return figures


BUILDERS = ([f"distribution:{n}" for n in draw.DISTRIBUTION_DRAWERS]
            + [f"convergence:{n}" for n in draw.CONVERGENCE_DRAWERS] + ["selection_speed",
                                                                        "atlas"])


@pytest.mark.parametrize("variant", ["own titles", "long titles"])
@pytest.mark.parametrize("builder", BUILDERS)
def test_every_figure_of_the_driver_keeps_its_text_readable(builder, variant, results, saved,
                                                            tmp_path):
    long = variant == "long titles"
    kind, _, name = builder.partition(":")
    if kind == "distribution":
        (run,) = long_runs([results.fnn3]) if long else [results.fnn3]
        draw.DISTRIBUTION_DRAWERS[name](run, results.analysis, results.densities, tmp_path, "e")
    elif kind == "convergence":
        runs = long_runs(results.seeds) if long else results.seeds
        assert draw.CONVERGENCE_DRAWERS[name](runs, tmp_path, "e") is not None
    elif kind == "atlas":
        runs = long_runs([results.fnn3]) if long else [results.fnn3]
        assert draw.atlas_figure(runs, tmp_path) is not None
    else:
        context = ({"device": "NVIDIA H100 80GB HBM3 (CUDA 12.4)", "threads": "1, 16"}
                   if long else {"device": "cpu", "threads": "1"})
        draw.selection_speed_figure(results.bench.assign(**context), tmp_path, "e")
    assert saved, "the builder drew no figure"
    for fig in saved:
        assert_text_fits(fig)
        assert_series_decodable(fig)


def _as_methods(frame: pd.DataFrame, names) -> pd.DataFrame:
    """The frame's rows once per name, as if each name had run them (shape only)."""
    return pd.concat([frame.assign(sparsifier=n) for n in names], ignore_index=True)


def _every_method_bench(bench: pd.DataFrame) -> pd.DataFrame:
    """The benchmark table as if every registered method and torch.topk had been timed (as
    benchmarks/selection.py times them by default: the quick profile draws 16 methods)."""
    one = bench[bench["method"] == "topk"]
    names = [*available(), "torch.topk"]
    return pd.concat([one.assign(method=n, median_ms=one["median_ms"] * (1 + 0.2 * i),
                                 ratio_to_topk=1 + 0.2 * i) for i, n in enumerate(names)],
                     ignore_index=True)


def _perplexity(ev: pd.DataFrame) -> pd.DataFrame:
    """An LSTM-like eval table: perplexity from 2 to about 300, on a log axis."""
    return ev.assign(metric=np.exp(1.0 + 5.0 * (1.0 - ev["metric"])), metric_name="perplexity")


def _gap_points() -> pd.DataFrame:
    """contraction_convergence points of five methods under two long conditions."""
    methods = ["topk", "gaussiank-2019", "dgc", "redsync", "sidco"]
    cond = "warmup=custom[0.25,0.0625]; k_rule=ceil; empty_fallback=topk"
    return pd.DataFrame({
        "method": methods * 2, "condition": [cond] * 5 + ["warmup=none"] * 5,
        "density": 0.001, "metric": "perplexity", "term_classic": np.geomspace(1e3, 1e6, 10),
        "gap_final": np.linspace(0.5, 40.0, 10), "gap_steps": [*np.linspace(0, 3, 9), np.inf]})


def _delta_kinds(run) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The run's delta rows of u, as if g and e had been saved at the same steps too."""
    from topkscope.analysis.snapshots import delta_run

    t = delta_run(run, tails=False)
    return (pd.concat([t.delta_curve.assign(kind=k) for k in ("u", "g", "e")]),
            pd.concat([t.delta_families.assign(kind=k) for k in ("u", "g", "e")]))


def _atlas_panels(run) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The atlas rows of the run, as if seven models and vectors with long names had them."""
    from topkscope.analysis.snapshots import atlas

    curve, fams, _ = atlas([run])
    names = ["LSTM-PTB (2x1500) · u = βe + Δ (outer)", "VGG-16-BN · u = g + e",
             "GPT (6x384) · Δ (outer)", "ResNet-20 · e", "FNN-3 · g", "GPT (mini, 2x64) · u = g + e",
             "LSTM-PTB (small) · e (outer)"]
    return (pd.concat([curve.assign(panel=n) for n in names]),
            pd.concat([fams.assign(panel=n) for n in names]))


LSTM = {"model": "lstm-ptb", "dataset": "ptb", "dataset_substitute": None,
        "config": {"train_subset": 200_000}}


def _plot_cases(r) -> dict[str, Figure]:
    """Each plot function of topkscope.plots (the key's first word) on long titles and the
    shapes the builders leave out."""
    fnn3 = long_runs([r.fnn3])[0]
    m = fnn3.manifest
    main = long_runs([x for x in r.seeds if float(x.manifest["density"]) == 0.01])
    train, ev = draw.run_frames(main)
    lstm = {**main[0].manifest, **LSTM}
    battery = r.analysis.battery[r.analysis.battery["statistic"].isin(draw.BATTERY_EFFECT_SIZES)]
    three = pd.concat([ev, ev[ev["condition"].str.startswith("warmup=none")].assign(
        condition="warmup=custom[0.25,0.0625]; k_rule=ceil; empty_fallback=topk")])
    approx = train[train["sparsifier"] == "gaussiank-2019"]
    return {
        "gradient_histogram four steps": lambda: plots.gradient_histogram(
            fnn3.hist, fnn3.stats, manifest=m, max_panels=4),
        "sorted_magnitudes": lambda: plots.sorted_magnitudes(
            r.analysis.curves, manifest=m, densities=[0.001, 0.005, 0.01, 0.05]),
        "contraction_over_iterations": lambda: plots.contraction_over_iterations(
            fnn3.stats, manifest=m),
        "normality_over_training": lambda: plots.normality_over_training(
            fnn3.stats, battery, manifest=m),
        "normality_over_training without snapshots (hook run)": lambda:
            plots.normality_over_training(fnn3.stats, None, manifest=m),
        "qq_plot": lambda: plots.qq_plot(r.analysis.qq, manifest=m),
        "selected_over_k": lambda: plots.selected_over_k(fnn3.stats, manifest=m),
        "selection_time": lambda: plots.selection_time(
            r.bench, context={"device": "NVIDIA H100 80GB HBM3", "threads": "16"}),
        "selection_time every registered method and torch.topk": lambda: plots.selection_time(
            _every_method_bench(r.bench), context={"device": "cpu", "threads": "1"}),
        "convergence every registered method": lambda: plots.convergence(
            _as_methods(train[train["sparsifier"] == "dense"], available()),
            _as_methods(ev[ev["sparsifier"] == "dense"], available()),
            manifest=main[0].manifest),
        "convergence one condition": lambda: plots.convergence(
            train.drop(columns="condition"), ev.drop(columns="condition"),
            manifest=main[0].manifest),
        "convergence perplexity": lambda: plots.convergence(train, _perplexity(ev),
                                                            manifest=lstm),
        "convergence without evaluation (hook run)": lambda: plots.convergence(
            train, None, manifest=lstm),
        "accuracy_vs_elements three conditions": lambda: plots.accuracy_vs_elements(
            three, manifest=main[0].manifest),
        "density_sensitivity two methods": lambda: plots.density_sensitivity(
            _as_methods(draw.run_frames(long_runs(r.seeds))[1], ["dense", "topk", "gaussiank-2019"]),
            manifest=main[0].manifest),
        "selected_per_step four methods": lambda: plots.selected_per_step(
            _as_methods(approx, ["gaussiank-2019", "dgc", "redsync", "sidco"]),
            manifest=main[0].manifest),
        "gap_against_term perplexity, a run that never reaches the target": lambda:
            plots.gap_against_term(_gap_points(), manifest=lstm, contraction="classic"),
        "delta_curve three vectors at three steps": lambda: plots.delta_curve(
            *_delta_kinds(r.fnn3), manifest=m, max_panels=9),
        "delta_atlas seven models and vectors": lambda: plots.delta_atlas(*_atlas_panels(r.fnn3)),
        "model_vs_measured the GRACE release's committed rows": lambda: plots.model_vs_measured(
            _grace_rows(), "the step-time model against the GRACE release"),
        "published_runs eight imported jobs": lambda: plots.published_runs(
            pd.DataFrame({"run": [f"job 13026{i} topk rho=0.001 (8 GPUs, gpu04)"
                                  for i in range(8) for _ in range(3)],
                          "epoch": [0, 1, 2] * 8, "metric": [0.5, 0.7, 0.8] * 8}),
            pd.DataFrame({"run": [f"job 13026{i} topk rho=0.001 (8 GPUs, gpu04)" for i in range(8)],
                          "compute": 0.05, "selection": 0.19, "exchange": 0.04, "other": 0.01}),
            title="VGG-16 on CIFAR-10, published GPU runs of the Gaussian-k authors' code "
                  "(kljp/topk_results@4d5937c, one node of 8 GPUs, seeds not published)"),
    }


def _grace_rows() -> pd.DataFrame:
    """The committed model rows of the GRACE release that a figure shows (throughput)."""
    from topkscope.perf import grace

    _, model = grace.read_committed()
    return model[(model["mode"] == "throughput") & (model["reason"] == "")].reset_index(
        drop=True)


PLOT_CASES = ["gradient_histogram four steps", "sorted_magnitudes", "contraction_over_iterations",
              "normality_over_training", "normality_over_training without snapshots (hook run)",
              "qq_plot", "selected_over_k", "selection_time",
              "selection_time every registered method and torch.topk",
              "convergence every registered method", "convergence one condition",
              "convergence perplexity", "convergence without evaluation (hook run)",
              "accuracy_vs_elements three conditions", "density_sensitivity two methods",
              "selected_per_step four methods", "published_runs eight imported jobs",
              "delta_curve three vectors at three steps", "delta_atlas seven models and vectors",
              "model_vs_measured the GRACE release's committed rows",
              "gap_against_term perplexity, a run that never reaches the target"]


def test_the_cases_cover_every_plot_function():
    helpers = {"describe_run", "figure_style", "figure_title", "save_figure"}
    functions = set(plots.__all__) - helpers
    assert functions == {case.split()[0] for case in PLOT_CASES}
    planned = {figure for job in plan.JOBS for figure in job.figures}
    # the outer-loop experiments' figures: tests/test_outer_figures.py draws and checks them
    from topkscope.publish.outer_figures import OUTER_DRAWERS

    assert planned <= {builder.partition(":")[2] or builder for builder in BUILDERS} | set(
        OUTER_DRAWERS)


@pytest.mark.parametrize("case", PLOT_CASES)
def test_every_plot_function_keeps_long_text_readable(case, results):
    fig = _plot_cases(results)[case]()
    assert_text_fits(fig)
    assert_series_decodable(fig)


# --- the check itself -------------------------------------------------------------------------


def _one_panel():
    fig, axes = new_figure(1)
    ax = axes[0][0]
    ax.plot([0, 1], [0, 1])
    return fig, ax


def test_the_check_passes_a_plain_figure():
    fig, ax = _one_panel()
    ax.set_title("a title")
    ax.set_xlabel("x")
    fig.suptitle("a suptitle")
    assert text_problems(fig) == []


def test_the_check_catches_crowded_and_clipped_text():
    """What the old figures did: a suptitle wider than the canvas (cut at both sides), labels
    running into the next panel's, tick labels over each other, a legend over an annotation,
    text over text."""
    fig, ax = _one_panel()
    fig.suptitle("Convergence: dense vs sparsified SGD (mean over 3 seeds, band: lowest to "
                 "highest seed · conditions: warmup=paper | warmup=none)")
    problems = text_problems(fig)
    assert any("figure text 'Convergence" in p and "outside the canvas" in p for p in problems)

    fig, axes = new_figure(2)
    for ax in axes[0]:
        ax.set_xlabel("elements communicated so far (all workers, log scale, and some more)")
    assert any("axis label" in p and "overlaps" in p for p in text_problems(fig))

    fig, ax = _one_panel()
    ax.set_xticks(np.linspace(0, 1, 12), [f"tick label {i}" for i in range(12)])
    assert any("x tick label 'tick label 0' overlaps panel 0 ('') x tick label 'tick label 1'"
               in p for p in text_problems(fig))

    fig, ax = _one_panel()
    ax.plot([0, 1], [1, 0], label="a line with a long legend entry")
    ax.annotate("a note in the corner", (0.05, 0.95), xycoords="axes fraction", va="top")
    ax.legend(loc="upper left")
    problems = text_problems(fig)
    assert any("a note in the corner" in p and "legend frame" in p for p in problems)

    fig, ax = _one_panel()
    ax.annotate("first label", (0.5, 0.5))
    ax.annotate("second label", (0.5, 0.5))
    assert any("'first label' overlaps" in p and "'second label'" in p
               for p in text_problems(fig))
    with pytest.raises(AssertionError, match="1 text problem"):
        assert_text_fits(fig)


def test_fit_texts_wraps_what_would_be_cut_at_the_figure_width():
    """The fix for the first crowded case above: the same suptitle, fitted, is inside the
    canvas, broken at ' · ' and ' | ' first, with every word kept."""
    from topkscope.plots.style import figure_style, fit_texts

    title = ("Convergence: dense vs sparsified SGD (mean over 3 seeds, band: lowest to highest "
             "seed · conditions: warmup=paper | warmup=none)\nResNet-20 (width=0.25) on "
             "CIFAR-10 (substituted by MNIST, first 6,400 samples) · 16 workers · ρ = 0.001")
    with figure_style():
        fig, ax = _one_panel()
        text = fig.suptitle(title)
        fit_texts(fig)
    assert text_problems(fig) == []
    lines = text.get_text().split("\n")
    assert len(lines) > 2
    words = [w for w in title.split() if w not in ("·", "|")]
    assert [w for w in text.get_text().split() if w not in ("·", "|")] == words
    assert "conditions: warmup=paper | warmup=none)" in lines  # broken at ' · ' first
    assert lines[-1] == "16 workers · ρ = 0.001"


def test_wrap_breaks_at_the_best_separator_first():
    from topkscope.plots.titles import wrap

    def fits(line: str) -> bool:
        return len(line) <= 20

    assert wrap("alpha beta · gamma, delta · epsilon", fits) == "alpha beta\ngamma, delta\nepsilon"
    assert wrap("one; two three four five six seven", fits) == \
        "one;\ntwo three four five\nsix seven"
    assert wrap("a, b, c, d, e, f, g, h, i, j, k", fits) == "a, b, c, d, e, f, g,\nh, i, j, k"
    assert wrap("a_single_word_longer_than_twenty", fits) == "a_single_word_longer_than_twenty"
    assert wrap("short\nlines stay", fits) == "short\nlines stay"


def test_fit_texts_keeps_the_panels_height_and_moves_a_covering_legend_aside():
    """A wrapped suptitle makes the figure taller, not the panels shorter; a legend over an
    annotation, or wider than its panel, goes below the panel's x axis."""
    from topkscope.plots.style import figure_style, fit_texts

    def drawn(title: str, label: str):
        with figure_style():
            fig, ax = _one_panel()
            ax.plot([0, 1], [1, 0], label=label)
            ax.set_xlabel("x value")
            ax.annotate("a note in the corner", (0.05, 0.95), xycoords="axes fraction",
                        va="top")
            ax.legend(loc="upper left")
            fig.suptitle(title)
            fit_texts(fig)
        return fig, ax

    short_fig, short_ax = drawn("a title", "a line")
    long_fig, long_ax = drawn(" · ".join(["a long part of a title"] * 12), "a line")
    assert text_problems(short_fig) == [] and text_problems(long_fig) == []
    assert long_fig.get_figheight() > short_fig.get_figheight()
    assert long_ax.get_window_extent().height == pytest.approx(
        short_ax.get_window_extent().height, abs=2)
    for ax in (short_ax, long_ax):  # moved off the note, under the x label
        assert ax.get_legend().get_window_extent().y1 < ax.xaxis.label.get_window_extent().y0
    wide_fig, wide_ax = drawn("a title", "a legend entry nearly as wide as the figure " * 2)
    assert text_problems(wide_fig) == []
    assert wide_ax.get_legend().get_window_extent().y1 < wide_ax.get_window_extent().y0
