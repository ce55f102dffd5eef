"""Contraction of Top-k: exact ratios against float64 full sorts, the bounds, the convexity test."""

import math

import numpy as np
import pytest
import torch

from topkscope.analysis import contraction as C


def test_gaussian_ratio_matches_monte_carlo_at_1e7():
    u = np.random.default_rng(0).standard_normal(10_000_000)
    for rho in (0.001, 0.01, 0.1):
        k = int(rho * u.size)
        assert C.topk_ratio(u, k) == pytest.approx(C.gaussian_ratio(k, u.size), abs=1e-3)


def test_bounds_formulas():
    assert C.classic_bound(10, 1000) == pytest.approx(0.99)
    assert C.paper_bound(10, 1000) == pytest.approx(0.99**2)
    assert C.gaussian_ratio(0, 10) == 1.0 and C.gaussian_ratio(10, 10) == 0.0
    # the Gaussian value sits below the paper's bound at every density
    for rho in np.geomspace(1e-5, 0.9, 25):
        assert C.gaussian_ratio(int(rho * 1e6), 10**6) < C.paper_bound(int(rho * 1e6), 10**6)
    with pytest.raises(ValueError, match="outside the allowed range"):
        C.classic_bound(11, 10)


@pytest.mark.parametrize("d", [5_000, 2_500_000])  # full-sort path and candidate path
def test_analyze_matches_reference_for_many_densities(d):
    rng = np.random.default_rng(d)
    u = (rng.laplace(size=d) * rng.uniform(0.1, 2.0, size=d)).astype(np.float32)
    # above d/4 the candidate path gives way to a full sort, so the large case stops at 0.1
    densities = [0.0004, 0.001, 0.01, 0.1] + ([0.3, 1.0] if d < 10**6 else [])
    report = C.analyze(u, densities)
    ratios = report.ratios
    assert list(ratios.columns) == C.RATIO_COLUMNS
    sq = np.sort(u.astype(np.float64) ** 2)[::-1]
    tail = np.append(np.cumsum(sq[::-1])[::-1], 0.0)
    for _, row in ratios.iterrows():
        k = C.k_from_density(row["density"], d)
        assert row["k"] == k and row["d"] == d
        assert row["topk_ratio"] == pytest.approx(tail[k] / tail[0], rel=1e-9, abs=1e-15)
        assert row["classic_bound"] == C.classic_bound(k, d)
        assert row["below_classic"] == (row["topk_ratio"] < (1 - k / d) * (1 - 1e-9))
        assert row["below_paper"] == (row["topk_ratio"] <= (1 - k / d) ** 2 * (1 + 1e-9))
    # the curve: exact points are the true order statistics, the rest close to them
    curve = report.curve
    assert curve["rank"].iloc[0] == 1 and curve["rank"].iloc[-1] == d
    assert curve["magnitude"].is_monotonic_decreasing
    ref = np.sqrt(sq[curve["rank"].to_numpy() - 1])
    exact = curve["exact"].to_numpy()
    np.testing.assert_array_equal(curve["magnitude"].to_numpy()[exact], ref[exact])
    if d > 2_000_000:
        assert not exact.all() and exact[:20].all()
        inner = ~exact & (curve["rank"].to_numpy() < 0.99 * d)
        np.testing.assert_allclose(curve["magnitude"].to_numpy()[inner], ref[inner], rtol=0.02)


def test_flat_vector_fails_the_paper_bound_and_the_condition():
    u = np.random.default_rng(2).choice([-0.5, 0.5], size=50_000)  # all |u| equal
    report = C.analyze(u, [0.001, 0.01, 0.1])
    assert not report.ratios["below_paper"].any()
    assert not report.ratios["below_classic"].any()  # delta = 1 - k/d exactly
    np.testing.assert_allclose(report.ratios["topk_ratio"], 1 - report.ratios["k"] / 50_000)
    assert report.convexity["convexity_gap"] == pytest.approx(0.5, abs=0.01)
    assert not report.convexity["condition_holds"]
    assert not report.ratios["condition_holds"].any()


@pytest.mark.parametrize("family", ["normal", "laplace", "t3"])
def test_bell_shaped_vectors_satisfy_condition_and_bound(family):
    rng = np.random.default_rng(3)
    u = {"normal": rng.standard_normal, "laplace": lambda n: rng.laplace(size=n),
         "t3": lambda n: rng.standard_t(3, n)}[family](100_000)  # fmt: skip
    report = C.analyze(u, [0.001, 0.01, 0.1, 0.5])
    assert report.convexity["condition_holds"]
    assert report.convexity["convexity_gap"] < 0.005
    assert report.ratios["below_paper"].all() and report.ratios["condition_holds"].all()


