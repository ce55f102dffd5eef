"""delta(k) over the whole range of k: the measured curve, and what fitted families predict.

The quantity a Top-k user needs is how much energy the largest k entries hold, for every k:

    delta(k) = ||u - TopK(u)||^2 / ||u||^2 = sum_{i > k} |u|_(i)^2 / sum_i |u|_(i)^2

measured here at densities rho = k/d on a log grid from 1e-4 to 0.5 (`grid`; k = max(1,
round(rho d)), grid points that give the same k are kept once). The measured curve is never
subsampled: one sort of |u| (float32, finite values; NaN/Inf removed and counted) and the
tails summed in float64 by the kernel (`topkscope.kernel.tail_sums`), the same number as
contraction's `topk_ratio` at any k.

Families, fitted by maximum likelihood:

    normal, laplace, gennorm, student_t   to the non-zero values of u (signed, with a location):
        the fits of `topkscope.analysis.fits.compare` (a seeded subsample of at most max_n
        values; `topkscope analyze` passes the fits table it already has). X = mu + s Z, Z the
        standard law; exact zeros are a point mass apart, their share z counted by the fit.
    power_law   to |u|: a Pareto tail above x_min = |u|_(n+1), n = round(q d) (q = tail_share,
        default 0.1), tail index by Hill's estimator alpha = n / sum_{i<=n} ln(|u|_(i) / x_min)
        (the maximum-likelihood index given x_min); below x_min the body is the data itself
        (empirical, not modelled). From the whole sorted vector, not a subsample. At k > n its
        prediction uses the measured body, so `error_tail` (rho <= q) is the fairer comparison.

Prediction of a location-scale family (d -> infinity). Top-k keeps the share rho' = rho/(1 - z)
of the non-zero entries (delta = 0 once rho' >= 1), those with |X| > t, P(|X| > t) = rho'
(Brent's method), and

    1 - delta = E[X^2 ; |X| > t] / E[X^2]
    E[X^2 ; X > t]  = mu^2 S(a) + 2 mu s M1(a) + s^2 M2(a),   a = (t - mu)/s
    E[X^2 ; X < -t] = mu^2 S(b) - 2 mu s M1(b) + s^2 M2(b),   b = (t + mu)/s

with S(a) = P(Z > a), M1(a) = E[Z ; Z > a], M2(a) = E[Z^2 ; Z > a] in closed form for a >= 0
(and S(-a) = 1 - S(a), M1(-a) = M1(a), M2(-a) = E Z^2 - M2(a) by symmetry):

    normal       S = Phi(-a),  M1 = phi(a),  M2 = a phi(a) + S                        E Z^2 = 1
    laplace      S = e^-a/2,   M1 = (1 + a) e^-a/2,  M2 = (a^2 + 2a + 2) e^-a/2         E Z^2 = 2
    gennorm(b)   S = Q(1/b, a^b)/2,  M1 = G(2/b) Q(2/b, a^b) / (2 G(1/b)),
                 M2 = G(3/b) Q(3/b, a^b) / (2 G(1/b))                           E Z^2 = G(3/b)/G(1/b)
    student_t(v) S = T_v(-a),  M1 = (v + a^2) f_v(a) / (v - 1),
                 M2 = v [(v - 1)/(v - 2) T_{v-2}(-a sqrt((v - 2)/v)) - S]           E Z^2 = v/(v - 2)

(Q the regularised upper incomplete gamma, G the gamma function, T_v and f_v Student's cdf and
density). With mu = 0 and z = 0 these are topkscope.bounds' gaussian_ratio and gennorm_ratio.

A law whose second moment is infinite (student_t with v <= 2, power_law with alpha <= 2) has no
d -> infinity curve (delta -> 0 at every rho). Its prediction (`truncated` True) is that of d
draws with the law cut where one draw is expected above it, P(|X| > t_max) = 1/d: energies
between t and t_max, the partial moments integrated numerically (scipy.integrate.quad). The
delta of such a sample stays random as d grows (the largest few values carry a share of the
energy that does not settle), so the prediction is its typical level, not a limit.

Power-law prediction: with E(t) = d q x_min^2 alpha (r^(2-alpha) - r_max^(2-alpha)) / (alpha - 2),
r = t / x_min (r_max = infinity when alpha > 2, else (q d)^(1/alpha); the log form at alpha = 2),
and B = sum_{i > n} |u|_(i)^2 the measured body:

    k <= n:  1 - delta = E(x_min (n/k)^(1/alpha)) / (E(x_min) + B)
    k > n:   1 - delta = (E(x_min) + sum_{n < i <= k} |u|_(i)^2) / (E(x_min) + B)

Error of a prediction on the scale of the energy Top-k keeps, over the grid (`compare`):

    e(rho) = ln(1 - delta_pred) - ln(1 - delta)        error = sqrt(mean e^2),  error_max = max |e|

`error_tail` is the same RMS over the grid points rho <= tail_share. `error_rank` orders the
families by `error` (1 = smallest); `best` marks one family: the most parsimonious (PARSIMONY
order: normal, laplace, gennorm, student_t, power_law) whose error is at most the smallest +
TIE (0.01), so that a family which nests a simpler one (gennorm at beta = 2 is the normal)
does not win by sampling noise alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import integrate, optimize, special

from topkscope import kernel
from topkscope.analysis import fits
from topkscope.analysis.vectors import MIN_VALUES, finite_values
from topkscope.bounds import k_from_density

GRID_LOW, GRID_HIGH = 1e-4, 0.5
DEFAULT_POINTS = 25  # log-spaced densities from GRID_LOW to GRID_HIGH
DEFAULT_TAIL_SHARE = 0.1  # q: the share of |u| the power law's Pareto tail covers
MIN_TAIL = 10  # fewer tail values than this: no power-law fit
FAMILIES = ("normal", "laplace", "gennorm", "student_t", "power_law")
PARSIMONY = FAMILIES  # fewest parameters first; the power law's body is the data itself
TIE = 0.01  # errors within this of the smallest count as a tie (parsimony decides)
CURVE_COLUMNS = ["density", "k", "d", "family", "delta", "delta_predicted", "log_gap_error"]
FAMILY_COLUMNS = [
    "family", "on", "n", "loc", "scale", "shape", "shape_name", "zero_share", "tail_share",
    "truncated", "error", "error_max", "error_tail", "error_rank", "best", "nonfinite",
]  # fmt: skip


def grid(points: int = DEFAULT_POINTS) -> np.ndarray:
    """`points` densities log-spaced from 1e-4 to 0.5 (both included)."""
    if isinstance(points, bool) or int(points) != points or int(points) < 2:
        raise ValueError(f"points = {points!r} must be an integer >= 2")
    return np.geomspace(GRID_LOW, GRID_HIGH, int(points))


def ascending_magnitudes(u) -> tuple[np.ndarray, int]:
    """(|u| of the finite values sorted ascending, in u's float type; the number of NaN/Inf
    removed). One sort, shared by the measured curve, the power-law fit and the thresholds."""
    values, nonfinite = finite_values(u)
    mags = np.abs(values)
    mags.sort()
    return mags, nonfinite


def measured(mags: np.ndarray, densities) -> pd.DataFrame:
    """density, k, d, delta for sorted magnitudes (ascending, `ascending_magnitudes`): one row
    per distinct k = k_from_density(rho, d) (the first density giving it); delta in float64 from
    the kernel's tail sums. Empty for d = 0; delta NaN for a zero vector."""
    d = int(mags.size)
    rhos, ks = _distinct_ks(densities, d)
    if d == 0:
        return pd.DataFrame({"density": [], "k": [], "d": [], "delta": []})
    desc = mags[::-1]
    tails = kernel.tail_sums(desc, [0, *ks])
    delta = kernel.delta_from_rest(tails[1:], tails[0])
    return pd.DataFrame({"density": rhos, "k": np.asarray(ks, dtype=np.int64),
                         "d": np.full(len(ks), d, dtype=np.int64),
                         "delta": np.atleast_1d(np.asarray(delta, dtype=np.float64))})


