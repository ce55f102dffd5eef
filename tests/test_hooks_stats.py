"""The recorder's per-row statistics against float64 numpy/scipy references on the same vector."""

import math

import numpy as np
import pytest
import torch

from tests._topk_reference import (
    gaussian_ratio_by_quadrature,
    moments_by_scipy,
    topk_ratio_by_sort,
)
from topkscope.analysis import contraction
from topkscope.hooks.histogram import bin_counts, bin_edges, histogram_rows
from topkscope.hooks.power_sums import (
    power_sums,
    residual_sums,
    row_moments,
    segment_max,
    segment_sum,
)
from topkscope.hooks.rows import GLOBAL, plan_rows, segments_of, whole
from topkscope.hooks.topk_sums import RowTops, top_magnitudes, topk_ratio_rows
from topkscope.sparsify import k_from_density

REL = 1e-6


def moments_of(x: torch.Tensor, plan):
    """Moments of each row of x (K, d) straight from its own power sums."""
    return row_moments(power_sums(x, x.abs(), plan.segments.lengths), plan, list(x))


def reference(x: np.ndarray) -> dict:
    """The textbook float64 definitions (population moments, as scipy's defaults)."""
    x = x.astype(np.float64)
    return {
        **moments_by_scipy(x),
        "norm": np.linalg.norm(x),
        "max_abs": np.abs(x).max(),
        "zero_frac": np.mean(x == 0),
    }


def close(a: float, b: float, rel: float = REL, abs_: float = 1e-12) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)