def test_convexity_gap_bounds_the_excess_over_the_paper_bound():
    """delta <= (1 - k/d)^2 + gap (1 - (1 - k/d)^2) (+ O(1/d)) for any curve, convex or not."""
    rng = np.random.default_rng(4)
    d = 20_000
    vectors = [
        np.concatenate([rng.standard_normal(d // 2) * 0.1, np.ones(d // 2)]),  # a plateau
        np.concatenate([np.full(d // 100, 10.0), rng.standard_normal(d - d // 100)]),  # spikes
        rng.uniform(0.9, 1.0, d),  # almost flat
        np.abs(rng.standard_normal(d)) + 1.0,  # shifted away from 0
    ]
    densities = list(np.geomspace(1e-3, 0.9, 12))
    for u in vectors:
        report = C.analyze(u, densities, points=400)
        gap = report.convexity["convexity_gap"]
        paper = report.ratios["paper_bound"]
        excess = report.ratios["topk_ratio"] - paper
        assert (excess <= gap * (1 - paper) + 5.0 / d).all(), (gap, excess.max())
    # and the plateau is flagged as non-convex while its bound fails at small density
    plateau = C.analyze(vectors[0], [0.01])
    assert not plateau.convexity["condition_holds"] and not plateau.ratios["below_paper"].all()


@pytest.mark.parametrize("rho", [0.001, 0.01, 0.1])
def test_the_condition_tells_the_two_bounds_apart(rho):
    """Sorted squares a(t) = (1 - t)^p: delta = (1 - rho)^(p+1), between the paper's bound
    (p = 1) and the classic one (p = 0) for p in (0, 1). Where delta sits above the paper's
    bound by more than CONVEXITY_SHARE of the gap between the bounds, the condition fails; the
    convex curves (p >= 1) meet it. The tolerance, from the formula written out here."""
    d = 200_000
    t = (np.arange(d) + 0.5) / d
    k = C.k_from_density(rho, d)
    bounds_gap = (1 - k / d) - (1 - k / d) ** 2
    tol = C.CONVEXITY_SHARE * bounds_gap / (1 - (1 - k / d) ** 2) + 30.0 / d
    for p in (0.5, 0.7, 0.9, 0.95, 1.0, 1.5, 3.0):
        row = C.analyze(np.sqrt((1 - t) ** p), [rho]).ratios.iloc[0]
        position = (row["topk_ratio"] - row["paper_bound"]) / bounds_gap  # 0 paper, 1 classic
        assert row["convexity_tol"] == pytest.approx(tol)
        if p < 1:
            assert 0 < position < 1  # between the two bounds
            assert position > C.CONVEXITY_SHARE and not row["condition_holds"], (p, position)
        else:
            assert position <= 1e-9 and row["condition_holds"], (p, position)


def test_the_earlier_tolerance_is_restated_at_the_papers_density():
    """gap <= 0.01 + 30/d at rho = 0.001 (the earlier criterion) is the share 2% of the bounds'
    gap: share (1 - rho)/(2 - rho) = 0.009995."""
    d = 1_000_000
    assert C.convexity_tolerance(C.k_from_density(0.001, d), d) == pytest.approx(
        0.01 + 30.0 / d, abs=1e-5)


def test_magnitude_gap_is_at_least_as_strict_for_convex_magnitudes():
    u = np.linspace(1.0, 0.0, 10_001)[:-1]  # |u| linear: convex, squares convex too
    conv = C.analyze(u, [0.01]).convexity
    assert conv["magnitude_convexity_gap"] < 1e-3 and conv["convexity_gap"] < 1e-3
    assert conv["condition_holds"]


def test_nonfinite_values_are_excluded_and_counted():
    u = np.random.default_rng(5).standard_normal(10_000)
    dirty = np.concatenate([u, [np.nan, np.inf, -np.inf]])
    clean, rows = C.topk_ratios(u, [0.01]), C.topk_ratios(dirty, [0.01])
    assert rows["nonfinite"].iloc[0] == 3 and rows["d"].iloc[0] == 10_000
    assert rows["topk_ratio"].iloc[0] == clean["topk_ratio"].iloc[0]
    with pytest.raises(ValueError, match="non-finite"):
        C.topk_ratio(dirty, 10)  # the single-k function refuses instead


def test_zero_vector_says_the_ratio_is_undefined():
    rows = C.topk_ratios(np.zeros(1000, dtype=np.float32), [0.01, 0.1])
    assert rows["topk_ratio"].isna().all()
    assert (rows["note"] == "zero vector: ratio undefined").all()
    assert not rows["below_paper"].any()
    assert math.isnan(C.topk_ratio(np.zeros(10), 3))
    conv = C.convexity(C.sorted_magnitudes(np.zeros(100)))
    assert conv["note"].startswith("zero vector") and not conv["condition_holds"]
    empty = C.analyze(np.array([np.nan, np.nan]), [0.5])
    assert empty.ratios["note"].iloc[0] == "no finite values" and empty.curve.empty


def test_tiny_vectors_are_exact():
    u = np.array([3.0, -1.0, 2.0])
    rows = C.topk_ratios(u, [0.34, 0.67, 1.0])
    np.testing.assert_allclose(rows["topk_ratio"], [5 / 14, 1 / 14, 0.0])
    assert rows["k"].tolist() == [1, 2, 3]


def test_torch_input_equals_numpy_input():
    u = torch.randn(30_000)
    a, b = C.topk_ratios(u, [0.01, 0.1]), C.topk_ratios(u.numpy(), [0.01, 0.1])
    np.testing.assert_array_equal(a["topk_ratio"], b["topk_ratio"])
    assert C.topk_ratio(u, 300) == pytest.approx(a["topk_ratio"].iloc[0], rel=1e-12)


@pytest.mark.parametrize("densities", [[0.0], [1.5], ["x"], [], [-0.1]])
def test_bad_densities_are_rejected(densities):
    with pytest.raises(ValueError, match="densit"):
        C.topk_ratios(np.ones(10), densities)


def test_other_bad_arguments():
    with pytest.raises(ValueError, match="points"):
        C.sorted_magnitudes(np.ones(10), points=2)
    with pytest.raises(ValueError, match="share"):
        C.analyze(np.ones(10), [0.5], share=1.5)
    with pytest.raises(ValueError, match="density"):
        C.convexity(C.sorted_magnitudes(np.ones(10)), density=0.0)
    with pytest.raises(ValueError, match="max_n"):
        C.analyze(np.ones(10), [0.5], max_n=1)
