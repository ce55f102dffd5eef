"""Which distribution family describes a gradient vector best? Maximum-likelihood fits, ranked.

On x (signed values), two-sided families:
    normal        f = exp(-z^2/2) / (sqrt(2 pi) s),                     z = (x - loc)/s
    laplace       f = exp(-|z|) / (2 s)
    student_t     f = G((v+1)/2) / (G(v/2) sqrt(v pi) s) (1 + z^2/v)^(-(v+1)/2)
    gennorm       f = b / (2 s G(1/b)) exp(-|z|^b)       (b = 2 normal, b = 1 Laplace; G = Gamma)
On |x| (magnitudes, loc fixed at 0), the families SIDCo (arXiv 2101.10761) fits:
    exponential   f = exp(-y/s) / s
    gamma         f = y^(a-1) exp(-y/s) / (G(a) s^a)
    genpareto     f = (1 + c y/s)^(-1/c - 1) / s

Each fit reports log-likelihood L, AIC = 2p - 2L, BIC = p ln(n) - 2L (p free parameters) and the
KS distance D = sup |F_n - F_fit| on the values it was fitted to. Families are ranked by BIC
separately for x and for |x| (their likelihoods describe different data). Exact zeros are a point
mass no continuous family fits (and they make the t / gennorm / gamma likelihoods unbounded), so
they are excluded and counted, as are NaN/Inf.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import optimize, special, stats

from topkscope import kernel
from topkscope.analysis.vectors import MIN_VALUES, check_max_n, finite_values, subsample

DEFAULT_MAX_N = 100_000
COLUMNS = [
    "family", "on", "n", "n_params", "loc", "scale", "shape", "shape_name", "loglik", "aic",
    "bic", "ks_D", "delta_bic", "rank", "zeros", "nonfinite",
]  # fmt: skip
_DF_BOUNDS = (0.1, 1e7)  # Student-t degrees of freedom searched
_BETA_BOUNDS = (0.05, 20.0)  # gennorm shape searched


def compare(x, max_n: int = DEFAULT_MAX_N, seed: int = 0) -> pd.DataFrame:
    """Fit every family to (a seeded subsample of at most max_n nonzero finite values of) x.

    Returns one row per family (COLUMNS): the x families by BIC, best first, then the |x|
    families by BIC, best first. delta_bic is the BIC minus the best BIC of the same `on` group;
    rank is 1 for that best. Empty (with the columns) when fewer than 8 nonzero values remain
    or they are all equal; without |x| rows when all magnitudes are equal.
    """
    max_n = check_max_n(max_n)
    values, nonfinite = finite_values(x)
    nonzero = values[values != 0]
    zeros = int(values.size - nonzero.size)
    sample = np.sort(subsample(nonzero, max_n, np.random.default_rng(seed)).astype(np.float64))
    if sample.size < MIN_VALUES or not sample[-1] > sample[0]:
        return pd.DataFrame({c: [] for c in COLUMNS})
    rows = [_row(name, "x", sample, dist, params, shape_name)
            for name, dist, params, shape_name in _fits_signed(sample)]
    mags = np.sort(np.abs(sample))
    if mags[-1] > mags[0]:  # all |x| equal (a sign vector): no magnitude family is defined
        rows += [_row(name, "abs", mags, dist, params, shape_name)
                 for name, dist, params, shape_name in _fits_magnitude(mags)]
    table = pd.DataFrame(rows)
    table["delta_bic"] = table["bic"] - table.groupby("on")["bic"].transform("min")
    table["rank"] = table.groupby("on")["bic"].rank(method="first").astype(int)
    table["zeros"], table["nonfinite"] = zeros, nonfinite
    order = table["on"].map({"x": 0, "abs": 1})
    table = table.assign(_o=order).sort_values(["_o", "bic"], kind="stable").drop(columns="_o")
    return table.reset_index(drop=True)[COLUMNS]


def best(table: pd.DataFrame, on: str = "x") -> str | None:
    """Name of the best family (lowest BIC) fitted on `on` ("x" or "abs"); None if none."""
    if on not in ("x", "abs"):
        raise ValueError(f"on = {on!r} must be 'x' or 'abs'")
    rows = table[table["on"] == on]
    return None if rows.empty else str(rows.sort_values("bic")["family"].iloc[0])


def _row(name: str, on: str, data: np.ndarray, dist, params: tuple, shape_name: str) -> dict:
    """Log-likelihood, information criteria and KS distance of one fitted scipy distribution
    (data sorted ascending)."""
    frozen = dist(*params)
    loglik = float(np.sum(frozen.logpdf(data)))
    cdf = _FAST_CDF[name](params) if name in _FAST_CDF else frozen.cdf
    n_params = len(params) - (1 if on == "abs" else 0)  # loc = 0 is fixed on |x|
    n = data.size
    shape = float(params[0]) if len(params) == 3 else math.nan
    return {
        "family": name, "on": on, "n": int(n), "n_params": n_params,
        "loc": float(params[-2]), "scale": float(params[-1]), "shape": shape,
        "shape_name": shape_name, "loglik": loglik,
        "aic": 2.0 * n_params - 2.0 * loglik, "bic": n_params * math.log(n) - 2.0 * loglik,
        "ks_D": ks_distance(data, cdf),
    }  # fmt: skip


def _gennorm_cdf(params: tuple):
    """F(x) = 1/2 + sign(z)/2 P(1/b, |z|^b), P the regularized lower incomplete gamma."""
    b, loc, scale = params

    def cdf(x: np.ndarray) -> np.ndarray:
        z = (x - loc) / scale
        return 0.5 + 0.5 * np.sign(z) * special.gammainc(1.0 / b, np.abs(z) ** b)

    return cdf


# scipy's generic cdf machinery is several times slower than the special function itself
_FAST_CDF = {
    "student_t": lambda p: lambda x: special.stdtr(p[0], (x - p[1]) / p[2]),
    "gennorm": _gennorm_cdf,
    "gamma": lambda p: lambda x: special.gammainc(p[0], x / p[2]),
}


def ks_distance(xs: np.ndarray, cdf) -> float:
    """D = max_i max(i/n - F(x_(i)), F(x_(i)) - (i-1)/n) over xs sorted ascending."""
    f = cdf(xs)
    n = xs.size
    i = np.arange(1, n + 1, dtype=np.float64)
    return float(max(np.max(i / n - f), np.max(f - (i - 1) / n)))


def _fits_signed(x: np.ndarray) -> list[tuple]:
    """(name, scipy distribution, params as scipy orders them, shape name) for the x families."""
    med = float(np.median(x))
    return [
        ("normal", stats.norm, (float(np.mean(x)), float(np.std(x))), ""),
        ("laplace", stats.laplace, (med, float(np.mean(np.abs(x - med)))), ""),
        ("student_t", stats.t, fit_student_t(x), "df"),
        ("gennorm", stats.gennorm, fit_gennorm(x), "beta"),
    ]


def _fits_magnitude(y: np.ndarray) -> list[tuple]:
    """The |x| families, loc fixed at 0."""
    a, _, scale = stats.gamma.fit(y, floc=0.0)
    return [
        ("exponential", stats.expon, (0.0, float(np.mean(y))), ""),
        ("gamma", stats.gamma, (float(a), 0.0, float(scale)), "a"),
        ("genpareto", stats.genpareto, fit_genpareto(y), "c"),
    ]


def _robust_standardize(x: np.ndarray) -> tuple[np.ndarray, float, float]:
    """(x - median)/s with s = 1.4826 MAD (the std when the MAD is 0); returns (y, median, s)."""
    med = float(np.median(x))
    s = 1.4826 * float(np.median(np.abs(x - med)))
    if not s > 0.0:
        s = float(np.std(x))
    return (x - med) / s, med, s


def fit_student_t(x: np.ndarray) -> tuple[float, float, float]:
    """MLE (df, loc, scale) of Student's t, by bounded truncated Newton (TNC) on (ln v, mu, ln s)
    with the gradient

        dL/dmu = (v+1) z / (v s w),  dL/dln s = (v+1) z^2 / (v w) - 1,   w = 1 + z^2/v
        dL/dv  = [psi((v+1)/2) - psi(v/2) - 1/v - ln w + (v+1) z^2 / (v^2 w)] / 2
    on robustly standardized data; df is searched in [0.1, 1e7].
    """
    y, med, s = _robust_standardize(x)

    def neg(theta: np.ndarray) -> tuple[float, np.ndarray]:
        v, mu, sig = math.exp(theta[0]), theta[1], math.exp(theta[2])
        z = (y - mu) / sig
        z2 = z * z
        w = 1.0 + z2 / v
        logw = np.log1p(z2 / v)
        const = special.gammaln((v + 1) / 2) - special.gammaln(v / 2) - 0.5 * math.log(v * math.pi)
        ll = const - math.log(sig) - (v + 1) / 2 * float(np.mean(logw))
        r = z2 / w
        d_v = 0.5 * (special.digamma((v + 1) / 2) - special.digamma(v / 2) - 1.0 / v
                     - float(np.mean(logw)) + (v + 1) / v**2 * float(np.mean(r)))
        d_mu = (v + 1) / (v * sig) * float(np.mean(z / w))
        d_ls = (v + 1) / v * float(np.mean(r)) - 1.0
        return -ll, -np.array([v * d_v, d_mu, d_ls])

    # moments about the median of the standardized data: a starting point, not a statistic
    kurt = float(kernel.excess_kurtosis(float(np.mean(y**2)), float(np.mean(y**4))))
    v0 = min(max(4.0 + 6.0 / kurt, 2.5), 100.0) if kurt > 0 else 100.0  # t's kurtosis is 6/(v-4)
    lo, hi = _DF_BOUNDS
    # TNC rather than L-BFGS-B: the latter pays a BLAS thread start-up per iteration here
    theta = optimize.minimize(
        neg, np.array([math.log(v0), 0.0, 0.0]), jac=True, method="TNC",
        bounds=[(math.log(lo), math.log(hi)), (None, None), (-20.0, 20.0)],
        options={"maxfun": 1000, "ftol": 1e-12, "gtol": 1e-9},
    ).x  # fmt: skip
    return math.exp(theta[0]), med + s * theta[1], s * math.exp(theta[2])


def fit_gennorm(x: np.ndarray) -> tuple[float, float, float]:
    """MLE (beta, loc, scale) of the generalized normal, scale profiled out.

    For fixed (b, mu) the MLE scale is s^b = (b/n) sum |x - mu|^b, leaving the profile
        L/n = ln b - ln 2 - lnG(1/b) - ln s - 1/b,
    maximized over (ln b, mu) by Nelder-Mead (for b < 1 the likelihood has a cusp at every
    data point, so gradient methods stall) on robustly standardized data, b in [0.05, 20].
    """
    y, med, s = _robust_standardize(x)
    n = y.size

    def scale_of(b: float, mu: float) -> float:
        with np.errstate(divide="ignore"):
            loge = np.log(np.abs(y - mu))
        return (b * float(np.exp(b * loge).sum()) / n) ** (1.0 / b)

    def neg(theta: np.ndarray) -> float:
        b, mu = math.exp(theta[0]), float(theta[1])
        return -(math.log(b) - math.log(2.0) - special.gammaln(1 / b)
                 - math.log(scale_of(b, mu)) - 1.0 / b)

    lo, hi = _BETA_BOUNDS
    res = optimize.minimize(
        neg, np.array([math.log(1.5), 0.0]), method="Nelder-Mead",
        bounds=[(math.log(lo), math.log(hi)), (None, None)],
        options={"xatol": 1e-6, "fatol": 1e-10, "maxfev": 2000},
    )  # fmt: skip
    b, mu = math.exp(res.x[0]), float(res.x[1])
    return b, med + s * mu, s * scale_of(b, mu)


def fit_genpareto(y: np.ndarray) -> tuple[float, float, float]:
    """MLE (c, 0, scale) of the generalized Pareto on y > 0 with loc = 0 (Grimshaw's profile).

    With theta = c/scale, the MLE of c given theta is c(theta) = mean(ln(1 + theta y)), so the
    profile log-likelihood is  L(theta)/n = -ln(c(theta)/theta) - 1 - c(theta)  (exponential at
    theta -> 0). theta is searched on a grid, then refined by Brent's method; c >= -1 is kept
    (below it the likelihood is unbounded at the sample maximum).
    """
    scale0 = float(np.mean(y))
    t = y / scale0  # mean 1
    tmax = float(np.max(t))

    def xi(theta: float) -> float:
        return float(np.mean(np.log1p(theta * t)))

    def neg_profile(theta: float) -> float:
        if abs(theta) < 1e-12:
            return 1.0  # exponential with mean 1: -L/n = ln 1 + 1
        c = xi(theta)
        return math.log(c / theta) + 1.0 + c

    lo = -1.0 / tmax * (1.0 - 1e-9)
    if xi(lo) < -1.0:  # keep c >= -1
        lo = optimize.brentq(lambda th: xi(th) + 1.0, lo, 0.0, xtol=1e-14)
    hi = 1e4
    # grid in u with theta = lo + (e^u - 1) spans both the negative and the heavy-tail side
    u_hi = math.log1p(hi - lo)
    grid = np.linspace(0.0, u_hi, 41)[1:]
    thetas = lo + np.expm1(grid)
    values = [neg_profile(float(th)) for th in thetas]
    j = int(np.argmin(values))
    a = grid[max(j - 1, 0)] if j > 0 else 1e-12
    b = grid[min(j + 1, grid.size - 1)]
    res = optimize.minimize_scalar(lambda u: neg_profile(lo + math.expm1(u)),
                                   bounds=(a, b), method="bounded", options={"xatol": 1e-10})
    theta = lo + math.expm1(res.x) if res.fun <= values[j] else float(thetas[j])
    if abs(theta) < 1e-12:
        return 0.0, 0.0, scale0
    c = xi(theta)
    return c, 0.0, scale0 * c / theta