def _distinct_ks(densities, d: int) -> tuple[list[float], list[int]]:
    rhos, ks = [], []
    for rho in np.atleast_1d(np.asarray(densities, dtype=np.float64)):
        k = k_from_density(float(rho), max(d, 1))
        if k not in ks:
            rhos.append(float(rho))
            ks.append(k)
    return rhos, ks


# --- the standard laws Z: tail mass and partial moments ------------------------------------


class _Law:
    """A symmetric standard law Z: S(a) = P(Z > a), M1(a) = E[Z; Z > a], M2(a) = E[Z^2; Z > a]
    for a >= 0 (module table), its density, upper quantile and E Z^2 (inf when infinite)."""

    second = 1.0

    def sf(self, a):
        raise NotImplementedError

    def isf(self, q: float) -> float:
        """The a with S(a) = q, for q in (0, 1)."""
        raise NotImplementedError

    def m1(self, a):
        raise NotImplementedError

    def m2(self, a):
        raise NotImplementedError

    def pdf(self, z):
        raise NotImplementedError

    @property
    def finite(self) -> bool:
        return math.isfinite(self.second)


class _Normal(_Law):
    def sf(self, a):
        return special.ndtr(-a)

    def isf(self, q):
        return -float(special.ndtri(q))

    def pdf(self, z):
        return np.exp(-0.5 * np.square(z)) / math.sqrt(2.0 * math.pi)

    def m1(self, a):
        return self.pdf(a)

    def m2(self, a):
        return a * self.pdf(a) + self.sf(a)


