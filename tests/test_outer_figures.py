"""The outer-loop experiments' figures and tables, drawn from short runs of
experiments/outer-fnn3-mnist.yaml's trainings: what each figure plots is what the runs
recorded, the per-run table's columns are the runs' own numbers, and every text fits."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests._figure_series import assert_series_decodable
from tests._figure_text import assert_text_fits
from tests._outer_runs import EXPERIMENT, TRAININGS
from topkscope import plots
from topkscope.analysis.outer import metric_by_bytes, run_summary
from topkscope.analysis.runs import load
from topkscope.plots.pseudo_gradient import outer_contraction
from topkscope.publish.outer_figures import OUTER_DRAWERS
from topkscope.schema import GLOBAL

pytestmark = pytest.mark.train


@pytest.fixture(scope="module")
def runs(outer_runs):
    return [load(outer_runs / EXPERIMENT / name) for name in TRAININGS]


def test_the_summary_holds_each_runs_traffic_metric_and_u_medians(runs):
    table = run_summary(runs).set_index("path")
    for run in runs:
        row = table.loc[str(run.path)]
        assert row["bytes_total"] == run.train["bytes_sent"].sum()
        assert row["final_metric"] == run.eval.sort_values("step")["metric"].iloc[-1]
        u = run.stats[(run.stats["layer"] == GLOBAL) & (run.stats["kind"] == "u")]
        if not len(u):
            assert np.isnan(row["u_topk_ratio"])
            continue
        per_step = u[np.isclose(u["density"], run.manifest["density"])].groupby("step")
        assert row["u_topk_ratio"] == pytest.approx(per_step["topk_ratio"].median().median())
        assert row["u_recorded_steps"] == per_step.ngroups
    sparse = table[table["sparsifier"] == "chunk-topk"].iloc[0]
    assert (sparse["inner_steps"], sparse["error_decay"], sparse["quantize_bits"],
            sparse["chunk_size"]) == (15, 0.95, 2, 4096)
    assert sparse["u_chunk_topk_count_over_k"] == 1.0     # fixed count: k in all
    per_step = table[table["sparsifier"] == "topk"].iloc[0]
    assert per_step["inner_steps"] == 1 and pd.isna(per_step["outer_step"])


def test_bytes_are_the_cumulative_traffic_through_each_evaluation(runs):
    frame = metric_by_bytes(runs)
    for run in runs:
        mine = frame[frame["training"].str.startswith(run.manifest["sparsifier"] + ";")]
        sent = run.train.set_index("step")["bytes_sent"].cumsum()
        assert mine["bytes"].tolist() == sent.loc[mine["step"]].tolist()
    assert frame["training"].nunique() == 3


def test_the_contraction_figure_draws_the_recorded_medians(runs):
    run = runs[0]
    fig = outer_contraction(run.stats, manifest=run.manifest, density=run.manifest["density"])
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    u = run.stats[(run.stats["layer"] == GLOBAL) & (run.stats["kind"] == "u")]
    medians = u.groupby("step")["chunk_topk_quantized_ratio"].median()
    np.testing.assert_allclose(lines["chunk-wise Top-k, quantized"].get_ydata(), medians)
    np.testing.assert_allclose(lines["1 − k/d"].get_ydata(), 1 - round(
        run.manifest["density"] * run.manifest["num_parameters"]) / run.manifest[
        "num_parameters"])
    assert_text_fits(fig)
    assert_series_decodable(fig)


@pytest.mark.parametrize("name", sorted(OUTER_DRAWERS))
def test_every_outer_figure_is_drawn_with_its_text_readable(runs, name, tmp_path, monkeypatch):
    drawn = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, *a, **k: drawn.append(fig) or [])
    import topkscope.publish.figures as draw

    monkeypatch.setattr(draw, "plots", plots)
    entry = OUTER_DRAWERS[name](runs, tmp_path, "outer-fnn3-mnist")
    assert entry is not None and entry.name == f"outer-fnn3-mnist-{name}"
    assert len(drawn) == 1
    assert_text_fits(drawn[0])
    assert_series_decodable(drawn[0])
    assert "n/a" not in entry.caption


def test_no_figure_without_its_runs(runs, tmp_path):
    dense_only = [r for r in runs if r.manifest["sparsifier"] == "dense"]
    assert OUTER_DRAWERS["pseudo_gradient"](dense_only, tmp_path, "e") is None
    assert OUTER_DRAWERS["outer_contraction"](dense_only, tmp_path, "e") is None
    assert isinstance(metric_by_bytes([]), pd.DataFrame)


def test_the_claims_read_real_outer_runs(runs):
    """claims.outer on the recorder's and the trainings' own tables of short runs: the
    SparseLoCo-style run's recorded u (every exchange, rank and density) is the unit of the
    chunk-wise and quantized contraction claims, computed here by hand from its stats rows;
    the outer runs leave the in-training count claims (they send at exchanges only), and
    the trainings are compared by seed (one here: insufficient-data, said so)."""
    from topkscope import claims
    from topkscope.manifest import condition_of

    by_name = dict(zip(TRAININGS, runs))
    table = claims.build(runs)
    outer = by_name["sparseloco"]
    cond = f"{condition_of(outer.manifest)}; rho={outer.manifest['density']:g}"
    mine = table[(table["condition"] == cond)].set_index("claim")
    u = outer.stats[(outer.stats["layer"] == GLOBAL) & (outer.stats["kind"] == "u")]
    exact, chunk = u["topk_ratio"].to_numpy(), u["chunk_topk_ratio"].to_numpy()
    quantized = u["topk_quantized_ratio"].to_numpy()
    assert len(u) == 2 * 4 and np.isfinite(chunk).all() and np.isfinite(quantized).all()
    kept = 1 - exact
    row = mine.loc["chunk_contraction"]
    assert row["n_units"] == len(u)
    assert row["fraction"] == pytest.approx(np.mean(1 - chunk >= 0.9 * kept))
    row = mine.loc["quantization_error"]
    assert row["fraction"] == pytest.approx(np.mean(quantized - exact <= 0.1 * kept))
    assert row["diff_mean"] == pytest.approx(np.median((quantized - exact) / kept))
    assert not table["claim"].str.endswith("_count_in_training").any()
    pair = table.set_index("claim").loc["sparseloco_accuracy"]
    assert (pair["n_seeds"], pair["verdict"]) == (1, "insufficient-data")
    assert pair["bytes_ratio"] == pytest.approx(
        outer.train["bytes_sent"].sum() / by_name["diloco"].train["bytes_sent"].sum())
