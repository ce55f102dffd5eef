"""Each method's own rule, checked against a slow, obvious re-statement of it."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
import torch
from scipy import stats

from tests._topk_reference import published_gaussiank
from tests.test_sparsify_cases import laplace, mixture, normal
from topkscope.sparsify import available, get_sparsifier
from topkscope.sparsify._helpers import mean_std, two_sided_normal_quantile
from topkscope.sparsify.sidco import tail_threshold
from topkscope.sparsify.source import SparsifierSource


# ---- moments ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_mean_std_matches_numpy_float64(dtype):
    u = (normal(100_001, 5) * 3 + 0.5).to(dtype)
    mean, std = mean_std(u)
    x = u.double().numpy()
    assert mean == pytest.approx(x.mean(), rel=1e-5)
    assert std == pytest.approx(x.std(ddof=1), rel=1e-5)


def test_two_sided_normal_quantile_matches_scipy():
    for tail in (1e-6, 0.001, 0.01, 0.3, 0.999):
        assert two_sided_normal_quantile(tail) == pytest.approx(stats.norm.isf(tail / 2), rel=1e-9)
    assert two_sided_normal_quantile(1.0) == 0.0


# ---- gaussiank-2019 --------------------------------------------------------------------
def test_gaussiank_2019_first_threshold_is_mean_plus_z_std():
    """When the first evaluation is in band, the set is exactly {|u| > mean + z std}."""
    u = normal(200_000, 9)
    k = 200
    ref, evaluated = published_gaussiank(u, k)
    assert len(evaluated) == 1 and 2 * k / 3 <= ref.size <= 4 * k / 3
    got = np.sort(get_sparsifier("gaussiank-2019").select(u, k).numpy())
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize(
    ("values", "k", "steps"),
    [
        ([0.0] * 96 + [1.0, 3.0, 6.0, 6.0], 2, [1.5]),  # too many, then in band
        ([0.0] * 96 + [1.0, 3.0, 6.0, 6.0], 5, [0.5]),  # too few, then in band
        ([0.0] * 90 + [1.0] * 6 + [5.0, 6.0, 7.0, 8.0], 2, [1.5, 1.5]),  # ends below band
        ([0.0] * 80 + [1.0] * 15 + [2.0] * 5, 10, [0.5, 1.5]),  # oscillates, ends above band
    ],
)
def test_gaussiank_2019_steps_are_half_and_one_and_a_half(values, k, steps):
    u = torch.tensor(values)
    ref, evaluated = published_gaussiank(u, k)
    assert [b / a for a, b in zip(evaluated, evaluated[1:])] == pytest.approx(steps)
    got = np.sort(get_sparsifier("gaussiank-2019").select(u, k).numpy())
    np.testing.assert_array_equal(got, ref)


# ---- redsync ---------------------------------------------------------------------------
def redsync_reference(u: torch.Tensor, k: int, band: float = 2.0, max_iter: int = 20) -> int:
    mag = np.abs(u.double().numpy())
    mean, top = mag.mean(), mag.max()
    low, high = 0.0, 1.0
    for _ in range(max_iter):
        r = 0.5 * (low + high)
        n = int(np.count_nonzero(mag > mean + r * (top - mean)))
        if k <= n <= band * k:
            break
        low, high = (low, r) if n < k else (r, high)
    return n


@pytest.mark.parametrize("make", [normal, laplace, mixture])
def test_redsync_matches_its_bisection(make):
    u = make(200_000, 8)
    for k in (20, 200, 2000):
        got = get_sparsifier("redsync").select(u, k).numel()
        assert abs(got - redsync_reference(u, k)) <= max(1, 1e-3 * got)


def test_redsync_reports_out_of_band_counts_as_they_are():
    """Half the vector at one magnitude: no threshold gives [k, 2k]; the count is honest."""
    u = torch.cat([torch.ones(5000), torch.zeros(5000)])
    idx = get_sparsifier("redsync").select(u, 10)
    assert idx.numel() == redsync_reference(u, 10) or idx.numel() == 5000


# ---- sidco -----------------------------------------------------------------------------
@pytest.mark.parametrize("q", [0.25, 0.01, 1e-4])
def test_sidco_tail_thresholds_match_scipy_fits(q):
    mean, var = 0.8, 0.36
    expon = stats.expon(scale=mean).isf(q)
    assert tail_threshold("exponential", mean, var, q) == pytest.approx(expon, rel=1e-9)
    shape, scale = mean**2 / var, var / mean
    gamma = stats.gamma(shape, scale=scale).isf(q)
    assert tail_threshold("gamma", mean, var, q) == pytest.approx(gamma, rel=1e-7)
    for mean, var in ((0.8, 0.36), (0.8, 2.0), (0.8, 0.64)):  # xi < 0, > 0, = 0
        xi = 0.5 * (1 - mean**2 / var)
        sigma = 0.5 * mean * (1 + mean**2 / var)
        gp = stats.genpareto(xi, scale=sigma).isf(q)
        assert tail_threshold("gpareto", mean, var, q) == pytest.approx(gp, rel=1e-7)


@pytest.mark.parametrize("name", ["sidco", "sidco-fixed"])
def test_sidco_one_exponential_stage_is_mean_log_inverse_rho(name):
    u = laplace(100_000, 6)  # |u| ~ Exp(1): the fit is right, the count should be ~k
    k = 1000
    sparsifier = get_sparsifier(name, dist="exponential", stages=1)
    idx = sparsifier.select(u, k)
    thr = float(u.abs().double().mean()) * math.log(u.numel() / k)
    ref = np.flatnonzero(np.abs(u.double().numpy()) > thr)
    assert abs(idx.numel() - ref.size) <= 2
    assert 0.9 <= idx.numel() / k <= 1.1


@pytest.mark.parametrize("dist", ["exponential", "gamma", "gpareto"])
def test_sidco_fixed_multistage_matches_a_float64_restatement(dist):
    u = mixture(300_000, 12)
    rho, stages, first = 0.002, 3, 0.25
    x = np.abs(u.double().numpy())
    eta = tail_threshold(dist, x.mean(), x.var(), first)
    later = (rho / first) ** 0.5
    for _ in range(stages - 1):
        excess = x[x > eta] - eta
        eta += tail_threshold(dist, excess.mean(), excess.var(), later)
    ref = np.flatnonzero(x > eta)
    got = get_sparsifier("sidco-fixed", dist=dist, stages=stages).select(u, round(rho * u.numel()))
    assert abs(got.numel() - ref.size) <= max(2, 1e-3 * ref.size)


def published_sidco_threshold(x: np.ndarray, rho: float, stages: int, dist: str,
                              first: float = 0.25) -> float:
    """The SIDCo authors' multi-stage threshold, restated in float64 (unbiased variance; each
    later stage fits the values above the last threshold minus their minimum)."""
    if stages == 1 or rho >= first:
        return tail_threshold(dist, x.mean(), x.var(ddof=1), rho)
    eta = tail_threshold(dist, x.mean(), x.var(ddof=1), first)
    q = (rho / first) ** (1 / (stages - 1))
    for _ in range(stages - 1):
        x = x[x > eta]
        if x.size < 2:
            break
        shifted = x - x.min()
        eta = x.min() + tail_threshold(dist, shifted.mean(), shifted.var(ddof=1), q)
    return eta


def published_sidco_run(vectors: list[torch.Tensor], rho: float, dist: str,
                        stages: int = 1) -> tuple[list[int], list[int]]:
    """(counts, stage count used) per call of the published rule with its adaptation: every 5
    calls the mean count / k moves M down above 1.2, up below 0.8, within [1, ceil(log2 1/rho)]."""
    counts, used, ratios = [], [], []
    for u in vectors:
        x = np.abs(u.double().numpy())
        k = round(rho * x.size)
        eta = published_sidco_threshold(x, k / x.size, stages, dist)
        used.append(stages)
        counts.append(int(np.count_nonzero(x > eta)))
        ratios.append(counts[-1] / k)
        if len(ratios) == 5:
            mean = sum(ratios) / 5
            stages += -1 if mean > 1.2 else 1 if mean < 0.8 else 0
            stages = min(max(stages, 1), math.ceil(math.log(k / x.size) / math.log(0.5)))
            ratios = []
    return counts, used


@pytest.mark.parametrize("dist", ["exponential", "gamma", "gpareto"])
@pytest.mark.parametrize("stages", [2, 3, 4])
def test_sidco_multistage_matches_the_published_restatement(dist, stages):
    u = mixture(300_000, 12)
    k = 600
    ref = np.flatnonzero(np.abs(u.double().numpy())
                         > published_sidco_threshold(np.abs(u.double().numpy()), k / u.numel(),
                                                     stages, dist))
    got = get_sparsifier("sidco", dist=dist, stages=stages).select(u, k)
    assert abs(got.numel() - ref.size) <= max(2, 1e-3 * ref.size)


@pytest.mark.parametrize(("dist", "make", "rho", "start"), [
    ("exponential", normal, 0.001, 1),     # one stage undershoots: M climbs
    ("gpareto", mixture, 0.001, 1),        # climbs to 3, then holds in the band
    ("exponential", normal, 0.01, 6),      # six stages overshoot: M comes down to 3
    ("gamma", normal, 0.001, 3),           # M alternates between 2 and 3
    ("exponential", lambda d, seed: torch.rand(d, generator=torch.Generator().manual_seed(seed))
     * 2 - 1, 0.01, 1),                    # |u| uniform: every stage undershoots, M hits the cap
])
def test_sidco_stage_count_follows_the_published_adaptation(dist, make, rho, start):
    vectors = [make(100_000, seed) for seed in range(40)]
    ref_counts, ref_used = published_sidco_run(vectors, rho, dist, start)
    sparsifier = get_sparsifier("sidco", dist=dist, stages=start)
    counts, used = [], []
    for u in vectors:
        used.append(sparsifier.stages)
        counts.append(sparsifier.select(u, round(rho * u.numel())).numel())
    assert used == ref_used
    assert len(set(used)) > 1  # the stage count did move
    for got, want in zip(counts, ref_counts):
        assert abs(got - want) <= max(2, 1e-3 * want)


def test_sidco_stage_count_is_kept_within_one_and_log2_of_one_over_rho():
    u = mixture(50_000, 1)
    sparsifier = get_sparsifier("sidco", stages=9)  # above the cap ceil(log2(100)) = 7
    sparsifier.load_state_dict({"stages": 9, "ratio_sum": 0.0, "calls": 4})  # a run of misses
    sparsifier.select(u, 500)  # rho = 0.01; the fifth call adapts: 9 + 1, capped
    assert sparsifier.stages == 7
    sparsifier.load_state_dict({"stages": 1, "ratio_sum": 40.0, "calls": 4})  # far too many
    sparsifier.select(u, 500)
    assert sparsifier.stages == 1


def test_sidco_stops_its_stages_when_fewer_than_two_values_are_left_to_fit():
    """One outlier over a constant floor: after the first stage only it remains; the authors'
    code would fail on the next fit, ours stops and sends what lies above the threshold."""
    u = torch.full((10_000,), 1e-3)
    u[1234] = 10.0
    got = get_sparsifier("sidco", stages=3).select(u, 10)
    assert got.tolist() == [1234]


def test_sidco_state_round_trips_and_a_fresh_instance_starts_over():
    u = mixture(100_000, 3)
    a = get_sparsifier("sidco")
    for _ in range(7):
        a.select(u, 100)
    state = a.state_dict()
    assert state["stages"] > 1 and state["calls"] == 2
    b = get_sparsifier("sidco")
    b.load_state_dict(state)
    for _ in range(9):
        assert torch.equal(a.select(u, 100), b.select(u, 100))
        assert a.state_dict() == b.state_dict()
    assert get_sparsifier("sidco").stages == 1


def test_stateful_sparsifiers_get_one_instance_per_rank():
    """A recorder that evaluates every simulated rank must not mix their adaptations."""
    source = SparsifierSource("sidco", {}, seed=0, rank=0)
    own, other = source.at(5), source.at(5, rank=1)
    assert own is source.at(6) and other is source.at(9, rank=1) and own is not other
    u = mixture(100_000, 3)
    for _ in range(5):
        own.select(u, 100)
    assert own.stages == 2 and other.stages == 1
    assert source.state_dict() == own.state_dict()
    stateless = SparsifierSource("sidco-fixed", {}, seed=0, rank=0)
    assert stateless.at(1, rank=3) is stateless.at(1) and stateless.state_dict() is None


# ---- threshold -------------------------------------------------------------------------
def test_threshold_is_the_strict_magnitude_set_and_may_be_empty():
    u = torch.tensor([0.5, -0.2, 0.0, 0.2, -0.7])
    assert sorted(get_sparsifier("threshold", threshold=0.2).select(u, 1).tolist()) == [0, 4]
    assert get_sparsifier("threshold", threshold=1.0).select(u, 1).numel() == 0
    assert sorted(get_sparsifier("threshold", threshold=0.0).select(u, 1).tolist()) == [0, 1, 3, 4]


# ---- randk -----------------------------------------------------------------------------
@pytest.mark.parametrize(("d", "k"), [(20, 3), (20, 15)])  # rejection and permutation paths
def test_randk_is_uniform_over_positions(d, k):
    s = get_sparsifier("randk", seed=123)
    u = torch.randn(d)
    counts = np.zeros(d)
    draws = 3000
    for _ in range(draws):
        idx = s.select(u, k)
        assert idx.numel() == k and idx.unique().numel() == k
        counts[idx.numpy()] += 1
    assert stats.chisquare(counts).pvalue > 1e-4
    # pairs too: each pair appears together with probability k(k-1) / (d(d-1))


def test_randk_seed_sharing():
    u = torch.randn(10_000)
    a, b, c = (get_sparsifier("randk", seed=s) for s in (5, 5, 6))
    for _ in range(5):
        x, y, z = a.select(u, 100), b.select(u, 100), c.select(u, 100)
        assert torch.equal(x, y)  # shared seed: the same positions at every step
        assert not torch.equal(x, z)


def test_randk_expected_contraction_is_the_classic_bound():
    u = laplace(2000, 1).double()
    k = 200
    s = get_sparsifier("randk", seed=0)
    ratios = []
    for _ in range(400):
        rest = u.clone()
        rest[s.select(u, k)] = 0
        ratios.append(float(rest.pow(2).sum() / u.pow(2).sum()))
    assert np.mean(ratios) == pytest.approx(1 - k / u.numel(), abs=0.01)


@pytest.mark.parametrize("name", available())
def test_declared_behaviour_matches_what_the_method_does(name):
    """`randomised` is declared by exactly the methods that take a seed and draw differently
    with different seeds; `sends_everything` by exactly the methods that select all of u."""
    sparsifier = get_sparsifier(name, **({"threshold": 0.5} if name == "threshold" else {}))
    takes_seed = "seed" in inspect.signature(type(sparsifier).__init__).parameters
    assert type(sparsifier).randomised == takes_seed
    u = torch.from_numpy(np.random.default_rng(3).standard_normal(4096).astype(np.float32))
    if takes_seed:
        picks = {tuple(sorted(get_sparsifier(name, seed=s).select(u, 64).tolist())) for s in (1, 2)}
        assert len(picks) == 2
    idx = sparsifier.select(u, 64)
    assert type(sparsifier).sends_everything == (idx.numel() == u.numel())
    assert SparsifierSource(name, {"threshold": 0.5} if name == "threshold" else {}, 0,
                            0).randomised == takes_seed
