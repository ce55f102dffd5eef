"""tail-k: an O(d) approximate Top-k that sizes its threshold on the counts it measures.

Designed with this tool's measurements, not on an assumed distribution: the error-compensated
u is not Gaussian (fitted generalised-normal shape from about 0.24 to 3 across our models, exact
zeros from unused embedding rows) and error feedback truncates its extreme tail, so a threshold
from the moments of u (Gaussian-k, a fitted family) mis-sizes k by factors of 0.02 to 50. What
does hold is that u changes slowly from one step to the next, and that over a short range the
count above a threshold is close to a power of the threshold. tail-k therefore works on the
measured count curve, in log-log coordinates (invariant to a rescaling of u):

    first threshold:  if the previous call ended in band, its threshold moved to this k,
                          log t = log t_prev + (log c_prev - log k) / a
                      (a = -d log count / d log t, kept from the previous call); otherwise (the
                      first call, or a restart after a call that ended out of band) the
                      (k m / d)-th largest |u| of a strided sample of m = 64 d / k values (about
                      64 of the top k; a selection over m, not d)
    repeat at most 6 times:
        c = #{i : |u_i| > t}                    exact, on block maxima (blockmax.py)
        stop if 2k/3 <= c <= 4k/3
        the bracket: the closest thresholds known to give too many / too few elements
            (t = max |u| selects nothing, so a too-few end always exists)
        next t, in this order:
          - once, after the previous threshold missed: the sample's threshold, if inside the
            bracket (it does not depend on the history, so a jump in u's scale cannot mislead it)
          - while no threshold gave too many: a step along the slope towards log k (the secant
            through the last two points, else a), or a quarter of t if that leaves the bracket
          - else Illinois: the regula falsi point of the bracket's ends on
            f = log c - log k over log t, the value at an end kept twice in a row halved
            (the end never moves otherwise), bisection in log t if that point is not inside
    return {i : |u_i| > t} for the evaluated t whose count is closest to k in log (the later on
        a tie), as is: never padded or trimmed
    state for the next call: that t, its count, k and the slope a (the secant through the two
        evaluated points closest to k; clamped to [0.5, 1000])

Cost: one block-maxima pass over d per call plus, per evaluation, a read of the blocks that can
hold |u_i| > t (a full comparison pass only when many blocks can); no sort or selection kernel
over d. In steady training the previous threshold is in band and one evaluation suffices.
Count guarantee: none, but each call ends in [2k/3, 4k/3] unless six evaluations did not reach
it (a count curve with a jump: e.g. many equal magnitudes); a constant |u| gives 0 or d.
The state (previous threshold, count, k, slope) is per worker and saved in checkpoints.

History: the first version (until this rule) had no restart and no Illinois step: after a
scale jump its secant steps stalled against the fixed end at max |u|, the call ended out of
band and the next one started from that threshold again (a lock that held for the rest of one
GPT run; docs/methods.md).
"""

from __future__ import annotations

import math

import torch

from topkscope.sparsify._helpers import Workspace, strided_sample, two_sided_normal_quantile
from topkscope.sparsify.base import Sparsifier, check_param
from topkscope.sparsify.blockmax import BlockMaxima

EVALUATIONS = 6        # most exact counts per call
SAMPLE_TOP = 64        # expected top-k elements in the strided sample
SLOPE_RANGE = (0.5, 1000.0)  # steep: error feedback piles u up just below the threshold
BAND = (2.0 / 3.0, 4.0 / 3.0)


def gaussian_slope(rho: float) -> float:
    """-d log P(|Z| > t) / d log t at the t with P(|Z| > t) = rho, Z ~ N(0, 1): t phi(t) / Q(t).

    The slope a tail-k starts from before it has measured one (about 11.8 at rho = 0.001)."""
    t = two_sided_normal_quantile(rho)
    if t <= 0.0:
        return SLOPE_RANGE[0]
    phi = math.exp(-0.5 * t * t) / math.sqrt(2.0 * math.pi)
    return _clamp_slope(2.0 * t * phi / rho)


def _clamp_slope(a: float) -> float:
    return min(max(a, SLOPE_RANGE[0]), SLOPE_RANGE[1])


def in_band(count: int, k: int) -> bool:
    """2k/3 <= count <= 4k/3: where tail-k stops, and the claims' band."""
    return BAND[0] * k <= count <= BAND[1] * k


class _Bracket:
    """The closest (log t, f = log c - log k) known to give too many / too few elements, with
    Illinois' halving: an end kept while the other moved twice in a row has its f halved, so
    the regula falsi point cannot stall against it."""

    def __init__(self, log_top: float, log_k: float) -> None:
        self.too_many: list[float] | None = None
        self.too_few = [log_top, math.log(0.5) - log_k]  # max |u| selects nothing (strict)
        self._moved: str | None = None

    def update(self, x: float, f: float) -> None:
        side = "many" if f > 0 else "few"
        if side == "many":
            if self.too_many is None or x > self.too_many[0]:
                self.too_many = [x, f]
        elif x < self.too_few[0]:
            self.too_few = [x, f]
        if self.too_many is not None and side == self._moved:
            kept = self.too_few if side == "many" else self.too_many
            kept[1] *= 0.5
        self._moved = side

    def inside(self, x: float) -> bool:
        low = -math.inf if self.too_many is None else self.too_many[0]
        return low < x < self.too_few[0]

    def illinois(self) -> float:
        """The regula falsi point of the two ends; bisection in log t if it is not inside."""
        (x1, f1), (x2, f2) = self.too_many, self.too_few
        x = x1 - f1 * (x2 - x1) / (f2 - f1)
        return x if self.inside(x) else 0.5 * (x1 + x2)


