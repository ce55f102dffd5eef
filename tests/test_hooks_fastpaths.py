"""The recorder's fast paths against slow, obvious references on the same vectors.

Chunked power sums against float64 numpy sums; the thresholded all-rows top-k against a full
sort (and against the row-by-row selection); the residual check against its definition; the
device (torch) power sums against the CPU ones; and a whole record on a ResNet-20-shaped
layout, where the fast paths do the work, against numpy/scipy float64.
"""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from topkscope.analysis import contraction
from topkscope.analysis.runs import load
from topkscope.hooks import GLOBAL, Recorder
from topkscope.hooks.power_sums import ChunkedSums, power_sums, residual_selection, row_moments
from topkscope.hooks.rows import plan_rows, segments_of
from topkscope.hooks.topk_sums import RowTops, eligible_rows, threshold_tops, topk_ratio_rows
from topkscope.sparsify import get_sparsifier, k_from_density

# a conv-net-like layout: big and small layers, tiny bias/BN rows, and a gap before the last
LAYOUT = [("conv1.weight", 0, 432), ("bn1.weight", 432, 16), ("bn1.bias", 448, 16),
          ("conv2.weight", 464, 9216), ("bn2.weight", 9680, 32), ("conv3.weight", 9712, 36864),
          ("bn3.bias", 46576, 64), ("fc.weight", 46640, 6400), ("fc.bias", 53100, 10)]
D = 53_110


def gradient_like(seed: int, d: int = D, dtype=torch.float32) -> torch.Tensor:
    """Student-t body (heavy tails), a layer shifted far from zero, dead units (exact zeros)."""
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(4, d, generator=gen, dtype=torch.float64)
    t3 = z[0] / (z[1:].square().mean(0)).sqrt()  # Student-t(3), drawn from gen alone
    x = t3 * 1e-3
    x += torch.randn(d, generator=gen, dtype=torch.float64) * 1e-4
    x[9712:12000] = 0.0
    x[46640:53040] += 2e-2  # fc.weight sits far from the vector's mean
    return x.to(dtype)


def sparse_spikes(seed: int, d: int = D) -> torch.Tensor:
    """A few huge values over a tiny floor: the Gaussian threshold guess lies far too high."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(d, generator=gen) * 1e-6
    x[torch.randperm(d, generator=gen)[: d // 400]] = 10.0 + torch.rand(d // 400, generator=gen)
    return x


def ties_and_constants(seed: int, d: int = D) -> torch.Tensor:
    """Values on a coarse grid (ties at every k-th value), an all-zero and a constant layer."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(-4, 5, (d,), generator=gen).float() * 0.5
    x[464:9680] = 0.0
    x[36864:46576] = 0.25
    return x


def with_nan(seed: int, d: int = D) -> torch.Tensor:
    x = gradient_like(seed, d)
    x[500] = float("nan")  # poisons conv2 and the whole model, not the other layers
    return x


MAKERS = [gradient_like, sparse_spikes, ties_and_constants, with_nan]


def sorted_top(x: np.ndarray, k: int) -> np.ndarray:
    return -np.sort(-np.abs(x))[:k]


