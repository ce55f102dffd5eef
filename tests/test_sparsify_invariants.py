"""What every registered sparsifier guarantees, and how each one refuses bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tests.test_sparsify_cases import edge_vectors
from topkscope.sparsify import (
    available,
    check_density,
    check_k,
    get_sparsifier,
    k_from_density,
)

NAMES = available()
EDGES = edge_vectors()


def test_registry_has_every_method():
    assert NAMES == sorted(
        ["chunk-topk", "dense", "dgc", "dgc-sampled", "gaussiank", "gaussiank-2019", "randk", "redsync",
         "redsync-2019", "sidco", "sidco-fixed", "tail-k", "threshold", "topk"]
    )


def test_get_sparsifier_returns_independent_instances():
    for name in NAMES:
        a, b = get_sparsifier(name), get_sparsifier(name)
        assert a is not b and type(a) is type(b) and a.name == name


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("case", sorted(EDGES))
def test_selection_is_unique_in_range_int64_and_empty_only_where_allowed(name, case):
    u = EDGES[case]
    d = u.numel()
    sparsifier = get_sparsifier(name)
    for k in sorted({1, max(1, d // 200), d}):
        idx = sparsifier.select(u, k)
        assert idx.dtype == torch.int64 and idx.dim() == 1 and idx.device == u.device
        assert idx.unique().numel() == idx.numel(), "duplicate indices"
        if idx.numel():
            assert 0 <= int(idx.min()) and int(idx.max()) < d
        if name == "threshold":
            expected = int(torch.count_nonzero(u.abs() > sparsifier.threshold))
            assert idx.numel() == expected  # k ignored, the count is what lambda gives
        elif not sparsifier.may_return_empty:
            assert idx.numel() >= 1
        if sparsifier.fixed_count:
            assert idx.numel() == k
        if getattr(sparsifier, "at_most_k", False):
            assert idx.numel() <= k
        if name == "dense":
            assert idx.numel() == d


@pytest.mark.parametrize("name", NAMES)
def test_k_equal_d_selects_everything_for_ranking_methods(name):
    u = EDGES["normal_small"]
    idx = get_sparsifier(name).select(u, u.numel())
    if name in ("dense", "topk", "gaussiank", "randk"):
        assert sorted(idx.tolist()) == list(range(u.numel()))


# ---- bad input -------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("k", [0, -3, 101])
def test_k_outside_range_is_refused(name, k):
    with pytest.raises(ValueError, match=rf"k = {k} is outside the allowed range \[1, d = 100\]"):
        get_sparsifier(name).select(torch.randn(100), k)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("k", [2.5, True, "3", None])
def test_non_integer_k_is_refused(name, k):
    with pytest.raises(ValueError, match=rf"k = {k!r} must be an integer in \[1, d = 100\]"):
        get_sparsifier(name).select(torch.randn(100), k)


def test_integer_like_k_is_accepted():
    u = torch.randn(100)
    for k in (np.int64(5), torch.tensor(5)):
        assert get_sparsifier("topk").select(u, k).numel() == 5
    assert check_k(np.int32(7), 10) == 7


@pytest.mark.parametrize("name", NAMES)
def test_bad_vectors_are_refused(name):
    s = get_sparsifier(name)
    with pytest.raises(ValueError, match=r"1-D, got shape \(4, 5\)"):
        s.select(torch.randn(4, 5), 2)
    with pytest.raises(ValueError, match="float tensor"):
        s.select(torch.arange(10), 2)
    with pytest.raises(ValueError, match="d = 0"):
        s.select(torch.empty(0), 1)
    with pytest.raises(ValueError, match="torch.Tensor"):
        s.select([1.0, 2.0], 1)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("d", [50, 300_001])
def test_nan_and_inf_are_refused_with_count_and_position(name, d):
    u = torch.randn(d)
    u[3] = float("nan")
    u[d - 1] = float("-inf")
    message = rf"2 non-finite values of {d} \(1 NaN, 1 Inf\).*\[3, {d - 1}\]"
    with pytest.raises(ValueError, match=message):
        get_sparsifier(name).select(u, 5)


@pytest.mark.parametrize("name", NAMES)
def test_large_finite_values_are_not_mistaken_for_nonfinite(name):
    u = torch.full((1000,), 3e38)  # the float32 sum overflows; the values are fine
    sparsifier = get_sparsifier(name)
    idx = sparsifier.select(u, 10)  # no ValueError
    # a constant |u|: the threshold rules put their threshold at max |u| and keep nothing
    assert idx.numel() >= 1 or (sparsifier.may_return_empty and name != "threshold")


def test_unknown_name_lists_the_available_ones():
    with pytest.raises(ValueError, match="unknown sparsifier 'top-k'; available: chunk-topk, dense, dgc"):
        get_sparsifier("top-k")
    with pytest.raises(ValueError, match="unknown sparsifier"):
        get_sparsifier(None)


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("topk", {"ratio": 0.1}, "unknown parameter 'ratio' for sparsifier 'topk'; allowed: none"),
        ("dgc", {"ratio": 0.1}, "'ratio' for sparsifier 'dgc'; allowed: sample_ratio, seed$"),
        ("dgc", {"trim": True}, "'trim' for sparsifier 'dgc'; allowed: sample_ratio, seed$"),
        ("dgc", {"sample_ratio": 0.005},
         r"sample_ratio = 0.005 is outside the allowed range \[0.01, 1.0\]"),
        ("dgc-sampled", {"ratio": 0.1},
         "'ratio' for sparsifier 'dgc-sampled'; allowed: sample_ratio, min_sample, "),
        ("gaussiank", {"band": 1.0}, r"band = 1.0 is outside the allowed range \(1.0, 64.0\]"),
        ("gaussiank", {"max_iter": -1}, r"max_iter = -1 is outside the allowed range \[0, 100\]"),
        ("gaussiank", {"sample_size": 2.5}, r"sample_size = 2.5 must be an integer in \[16, "),
        ("dgc-sampled", {"sample_ratio": 0.0},
         r"sample_ratio = 0.0 is outside the allowed range \(0.0, 1"),
        ("dgc", {"sample_ratio": float("nan")}, "sample_ratio = nan is outside"),
        ("dgc-sampled", {"trim": "yes"}, "trim must be True or False"),
        ("dgc", {"seed": -1}, r"seed = -1 is outside the allowed range \[0, "),
        ("randk", {"seed": 1.5}, "seed = 1.5 must be an integer"),
        ("redsync", {"band": 0.5}, r"band = 0.5 is outside the allowed range \[1.0, 64.0\]"),
        ("redsync", {"max_iter": 0}, r"max_iter = 0 is outside the allowed range \[1, 100\]"),
        ("sidco", {"dist": "normal"}, "dist = 'normal' is not one of exponential, gamma, gpareto"),
        ("sidco", {"stages": 0}, r"stages = 0 is outside the allowed range \[1, 64\]"),
        ("sidco", {"sample_size": 4096}, "'sample_size' for sparsifier 'sidco'; allowed: dist, "),
        ("sidco-fixed", {"stages": 9}, r"stages = 9 is outside the allowed range \[1, 8\]"),
        ("sidco-fixed", {"dist": "normal"}, "dist = 'normal' is not one of exponential, "),
        ("sidco", {"first_ratio": 1.5}, r"first_ratio = 1.5 is outside the allowed range"),
        ("threshold", {"threshold": -0.1}, r"threshold = -0.1 is outside .* \[0.0, inf\)"),
        ("threshold", {"threshold": float("inf")}, "threshold = inf is outside"),
    ],
)
def test_bad_parameters_are_refused_naming_the_range(name, params, message):
    with pytest.raises(ValueError, match=message):
        get_sparsifier(name, **params)


@pytest.mark.parametrize("density", [0, -0.1, 1.5, math.nan, math.inf, "x", None])
def test_density_outside_range_is_refused(density):
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        check_density(density)
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        k_from_density(density, 100)


def test_k_from_density_rounds_and_never_gives_zero():
    assert k_from_density(0.001, 25_000_000) == 25_000
    assert k_from_density(1e-9, 10) == 1
    assert k_from_density(1.0, 10) == 10
    assert k_from_density(0.26, 10) == 3


def test_k_rule_floor_is_the_authors_int_and_round_is_ours():
    assert k_from_density(0.0019, 1000, "floor") == 1 and k_from_density(0.0019, 1000) == 2
    assert k_from_density(1e-9, 10, "floor") == 1  # never 0
    with pytest.raises(ValueError, match="round, floor"):
        k_from_density(0.1, 10, "ceil")
