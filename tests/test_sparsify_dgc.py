"""`dgc` against a slow restatement of DGC as its authors published it (float64, sort-based).

The reference below is written from the published description (Lin et al., arXiv 1712.01887,
and the authors' `DGCCompressor`): the sample plan, the threshold from the strided sample, the
adaptation loop (more than 1.3 k -> top k of the selected; fewer than 0.8 k -> threshold x 0.8,
at most 10 times) and the final cut to the first k positions. The branch tests build vectors
whose counts at each threshold are known, so each branch is reached on purpose.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from tests._topk_reference import exact_topk
from tests.test_sparsify_cases import laplace, mixture, normal
from topkscope.sparsify import get_sparsifier
from topkscope.sparsify._helpers import Workspace
from topkscope.sparsify.blockmax import BlockMaxima
from topkscope.sparsify.dgc import adapt_and_cut, sampling_plan


# ---- the reference -----------------------------------------------------------------------
def reference_plan(d: int, k: int, sample_ratio: float = 0.01) -> tuple[int, int, int]:
    """(stride, samples, sample rank) of DGCCompressor.initialize, rho = k / d, exactly."""
    rho = Fraction(k, d)
    if sample_ratio >= 1 or d <= math.ceil(2 / rho):
        stride, m = 1, d
    else:
        want = max(math.ceil(d * sample_ratio), math.ceil(2 / rho))
        stride = math.ceil(Fraction(d, want) / 32) * 32 + 1
        m = d // stride
        while m < want:
            stride -= 8
            m = d // stride
    return stride, m, math.ceil(m * rho)


def reference_after(u: torch.Tensor, k: int, thr: float, adapt: bool = True) -> np.ndarray:
    """Selection from a first threshold on: S = {|u| >= thr}, the loop, the first k positions."""
    x = np.abs(u.double().numpy())
    chosen = np.flatnonzero(x >= thr)
    if adapt:
        for _ in range(10):
            if chosen.size > k:
                if chosen.size > 1.3 * k:  # the k largest of the selected, lowest index on ties
                    order = np.argsort(-x[chosen], kind="stable")
                    chosen = np.sort(chosen[order[:k]])
                break
            if chosen.size < 0.8 * k:
                thr *= 0.8
                chosen = np.flatnonzero(x >= thr)
            else:
                break
    return np.sort(chosen)[:k]


def reference_selections(u: torch.Tensor, k: int) -> list[np.ndarray]:
    """The published selection for every possible offset of the strided sample."""
    stride, _, rank = reference_plan(u.numel(), k)
    x = np.abs(u.double().numpy())
    outs = []
    for start in range(stride):
        sample = np.sort(x[start::stride])[::-1]
        outs.append(reference_after(u, k, float(sample[rank - 1])))
    return outs


def after_threshold(u: torch.Tensor, k: int, thr: float) -> np.ndarray:
    """Ours from a given first threshold (the loop and the cut; the sampling is tested apart)."""
    blocks = BlockMaxima(u, expected_count=k, workspace=Workspace())
    got = adapt_and_cut(blocks, k, torch.tensor(thr, dtype=u.dtype), adapt=True)
    return np.sort(got.numpy())


def spread(groups: list[tuple[int, float]], d: int = 100_000, seed: int = 5) -> torch.Tensor:
    """Groups of (count, magnitude) at random distinct positions with random signs, 0 elsewhere."""
    rng = np.random.default_rng(seed)
    u = np.zeros(d)
    where = rng.permutation(d)
    at = 0
    for count, magnitude in groups:
        signs = rng.choice([-1.0, 1.0], count)
        u[where[at : at + count]] = signs * magnitude
        at += count
    return torch.from_numpy(u).float()


# ---- the sample plan ---------------------------------------------------------------------
@pytest.mark.parametrize(("d", "k", "ratio"), [
    (199_210, 199, 0.01), (200_000, 200, 0.01), (200_000, 2000, 0.01), (25_000_000, 25_000, 0.01),
    (1_000_003, 7, 0.05), (4096, 64, 0.01), (2000, 2, 0.01), (3000, 2, 0.01), (5000, 17, 1.0),
])
def test_sample_plan_is_the_authors_sizing(d, k, ratio):
    assert sampling_plan(d, k, ratio) == reference_plan(d, k, ratio)


def test_sample_plan_of_fnn3_at_one_per_mille():
    """d = 199,210, k = 199: want = ceil(2 d / k) = 2003 > 1% (1993); the stride 129 is lowered
    in steps of 8 to 97 (2053 samples); the threshold is the 3rd largest sampled |u|."""
    assert sampling_plan(199_210, 199, 0.01) == (97, 2053, 3)
    assert sampling_plan(2000, 2, 0.01) == (1, 2000, 2)  # d <= 2 / rho: all of u


# ---- the whole rule ----------------------------------------------------------------------
@pytest.mark.parametrize("make", [normal, laplace, mixture])
@pytest.mark.parametrize("k", [200, 2000])
def test_selection_is_the_published_one_for_the_drawn_offset(make, k):
    """Whatever offset the sample starts at, the set is the reference's for that offset."""
    u = make(200_000, 21)
    options = {tuple(ref) for ref in reference_selections(u, k)}
    seen = set()
    for seed in range(6):
        got = tuple(np.sort(get_sparsifier("dgc", seed=seed).select(u, k).numpy()))
        assert got in options
        assert 1 <= len(got) <= k
        seen.add(got)
    assert len(seen) >= 2  # the offset is drawn, not fixed


