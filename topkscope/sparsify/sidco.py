"""SIDCo: thresholds from a fitted sparsity-inducing distribution, in stages, in two versions.

After Abdelmoniem et al., "An Efficient Statistical-based Gradient Compression Technique for
Distributed Training Systems" (SIDCo, arXiv 2101.10761, MLSys 2021). |u| is modelled as
exponential (u double-exponential), gamma, or generalized Pareto, fitted by moments:

    exponential:  beta = mean;                    eta(q) = beta * ln(1/q)
    gamma:        a = mean^2/var, th = var/mean;  eta(q) = th * Qinv(a, q)   (upper tail q)
    gpareto:      xi = (1 - mean^2/var)/2, sigma = mean (1 + mean^2/var)/2;
                  eta(q) = sigma/xi (q^-xi - 1)   (-> sigma ln(1/q) as xi -> 0)

Both versions send S = {i : |u_i| > eta_M} after M stages (peaks over threshold): stage 1
fits |u| and sets eta_1 = eta(q_1), q_1 = first_ratio (0.25); each later stage fits the values
above the last threshold, shifted, and raises the threshold by their eta(q), with
q = (rho / q_1)^(1 / (M - 1)) so that about rho d = k remain (rho = k / d).

`sidco` — the rule as the SIDCo authors published it, with the adaptive stage count. The
source is the authors' public code (SIDCo's `compression.py`: `GParetoCompressor`,
`ExpCompressor` and `MultStageSparseCompressor.adapt_stages` in its `stages = -1` mode, with
their `settings.py`: UPDATE_ITER = 5, RES_DIFF_UP = RES_DIFF_DOWN = 0.2, FIRST_RATIO = 0.25,
ADJUST_FR = False). Per call, with the current stage count M:

    M == 1 or rho >= first_ratio:  eta = eta(rho) of the fit of all of |u|   (one stage)
    otherwise: eta = eta(first_ratio) of the fit of all of |u|; then M - 1 times:
        X = the |u| above eta;  t = min X;  eta = t + eta(q) of the fit of X - t
    S = {|u| > eta}
    mean, variance: over all values (variance unbiased, as torch.var_mean)

and after the call (the adaptation, state of the instance):

    r += |S| / k;  every 5 calls: r_bar = r / 5, r = 0
        r_bar > 1.2: M = M - 1     r_bar < 0.8: M = M + 1
        M = min(max(M, 1), ceil(log2(1 / rho)))   (each stage keeps at most half)
    M starts at `stages` (1, their class default)

Differences from the authors' code: where theirs fails (fewer than two values above a
threshold to fit: an empty min / a NaN variance), ours stops the stages and sends what lies
above the last threshold; at rho >= first_ratio theirs would also run the later stages at a
ratio >= 1 (they keep every value above the first threshold, or at rho = first_ratio all but
the smallest), ours stops after the one stage; the state is per instance, i.e. per worker
(theirs: per process, shared by every tensor the process compresses — the same thing for one
worker per process and global selection); `gamma` is a moment fit in every stage (their
SIDCo-GP, a gamma fit by approximate maximum likelihood in stage 1 and generalized Pareto after,
is not offered); their |u| / ||u|| scaling does not change the set (the fits scale with u).

`sidco-fixed` — a stateless rule with a fixed stage count (default 3, the project's earlier
reading), not the authors' code: the fits use a strided sample of about 2^18 elements of u
(all of u when smaller), the later stages fit |u_i| - eta_{j-1} of the values above eta_{j-1}
(population variance), and a later stage that would keep nothing of the sample is skipped.
A generalized-Pareto fit in 3 stages from a first ratio of 0.25 lands within ~0.8-1.1 k on
normal, Laplace, Student-t(3) and two-scale mixtures at rho in {0.001, 0.01}; a single
exponential stage selects about 0.1 k on Gaussian data, because a Gaussian tail is lighter.

Cost: O(d) — |u| once, the first fit and the first exceedances over all of u (`sidco`) or the
sample (`sidco-fixed`), one block-maxima pass over u and the hit blocks for S.
Count guarantee: none; the count is k times the ratio between the fitted and the true tail,
reported as is. The set can be empty: a constant |u| (eta = the common magnitude, nothing
strictly above it), or a threshold above max |u|.
"""

