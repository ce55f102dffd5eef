"""Exact methods (topk, robust gaussiank) against a float64 full-sort reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests._topk_reference import exact_topk
from tests.test_sparsify_cases import edge_vectors
from topkscope.sparsify import available, get_sparsifier

EDGES = edge_vectors()
EXACT = [name for name in available() if get_sparsifier(name).exact]


def _ks(d: int) -> list[int]:
    """k = 1, a small, a middle and the full count (deduplicated, within [1, d])."""
    return sorted({1, max(1, d // 1000), max(1, d // 100), max(1, d // 7), d})


def test_the_exact_methods_are_topk_and_gaussiank():
    assert EXACT == ["gaussiank", "topk"]


@pytest.mark.parametrize("name", EXACT)
@pytest.mark.parametrize("case", sorted(EDGES))
def test_exact_set_matches_float64_full_sort(name, case):
    u = EDGES[case]
    sparsifier = get_sparsifier(name)
    for k in _ks(u.numel()):
        idx = sparsifier.select(u, k)
        assert idx.dtype == torch.int64 and idx.dim() == 1
        assert idx.numel() == k
        got = np.sort(idx.numpy())
        assert np.unique(got).size == k, "indices must be unique"
        # same magnitudes as the k largest in float64 ...
        mag = np.abs(u.double().numpy())
        ref = np.sort(exact_topk(u, k).numpy())
        np.testing.assert_array_equal(np.sort(mag[got]), np.sort(mag[ref]))
        # ... and the same set, ties broken towards lower indices
        np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("name", EXACT)
@pytest.mark.parametrize("case", sorted(EDGES))
def test_exact_topk_contracts_within_classic_bound(name, case):
    """||u - s||^2 <= (1 - k/d) ||u||^2, summed in float64."""
    u = EDGES[case]
    d = u.numel()
    x = u.double()
    total = float(x.pow(2).sum())
    for k in _ks(d):
        idx = get_sparsifier(name).select(u, k)
        rest = x.clone()
        rest[idx] = 0.0
        assert float(rest.pow(2).sum()) <= (1.0 - k / d) * total * (1 + 1e-12) + 1e-300


def test_gaussiank_equals_topk_across_densities_and_layouts():
    """The robust Gaussian-k is a fast exact Top-k: same set as topk for every density."""
    gen = torch.Generator().manual_seed(11)
    topk, gaussk = get_sparsifier("topk"), get_sparsifier("gaussiank")
    for d in (40_000, 65_537, 262_144, 1_000_003):
        u = torch.randn(d, generator=gen) * torch.rand(d, generator=gen).pow(3)
        for rho in (1e-5, 1e-4, 0.001, 0.003, 0.01, 0.02, 0.05, 0.2, 1.0):
            k = max(1, round(rho * d))
            a = np.sort(topk.select(u, k).numpy())
            b = np.sort(gaussk.select(u, k).numpy())
            np.testing.assert_array_equal(a, b, err_msg=f"d={d} k={k}")


def test_gaussiank_fallback_paths_stay_exact():
    """Outliers inflate the std (guess far too high); max_iter=0 forces the k-th block maximum."""
    u = EDGES["outliers"]
    for params in ({}, {"max_iter": 0}, {"max_iter": 1, "band": 1.01}):
        s = get_sparsifier("gaussiank", **params)
        for k in (5, 10, 11, 100, 1000):
            np.testing.assert_array_equal(np.sort(s.select(u, k).numpy()), np.sort(exact_topk(u, k).numpy()))


def test_topk_ties_take_lowest_indices():
    u = torch.tensor([1.0, -3.0, 2.0, 3.0, -2.0, 2.0, 0.0])
    idx = get_sparsifier("topk").select(u, 3)
    assert sorted(idx.tolist()) == [1, 2, 3]  # |3|, |-3|, then the first |2|


def test_dense_returns_every_index():
    u = torch.randn(1234)
    idx = get_sparsifier("dense").select(u, 5)
    assert torch.equal(idx, torch.arange(1234))


def test_exact_methods_keep_the_device_and_return_int64():
    u = torch.randn(100_000, dtype=torch.float64)
    for name in EXACT:
        idx = get_sparsifier(name).select(u, 100)
        assert idx.device == u.device and idx.dtype == torch.int64


def test_top_k_indices_with_an_index_map_breaks_ties_by_index_value():
    from topkscope.sparsify.engine import top_k_indices

    mag = torch.tensor([5.0, 1.0, 3.0, 3.0, 3.0, 0.0])
    index = torch.tensor([50, 10, 42, 7, 30, 1])  # unsorted positions in some larger vector
    assert sorted(top_k_indices(mag, 3, index).tolist()) == [7, 30, 50]  # ties: 7, 30 < 42
    assert sorted(top_k_indices(mag, 4, index).tolist()) == [7, 30, 42, 50]  # no tie at the cut
    assert sorted(top_k_indices(mag, 1, index).tolist()) == [50]
    assert sorted(top_k_indices(mag, 6, index).tolist()) == sorted(index.tolist())


@pytest.mark.slow
@pytest.mark.parametrize("dist", ["normal", "laplace", "student_t3", "mixture"])
def test_gaussiank_is_exact_at_benchmark_size(dist):
    """d = 2.5e7 (the selection benchmark's largest CPU size), rho in {0.001, 0.01}."""
    from tests.test_sparsify_cases import DISTRIBUTIONS

    u = DISTRIBUTIONS[dist](25_000_000, seed=99)
    gaussk, topk = get_sparsifier("gaussiank"), get_sparsifier("topk")
    for k in (25_000, 250_000):
        a = torch.sort(gaussk.select(u, k)).values
        b = torch.sort(topk.select(u, k)).values
        assert torch.equal(a, b)