def test_far_too_many_for_every_offset_sends_exactly_the_top_k():
    """600 values at 5.0 over noise: any offset's threshold is at most 5.0, so all 600 (more
    than 1.3 k) are selected and the k largest are sent (ties to the lowest index)."""
    rng = np.random.default_rng(2)
    u = torch.from_numpy(rng.standard_normal(200_000) * 0.01).float()
    big = torch.from_numpy(rng.choice(200_000, 600, replace=False))
    u[big] = 5.0
    k = 200
    for ref in reference_selections(u, k):
        np.testing.assert_array_equal(ref, np.sort(exact_topk(u, k).numpy()))
    for seed in range(3):
        got = np.sort(get_sparsifier("dgc", seed=seed).select(u, k).numpy())
        np.testing.assert_array_equal(got, np.sort(exact_topk(u, k).numpy()))


def test_full_sample_cuts_ties_to_the_first_positions_even_ahead_of_larger_values():
    """d <= 2 / rho: thr = the k-th largest |u| and no adaptation; S = {|u| >= thr} is cut to
    its k lowest positions, so a tie at the k-th magnitude can push out a larger value."""
    u = torch.tensor([1.0, -1.0, 1.0, 5.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0])
    assert sampling_plan(10, 2, 0.01)[0] == 1
    np.testing.assert_array_equal(get_sparsifier("dgc").select(u, 2).numpy(), [0, 1])
    v = laplace(50_000, 2)  # no ties: exact Top-k
    got = get_sparsifier("dgc", sample_ratio=1.0).select(v, 321)
    np.testing.assert_array_equal(np.sort(got.numpy()), np.sort(exact_topk(v, 321).numpy()))


