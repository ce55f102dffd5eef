"""Chunk-wise Top-k against a float64 reference written chunk by chunk: its counts rule, its
sets and ties, its limits (one chunk = global Top-k), and its index width."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from topkscope.sparsify import get_sparsifier
from topkscope.sparsify.chunk_topk import chunk_counts


def reference_counts(d: int, size: int, k: int) -> list[int]:
    """Largest remainder, written with Python integers and an explicit sort."""
    lengths = [min(size, d - start) for start in range(0, d, size)]
    floors = [k * n // d for n in lengths]
    remainders = [k * n % d for n in lengths]
    short = k - sum(floors)
    order = sorted(range(len(lengths)), key=lambda c: (-remainders[c], c))
    for c in order[:short]:
        floors[c] += 1
    return floors


def reference_select(u: np.ndarray, size: int, k: int) -> set[int]:
    """Per chunk: float64 magnitudes sorted by (magnitude descending, index ascending)."""
    d = u.size
    chosen = set()
    for c, count in enumerate(reference_counts(d, size, k)):
        start = c * size
        chunk = np.abs(u[start : start + size].astype(np.float64))
        order = sorted(range(chunk.size), key=lambda i: (-chunk[i], i))
        chosen.update(start + i for i in order[:count])
    return chosen


@pytest.mark.parametrize("d,size,k", [(35, 10, 7), (4096 * 3, 4096, 192), (1000, 64, 1),
                                      (1000, 64, 999), (17, 100, 5), (64, 64, 64), (65, 8, 9)])
def test_counts_sum_to_k_and_follow_the_largest_remainder(d, size, k):
    counts = chunk_counts(d, size, k)
    assert counts.tolist() == reference_counts(d, size, k)
    assert int(counts.sum()) == k
    lengths = [min(size, d - s) for s in range(0, d, size)]
    for c, n in zip(counts.tolist(), lengths):  # within one of the exact share, never above n
        assert abs(c - k * n / d) < 1 and 0 <= c <= n


def test_sparseloco_density_sends_the_same_count_from_every_chunk():
    counts = chunk_counts(4096 * 10, 4096, round(4096 * 10 / 64))
    assert counts.tolist() == [64] * 10


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_selection_equals_the_float64_reference(seed, dtype):
    gen = torch.Generator().manual_seed(seed)
    d = [1000, 5003, 8192, 333][seed]
    u = torch.randn(d, generator=gen, dtype=torch.float64).mul_(torch.rand(d, generator=gen))
    u = u.to(dtype)
    for size, k in [(64, 50), (100, 7), (4096, d // 64), (7, d // 3)]:
        idx = get_sparsifier("chunk-topk", chunk_size=size).select(u, k)
        assert idx.numel() == k == idx.unique().numel()
        assert set(idx.tolist()) == reference_select(u.to(torch.float64).numpy(), size, k)


def test_ties_at_the_cut_go_to_the_lowest_indices_of_each_chunk():
    u = torch.tensor([1.0, -1.0, 1.0, 1.0, 2.0, 1.0, -1.0, 1.0])
    idx = get_sparsifier("chunk-topk", chunk_size=4).select(u, 4)
    assert sorted(idx.tolist()) == [0, 1, 4, 5]


def test_one_chunk_is_global_topk():
    u = torch.randn(3000, generator=torch.Generator().manual_seed(3))
    for k in (1, 30, 2999):
        mine = get_sparsifier("chunk-topk", chunk_size=3000).select(u, k)
        assert sorted(mine.tolist()) == sorted(get_sparsifier("topk").select(u, k).tolist())


def test_chunk_local_indices_take_log2_of_the_chunk_bits():
    s = get_sparsifier("chunk-topk")
    assert s.chunk_size == 4096 and s.local_index_bits(10**6) == 12
    assert get_sparsifier("chunk-topk", chunk_size=100).local_index_bits(10**6) == 7
    assert get_sparsifier("chunk-topk", chunk_size=4096).local_index_bits(40) == math.ceil(
        math.log2(40))


@pytest.mark.parametrize("bad", [0, -4, 2.5, "64", True])
def test_bad_chunk_size_is_refused_in_one_line(bad):
    with pytest.raises(ValueError, match="chunk_size"):
        get_sparsifier("chunk-topk", chunk_size=bad)