class _Laplace(_Law):
    second = 2.0

    def sf(self, a):
        return 0.5 * np.exp(-a)

    def isf(self, q):
        return -math.log(2.0 * q) if q <= 0.5 else math.log(2.0 * (1.0 - q))

    def pdf(self, z):
        return 0.5 * np.exp(-np.abs(z))

    def m1(self, a):
        return 0.5 * (1.0 + a) * np.exp(-a)

    def m2(self, a):
        return 0.5 * (a * a + 2.0 * a + 2.0) * np.exp(-a)


class _GenNorm(_Law):
    def __init__(self, beta: float) -> None:
        self.b = float(beta)
        self._g = {p: math.exp(special.gammaln(p / self.b) - special.gammaln(1.0 / self.b))
                   for p in (2, 3)}  # G(p/b) / G(1/b)
        self.second = self._g[3]

    def sf(self, a):
        return 0.5 * special.gammaincc(1.0 / self.b, np.power(a, self.b))

    def isf(self, q):
        if q > 0.5:
            return -self.isf(1.0 - q)
        return float(special.gammainccinv(1.0 / self.b, 2.0 * q)) ** (1.0 / self.b)

    def pdf(self, z):
        return self.b / (2.0 * math.gamma(1.0 / self.b)) * np.exp(-np.power(np.abs(z), self.b))

    def m1(self, a):
        return 0.5 * self._g[2] * special.gammaincc(2.0 / self.b, np.power(a, self.b))

    def m2(self, a):
        return 0.5 * self._g[3] * special.gammaincc(3.0 / self.b, np.power(a, self.b))


class _StudentT(_Law):
    def __init__(self, df: float) -> None:
        self.v = float(df)
        self.second = self.v / (self.v - 2.0) if self.v > 2.0 else math.inf
        self._c = math.exp(special.gammaln((self.v + 1) / 2) - special.gammaln(self.v / 2)) \
            / math.sqrt(self.v * math.pi)

    def sf(self, a):
        return special.stdtr(self.v, -a)

    def isf(self, q):
        return -float(special.stdtrit(self.v, q))

    def pdf(self, z):
        return self._c * np.power(1.0 + np.square(z) / self.v, -(self.v + 1.0) / 2.0)

    def m1(self, a):  # v > 1
        return (self.v + a * a) / (self.v - 1.0) * self.pdf(a)

    def m2(self, a):  # v > 2
        v = self.v
        shrink = math.sqrt((v - 2.0) / v)
        return v * ((v - 1.0) / (v - 2.0) * special.stdtr(v - 2.0, -a * shrink) - self.sf(a))


def _law(family: str, shape: float) -> _Law:
    if family == "normal":
        return _Normal()
    if family == "laplace":
        return _Laplace()
    if family == "gennorm":
        return _GenNorm(shape)
    if family == "student_t":
        return _StudentT(shape)
    raise ValueError(f"family = {family!r}; allowed: normal, laplace, gennorm, student_t")


