"""Approximate methods: selected count / k on four distributions, d = 1e6, rho in {0.001, 0.01}.

Measured with the seeds below (count / k; gaussiank is always exactly 1; dgc and dgc-sampled
with seed 0; sidco's first call runs one stage, its last is the 40th call on the same vector):

    distribution  rho    gaussiank-2019  dgc   dgc-sampled  redsync  sidco-fixed  sidco 1st/40th
    normal        0.001  0.99            1.00  0.87         1.59     0.91         6.88 / 6.88
    normal        0.01   0.99            0.88  0.97         1.77     0.93         1.62 / 1.62
    laplace       0.001  0.96            1.00  0.79         1.13     0.97         0.99 / 0.99
    laplace       0.01   6.50            0.87  0.99         1.33     0.99         1.00 / 1.00
    student_t3    0.001  1.05            0.96  0.88         1.11     0.89         1.48 / 1.48
    student_t3    0.01   0.69            0.88  1.05         1.62     0.98         0.84 / 0.84
    mixture       0.001  1.44            1.00  1.11         1.20     0.96         0.25 / 0.96
    mixture       0.01   0.56            0.94  0.99         1.45     0.81         2.48 / 2.48

The published Gaussian-k leaves its own band [2k/3, 4k/3] on the two-scale mixture at
both densities (1.44 k and 0.56 k) and on Laplace at rho = 0.01, where the x1.5 / x0.5
steps oscillate (2.6 k -> 0.42 k -> 6.5 k) and the third set is returned as is. That is
the published behaviour, asserted below rather than hidden.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tests._topk_reference import exact_topk, published_gaussiank
from tests.test_sparsify_cases import DISTRIBUTIONS
from topkscope.sparsify import get_sparsifier

D = 1_000_000
RHOS = (0.001, 0.01)


@pytest.fixture(scope="module")
def vectors() -> dict[str, torch.Tensor]:
    """The four test distributions, generated once per module."""
    return {name: make(D, seed=1234 + i) for i, (name, make) in enumerate(DISTRIBUTIONS.items())}


def _count_ratio(name: str, u: torch.Tensor, k: int, **params) -> float:
    idx = get_sparsifier(name, **params).select(u, k)
    assert idx.unique().numel() == idx.numel() > 0
    return idx.numel() / k


def _is_threshold_set(u: torch.Tensor, idx: torch.Tensor) -> bool:
    """Every selected |u| is >= every unselected |u| (a magnitude threshold set)."""
    mag = u.abs()
    chosen = torch.zeros(u.numel(), dtype=torch.bool)
    chosen[idx] = True
    return bool(mag[chosen].min() >= mag[~chosen].max()) if (~chosen).any() else True


@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("dist", sorted(DISTRIBUTIONS))
def test_gaussiank_is_exactly_k_and_exact_on_every_distribution(vectors, dist, rho):
    u = vectors[dist]
    k = round(rho * D)
    idx = get_sparsifier("gaussiank").select(u, k)
    assert idx.numel() == k
    np.testing.assert_array_equal(np.sort(idx.numpy()), np.sort(exact_topk(u, k).numpy()))


@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("dist", sorted(DISTRIBUTIONS))
def test_gaussiank_2019_follows_the_published_loop(vectors, dist, rho):
    u = vectors[dist]
    k = round(rho * D)
    idx = get_sparsifier("gaussiank-2019").select(u, k)
    ref_count = published_gaussiank(u, k)[0].size
    assert abs(idx.numel() - ref_count) <= max(2, 1e-3 * ref_count)
    assert _is_threshold_set(u, idx)


def _redsync_2019_evaluations(u: torch.Tensor, k: int) -> int:
    """The thresholds the authors' RedSync loop (eps 0.2) evaluates, restated in float64."""
    mag = np.abs(u.double().numpy())
    mean_abs, top = mag.mean(), mag.max()
    low, high, evaluations = 0.0, 1.0, 0
    while high - low > 0.2:
        r = low + (high - low) / 2
        n = int((mag > mean_abs + r * (top - mean_abs)).sum())
        evaluations += 1
        if k < n < 2 * k:
            break
        low, high = (low, r) if n < k / 2 else (r, high)
    return evaluations


@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("dist", sorted(DISTRIBUTIONS))
def test_published_loops_report_the_thresholds_they_evaluated(vectors, dist, rho):
    """last_evaluations (what the GPU traffic model counts passes from) is the number of
    thresholds the published loop evaluated, against float64 restatements of both loops."""
    u = vectors[dist]
    k = round(rho * D)
    gaussian = get_sparsifier("gaussiank-2019")
    gaussian.select(u, k)
    assert gaussian.last_evaluations == len(published_gaussiank(u, k)[1])
    redsync = get_sparsifier("redsync-2019")
    redsync.select(u, k)
    assert redsync.last_evaluations == _redsync_2019_evaluations(u, k)
    assert 1 <= redsync.last_evaluations <= 3