from __future__ import annotations

import math

import torch
from scipy import special

from topkscope.sparsify._helpers import Workspace, mean_std, select_where, strided_sample
from topkscope.sparsify.base import Sparsifier, check_param
from topkscope.sparsify.blockmax import BlockMaxima

DISTRIBUTIONS = ("exponential", "gamma", "gpareto")

# The SIDCo authors' settings (settings.py) for the adaptive stage count
ADAPT_EVERY = 5         # UPDATE_ITER: calls averaged before the stage count changes
ADAPT_BAND = 0.2        # RES_DIFF_UP = RES_DIFF_DOWN: mean count / k outside [0.8, 1.2] adapts
FIRST_RATIO = 0.25      # FIRST_RATIO: the share kept by the first stage


def tail_threshold(dist: str, mean: float, var: float, q: float) -> float:
    """eta with P(X > eta) = q for X >= 0 of the given family fitted to (mean, var)."""
    if mean <= 0.0:
        return 0.0
    if dist == "exponential":
        return mean * math.log(1.0 / q)
    if var <= 0.0:
        return mean  # a point mass: every value equals the mean
    ratio = mean * mean / var
    if dist == "gamma":
        shape, scale = ratio, var / mean
        return scale * float(special.gammainccinv(shape, q))
    xi = 0.5 * (1.0 - ratio)
    sigma = 0.5 * mean * (1.0 + ratio)
    if abs(xi) < 1e-9:
        return sigma * math.log(1.0 / q)
    return sigma / xi * (q ** (-xi) - 1.0)


def max_stages(rho: float) -> int:
    """The authors' cap on the stage count, ceil(log(rho) / log(0.5)), at least 1."""
    return max(1, math.ceil(math.log(rho) / math.log(0.5)))


def _check_dist(dist: str) -> str:
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"dist = {dist!r} is not one of {', '.join(DISTRIBUTIONS)}")
    return dist


class SIDCo(Sparsifier):
    """SIDCo as its authors published it: multi-stage tail fits, the stage count adapted."""

    name = "sidco"
    family = "sidco"
    plot_order = 50
    checks_finite = True
    may_return_empty = True
    stateful = True  # the stage count carries over between calls (state_dict / load_state_dict)

    def __init__(self, dist: str = "gpareto", stages: int = 1,
                 first_ratio: float = FIRST_RATIO) -> None:
        self.dist = _check_dist(dist)
        self.initial_stages = check_param("stages", stages, 1, 64, integer=True)
        self.first_ratio = check_param("first_ratio", first_ratio, 0.0, 1.0, low_open=True)
        self.stages = self.initial_stages  # M, adapted after every ADAPT_EVERY calls
        self._ratio_sum = 0.0
        self._calls = 0
        self._workspace = Workspace()

    def _select(self, u: torch.Tensor, k: int) -> torch.Tensor:
        blocks = BlockMaxima(u, expected_count=k, workspace=self._workspace)  # raises on NaN/Inf
        rho = k / blocks.d
        eta = self.staged_threshold(blocks.magnitudes(), rho)
        selected = blocks.indices(eta, strict=True)
        self._adapt(selected.numel() / k, rho)
        return selected

    def first_stage(self, mag: torch.Tensor, mean: float, std: float
                    ) -> tuple[float, torch.Tensor]:
        """eta_1 = eta(first_ratio) of the fit (mean, std) of all of |u|, and the magnitudes
        above it (float64): what every stage count M >= 2 starts from."""
        eta = tail_threshold(self.dist, mean, std * std, self.first_ratio)
        return eta, select_where(mag, mag > eta).double()  # ~first_ratio d of them

    def staged_threshold(self, mag: torch.Tensor, rho: float,
                         moments: tuple[float, float] | None = None,
                         first: tuple[float, torch.Tensor] | None = None) -> float:
        """eta_M of the current stage count M for the magnitudes |u| (see the module rule).
        moments (mean_std(mag)) and first (first_stage(mag, *moments)) may be given when
        already computed, e.g. for several stage counts or densities of one vector."""
        mean, std = mean_std(mag) if moments is None else moments
        if self.stages == 1 or rho >= self.first_ratio:
            return tail_threshold(self.dist, mean, std * std, rho)
        eta, values = self.first_stage(mag, mean, std) if first is None else first
        q = (rho / self.first_ratio) ** (1.0 / (self.stages - 1))
        for _ in range(self.stages - 1):
            if values.numel() < 2:
                break  # nothing left to fit (the authors' code fails here)
            low = float(values.min())
            mean, std = mean_std(values - low)
            eta = low + tail_threshold(self.dist, mean, std * std, q)
            values = select_where(values, values > eta)
        return eta

    def _adapt(self, count_over_k: float, rho: float) -> None:
        """The authors' stage adaptation (`adapt_stages`, stages = -1)."""
        self._ratio_sum += count_over_k
        self._calls += 1
        if self._calls < ADAPT_EVERY:
            return
        mean_ratio = self._ratio_sum / self._calls
        if mean_ratio > 1.0 + ADAPT_BAND:
            self.stages -= 1
        elif mean_ratio < 1.0 - ADAPT_BAND:
            self.stages += 1
        self.stages = max(min(self.stages, max_stages(rho)), 1)
        self._ratio_sum, self._calls = 0.0, 0

    def state_dict(self) -> dict[str, float | int]:
        """The adaptive state: current stage count and the calls since the last adaptation."""
        return {"stages": self.stages, "ratio_sum": self._ratio_sum, "calls": self._calls}

    def load_state_dict(self, state: dict) -> None:
        self.stages = int(state["stages"])
        self._ratio_sum = float(state["ratio_sum"])
        self._calls = int(state["calls"])

    def __repr__(self) -> str:
        return (f"SIDCo(dist={self.dist!r}, stages={self.stages} (from {self.initial_stages}), "
                f"first_ratio={self.first_ratio})")