def _upper(law: _Law, p: int, a: float) -> float:
    """E[Z^p ; Z > a] for any real a (p = 0, 1, 2; the moment must be finite)."""
    if a == math.inf:
        return 0.0
    if a == -math.inf:
        return (1.0, 0.0, law.second)[p]
    x = abs(a)
    value = float((law.sf, law.m1, law.m2)[p](x))
    if a >= 0:
        return value
    return (1.0 - value, value, law.second - value)[p]


def _between(law: _Law, p: int, lo: float, hi: float) -> float:
    """E[Z^p ; lo < Z <= hi] (lo <= hi, either may be infinite when the moment is finite):
    closed forms when E|Z|^p is finite, else quadrature of z^p f(z) (|z| > 1 in log z)."""
    if hi <= lo:
        return 0.0
    if p == 0 or law.finite:
        return _upper(law, p, lo) - _upper(law, p, hi)
    total = 0.0
    for a, b in _pieces(lo, hi):
        if a >= 1.0 or b <= -1.0:  # z = sign e^y
            sign = 1.0 if a >= 1.0 else -1.0
            y0, y1 = sorted((math.log(abs(a)), math.log(abs(b))))

            def integrand(y, sign=sign):
                z = sign * math.exp(y)
                return z**p * float(law.pdf(z)) * math.exp(y)

            total += integrate.quad(integrand, y0, y1, limit=200, epsabs=0.0,
                                    epsrel=1e-10)[0]
        else:
            total += integrate.quad(lambda z: z**p * float(law.pdf(z)), a, b, limit=200,
                                    epsabs=0.0, epsrel=1e-10)[0]
    return total


def _pieces(lo: float, hi: float) -> list[tuple[float, float]]:
    cuts = [c for c in (-1.0, 1.0) if lo < c < hi]
    edges = [lo, *cuts, hi]
    return list(zip(edges[:-1], edges[1:]))


def _band(law: _Law, mu: float, s: float, t: float, t_max: float) -> tuple[float, float]:
    """(P(t < |X| <= t_max), E[X^2 ; t < |X| <= t_max]) for X = mu + s Z."""
    mass = energy = 0.0
    for sign in (1.0, -1.0):  # X > t (Z above (t - mu)/s), X < -t (-Z above (t + mu)/s)
        lo, hi = (t - sign * mu) / s, (t_max - sign * mu) / s
        p0, p1, p2 = (_between(law, p, lo, hi) for p in (0, 1, 2))
        mass += p0
        energy += mu * mu * p0 + 2.0 * sign * mu * s * p1 + s * s * p2
    return mass, energy


def _threshold(law: _Law, mu: float, s: float, q: float) -> float:
    """The t >= 0 with P(|X| > t) = q, X = mu + s Z (0 < q < 1)."""
    m = abs(mu)
    lo = max(0.0, m + s * law.isf(q))  # P(|X| > lo) >= P(X > lo) >= q (mu >= 0; mirrored)
    hi = m + s * law.isf(q / 2.0)  # P(|X| > hi) <= 2 P(Z > (hi - |mu|)/s) = q

    def excess(t: float) -> float:
        return _upper(law, 0, (t - mu) / s) + _upper(law, 0, (t + mu) / s) - q

    f_lo, f_hi = excess(lo), excess(hi)
    if f_lo <= 0.0:
        return lo
    if f_hi >= 0.0:
        return hi
    return optimize.brentq(excess, lo, hi, xtol=1e-15 * max(hi, 1e-300), rtol=1e-15)


def family_delta(family: str, loc: float, scale: float, shape: float, ks, d: int,
                 zero_share: float = 0.0) -> tuple[np.ndarray, bool]:
    """(predicted delta at each k of `ks`, truncated) for the location-scale family fitted as
    (loc, scale, shape) to the non-zero values, with a share zero_share of exact zeros among
    the d values (module doc). truncated: the law's second moment is infinite, so the
    prediction is that of d draws (cut at P(|X| > t_max) = 1/d)."""
    law = _law(family, shape)
    mu, s = float(loc), float(scale)
    if not s > 0:
        raise ValueError(f"scale = {scale!r} must be positive")
    nonzero = d * (1.0 - zero_share)
    t_max = math.inf if law.finite else _threshold(law, mu, s, min(1.0 / nonzero, 0.5))
    total = _band(law, mu, s, 0.0, t_max)[1]
    out = np.empty(len(ks), dtype=np.float64)
    for i, k in enumerate(ks):
        kept_share = (k / d) / (1.0 - zero_share)
        if kept_share >= 1.0:
            out[i] = 0.0
            continue
        t = _threshold(law, mu, s, kept_share)
        out[i] = max(0.0, 1.0 - _band(law, mu, s, t, t_max)[1] / total)
    return out, not law.finite


