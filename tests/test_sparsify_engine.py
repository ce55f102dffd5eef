"""The one threshold-then-verify engine (topkscope.sparsify.topk) and its three users.

Each user (the Gaussian-k sparsifier, the recorder's row tops, the statistics' float64
tails) is run with a spy on the engine function it uses, so the test fails if a user stops
going through the engine; its answer is compared with torch.topk or a float64 sort.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import topkscope.analysis.contraction as contraction
import topkscope.hooks.topk_sums as topk_sums
import topkscope.sparsify.gaussiank as gaussiank
from tests._topk_reference import exact_topk
from topkscope.hooks.rows import plan_rows, segments_of
from topkscope.sparsify import get_sparsifier
from topkscope.sparsify.topk import (
    gaussian_threshold,
    sample_rank,
    sample_threshold,
    top_values,
    verified_candidates,
)


def heavy(n: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(3, n, generator=gen, dtype=torch.float64)
    return (z[0] / z[1:].square().mean(0).sqrt()).float()


def spy(monkeypatch, module, name: str) -> list:
    calls: list = []
    real = getattr(module, name)

    def wrapped(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapped)
    return calls


def test_sample_threshold_is_the_rank_j_value_in_numpy_and_torch():
    x = heavy(5000, 1).abs()
    j = sample_rank(300, x.numel(), 100_000)
    assert j == min(5000, int(15.0 + 5.0 * 15.0**0.5 + 10.0) + 1)
    ref = float(torch.sort(x, descending=True).values[j - 1])
    assert float(sample_threshold(x, 300, 100_000)) == ref
    assert float(sample_threshold(x.numpy(), 300, 100_000)) == ref
    assert sample_rank(10**6, 50, 10**6) == 50  # capped at the sample size


def test_verified_candidates_accepts_only_enough_candidates():
    mag = np.array([5.0, 1.0, 4.0, 3.0, 3.0])
    np.testing.assert_array_equal(verified_candidates(mag, 3, 3.0), [5.0, 4.0, 3.0, 3.0])
    assert verified_candidates(mag, 3, 4.0) is None
    assert verified_candidates(torch.from_numpy(mag), 2, 4.0).tolist() == [5.0, 4.0]


def test_gaussian_threshold_matches_scipy():
    from scipy import stats

    assert gaussian_threshold(2.0, 0.01) == pytest.approx(2.0 * stats.norm.isf(0.005), rel=1e-12)
    got = gaussian_threshold(np.array([1.0, 3.0]), np.array([0.1, 1.0]))
    np.testing.assert_allclose(got, [stats.norm.isf(0.05), 0.0], rtol=1e-12)


@pytest.mark.parametrize("case", ["heavy", "ties", "misleading"])
def test_top_values_equals_torch_topk(case):
    n, k = 1 << 16, 2048
    x = heavy(n, 2).abs()
    if case == "ties":
        x = (x * 4).round() / 4
    if case == "misleading":  # the strided sample holds only huge values: the guess fails
        x = torch.rand(n, generator=torch.Generator().manual_seed(3)) * 1e-3
        x[:: k // 64] = 1000.0 + torch.arange(x[:: k // 64].numel()).float()
        assert verified_candidates(x, k, sample_threshold(x[:: k // 64], k, n)) is None
    torch.testing.assert_close(top_values(x, k), torch.topk(x, k).values, rtol=0, atol=0)


def test_the_sparsifier_uses_the_engine_and_selects_exact_topk(monkeypatch):
    calls = spy(monkeypatch, gaussiank, "gaussian_threshold")
    u = heavy(1 << 18, 4)
    k = 300
    got = get_sparsifier("gaussiank").select(u, k)
    assert calls
    assert sorted(got.tolist()) == sorted(exact_topk(u, k).tolist())


def test_the_recorder_uses_the_engine_and_matches_float64(monkeypatch):
    row_calls = spy(monkeypatch, topk_sums, "top_values")
    x = heavy(1 << 16, 5).abs()
    got = topk_sums.top_magnitudes(x[None], 2048)[0]
    assert row_calls
    ref = np.sort(x.double().numpy())[::-1][:2048]
    np.testing.assert_array_equal(got.double().numpy(), ref)

    guess_calls = spy(monkeypatch, topk_sums, "gaussian_threshold")
    layout = [("a", 0, 40_000), ("b", 40_000, 25_536)]
    plan = plan_rows(segments_of(layout, 1 << 16), (0.01,), True)
    a = x.numpy()
    sq = np.array([float(np.sum(a[s : s + n].astype(np.float64) ** 2))
                   for s, n in zip(plan.starts, plan.numel)])
    found = topk_sums.threshold_tops(a, plan, sq, topk_sums.eligible_rows(plan, sq))
    assert guess_calls and found
    for r, top in found.items():
        seg = a[plan.starts[r] : plan.starts[r] + plan.numel[r]].astype(np.float64)
        np.testing.assert_array_equal(top, np.sort(seg)[::-1][: int(plan.kmax[r])])


def test_the_statistics_use_the_engine_and_match_float64(monkeypatch):
    calls = spy(monkeypatch, contraction, "sample_threshold")
    u = heavy(2_100_000, 6).numpy()
    report = contraction.analyze(u, [0.001, 0.01])
    assert calls  # d > 2e6: the candidate path ran
    for rho, got in zip([0.001, 0.01], report.ratios["topk_ratio"]):
        k = max(1, round(rho * u.size))
        assert got == pytest.approx(contraction.topk_ratio(u, k), rel=1e-12)