@pytest.mark.parametrize("rho", RHOS)
def test_gaussiank_2019_in_band_on_gaussian(vectors, rho):
    k = round(rho * D)
    assert 2 / 3 <= _count_ratio("gaussiank-2019", vectors["normal"], k) <= 4 / 3


@pytest.mark.parametrize("rho", RHOS)
def test_gaussiank_2019_leaves_its_band_on_the_mixture(vectors, rho):
    """Published behaviour, documented: three x1.5 / x0.5 steps cannot reach the band."""
    k = round(rho * D)
    ratio = _count_ratio("gaussiank-2019", vectors["mixture"], k)
    chosen, evaluated = published_gaussiank(vectors["mixture"], k)
    count = chosen.size
    assert len(evaluated) == 3 and not (2 / 3 <= count / k <= 4 / 3)
    assert not (2 / 3 <= ratio <= 4 / 3)
    assert ratio == pytest.approx(count / k, rel=1e-3)


def test_gaussiank_2019_oscillates_on_laplace_at_one_percent(vectors):
    k = round(0.01 * D)
    assert _count_ratio("gaussiank-2019", vectors["laplace"], k) > 4


@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("dist", sorted(DISTRIBUTIONS))
def test_redsync_lands_in_its_band(vectors, dist, rho):
    u = vectors[dist]
    k = round(rho * D)
    idx = get_sparsifier("redsync").select(u, k)
    assert k <= idx.numel() <= 2 * k
    assert _is_threshold_set(u, idx)


@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("dist", sorted(DISTRIBUTIONS))
def test_dgc_sends_between_four_fifths_of_k_and_k(vectors, dist, rho):
    """The published loop: at most k by its final cut, at least 0.8 k unless ten x0.8 steps
    fall short (they do not on these distributions)."""
    u = vectors[dist]
    k = round(rho * D)
    for seed in range(3):
        n = get_sparsifier("dgc", seed=seed).select(u, k).numel()
        assert 0.8 * k <= n <= k


@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("dist", sorted(DISTRIBUTIONS))
def test_dgc_sampled_count_is_k_up_to_sampling_noise(vectors, dist, rho):
    """1% sample: k_s = 10 (rho 0.001) or 100 (0.01) sampled values set the threshold."""
    u = vectors[dist]
    k = round(rho * D)
    idx = get_sparsifier("dgc-sampled", seed=0).select(u, k)
    assert 0.5 <= idx.numel() / k <= 2.0
    assert _is_threshold_set(u, idx)
    trimmed = get_sparsifier("dgc-sampled", seed=0, trim=True).select(u, k)
    assert trimmed.numel() == min(idx.numel(), k)
    if idx.numel() >= k:  # trimming a superset of Top-k gives exactly Top-k
        np.testing.assert_array_equal(np.sort(trimmed.numpy()), np.sort(exact_topk(u, k).numpy()))


@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("dist", sorted(DISTRIBUTIONS))
def test_sidco_fixed_count_is_near_k(vectors, dist, rho):
    u = vectors[dist]
    k = round(rho * D)
    idx = get_sparsifier("sidco-fixed").select(u, k)
    assert 0.7 <= idx.numel() / k <= 1.3
    assert _is_threshold_set(u, idx)


def test_sidco_fixed_single_exponential_stage_undershoots_on_gaussian(vectors):
    """Documented: an exponential fit of a Gaussian |u| overstates its tail (about 0.1 k)."""
    u = vectors["normal"]
    k = round(0.001 * D)
    ratio = _count_ratio("sidco-fixed", u, k, dist="exponential", stages=2,
                         first_ratio=math.sqrt(0.001))
    assert ratio < 0.3


def test_sidco_adapts_up_from_an_undershoot_and_stays_where_one_stage_overshoots(vectors):
    """The published adaptation only lowers the stage count on an overshoot: on the mixture
    (one generalized-Pareto stage: 0.25 k) it climbs to 3 stages and ~k; on N(0, 1) one stage
    sends ~6.9 k and the count stays there, since M cannot go below 1 (published behaviour)."""
    k = round(0.001 * D)
    climbing, stuck = get_sparsifier("sidco"), get_sparsifier("sidco")
    for _ in range(20):
        up = climbing.select(vectors["mixture"], k).numel() / k
        over = stuck.select(vectors["normal"], k).numel() / k
    assert climbing.stages == 3 and 0.8 <= up <= 1.2
    assert stuck.stages == 1 and over > 5
