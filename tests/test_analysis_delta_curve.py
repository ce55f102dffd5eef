"""delta(k) over k/d: the measured curve is the float64 one; each family's prediction is its
closed form (checked against numerical integration and the bounds module) and what a
Monte-Carlo sample of that family measures; the best family is the one the sample came from."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, optimize, stats

from topkscope import kernel
from topkscope.analysis import delta_curve as D
from topkscope.bounds import gaussian_ratio, gennorm_ratio

D_MC = 1_000_000  # Monte-Carlo sample size


def mc_gap(values: np.ndarray, family: str, loc: float, scale: float, shape: float
           ) -> np.ndarray:
    """ln(1 - predicted) - ln(1 - measured) over the grid, for a sample of the family."""
    mags, _ = D.ascending_magnitudes(values)
    curve = D.measured(mags, D.grid())
    pred, _ = D.family_delta(family, loc, scale, shape, curve["k"].to_numpy(), mags.size)
    return D.log_gap(pred, curve["delta"].to_numpy())


# --- the measured curve ------------------------------------------------------------------------


def test_grid_spans_1e_4_to_half_on_a_log_scale():
    g = D.grid(25)
    assert g[0] == pytest.approx(1e-4) and g[-1] == pytest.approx(0.5)
    assert np.allclose(np.diff(np.log(g)), np.log(5000) / 24)
    with pytest.raises(ValueError, match="points = 1 must be an integer >= 2"):
        D.grid(1)


def test_measured_delta_is_the_kernels_float64_ratio_at_every_k():
    rng = np.random.default_rng(0)
    u = (rng.standard_t(3, 50_000) * 1e-3).astype(np.float32)
    u[:7] = [np.nan, np.inf, -np.inf, 0.0, 0.0, np.nan, 1.0]
    mags, nonfinite = D.ascending_magnitudes(u)
    assert nonfinite == 4 and mags.size == u.size - 4 and np.all(np.diff(mags) >= 0)
    curve = D.measured(mags, D.grid())
    finite = u[np.isfinite(u)].astype(np.float64)
    assert curve["k"].is_unique and (curve["d"] == finite.size).all()
    for row in curve.itertuples():
        assert row.delta == pytest.approx(kernel.topk_ratio(finite, row.k), rel=1e-12)
    # a small d: grid points sharing a k are kept once, the first density that gives it
    small = D.measured(np.sort(np.abs(finite[:3000])), D.grid())
    assert small["k"].is_unique and small["k"].iloc[0] == 1 and len(small) < 25


# --- the predictions against closed forms and quadrature ----------------------------------------


KS = np.array([1, 10, 100, 1_000, 10_000, 100_000, 400_000])


def test_centred_predictions_are_the_bounds_closed_forms():
    normal, truncated = D.family_delta("normal", 0.0, 3.0, math.nan, KS, D_MC)
    assert not truncated
    assert np.allclose(normal, [gaussian_ratio(k, D_MC) for k in KS], rtol=0, atol=1e-14)
    for beta in (0.5, 1.0, 3.0):
        pred, _ = D.family_delta("gennorm", 0.0, 2.0, beta, KS, D_MC, zero_share=0.2)
        assert np.allclose(pred, [gennorm_ratio(k, D_MC, beta, 0.2) for k in KS], rtol=0,
                           atol=1e-14)
    laplace, _ = D.family_delta("laplace", 0.0, 2.0, math.nan, KS, D_MC)
    assert np.allclose(laplace, D.family_delta("gennorm", 0.0, 2.0, 1.0, KS, D_MC)[0],
                       rtol=0, atol=1e-14)
    # every non-zero entry sent: nothing left
    assert D.family_delta("normal", 0.0, 1.0, math.nan, [800], 1000, zero_share=0.2)[0][0] == 0


SCIPY = {"normal": lambda shape: stats.norm(0.7, 1.3),
         "laplace": lambda shape: stats.laplace(0.7, 1.3),
         "gennorm": lambda shape: stats.gennorm(shape, 0.7, 1.3),
         "student_t": lambda shape: stats.t(shape, 0.7, 1.3)}


@pytest.mark.parametrize("family, shape", [("normal", math.nan), ("laplace", math.nan),
                                           ("gennorm", 0.8), ("gennorm", 3.0),
                                           ("student_t", 4.0), ("student_t", 2.5)])
def test_predictions_with_a_location_equal_quadrature_of_the_density(family, shape):
    """A float64 reference: the threshold and the energy above it integrated numerically."""
    dist = SCIPY[family](shape)
    pred, _ = D.family_delta(family, 0.7, 1.3, shape, KS, D_MC)
    total = integrate.quad(lambda x: x * x * dist.pdf(x), -np.inf, np.inf, epsabs=0,
                           epsrel=1e-12, limit=500)[0]
    for k, got in zip(KS, pred):
        t = optimize.brentq(lambda t, q=k / D_MC: dist.sf(t) + dist.cdf(-t) - q, 0.0, 1e6,
                            xtol=1e-14)
        kept = sum(integrate.quad(lambda x: x * x * dist.pdf(x), a, b, epsabs=0,
                                  epsrel=1e-12, limit=500)[0]
                   for a, b in ((t, np.inf), (-np.inf, -t)))
        assert 1.0 - got == pytest.approx(kept / total, rel=1e-8), k


def test_an_infinite_variance_law_is_cut_where_one_value_of_d_is_expected():
    dist = stats.t(1.5)
    pred, truncated = D.family_delta("student_t", 0.0, 1.0, 1.5, KS[:-1], 100_000)
    assert truncated
    t_max = dist.isf(0.5 / 100_000)  # P(|X| > t_max) = 1/d
    total = 2 * integrate.quad(lambda x: x * x * dist.pdf(x), 0, t_max, limit=500)[0]
    for k, got in zip(KS[:-1], pred):
        t = dist.isf(k / 100_000 / 2)
        kept = 2 * integrate.quad(lambda x: x * x * dist.pdf(x), t, t_max, limit=500)[0]
        assert 1.0 - got == pytest.approx(kept / total, rel=1e-7), k


# --- the predictions against Monte-Carlo samples of each family ---------------------------------
# A sample's kept energy at k/d = 1e-4 (k = 100 of 1e6) scatters from sample to sample (for
# Student-t 3 by up to 0.35 in ln(1 - delta): its fourth moment is infinite), so each case
# compares the prediction with the median over a few samples. A wrong law is off by 0.3 or more.


@pytest.mark.parametrize("family, shape, draw, seeds, tol", [
    ("normal", math.nan, lambda rng, n: rng.normal(0.3, 2.0, n), 3, 0.02),
    ("laplace", math.nan, lambda rng, n: rng.laplace(0.3, 2.0, n), 3, 0.025),
    ("gennorm", 0.7, lambda rng, n: stats.gennorm.rvs(0.7, 0.3, 2.0, size=n, random_state=rng),
     5, 0.04),
    ("gennorm", 4.0, lambda rng, n: stats.gennorm.rvs(4.0, 0.3, 2.0, size=n, random_state=rng),
     3, 0.02),
    ("student_t", 5.0, lambda rng, n: 0.3 + 2.0 * rng.standard_t(5.0, n), 5, 0.03),
    ("student_t", 3.0, lambda rng, n: 0.3 + 2.0 * rng.standard_t(3.0, n), 5, 0.1),
    # infinite variance: the prediction cut where one value of d is expected
    ("student_t", 1.5, lambda rng, n: 0.3 + 2.0 * rng.standard_t(1.5, n), 5, 0.05),
])
def test_each_prediction_is_what_float64_samples_of_its_family_measure(family, shape, draw,
                                                                       seeds, tol):
    gaps = [mc_gap(draw(np.random.default_rng(seed), D_MC), family, 0.3, 2.0, shape)
            for seed in range(seeds)]
    median = np.median(gaps, axis=0)
    assert np.max(np.abs(median)) < tol, np.round(median, 4)
    assert np.sqrt(np.mean(median**2)) < tol / 2


# --- the power-law tail ------------------------------------------------------------------------


def pareto(alpha: float, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.pareto(alpha, n) + 1.0) * rng.choice([-1.0, 1.0], n)


def test_hill_recovers_a_pareto_index_and_needs_a_tail():
    mags, _ = D.ascending_magnitudes(pareto(3.0, D_MC, 0))
    tail = D.fit_power_law(mags, 0.1)
    # Hill's relative error is 1/sqrt(n) = 0.3% at n = 1e5
    assert tail.alpha == pytest.approx(3.0, rel=0.015)
    assert tail.n == 100_000 and tail.x_min == mags[D_MC - 100_001]
    assert tail.body == pytest.approx(float(np.sum(mags[: D_MC - 100_000].astype(float) ** 2)),
                                      rel=1e-12)
    assert D.fit_power_law(mags[:50], 0.1) is None  # 5 tail values: too few
    assert D.fit_power_law(np.zeros(1000), 0.1) is None
    with pytest.raises(ValueError, match="tail_share = 1.0 is outside the allowed range"):
        D.fit_power_law(mags, 1.0)


@pytest.mark.parametrize("alpha, tol", [(5.0, 0.04), (1.5, 0.2)])
def test_power_law_prediction_is_what_pareto_samples_measure(alpha, tol):
    """Pareto 5 and, with infinite variance and the cut prediction, Pareto 1.5 (its median
    sample keeps 13% less at k/d = 1e-4 than predicted: the cut is the typical level only)."""
    gaps = []
    for seed in range(5):
        mags, _ = D.ascending_magnitudes(pareto(alpha, D_MC, seed))
        curve = D.measured(mags, D.grid())
        tail = D.fit_power_law(mags)
        assert tail.truncated == (alpha <= 2)
        gaps.append(D.log_gap(D.power_law_delta(tail, mags, curve["k"].to_numpy()),
                              curve["delta"].to_numpy()))
    assert np.max(np.abs(np.median(gaps, axis=0))) < tol


def test_power_law_beyond_its_tail_uses_the_measured_body():
    mags, _ = D.ascending_magnitudes(pareto(3.0, 10_000, 0))
    tail = D.fit_power_law(mags, 0.1)
    k = np.array([2_000, 5_000])
    pred = D.power_law_delta(tail, mags, k)
    total = tail.energy_above(1.0) + tail.body
    rest = np.array([np.sum(mags[: 10_000 - kk].astype(float) ** 2) for kk in k])
    assert np.allclose(pred, rest / total, rtol=1e-12)


# --- the comparison: errors and the best family --------------------------------------------------


@pytest.mark.parametrize("name, draw, winners, error", [
    ("gaussian", lambda rng, n: rng.normal(0.01, 1.0, n), {"normal"}, 0.05),
    ("laplace", lambda rng, n: rng.laplace(0.0, 1.0, n), {"laplace"}, 0.05),
    ("student_t3", lambda rng, n: rng.standard_t(3.0, n), {"student_t", "power_law"}, 0.15),
    ("gennorm0.6", lambda rng, n: stats.gennorm.rvs(0.6, size=n, random_state=rng),
     {"gennorm"}, 0.05),
])
def test_the_family_a_sample_came_from_predicts_its_delta_best(name, draw, winners, error):
    u = draw(np.random.default_rng(5), 300_000).astype(np.float32)
    result = D.compare(u)
    fam = result.families.set_index("family")
    assert list(result.families.columns) == D.FAMILY_COLUMNS
    assert list(result.curve.columns) == D.CURVE_COLUMNS
    assert set(fam.index) == set(D.FAMILIES)
    (best,) = fam.index[fam["best"]]
    assert best in winners, fam["error"].round(4).to_dict()
    assert fam.loc[best, "error"] < error
    assert fam["error"].drop(best).min() > 2 * fam.loc[best, "error"] or \
        set(fam["error"].drop(best).nsmallest(1).index) <= {"gennorm", "student_t"}
    # the errors are the RMS and max of the rows' gaps; error_tail over rho <= 0.1 only
    rows = result.curve[result.curve["family"] == best]
    gap = np.log1p(-rows["delta_predicted"]) - np.log1p(-rows["delta"])
    assert fam.loc[best, "error"] == pytest.approx(float(np.sqrt(np.mean(gap**2))), rel=1e-12)
    assert fam.loc[best, "error_max"] == pytest.approx(float(np.max(np.abs(gap))), rel=1e-12)
    tail = gap[rows["density"] <= D.DEFAULT_TAIL_SHARE]
    assert fam.loc[best, "error_tail"] == pytest.approx(float(np.sqrt(np.mean(tail**2))))
    assert sorted(fam["error_rank"]) == [1, 2, 3, 4, 5]


def test_compare_reuses_a_given_fits_table_and_counts_zeros_and_nonfinite():
    from topkscope.analysis import fits

    rng = np.random.default_rng(2)
    u = rng.normal(0.0, 1.0, 100_000)
    u[:30_000] = 0.0  # a share of exact zeros, as unused embedding rows give
    u[30_000:30_003] = np.nan
    table = fits.compare(u, max_n=20_000, seed=4)
    result = D.compare(u, fits_table=table)
    normal = result.families.set_index("family").loc["normal"]
    assert normal["n"] == 20_000 and normal["nonfinite"] == 3
    assert normal["zero_share"] == pytest.approx(30_000 / (100_000 - 3))
    assert normal["error"] < 0.03  # the zeros are predicted, not fitted
    assert D.compare(u, max_n=20_000, seed=4).families.equals(result.families)


def test_degenerate_vectors_give_empty_frames_with_their_columns():
    for u in (np.zeros(100), np.ones(5), np.array([np.nan] * 20)):
        result = D.compare(u)
        assert result.curve.empty and list(result.curve.columns) == D.CURVE_COLUMNS
        assert result.families.empty and list(result.families.columns) == D.FAMILY_COLUMNS


def test_a_family_within_the_tie_of_the_smallest_error_loses_to_a_simpler_one():
    def table(**errors):
        return pd.DataFrame({"family": list(errors), "error": list(errors.values())})

    assert D.best_family(table(normal=0.015, gennorm=0.01, student_t=0.012)) == "normal"
    assert D.best_family(table(normal=0.03, gennorm=0.01, student_t=0.012)) == "gennorm"
    assert D.best_family(table(laplace=0.5, power_law=0.2)) == "power_law"
    assert D.best_family(table(normal=math.nan)) is None
