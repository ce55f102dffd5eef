"""tail-k: its count stays in [2k/3, 4k/3] on vectors it was not designed on, its selection is
exactly what a float64 restatement of its rule selects, and its state survives a checkpoint."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from topkscope.sparsify import get_sparsifier
from topkscope.sparsify.probes import FAMILIES, JUMPS, drifting, probe_vector, scale_jumps
from topkscope.sparsify.source import SparsifierSource
from topkscope.sparsify.tailk import SAMPLE_TOP, gaussian_slope, in_band

D = 200_000


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


def reference_tailk(vectors: list[np.ndarray], k: int, evaluations: int = 6):
    """The rule of tailk.py restated in numpy (slow, obvious): the selected sets. The steps are
    float64; |u_i| > t compares in u's float32, as the sparsifier does (t is rounded to it)."""
    state, chosen = None, []
    log_k = math.log(k)

    def sample_log_t(mag):
        d = mag.size
        step = max(1, d // max(1, math.ceil(SAMPLE_TOP * d / k)))
        sample = mag[::step]
        rank = min(sample.size, max(1, round(k * sample.size / d)))
        t = float(np.sort(sample)[::-1][rank - 1])
        return math.log(t if t > 0 else float(mag.max()) * 0.5)

    def secant(p, q, slope):
        if p[0] == q[0] or p[1] == q[1]:
            return slope
        a = -(q[1] - p[1]) / (q[0] - p[0])
        return min(max(a, 0.5), 1000.0) if a > 0 else slope

    for x in vectors:
        mag = np.abs(x.astype(np.float32))
        d, top = mag.size, float(mag.max())
        slope = gaussian_slope(k / d) if state is None else state[3]
        if state is not None and 2 * state[2] / 3 <= state[1] <= 4 * state[2] / 3:
            log_t, sampled = min(state[0] + (math.log(state[1]) - log_k) / slope, math.log(top)), False
        else:
            log_t, sampled = sample_log_t(mag), True
        many, few = None, [math.log(top), math.log(0.5) - log_k]  # bracket ends [log t, f]
        moved, points = None, []
        for e in range(evaluations):
            count = int((mag > np.float32(math.exp(log_t))).sum())
            f = math.log(max(count, 0.5)) - log_k
            points.append((log_t, f, count))
            if in_band(count, k) or e + 1 == evaluations:
                break
            side = "many" if f > 0 else "few"
            if side == "many" and (many is None or log_t > many[0]):
                many = [log_t, f]
            if side == "few" and log_t < few[0]:
                few = [log_t, f]
            if many is not None and side == moved:  # Illinois: halve the end kept twice
                (few if side == "many" else many)[1] *= 0.5
            moved = side
            if len(points) > 1:
                slope = secant(points[-2], points[-1], slope)
            low = -math.inf if many is None else many[0]
            if not sampled:
                sampled = True
                log_t = sample_log_t(mag)
                if low < log_t < few[0]:
                    continue
            if many is None:
                log_t = points[-1][0] + f / slope
                if not low < log_t < few[0]:
                    log_t = min(points[-1][0], few[0]) - math.log(4.0)
            else:
                log_t = many[0] - many[1] * (few[0] - many[0]) / (few[1] - many[1])
                if not many[0] < log_t < few[0]:
                    log_t = 0.5 * (many[0] + few[0])
        best = max(range(len(points)), key=lambda i: (-abs(points[i][1]), i))
        if len(points) > 1:
            near = sorted(points, key=lambda p: abs(p[1]))[:2]
            slope = secant(near[0], near[1], slope)
        state = (points[best][0], points[best][2], k, slope)
        chosen.append(np.flatnonzero(mag > np.float32(math.exp(points[best][0]))))
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


# ---- scale jumps between calls (the lock of the first version) -----------------------------
def jumping(name: str, seed: int, d: int = D) -> list[np.ndarray]:
    return scale_jumps(name, len(JUMPS), d, seed=seed)


def blind_to_the_sample(seed: int, d: int = D, k: int = 400) -> list[np.ndarray]:
    """Vectors whose large entries sit where the strided sample never looks: its threshold is
    far too low, so only the in-call bracket can reach the band."""
    step = max(1, d // math.ceil(SAMPLE_TOP * d / k))
    rng = np.random.default_rng(seed)
    hidden = np.flatnonzero(np.arange(d) % step != 0)
    out = []
    for s in np.cumprod(JUMPS):
        x = rng.standard_normal(d) * 0.01
        x[rng.choice(hidden, 3 * k, replace=False)] = rng.standard_normal(3 * k) * 3.0
        out.append(x * s)
    return out


@pytest.mark.parametrize("name", ["gennorm-0.3", "gennorm-3", "t2", "laplace-30%-zeros",
                                  "two-scale"])
@pytest.mark.parametrize("rho", [0.001, 0.01])
def test_in_band_on_every_call_when_the_scale_jumps_2_to_5x(name, rho):
    k = int(rho * D)
    sparsifier = get_sparsifier("tail-k")
    counts, evaluations = [], []
    for x in jumping(name, seed=7):
        counts.append(sparsifier.select(torch.tensor(x, dtype=torch.float32), k).numel())
        evaluations.append(sparsifier.last_evaluations)
    assert all(in_band(c, k) for c in counts), [round(c / k, 2) for c in counts]
    assert np.mean(evaluations) <= 2.5, evaluations


def test_a_call_that_ended_out_of_band_restarts_from_the_sample():
    """With one evaluation a x5 jump leaves the call out of band; the next call on the same
    scale does not start from that threshold (the first version's lock) but from the sample."""
    vectors = jumping("gennorm-1", seed=2)
    k = 400
    sparsifier = get_sparsifier("tail-k", evaluations=1)
    sparsifier.select(torch.tensor(vectors[1], dtype=torch.float32), k)
    jumped = torch.tensor(vectors[1] * 5.0, dtype=torch.float32)
    assert not in_band(sparsifier.select(jumped, k).numel(), k)
    assert in_band(sparsifier.select(jumped, k).numel(), k)


def test_the_bracket_reaches_the_band_where_the_sample_is_blind():
    vectors = blind_to_the_sample(seed=3)
    k = 400
    sparsifier = get_sparsifier("tail-k")
    first = [get_sparsifier("tail-k", evaluations=1).select(
        torch.tensor(x, dtype=torch.float32), k).numel() for x in vectors]
    assert all(c > 4 * k / 3 for c in first)  # the sample's threshold alone is far too low
    for x in vectors:
        assert in_band(sparsifier.select(torch.tensor(x, dtype=torch.float32), k).numel(), k)
        assert sparsifier.last_evaluations <= 6


@pytest.mark.parametrize("source", ["jumping", "blind", "one-evaluation"])
def test_every_path_equals_the_float64_restatement(source):
    """The restart, the sample's second point and the Illinois steps, against the numpy rule."""
    k, evaluations = 400, 1 if source == "one-evaluation" else 6
    vectors = blind_to_the_sample(seed=5) if source == "blind" else jumping("t3", seed=5)
    expected = reference_tailk(vectors, k, evaluations=evaluations)
    sparsifier = get_sparsifier("tail-k", evaluations=evaluations)
    for x, want in zip(vectors, expected):
        got = sparsifier.select(torch.tensor(x, dtype=torch.float32), k)
        assert np.array_equal(np.sort(got.numpy()), want)


def test_scale_jumps_are_the_drifting_sequence_times_the_cycled_factors():
    plain, jumped = drifting("t5", 15, 1000, seed=1), scale_jumps("t5", 15, 1000, seed=1)
    factors = np.resize(np.asarray(JUMPS), 15)
    assert set(np.round(factors[1:], 2)) >= {2.0, 5.0, 0.2}
    for t in range(15):
        np.testing.assert_allclose(jumped[t], plain[t] * np.prod(factors[: t + 1]), rtol=1e-12)
