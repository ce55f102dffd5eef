"""The atlas's tails claims (topkscope.claims.atlas): power-law tails across coordinates, per
coordinate over time, and the pseudo-gradient's Hill index over H. Each verdict follows from
vectors drawn from known laws (a Pareto-tailed Student-t, a Gaussian) or from Hill indices
whose paired interval is computed here by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from tests.test_analysis_claims import FLOOR_STEPS, RunLike, make_run
from topkscope import claims
from topkscope.analysis import tails
from topkscope.claims.atlas import MIN_STEPS_OVER_TIME
from topkscope.claims.outer import main_inner_steps


def test_tail_class_reads_the_sign_and_the_significance_of_both_ratios():
    row = {"lr_exponential": 3.0, "p_exponential": 0.01, "lr_lognormal": 0.5,
           "p_lognormal": 0.6, "pl_tail_index": 1.5}
    assert tails.tail_class(row) == tails.POWER_LAW
    # the lognormal beating it significantly: not a power law
    assert tails.tail_class({**row, "lr_lognormal": -2.5, "p_lognormal": 0.01}) == \
        tails.ALTERNATIVE
    assert tails.tail_class({**row, "lr_exponential": -3.0}) == tails.ALTERNATIVE
    # a power law winning with a steep tail (every moment up to the 4th finite) is not heavy
    assert tails.tail_class({**row, "pl_tail_index": 2.5}) == tails.POWER_LAW
    assert tails.tail_class({**row, "pl_tail_index": tails.HEAVY_INDEX + 1}) == tails.STEEP
    assert tails.tail_class({**row, "pl_tail_index": math.nan}) == tails.STEEP
    # no significant sign, or no fit at all
    assert tails.tail_class({**row, "p_exponential": 0.3}) == tails.UNDECIDED
    assert tails.tail_class({**row, "lr_exponential": math.nan}) == tails.UNDECIDED


def test_tail_class_on_samples_of_known_tail():
    rng = np.random.default_rng(0)
    assert tails.tail_class(tails.across_coordinates(rng.pareto(1.5, 50_000) + 1)) == \
        tails.POWER_LAW
    # a Gaussian's far tail: the search finds a steep local power law (index 5-12) the
    # ratios often cannot tell from the alternatives, but never a significant power law
    found = {tails.tail_class(tails.across_coordinates(rng.standard_normal(5_000)))
             for _ in range(8)}
    assert tails.POWER_LAW not in found and tails.ALTERNATIVE in found


def _row(table: pd.DataFrame, claim: str, model: str) -> pd.Series:
    rows = table[(table["claim_key"] == claim) & (table["model"] == model)]
    assert len(rows) == 1, rows[["claim", "condition"]]
    return rows.iloc[0]


@pytest.fixture(scope="module")
def snapshot_table() -> pd.DataFrame:
    long = {"steps": FLOOR_STEPS, "ranks": 1, "snapshot_steps": range(FLOOR_STEPS)}
    runs = [make_run("pareto", lambda r: r.standard_t(1.2, 20_000), **long),
            make_run("gauss", lambda r: r.standard_normal(20_000), seed=1, **long)]
    return claims.build(runs, max_snapshots=FLOOR_STEPS, predictions=False)


def test_power_law_across_coordinates_holds_for_a_heavy_tail_and_fails_for_a_gaussian(
        snapshot_table):
    heavy = _row(snapshot_table, "power_law_coordinates", "pareto")
    gauss = _row(snapshot_table, "power_law_coordinates", "gauss")
    assert heavy["verdict"] == "holds" and heavy["n_units"] == FLOOR_STEPS
    # the Gaussian's decided snapshots all went to the alternatives; too few of them decided
    # (the far tail is short) for a verdict on 30 blocks
    assert gauss["fraction"] == 0.0 and gauss["verdict"] != "holds"
    # the Hill index of a Student-t(1.2) is near 1.2; a Gaussian's is large
    assert 0.8 < heavy["diff_mean"] < 1.8 < gauss["diff_mean"]
    assert f"won (p < 0.1) in {FLOOR_STEPS}/{FLOOR_STEPS}" in heavy["evidence"]


def coordinate_run(model: str, draw, steps: int, coordinates: int = 40, seed: int = 0):
    """A run whose rank 0 recorded `coordinates` sampled coordinates of u at every step, each
    an independent draw over time, and the whole-model stats rows the units are grouped by."""
    run = make_run(model, lambda r: r.standard_normal(500), steps=steps, ranks=1,
                   snapshot_steps=(), seed=seed)
    rng = np.random.default_rng(seed + 100)
    values = draw(rng, (steps, coordinates))
    run.coords = pd.DataFrame({
        "step": np.repeat(np.arange(steps), coordinates),
        "rank": 0, "kind": "u", "coordinate": np.tile(np.arange(coordinates) * 7, steps),
        "layer": "__global__", "value": values.ravel()})
    return run


def test_power_law_over_time_counts_only_the_coordinates_whose_tests_decided():
    steps = 400
    runs = [coordinate_run("over-gauss", lambda r, shape: r.standard_normal(shape), steps),
            coordinate_run("over-pareto", lambda r, shape: r.standard_t(1.1, shape), steps,
                           seed=1),
            coordinate_run("short", lambda r, shape: r.standard_normal(shape),
                           MIN_STEPS_OVER_TIME - 1, seed=2)]
    table = claims.build(runs, max_snapshots=0, predictions=False)
    gauss = _row(table, "power_law_over_time", "over-gauss")
    # the reference: the same per-coordinate fits, classified here
    values = runs[0].coords.pivot_table(index="step", columns="coordinate", values="value")
    found = tails.per_coordinate(values.to_numpy(float))
    classes = np.array([tails.tail_class(r) for r in found.to_dict("records")])
    decided = classes != tails.UNDECIDED
    assert gauss["n_units"] == decided.sum()
    assert gauss["fraction"] == pytest.approx(np.mean(classes[decided] != tails.POWER_LAW))
    assert gauss["fraction"] == 1.0   # a Gaussian never beats the alternatives over time
    heavy = _row(table, "power_law_over_time", "over-pareto")
    assert heavy["fraction"] < 0.5
    short = _row(table, "power_law_over_time", "short")
    assert short["verdict"] == "insufficient-data"
    assert f"fewer than {MIN_STEPS_OVER_TIME} steps" in short["evidence"]


def pseudo_run(h: int | None, seed: int, alphas, status="complete") -> RunLike:
    """A run of the SparseLoCo-style training at H inner steps (None: TopK-SGD per step) whose
    recorder wrote whole-model Hill indices of g at the exchanges."""
    rows = [{"step": 15 * i + 14, "rank": rank, "layer": "__global__", "kind": kind,
             "density": 0.0078125, "hill_alpha": a if kind == "g" else 99.0}
            for i, a in enumerate(alphas) for rank in (0, 1) for kind in ("g", "u")]
    manifest = {"experiment": "outer-x", "model": "m", "dataset": "mnist",
                "dataset_substitute": None, "density": 0.0078125, "status": status,
                "seed": seed, "sparsifier": "chunk-topk" if h else "topk"}
    if h:
        manifest["outer"] = {"inner_steps": h, "step": "average", "lr": 1.0,
                             "error_decay": 0.95}
    return RunLike(manifest=manifest, stats=pd.DataFrame(rows))


def test_pseudo_gradient_tails_pair_each_h_with_h1_by_seed():
    h1 = {0: [3.0, 3.2, 3.1], 1: [2.5, 2.7, 2.6], 2: [3.3, 3.5, 3.4]}
    h15 = {0: [4.0, 4.4, 4.1], 1: [3.6, 3.9, 3.7], 2: [4.5, 4.2, 4.4]}
    h30 = {0: [3.0, 3.3, 3.0], 1: [2.4, 2.6, 2.9], 2: [3.2, 3.6, 3.5]}
    runs = [pseudo_run(h, s, a) for h, by in ((1, h1), (15, h15), (30, h30))
            for s, a in by.items()]
    runs += [pseudo_run(15, 0, [9.0], status="failed"), pseudo_run(None, 0, [1.7])]
    assert main_inner_steps(runs) == 15
    table = claims.build(runs, predictions=False)
    rows = table[table["claim_key"] == "heavy_tail_pseudo_gradient"].set_index(
        "outer_inner_steps")
    assert sorted(rows.index) == [15, 30]
    for h, by in ((15, h15), (30, h30)):
        diffs = np.array([np.median(by[s]) - np.median(h1[s]) for s in range(3)])
        half = sps.t.ppf(0.975, 2) * diffs.std(ddof=1) / np.sqrt(3)
        row = rows.loc[h]
        assert row["diff_mean"] == pytest.approx(diffs.mean())
        assert row["ci_low"] == pytest.approx(diffs.mean() - half)
        assert row["n_seeds"] == 3 and row["reference"] == "H = 1"
        expected = "holds" if diffs.mean() - half > 0 else (
            "fails" if diffs.mean() + half < 0 else "inconclusive")
        assert row["verdict"] == expected
    assert rows.loc[15, "verdict"] == "holds" and rows.loc[30, "verdict"] == "inconclusive"
    assert "raw gradient (TopK-SGD per step) 1.7" in rows.loc[15, "evidence"]