def test_never_more_than_k_and_never_nothing():
    gen = torch.Generator().manual_seed(4)
    for trial in range(24):
        d = int(torch.randint(1000, 300_000, (1,), generator=gen))
        k = int(torch.randint(1, max(2, d // 50), (1,), generator=gen))
        u = torch.randn(d, generator=gen) * torch.rand(d, generator=gen).pow(4)
        n = get_sparsifier("dgc", seed=trial).select(u, k).numel()
        assert 1 <= n <= k


# ---- each branch after the first threshold (thr = 1.0, k = 100) --------------------------
K = 100
STEP = [0.8**j * 1.01 for j in range(12)]  # just above the threshold after j steps of x0.8


@pytest.mark.parametrize(("case", "groups", "expected_count"), [
    # 0.8 k <= count <= k at once: as is
    ("in_band", [(90, 2.0), (500, 0.5)], 90),
    # k < count <= 1.3 k: stop, then the first k positions (not the k largest)
    ("a_little_over", [(120, 2.0), (500, 0.5)], K),
    # count > 1.3 k: the k largest of the selected
    ("far_over", [(300, 2.0), (500, 0.5)], K),
    # 20 < 0.8 k: x0.8 three times (20 + 20 + 20 + 30 = 90 in band)
    ("three_steps", [(20, 2.0), (20, STEP[1]), (20, STEP[2]), (30, STEP[3]), (500, 0.05)], 90),
    # the second step jumps past 1.3 k: the k largest of the selected
    ("jump_over", [(50, 2.0), (200, STEP[2]), (500, 0.05)], K),
    # ten steps (thr = 0.107) still leave 50 < 0.8 k; an 11th would reach 90: sent as is
    ("ten_steps_short", [(50, 2.0), (40, 0.8**11 * 1.01), (500, 0.01)], 50),
    # the tenth step lands above k: no re-selection after it, the first k positions
    ("tenth_step_over", [(50, 2.0), (60, STEP[10]), (500, 0.01)], K),
    ("tenth_step_far_over", [(50, 2.0), (160, STEP[10]), (500, 0.01)], K),
])
def test_each_branch_matches_the_reference(case, groups, expected_count):
    u = spread(groups)
    ref = reference_after(u, K, 1.0)
    assert ref.size == expected_count
    np.testing.assert_array_equal(after_threshold(u, K, 1.0), ref)


def test_far_over_sends_the_largest_of_the_selected():
    u = spread([(300, 2.0), (500, 0.5)])
    u[torch.nonzero(u.abs() == 2.0).flatten()] *= torch.linspace(1.0, 2.0, 300)  # no ties
    np.testing.assert_array_equal(after_threshold(u, K, 1.0), np.sort(exact_topk(u, K).numpy()))


@pytest.mark.parametrize("groups", [[(120, 2.0), (500, 0.5)], [(50, 2.0), (160, STEP[10])]])
def test_a_cut_by_position_is_not_the_top_k(groups):
    """Where the published rule ends with more than k and no re-selection, it keeps the first
    k positions: larger values at later positions are dropped (documented behaviour)."""
    u = spread(groups)
    u[-1] = 3.0  # the largest value, at the last position
    got = after_threshold(u, K, 1.0)
    np.testing.assert_array_equal(got, reference_after(u, K, 1.0))
    assert u.numel() - 1 not in got
    assert not np.array_equal(got, np.sort(exact_topk(u, K).numpy()))


def test_no_adaptation_when_the_sample_is_all_of_u():
    u = spread([(20, 2.0), (500, 0.5)])
    blocks = BlockMaxima(u, expected_count=K, workspace=Workspace())
    got = adapt_and_cut(blocks, K, torch.tensor(1.0), adapt=False)
    assert got.numel() == 20  # below 0.8 k, but a full sample is never adapted


# ---- dgc-sampled: the earlier rule, kept by name -----------------------------------------
def test_dgc_sampled_full_sample_threshold_is_the_kth_magnitude():
    u = laplace(50_000, 2)
    idx = get_sparsifier("dgc-sampled", sample_ratio=1.0).select(u, 321)
    np.testing.assert_array_equal(np.sort(idx.numpy()), np.sort(exact_topk(u, 321).numpy()))


@pytest.mark.parametrize("name", ["dgc", "dgc-sampled"])
def test_dgc_is_reproducible_with_a_seed(name):
    u = normal(300_000, 4)
    a = get_sparsifier(name, seed=3).select(u, 300)
    b = get_sparsifier(name, seed=3).select(u, 300)
    c = get_sparsifier(name, seed=4).select(u, 300)
    assert torch.equal(a, b) and not torch.equal(a, c)
