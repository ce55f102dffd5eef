"""Closed-form facts about Top-k, shared by the sparsifiers, the recorder and the statistics.

    k               = max(1, round(rho d)), capped at d        the count a density rho selects
                      (rule="floor": the Gaussian-k authors' max(int(rho d), 1))
    classic_bound   = 1 - k/d                                  (= E over Rand-k)
    paper_bound     = (1 - k/d)^2                              holds if sorted u^2 is convex, decreasing to 0
    gaussian_ratio  = 1 - rho - 2 t phi(t),  t = Phi^{-1}(1 - rho/2)   exact for u ~ N(0, s^2)
    uniform_ratio   = (1 - rho)^3                              exact for u ~ U(-a, a)
    gennorm_ratio   = P(3/beta, Q^{-1}(1/beta, rho / (1 - z)))         exact for a generalised normal
                      of shape beta with a share z of exact zeros (P, Q: regularised incomplete gamma)
"""

from __future__ import annotations

import math

# scipy.special, not scipy.stats: the same normal quantile without the ~0.7 s import that
# every `topkscope run` child would pay
from scipy.special import gammainc, gammainccinv, ndtri

from topkscope import validate


def check_density(density: float) -> float:
    """Validate a density rho = k/d: a number in (0, 1]."""
    return validate.number("density", density, 0, 1, lo_open=True)


K_RULES = ("round", "floor")


def k_from_density(density: float, d: int, rule: str = "round") -> int:
    """The target count for density rho over d elements, never below 1, capped at d.

    rule="round" (ours, the default): k = max(1, round(rho * d)).
    rule="floor" (the Gaussian-k authors' code): k = max(int(rho * d), 1).
    """
    rho = check_density(density)
    if rule == "round":
        k = int(round(rho * d))
    elif rule == "floor":
        k = int(rho * d)
    else:
        validate.choice("k rule", rule, K_RULES)
    return max(1, min(d, k))


def check_kd(k: int, d: int) -> tuple[int, int]:
    """(k, d) as ints: d >= 1 and k in [0, d], else a ValueError naming the bad one."""
    if int(d) < 1:
        raise ValueError(f"d = {d} must be at least 1")
    if not 0 <= int(k) <= int(d):
        raise ValueError(f"k = {k} is outside the allowed range [0, d = {d}]")
    return int(k), int(d)


def classic_bound(k: int, d: int) -> float:
    """1 - k/d: the classic contraction bound, equal to the expectation for Rand-k."""
    k, d = check_kd(k, d)
    return 1.0 - k / d


def paper_bound(k: int, d: int) -> float:
    """(1 - k/d)^2: the paper's tighter bound (assumes convex decreasing sorted magnitudes)."""
    return classic_bound(k, d) ** 2


def gaussian_ratio(k: int, d: int) -> float:
    """Expected delta for u ~ N(0, s^2), d -> infinity: 1 - rho - 2 t phi(t), t = Phi^-1(1 - rho/2)."""
    k, d = check_kd(k, d)
    rho = k / d
    if rho == 0.0:
        return 1.0
    if rho == 1.0:
        return 0.0
    t = float(ndtri(1.0 - rho / 2.0))
    phi = math.exp(-0.5 * t * t) / math.sqrt(2.0 * math.pi)
    return 1.0 - rho - 2.0 * t * phi


def uniform_ratio(k: int, d: int) -> float:
    """Expected delta for u ~ U(-a, a), d -> infinity: (1 - rho)^3, rho = k/d.

    |u|/a is U(0, 1); Top-k keeps the entries above 1 - rho, whose share of the energy is
    (1 - (1 - rho)^3) (the integral of x^2 from 1 - rho to 1 over that from 0 to 1). A flat
    vector reaches 1 - k/d; the uniform one sits one gap (rho (1 - rho)^2) below (1 - k/d)^2.
    """
    k, d = check_kd(k, d)
    return (1.0 - k / d) ** 3


def gennorm_ratio(k: int, d: int, beta: float, zero_share: float = 0.0) -> float:
    """Expected delta, d -> infinity, for u whose non-zero entries follow a generalised normal.

    The density of a non-zero entry is proportional to exp(-|x / a|^beta) (beta = 2: normal,
    beta = 1: Laplace); a share `zero_share` = z of the entries is exactly zero (unused embedding
    rows, for instance). With Y = |x / a|^beta ~ Gamma(1/beta), the entries above the magnitude
    threshold t are a share Q(1/beta, y_t) of the non-zero ones and carry a share
    Q(3/beta, y_t) of the energy, so Top-k at rho = k/d keeps the non-zero share
    rho' = rho / (1 - z) and

        delta = 1 - Q(3/beta, y_t) = P(3/beta, y_t),   y_t = Q^{-1}(1/beta, rho').

    beta = 2 and z = 0 give gaussian_ratio; rho' >= 1 (k covers every non-zero entry) gives 0.
    The scale a cancels. Computed in float64.
    """
    k, d = check_kd(k, d)
    beta = validate.number("beta", beta, 0, None, lo_open=True)
    zero_share = validate.number("zero_share", zero_share, 0, 1, hi_open=True)
    rho = k / d
    if rho == 0.0:
        return 1.0
    kept = rho / (1.0 - zero_share)
    if kept >= 1.0 - 1e-12:   # k covers every non-zero entry (up to the rounding of 1 - z)
        return 0.0
    y = float(gammainccinv(1.0 / beta, kept))
    return float(gammainc(3.0 / beta, y))
