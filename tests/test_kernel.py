"""The statistics kernel against float64 / scipy / sort references, and every user through it.

Part 1: each kernel function against a slow reference written from the definition
(tests/_topk_reference.py, scipy.stats, an explicit sort or a dense mask).
Part 2: each user (the recorder's row statistics, the statistics of `analysis`, the recorder
end to end) is run with spies on the kernel functions it must go through: the test fails if
the user stops calling the kernel (a copy of the formula would not be seen by the spy), and
its numbers are compared with the kernel's own on the same vector.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from tests._topk_reference import moments_by_scipy, recall_by_enumeration, topk_ratio_by_sort
from topkscope import kernel
from topkscope.analysis import contraction, fits, normality, selection
from topkscope.analysis.vectors import finite_values
from topkscope.hooks import Recorder
from topkscope.hooks.power_sums import power_sums, row_moments
from topkscope.hooks.rows import plan_rows, segments_of
from topkscope.hooks.topk_sums import RowTops, selection_rows, topk_ratio_rows
from topkscope.sparsify import get_sparsifier


def heavy(n: int, seed: int, dtype=np.float32) -> np.ndarray:
    """Heavy-tailed, with exact zeros and ties at a few magnitudes."""
    rng = np.random.default_rng(seed)
    x = rng.standard_t(3, n) * 1e-3
    x[: n // 20] = 0.0
    x[n // 20 : n // 10] = np.round(x[n // 20 : n // 10], 4)  # many ties
    return rng.permutation(x).astype(dtype)


# ---- part 1: the kernel against references ------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_topk_ratio_equals_a_full_sort(dtype):
    x = heavy(20_000, 1, dtype)
    for k in (1, 7, 200, 1000, 19_999):
        assert kernel.topk_ratio(x, k) == pytest.approx(topk_ratio_by_sort(x, k), rel=1e-13)
    assert kernel.topk_ratio(x, 0) == 1.0 and kernel.topk_ratio(x, x.size) == 0.0
    ties = np.repeat(np.array([3.0, -2.0, 1.0]), [5, 10, 5])
    assert kernel.topk_ratio(ties, 8) == pytest.approx(topk_ratio_by_sort(ties, 8), rel=1e-14)
    assert kernel.topk_ratio(torch.from_numpy(x), 200) == kernel.topk_ratio(x, 200)


def test_topk_ratio_undefined_and_refused_inputs():
    assert math.isnan(kernel.topk_ratio(np.zeros(10), 3))
    with pytest.raises(ValueError, match="u has 1 non-finite values"):
        kernel.topk_ratio(np.array([1.0, np.nan, 2.0]), 1)
    with pytest.raises(ValueError, match=r"k = 4 is outside the allowed range \[0, d = 3\]"):
        kernel.topk_ratio(np.ones(3), 4)


def test_delta_from_sums_follows_its_definition():
    total = np.array([4.0, 0.0, 2.0, 9.0])
    kept = np.array([1.0, 0.0, 2.0 + 1e-16, 9.0])
    got = kernel.delta_from_kept(kept, total, complete=np.array([False, False, False, True]))
    np.testing.assert_array_equal(got, [0.75, np.nan, 0.0, 0.0])  # NaN: nothing to contract
    np.testing.assert_array_equal(kernel.delta_from_rest([3.0, 1.0], [4.0, 0.0]), [0.75, np.nan])
    assert kernel.delta_from_kept(1.0, 4.0) == 0.75 and math.isnan(kernel.delta_from_kept(0, 0))


def test_selection_ratio_equals_a_dense_mask():
    x = heavy(5_000, 2, np.float64)
    idx = np.random.default_rng(3).choice(x.size, 400, replace=False)
    sent = np.zeros_like(x)
    sent[idx] = x[idx]
    ref = float(np.sum((x - sent) ** 2) / np.sum(x**2))
    assert kernel.selection_ratio(x, idx) == pytest.approx(ref, rel=1e-13)


def test_recall_counts_ties_as_favourably_as_a_top_k_set_allows():
    x = np.array([5.0, -4.0, 3.0, 3.0, -3.0, 3.0, 1.0, 0.0])  # k = 4: tau = 3, 2 above, 4 tied
    cases = {(0, 1, 2, 3): 1.0, (2, 3, 4, 5): 0.5, (0, 2, 3, 4): 0.75, (6, 7): 0.0, (0, 5): 0.5}
    for sel, want in cases.items():
        idx = np.array(sel)
        assert kernel.recall(np.abs(x), idx, 4) == want == recall_by_enumeration(x, idx, 4)
    rng = np.random.default_rng(4)
    for trial in range(200):
        v = rng.integers(-3, 4, 14).astype(np.float64)  # ties at every magnitude
        k = int(rng.integers(1, 14))
        idx = rng.choice(14, int(rng.integers(0, 15)), replace=False)
        assert kernel.recall(np.abs(v), idx, k) == recall_by_enumeration(v, idx, k), trial
        tau, above = kernel.kth_largest(np.abs(v), k)
        assert kernel.recall_given_kth(torch.from_numpy(np.abs(v[idx])), tau, above, k) == \
            recall_by_enumeration(v, idx, k)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_central_sums_and_shape_match_scipy_on_host_and_tensor(monkeypatch, dtype):
    monkeypatch.setattr(kernel, "CHUNK", 1000)  # several chunks on the host path
    x = heavy(4_321, 5, dtype) + dtype(0.25)
    ref = moments_by_scipy(x)
    x64 = x.astype(np.float64)
    for sums in (kernel.central_sums(x), kernel.central_sums(torch.from_numpy(x))):
        assert sums.n == x.size and sums.mean == pytest.approx(ref["mean"], rel=1e-14)
        for p, m in ((2, sums.m2), (3, sums.m3), (4, sums.m4)):
            assert m == pytest.approx(np.sum((x64 - x64.mean()) ** p), rel=1e-9, abs=1e-20), p
        g1, g2 = kernel.skew_kurtosis(sums.m2 / sums.n, sums.m3 / sums.n, sums.m4 / sums.n)
        assert g1 == pytest.approx(stats.skew(x64), rel=1e-9)
        assert g2 == pytest.approx(stats.kurtosis(x64), rel=1e-9)
    assert kernel.central_sums(np.array([])).n == 0


def test_block_central_sums_equal_each_blocks_own_to_float64_rounding():
    """starts: many blocks at once (a mean far from zero, a constant block, one element, a
    heavy tail on a huge offset) equal central_sums block by block to float64 rounding."""
    rng = np.random.default_rng(5)
    blocks = [heavy(128, 1, np.float32) * np.float32(1e-3) + np.float32(7.0), np.full(16, 0.25),
              np.zeros(32), np.array([3.0]), rng.standard_normal(4096) * 1e6 - 1e9]
    starts = np.cumsum([0] + [b.size for b in blocks[:-1]])
    got = kernel.central_sums(np.concatenate(blocks, dtype=np.float64), starts=starts)
    for i, block in enumerate(blocks):
        want = kernel.central_sums(block.astype(np.float64))
        y = block.astype(np.float64) - want.mean
        scale = [abs(want.mean), *(float(np.sum(np.abs(y) ** p)) for p in (2, 3, 4))]
        assert got.n[i] == want.n
        for j, (g, w) in enumerate(zip(got[1:], want[1:])):
            assert abs(g[i] - w) <= 1e-13 * scale[j], (i, j)


def test_shape_is_undefined_for_a_constant_and_vectorised():
    g1, g2 = kernel.skew_kurtosis(np.array([0.0, 2.0]), np.array([0.0, 1.0]), np.array([0.0, 12.0]))
    assert np.isnan(g1[0]) and np.isnan(g2[0])
    assert g1[1] == pytest.approx(1.0 / 2.0**1.5) and g2[1] == pytest.approx(0.0)
    assert math.isnan(kernel.excess_kurtosis(0.0, 1.0)) and math.isnan(kernel.skewness(-1.0, 1.0))


@pytest.mark.parametrize("stds", [0.0, 3.0, -10.0])
def test_central_from_power_sums_for_a_shift_near_the_mean(stds):
    """Any shift c within ~10 standard deviations of the mean (n m^2 <= 100 M2: the recorder
    reruns rows beyond that exactly, because the expansion then cancels digits)."""
    x = heavy(3_000, 6, np.float64) + 0.3
    shift = x.mean() + stds * x.std()
    y = x - shift
    s = tuple(np.sum(y**p) for p in (1, 2, 3, 4))
    m, m2, m3, m4 = kernel.central_from_power_sums(x.size, s)
    ref = kernel.central_sums(x)
    assert shift + m == pytest.approx(ref.mean, rel=1e-12)
    for got, want in ((m2, ref.m2), (m3, ref.m3), (m4, ref.m4)):
        assert got == pytest.approx(want, rel=1e-9)


def test_accept_step_accepts_exactly_when_the_candidates_hold_the_top_k():
    mag = np.abs(heavy(10_000, 7, np.float64))
    ordered = np.sort(mag)[::-1]
    for k in (1, 50, 600):
        for thr in (ordered[k - 1], ordered[k - 1] * (1 + 1e-9), ordered[k] * 0.5, ordered[0] + 1):
            cand = kernel.verified_candidates(mag, k, thr)
            holds = int(np.sum(mag >= thr)) >= k
            assert (cand is not None) == holds == kernel.verified(int(np.sum(mag >= thr)), k)
            if cand is not None:  # the top k are among the candidates
                np.testing.assert_array_equal(np.sort(cand)[::-1][:k], ordered[:k])
    t = torch.from_numpy(mag)
    assert kernel.verified_candidates(t, 3, float(ordered[2])).numel() == 3
    assert kernel.verified_candidates(t, 3, float(ordered[2]) * 1.0001) is None


def test_segmented_candidate_pass_equals_a_float64_count_per_segment():
    # ties, zeros and a segment with no candidate; chunks smaller than the vector
    g = np.random.default_rng(4)
    lengths = (500, 3, 1200, 800)
    x = np.round(g.standard_t(3, sum(lengths)) * 4) / 4
    x[g.random(x.size) < 0.3] = 0.0
    x[500:503] = 0.0  # segment 1: all zeros, no candidate
    seg = np.repeat(np.arange(4), lengths)
    thr = np.array([0.5, 0.25, 1.0, np.inf])  # segment 3: no candidate
    ks = np.array([40, 1, 200, 5])
    old_chunk, kernel.CHUNK = kernel.CHUNK, 256
    try:
        got = kernel.verified_candidates(x, ks, thr, segments=seg)
    finally:
        kernel.CHUNK = old_chunk
    for s in range(4):
        ref = np.abs(x[seg == s]).astype(np.float64)
        ref = ref[ref >= thr[s]]
        assert got.counts[s] == ref.size
        assert bool(got.verified[s]) == (ref.size >= ks[s])
        np.testing.assert_array_equal(np.sort(got.values[got.segment == s]), np.sort(ref))
    assert got.counts[1] == 0 and got.counts[3] == 0 and not got.verified[3]
    for k in (1, 40, 10_000):  # counted: the count even when the guess is too high
        found, n = kernel.verified_candidates(torch.from_numpy(np.abs(x)), k, 0.5, counted=True)
        assert n == int(np.sum(np.abs(x) >= 0.5)) and (found is not None) == (n >= k)


def test_arrays_from_anywhere():
    assert kernel.to_numpy(torch.ones(2, 3, dtype=torch.bfloat16)).dtype == np.float32
    assert kernel.to_numpy(torch.arange(3)).dtype == np.int64  # indices keep their type
    assert kernel.to_numpy([[1, 2]]).shape == (1, 2)
    f32 = np.ones(4, np.float32)
    assert kernel.as_float_array(f32) is f32  # no copy
    assert kernel.as_float_array(np.ones(2, np.int16)).dtype == np.float32
    assert kernel.as_float_array(np.ones(2, np.int64)).dtype == np.float64
    assert kernel.as_float_array(torch.ones(2, dtype=torch.float16)).dtype == np.float32
    with pytest.raises(ValueError, match="complex"):
        kernel.as_float_array(np.ones(2, np.complex64))
    with pytest.raises(ValueError, match="real numbers"):
        kernel.as_float_array(np.array(["a"]))


# ---- part 2: every user goes through the kernel ---------------------------------------------

LAYOUT = [("a", 0, 3_000), ("b", 3_000, 40), ("c", 3_040, 1_960)]
D = 5_000


def rows_of(x: np.ndarray, plan):
    return [x[int(a) : int(a) + int(n)] for a, n in zip(plan.starts, plan.numel)]


def test_the_recorder_moments_are_the_kernels(spy):
    from_sums = spy(kernel, "central_from_power_sums")
    shape = spy(kernel, "skew_kurtosis")
    exact = spy(kernel, "central_sums")
    x = torch.from_numpy(np.stack([heavy(D, 8), heavy(D, 9)]))
    x[1, 3_000:3_040] = 1e4 + x[1, 3_000:3_040]  # a layer far from the mean: exact rerun
    plan = plan_rows(segments_of(LAYOUT, D), (0.01,), True)
    mom = row_moments(power_sums(x, x.abs(), plan.segments.lengths), plan, list(x))
    assert from_sums and shape and exact  # the refinement reran a row through the kernel
    for kv in range(2):
        for r, seg in enumerate(rows_of(x[kv].numpy(), plan)):
            sums = kernel.central_sums(seg)
            g1, g2 = kernel.skew_kurtosis(sums.m2 / sums.n, sums.m3 / sums.n, sums.m4 / sums.n)
            assert float(mom.skew[kv, r]) == pytest.approx(g1, rel=1e-7, abs=1e-9)
            assert float(mom.excess_kurtosis[kv, r]) == pytest.approx(g2, rel=1e-7, abs=1e-9)


def test_the_recorder_contraction_and_selection_columns_are_the_kernels(spy):
    kept = spy(kernel, "delta_from_kept")
    recalls = spy(kernel, "recall_given_kth")
    x = torch.from_numpy(heavy(D, 10))[None]
    plan = plan_rows(segments_of(LAYOUT, D), (0.01, 0.1), True)
    mom = row_moments(power_sums(x, x.abs(), plan.segments.lengths), plan, list(x))
    tops = RowTops(x.abs(), mom.max_abs, plan, sumsq=mom.sumsq)
    ratio = topk_ratio_rows(tops.top_sums(), mom.sumsq, plan)
    assert kept
    kth = tops.kth()
    published = {"gaussiank-2019": get_sparsifier("gaussiank-2019")}  # deterministic
    cols = selection_rows(x[0], plan, mom.sumsq[0], kth[0], tops.count_above(kth)[0], published)
    assert len(recalls) == plan.rows * 2 and len(kept) == 1 + plan.rows * 2
    for r, seg in enumerate(rows_of(x[0].double().numpy(), plan)):
        for j in range(2):
            k = int(plan.k[r, j])
            assert float(ratio[0, r, j]) == pytest.approx(kernel.topk_ratio(seg, k), rel=1e-9)
            idx = published["gaussiank-2019"].select(torch.from_numpy(seg).float(), k).numpy()
            assert cols["gaussiank_2019_recall"][r, j] == kernel.recall(np.abs(seg), idx, k)
            assert cols["gaussiank_2019_ratio"][r, j] == pytest.approx(
                kernel.selection_ratio(seg, idx), rel=1e-9)


def test_the_recorder_end_to_end_goes_through_the_kernel(tmp_path, spy):
    names = ("delta_from_kept", "recall_given_kth", "skew_kurtosis", "central_from_power_sums",
             "verified", "to_numpy", "as_float_array")
    calls = {name: spy(kernel, name) for name in names}
    u = torch.from_numpy(heavy(60_000, 11))
    with Recorder(tmp_path, densities=[0.01], sparsifiers=["gaussiank-2019"]) as rec:
        rec.record(0, 0, u=u, layout=[("w", 0, 50_000), ("b", 50_000, 10_000)])
    assert not [name for name, seen in calls.items() if not seen]


def test_the_public_contraction_ratio_is_the_kernels():
    assert contraction.topk_ratio is kernel.topk_ratio  # the public contract, delegated


def test_the_statistics_are_the_kernels(spy):
    names = ("topk_ratio", "selection_ratio", "recall", "delta_from_rest", "central_sums",
             "skew_kurtosis", "excess_kurtosis", "as_float_array")
    calls = {name: spy(kernel, name) for name in names}
    x = heavy(30_000, 12)
    idx = get_sparsifier("gaussiank-2019").select(torch.from_numpy(x), 300).numpy()
    q = selection.quality(x, idx, 300)
    x64 = x.astype(np.float64)
    assert q["recall"] == kernel.recall(np.abs(x64), idx, 300)
    assert q["ratio"] == kernel.selection_ratio(x64, idx)
    assert q["topk_ratio"] == kernel.topk_ratio(x64, 300)
    report = contraction.analyze(x, [0.01])
    assert report.ratios["topk_ratio"].iloc[0] == pytest.approx(kernel.topk_ratio(x, 300),
                                                                rel=1e-12)
    out = normality.battery(x, max_n=5_000)
    sums = kernel.central_sums(finite_values(x)[0])
    n = sums.n
    assert (out["skew"], out["excess_kurtosis"]) == tuple(
        float(g) for g in kernel.skew_kurtosis(sums.m2 / n, sums.m3 / n, sums.m4 / n))
    fits.fit_student_t(x64[x64 != 0][:5_000])
    assert not [name for name, seen in calls.items() if not seen]



def test_tail_sums_is_the_float64_tail_of_top_k_for_every_k():
    """The one top-k tail engine against math.fsum of the sorted squares (exact rounding)."""
    rng = np.random.default_rng(7)
    x = rng.standard_t(3, size=5000) * np.exp(rng.normal(size=5000))
    mag = np.sort(np.abs(x))[::-1]
    ks = [0, 1, 17, 500, 4999, 5000]
    top, below = mag[:4000], math.fsum(mag[4000:] ** 2)
    got = kernel.tail_sums(top, [k for k in ks if k <= 4000], below)
    for k, value in zip([k for k in ks if k <= 4000], got):
        assert math.isclose(value, math.fsum(mag[k:] ** 2), rel_tol=1e-13)
    for k in ks:  # topk_ratio runs on the same engine
        want = math.fsum(mag[k:] ** 2) / math.fsum(mag**2)
        assert math.isclose(kernel.topk_ratio(x, k), want, rel_tol=1e-12, abs_tol=1e-300)


def test_tail_sums_over_blocks_is_each_blocks_own_float64_tail():
    """Blocks laid end to end, a tiny one between huge ones (no energy leaks across), an empty
    one, k = 0 and k = the block's length, ks unsorted and repeated; against math.fsum."""
    rng = np.random.default_rng(8)
    blocks = [np.sort(np.abs(rng.standard_t(3, n)) * scale)[::-1]
              for n, scale in ((3000, 1e6), (40, 1e-6), (0, 1.0), (700, 1e6))]
    starts = np.cumsum([0] + [b.size for b in blocks[:-1]])
    ks = np.array([[0, 3000, 17, 17], [40, 0, 1, 39], [0, 0, 0, 0], [5, 700, 0, 699]])
    got = kernel.tail_sums(np.concatenate(blocks), ks, starts=starts)
    for r, block in enumerate(blocks):
        for j, k in enumerate(ks[r]):
            assert math.isclose(got[r, j], math.fsum(block[k:] ** 2), rel_tol=1e-13)
    with pytest.raises(ValueError, match="allowed"):
        kernel.tail_sums(blocks[1], [41])


def test_the_candidate_pass_keeps_every_magnitude_at_the_threshold_and_the_energy_below():
    """Chunked over more than two CHUNKs of signed float32 values, against a float64 pass."""
    rng = np.random.default_rng(3)
    x = rng.laplace(size=2 * kernel.CHUNK + 12345).astype(np.float32)
    x[::7] = 0.0
    mag = np.abs(x.astype(np.float64))
    thr = float(np.sort(mag)[-5000])
    cand, below = kernel.verified_candidates(x, 5000, thr, below=True)
    assert np.array_equal(np.sort(cand.astype(np.float64)), np.sort(mag[mag >= thr]))
    assert math.isclose(below, math.fsum(mag[mag < thr] ** 2), rel_tol=1e-12)
    assert kernel.verified_candidates(x, int((mag >= thr).sum()) + 1, thr, below=True) is None
    assert kernel.verified_candidates(x[:0], 0, thr, below=True)[1] == 0.0
