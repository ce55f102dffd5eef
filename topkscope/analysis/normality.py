"""Is a gradient vector Gaussian? A battery of normality tests plus effect sizes and Q-Q data.

Tests whose cost is linear in n run on every finite value, from float64 moments:

    g1 = m3 / m2^(3/2)  (skew),   g2 = m4 / m2^2 - 3  (excess kurtosis),  m_p = mean((x - mean)^p)
    D'Agostino-Pearson  K^2 = Z1(g1)^2 + Z2(g2)^2 ~ chi2(2)     (D'Agostino 1970; Anscombe-Glynn 1983)
    Jarque-Bera         JB  = n/6 * (g1^2 + g2^2/4) ~ chi2(2)

Tests that need a sort run on a seeded subsample of at most max_n values:

    Kolmogorov-Smirnov  D = sup_x |F_n(x) - Phi((x - xbar)/s)|, Lilliefors-corrected p
                        (Dallal-Wilkinson 1986 for p <= 0.1, Stephens 1974 polynomials above)
    Anderson-Darling    A^2 = -n - mean((2i-1)(ln Phi(z_i) + ln(1 - Phi(z_{n+1-i}))))
                        p from scipy's tables (method="interpolate", clipped to [0.01, 0.15])
    Q-Q correlation     r = corr(x_(i), Phi^-1((i - 3/8)/(n + 1/4)))   (r^2 = Shapiro-Francia W')

and Shapiro-Wilk W on at most 5,000 of those values. With millions of values every test rejects
any real gradient, so the effect sizes ks_D, excess_kurtosis and qq_r are the numbers to compare
across n; the p-values answer "could this be exactly normal?".
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import special, stats

from topkscope import kernel
from topkscope.analysis.vectors import MIN_VALUES, check_max_n, finite_values, subsample

SHAPIRO_MAX_N = 5000  # scipy's Shapiro-Wilk p-value is only accurate up to here
DEFAULT_MAX_N = 250_000

KEYS = (
    "n", "nonfinite", "n_sub", "n_shapiro", "zero_frac", "mean", "std", "skew", "excess_kurtosis",
    "shapiro_W", "shapiro_p", "dagostino_K2", "dagostino_p", "anderson_A2", "anderson_p",
    "ks_D", "ks_p", "jarque_bera", "jarque_bera_p", "qq_r", "note",
)  # fmt: skip


def battery(x, max_n: int = DEFAULT_MAX_N, seed: int = 0) -> dict:
    """All normality statistics of the finite values of x, as one flat dict (keys: KEYS).

    n: finite values (moments, K^2, JB use all of them); nonfinite: NaN/Inf removed;
    n_sub: values in the sorted subsample (KS, AD, Q-Q); n_shapiro: values given to Shapiro-Wilk;
    zero_frac: share of exact zeros among the finite values (a point mass no normal has).
    std is the population standard deviation sqrt(m2). When fewer than 8 finite values remain or
    the values are constant, every statistic is NaN and `note` says why (never a division by 0).
    """
    max_n = check_max_n(max_n)
    values, nonfinite = finite_values(x)
    out: dict = dict.fromkeys(KEYS, math.nan)
    out.update(n=int(values.size), nonfinite=nonfinite, n_sub=0, n_shapiro=0, note="")
    if values.size < MIN_VALUES:
        out["note"] = f"fewer than {MIN_VALUES} finite values ({values.size})"
        return out
    sums = kernel.central_sums(values)
    n = sums.n
    m2, m3, m4 = sums.m2 / n, sums.m3 / n, sums.m4 / n
    out["mean"], out["std"] = sums.mean, math.sqrt(m2)
    out["zero_frac"] = 1.0 - np.count_nonzero(values) / values.size
    if not _spread(m2, sums.mean):
        out["note"] = "all values zero" if out["zero_frac"] == 1.0 else "constant vector (std = 0)"
        return out
    g1, g2 = (float(g) for g in kernel.skew_kurtosis(m2, m3, m4))
    out["skew"], out["excess_kurtosis"] = g1, g2
    out["dagostino_K2"], out["dagostino_p"] = dagostino(n, g1, g2)
    out["jarque_bera"], out["jarque_bera_p"] = jarque_bera(n, g1, g2)

    rng = np.random.default_rng(seed)
    sub = np.sort(subsample(values, max_n, rng).astype(np.float64))
    out["n_sub"] = int(sub.size)
    if not sub[-1] > sub[0]:
        out["note"] = "subsample is constant; sort-based tests undefined"
        return out
    out["ks_D"], out["ks_p"] = lilliefors(sub)
    ad = stats.anderson(sub, "norm", method="interpolate")
    out["anderson_A2"], out["anderson_p"] = float(ad.statistic), float(ad.pvalue)
    out["qq_r"] = qq_correlation(sub)
    sw = sub if sub.size <= SHAPIRO_MAX_N else rng.choice(sub, SHAPIRO_MAX_N, replace=False)
    out["n_shapiro"] = int(sw.size)
    if sw.max() > sw.min():
        res = stats.shapiro(sw)
        out["shapiro_W"], out["shapiro_p"] = float(res.statistic), float(res.pvalue)
    return out


def _spread(m2: float, mean: float) -> bool:
    """True when the variance is distinguishable from float64 rounding of a constant."""
    return m2 > (1e-14 * abs(mean)) ** 2 and m2 > 0.0


def dagostino(n: int, g1: float, g2: float) -> tuple[float, float]:
    """D'Agostino-Pearson omnibus K^2 = Z1^2 + Z2^2 and its chi2(2) p-value (n >= 8).

    Z1 (skewness, D'Agostino 1970):
        y = g1 sqrt((n+1)(n+3) / (6(n-2)))
        beta2 = 3(n^2+27n-70)(n+1)(n+3) / ((n-2)(n+5)(n+7)(n+9))
        W^2 = sqrt(2(beta2 - 1)) - 1,  delta = 1/sqrt(ln W),  alpha = sqrt(2/(W^2-1))
        Z1 = delta asinh(y/alpha)
    Z2 (kurtosis, Anscombe-Glynn 1983), b2 = g2 + 3:
        x = (b2 - 3(n-1)/(n+1)) / sqrt(24n(n-2)(n-3) / ((n+1)^2 (n+3)(n+5)))
        sqrt(beta1) = 6(n^2-5n+2)/((n+7)(n+9)) sqrt(6(n+3)(n+5) / (n(n-2)(n-3)))
        A = 6 + 8/sqrt(beta1) (2/sqrt(beta1) + sqrt(1 + 4/beta1))
        Z2 = (1 - 2/(9A) - cbrt((1 - 2/A) / (1 + x sqrt(2/(A-4))))) / sqrt(2/(9A))
    """
    if n < MIN_VALUES:
        raise ValueError(f"n = {n} is too small for D'Agostino's test; need n >= {MIN_VALUES}")
    n = float(n)
    y = g1 * math.sqrt((n + 1) * (n + 3) / (6.0 * (n - 2)))
    beta2 = (
        3.0 * (n * n + 27 * n - 70) * (n + 1) * (n + 3)
        / ((n - 2) * (n + 5) * (n + 7) * (n + 9))
    )
    w2 = math.sqrt(2.0 * (beta2 - 1.0)) - 1.0
    delta = 1.0 / math.sqrt(0.5 * math.log(w2))
    alpha = math.sqrt(2.0 / (w2 - 1.0))
    z1 = delta * math.asinh(y / alpha)

    b2 = g2 + 3.0
    mean_b2 = 3.0 * (n - 1) / (n + 1)
    var_b2 = 24.0 * n * (n - 2) * (n - 3) / ((n + 1) ** 2 * (n + 3) * (n + 5))
    xk = (b2 - mean_b2) / math.sqrt(var_b2)
    sqrt_beta1 = (
        6.0 * (n * n - 5 * n + 2) / ((n + 7) * (n + 9))
        * math.sqrt(6.0 * (n + 3) * (n + 5) / (n * (n - 2) * (n - 3)))
    )
    a = 6.0 + 8.0 / sqrt_beta1 * (2.0 / sqrt_beta1 + math.sqrt(1.0 + 4.0 / sqrt_beta1**2))
    denom = 1.0 + xk * math.sqrt(2.0 / (a - 4.0))
    if denom == 0.0:
        term2 = math.inf
    else:
        term2 = math.copysign(abs((1.0 - 2.0 / a) / denom) ** (1.0 / 3.0), denom)
    z2 = (1.0 - 2.0 / (9.0 * a) - term2) / math.sqrt(2.0 / (9.0 * a))
    k2 = z1 * z1 + z2 * z2
    return float(k2), float(stats.chi2.sf(k2, 2))


def jarque_bera(n: int, g1: float, g2: float) -> tuple[float, float]:
    """Jarque-Bera JB = n/6 (g1^2 + g2^2/4) and its asymptotic chi2(2) p-value."""
    jb = n / 6.0 * (g1 * g1 + g2 * g2 / 4.0)
    return float(jb), float(stats.chi2.sf(jb, 2))


def lilliefors(sorted_x: np.ndarray) -> tuple[float, float]:
    """KS distance to the normal fitted by (mean, sample std), and the Lilliefors p-value.

        D = max_i max(i/n - Phi(z_i), Phi(z_i) - (i-1)/n),  z_i = (x_(i) - xbar)/s,  s with ddof=1
    """
    n = sorted_x.size
    if n < MIN_VALUES:
        raise ValueError(f"the KS test needs at least {MIN_VALUES} values, got {n}")
    s = float(np.std(sorted_x, ddof=1))
    if not s > 0.0:
        raise ValueError("the KS test is undefined for constant values (std = 0)")
    cdf = special.ndtr((sorted_x - float(np.mean(sorted_x))) / s)
    i = np.arange(1, n + 1, dtype=np.float64)
    d = max(float(np.max(i / n - cdf)), float(np.max(cdf - (i - 1) / n)))
    return d, lilliefors_p(d, n)


def lilliefors_p(d: float, n: int) -> float:
    """p-value of the Lilliefors statistic D for a normal with estimated mean and variance.

    Dallal & Wilkinson (1986) approximation, for n > 100 with D rescaled as D (n/100)^0.49:
        p = exp(-7.01256 D^2 (n+2.78019) + 2.99587 D sqrt(n+2.78019) - 0.122119
                + 0.974598/sqrt(n) + 1.67997/n)
    valid for p <= 0.1. Above that, Stephens' (1974) modified statistic
    D* = D (sqrt(n) - 0.01 + 0.85/sqrt(n)) and his quartic fits give p (1 below D* = 0.302).
    """
    if n < 5:
        raise ValueError(f"n = {n} is too small for the Lilliefors p-value; need n >= 5")
    if n > 100:
        dd, nd = d * (n / 100.0) ** 0.49, 100.0
    else:
        dd, nd = d, float(n)
    p = math.exp(
        -7.01256 * dd * dd * (nd + 2.78019)
        + 2.99587 * dd * math.sqrt(nd + 2.78019)
        - 0.122119
        + 0.974598 / math.sqrt(nd)
        + 1.67997 / nd
    )
    if p <= 0.1:
        return p
    k = (math.sqrt(n) - 0.01 + 0.85 / math.sqrt(n)) * d
    if k <= 0.302:
        return 1.0
    if k <= 0.5:
        p = 2.76773 - 19.828315 * k + 80.709644 * k**2 - 138.55152 * k**3 + 81.218052 * k**4
    elif k <= 0.9:
        p = -4.901232 + 40.662806 * k - 97.490286 * k**2 + 94.029866 * k**3 - 32.355711 * k**4
    elif k <= 1.31:
        p = 6.198765 - 19.558097 * k + 23.186922 * k**2 - 12.234627 * k**3 + 2.423045 * k**4
    else:
        p = 0.0
    return float(min(1.0, max(0.0, p)))


def qq_correlation(sorted_x: np.ndarray) -> float:
    """Correlation of the normal Q-Q plot: r = corr(x_(i), Phi^-1((i - 3/8)/(n + 1/4))).

    1 for exactly normal order statistics; 1 - r grows with tail weight at any n.
    """
    n = sorted_x.size
    m = special.ndtri((np.arange(1, n + 1, dtype=np.float64) - 0.375) / (n + 0.25))
    xc = sorted_x - float(np.mean(sorted_x))
    denom = math.sqrt(float(np.dot(xc, xc)) * float(np.dot(m, m)))
    return float(np.dot(xc, m) / denom) if denom > 0.0 else math.nan


def qq(x, points: int = 201, max_n: int = DEFAULT_MAX_N, seed: int = 0) -> pd.DataFrame:
    """Q-Q plot data against the normal: columns p, theoretical, sample.

    theoretical: `points` normal quantiles evenly spaced in z between Phi^-1(0.5/n) and
    Phi^-1(1 - 0.5/n) (n = values used); sample: the same quantiles of the standardized values
    (x - mean)/std (population std), linearly interpolated between order statistics.
    Empty when fewer than 8 finite values or no spread.
    """
    if isinstance(points, bool) or int(points) != points or int(points) < 3:
        raise ValueError(f"points = {points!r} must be an integer >= 3")
    values, _ = finite_values(x)
    cols = {"p": [], "theoretical": [], "sample": []}
    if values.size < MIN_VALUES:
        return pd.DataFrame(cols, dtype=np.float64)
    sub = np.sort(subsample(values, max_n, np.random.default_rng(seed)).astype(np.float64))
    std = float(np.std(sub))
    if not std > 0.0:
        return pd.DataFrame(cols, dtype=np.float64)
    n = sub.size
    z_edge = float(special.ndtri(1.0 - 0.5 / n))
    z = np.linspace(-z_edge, z_edge, int(points))
    p = special.ndtr(z)
    pos = p * n - 0.5  # Hazen plotting positions: order statistic i sits at p = (i + 0.5)/n
    sample = np.interp(pos, np.arange(n, dtype=np.float64), (sub - float(np.mean(sub))) / std)
    return pd.DataFrame({"p": p, "theoretical": z, "sample": sample})
