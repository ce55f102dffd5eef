"""Tail statistics (topkscope.analysis.tails, the kernel's Hill index) against float64 loops,
on samples of known tail index, and against the `powerlaw` package (the reference CSN code)."""

import math
import time
import warnings

import numpy as np
import pytest

from topkscope import kernel
from topkscope.analysis import tails


def hill_by_loop(x: np.ndarray, m: int) -> float:
    """alpha = m / sum_{i<=m} ln(|x|_(i) / |x|_(m+1)), from a plain sorted float64 loop."""
    mags = sorted((abs(float(v)) for v in x if v != 0), reverse=True)
    total = 0.0
    for i in range(m):
        total += math.log(mags[i] / mags[m])
    return m / total


def signed_pareto(rng, alpha: float, n: int) -> np.ndarray:
    """|x| ~ Pareto(alpha) on [1, inf) (tail index alpha), random signs."""
    return (rng.pareto(alpha, n) + 1.0) * rng.choice([-1.0, 1.0], n)


# samples of known tail index (Pareto: alpha; Student-t(v): v) and two without a power-law tail
KNOWN = [("pareto", 1.5), ("pareto", 2.0), ("pareto", 3.0),
         ("student_t", 2.0), ("student_t", 3.0), ("student_t", 4.0), ("student_t", 5.0)]


def sample(family: str, alpha: float, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if family == "pareto":
        return signed_pareto(rng, alpha, n)
    return rng.standard_t(alpha, n)


@pytest.mark.parametrize("m", [10, 57, 400])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hill_equals_a_sorted_float64_loop(m, dtype):
    x = np.random.default_rng(m).standard_t(3, 5000).astype(dtype)
    x[:7] = 0.0  # zeros are removed and counted, never a log of 0
    row = tails.hill(x, m)
    assert row["zeros"] == 7 and row["n"] == 4993 and row["hill_m"] == m
    assert row["hill_alpha"] == pytest.approx(hill_by_loop(x, m), rel=1e-12)
    z = 1.959963984540054
    assert row["hill_alpha_low"] == pytest.approx(row["hill_alpha"] * (1 - z / math.sqrt(m)))
    assert row["hill_alpha_high"] == pytest.approx(row["hill_alpha"] * (1 + z / math.sqrt(m)))
    assert tails.hill(x)["hill_m"] == math.ceil(math.sqrt(4993))


def test_kernel_hill_over_blocks_is_each_blocks_own_loop():
    rng = np.random.default_rng(5)
    blocks = [np.sort(np.abs(rng.standard_t(2.5, n)))[::-1] for n in (30, 200, 11, 64)]
    starts = np.cumsum([0] + [b.size for b in blocks[:-1]])
    ks = np.array([[11, 30], [50, 200], [11, 3], [12, 64]])
    got = kernel.hill(np.concatenate(blocks), ks, starts=starts)
    for r, block in enumerate(blocks):
        for j, k in enumerate(ks[r]):
            want = hill_by_loop(block, k - 1) if k - 1 >= kernel.HILL_MIN_ORDER else math.nan
            np.testing.assert_allclose(got[r, j], want, rtol=1e-12)
    assert math.isnan(got[2, 1])  # k - 1 = 2 order statistics: too few to say anything
    flat = np.ones(40)
    assert math.isnan(kernel.hill(flat, [20])[0])  # all tie with the threshold: no spread
    assert math.isnan(kernel.hill(np.r_[np.ones(20), 0.0], [21])[0])  # threshold 0: no log


@pytest.mark.parametrize("family,alpha", KNOWN)
def test_known_tail_indices_are_recovered_and_preferred_to_an_exponential(family, alpha):
    row = tails.across_coordinates(sample(family, alpha, 200_000, seed=1))
    # Pareto is exactly a power law; Student-t only in its tail, so its estimates lean low
    tol = 0.08 if family == "pareto" else 0.15
    assert row["hill_alpha"] == pytest.approx(alpha, rel=tol)
    assert row["pl_tail_index"] == pytest.approx(alpha, rel=tol)
    assert row["pl_alpha"] == pytest.approx(row["pl_tail_index"] + 1)
    assert row["lr_exponential"] > 0  # the power law is the likelier tail
    if alpha <= 4:
        assert row["p_exponential"] < 0.01
    assert row["p_lognormal"] > 0.01 or row["lr_lognormal"] > 0  # never a clear lognormal


@pytest.mark.parametrize("family", ["gaussian", "laplace"])
def test_tails_without_a_power_law_are_told_apart(family):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(200_000) if family == "gaussian" else rng.laplace(size=200_000)
    row = tails.across_coordinates(x)
    assert row["lr_exponential"] < 0 and row["lr_lognormal"] < 0  # both alternatives likelier
    assert row["hill_alpha"] > 6  # far above every heavy tail above (at most 5)


def test_the_hill_interval_covers_a_pareto_index_at_its_level():
    rng = np.random.default_rng(7)
    covered = []
    for _ in range(300):
        row = tails.hill(rng.pareto(2.0, 20_000) + 1.0)
        covered.append(row["hill_alpha_low"] <= 2.0 <= row["hill_alpha_high"])
    assert 0.90 <= np.mean(covered) <= 0.99


def test_vuong_follows_its_definition():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=500), rng.normal(size=500) - 0.05
    diff = a - b
    ratio, p = tails.vuong(a, b)
    assert ratio == pytest.approx(diff.sum() / (diff.std() * math.sqrt(500)))
    assert p == pytest.approx(math.erfc(abs(diff.sum()) / math.sqrt(2 * 500 * diff.var())))


