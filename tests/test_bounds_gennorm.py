"""gennorm_ratio: the Top-k contraction a fitted generalised normal (with exact zeros) predicts,
checked against exact Top-k on float64 samples and against the Gaussian closed form."""

import numpy as np
import pytest
from scipy import stats

from topkscope.bounds import gaussian_ratio, gennorm_ratio


def _topk_delta(u: np.ndarray, k: int) -> float:
    """The slow reference: sort |u| in float64 and take the energy left outside the top k."""
    e = np.sort(np.asarray(u, np.float64) ** 2)[::-1]
    return float(e[k:].sum() / e.sum())


@pytest.mark.parametrize("rho", [0.001, 0.01, 0.1])
def test_beta_two_is_the_gaussian_value(rho):
    d = 10**6
    k = int(rho * d)
    assert gennorm_ratio(k, d, 2.0) == pytest.approx(gaussian_ratio(k, d), rel=1e-10)


@pytest.mark.parametrize("beta", [0.3, 0.7, 1.0, 1.5, 3.0])
@pytest.mark.parametrize("zero_share", [0.0, 0.3])
def test_matches_monte_carlo_in_float64(beta, zero_share):
    rng = np.random.default_rng(7)
    d, rho = 2_000_000, 0.01
    u = stats.gennorm.rvs(beta, scale=0.37, size=d, random_state=rng)
    u[rng.random(d) < zero_share] = 0.0
    k = int(rho * d)
    # sampling error of the tail energy grows as beta falls (heavier tails): 3 % of 1 - delta
    expected = gennorm_ratio(k, d, beta, zero_share=zero_share)
    assert _topk_delta(u, k) == pytest.approx(expected, abs=0.03 * (1 - expected) + 1e-4)


def test_heavier_tails_contract_more():
    d, k = 10**6, 1000
    values = [gennorm_ratio(k, d, b) for b in (0.5, 1.0, 2.0, 4.0)]
    assert values == sorted(values)
    assert values[0] < 0.9 < gaussian_ratio(k, d) < values[-1]


def test_zeros_beyond_the_count_and_edge_cases():
    d = 1000
    assert gennorm_ratio(300, d, 1.0, zero_share=0.7) == 0.0   # k covers every non-zero entry
    assert gennorm_ratio(0, d, 1.0) == 1.0
    assert gennorm_ratio(d, d, 1.0) == 0.0
    # zeros carry no energy: keeping k of d with a share z of zeros is keeping k of (1 - z) d
    assert gennorm_ratio(10, d, 1.3, zero_share=0.5) == pytest.approx(gennorm_ratio(20, d, 1.3))


@pytest.mark.parametrize("kwargs, match", [
    ({"beta": 0.0}, "beta = 0.0"),
    ({"beta": float("nan")}, "beta = nan"),
    ({"beta": 1.0, "zero_share": 1.0}, "zero_share = 1.0"),
    ({"beta": 1.0, "zero_share": -0.1}, "zero_share = -0.1"),
])
def test_bad_arguments_name_the_value(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gennorm_ratio(10, 1000, **kwargs)
