"""batchify and bptt windows against an obvious loop."""

from __future__ import annotations

import pytest
import torch

from topkscope.data import batchify, bptt_batch, num_windows


@pytest.mark.parametrize("n, b", [(10, 3), (100, 7), (12, 12 // 2), (1000, 1)])
def test_batchify_matches_loop(n, b):
    tokens = torch.arange(n) * 3 + 1
    out = batchify(tokens, b)
    steps = n // b
    ref = torch.empty(steps, b, dtype=torch.int64)
    for col in range(b):
        for t in range(steps):
            ref[t, col] = tokens[col * steps + t]
    assert torch.equal(out, ref)
    assert out.is_contiguous()


def test_bptt_windows_cover_the_source_with_shifted_targets():
    source = batchify(torch.arange(103), 4)  # 25 x 4
    seen = []
    i = 0
    while i < source.shape[0] - 1:
        x, y = bptt_batch(source, i, 7)
        assert x.shape == y.shape and x.shape[1] == 4
        assert torch.equal(y, source[i + 1 : i + 1 + x.shape[0]])
        assert torch.equal(x + 1, y)  # consecutive tokens inside each column
        seen.append(x.shape[0])
        i += 7
    assert sum(seen) == source.shape[0] - 1
    assert len(seen) == num_windows(source, 7)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, 60])
def test_batchify_rejects_bad_batch_size(bad):
    with pytest.raises(ValueError, match="batch_size"):
        batchify(torch.arange(100), bad)


def test_bptt_batch_rejects_out_of_range_start():
    source = batchify(torch.arange(40), 4)
    with pytest.raises(ValueError, match=r"allowed range \[0, 8\]"):
        bptt_batch(source, 9, 5)
