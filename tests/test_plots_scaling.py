"""The scaling figures fit a page: at most three panels per row, one shared legend, linear
value axes unless the values span 10x, and no text outside the canvas or over other text
(measured with the renderer's extents of every title, label, tick label and annotation)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests._figure_series import assert_series_decodable
from tests._figure_text import assert_text_fits
from topkscope.perf import inputs, report
from topkscope.perf import model as pm
from topkscope.perf.networks import available
from topkscope.plots import scaling


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    """The paper's models on every preset, as `make reproduce-figures` predicts them."""
    selection = inputs.selection_table()
    frame, _ = report.scaling_table(pm.PAPER_MODELS, available(), (2, 4, 8, 16, 32, 64),
                                    selection=selection)
    return frame


def _check_layout(fig, max_columns: int = 3) -> None:
    """At most max_columns panels per row, one shared legend and no panel legend, and the
    text check every figure passes (tests/_figure_text.py)."""
    panels = [ax for ax in fig.axes if ax.get_visible()]
    rows: dict[float, int] = {}
    for ax in panels:
        y = round(ax.get_position().y0, 3)
        rows[y] = rows.get(y, 0) + 1
    assert max(rows.values()) <= max_columns, rows
    assert len(fig.legends) == 1 and not any(ax.get_legend() for ax in panels)
    assert_text_fits(fig)
    assert_series_decodable(fig)


def _linear_unless_wide(ax, values, axis: str) -> None:
    v = np.asarray([x for x in values if np.isfinite(x) and x > 0])
    scale = ax.get_xscale() if axis == "x" else ax.get_yscale()
    assert scale == ("log" if v.max() / v.min() >= 10 else "linear"), (ax.get_title(), scale)


def test_breakdown_fits_a_page_with_linear_stacked_bars(table):
    fig = scaling.breakdown(table)
    _check_layout(fig)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == len(pm.PAPER_MODELS)
    assert all(ax.get_xscale() == "linear" for ax in panels)  # stacked parts stay visible
    # the bars are the published clusters' networks, each bar's parts add up to t_step
    at = table[(table["workers"] == 16) & table["network"].isin(scaling.CLUSTER_NETWORKS)]
    ax = panels[0]
    sub = at[at["model"] == pm.PAPER_MODELS[0]]
    widths = np.array([p.get_width() for p in ax.patches]).reshape(3, -1).sum(axis=0)
    np.testing.assert_allclose(np.sort(widths), np.sort(sub["t_step"].to_numpy() * 1e3))
    assert [t.get_text() for t in fig.legends[0].get_texts()] == \
        ["compute", "selection", "communication"]


def test_efficiency_fits_a_page_and_is_linear_unless_wide(table):
    fig = scaling.efficiency(table)
    _check_layout(fig)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == len(pm.PAPER_MODELS)
    shown = table[table["network"].isin(scaling.CLUSTER_NETWORKS)]
    for ax, model in zip(panels, pm.PAPER_MODELS):
        _linear_unless_wide(ax, shown[shown["model"] == model]["efficiency"], "y")
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "Dense + WFBP" in labels and "100 Gb IB, fitted on published measurements" in labels
    assert len(labels) == table["method"].nunique() + len(scaling.CLUSTER_NETWORKS)


def test_crossover_marks_the_published_clusters_and_reads_at_a_glance(table):
    fig = scaling.crossover(table)
    _check_layout(fig, max_columns=1)
    ax = fig.axes[0]
    lines = sorted(round(line.get_xdata()[0], 6) for line in ax.lines)
    expect = sorted(round(8.0 / b / 1e9, 6) for b in table[table["network"].isin(
        scaling.CLUSTER_NETWORKS)].drop_duplicates("network")["beta"])
    assert lines == expect
    # each bar ends at its method's crossover bandwidth (finite ones)
    at = table[(table["workers"] == 16) & (table["network"] == "10gbe")]
    sparse = at[~at["method"].isin(pm.DENSE_METHODS)]
    ends = sorted(round(p.get_x() + p.get_width(), 6) for p in ax.patches)
    for value in sparse["crossover_gbit"]:
        if np.isfinite(value) and value > 0:
            assert round(value, 6) in ends
    assert [t.get_text() for t in ax.get_yticklabels()][0] == "FNN-3"


def test_the_layout_check_catches_crowded_figures():
    """The check above fails on what the old figures did: a row of more than three panels,
    text over text, text off the canvas."""
    from topkscope.plots.style import new_figure

    fig, axes = new_figure(4)
    fig.legend(["x"])
    with pytest.raises(AssertionError):
        _check_layout(fig)
    fig, axes = new_figure(1)
    fig.legend(["x"])
    axes[0][0].annotate("first label", (0.5, 0.5))
    axes[0][0].annotate("second label", (0.5, 0.5))
    with pytest.raises(AssertionError, match="overlaps"):
        _check_layout(fig)
    fig, axes = new_figure(1)
    fig.legend(["x"])
    fig.text(0.98, 0.5, "a title cut at the right edge")
    with pytest.raises(AssertionError, match="outside the canvas"):
        _check_layout(fig)


