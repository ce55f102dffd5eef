"""normality.battery against scipy on known distributions; calibration; degenerate input."""

import math
import warnings

import numpy as np
import pytest
import torch
from scipy import stats

from topkscope import kernel
from topkscope.analysis import normality

P_KEYS = ("shapiro_p", "dagostino_p", "anderson_p", "ks_p", "jarque_bera_p")


def _shape(x):
    sums = kernel.central_sums(x)
    return kernel.skew_kurtosis(sums.m2 / sums.n, sums.m3 / sums.n, sums.m4 / sums.n)


@pytest.mark.parametrize("n", [20, 137, 5000, 100_000])
@pytest.mark.parametrize("family", ["normal", "t3", "exponential"])
def test_moment_tests_match_scipy(n, family):
    rng = np.random.default_rng(n)
    x = {"normal": rng.standard_normal, "t3": lambda n: rng.standard_t(3, n),
         "exponential": lambda n: rng.exponential(size=n)}[family](n)  # fmt: skip
    g1, g2 = _shape(x)
    assert g1 == pytest.approx(stats.skew(x), rel=1e-9, abs=1e-12)
    assert g2 == pytest.approx(stats.kurtosis(x), rel=1e-9, abs=1e-12)
    k2, p = normality.dagostino(n, g1, g2)
    ref = stats.normaltest(x)
    assert k2 == pytest.approx(ref.statistic, rel=1e-9)
    assert p == pytest.approx(ref.pvalue, rel=1e-6, abs=1e-300)
    jb, pjb = normality.jarque_bera(n, g1, g2)
    ref = stats.jarque_bera(x)
    assert jb == pytest.approx(ref.statistic, rel=1e-9)
    assert pjb == pytest.approx(ref.pvalue, rel=1e-6, abs=1e-300)


def test_battery_uses_scipy_statistics_on_small_input():
    x = np.random.default_rng(3).standard_t(5, 3000)
    out = normality.battery(x)
    assert out["n"] == out["n_sub"] == out["n_shapiro"] == 3000
    ks = stats.kstest(x, "norm", args=(x.mean(), x.std(ddof=1)))
    assert out["ks_D"] == pytest.approx(ks.statistic, rel=1e-12)
    sw = stats.shapiro(x)
    assert out["shapiro_W"] == pytest.approx(sw.statistic, rel=1e-12)
    assert out["shapiro_p"] == pytest.approx(sw.pvalue, rel=1e-9)
    ad = stats.anderson(x, "norm", method="interpolate")
    assert out["anderson_A2"] == pytest.approx(ad.statistic, rel=1e-12)
    assert out["anderson_p"] == pytest.approx(ad.pvalue, rel=1e-12)
    # Q-Q correlation is the square root of the Shapiro-Francia statistic
    xs = np.sort(x)
    m = stats.norm.ppf((np.arange(1, 3001) - 0.375) / 3000.25)
    assert out["qq_r"] == pytest.approx(np.corrcoef(xs, m)[0, 1], rel=1e-12)
    assert out["std"] == pytest.approx(x.std(), rel=1e-12)
    assert out["zero_frac"] == 0.0
    sparse = np.where(np.arange(3000) % 4 == 0, 0.0, x)
    assert normality.battery(sparse)["zero_frac"] == 0.25