class TailK(Sparsifier):
    """tail-k (module doc): previous threshold (or a strided sample's after a miss), corrected
    by exact counts inside a bracket that always shrinks (Illinois in log t)."""

    name = "tail-k"
    family = "tail"
    plot_order = 60
    checks_finite = True
    may_return_empty = True  # a constant |u| has no threshold between 0 and d elements
    stateful = True          # the previous threshold, count, k and slope carry over

    def __init__(self, evaluations: int = EVALUATIONS) -> None:
        self.max_evaluations = check_param("evaluations", evaluations, 1, 64, integer=True)
        self._workspace = Workspace()
        self._state: dict | None = None
        self.last_evaluations = 0  # counts evaluated by the latest call (for benchmarks)

    def _select(self, u: torch.Tensor, k: int) -> torch.Tensor:
        blocks = BlockMaxima(u, expected_count=k, workspace=self._workspace)  # raises on NaN/Inf
        top = blocks.max_abs()
        if top <= 0.0:  # u == 0: no strict threshold selects anything
            self.last_evaluations = 0
            return torch.empty(0, dtype=torch.int64, device=u.device)
        d = blocks.d
        log_k, log_top = math.log(k), math.log(top)
        slope, log_t, sampled = self._first_threshold(u, k, d, top)
        bracket = _Bracket(log_top, log_k)
        points: list[tuple[float, float, int]] = []  # (log t, f = log c - log k, c)
        for evaluation in range(self.max_evaluations):
            count = blocks.count(math.exp(log_t), strict=True)
            f = math.log(max(count, 0.5)) - log_k
            points.append((log_t, f, count))
            if in_band(count, k) or evaluation + 1 == self.max_evaluations:
                break
            bracket.update(log_t, f)
            slope = self._secant_slope(points, slope)
            if not sampled:  # the previous threshold missed: try the history-free estimate
                sampled = True
                log_t = self._sample_log_threshold(u, k, d, top)
                if bracket.inside(log_t):
                    continue
            x = points[-1][0]
            if bracket.too_many is None:  # only too few so far: lower t along the slope
                step = x + f / slope
                log_t = step if bracket.inside(step) else min(x, bracket.too_few[0]) - math.log(4.0)
            else:
                log_t = bracket.illinois()
        self.last_evaluations = len(points)
        best = min(range(len(points)), key=lambda i: (abs(points[i][1]), -i))
        log_t, _, count = points[best]
        slope = self._slope_near_k(points, slope)
        self._state = {"log_threshold": log_t, "count": int(count), "k": int(k), "d": int(d),
                       "slope": float(slope)}
        return blocks.indices(math.exp(log_t), strict=True)

    # ---- the threshold's steps ---------------------------------------------------------
    def _first_threshold(self, u: torch.Tensor, k: int, d: int, top: float
                         ) -> tuple[float, float, bool]:
        """(slope, log t, from the sample) to evaluate first: the previous call's threshold moved
        to this k when that call ended in band; else the strided sample's (a restart)."""
        state = self._state
        slope = gaussian_slope(k / d)
        if state is not None and state["d"] == d:
            slope = float(state["slope"])
            if in_band(state["count"], state["k"]):
                log_t = state["log_threshold"] + (math.log(state["count"]) - math.log(k)) / slope
                return slope, min(log_t, math.log(top)), False
        return slope, self._sample_log_threshold(u, k, d, top), True

    @staticmethod
    def _sample_log_threshold(u: torch.Tensor, k: int, d: int, top: float) -> float:
        """log of the (k m / d)-th largest |u| of a strided sample of m = 64 d / k values."""
        sample = strided_sample(u, math.ceil(SAMPLE_TOP * d / k)).abs()
        m = sample.numel()
        rank = min(m, max(1, round(k * m / d)))
        t = float(torch.topk(sample, rank, sorted=False).values.min())
        if t <= 0.0:  # the sample's top is all zeros: start just below the largest |u|
            t = top * 0.5
        return math.log(t)

    @staticmethod
    def _secant_slope(points: list[tuple[float, float, int]], slope: float) -> float:
        """-d log c / d log t from the last two evaluations; the previous slope if they agree."""
        if len(points) < 2:
            return slope
        return TailK._secant(points[-2], points[-1], slope)

    @staticmethod
    def _slope_near_k(points: list[tuple[float, float, int]], slope: float) -> float:
        """The secant through the two evaluated points closest to k (for the next call)."""
        if len(points) < 2:
            return slope
        near = sorted(points, key=lambda p: abs(p[1]))[:2]
        return TailK._secant(near[0], near[1], slope)

    @staticmethod
    def _secant(p: tuple[float, float, int], q: tuple[float, float, int], slope: float) -> float:
        if p[0] == q[0] or p[1] == q[1]:
            return slope
        measured = -(q[1] - p[1]) / (q[0] - p[0])
        return _clamp_slope(measured) if measured > 0 else slope

    # ---- state ----------------------------------------------------------------------------
    def state_dict(self) -> dict | None:
        """The previous call's threshold (log), count, k, d and slope; None before the first call."""
        return None if self._state is None else dict(self._state)

    def load_state_dict(self, state: dict | None) -> None:
        self._state = None if state is None else {
            "log_threshold": float(state["log_threshold"]), "count": int(state["count"]),
            "k": int(state["k"]), "d": int(state["d"]), "slope": float(state["slope"])}

    def __repr__(self) -> str:
        return f"TailK(evaluations={self.max_evaluations})"
