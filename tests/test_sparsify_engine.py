"""The one threshold-then-verify engine (topkscope.sparsify.engine) and its three users.

Each user (the Gaussian-k sparsifier, the recorder's row tops, the statistics' float64
tails) is run with spies on the engine's guess helper it uses AND on the kernel's accept step
(`topkscope.kernel.verified`), so the test fails if a user stops going through the engine or
decides acceptance with a copy of its own; its answer is compared with a sort.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import topkscope.analysis.contraction as contraction
import topkscope.hooks.topk_sums as topk_sums
import topkscope.sparsify.gaussiank as gaussiank
from tests._topk_reference import exact_topk, topk_ratio_by_sort
from topkscope import kernel
from topkscope.hooks.rows import plan_rows, segments_of
from topkscope.sparsify import get_sparsifier
from topkscope.sparsify.engine import (
    gaussian_threshold,
    sample_rank,
    sample_threshold,
    top_values,
)


def heavy(n: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(3, n, generator=gen, dtype=torch.float64)
    return (z[0] / z[1:].square().mean(0).sqrt()).float()


def test_sample_threshold_is_the_rank_j_value_in_numpy_and_torch():
    x = heavy(5000, 1).abs()
    j = sample_rank(300, x.numel(), 100_000)
    ref = float(torch.sort(x, descending=True).values[j - 1])
    assert float(sample_threshold(x, 300, 100_000)) == ref
    assert float(sample_threshold(x.numpy(), 300, 100_000)) == ref
    assert sample_rank(10**6, 50, 10**6) == 50  # never beyond the sample


@pytest.mark.parametrize(("k", "m"), [(300, 5_000), (30, 20_000), (3_000, 2_000)])
def test_the_sample_rank_keeps_the_top_k_in_nearly_every_sample(k, m):
    """What the rank is for, measured: over 400 random samples of m of d heavy-tailed values,
    the sampled threshold reaches below the k-th largest (the guess is accepted) in at least
    99% of them, and the candidates it lets through stay within a few times k."""
    d = 100_000
    mag = heavy(d, 2).abs().double().numpy()
    kth = np.sort(mag)[::-1][k - 1]
    rng = np.random.default_rng(3)
    accepted, candidates = 0, []
    for _ in range(400):
        thr = sample_threshold(mag[rng.choice(d, m, replace=False)], k, d)
        count = int(np.count_nonzero(mag >= thr))
        accepted += thr <= kth
        candidates.append(count)
    assert accepted >= 0.99 * 400
    assert np.median(candidates) <= 4 * k + 20 * d / m


def test_gaussian_threshold_matches_scipy():
    from scipy import stats

    assert gaussian_threshold(2.0, 0.01) == pytest.approx(2.0 * stats.norm.isf(0.005), rel=1e-12)
    got = gaussian_threshold(np.array([1.0, 3.0]), np.array([0.1, 1.0]))
    np.testing.assert_allclose(got, [stats.norm.isf(0.05), 0.0], rtol=1e-12)


@pytest.mark.parametrize("host", [False, True], ids=["torch", "numpy"])
@pytest.mark.parametrize("case", ["heavy", "ties", "misleading"])
def test_top_values_equals_torch_topk_and_goes_through_the_kernel(spy, case, host):
    """Torch and numpy magnitudes: the same sorted values as torch.topk, bit for bit."""
    accepts = spy(kernel, "verified")
    n, k = 1 << 16, 2048
    x = heavy(n, 2).abs()
    if case == "ties":
        x = (x * 4).round() / 4
    if case == "misleading":  # the strided sample holds only huge values: the guess fails
        x = torch.rand(n, generator=torch.Generator().manual_seed(3)) * 1e-3
        x[:: k // 64] = 1000.0 + torch.arange(x[:: k // 64].numel()).float()
    got = top_values(x.numpy() if host else x, k)
    assert accepts and accepts[-1][1] == k
    assert (case == "misleading") == (accepts[-1][0] < k)  # the fallback ran only when refused
    assert isinstance(got, np.ndarray) == host
    torch.testing.assert_close(torch.as_tensor(np.ascontiguousarray(got)) if host else got,
                               torch.topk(x, k).values, rtol=0, atol=0)


def test_the_sparsifier_uses_the_engine_and_selects_exact_topk(spy):
    guesses = spy(gaussiank, "gaussian_threshold")
    accepts = spy(kernel, "verified")
    u = heavy(1 << 18, 4)
    k = 300
    got = get_sparsifier("gaussiank").select(u, k)
    assert guesses and accepts and all(call[1] == k for call in accepts)
    assert sorted(got.tolist()) == sorted(exact_topk(u, k).tolist())


def test_the_recorder_uses_the_engine_and_matches_float64(spy):
    row_calls = spy(topk_sums, "top_values")
    x = heavy(1 << 16, 5).abs()
    got = topk_sums.top_magnitudes(x[None], 2048)[0]
    assert row_calls
    ref = np.sort(x.double().numpy())[::-1][:2048]
    np.testing.assert_array_equal(got.double().numpy(), ref)

    guess_calls = spy(topk_sums, "gaussian_threshold")
    whole = spy(kernel, "verified_candidates")  # the whole row's candidates
    layers = spy(kernel, "verified")  # the layers' candidate counts (an array), one call
    layout = [("a", 0, 40_000), ("b", 40_000, 25_536)]
    plan = plan_rows(segments_of(layout, 1 << 16), (0.01,), True)
    a = x.numpy()
    sq = np.array([float(np.sum(a[s : s + n].astype(np.float64) ** 2))
                   for s, n in zip(plan.starts, plan.numel)])
    found = topk_sums.threshold_tops(a, plan, sq, topk_sums.eligible_rows(plan, sq))
    assert guess_calls and found
    asked = [int(k) for call in whole for k in np.atleast_1d(call[1])]
    asked += [int(k) for call in layers if isinstance(call[0], np.ndarray) for k in call[1]]
    assert sorted(asked) == sorted(int(plan.kmax[r]) for r in range(3))
    for r, top in found.items():
        seg = a[plan.starts[r] : plan.starts[r] + plan.numel[r]].astype(np.float64)
        np.testing.assert_array_equal(top, np.sort(seg)[::-1][: int(plan.kmax[r])])


def test_the_statistics_use_the_engine_and_match_float64(spy):
    guesses = spy(contraction, "sample_threshold")
    accepts = spy(kernel, "verified")
    u = heavy(2_100_000, 6).numpy()
    report = contraction.analyze(u, [0.001, 0.01])
    assert guesses and accepts  # d > 2e6: the candidate path ran and the kernel accepted it
    for rho, got in zip([0.001, 0.01], report.ratios["topk_ratio"]):
        k = max(1, round(rho * u.size))
        assert got == pytest.approx(topk_ratio_by_sort(u, k), rel=1e-12)

