"""Approximate-selection quality against brute-force references."""

import math

import numpy as np
import pytest
import torch

from tests._topk_reference import recall_by_enumeration
from topkscope.analysis import selection


def test_exact_topk_selection_is_perfect():
    u = torch.randn(5000, dtype=torch.float64)
    idx = torch.topk(u.abs(), 50).indices
    q = selection.quality(u, idx, 50)
    assert q["count"] == 50 and q["count_ratio"] == 1.0 and q["recall"] == 1.0
    assert q["ratio"] == pytest.approx(q["topk_ratio"], rel=1e-12)
    assert q["ratio_to_topk"] == pytest.approx(1.0, rel=1e-12)


def test_numbers_match_a_float64_reference():
    rng = np.random.default_rng(1)
    u = rng.standard_t(3, 3000).astype(np.float32)
    k = 60
    sel = rng.choice(3000, 90, replace=False)
    q = selection.quality(u, sel, k)
    x = u.astype(np.float64)
    keep = np.ones(3000, bool)
    keep[sel] = False
    assert q["ratio"] == pytest.approx((x[keep] ** 2).sum() / (x**2).sum(), rel=1e-12)
    order = np.argsort(-np.abs(x))
    assert q["topk_ratio"] == pytest.approx((x[order[k:]] ** 2).sum() / (x**2).sum(), rel=1e-12)
    assert q["recall"] == len(set(sel.tolist()) & set(order[:k].tolist())) / k
    assert q["count_ratio"] == 1.5


@pytest.mark.parametrize("seed", range(6))
def test_recall_with_ties_takes_the_best_exact_set(seed):
    rng = np.random.default_rng(seed)
    u = rng.integers(-3, 4, size=14).astype(np.float64)  # many ties
    k = int(rng.integers(1, 14))
    sel = rng.choice(14, int(rng.integers(0, 14)), replace=False)
    q = selection.quality(u, sel, k)
    assert q["recall"] == pytest.approx(recall_by_enumeration(u, sel, k))


def test_superset_sends_more_and_contracts_more():
    u = np.random.default_rng(2).standard_normal(10_000)
    order = np.argsort(-np.abs(u))
    q = selection.quality(u, order[:200], 100)
    assert q["recall"] == 1.0 and q["count_ratio"] == 2.0
    assert q["ratio"] < q["topk_ratio"] and q["ratio_to_topk"] < 1.0
    empty = selection.quality(u, [], 100)
    assert empty["count"] == 0 and empty["recall"] == 0.0 and empty["ratio"] == 1.0


def test_compare_builds_one_row_per_selection():
    u = np.random.default_rng(3).standard_normal(1000)
    order = np.argsort(-np.abs(u))
    table = selection.compare(u, {"exact": order[:10], "bottom": order[-10:]}, 10)
    assert list(table.columns) == selection.COLUMNS
    assert table.set_index("name").loc["exact", "recall"] == 1.0
    assert table.set_index("name").loc["bottom", "recall"] == 0.0


def test_zero_vector_has_undefined_ratios():
    q = selection.quality(np.zeros(100), [1, 2, 3], 3)
    assert math.isnan(q["ratio"]) and math.isnan(q["ratio_to_topk"])
    assert q["note"] == "zero vector: ratios undefined" and q["recall"] == 1.0


@pytest.mark.parametrize(
    "u, sel, k, match",
    [
        (np.ones(10), [1, 1], 2, "duplicate"),
        (np.ones(10), [10], 2, "outside the allowed range"),
        (np.ones(10), [-1], 2, "outside the allowed range"),
        (np.ones(10), [0.5], 2, "integer"),
        (np.ones(10), [1], 0, "k = 0"),
        (np.ones(10), [1], 11, "k = 11"),
        (np.array([1.0, np.nan]), [0], 1, "non-finite"),
        (np.array([]), [], 1, "empty"),
    ],
)
def test_bad_input_is_rejected(u, sel, k, match):
    with pytest.raises(ValueError, match=match):
        selection.quality(u, sel, k)
