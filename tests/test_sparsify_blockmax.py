"""BlockMaxima: exact threshold sets from block maxima, against a plain mask reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from topkscope.sparsify._helpers import Workspace
from topkscope.sparsify.blockmax import BlockMaxima, block_size_for


def _reference(u: torch.Tensor, t: float, strict: bool) -> np.ndarray:
    """{i : |u_i| >= t} (> t if strict), compared in u's own dtype like the fast path."""
    mag = u.abs()
    keep = mag > t if strict else mag >= t
    return keep.nonzero().flatten().numpy()


def test_block_size_follows_the_expected_count():
    assert block_size_for(1000, 1) == 1  # too short to block
    assert block_size_for(25_000_000, 25_000) == 64
    assert block_size_for(25_000_000, 250_000) == 8
    assert block_size_for(1_000_000, 50_000) == 1  # too dense: s would be < 4
    for d, expected in ((10**6, 10), (10**7, 3e4), (40_000, 100)):
        s = block_size_for(d, expected)
        assert s == 1 or d / s >= 8 * expected


@pytest.mark.parametrize("expected", [10, 300, 2_000, 20_000, 10**7])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_indices_and_counts_equal_the_mask_reference(expected, dtype):
    gen = torch.Generator().manual_seed(expected)
    d = 333_333  # not a multiple of any chunk: exercises the tail
    u = (torch.randn(d, generator=gen) * torch.rand(d, generator=gen)).to(dtype)
    blocks = BlockMaxima(u, expected_count=expected, workspace=Workspace())
    values = u.abs().double().numpy()
    # thresholds at exact element values (ties at the cut), between them, and extremes
    picks = np.sort(values)[[-1, -2, -10, -min(d, expected // 2 + 1), -min(d, 4 * expected), 0]]
    for t in [*map(float, picks), 0.0, 1e-3, 10.0, 1e9]:
        for strict in (False, True):
            got = np.sort(blocks.indices(t, strict).numpy())
            ref = _reference(u, t, strict)
            np.testing.assert_array_equal(got, ref, err_msg=f"s={blocks.s} t={t} {strict}")
            assert blocks.count(t, strict) == ref.size
            assert np.sort(blocks.indices(t, strict).numpy()).size == ref.size  # cached path


def test_block_maxima_are_the_max_magnitude_per_block():
    u = torch.randn(2 * 64 * 1000 + 17, generator=torch.Generator().manual_seed(1))
    for expected, layout in ((100, "rows"), (1_000, "strided")):
        blocks = BlockMaxima(u, expected_count=expected, workspace=Workspace())
        s, w = blocks.s, blocks.w
        assert (layout == "rows") == (w == 1)
        body = u[: blocks.covered].abs()
        ref = body.view(-1, s, w).amax(1).flatten()  # block b = (chunk, lane)
        assert torch.equal(blocks.maxima, ref)
        assert blocks.max_abs() == float(u.abs().max())


def test_non_contiguous_input_is_handled():
    base = torch.randn(600_000, generator=torch.Generator().manual_seed(2))
    u = base[1::3]
    blocks = BlockMaxima(u, expected_count=50, workspace=Workspace())
    t = float(u.abs().kthvalue(u.numel() - 60).values)
    np.testing.assert_array_equal(np.sort(blocks.indices(t).numpy()), _reference(u, t, False))


@pytest.mark.parametrize("expected", [10, 10**7])
def test_nonfinite_values_are_reported_with_count_and_position(expected):
    u = torch.randn(100_000)
    u[777] = float("nan")
    u[99_999] = float("inf")
    with pytest.raises(ValueError, match=r"2 non-finite.*\[777, 99999\]"):
        BlockMaxima(u, expected_count=expected, workspace=Workspace())


def test_workspace_buffers_are_reused_and_grow():
    ws = Workspace()
    a = ws.take("x", 100, torch.float32, torch.device("cpu"))
    b = ws.take("x", 50, torch.float32, torch.device("cpu"))
    assert b.data_ptr() == a.data_ptr() and b.numel() == 50
    c = ws.take("x", 200, torch.float32, torch.device("cpu"))
    assert c.numel() == 200 and ws.nbytes() == 800
    ws.clear()
    assert ws.nbytes() == 0