def test_false_rejection_rate_of_normal_samples_is_nominal():
    """Over many seeds each test rejects a true normal at 5% about 5% of the time."""
    seeds, alpha = 300, 0.05
    rejections = dict.fromkeys(P_KEYS, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for seed in range(seeds):
            x = np.random.default_rng(seed).normal(3.0, 2.0, size=800)
            out = normality.battery(x, seed=seed)
            for key in P_KEYS:
                rejections[key] += out[key] < alpha
    lo = stats.binom.ppf(1e-4, seeds, alpha)
    hi = stats.binom.isf(1e-4, seeds, alpha)
    for key, count in rejections.items():
        assert lo <= count <= hi, (key, count, (lo, hi))


def test_lilliefors_p_is_calibrated_across_levels():
    rng = np.random.default_rng(11)
    ps = np.array([normality.lilliefors(np.sort(rng.standard_normal(300)))[1] for _ in range(2000)])
    for level in (0.01, 0.05, 0.1, 0.2, 0.5):
        assert abs(np.mean(ps < level) - level) < 4 * math.sqrt(level * (1 - level) / 2000) + 0.01


@pytest.mark.parametrize("family", ["laplace", "t3"])
def test_heavy_tails_are_rejected_at_1e5(family):
    rng = np.random.default_rng(5)
    x = rng.laplace(size=100_000) if family == "laplace" else rng.standard_t(3, 100_000)
    out = normality.battery(x, seed=1)
    for key in P_KEYS:  # anderson_p is interpolated from tables that stop at 0.01
        assert out[key] <= 0.01, key
    assert out["excess_kurtosis"] > 2.0
    assert out["qq_r"] < 0.995
    assert out["ks_D"] > 0.02


def test_effect_sizes_of_a_large_normal_sample_are_small():
    x = np.random.default_rng(8).standard_normal(200_000).astype(np.float32)
    out = normality.battery(x, max_n=50_000)
    assert out["n"] == 200_000 and out["n_sub"] == 50_000 and out["n_shapiro"] == 5000
    assert abs(out["skew"]) < 0.02 and abs(out["excess_kurtosis"]) < 0.05
    assert out["ks_D"] < 0.01 and out["qq_r"] > 0.9995


def test_subsample_is_seeded():
    x = np.random.default_rng(1).standard_t(4, 50_000)
    a = normality.battery(x, max_n=2000, seed=7)
    b = normality.battery(x, max_n=2000, seed=7)
    c = normality.battery(x, max_n=2000, seed=8)
    assert a == b
    assert a["ks_D"] != c["ks_D"]
    assert a["skew"] == c["skew"]  # moments use every value


def test_nonfinite_values_are_excluded_and_counted():
    x = np.random.default_rng(2).standard_normal(1000)
    dirty = np.concatenate([x[:500], [np.nan, np.inf, -np.inf], x[500:]])
    clean, out = normality.battery(x), normality.battery(dirty)
    assert out["nonfinite"] == 3 and clean["nonfinite"] == 0
    for key in normality.KEYS:
        if key != "nonfinite":
            assert out[key] == clean[key] or (key == "note" and out[key] == ""), key


def test_torch_and_numpy_give_the_same_battery():
    x = torch.randn(4000, dtype=torch.float32)
    assert normality.battery(x) == normality.battery(x.numpy())
    half = normality.battery(x.to(torch.bfloat16))
    assert half["n"] == 4000 and math.isfinite(half["ks_D"])


@pytest.mark.parametrize(
    "x, note",
    [
        (np.arange(7.0), "fewer than 8 finite values (7)"),
        (np.full(100, 2.5), "constant vector (std = 0)"),
        (np.zeros(1000, dtype=np.float32), "all values zero"),
        (np.array([np.nan] * 20), "fewer than 8 finite values (0)"),
        (np.array([]), "fewer than 8 finite values (0)"),
    ],
)
def test_degenerate_input_is_reported_not_divided(x, note):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = normality.battery(x)
    assert out["note"] == note
    for key in ("skew", "excess_kurtosis", "ks_D", "ks_p", "dagostino_K2", "shapiro_W", "qq_r"):
        assert math.isnan(out[key]), key
    assert set(out) == set(normality.KEYS)


@pytest.mark.parametrize("max_n", [0, 7, 2.5, True, -3])
def test_bad_max_n_is_rejected(max_n):
    with pytest.raises(ValueError, match="max_n"):
        normality.battery(np.ones(10), max_n=max_n)


def test_qq_data_follow_the_diagonal_for_normal_and_bend_for_t3():
    rng = np.random.default_rng(4)
    normal = normality.qq(rng.normal(5, 3, 100_000), points=101)
    assert list(normal.columns) == ["p", "theoretical", "sample"] and len(normal) == 101
    central = normal[normal["theoretical"].abs() < 3]
    assert np.max(np.abs(central["sample"] - central["theoretical"])) < 0.05
    heavy = normality.qq(rng.standard_t(3, 100_000), points=101)
    tail = heavy["theoretical"] > 3.5
    assert np.all(heavy.loc[tail, "sample"] > heavy.loc[tail, "theoretical"])
    assert normality.qq(np.ones(50)).empty
    with pytest.raises(ValueError, match="points"):
        normality.qq(np.ones(50), points=2)
