"""Contraction of the Top-k operator against the bounds of Shi et al. (arXiv 1911.08772).

    delta_emp(u, k) = ||u - TopK(u)||^2 / ||u||^2     measured, float64 accumulation
    classic_bound   = 1 - k/d                          (= E over Rand-k)
    paper_bound     = (1 - k/d)^2                      holds if sorted |u| is convex decreasing
    gaussian_ratio  = 1 - rho - 2 t phi(t),  t = Phi^{-1}(1 - rho/2)   exact for u ~ N(0, s^2)
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats


def _check_kd(k: int, d: int) -> tuple[int, int]:
    if int(d) < 1:
        raise ValueError(f"d = {d} must be at least 1")
    if not 0 <= int(k) <= int(d):
        raise ValueError(f"k = {k} is outside the allowed range [0, d = {d}]")
    return int(k), int(d)


def _as_float64(u) -> np.ndarray:
    try:
        import torch

        if isinstance(u, torch.Tensor):
            u = u.detach().to("cpu", torch.float64).numpy()
    except ImportError:  # pragma: no cover
        pass
    x = np.asarray(u, dtype=np.float64).ravel()
    if not np.all(np.isfinite(x)):
        bad = int(np.count_nonzero(~np.isfinite(x)))
        raise ValueError(f"u has {bad} non-finite values (NaN/Inf) of {x.size}; remove them first")
    return x


def topk_ratio(u, k: int) -> float:
    """||u - TopK(u)||^2 / ||u||^2 in float64. NaN (with no division) when u is all zeros."""
    x = _as_float64(u)
    k, d = _check_kd(k, x.size)
    sq = x * x
    total = float(sq.sum())
    if total == 0.0:
        return math.nan  # undefined: nothing to contract
    if k == 0:
        return 1.0
    if k == d:
        return 0.0
    # the d-k smallest squares are what Top-k leaves behind
    rest = np.partition(sq, d - k - 1)[: d - k]
    return float(rest.sum() / total)


def classic_bound(k: int, d: int) -> float:
    """1 - k/d: the classic contraction bound, equal to the expectation for Rand-k."""
    k, d = _check_kd(k, d)
    return 1.0 - k / d


def paper_bound(k: int, d: int) -> float:
    """(1 - k/d)^2: the paper's tighter bound (assumes convex decreasing sorted magnitudes)."""
    return classic_bound(k, d) ** 2


def gaussian_ratio(k: int, d: int) -> float:
    """Expected delta for u ~ N(0, s^2), d -> infinity: 1 - rho - 2 t phi(t), t = Phi^-1(1 - rho/2)."""
    k, d = _check_kd(k, d)
    rho = k / d
    if rho == 0.0:
        return 1.0
    if rho == 1.0:
        return 0.0
    t = stats.norm.ppf(1.0 - rho / 2.0)
    return float(1.0 - rho - 2.0 * t * stats.norm.pdf(t))