@pytest.mark.parametrize("maker", MAKERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("per_layer", [True, False])
@pytest.mark.parametrize("densities", [(0.001, 0.01), (0.003, 0.05, 0.3, 1.0)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_all_row_tops_equal_a_full_sort_and_the_row_loop(maker, per_layer, densities, dtype):
    x = maker(7).to(dtype)
    plan = plan_rows(segments_of(LAYOUT, D), densities, per_layer)
    absx = x.abs()[None]
    max_abs = torch.tensor([[float(absx[0, a : a + n].max()) for a, n in
                             zip(plan.starts, plan.numel)]], dtype=torch.float64)
    fast = RowTops(absx, max_abs, plan)
    slow = RowTops(absx, max_abs, plan, method="rows")
    np.testing.assert_array_equal(fast.tops, slow.tops)
    kth, sums = fast.kth(), fast.top_sums()
    for r in range(plan.rows):
        row = x[plan.starts[r] : plan.starts[r] + plan.numel[r]].double().numpy()
        if np.isnan(row).any():
            continue  # NaN rows: their statistics are NaN whatever the order
        ref = sorted_top(row, int(plan.kmax[r]))
        for j, k in enumerate(plan.k[r]):
            assert float(kth[0, r, j]) == ref[k - 1]
            assert math.isclose(float(sums[0, r, j]), float(np.sum(ref[:k] ** 2)),
                                rel_tol=1e-12)
    torch.testing.assert_close(fast.count_above(kth), slow.count_above(kth), rtol=0, atol=0)


def test_threshold_tops_answers_realistic_rows_and_refuses_misleading_ones():
    plan = plan_rows(segments_of(LAYOUT, D), (0.001, 0.01), True)

    def answered(x: torch.Tensor) -> tuple[int, int]:
        a = x.abs().numpy()
        sq = np.array([float(np.sum(a[s : s + n].astype(np.float64) ** 2))
                       for s, n in zip(plan.starts, plan.numel)])
        rows = eligible_rows(plan, sq)
        found = threshold_tops(a, plan, sq, rows)
        for r, top in found.items():  # whatever it answers is exact
            seg = a[plan.starts[r] : plan.starts[r] + plan.numel[r]]
            np.testing.assert_array_equal(top, sorted_top(seg, int(plan.kmax[r])))
        return len(found), len(rows)

    got, tried = answered(gradient_like(3))
    assert tried >= 4 and got >= tried - 1  # heavy tails: the Gaussian guess finds enough
    got, tried = answered(sparse_spikes(3))
    assert got < tried  # spikes: some rows have too few candidates and are left to the caller


@pytest.mark.parametrize("chunk", [1, 7, 500, 1 << 16])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_chunked_sums_equal_float64_segment_sums(chunk, dtype):
    x = gradient_like(11, 2_000).numpy().astype(dtype)
    lengths = (3, 1, 996, 700, 300)
    shift = 1.5e-3
    got = ChunkedSums(chunk).sums(x, shift, lengths)
    ws = ChunkedSums(chunk)
    ws.sums(x[:1000], 0.0, (1000,))  # the same work space serves other layouts in between
    np.testing.assert_array_equal(ws.sums(x, shift, lengths), got)
    y = x.astype(np.float64) - shift
    start = 0
    for s, n in enumerate(lengths):
        seg = y[start : start + n]
        for p in range(4):
            assert math.isclose(got[p, s], float(np.sum(seg ** (p + 1))), rel_tol=1e-11,
                                abs_tol=1e-300)
        start += n


def test_chunked_sums_reject_a_vector_of_the_wrong_length():
    with pytest.raises(ValueError, match="1-D array of 10 elements"):
        ChunkedSums().sums(np.zeros(9), 0.0, (4, 6))
    with pytest.raises(ValueError, match="chunk = 0"):
        ChunkedSums(0)


@pytest.mark.parametrize("maker", [gradient_like, ties_and_constants, with_nan],
                         ids=lambda f: f.__name__)
def test_device_and_cpu_power_sums_give_the_same_moments(maker):
    x = torch.stack([maker(5), maker(6)])
    plan = plan_rows(segments_of(LAYOUT, D), (0.01,), True)
    lengths = plan.segments.lengths
    cpu = row_moments(power_sums(x, None, lengths), plan, list(x))
    dev = row_moments(power_sums(x, x.abs(), lengths, on_device=True), plan, list(x))
    for name in ("mean", "std", "skew", "excess_kurtosis", "sumsq", "max_abs", "zero_frac",
                 "nonfinite"):
        torch.testing.assert_close(getattr(cpu, name), getattr(dev, name), rtol=1e-9,
                                   atol=1e-12, equal_nan=True, msg=name)
    for kv in range(2):
        for r in range(plan.rows):
            seg = x[kv, plan.starts[r] : plan.starts[r] + plan.numel[r]].double().numpy()
            if np.isnan(seg).any():
                assert math.isnan(float(cpu.std[kv, r])) and float(cpu.nonfinite[kv, r]) >= 1
                continue
            assert math.isclose(float(cpu.std[kv, r]), seg.std(), rel_tol=1e-9)
            assert float(cpu.zero_frac[kv, r]) == np.mean(seg == 0)
            if seg.std() > 0:
                assert math.isclose(float(cpu.skew[kv, r]), stats.skew(seg), rel_tol=1e-6,
                                    abs_tol=1e-9)


def test_residual_selection_follows_its_definition():
    gen = torch.Generator().manual_seed(2)
    u = torch.randn(1000, generator=gen)
    sel = torch.topk(u.abs(), 20).indices
    e = u.index_fill(0, sel, 0)
    assert residual_selection(u, e, sel, e_given=True) is sel
    assert residual_selection(u, None, sel, e_given=True) is None
    assert residual_selection(u, e, None, e_given=True) is None
    assert residual_selection(u, e, torch.cat([sel, sel[:1]]), e_given=True) is None  # repeats
    other = e.clone()
    other[0 if 0 not in sel else 1] += 1.0  # differs outside the selection
    assert residual_selection(u, other, sel, e_given=True) is None
    kept = e.clone()
    kept[sel[0]] = u[sel[0]]  # a selected entry not zeroed
    assert residual_selection(u, kept, sel, e_given=True) is None
    nan_u = u.clone()
    nan_u[int(sel[0])] = float("nan")  # NaN inside the selection, zeroed in e: still a residual
    assert residual_selection(nan_u, nan_u.index_fill(0, sel, 0), sel, e_given=True) is sel
    nan_u[3 if 3 not in sel else 4] = float("nan")  # NaN outside: e is measured on its own
    assert residual_selection(nan_u, nan_u.index_fill(0, sel, 0), sel, e_given=True) is None
    assert residual_selection(u, e, torch.arange(200), e_given=False) is None  # dense-ish


def test_a_record_on_a_convnet_layout_matches_float64_references(tmp_path):
    torch.manual_seed(0)
    g = gradient_like(21)
    e_prev = gradient_like(22) * 0.5
    u = g + e_prev
    k = k_from_density(0.001, D)
    sel = torch.topk(u.abs(), k).indices
    e = u.index_fill(0, sel, 0)
    densities = [0.001, 0.01]
    with Recorder(tmp_path, densities=densities, sparsifiers=["gaussiank"]) as rec:
        rec.record(0, 0, u=u, e=e, g=g, layout=LAYOUT, selected=sel)
    s = load(tmp_path).stats
    rows = [(GLOBAL, 0, D)] + LAYOUT
    assert len(s) == 3 * len(rows) * len(densities)
    for kind, vec in (("g", g), ("u", u), ("e", e)):
        for layer, a, n in rows:
            x = vec[a : a + n].double().numpy()
            got = s[(s.kind == kind) & (s.layer == layer)].sort_values("density")
            assert list(got.density) == densities
            row = got.iloc[0]
            assert math.isclose(row["mean"], x.mean(), rel_tol=1e-6, abs_tol=1e-15)
            assert math.isclose(row["std"], x.std(), rel_tol=1e-6)
            assert math.isclose(row["norm"], np.linalg.norm(x), rel_tol=1e-6)
            assert math.isclose(row["skew"], stats.skew(x), rel_tol=1e-6, abs_tol=1e-9)
            assert math.isclose(row.excess_kurtosis, stats.kurtosis(x), rel_tol=1e-6,
                                abs_tol=1e-9)
            assert row.max_abs == np.abs(x).max() and row.zero_frac == np.mean(x == 0)
            for _, r in got.iterrows():
                kk = k_from_density(r.density, n)
                if kind == "u":
                    ref = contraction.topk_ratio(x, kk)
                    assert math.isclose(r.topk_ratio, ref, rel_tol=1e-6, abs_tol=1e-13)
                    idx = get_sparsifier("gaussiank").select(vec[a : a + n], kk).numpy()
                    v = x.copy()
                    v[idx] = 0
                    assert r.gaussiank_count == idx.size
                    assert math.isclose(r.gaussiank_ratio, (v**2).sum() / (x**2).sum(),
                                        rel_tol=1e-6, abs_tol=1e-12)
                    exact = set(np.argsort(-np.abs(x), kind="stable")[:kk])
                    if len(set(np.abs(x))) == x.size:  # no ties: the top-k set is unique
                        assert r.gaussiank_recall == len(exact & set(idx)) / kk
                else:
                    assert math.isnan(r.topk_ratio)


def test_thresholds_computed_from_the_data_when_not_given():
    x = gradient_like(4)
    plan = plan_rows(segments_of(LAYOUT, D), (0.001, 0.01), True)
    absx = x.abs()[None]
    max_abs = torch.tensor([[float(absx[0, a : a + n].max()) for a, n in
                             zip(plan.starts, plan.numel)]], dtype=torch.float64)
    sumsq = torch.tensor([[float(np.sum(x[a : a + n].double().numpy() ** 2)) for a, n in
                           zip(plan.starts, plan.numel)]], dtype=torch.float64)
    given = RowTops(absx, max_abs, plan, sumsq=sumsq)
    np.testing.assert_array_equal(RowTops(absx, max_abs, plan).tops, given.tops)
    ratio = topk_ratio_rows(given.top_sums(), sumsq, plan)
    ref = contraction.topk_ratio(x.double().numpy(), int(plan.k[0, 1]))
    assert math.isclose(float(ratio[0, 0, 1]), ref, rel_tol=1e-9)
    with pytest.raises(ValueError, match="method = 'sorted'"):
        RowTops(absx, max_abs, plan, method="sorted")


def test_the_whole_model_row_is_answered_when_a_few_large_layers_set_its_scale():
    """Many small-gradient layers and a few large ones (as ResNet-20's): one Gaussian of the
    whole model's RMS guesses too high a threshold, the mixture of the layers does not."""
    gen = torch.Generator().manual_seed(4)
    big, small = 30 * [9000], 5 * [200]
    layout, offset, parts = [], 0, []
    for i, n in enumerate(big + small):
        layout.append((f"layer{i}", offset, n))
        offset += n
        scale = 1e-3 if n == 9000 else 5e-2
        z = torch.randn(4, n, generator=gen, dtype=torch.float64)
        parts.append(z[0] / z[1:].square().mean(0).sqrt() * scale)  # Student-t(3)
    x = torch.cat(parts).float()
    plan = plan_rows(segments_of(layout, offset), (0.001, 0.01), True)
    a = x.abs().numpy()
    sq = np.array([float(np.sum(a[s : s + n].astype(np.float64) ** 2))
                   for s, n in zip(plan.starts, plan.numel)])
    single = math.sqrt(sq[0] / offset) * 2.807  # Phi^-1(1 - 0.01 / 2)
    assert (a >= single).sum() < plan.kmax[0]  # the single Gaussian's guess would miss
    found = threshold_tops(a, plan, sq, eligible_rows(plan, sq))
    assert 0 in found
    np.testing.assert_array_equal(found[0], sorted_top(a, int(plan.kmax[0])))


@pytest.mark.parametrize("maker", MAKERS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("densities", [(0.001, 0.01), (0.3,), (1.0,)])
def test_the_mixture_threshold_is_the_grid_scans_last_point_that_leaves_k(maker, densities):
    """The bisection over the threshold grid finds the point a scan of all 241 points does:
    the largest t with sum_s n_s erfc(t / (q_s sqrt 2)) >= k_0, inf where none leaves k_0."""
    from scipy import special

    from topkscope.hooks.topk_sums import _GRID, _mixture_threshold

    layout = [*LAYOUT, ("gap.filler", 53040, 60)]  # the layers cover the vector: no gap
    plan = plan_rows(segments_of(layout, D), densities, True)
    a = maker(0).abs().double().numpy()
    for scale in (1.0, 1e-6, 1e6):
        sq = np.array([float(np.sum((scale * a[s : s + n]) ** 2))
                       for s, n in zip(plan.starts, plan.numel)])
        n = plan.numel[1:].astype(np.float64)
        q = np.sqrt(sq[1:] / n)
        q = np.where(np.isfinite(q), q, 0.0)
        grid = q.max() * _GRID
        with np.errstate(all="ignore"):
            expected = (n * special.erfc(grid[:, None] / (np.maximum(q, 1e-300)
                                                          * math.sqrt(2.0)))).sum(axis=1)
        enough = np.flatnonzero(expected >= plan.kmax[0])
        scan = float(grid[enough[-1]]) if enough.size else math.inf
        if not q.max() > 0:
            scan = math.inf
        assert _mixture_threshold(plan, sq) == scan


@pytest.mark.parametrize("maker", [sparse_spikes, ties_and_constants], ids=lambda f: f.__name__)
def test_host_rows_the_one_pass_misses_are_selected_in_numpy_exactly(spy, maker):
    """Rows whose candidates fall short of k (a threshold guessed too high) go to the engine's
    top_values on their numpy view; their tops equal torch's row selection bit for bit."""
    from topkscope.hooks import topk_sums

    engine = spy(topk_sums, "top_values")
    x = maker(7)
    plan = plan_rows(segments_of(LAYOUT, D), (0.003, 0.05), True)
    absx = x.abs()[None]
    max_abs = torch.tensor([[float(absx[0, a : a + n].max()) for a, n in
                             zip(plan.starts, plan.numel)]], dtype=torch.float64)
    fast = RowTops(absx, max_abs, plan)
    host = [call for call in engine if isinstance(call[0], np.ndarray)]
    assert host  # some row was missed by the one pass and selected in numpy
    np.testing.assert_array_equal(fast.tops, RowTops(absx, max_abs, plan, method="rows").tops)


@pytest.mark.parametrize("segments", [1, 7, 300])
@pytest.mark.parametrize("share", [0.0, 0.001, 0.4, 1.0])
def test_segment_counts_equal_a_sum_per_segment(segments, share):
    """Every path of the per-segment count (few trues located, a slice count per segment for
    up to 256 segments, a byte reduceat beyond) gives each segment's number of trues."""
    from topkscope.hooks.power_sums import _segment_count

    rng = np.random.default_rng(segments)
    lengths = rng.integers(1, 2000, segments)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    mask = rng.random(int(lengths.sum())) < share
    want = [int(mask[a : a + n].sum()) for a, n in zip(starts, lengths)]
    np.testing.assert_array_equal(_segment_count(mask, starts), want)