# --- the power-law tail ----------------------------------------------------------------------


@dataclass(frozen=True)
class PowerLawTail:
    """A Pareto tail fitted to the n largest |u| above x_min = |u|_(n+1) (Hill's alpha) over
    the measured body below it; d the number of values, body the float64 sum of squares of
    the body, tail_share = n / d."""

    alpha: float
    x_min: float
    n: int
    d: int
    body: float

    @property
    def tail_share(self) -> float:
        return self.n / self.d

    @property
    def truncated(self) -> bool:
        return self.alpha <= 2.0

    def energy_above(self, r) -> np.ndarray:
        """E(t) of the module doc at r = t / x_min >= 1 (float64)."""
        a, scale = self.alpha, self.d * self.tail_share * self.x_min**2 * self.alpha
        r = np.asarray(r, dtype=np.float64)
        r_max = (self.n) ** (1.0 / a)  # (q d)^(1/alpha): P(|X| > t_max) = 1/d
        if abs(a - 2.0) < 1e-12:
            return scale * np.log(r_max / r)
        if a > 2.0:
            return scale * np.power(r, 2.0 - a) / (a - 2.0)
        return scale * (r_max ** (2.0 - a) - np.power(r, 2.0 - a)) / (2.0 - a)


def fit_power_law(mags: np.ndarray, tail_share: float = DEFAULT_TAIL_SHARE) -> PowerLawTail | None:
    """Hill's estimate over the n = round(tail_share d) largest of the ascending magnitudes
    (module doc); None when n < MIN_TAIL, x_min is 0, or every tail value equals x_min."""
    tail_share = float(tail_share)
    if not 0.0 < tail_share < 1.0:
        raise ValueError(f"tail_share = {tail_share!r} is outside the allowed range (0, 1)")
    d = int(mags.size)
    n = int(round(tail_share * d))
    if n < MIN_TAIL or n >= d:
        return None
    x_min = float(mags[d - n - 1])
    if not x_min > 0.0:
        return None
    logs = np.log(mags[d - n :].astype(np.float64) / x_min)
    spread = float(logs.sum())
    if not spread > 0.0:
        return None
    body = float(kernel.tail_sums(mags[::-1], [n])[0])
    return PowerLawTail(alpha=n / spread, x_min=x_min, n=n, d=d, body=body)


def power_law_delta(tail: PowerLawTail, mags: np.ndarray, ks) -> np.ndarray:
    """Predicted delta at each k of `ks` (module doc): the Pareto tail for k <= n, the tail's
    energy plus the measured body's largest k - n for k > n."""
    ks = np.asarray(ks, dtype=np.int64)
    tail_energy = float(tail.energy_above(1.0))
    total = tail_energy + tail.body
    out = np.empty(ks.size, dtype=np.float64)
    inside = ks <= tail.n
    out[inside] = 1.0 - tail.energy_above((tail.n / ks[inside]) ** (1.0 / tail.alpha)) / total
    beyond = ks[~inside]
    if beyond.size:
        rest = kernel.tail_sums(mags[::-1], beyond)  # sum_{i > k}: the body left unsent
        out[~inside] = rest / total
    return np.clip(out, 0.0, 1.0)


# --- the comparison -------------------------------------------------------------------------


@dataclass(frozen=True)
class DeltaCurve:
    """`compare`'s result: curve (CURVE_COLUMNS, one row per density and family) and families
    (FAMILY_COLUMNS, one row per fitted family: its parameters and errors)."""

    curve: pd.DataFrame
    families: pd.DataFrame


