"""b-bit quantization of the sent values (SparseLoCo's statistical rule) against a float64
reference written value by value, and the compressor's invariants with it: what is sent plus
what is kept is u, counts are honest, the bytes are those of the encoding."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from topkscope.comm import Layout
from topkscope.comm.compressor import WorkerCompressor
from topkscope.comm.exchange import combine, contribute
from topkscope.comm.simulated import SimulatedTransport
from topkscope.sparsify import get_sparsifier
from topkscope.sparsify.quantize import Quantizer, quantizer_from


def reference(values: np.ndarray, groups: np.ndarray, bits: int, rng: float):
    """The rule of sparsify/quantize.py, one group and one value at a time, in float64."""
    n, offset = 2**bits, 2 ** (bits - 1)
    codes = np.zeros(values.size, dtype=np.int64)
    out = np.zeros(values.size)
    for g in np.unique(groups):
        at = np.flatnonzero(groups == g)
        v = values[at].astype(np.float64)
        shift = sum(v) / len(v)
        c = v - shift
        std = math.sqrt(sum(x * x for x in c) / (len(c) - 1)) if len(c) > 1 else 0.0
        scale = rng * std / n
        if scale == 0 or not math.isfinite(scale):
            scale = 1.0
        q = [min(n - 1, max(0, int(np.round(x / scale + offset)))) for x in c]
        table = {j: np.mean([x for x, qq in zip(c, q) if qq == j]) for j in set(q)}
        codes[at] = q
        out[at] = [table[j] + shift for j in q]
    return codes, out


@pytest.mark.parametrize("bits", [1, 2, 4, 8])
@pytest.mark.parametrize("seed", range(3))
def test_codes_and_values_equal_the_float64_reference(bits, seed):
    gen = torch.Generator().manual_seed(seed)
    values = torch.randn(300, generator=gen, dtype=torch.float64) * torch.rand(300, generator=gen)
    groups = torch.randint(0, 4, (300,), generator=gen)
    q = Quantizer(bits, 6.0).quantize(values, groups, 5)   # group 4 has no value
    codes, out = reference(values.numpy(), groups.numpy(), bits, 6.0)
    assert q.codes.tolist() == codes.tolist()
    assert np.allclose(q.values.numpy(), out, rtol=0, atol=1e-12)
    assert q.table.shape == (5, 2**bits) and q.shift.shape == (5,)
    assert int(q.codes.min()) >= 0 and int(q.codes.max()) < 2**bits
    assert torch.equal(q.table[4], torch.zeros(2**bits, dtype=torch.float64))


@pytest.mark.parametrize("bits", [2, 8])
def test_clamped_marks_the_values_outside_the_range_of_six_standard_deviations(bits):
    """The range is 6 s wide about the mean: -(3 s)(1 + 2^-b) to (3 s)(1 - 2^-b) (round half
    to even at the edges), so at 2 bits -3.75 s .. 2.25 s, at 8 bits about +-3 s."""
    gen = torch.Generator().manual_seed(bits)
    values = torch.randn(20_000, generator=gen, dtype=torch.float64) ** 3  # heavy tails
    groups = torch.randint(0, 3, (20_000,), generator=gen)
    q = Quantizer(bits, 6.0).quantize(values, groups, 3)
    v, g = values.numpy(), groups.numpy()
    n = 2**bits
    for group in range(3):
        c = v[g == group] - v[g == group].mean()
        s = c.std(ddof=1)
        outside = (c < -3 * s * (1 + 1 / n)) | (c > 3 * s * (1 - 1 / n))
        assert q.clamped.numpy()[g == group].tolist() == outside.tolist()
        assert 0 < outside.mean() < 0.1  # some, not all: the check can fail either way
    codes, _ = reference(v, g, bits, 6.0)  # the clamped values sit on the end codes
    assert set(codes[q.clamped.numpy()]) <= {0, n - 1}


def test_float32_values_come_back_float32_and_equal_the_reference():
    values = torch.randn(1000, generator=torch.Generator().manual_seed(7))
    q = Quantizer(2).quantize(values)
    codes, out = reference(values.numpy(), np.zeros(1000, dtype=np.int64), 2, 6.0)
    assert q.values.dtype == torch.float32 and q.codes.tolist() == codes.tolist()
    assert np.allclose(q.values.numpy(), out.astype(np.float32), rtol=1e-6, atol=1e-7)


def test_a_group_of_one_or_of_equal_values_is_reproduced_exactly():
    values = torch.tensor([3.5, -2.0, -2.0, -2.0, 0.25])
    q = Quantizer(2).quantize(values, torch.tensor([0, 1, 1, 1, 2]))
    assert torch.equal(q.values, values)


def test_groups_are_quantized_independently():
    a = torch.randn(50, generator=torch.Generator().manual_seed(1))
    b = 1000 * torch.randn(50, generator=torch.Generator().manual_seed(2))
    both = Quantizer(2).quantize(torch.cat([a, b]), torch.tensor([0] * 50 + [1] * 50))
    assert torch.equal(both.values[:50], Quantizer(2).quantize(a).values)
    assert torch.equal(both.values[50:], Quantizer(2).quantize(b).values)


@pytest.mark.parametrize("block,message", [
    ({"bits": 0}, "quantize.bits = 0 is outside"), ({"bits": 2.5}, "quantize.bits"),
    ({"range": -1}, "quantize.range = -1"), ({"bins": 4}, "unknown quantize key 'bins'")])
def test_bad_settings_are_refused_in_one_line(block, message):
    with pytest.raises(ValueError, match=message):
        quantizer_from(block)


# ---------------------------------------------------------------- in the compressor
def compressor(sparsifier="chunk-topk", bits=2, feedback=True, decay=1.0, **params):
    layout = Layout.of([(n, torch.zeros(s, requires_grad=True))
                        for n, s in (("a", (300,)), ("b", (40, 10)), ("c", (25,)))])
    return WorkerCompressor(get_sparsifier(sparsifier, **params), layout, "global", feedback,
                            error_decay=decay,
                            quantizer=None if bits is None else Quantizer(bits))


@pytest.mark.parametrize("sparsifier,params", [("chunk-topk", {"chunk_size": 64}),
                                               ("topk", {}), ("gaussiank-2019", {})])
def test_sent_plus_residual_is_u_and_the_residual_keeps_the_quantization_error(sparsifier,
                                                                                params):
    comp = compressor(sparsifier, **params)
    gen = torch.Generator().manual_seed(4)
    e_prev = torch.zeros(725)
    for _ in range(3):
        g = torch.randn(725, generator=gen)
        u = e_prev + g
        out = comp.compress(g, 0.05, keep=True)
        idx = out.update.indices.long()
        assert torch.equal(out.u, u)
        sent = torch.zeros(725).index_put_((idx,), out.update.values)
        assert torch.allclose(sent + out.e, u, rtol=0, atol=1e-6)           # rounding only
        untouched = torch.ones(725, dtype=torch.bool).index_fill_(0, idx, False)
        assert torch.equal(out.e[untouched], u[untouched])                   # bit for bit
        # the values sent are Q(u[I]) per parameter tensor
        groups = comp.layout.tensor_of(idx)
        expected = Quantizer(2).quantize(u[idx], groups, 3).values
        assert torch.equal(out.update.values, expected)
        # delta of what was sent, in float64
        delta = float((u.double() - sent.double()).square().sum() / u.double().square().sum())
        assert out.contraction == pytest.approx(delta, rel=1e-9)
        sel = float(1 - u[idx].double().square().sum() / u.double().square().sum())
        assert out.contraction_selection == pytest.approx(sel, rel=1e-9)
        e_prev = out.e


def test_error_decay_scales_the_accumulator_before_adding_the_new_vector():
    comp = compressor("topk", bits=None, decay=0.5)
    g1, g2 = torch.randn(725), torch.randn(725)
    e1 = comp.compress(g1, 0.02, keep=True).e.clone()  # e is the live residual
    out = comp.compress(g2, 0.02, keep=True)
    assert torch.equal(out.u, 0.5 * e1 + g2)
    plain = compressor("topk", bits=None)
    plain.compress(g1, 0.02)
    assert torch.equal(plain.compress(g2, 0.02, keep=True).u, e1 + g2)   # beta = 1: e + g


def test_counts_are_honest_and_bytes_are_those_of_the_encoding():
    P, d = 2, 725
    comps = [compressor("chunk-topk", chunk_size=64) for _ in range(P)]
    gs = [torch.randn(d) for _ in range(P)]
    local = [contribute(c, g, 0.05, rank=r) for r, (c, g) in enumerate(zip(comps, gs))]
    result = combine(SimulatedTransport(P), local, d)
    k = round(0.05 * d)
    assert result.counts == [k, k]
    # 2-bit codes, 6-bit chunk-local indices (chunk 64), 3 tensors x (shift + 4 entries) x 4 B
    assert result.payload.values == P * math.ceil(k * 2 / 8)
    assert result.payload.indices == P * math.ceil(k * 6 / 8)
    assert result.payload.side == P * 3 * 5 * 4
    assert result.payload.counts == P * 8
    assert result.bytes_sent == result.payload.total
    # the selected pairs alone: each worker's codes and indices, no count, no table
    assert result.payload_bytes == P * (math.ceil(k * 2 / 8) + math.ceil(k * 6 / 8))
    # unquantized global Top-k keeps the plain float32 + int32 pairs
    plain = [compressor("topk", bits=None) for _ in range(P)]
    local = [contribute(c, g, 0.05, rank=r) for r, (c, g) in enumerate(zip(plain, gs))]
    assert combine(SimulatedTransport(P), local, d).bytes_sent == P * (8 + k * 8)