def vectors(seed: int, d: int, dtype=torch.float32) -> list[torch.Tensor]:
    """Gradient-like vectors: heavy tails, a shifted layer, exact zeros, a constant stretch."""
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(d, generator=gen, dtype=torch.float64)
    b = torch.distributions.StudentT(3.0).sample((d,)).double() * 1e-3
    b[: d // 10] = 0.0  # dead units give exact zeros
    c = torch.randn(d, generator=gen, dtype=torch.float64) * 1e-4 + 5e-2  # mean >> std
    c[d // 2 : d // 2 + 40] = 0.25  # a constant stretch (a constant layer below)
    return [v.to(dtype) for v in (a, b, c)]


LAYOUT = [("conv.weight", 0, 1200), ("bn.weight", 1200, 16), ("bn.bias", 1216, 16),
          ("fc.weight", 1232, 2000), ("fc.bias", 3232, 40), ("pad_after", 3300, 700)]
D = 4000
DENSITIES = (0.001, 0.01, 0.25)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_moments_match_numpy_scipy_per_row(dtype):
    xs = vectors(1, D, dtype)
    xs[2][3240:3280] = 0.25  # make fc.bias exactly constant (std 0)
    x = torch.stack(xs)
    plan = plan_rows(segments_of(LAYOUT, D), DENSITIES, per_layer=True)
    mom = moments_of(x, plan)
    assert plan.layers[0] == GLOBAL
    for kv in range(3):
        for r, name in enumerate(plan.layers):
            a, n = int(plan.starts[r]), int(plan.numel[r])
            ref = reference(x[kv, a : a + n].numpy())
            assert close(float(mom.mean[kv, r]), ref["mean"], abs_=1e-15), (kv, name)
            assert close(float(mom.std[kv, r]), ref["std"]), (kv, name)
            assert close(float(mom.norm[kv, r]), ref["norm"]), (kv, name)
            assert float(mom.max_abs[kv, r]) == ref["max_abs"]
            assert float(mom.zero_frac[kv, r]) == ref["zero_frac"]
            assert float(mom.nonfinite[kv, r]) == 0
            if ref["std"] == 0:
                assert math.isnan(float(mom.skew[kv, r]))
                assert math.isnan(float(mom.excess_kurtosis[kv, r]))
            else:
                assert close(float(mom.skew[kv, r]), ref["skew"], abs_=1e-9), (kv, name)
                assert close(float(mom.excess_kurtosis[kv, r]), ref["excess_kurtosis"],
                             abs_=1e-9), (kv, name)


def test_layer_rows_add_up_to_the_global_row():
    xs = vectors(2, D)
    x = torch.stack(xs)
    layout = [(n, o, c) for n, o, c in LAYOUT if n != "pad_after"]
    layout.append(("rest", 3272, 728))
    plan = plan_rows(segments_of(layout, D), DENSITIES, per_layer=True)
    mom = moments_of(x, plan)
    assert plan.numel[1:].sum() == plan.numel[0] == D
    sq = mom.sumsq.numpy()
    np.testing.assert_allclose(sq[:, 1:].sum(1), sq[:, 0], rtol=1e-12)
    mean = mom.mean.numpy()
    np.testing.assert_allclose((mean[:, 1:] * plan.numel[1:]).sum(1), mean[:, 0] * D,
                               rtol=1e-9, atol=1e-15)
    np.testing.assert_array_equal(mom.max_abs.numpy()[:, 1:].max(1), mom.max_abs.numpy()[:, 0])


def test_gaps_count_in_the_global_row_only():
    x = torch.arange(1.0, 11.0)[None]  # 1..10
    plan = plan_rows(segments_of([("a", 2, 3), ("b", 7, 2)], 10), [0.5], per_layer=True)
    assert plan.layers == (GLOBAL, "a", "b")
    mom = moments_of(x, plan)
    assert mom.mean[0].tolist() == pytest.approx([5.5, 4.0, 8.5])


def test_nonfinite_values_are_counted_and_poison_only_their_rows():
    x = torch.randn(1, 100, dtype=torch.float64)
    x[0, 5] = float("nan")
    x[0, 7] = float("inf")
    plan = plan_rows(segments_of([("a", 0, 50), ("b", 50, 50)], 100), [0.1], per_layer=True)
    mom = moments_of(x, plan)
    assert mom.nonfinite[0].tolist() == [2, 2, 0]
    assert math.isnan(float(mom.mean[0, 0])) and math.isnan(float(mom.std[0, 1]))
    ref = reference(x[0, 50:].numpy())
    assert close(float(mom.std[0, 2]), ref["std"])
    assert close(float(mom.skew[0, 2]), ref["skew"], abs_=1e-9)


def test_large_mean_relative_to_spread_is_still_exact():
    # a layer whose values sit far from the vector's overall mean (the refinement path)
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(1, 3000, generator=gen, dtype=torch.float64)
    x[0, 1000:2000] = 1e4 + torch.randn(1000, generator=gen, dtype=torch.float64) * 1e-3
    plan = plan_rows(segments_of([("a", 0, 1000), ("b", 1000, 1000), ("c", 2000, 1000)], 3000),
                     [0.01], per_layer=True)
    mom = moments_of(x, plan)
    for r in range(4):
        a, n = int(plan.starts[r]), int(plan.numel[r])
        ref = reference(x[0, a : a + n].numpy())
        assert close(float(mom.std[0, r]), ref["std"]), r
        assert close(float(mom.excess_kurtosis[0, r]), ref["excess_kurtosis"], abs_=1e-9), r


def test_segment_reduce_path_matches_the_loop():
    x = torch.randn(4, 3, 500, dtype=torch.float64)
    lengths = (100, 1, 299, 100)
    ref = torch.stack([p.sum(-1) for p in x.split(lengths, -1)], -1)
    torch.testing.assert_close(segment_sum(x, lengths, fused=True), ref, rtol=1e-12, atol=0)
    torch.testing.assert_close(segment_sum(x, lengths, fused=False), ref, rtol=1e-12, atol=0)
    torch.testing.assert_close(segment_sum(x, lengths), ref, rtol=1e-12, atol=0)
    ref = torch.stack([p.abs().amax(-1) for p in x.split(lengths, -1)], -1)
    assert torch.equal(segment_max(x.abs(), lengths, fused=True), ref)
    assert torch.equal(segment_max(x.abs(), lengths, fused=False), ref)
    assert torch.equal(segment_max(x.abs(), lengths), ref)
    x[1, 2, 5] = float("nan")
    assert segment_max(x, lengths)[1, 2].isnan().tolist() == [True, False, False, False]


@pytest.mark.parametrize("n,kmax", [(100, 7), (50_000, 40), (50_000, 500), (200_000, 3000)])
def test_top_magnitudes_equal_a_full_sort(n, kmax):
    gen = torch.Generator().manual_seed(n + kmax)
    a = torch.randn(2, n, generator=gen).abs()
    a[1, : n // 2] = 0.0  # many ties at zero
    got = top_magnitudes(a, kmax)
    ref = torch.sort(a, dim=1, descending=True).values[:, :kmax]
    assert torch.equal(got, ref)


def test_top_magnitudes_with_ties_at_the_threshold():
    a = torch.ones(1, 60_000)
    a[0, :10] = 2.0
    got = top_magnitudes(a, 1_000)
    assert got[0, :10].eq(2).all() and got[0, 10:].eq(1).all() and got.shape == (1, 1000)


def test_topk_ratio_rows_match_contraction_topk_ratio():
    xs = vectors(4, D)
    x = torch.stack(xs)
    plan = plan_rows(segments_of(LAYOUT, D), DENSITIES + (1.0,), per_layer=True)
    absx = x.abs()
    mom = moments_of(x, plan)
    tops = RowTops(absx, mom.max_abs, plan)
    ratio = topk_ratio_rows(tops.top_sums(), mom.sumsq, plan)
    for kv in range(3):
        for r in range(plan.rows):
            a, n = int(plan.starts[r]), int(plan.numel[r])
            seg = x[kv, a : a + n].double().numpy()
            for j, rho in enumerate(plan.densities):
                k = k_from_density(rho, n)
                assert plan.k[r, j] == k
                ref = contraction.topk_ratio(seg, k)
                got = float(ratio[kv, r, j])
                if math.isnan(ref):
                    assert math.isnan(got)
                else:
                    assert close(got, ref, abs_=1e-13), (kv, plan.layers[r], rho)


def test_plan_reference_curves_equal_independent_references():
    """Every (row, density) of the plan against references that do not use topkscope.bounds:
    1 - k/n is what a flat vector leaves; (1 - k/n)^2 is what squares falling linearly to 0
    leave (x_i^2 = n - i + 1/2: the n - k smallest sum to (n - k)^2 / 2 of n^2 / 2); the
    Gaussian value is a quadrature of x^2 phi(x) below the cut."""
    plan = plan_rows(segments_of(LAYOUT, D), DENSITIES + (1.0,), per_layer=True)
    for r in range(plan.rows):
        n = int(plan.numel[r])
        flat, linear = np.ones(n), np.sqrt(np.arange(n, 0, -1) - 0.5)
        for j, rho in enumerate(plan.densities):
            k = int(plan.k[r, j])
            assert k == k_from_density(rho, n)
            assert plan.classic_bound[r, j] == pytest.approx(topk_ratio_by_sort(flat, k),
                                                             rel=1e-12, abs=1e-15)
            assert plan.paper_bound[r, j] == pytest.approx(topk_ratio_by_sort(linear, k),
                                                           rel=1e-12, abs=1e-15)
            assert plan.gaussian_ratio[r, j] == pytest.approx(
                gaussian_ratio_by_quadrature(k / n), rel=1e-9, abs=1e-15)


def test_classic_bound_is_the_mean_contraction_of_random_k_subsets():
    """1 - k/n = E over uniformly random k-subsets of delta, for any vector: measured on a
    heavy-tailed one with 600 draws per (row, density), within 5 standard errors."""
    x = vectors(8, D, torch.float64)[1].numpy()
    plan = plan_rows(segments_of(LAYOUT, D), DENSITIES, per_layer=True)
    rng = np.random.default_rng(9)
    for r in range(plan.rows):
        sq = np.square(x[int(plan.starts[r]) : int(plan.starts[r] + plan.numel[r])])
        for j in range(len(plan.densities)):
            k = int(plan.k[r, j])
            picks = np.argpartition(rng.random((600, sq.size)), k - 1, axis=1)[:, :k]
            delta = 1.0 - sq[picks].sum(1) / sq.sum()
            se = delta.std(ddof=1) / np.sqrt(delta.size)
            assert abs(delta.mean() - plan.classic_bound[r, j]) <= 5 * se + 1e-12, (r, k)


def test_kth_and_count_above_match_a_sort():
    x = torch.tensor([[5.0, -5.0, 3.0, 3.0, 3.0, 1.0, 0.0, 0.0]])
    plan = plan_rows(whole(8), [0.25, 0.5], per_layer=False)  # k = 2, 4
    tops = RowTops(x.abs(), x.abs().amax(1, keepdim=True), plan)
    kth = tops.kth()
    assert kth[0, 0].tolist() == [5.0, 3.0]
    assert tops.count_above(kth)[0, 0].tolist() == [0, 2]


def test_histogram_counts_follow_the_documented_formula():
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(2, D, generator=gen, dtype=torch.float64) * 0.01
    x[1] = torch.distributions.Laplace(0.0, 0.02).sample((D,)).double()
    plan = plan_rows(segments_of(LAYOUT, D), [0.01], per_layer=True)
    mom = moments_of(x, plan)
    bins, half = 20, 3.0
    found = histogram_rows(x, mom, plan, bins, half)
    assert len(found) == 2 * plan.rows
    for kv, r, left, right, counts in found:
        a, n = int(plan.starts[r]), int(plan.numel[r])
        seg = x[kv, a : a + n].numpy()
        m, s = float(mom.mean[kv, r]), float(mom.std[kv, r])
        idx = np.clip(np.floor((seg - m) * (bins / (2.0 * half * s)) + bins / 2), -1, bins) + 1
        ref = np.bincount(idx.astype(int), minlength=bins + 2)
        np.testing.assert_array_equal(counts, ref)
        assert counts.sum() == n
        assert left[0] == -np.inf and right[-1] == np.inf
        np.testing.assert_array_equal(left[1:], right[:-1])
        # away from rounding at the edges, it is the ordinary histogram over those edges
        inner, _ = np.histogram(seg, bins=left[1:])
        assert np.abs(inner - counts[1:-1]).sum() <= 2
        assert abs(counts[0] - np.sum(seg < left[1])) <= 1


def test_histogram_edges_are_scaled_by_std():
    left, right = bin_edges(mean=1.0, std=2.0, bins=4, half_range=2.0)
    np.testing.assert_allclose(left, [-np.inf, -3.0, -1.0, 1.0, 3.0, 5.0])
    np.testing.assert_allclose(right, [-3.0, -1.0, 1.0, 3.0, 5.0, np.inf])
    counts = bin_counts(torch.tensor([-10.0, -3.0, 0.0, 4.99, 5.0, 9.0]), 1.0, 2.0, 4, 2.0)
    assert counts.tolist() == [1, 1, 1, 0, 1, 2]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_residual_sums_equal_a_direct_pass_over_e(dtype):
    u = vectors(6, D, dtype)[1]  # heavy tails and exact zeros
    plan = plan_rows(segments_of(LAYOUT, D), [0.01], per_layer=True)
    lengths = plan.segments.lengths
    for selected in (torch.topk(u.abs(), 40).indices, torch.tensor([0, 5, 1233, 3240, 3999]),
                     torch.arange(1200, 1232), torch.tensor([], dtype=torch.int64)):
        e = u.index_fill(0, selected, 0)
        ps_u = power_sums(u[None], u.abs()[None], lengths)
        derived = residual_sums(ps_u, u, selected, e.abs()[None],
                                torch.tensor(plan.segments.starts), lengths)
        got = row_moments(derived, plan, [e])
        ref = moments_of(e[None], plan)
        for name in ("mean", "std", "sumsq", "max_abs", "zero_frac", "nonfinite"):
            torch.testing.assert_close(getattr(got, name), getattr(ref, name), rtol=1e-9,
                                       atol=1e-15, equal_nan=True, msg=name)
        for name in ("skew", "excess_kurtosis"):
            torch.testing.assert_close(getattr(got, name), getattr(ref, name), rtol=1e-7,
                                       atol=1e-9, equal_nan=True, msg=name)


def test_top_magnitudes_falls_back_when_the_subsample_misleads():
    from topkscope.sparsify.engine import _SAMPLE_TOP

    n, kmax = 200_000, 1_000
    stride = kmax // _SAMPLE_TOP
    a = torch.rand(1, n) * 0.1
    a[0, ::stride] = 10.0 + torch.rand(len(range(0, n, stride)))  # the sample sees only these
    got = top_magnitudes(a, kmax)
    assert torch.equal(got, torch.sort(a, dim=1, descending=True).values[:, :kmax])
