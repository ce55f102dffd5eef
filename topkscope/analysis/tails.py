"""Heavy tails of |x|: the Hill index, a power-law fit against lognormal and exponential tails,
across the coordinates of one vector and per coordinate over time.

Tail index alpha: P(|X| > t) ~ t^-alpha for large t (Pareto with shape alpha has it exactly;
Student-t with v degrees of freedom has alpha = v; a Gaussian or a Laplace has none, every
moment is finite).

`hill(x, m)`: the Hill (1975) estimator on the m + 1 largest magnitudes, the (m + 1)-th as the
threshold (the kernel's `hill`, the formula the recorder's `hill_alpha` column uses too):

    alpha = m / sum_{i=1..m} ln(|x|_(i) / |x|_(m+1)),    default m = ceil(sqrt(n))

with the asymptotic normal interval alpha (1 -+ z / sqrt(m)) (Hall 1982; `kernel.hill_interval`).
The interval is the sampling error of alpha at this m only: where the tail is not Pareto above
the threshold (a Student-t near its body), alpha is biased and the interval does not cover the
bias. m = sqrt(n) is a rule of thumb between the bias of a large m and the variance of a small
one (the error-optimal m of a Student-t(v) grows as n^(4/(4+v))), not an optimum.

`power_law(x)`: the continuous power law of Clauset, Shalizi and Newman (SIAM Review 51, 661,
2009, "CSN"), on the nonzero magnitudes y = |x|:

    p(y) = (a - 1) / y_min (y / y_min)^-a   for y >= y_min          (a = alpha + 1)
    a^ = 1 + n_tail / sum_{y_i >= y_min} ln(y_i / y_min)              (MLE, CSN eq. 3.1)
    se(a^) = (a^ - 1) / sqrt(n_tail)                                  (CSN eq. 3.2)
    y_min minimises the KS distance D = max |S(y) - P(y)| over y >= y_min (CSN section 3.3)

and Vuong's likelihood-ratio test of the power law against a lognormal and an exponential,
each fitted by maximum likelihood to the same tail (truncated at y_min, CSN appendix C):

    l_i = ln p_pl(y_i) - ln p_alt(y_i),   R = sum l_i,   sigma^2 = mean (l_i - mean l)^2
    lr = R / (sigma sqrt(n_tail))  (> 0 favours the power law),   p = erfc(|R| / sqrt(2 n_tail sigma^2))

A small p says the sign of lr is significant; a large p says the data cannot tell the two apart.
CSN's goodness-of-fit p-value (a semi-parametric bootstrap that refits every synthetic sample)
is not computed: it costs hundreds of fits per vector.

Where y_min is searched, a stated deviation from CSN (who try every distinct value): among the
top `max_tail` magnitudes (default the largest 10^6; all of them for smaller vectors) at
`candidates` tail sizes n_tail spaced evenly in log between `min_tail` (50) and max_tail (every
size when there are fewer); a candidate whose y_min ties with smaller values takes them into
its tail. The top is found by one partition of the n magnitudes and one sort of those kept, so
a vector of d = 10^7 takes seconds; the search costs O(candidates x max_tail).

Why not the `powerlaw` package (Alstott, Bullmore and Plenz 2014), the reference implementation
of CSN: it tries every distinct value as y_min, each with a fresh fit and a fresh KS pass, so
its cost grows as n^2 (measured here: about 20 s for n = 10^4; d = 10^7 is out of reach), and
its KS distance is one-sided (its empirical CDF is (i - 1)/n at the i-th value), and powerlaw
2.0.0 given a fixed y_min returned its starting exponent a = 3 on every sample tried here
(Pareto, Student-t, Gaussian; its search path fits properly). At the y_min its search chooses,
both compute the same a^ and the same likelihood ratios (tests/test_analysis_tails.py checks
it, and checks ours on samples of known tail index: Pareto 1.5-3, Student-t 2-5, and Gaussian
and Laplace, which have none).

`per_coordinate(values)`: each column of a (T, C) array is one coordinate's values at T
recorded steps (the recorder's `coords/` part). The test is on each coordinate's deviations
from its own mean over the rows given (a coordinate drifts as training moves it, so pass the
steps of one phase): the Hill index and the power-law fit with its likelihood ratios, one row
per coordinate. Xie, Tang, Sun and Li (NeurIPS 2023) find gradients power-law across
coordinates but usually not per coordinate over time; this is the second half of that test.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import optimize, special

from topkscope import kernel, validate
from topkscope.analysis.vectors import finite_values

DEFAULT_LEVEL = 0.95
DEFAULT_MAX_TAIL = 1_000_000
DEFAULT_MIN_TAIL = 50
DEFAULT_CANDIDATES = 200
HILL_KEYS = ("n", "nonfinite", "zeros", "hill_m", "hill_threshold", "hill_alpha",
             "hill_alpha_low", "hill_alpha_high")
POWER_LAW_KEYS = ("pl_alpha", "pl_tail_index", "pl_alpha_se", "pl_xmin", "pl_n_tail",
                  "pl_tail_fraction", "pl_ks_D", "lr_lognormal", "p_lognormal",
                  "lr_exponential", "p_exponential", "lognormal_mu", "lognormal_sigma",
                  "exponential_rate")
KEYS = (*HILL_KEYS, *POWER_LAW_KEYS, "note")


def _magnitudes(x) -> tuple[np.ndarray, int, int]:
    """(the nonzero finite |x| as float64, NaN/Inf removed, zeros removed)."""
    values, nonfinite = finite_values(x)
    mags = np.abs(values.astype(np.float64, copy=False))
    nonzero = mags[mags > 0]
    return nonzero, nonfinite, int(mags.size - nonzero.size)


def _top_sorted(mags: np.ndarray, count: int) -> np.ndarray:
    """The `count` largest of mags, sorted descending (one partition, then a sort of those)."""
    count = min(count, mags.size)
    if count < mags.size:
        mags = np.partition(mags, mags.size - count)[mags.size - count :]
    return np.sort(mags)[::-1]


def default_order(n: int) -> int:
    """The default number m of order statistics of the Hill index: ceil(sqrt(n))."""
    return max(1, math.ceil(math.sqrt(n)))


def hill(x, m: int | None = None, level: float = DEFAULT_LEVEL) -> dict:
    """The Hill index of |x| on its m largest nonzero magnitudes over the (m + 1)-th (module
    formula; m default ceil(sqrt(n))), with its asymptotic normal interval at `level`.

    Returns {HILL_KEYS, note}: n (nonzero finite values), nonfinite and zeros (removed),
    hill_m, hill_threshold (the (m + 1)-th magnitude), hill_alpha, hill_alpha_low/_high.
    NaN with a note when m < kernel.HILL_MIN_ORDER or there are not m + 1 values.
    """
    mags, nonfinite, zeros = _magnitudes(x)
    n = mags.size
    if m is None:
        m = default_order(n)
    m = validate.integer("m", m, 1)
    out = dict.fromkeys(HILL_KEYS, math.nan)
    out.update(n=n, nonfinite=nonfinite, zeros=zeros, hill_m=m, note="")
    if m < kernel.HILL_MIN_ORDER or m + 1 > n:
        out["note"] = (f"m = {m} order statistics: the Hill index needs at least "
                       f"{kernel.HILL_MIN_ORDER} above the threshold and m + 1 <= n = {n}")
        return out
    top = _top_sorted(mags, m + 1)
    alpha = float(kernel.hill(top, [m + 1])[0])
    low, high = kernel.hill_interval(alpha, m + 1, level)
    out.update(hill_threshold=float(top[m]), hill_alpha=alpha, hill_alpha_low=float(low),
               hill_alpha_high=float(high))
    if not math.isfinite(alpha):
        out["note"] = "the m largest magnitudes all equal the threshold"
    return out


# --- the power-law fit (CSN) --------------------------------------------------------------------


def _candidate_sizes(top: np.ndarray, min_tail: int, max_tail: int, candidates: int
                     ) -> np.ndarray:
    """Tail sizes to try (module docstring), each widened to every value tied with its y_min."""
    if max_tail - min_tail + 1 <= candidates:
        sizes = np.arange(min_tail, max_tail + 1)
    else:
        sizes = np.unique(np.round(np.geomspace(min_tail, max_tail, candidates)).astype(np.int64))
    ascending = top[::-1]
    ties = top.size - np.searchsorted(ascending, top[sizes - 1], side="left")
    return np.unique(ties)


def _ks_distance(tail: np.ndarray, xmin: float, a: float) -> float:
    """Two-sided KS distance between the tail (ascending, every value >= xmin) and the power
    law of exponent a above xmin."""
    n = tail.size
    fitted = -np.expm1((1.0 - a) * np.log(tail / xmin))  # 1 - (y / y_min)^(1 - a)
    ranks = np.arange(1, n + 1) / n
    return float(max(np.max(ranks - fitted), np.max(fitted - (ranks - 1.0 / n))))


def _power_law_loglik(tail: np.ndarray, xmin: float, a: float) -> np.ndarray:
    return math.log(a - 1.0) - math.log(xmin) - a * np.log(tail / xmin)


def _exponential_fit(tail: np.ndarray, xmin: float) -> tuple[float, np.ndarray]:
    """(rate, pointwise log-likelihood) of the exponential truncated at y_min:
    p(y) = lam exp(-lam (y - y_min)), lam = 1 / mean(y - y_min)."""
    excess = tail - xmin
    mean = float(excess.mean())
    if not mean > 0:
        return math.nan, np.full(tail.size, np.nan)
    lam = 1.0 / mean
    return lam, math.log(lam) - lam * excess


def _lognormal_fit(tail: np.ndarray, xmin: float) -> tuple[float, float, np.ndarray]:
    """(mu, sigma, pointwise log-likelihood) of the lognormal truncated at y_min:
    p(y) = phi((ln y - mu) / sigma) / (y sigma (1 - Phi((ln y_min - mu) / sigma))), by maximum
    likelihood (L-BFGS-B on mu and ln sigma, started at the moments of ln y)."""
    logs = np.log(tail)
    lmin = math.log(xmin)
    spread = float(logs.std())
    if not spread > 0:
        return math.nan, math.nan, np.full(tail.size, np.nan)

    def pointwise(mu: float, sigma: float) -> np.ndarray:
        z = (logs - mu) / sigma
        return (-0.5 * z * z - logs - math.log(sigma) - 0.5 * math.log(2 * math.pi)
                - special.log_ndtr((mu - lmin) / sigma))

    def negative(params: np.ndarray) -> float:
        value = -float(pointwise(params[0], math.exp(params[1])).sum())
        return value if math.isfinite(value) else 1e300

    start = np.array([float(logs.mean()), math.log(spread)])
    # mu may sit far below y_min (the tail of a wide lognormal looks like a power law)
    bounds = [(lmin - 50.0 * spread - 50.0, float(logs.max()) + 50.0 * spread),
              (math.log(spread) - 12.0, math.log(spread) + 6.0)]
    fit = optimize.minimize(negative, start, method="L-BFGS-B", bounds=bounds)
    mu, sigma = float(fit.x[0]), math.exp(float(fit.x[1]))
    return mu, sigma, pointwise(mu, sigma)


def vuong(loglik_a: np.ndarray, loglik_b: np.ndarray) -> tuple[float, float]:
    """(normalised log-likelihood ratio R / (sigma sqrt(n)), two-sided p) of Vuong's test,
    CSN eq. C.5 (module docstring): > 0 favours a."""
    diff = np.asarray(loglik_a, dtype=np.float64) - np.asarray(loglik_b, dtype=np.float64)
    n = diff.size
    if n < 2 or not np.all(np.isfinite(diff)):
        return math.nan, math.nan
    sigma = float(diff.std())
    total = float(diff.sum())
    if sigma == 0.0:
        return (math.inf if total > 0 else -math.inf if total < 0 else math.nan), math.nan
    ratio = total / (sigma * math.sqrt(n))
    return ratio, float(special.erfc(abs(ratio) / math.sqrt(2.0)))


def power_law(x, *, xmin: float | None = None, max_tail: int = DEFAULT_MAX_TAIL,
              min_tail: int = DEFAULT_MIN_TAIL, candidates: int = DEFAULT_CANDIDATES) -> dict:
    """The CSN power-law fit of the nonzero |x| and its likelihood ratios against a lognormal
    and an exponential tail (module docstring). xmin given: no search, the tail is every
    magnitude >= xmin.

    Returns {POWER_LAW_KEYS, n, nonfinite, zeros, note}: pl_alpha (CSN's density exponent a),
    pl_tail_index (a - 1, comparable with the Hill index), pl_alpha_se, pl_xmin, pl_n_tail,
    pl_n_tail (0 when undefined), pl_tail_fraction (n_tail / n), pl_ks_D, lr_lognormal / p_lognormal and lr_exponential /
    p_exponential (> 0: the power law is the likelier), the alternatives' fitted parameters.
    NaN with a note when fewer than min_tail + 1 nonzero values remain.
    """
    min_tail = validate.integer("min_tail", min_tail, 2)
    max_tail = validate.integer("max_tail", max_tail, min_tail)
    candidates = validate.integer("candidates", candidates, 1)
    mags, nonfinite, zeros = _magnitudes(x)
    n = mags.size
    out = dict.fromkeys(POWER_LAW_KEYS, math.nan)
    out.update(n=n, nonfinite=nonfinite, zeros=zeros, pl_n_tail=0, note="")
    if xmin is not None:
        xmin = validate.number("xmin", xmin, 0, None, lo_open=True)
        tail = np.sort(mags[mags >= xmin])
        if tail.size < min_tail:
            out["note"] = f"{tail.size} magnitudes >= xmin = {xmin:g}; need at least {min_tail}"
            return out
        a = 1.0 + tail.size / float(np.log(tail / xmin).sum())
    else:
        if n < min_tail + 1:
            out["note"] = f"{n} nonzero finite values; the fit needs at least {min_tail + 1}"
            return out
        top = _top_sorted(mags, min(max_tail, n))
        if top[0] == top[-1]:
            out["note"] = "the largest magnitudes are all equal"
            return out
        logs = np.log(top)
        cum = np.cumsum(logs)
        best = (math.inf, 0, math.nan)
        for size in _candidate_sizes(top, min_tail, top.size, candidates).tolist():
            spread = float(cum[size - 1]) - size * float(logs[size - 1])
            if not spread > 0:
                continue
            a = 1.0 + size / spread
            dist = _ks_distance(top[size - 1 :: -1], float(top[size - 1]), a)
            if dist < best[0]:
                best = (dist, size, a)
        if not best[1]:
            out["note"] = "no candidate y_min leaves a tail with any spread"
            return out
        _, size, a = best
        tail = top[size - 1 :: -1].copy()
        xmin = float(tail[0])
    rate, exp_ll = _exponential_fit(tail, xmin)
    mu, sigma, ln_ll = _lognormal_fit(tail, xmin)
    pl = _power_law_loglik(tail, xmin, a)
    out.update(pl_alpha=a, pl_tail_index=a - 1.0, pl_alpha_se=(a - 1.0) / math.sqrt(tail.size),
               pl_xmin=float(xmin), pl_n_tail=int(tail.size), pl_tail_fraction=tail.size / n,
               pl_ks_D=_ks_distance(tail, xmin, a), lognormal_mu=mu, lognormal_sigma=sigma,
               exponential_rate=rate)
    out["lr_lognormal"], out["p_lognormal"] = vuong(pl, ln_ll)
    out["lr_exponential"], out["p_exponential"] = vuong(pl, exp_ll)
    return out


def across_coordinates(x, m: int | None = None, level: float = DEFAULT_LEVEL, **fit) -> dict:
    """One flat row (KEYS) of the tail statistics of x across its coordinates: `hill` and
    `power_law` (its keyword arguments in fit); the notes joined."""
    row = hill(x, m, level)
    found = power_law(x, **fit)
    notes = [t for t in (row.pop("note"), found.pop("note")) if t]
    row.update({k: found[k] for k in POWER_LAW_KEYS})
    row["note"] = "; ".join(notes)
    return {k: row[k] for k in KEYS}


def per_coordinate(values, coordinates=None, m: int | None = None,
                   level: float = DEFAULT_LEVEL, **fit) -> pd.DataFrame:
    """Tail statistics of each coordinate over time: values (T, C), column c the values of one
    coordinate at T steps; each column's deviations from its own mean get `across_coordinates`
    (module docstring). Returns one row per coordinate: `coordinate` (coordinates[c], default
    c), `steps` (finite values of the column), then KEYS. fit: power_law's keyword arguments
    (min_tail defaults to 20 here: a few hundred steps leave short tails)."""
    arr = kernel.as_float_array(values)
    if arr.ndim != 2:
        raise ValueError(f"values must be a (steps, coordinates) array, got shape {arr.shape}")
    names = range(arr.shape[1]) if coordinates is None else list(coordinates)
    if len(names) != arr.shape[1]:
        raise ValueError(f"{len(names)} coordinates named for {arr.shape[1]} columns")
    fit.setdefault("min_tail", 20)
    rows = []
    for c, name in enumerate(names):
        column = arr[:, c].astype(np.float64)
        column = column[np.isfinite(column)]
        deviations = column - column.mean() if column.size else column
        rows.append({"coordinate": name, "steps": int(column.size),
                     **across_coordinates(deviations, m, level, **fit)})
    return pd.DataFrame(rows, columns=["coordinate", "steps", *KEYS])


POWER_LAW = "power-law"
STEEP = "steep power-law"
ALTERNATIVE = "alternative"
UNDECIDED = "undecided"
TAIL_LEVEL = 0.1   # CSN's significance level for the likelihood-ratio tests
HEAVY_INDEX = 4.0  # a tail index at most this is heavy: the fourth moment (kurtosis) is infinite


def tail_class(row: dict, level: float = TAIL_LEVEL, heavy_index: float = HEAVY_INDEX) -> str:
    """What the likelihood ratios of one `across_coordinates` row say (CSN section 5): the
    power law wins when it beats the exponential significantly (lr_exponential > 0, p < level)
    and the lognormal does not beat it significantly — POWER_LAW when its tail index
    (pl_tail_index) is at most heavy_index, STEEP above (a power law so steep that every
    moment a Top-k user meets is finite: not heavy-tailed); ALTERNATIVE when the exponential or
    the lognormal beats the power law significantly; UNDECIDED otherwise (no significant sign,
    or no fit). A tail the lognormal fits as well stays a power law: CSN's 'consistent with a
    power law', which a likelihood ratio cannot separate from a lognormal."""
    def beats(lr_key: str, p_key: str, sign: float) -> bool:
        lr, p = row.get(lr_key), row.get(p_key)
        if lr is None or p is None or not (math.isfinite(lr) and math.isfinite(p)):
            return False
        return sign * lr > 0 and p < level

    if beats("lr_exponential", "p_exponential", 1.0) and \
            not beats("lr_lognormal", "p_lognormal", -1.0):
        index = row.get("pl_tail_index")
        heavy = index is not None and math.isfinite(index) and index <= heavy_index
        return POWER_LAW if heavy else STEEP
    if beats("lr_exponential", "p_exponential", -1.0) or \
            beats("lr_lognormal", "p_lognormal", -1.0):
        return ALTERNATIVE
    return UNDECIDED
