"""contraction_explains_convergence on synthetic run folders where the answer is known: a
contraction whose bound term orders the convergence gaps perfectly, and the same gaps shuffled
against it; where each method's measured contraction comes from."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tests.test_analysis_claims import RunLike
from topkscope import claims
from topkscope.analysis import contraction_convergence as cc
from topkscope.bounds import classic_bound
from topkscope.claims import explanation
from topkscope.schema import GLOBAL

D = 100_000
METHODS = ("topk", "gaussiank-2019", "dgc", "redsync", "sidco", "tail-k")


def run(method, seed, final, delta=None, density=0.001, stats=None, schedule=None,
        steps=200) -> RunLike:
    """One seed's run: eval every 20 steps rising linearly to `final`; a train column
    `contraction` = delta at every step when given."""
    manifest = {"experiment": "conv", "model": "m", "dataset": "mnist",
                "dataset_substitute": None, "sparsifier": method, "density": density,
                "status": "complete", "seed": seed, "density_schedule": schedule,
                "steps_per_epoch": 20}
    eval_steps = np.arange(19, steps, 20)
    ev = pd.DataFrame({"step": eval_steps, "epoch": eval_steps // 20, "split": "test",
                       "loss": 1.0, "metric": np.linspace(0.5, final, eval_steps.size),
                       "metric_name": "accuracy"})
    tr = pd.DataFrame({"step": np.arange(steps), "epoch": np.arange(steps) // 20,
                       "selected": 100.0})
    if delta is not None:
        tr["contraction"] = delta
    return RunLike(manifest=manifest, eval=ev, train=tr,
                   stats=stats if stats is not None else pd.DataFrame())


def experiment(deltas, finals, seeds=(0, 1, 2), noise=0.002):
    rng = np.random.default_rng(1)
    runs = [run("dense", s, 0.97) for s in seeds]
    for method, delta, final in zip(METHODS, deltas, finals):
        runs += [run(method, s, final + noise * rng.standard_normal(),
                     delta + 1e-4 * rng.standard_normal()) for s in seeds]
    return runs


def row_of(runs, gap="final"):
    table = claims.build(runs)
    rows = table[(table["claim"] == explanation.CLAIM) & (table["condition"] == f"gap={gap}")]
    assert len(rows) == 1
    return rows.iloc[0]


DELTAS = (0.90, 0.92, 0.94, 0.96, 0.975, 0.99)
ORDERED = (0.96, 0.95, 0.93, 0.91, 0.88, 0.84)   # a larger delta trains worse


def test_a_term_that_orders_the_gaps_holds_with_a_high_rho():
    row = row_of(experiment(DELTAS, ORDERED))
    assert row["verdict"] == "holds" and row["sparsifier"] == "measured"
    assert row["section"] == explanation.SECTION == claims.section_of(explanation.CLAIM, "measured")
    assert row["diff_mean"] == pytest.approx(1.0) and row["ci_low"] > 0.5
    assert row["n_units"] == len(METHODS) and row["n_seeds"] == 3
    # at one density 1 - k/d, (1 - k/d)^2 and the Gaussian value are the same for every method
    assert "undefined (terms tie or too few points): classic, paper, gaussian" in row["cause"]
    steps = row_of(experiment(DELTAS, ORDERED), "steps")
    assert steps["verdict"] in ("holds", "inconclusive")   # steps to target tie on a coarse grid


def test_the_same_gaps_shuffled_against_the_term_are_not_explained():
    shuffled = (ORDERED[3], ORDERED[0], ORDERED[5], ORDERED[1], ORDERED[4], ORDERED[2])
    row = row_of(experiment(DELTAS, shuffled))
    assert row["verdict"] == "inconclusive" and row["sparsifier"] == "all"
    frame, seeded = cc.points(experiment(DELTAS, shuffled))
    table = cc.correlations(frame, seeded, n_boot=200)
    measured = table[(table["contraction"] == "measured") & (table["gap"] == "final")].iloc[0]
    # the seeds agree (little noise), so the interval is narrow: the permutation p says that a
    # rho this small is what a random ordering of six points gives
    assert abs(measured["rho"]) < 0.5 and measured["p"] > 0.3
    ordered = cc.correlations(*cc.points(experiment(DELTAS, ORDERED)), n_boot=200)
    assert ordered.query("contraction == 'measured' and gap == 'final'")["p"].iloc[0] == \
        pytest.approx(1 / 720)


def test_too_few_seeds_or_points_are_insufficient_data():
    assert row_of(experiment(DELTAS, ORDERED, seeds=(0, 1)))["verdict"] == "insufficient-data"
    assert row_of(experiment(DELTAS[:3], ORDERED[:3]))["verdict"] == "insufficient-data"


def test_points_gap_is_behind_the_same_seeds_dense_and_the_term_is_the_bounds():
    frame, _ = cc.points(experiment(DELTAS, ORDERED, noise=0.0))
    top = frame.set_index("method").loc["topk"]
    assert top["gap_final"] == pytest.approx(100 * (0.97 - 0.96))   # points behind Dense
    q = 1 - top["delta_measured"]
    assert top["term_measured"] == pytest.approx((1 - q) / q ** 2)
    assert top["source"] == "own (train contraction)"


def test_compression_term_grows_as_the_contraction_weakens():
    q = np.array([1.0, 0.5, 0.1, 0.01])
    np.testing.assert_allclose(cc.compression_term(q), [0.0, 2.0, 90.0, 9900.0])
    assert math.isnan(float(cc.compression_term(0.0)))


def u_stats(steps, columns: dict) -> pd.DataFrame:
    return pd.DataFrame([{"step": s, "rank": r, "layer": GLOBAL, "kind": "u", "density": 0.001,
                          "numel": D, **{c: v(s) for c, v in columns.items()}}
                         for s in steps for r in (0, 1)])


def test_measured_delta_sources_and_the_target_phase():
    # Top-k's own recorded delta, averaged over the steps after a two-epoch warm-up only
    stats = u_stats(range(0, 200, 10), {"topk_ratio": lambda s: 0.5 if s < 40 else 0.9,
                                        "gaussiank_2019_ratio": lambda s: 0.95})
    topk = run("topk", 0, 0.9, stats=stats, schedule=[0.25, 0.0625])
    assert cc.measured_delta(topk, "topk", None) == (pytest.approx(0.9),
                                                     "own (recorder topk_ratio)")
    # a method without a recorder: its selector's ratio on the same seed's Top-k u
    gk = run("gaussiank-2019", 0, 0.9, schedule=[0.25, 0.0625])
    delta, source = cc.measured_delta(gk, "gaussiank-2019", topk)
    assert delta == pytest.approx(0.95) and "Top-k's u" in source
    assert cc.measured_delta(gk, "dgc", topk)[1] == "not recorded"
    randk = run("randk", 0, 0.9, stats=u_stats([0], {}))
    assert cc.measured_delta(randk, "randk", None) == (classic_bound(100, D),
                                                        "expectation 1 - k/d")


def test_spearman_is_scipys_with_ties_and_infinite_gaps_last():
    from scipy import stats

    rng = np.random.default_rng(4)
    term = rng.integers(0, 4, 9).astype(float)
    gap = rng.standard_normal(9)
    assert cc.spearman(term, gap) == pytest.approx(stats.spearmanr(term, gap).statistic)
    gap[2] = np.inf
    assert cc.spearman(term, gap) == pytest.approx(
        stats.spearmanr(term, np.where(np.isinf(gap), 1e9, gap)).statistic)
    assert math.isnan(cc.spearman(np.ones(9), gap))   # a term that ties everywhere


def test_the_figure_puts_each_point_at_its_term_and_gap(tmp_path):
    from topkscope import plots
    from topkscope.publish.figures import contraction_gap_figure

    runs = experiment(DELTAS, ORDERED)
    frame, _ = cc.points(runs)
    fig = plots.gap_against_term(frame)
    final_panel = fig.axes[0]
    drawn = np.vstack([c.get_offsets() for c in final_panel.collections])
    expected = frame[["term_measured", "gap_final"]].to_numpy(float)
    np.testing.assert_allclose(np.sort(drawn, axis=0), np.sort(expected, axis=0), rtol=1e-12)
    assert final_panel.get_xscale() == "log"
    entry = contraction_gap_figure(runs, tmp_path, "convergence-m")
    assert entry.name == "convergence-m-contraction_gap" and all(p.exists() for p in entry.files)
    table = cc.correlations(*cc.points(runs), n_boot=cc.N_BOOT)
    best = table[(table["gap"] == "final") & (table["contraction"] == "measured")].iloc[0]
    assert f"final gap: measured ρ {best.rho:.2f} [{best.ci_low:.2f}, {best.ci_high:.2f}]" \
        in entry.caption
    # the caption gives the numbers; the verdict is the claims row's, named, not decided here
    assert "contraction_explains_convergence row" in entry.caption
    assert "holds" not in entry.caption and "inconclusive" not in entry.caption
    assert contraction_gap_figure([r for r in runs if r.manifest["sparsifier"] != "dense"],
                                  tmp_path, "x") is None
    with pytest.raises(ValueError, match="contraction = 'nope'"):
        plots.gap_against_term(frame, contraction="nope")


def test_every_method_of_a_density_shares_one_k_over_d():
    """A run without a recorder knows d only as k / density (train k): the bounds must still
    tie across methods, or rounding would make up an ordering."""
    runs = experiment(DELTAS, ORDERED)
    for r in runs:
        r.train["k"] = 100
        r.train["density"] = 0.001
    topk = [r for r in runs if r.manifest["sparsifier"] == "topk"]
    for r in topk:   # the recorder's numel: a d that k / density does not give back exactly
        r.stats = u_stats([0], {"topk_ratio": lambda s: 0.9}).assign(numel=100_301)
    frame, _ = cc.points(runs)
    assert frame["delta_classic"].nunique() == 1 and frame["d"].unique().tolist() == [100_301]
    assert frame["delta_classic"].iloc[0] == classic_bound(100, 100_301)
