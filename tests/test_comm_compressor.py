"""Worker-side compression and the in-process exchange, against dense float64 references."""

from __future__ import annotations

import pytest
import torch

from tests._topk_reference import exact_topk
from topkscope.comm import Layout, SimulatedTransport, SparseUpdate, WorkerCompressor, exchange
from topkscope.comm.sparse import (
    WireFormat,
    dense_payload_bytes,
    index_dtype,
    scatter_sum,
    selected_payload_bytes,
    sparse_payload,
    sparse_payload_bytes,
)
from topkscope.sparsify import get_sparsifier

SHAPES = {"a.weight": (20, 30), "a.bias": (20,), "b.weight": (5, 20), "b.bias": (5,)}


def layout() -> Layout:
    return Layout.of((n, torch.zeros(s, requires_grad=True)) for n, s in SHAPES.items())


def test_layout_offsets_views_and_flatten():
    lay = layout()
    assert lay.d == 600 + 20 + 100 + 5
    assert lay.entries() == [("a.weight", 0, 600), ("a.bias", 600, 20), ("b.weight", 620, 100),
                             ("b.bias", 720, 5)]
    flat = torch.arange(lay.d, dtype=torch.float32)
    views = lay.views(flat)
    assert [tuple(v.shape) for v in views] == list(SHAPES.values())
    assert torch.equal(lay.flatten(views), flat)
    assert torch.equal(lay.flatten([None, views[1], None, views[3]])[600:620], views[1].flatten())
    frozen = torch.zeros(3)  # requires_grad False: not part of the gradient vector
    assert Layout.of([("x", frozen), ("y", torch.zeros(2, requires_grad=True))]).names == ("y",)


def test_sent_plus_residual_is_u_and_feedback_telescopes():
    """Over T steps: sum of what was sent + final residual == sum of gradients (float64 check)."""
    torch.manual_seed(0)
    lay = layout()
    comp = WorkerCompressor(get_sparsifier("topk"), lay)
    sent_total = torch.zeros(lay.d, dtype=torch.float64)
    grad_total = torch.zeros(lay.d, dtype=torch.float64)
    for _ in range(6):
        g = torch.randn(lay.d)
        prev = comp.feedback.residual("__global__")
        prev = None if prev is None else prev.clone()
        out = comp.compress(g, 0.05, keep=True)
        expected_u = g if prev is None else g + prev
        assert torch.equal(out.u, expected_u)
        dense_sent = torch.zeros(lay.d)
        dense_sent[out.update.indices.long()] = out.update.values
        assert torch.equal(dense_sent + out.e, out.u)                 # s + e == u, exactly
        assert set(out.update.indices.tolist()) == set(exact_topk(out.u, 36).tolist())
        sent_total += dense_sent.double()
        grad_total += g.double()
    residual = comp.feedback.residual("__global__").double()
    torch.testing.assert_close(sent_total + residual, grad_total, rtol=0, atol=1e-5)


def test_layerwise_selects_k_per_tensor():
    torch.manual_seed(1)
    lay = layout()
    comp = WorkerCompressor(get_sparsifier("topk"), lay, selection="layerwise")
    u = torch.randn(lay.d)
    idx = comp.compress(u, 0.1).update.indices.long()
    for name, off, n in lay.entries():
        mine = idx[(idx >= off) & (idx < off + n)] - off
        k = max(1, round(0.1 * n))
        assert set(mine.tolist()) == set(exact_topk(u[off:off + n], k).tolist()), name
    assert comp.target_k(0.1) == idx.numel() == 60 + 2 + 10 + 1
    assert WorkerCompressor(get_sparsifier("topk"), lay).target_k(0.1) == round(0.1 * lay.d)


