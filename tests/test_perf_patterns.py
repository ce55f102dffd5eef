"""The alpha-beta formulas of topkscope.perf.patterns against hand-computed cases."""

import math

import pytest

from topkscope.perf import patterns

A, B = 1e-5, 1e-9


def test_ring_allreduce_hand_case():
    # P = 4, 1 MB: 2*3*alpha + 2*3/4 * 1e6 * beta
    assert patterns.ring_allreduce(4, 1e6, A, B) == pytest.approx(6e-5 + 1.5e-3)
    assert patterns.ring_allreduce(1, 1e6, A, B) == 0.0


def test_allgather_ring_and_recursive_doubling():
    assert patterns.allgather(8, 100.0, A, B) == pytest.approx(7 * A + 7 * 100 * B)
    assert patterns.allgather(8, 100.0, A, B, "recursive-doubling") == pytest.approx(
        3 * A + 7 * 100 * B)
    with pytest.raises(ValueError, match="algorithm"):
        patterns.allgather(8, 1.0, A, B, "tree")


def test_sparse_two_allgathers_padded_uses_the_largest_count():
    counts = [10, 30, 20, 5]
    # two all-gathers (4-byte values, 4-byte indices), each padded to m = 30
    expect = 2 * (3 * A + 3 * 30 * 4 * B)
    assert patterns.sparse_allgather(counts, A, B) == pytest.approx(expect)
    assert patterns.sparse_allgather(counts, A, B) == pytest.approx(
        patterns.sparse_allgather([30] * 4, A, B))


def test_sparse_packed_adds_the_count_exchange():
    counts = [10, 30]
    expect = (A + 8 * B) + (A + 30 * 8 * B)
    assert patterns.sparse_allgather(counts, A, B, layout="packed") == pytest.approx(expect)
    # nobody selected anything: only the counts travel
    assert patterns.sparse_allgather([0, 0], A, B, layout="packed") == pytest.approx(A + 8 * B)


def test_sparse_unpadded_moves_the_real_counts():
    counts = [10, 30, 20]
    # the owner of the smallest block receives (10+30+20-10) pairs' worth, per array
    expect = 2 * (2 * A + (60 - 10) * 4 * B)
    assert patterns.sparse_allgather(counts, A, B, padded=False) == pytest.approx(expect)
    assert expect < patterns.sparse_allgather(counts, A, B)


def test_gtopk_tree():
    assert patterns.gtopk_tree(16, 100, A, B) == pytest.approx(2 * 4 * (A + 100 * 8 * B))
    assert patterns.gtopk_tree(1, 100, A, B) == 0.0
    assert patterns.gtopk_tree(5, 1, A, 0.0) == pytest.approx(2 * math.ceil(math.log2(5)) * A)


@pytest.mark.parametrize("bad", [0, -2, 2.5])
def test_bad_worker_counts(bad):
    with pytest.raises(ValueError, match="workers"):
        patterns.ring_allreduce(bad, 1.0, A, B)


def test_negative_counts_refused():
    with pytest.raises(ValueError, match="counts"):
        patterns.sparse_allgather([1, -1], A, B)