def test_breakeven_fits_a_page_and_draws_the_break_even_times(table):
    fig = scaling.breakeven(table)
    _check_layout(fig)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == len(pm.PAPER_MODELS)
    assert all(ax.get_xscale() == "linear" for ax in panels)  # negative values: never
    at = table[(table["workers"] == 16) & table["network"].isin(scaling.CLUSTER_NETWORKS)
               & ~table["method"].isin(pm.DENSE_METHODS)]
    sub = at[at["model"] == pm.PAPER_MODELS[0]]
    bars = sorted(p.get_width() for p in panels[0].patches)
    np.testing.assert_allclose(bars, np.sort(sub["breakeven_select_vs_dense"] * 1e3))
    marks = panels[0].lines[0].get_xdata()
    shown = sub[sub["method"] != "topk"]["breakeven_select_over_topk"] * 1e3
    np.testing.assert_allclose(np.sort(marks[np.isfinite(marks)]), np.sort(shown))
    labels = [t.get_text() for t in panels[0].get_yticklabels()]
    assert "Gaussian-k (2019) · 10 GbE, fitted on published measurements" in labels
    assert not any("measured)" in label for label in labels)


def test_breakeven_drops_the_rows_no_panel_has(table):
    """A (network, method) with no row in the table gets no empty bar row."""
    gone = (table["network"] == "ib100") & (table["method"] == "gaussiank-2019")
    fig = scaling.breakeven(table[~gone])
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert "Gaussian-k (2019) · 100 Gb IB, fitted on published measurements" not in labels
    assert "Gaussian-k (2019) · 10 GbE, fitted on published measurements" in labels
    assert len(labels) == len(set(labels)) == len(fig.axes[0].patches)


def test_time_to_target_fits_a_page_and_draws_the_mean_over_seeds(tmp_path):
    from tests.test_perf_time_to_accuracy import _gpu_selection, _run, _seeded
    from topkscope.perf.time_to_accuracy import time_to_accuracy_table

    _seeded(tmp_path)
    _run(tmp_path, "g-failed", "gaussiank-2019", 3, (0.5,), status="failed", ratio=2.0)
    _run(tmp_path, "topk3", "topk", 3, (0.8, 0.9, 0.95))
    frame, _ = time_to_accuracy_table(tmp_path, selection=_gpu_selection())
    fig = scaling.time_to_target(frame)
    _check_layout(fig)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 2  # one experiment, two networks
    title = " ".join(panels[0].get_title().split())  # wrapped to fit its panel
    assert title.startswith("conv") and title.endswith("10 GbE, fitted on published measurements")
    sub = frame[frame["network"] == "10gbe"]
    means = sub.groupby("method")["time_to_target_s"].mean()  # NaN (never) left out
    np.testing.assert_allclose(sorted(p.get_width() for p in panels[0].patches),
                               sorted(means))
    assert any(t.get_text() == "never on 1/4 seeds" for t in panels[0].texts)


def test_a_method_under_two_training_conditions_is_two_series_in_every_figure(table):
    """Counts measured per training condition give one row per (method, condition): each
    figure draws each as its own bar or line, named with its condition, never mixed."""
    g = table[table["method"] == "gaussiank-2019"]
    none = g.assign(condition="warmup=none; rho=0.001")
    paper = g.assign(condition="warmup=paper; rho=0.001", t_comm=g["t_comm"] * 2,
                     t_step=g["t_step"] + g["t_comm"])
    both = pd.concat([table[table["method"] != "gaussiank-2019"], none, paper],
                     ignore_index=True)
    names = ["Gaussian-k (2019) [warmup=none; rho=0.001]",
             "Gaussian-k (2019) [warmup=paper; rho=0.001]"]
    fig = scaling.breakdown(both)
    _check_layout(fig)
    ax = [a for a in fig.axes if a.get_visible()][0]
    at = both[(both["workers"] == 16) & both["network"].isin(scaling.CLUSTER_NETWORKS)
              & (both["model"] == pm.PAPER_MODELS[0])]
    widths = np.array([p.get_width() for p in ax.patches]).reshape(3, -1).sum(axis=0)
    np.testing.assert_allclose(np.sort(widths), np.sort(at["t_step"].to_numpy() * 1e3))
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert all(f"{n} · 10 GbE, fitted on published measurements" in labels for n in names)
    legend = [t.get_text() for t in scaling.efficiency(both).legends[0].get_texts()]
    assert all(n in legend for n in names)
    legend = [t.get_text() for t in scaling.crossover(both).legends[0].get_texts()]
    assert all(n in legend for n in names)
