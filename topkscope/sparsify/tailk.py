"""tail-k: an O(d) approximate Top-k that sizes its threshold on the counts it measures.

Designed with this tool's measurements, not on an assumed distribution: the error-compensated
u is not Gaussian (fitted generalised-normal shape from about 0.24 to 3 across our models, exact
zeros from unused embedding rows) and error feedback truncates its extreme tail, so a threshold
from the moments of u (Gaussian-k, a fitted family) mis-sizes k by factors of 0.02 to 50. What
does hold is that u changes slowly from one step to the next, and that over a short range the
count above a threshold is close to a power of the threshold. tail-k therefore works on the
measured count curve, in log-log coordinates (invariant to a rescaling of u):

    first threshold:  the previous call's threshold moved to this call's k,
                          log t = log t_prev + (log c_prev - log k) / a
                      (a = -d log count / d log t, kept from the previous call), or, on the
                      first call, the (k m / d)-th largest |u| of a strided sample of
                      m = 64 d / k values (about 64 of the top k; a selection over m, not d)
    repeat at most 4 times:
        c = #{i : |u_i| > t}                    exact, on block maxima (blockmax.py)
        stop if 2k/3 <= c <= 4k/3
        next t: the secant through the last two (log t, log c) points towards log k (with one
                point, slope a), kept inside the bracket of the closest thresholds known to give
                too many / too few elements: outside it, the log-log interpolation between the
                bracket's ends (t = max |u| selects nothing, so a too-few end always exists)
    return {i : |u_i| > t} of the last evaluation, as is (never padded or trimmed)
    state for the next call: t, c, k and the last secant slope a (clamped to [0.5, 1000])

Cost: one block-maxima pass over d per call plus, per evaluation, a read of the blocks that can
hold |u_i| > t (a full comparison pass only when many blocks can); no sort or selection kernel
over d. In steady training the previous threshold is in band and one evaluation suffices.
Count guarantee: none, but each call ends in [2k/3, 4k/3] unless four evaluations did not reach
it (a count curve with a jump: e.g. many equal magnitudes); a constant |u| gives 0 or d.
The state (previous threshold, count, k, slope) is per worker and saved in checkpoints.
"""

from __future__ import annotations

import math

import torch

from topkscope.sparsify._helpers import Workspace, strided_sample, two_sided_normal_quantile
from topkscope.sparsify.base import Sparsifier, check_param
from topkscope.sparsify.blockmax import BlockMaxima

EVALUATIONS = 4        # most exact counts per call
SAMPLE_TOP = 64        # expected top-k elements in the first call's strided sample
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


class TailK(Sparsifier):
    """tail-k (module doc): previous threshold, corrected by measured counts in log-log steps."""

    name = "tail-k"
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
        slope, log_t = self._first_threshold(u, k, d, top)
        lo, hi = BAND[0] * k, BAND[1] * k
        log_k = math.log(k)
        # the closest thresholds known to give too many / too few elements, as (log t, log c);
        # t = max |u| gives none (strict), so the too-few end always exists
        too_many: tuple[float, float] | None = None
        too_few = (math.log(top), math.log(0.5))
        points: list[tuple[float, float]] = []
        count = 0
        for evaluation in range(self.max_evaluations):
            count = blocks.count(math.exp(log_t), strict=True)
            points.append((log_t, math.log(max(count, 0.5))))
            if lo <= count <= hi or evaluation + 1 == self.max_evaluations:
                break
            if count > hi:
                too_many = points[-1] if too_many is None else max(too_many, points[-1])
            else:
                too_few = min(too_few, points[-1])
            slope = self._secant_slope(points, slope)
            log_t = self._next_log_threshold(points[-1], slope, log_k, too_many, too_few)
        self.last_evaluations = len(points)
        threshold = math.exp(points[-1][0])
        self._state = {"log_threshold": points[-1][0], "count": int(count), "k": int(k),
                       "d": int(d), "slope": float(slope)}
        return blocks.indices(threshold, strict=True)

    # ---- the threshold's steps ---------------------------------------------------------
    def _first_threshold(self, u: torch.Tensor, k: int, d: int, top: float) -> tuple[float, float]:
        """(slope, log t) to evaluate first: the previous call's, moved to this k; else a sample's."""
        state = self._state
        if state is not None and state["d"] == d and state["count"] > 0:
            slope = float(state["slope"])
            log_t = state["log_threshold"] + (math.log(state["count"]) - math.log(k)) / slope
            return slope, min(log_t, math.log(top))
        sample = strided_sample(u, math.ceil(SAMPLE_TOP * d / k)).abs()
        m = sample.numel()
        rank = min(m, max(1, round(k * m / d)))
        t = float(torch.topk(sample, rank, sorted=False).values.min())
        if t <= 0.0:  # the sample's top is all zeros: start just below the largest |u|
            t = top * 0.5
        return gaussian_slope(k / d), math.log(t)

    @staticmethod
    def _secant_slope(points: list[tuple[float, float]], slope: float) -> float:
        """-d log c / d log t from the last two evaluations; the previous slope if they agree."""
        if len(points) < 2:
            return slope
        (x1, y1), (x2, y2) = points[-2], points[-1]
        if x1 == x2 or y1 == y2:
            return slope
        measured = -(y2 - y1) / (x2 - x1)
        return _clamp_slope(measured) if measured > 0 else slope

    @staticmethod
    def _next_log_threshold(point: tuple[float, float], slope: float, log_k: float,
                            too_many: tuple[float, float] | None,
                            too_few: tuple[float, float]) -> float:
        """The step towards log k along the slope; when it leaves the bracket, the log-log
        interpolation between the bracket's ends (a quarter of t while no end gave too many)."""
        x, y = point
        nxt = x + (y - log_k) / slope
        low = -math.inf if too_many is None else too_many[0]
        if low < nxt < too_few[0]:
            return nxt
        if too_many is None:
            return min(x, too_few[0]) - math.log(4.0)
        (x1, y1), (x2, y2) = too_many, too_few
        return x1 + (x2 - x1) * (y1 - log_k) / (y1 - y2)

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