class SIDCoFixed(Sparsifier):
    """Stateless multi-stage threshold with a fixed stage count, fitted on a strided sample."""

    name = "sidco-fixed"
    family = "sidco_fixed"
    plot_order = 51
    checks_finite = True
    may_return_empty = True

    def __init__(
        self,
        dist: str = "gpareto",
        stages: int = 3,
        first_ratio: float = FIRST_RATIO,
        sample_size: int = 1 << 18,
    ) -> None:
        self.dist = _check_dist(dist)
        self.stages = check_param("stages", stages, 1, 8, integer=True)
        self.first_ratio = check_param("first_ratio", first_ratio, 0.0, 1.0, low_open=True)
        self.sample_size = check_param("sample_size", sample_size, 1024, 1 << 30, integer=True)
        self._workspace = Workspace()

    def _select(self, u: torch.Tensor, k: int) -> torch.Tensor:
        blocks = BlockMaxima(u, expected_count=k, workspace=self._workspace)  # raises on NaN/Inf
        eta = self.fitted_threshold(strided_sample(blocks.u, self.sample_size), k / u.numel())
        return blocks.indices(eta, strict=True)

    def fitted_threshold(self, sample: torch.Tensor, rho: float) -> float:
        """eta_stages for a sample of u (see the module rule)."""
        values = sample.float().abs()  # a float32 copy of the sample's magnitudes
        first = max(self.first_ratio, rho) if self.stages > 1 else rho
        later = (rho / first) ** (1.0 / (self.stages - 1)) if self.stages > 1 else 1.0
        n = values.numel()
        mean = float(values.sum()) / n
        var = max(0.0, float(torch.dot(values, values)) / n - mean * mean)
        eta = tail_threshold(self.dist, mean, var, first)
        values = select_where(values, values > eta).double()  # small now: float64 from here
        for _ in range(self.stages - 1):
            excess = values - eta
            if excess.numel() < 2:
                break
            mean, std = mean_std(excess, unbiased=False)
            step = tail_threshold(self.dist, mean, std * std, later)
            keep = excess > step
            if not bool(keep.any()):
                break  # a stage that would keep nothing is skipped
            eta += step
            values = select_where(values, keep)
        return eta

    def __repr__(self) -> str:
        return (
            f"SIDCoFixed(dist={self.dist!r}, stages={self.stages}, "
            f"first_ratio={self.first_ratio})"
        )