@pytest.mark.parametrize("selection", ["global", "layerwise"])
def test_held_tensors_are_not_sent_and_stay_whole_in_the_residual(selection):
    """held (tensors DDP will not update this step): nothing of theirs is selected, their u
    stays in e, and the rest is selected as if the model were only the tensors not held."""
    torch.manual_seed(2)
    lay = layout()
    comp = WorkerCompressor(get_sparsifier("topk"), lay, selection=selection)
    u = torch.randn(lay.d) * torch.linspace(1, 3, lay.d)  # the held b.weight holds the largest
    out = comp.compress(u, 0.1, keep=True, held=(2,))
    idx = out.update.indices.long()
    off, n = lay.offsets[2], lay.numels[2]
    assert not ((idx >= off) & (idx < off + n)).any()
    assert torch.equal(out.e[off : off + n], u[off : off + n])
    sent = torch.zeros(lay.d)
    sent[idx] = out.update.values
    assert torch.equal(sent + out.e, u)
    rest = torch.cat([u[:off], u[off + n :]])
    if selection == "global":
        expected = exact_topk(rest, round(0.1 * rest.numel()))
        expected = torch.where(expected >= off, expected + n, expected)
        assert set(idx.tolist()) == set(expected.tolist())
    assert comp.target_k(0.1, (2,)) == idx.numel() == (
        round(0.1 * rest.numel()) if selection == "global" else 60 + 2 + 1)
    nothing = comp.compress(u, 0.1, keep=True, held=(0, 1, 2, 3))
    assert nothing.update.count == 0 and comp.target_k(0.1, (0, 1, 2, 3)) == 0
    assert torch.equal(nothing.e, nothing.u)


def test_without_error_feedback_nothing_is_kept():
    lay = layout()
    comp = WorkerCompressor(get_sparsifier("topk"), lay, error_feedback=False)
    g = torch.randn(lay.d)
    first = comp.compress(g, 0.01).update
    second = comp.compress(g, 0.01).update
    assert torch.equal(first.indices, second.indices) and torch.equal(first.values, second.values)
    assert comp.feedback.residual("__global__") is None


def test_compress_rejects_a_wrong_sized_gradient():
    comp = WorkerCompressor(get_sparsifier("topk"), layout())
    with pytest.raises(ValueError, match="d = 725"):
        comp.compress(torch.zeros(10), 0.1)


def test_scatter_sum_adds_duplicates_and_keeps_every_contribution():
    ups = [SparseUpdate(torch.tensor([1.0, 2.0]), torch.tensor([0, 3])),
           SparseUpdate(torch.tensor([]), torch.tensor([], dtype=torch.int64)),
           SparseUpdate(torch.tensor([10.0, 20.0, 30.0]), torch.tensor([3, 4, 0]))]
    total = scatter_sum(ups, 6, torch.float32, "cpu")
    assert total.tolist() == [31.0, 0.0, 0.0, 12.0, 20.0, 0.0]
    assert torch.equal(scatter_sum(ups, 6, torch.float32, "cpu", scale=0.5), total / 2)
    with pytest.raises(ValueError, match=r"outside \[0, 6\)"):
        scatter_sum([SparseUpdate(torch.tensor([1.0]), torch.tensor([6]))], 6, torch.float32, "cpu")


def test_payload_bytes():
    assert index_dtype(10) == torch.int32 and index_dtype(2**31) == torch.int64
    # counts 3 and 7: both pad to 7 (value 4 B + index 4 B) plus an 8-byte count each
    assert sparse_payload_bytes([3, 7], 4, 4) == 2 * (8 + 7 * 8)
    assert sparse_payload_bytes([0, 0], 4, 4) == 16
    assert dense_payload_bytes(4, 1000, 4) == 16000
    assert selected_payload_bytes([3, 7], 4, 4) == 10 * 8  # the pairs alone
    # packed fields: 3-bit values and 5-bit indices, each worker's rounded up to whole bytes;
    # the wire pads both workers to 7 and adds the counts and 12 bytes of tables each
    encoded = sparse_payload([3, 7], WireFormat(3, 5, 12))
    assert encoded.selected == (2 + 2) + (3 + 5)
    assert (encoded.values, encoded.indices, encoded.side, encoded.counts) == (6, 10, 24, 16)
    assert encoded.total == 6 + 10 + 24 + 16


