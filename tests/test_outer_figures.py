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
    SparseLoCo-style run's recorded u (every exchange and rank; a row per density and phase)
    is the unit of the chunk-wise and quantized contraction claims (quantized on the chunk-wise
    set sent, and on the global set apart), computed here by hand from its stats rows;
    the outer runs leave the in-training count claims (they send at exchanges only), and
    the trainings are compared by seed (one here: insufficient-data, said so)."""
    from topkscope import claims
    from topkscope.analysis.units import unit_conditions

    by_name = dict(zip(TRAININGS, runs))
    table = claims.build(runs)
    outer = by_name["sparseloco"]
    u = outer.stats[(outer.stats["layer"] == GLOBAL) & (outer.stats["kind"] == "u")]
    assert len(u) == 2 * 4 and u["chunk_topk_ratio"].notna().all()
    assert u["chunk_topk_quantized_ratio"].notna().all()
    # a row per recorder density and phase (the first exchanges apart from the later ones)
    phase = np.array([c.phase for c in unit_conditions(outer, u["step"].tolist())])
    mine = table[(table["sparsifier"] == outer.manifest["sparsifier"])
                 & (table["experiment"] == outer.manifest["experiment"])]
    for claim in ("chunk_contraction", "quantization_error", "quantization_error_global"):
        rows = mine[mine["claim"] == claim]
        assert rows["n_units"].sum() == len(u), claim
        for row in rows.itertuples(index=False):
            at = u[np.isclose(u["density"], row.recorder_density) & (phase == row.phase)]
            assert row.n_units == len(at) > 0, (claim, row.phase)
            exact, chunk = at["topk_ratio"].to_numpy(), at["chunk_topk_ratio"].to_numpy()
            if claim == "chunk_contraction":
                assert row.fraction == pytest.approx(np.mean(1 - chunk >= 0.9 * (1 - exact)))
                continue
            # the set training sends (chunk-wise), or the global one named apart
            sent, q = ((chunk, at["chunk_topk_quantized_ratio"].to_numpy())
                       if claim == "quantization_error" else
                       (exact, at["topk_quantized_ratio"].to_numpy()))
            assert row.fraction == pytest.approx(np.mean(q - sent <= 0.1 * (1 - sent)))
            assert row.diff_mean == pytest.approx(np.median((q - sent) / (1 - sent)))
    assert not table["claim"].str.endswith("_count_in_training").any()
    pair = table.set_index("claim").loc["sparseloco_accuracy"]
    assert (pair["n_seeds"], pair["verdict"]) == (1, "insufficient-data")
    assert pair["bytes_ratio"] == pytest.approx(
        outer.train["bytes_sent"].sum() / by_name["diloco"].train["bytes_sent"].sum())