def test_a_given_xmin_is_the_closed_form_maximum_likelihood():
    x = sample("pareto", 2.0, 20_000, seed=4)
    row = tails.power_law(x, xmin=3.0)
    tail = np.abs(x)[np.abs(x) >= 3.0]
    assert row["pl_n_tail"] == tail.size and row["pl_xmin"] == 3.0
    assert row["pl_alpha"] == pytest.approx(1 + tail.size / np.log(tail / 3.0).sum(), rel=1e-12)
    assert row["pl_alpha_se"] == pytest.approx((row["pl_alpha"] - 1) / math.sqrt(tail.size))


@pytest.mark.parametrize("family,alpha", [("student_t", 3.0), ("student_t", 5.0),
                                          ("laplace", None)])
def test_the_powerlaw_package_agrees_at_its_own_xmin(family, alpha):
    """powerlaw (Alstott et al. 2014) searches every distinct y_min: O(n^2), so a small sample.
    At the y_min it chooses, the fitted exponent and both likelihood ratios are ours."""
    powerlaw = pytest.importorskip("powerlaw")
    rng = np.random.default_rng(3)
    x = np.abs(rng.laplace(size=1500) if alpha is None else rng.standard_t(alpha, 1500))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = powerlaw.Fit(x, verbose=False)
        lr_ln, p_ln = fit.distribution_compare("power_law", "lognormal", normalized_ratio=True)
        lr_ex, p_ex = fit.distribution_compare("power_law", "exponential",
                                               normalized_ratio=True)
    ours = tails.power_law(x, xmin=fit.xmin)
    assert ours["pl_alpha"] == pytest.approx(fit.power_law.alpha, rel=1e-12)
    assert ours["lr_exponential"] == pytest.approx(lr_ex, rel=1e-4)
    assert ours["p_exponential"] == pytest.approx(p_ex, rel=1e-3)
    assert ours["lr_lognormal"] == pytest.approx(lr_ln, rel=1e-3)
    assert ours["p_lognormal"] == pytest.approx(p_ln, rel=1e-2)


def test_small_or_degenerate_input_is_undefined_with_a_note():
    assert "needs at least" in tails.power_law(np.arange(1.0, 30.0))["note"]
    assert math.isnan(tails.power_law(np.ones(500))["pl_alpha"])
    row = tails.hill(np.arange(1.0, 9.0))
    assert math.isnan(row["hill_alpha"]) and "Hill index needs" in row["note"]
    with_nan = np.r_[np.random.default_rng(0).standard_t(3, 1000), np.nan, np.inf]
    assert tails.across_coordinates(with_nan)["nonfinite"] == 2
    with pytest.raises(ValueError, match="m"):
        tails.hill(np.ones(100), m=0)
    with pytest.raises(ValueError, match="level"):
        tails.hill(np.random.default_rng(0).standard_t(3, 1000), level=1.5)
    with pytest.raises(ValueError, match="xmin"):
        tails.power_law(np.ones(100), xmin=-1.0)


def test_per_coordinate_tails_over_time_tell_heavy_coordinates_from_gaussian_ones():
    rng = np.random.default_rng(11)
    steps = 2000
    heavy = signed_pareto(rng, 2.0, (steps, 3)) + 5.0  # a constant offset: deviations are taken
    light = rng.standard_normal((steps, 3)) * 1e-3
    table = tails.per_coordinate(np.concatenate([heavy, light], axis=1),
                                 coordinates=[10, 11, 12, 20, 21, 22])
    assert list(table["coordinate"]) == [10, 11, 12, 20, 21, 22]
    assert (table["steps"] == steps).all()
    first, last = table.iloc[:3], table.iloc[3:]
    assert (first["hill_alpha"].between(1.5, 2.6)).all()
    assert (first["lr_exponential"] > 0).all() and (last["lr_exponential"] < 0).all()
    assert (last["hill_alpha"] > first["hill_alpha"].max() * 2).all()
    with pytest.raises(ValueError, match="coordinates"):
        tails.per_coordinate(np.zeros(10))


@pytest.mark.slow
def test_a_vector_of_ten_million_is_fitted_in_time_linear_in_d():
    """The reason for our own CSN search (module docstring of tails): at d = 10^7 it recovers
    a Student-t(3) index, and its cost grows about linearly with d (powerlaw's grows as n^2)."""
    x = sample("student_t", 3.0, 10_000_000, seed=2).astype(np.float32)
    started = time.process_time()
    big = tails.across_coordinates(x)
    took_big = time.process_time() - started
    started = time.process_time()
    tails.across_coordinates(x[:1_000_000])
    took_small = time.process_time() - started
    assert big["hill_alpha"] == pytest.approx(3.0, rel=0.05)
    assert big["pl_tail_index"] == pytest.approx(3.0, rel=0.05)
    assert took_big < 30 * took_small  # 10x the data: about 10x the time, never 100x