def test_wire_bytes_are_the_selected_pairs_plus_counts_plus_padding_to_the_largest_count():
    """An approximate selector's workers send different counts: every worker's share on the
    wire is the largest count's, so bytes_sent exceeds payload_bytes by 8 B per worker and
    the padded pairs, counted one by one here."""
    torch.manual_seed(3)
    lay, P = layout(), 3
    comps = [WorkerCompressor(get_sparsifier("gaussiank-2019"), lay) for _ in range(P)]
    grads = [torch.distributions.StudentT(1.5 + p).sample((lay.d,)) for p in range(P)]
    result = exchange(SimulatedTransport(P), comps, grads, 0.05)
    assert len(set(result.counts)) > 1  # the workers' counts differ
    pair = 4 + 4  # float32 value, int32 index
    assert result.payload_bytes == sum(result.counts) * pair
    padding = sum(max(result.counts) - c for c in result.counts) * pair
    assert result.bytes_sent == result.payload_bytes + 8 * P + padding
    dense = exchange(SimulatedTransport(2), [WorkerCompressor(get_sparsifier("dense"), lay)
                                             for _ in range(2)], grads[:2], 0.05)
    assert dense.payload_bytes == dense.bytes_sent == 2 * lay.d * 4


@pytest.mark.parametrize("selection", ["global", "layerwise"])
def test_simulated_exchange_equals_the_dense_mean(selection):
    torch.manual_seed(2)
    lay, P, rho = layout(), 3, 0.02
    comps = [WorkerCompressor(get_sparsifier("topk"), lay, selection) for _ in range(P)]
    residuals = [torch.zeros(lay.d, dtype=torch.float64) for _ in range(P)]
    for _ in range(3):
        grads = [torch.randn(lay.d) for _ in range(P)]
        result = exchange(SimulatedTransport(P), comps, grads, rho)
        expected = torch.zeros(lay.d, dtype=torch.float64)
        for p in range(P):
            u = residuals[p] + grads[p].double()
            mask = torch.zeros(lay.d, dtype=torch.bool)
            if selection == "global":
                mask[exact_topk(u, round(rho * lay.d))] = True
            else:
                for _, off, n in lay.entries():
                    mask[off + exact_topk(u[off:off + n], max(1, round(rho * n)))] = True
            expected += torch.where(mask, u, 0.0)
            residuals[p] = torch.where(mask, 0.0, u)
        torch.testing.assert_close(result.mean.double(), expected / P, rtol=1e-6, atol=1e-6)
        assert result.counts == [comps[0].target_k(rho)] * P
        assert result.bytes_sent == sparse_payload_bytes(result.counts, 4, 4)


def test_dense_sparsifier_is_a_plain_mean():
    lay = layout()
    comps = [WorkerCompressor(get_sparsifier("dense"), lay) for _ in range(2)]
    grads = [torch.randn(lay.d), torch.randn(lay.d)]
    expected = (grads[0] + grads[1]) / 2
    result = exchange(SimulatedTransport(2), comps, [g.clone() for g in grads], 0.001)
    assert torch.equal(result.mean, expected)
    assert result.counts == [lay.d, lay.d]
    assert result.bytes_sent == dense_payload_bytes(2, lay.d, 4)


def test_simulated_transport_checks_its_inputs():
    with pytest.raises(ValueError, match="workers = 0"):
        SimulatedTransport(0)
    with pytest.raises(ValueError, match="expected 2 local contributions, got 1"):
        SimulatedTransport(2).sum_dense([torch.zeros(3)])


def test_a_reused_output_buffer_gives_the_same_mean():
    torch.manual_seed(3)
    lay = layout()
    fresh = [WorkerCompressor(get_sparsifier("topk"), lay) for _ in range(2)]
    reuse = [WorkerCompressor(get_sparsifier("topk"), lay) for _ in range(2)]
    buffer = torch.full((lay.d,), float("nan"))
    for _ in range(3):
        grads = [torch.randn(lay.d) for _ in range(2)]
        a = exchange(SimulatedTransport(2), fresh, grads, 0.05)
        b = exchange(SimulatedTransport(2), reuse, grads, 0.05, out=buffer)
        assert b.mean.data_ptr() == buffer.data_ptr()
        assert torch.equal(a.mean, b.mean)
    with pytest.raises(ValueError, match="out must be"):
        exchange(SimulatedTransport(2), reuse, grads, 0.05, out=torch.zeros(3))