def compare(u, densities=None, *, fits_table: pd.DataFrame | None = None,
            max_n: int = fits.DEFAULT_MAX_N, seed: int = 0,
            tail_share: float = DEFAULT_TAIL_SHARE, mags: np.ndarray | None = None
            ) -> DeltaCurve:
    """The measured delta(k) of u at `densities` (default `grid()`) against each family's
    prediction, with the errors and the best family (module doc).

    fits_table: `fits.compare(u, max_n, seed)` when already computed (its x rows are used;
    else it is computed here); mags: `ascending_magnitudes(u)[0]` when already sorted. Empty
    frames (with their columns) for fewer than 8 finite values or a zero vector.
    """
    densities = grid() if densities is None else densities
    nonfinite = 0
    if mags is None:
        mags, nonfinite = ascending_magnitudes(u)
    elif u is not None:
        nonfinite = finite_values(u)[1]
    curve = measured(mags, densities)
    d = int(mags.size)
    if d < MIN_VALUES or not np.isfinite(curve["delta"]).all():
        return DeltaCurve(_empty(CURVE_COLUMNS), _empty(FAMILY_COLUMNS))
    if fits_table is None:
        fits_table = fits.compare(u, max_n=max_n, seed=seed)
    ks = curve["k"].to_numpy()
    predictions, rows = [], []
    signed = fits_table[fits_table["on"] == "x"] if len(fits_table) else fits_table
    for fit in signed.itertuples(index=False):
        if fit.family not in FAMILIES:
            continue
        zero_share = int(fit.zeros) / d
        pred, truncated = family_delta(fit.family, fit.loc, fit.scale, fit.shape, ks, d,
                                       zero_share)
        predictions.append((fit.family, pred))
        rows.append({"family": fit.family, "on": "x", "n": int(fit.n), "loc": float(fit.loc),
                     "scale": float(fit.scale), "shape": float(fit.shape),
                     "shape_name": fit.shape_name, "zero_share": zero_share,
                     "tail_share": math.nan, "truncated": truncated})
    tail = fit_power_law(mags, tail_share)
    if tail is not None:
        predictions.append(("power_law", power_law_delta(tail, mags, ks)))
        rows.append({"family": "power_law", "on": "abs", "n": tail.n, "loc": 0.0,
                     "scale": tail.x_min, "shape": tail.alpha, "shape_name": "alpha",
                     "zero_share": float(np.count_nonzero(mags == 0)) / d,
                     "tail_share": tail.tail_share, "truncated": tail.truncated})
    frames = []
    in_tail = curve["density"].to_numpy() <= tail_share
    for (family, pred), row in zip(predictions, rows):
        gap = log_gap(pred, curve["delta"].to_numpy())
        frames.append(curve.assign(family=family, delta_predicted=pred, log_gap_error=gap))
        row.update(_errors(gap, in_tail), nonfinite=nonfinite)
    families = pd.DataFrame(rows)
    if families.empty:
        return DeltaCurve(_empty(CURVE_COLUMNS), _empty(FAMILY_COLUMNS))
    families["error_rank"] = families["error"].rank(method="first").astype(int)
    families["best"] = families["family"] == best_family(families)
    order = {f: i for i, f in enumerate(FAMILIES)}
    families = families.sort_values("family", key=lambda c: c.map(order)).reset_index(drop=True)
    return DeltaCurve(pd.concat(frames, ignore_index=True)[CURVE_COLUMNS],
                      families[FAMILY_COLUMNS])


def log_gap(predicted, delta) -> np.ndarray:
    """ln(1 - predicted) - ln(1 - delta): the error on the scale of the kept energy (NaN where
    either keeps nothing)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = np.log1p(-np.asarray(predicted, np.float64)) - np.log1p(-np.asarray(delta, np.float64))
    return np.where(np.isfinite(gap), gap, np.nan)


def _errors(gap: np.ndarray, in_tail: np.ndarray) -> dict:
    def rms(x):
        x = x[np.isfinite(x)]
        return float(np.sqrt(np.mean(x * x))) if x.size else math.nan

    finite = gap[np.isfinite(gap)]
    return {"error": rms(gap), "error_max": float(np.max(np.abs(finite))) if finite.size
            else math.nan, "error_tail": rms(gap[in_tail])}


def best_family(families: pd.DataFrame) -> str | None:
    """The most parsimonious family (PARSIMONY order) whose error is within TIE of the
    smallest; None when no family has a finite error."""
    errors = families.set_index("family")["error"].astype(float)
    errors = errors[np.isfinite(errors)]
    if errors.empty:
        return None
    smallest = float(errors.min())
    return next(f for f in PARSIMONY if f in errors.index and errors[f] <= smallest + TIE)


def _empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: [] for c in columns})
