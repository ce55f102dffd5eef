"""SIDCo: thresholds from a fitted sparsity-inducing distribution, in stages.

After Abdelmoniem et al., "An Efficient Statistical-based Gradient Compression
Technique for Distributed Training Systems" (SIDCo, arXiv 2101.10761). |u| is modelled
as exponential (u double-exponential), gamma, or generalized Pareto, fitted by moments:

    exponential:  beta = mean;                    eta(q) = beta * ln(1/q)
    gamma:        a = mean^2/var, th = var/mean;  eta(q) = th * Qinv(a, q)   (upper tail q)
    gpareto:      xi = (1 - mean^2/var)/2, sigma = mean (1 + mean^2/var)/2;
                  eta(q) = sigma/xi (q^-xi - 1)   (-> sigma ln(1/q) as xi -> 0)

Multi-stage (peaks over threshold): stage 1 fits |u| and sets eta_1 = eta(q_1) with
q_1 = max(first_ratio, rho); each later stage fits the exceedances |u_i| - eta_{j-1}
of the values above eta_{j-1} with the same family and raises the threshold by
their eta(q), q = (rho / q_1)^(1 / (stages - 1)), so that about rho d = k remain.
The fits use a strided sample of about 2^18 elements of u (all of u when smaller);
the final threshold is then applied to all of u: S = {i : |u_i| > eta_stages}.
(The paper also adapts the number of stages between iterations from the observed
count; this is the stateless rule. Defaults: a generalized-Pareto fit in 3 stages
from a first ratio of 0.25 lands within ~0.8-1.1 k on normal, Laplace, Student-t(3)
and two-scale mixtures at rho in {0.001, 0.01}; a single exponential stage selects
about 0.1 k on Gaussian data, because a Gaussian tail is much lighter.)

Cost: O(d) — one block-maxima pass over u and the hit blocks; the fits cost O(2^18).
Count guarantee: none; the count is k times the ratio between the fitted and the true
tail, reported as is. A later stage that would keep nothing of the sample is skipped,
but the set can still be empty: a constant |u| (eta = the common magnitude, nothing
strictly above it), or a first-stage eta above max |u|.
"""

from __future__ import annotations

import math

import torch
from scipy import special

from topkscope.sparsify._helpers import Workspace, select_where, strided_sample
from topkscope.sparsify.base import Sparsifier, check_param
from topkscope.sparsify.blockmax import BlockMaxima

DISTRIBUTIONS = ("exponential", "gamma", "gpareto")


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


class SIDCo(Sparsifier):
    """Multi-stage threshold from an exponential, gamma or generalized-Pareto fit of |u|."""

    name = "sidco"
    checks_finite = True
    may_return_empty = True

    def __init__(
        self,
        dist: str = "gpareto",
        stages: int = 3,
        first_ratio: float = 0.25,
        sample_size: int = 1 << 18,
    ) -> None:
        if dist not in DISTRIBUTIONS:
            raise ValueError(f"dist = {dist!r} is not one of {', '.join(DISTRIBUTIONS)}")
        self.dist = dist
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
            step = tail_threshold(self.dist, *_moments(excess), later)
            keep = excess > step
            if not bool(keep.any()):
                break  # a stage that would keep nothing is skipped
            eta += step
            values = select_where(values, keep)
        return eta

    def __repr__(self) -> str:
        return (
            f"SIDCo(dist={self.dist!r}, stages={self.stages}, first_ratio={self.first_ratio})"
        )


def _moments(x: torch.Tensor) -> tuple[float, float]:
    """(mean, population variance) of a float64 tensor."""
    return float(x.mean()), float(x.var(correction=0))
