"""tail-k: its count stays in [2k/3, 4k/3] on vectors it was not designed on, its selection is
exactly what a float64 restatement of its rule selects, and its state survives a checkpoint."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from topkscope.sparsify import get_sparsifier
from topkscope.sparsify.probes import FAMILIES, drifting, probe_vector
from topkscope.sparsify.source import SparsifierSource
from topkscope.sparsify.tailk import SAMPLE_TOP, gaussian_slope

D = 200_000


def in_band(count: int, k: int) -> bool:
    return 2 * k / 3 <= count <= 4 * k / 3


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("rho", [0.001, 0.01])
def test_in_band_on_every_step_of_drifting_vectors_with_few_counts(name, rho):
    k = int(rho * D)
    sparsifier = get_sparsifier("tail-k")
    counts, evaluations = [], []
    for x in drifting(name, 25, D, seed=1):
        counts.append(sparsifier.select(torch.tensor(x, dtype=torch.float32), k).numel())
        evaluations.append(sparsifier.last_evaluations)
    assert all(in_band(c, k) for c in counts), [c / k for c in counts]
    assert np.mean(evaluations) <= 2.0


@pytest.mark.parametrize("name", FAMILIES)
def test_the_first_call_lands_in_band_from_its_sample(name):
    u = torch.tensor(probe_vector(name, D, np.random.default_rng(5)), dtype=torch.float32)
    for k in (40, 400, 4000):
        assert in_band(get_sparsifier("tail-k").select(u, k).numel(), k)


def test_a_density_change_is_followed_within_the_call():
    """The warm-up's jumps (1/64 -> 0.004 -> 0.001): the previous threshold is moved to the new k."""
    rng = np.random.default_rng(2)
    sparsifier = get_sparsifier("tail-k")
    for rho in (1 / 64, 1 / 64, 0.004, 0.004, 0.001, 0.001):
        k = int(rho * D)
        u = torch.tensor(probe_vector("gennorm-1", D, rng), dtype=torch.float32)
        assert in_band(sparsifier.select(u, k).numel(), k)


def reference_tailk(vectors: list[np.ndarray], k: int, evaluations: int = 4):
    """The rule of tailk.py restated in numpy (slow, obvious): the selected sets. The steps are
    float64; |u_i| > t compares in u's float32, as the sparsifier does (t is rounded to it)."""
    state, chosen = None, []
    lo, hi = 2 * k / 3, 4 * k / 3
    for x in vectors:
        mag = np.abs(x.astype(np.float32))
        d, top = mag.size, float(mag.max())
        if state is None:
            step = max(1, d // max(1, math.ceil(SAMPLE_TOP * d / k)))
            sample = mag[::step]
            rank = min(sample.size, max(1, round(k * sample.size / d)))
            slope = gaussian_slope(k / d)
            log_t = math.log(float(np.sort(sample)[::-1][rank - 1]))
        else:
            slope = state[3]
            log_t = min(state[0] + (math.log(state[1]) - math.log(k)) / slope, math.log(top))
        too_many, too_few, points = None, (math.log(top), math.log(0.5)), []
        for e in range(evaluations):
            count = int((mag > np.float32(math.exp(log_t))).sum())
            points.append((log_t, math.log(max(count, 0.5))))
            if lo <= count <= hi or e + 1 == evaluations:
                break
            if count > hi:
                too_many = points[-1] if too_many is None else max(too_many, points[-1])
            else:
                too_few = min(too_few, points[-1])
            if len(points) > 1:
                (x1, y1), (x2, y2) = points[-2:]
                if x1 != x2 and y1 != y2 and -(y2 - y1) / (x2 - x1) > 0:
                    slope = min(max(-(y2 - y1) / (x2 - x1), 0.5), 1000.0)
            nxt = points[-1][0] + (points[-1][1] - math.log(k)) / slope
            low = -math.inf if too_many is None else too_many[0]
            if not low < nxt < too_few[0]:
                if too_many is None:
                    nxt = min(points[-1][0], too_few[0]) - math.log(4.0)
                else:
                    nxt = too_many[0] + (too_few[0] - too_many[0]) * (
                        (too_many[1] - math.log(k)) / (too_many[1] - too_few[1]))
            log_t = nxt
        state = (points[-1][0], count, k, slope)
        chosen.append(np.flatnonzero(mag > np.float32(math.exp(points[-1][0]))))
    return chosen


@pytest.mark.parametrize("name", ["gennorm-1", "t3", "two-scale"])
def test_selection_equals_the_float64_restatement(name):
    vectors = drifting(name, 8, D, seed=3)
    k = 400
    expected = reference_tailk(vectors, k)
    sparsifier = get_sparsifier("tail-k")
    for x, want in zip(vectors, expected):
        got = sparsifier.select(torch.tensor(x, dtype=torch.float32), k)
        assert np.array_equal(np.sort(got.numpy()), want)


def test_state_survives_a_checkpoint():
    vectors = [torch.tensor(x, dtype=torch.float32) for x in drifting("t5", 6, D, seed=4)]
    k = 400
    whole = SparsifierSource("tail-k", None, seed=0, rank=0)
    first = SparsifierSource("tail-k", None, seed=0, rank=0)
    for u in vectors[:3]:
        whole.at(0).select(u, k)
        first.at(0).select(u, k)
    resumed = SparsifierSource("tail-k", None, seed=0, rank=0)
    resumed.load_state_dict(first.state_dict())
    for u in vectors[3:]:
        want = whole.at(0).select(u, k)
        assert torch.equal(torch.sort(resumed.at(0).select(u, k)).values, torch.sort(want).values)
    fresh = get_sparsifier("tail-k")
    assert fresh.state_dict() is None


def test_slope_and_arguments():
    # a Gaussian tail's log-log slope at rho: t phi(t) / Q(t), about t^2 + 1 for small rho
    t = stats.norm.isf(0.0005)
    assert gaussian_slope(0.001) == pytest.approx(t * stats.norm.pdf(t) / stats.norm.sf(t))
    with pytest.raises(ValueError, match="evaluations = 0"):
        get_sparsifier("tail-k", evaluations=0)
