"""The criteria and intervals the claims judge by, beside the formulas they belong to: what one
unit meets (the moment window of a Gaussian, Gaussian-k's count band, the bounds up to float
rounding), the interval of a share (block bootstrap) and of a mean (Student t), the paired
difference of two runs' final metrics and its non-inferiority margins, and the thresholds these
share with the sparsifiers, the recorder, the captions and the scaling model. The verdict rules
that turn them into holds / fails / mixed / inconclusive live in topkscope.claims.verdicts.

Share of units (distribution claims): a unit is one observation; f is the share of units
meeting the criterion and [lo, hi] its 95% block-bootstrap interval (share_interval: blocks =
the steps of a run, runs resampled where there are several). The interval's ends are bounded by
the rule of three over its B blocks (lo <= 1 - 3/B, hi >= 3/B), so a share can clear a cut only
on >= ZERO_EVENT_BLOCKS = 30 blocks.

Paired difference (convergence claims): method - Top-k of the final held-out metric per seed
(accuracy in points; perplexity in % of Top-k's), with its two-sided 95% Student-t interval,
against the non-inferiority margin m (default 1 point; perplexity 3%). A seed whose run failed
counts with its last evaluated metric, or the worst value (WORST) when it never evaluated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

MIN_UNITS = 3
MIN_SEEDS = 3
MAX_ABS_SKEW = 0.5
MAX_ABS_EXCESS_KURTOSIS = 1.0
COUNT_BAND = (2.0 / 3.0, 4.0 / 3.0)   # the band Gaussian-k's threshold correction aims for
TRAFFIC_LIMIT = 4.0 / 3.0
ACCURACY_MARGIN_POINTS = 1.0          # non-inferiority margin, accuracy (points)
PERPLEXITY_MARGIN_PCT = 3.0           # non-inferiority margin, perplexity (% of Top-k's)
WORST = {"accuracy": 0.0, "perplexity": math.inf}  # a failed run that never evaluated


# ------------------------------------------------------------------ criteria of one unit
def gaussian_like(skew, excess_kurtosis) -> np.ndarray:
    """|skew| <= 0.5 and |excess kurtosis| <= 1 (effect sizes: tests reject at any real n)."""
    skew, kurt = np.asarray(skew, float), np.asarray(excess_kurtosis, float)
    return (np.abs(skew) <= MAX_ABS_SKEW) & (np.abs(kurt) <= MAX_ABS_EXCESS_KURTOSIS)


def in_count_band(count, k) -> np.ndarray:
    """2/3 <= count/k <= 4/3: an approximate selector picked about k elements."""
    ratio = np.asarray(count, float) / np.asarray(k, float)
    return (ratio >= COUNT_BAND[0]) & (ratio <= COUNT_BAND[1])


def count_band_text() -> str:
    return f"[{COUNT_BAND[0] * 3:.0f}k/3, {COUNT_BAND[1] * 3:.0f}k/3]"


REL_TOL = 1e-9  # comparisons with a bound are decided beyond float64 rounding


def is_below_classic(ratio, bound):
    """delta < 1 - k/d beyond float rounding: ratio < bound (1 - REL_TOL).

    A flat vector attains the bound exactly and is never counted as below it.
    """
    return ratio < bound * (1.0 - REL_TOL)


def is_below_paper(ratio, bound):
    """delta <= (1 - k/d)^2 up to float rounding: ratio <= bound (1 + REL_TOL)."""
    return is_at_most(ratio, bound)


def is_at_most(ratio, bound):
    """ratio <= bound up to float rounding: ratio <= bound (1 + REL_TOL) (the paper's bound,
    the Gaussian value)."""
    return ratio <= bound * (1.0 + REL_TOL)


CONTRACTION_SHARES = {  # column -> (criterion, the bound's column in a stats / ratios frame)
    "share_below_classic": (is_below_classic, "classic_bound"),
    "share_at_most_paper": (is_below_paper, "paper_bound"),
    "share_at_most_gaussian": (is_at_most, "gaussian_ratio"),
}


def contraction_shares(records, by) -> pd.DataFrame:
    """Per group of `records` (rows with topk_ratio and the bound columns, e.g. recorded u
    stats), `records` and the share meeting each contraction criterion (CONTRACTION_SHARES);
    the one grouping the captions and the paper tables read."""
    by = [by] if isinstance(by, str) else list(by)
    cols = [*by, "records", *CONTRACTION_SHARES]
    if records.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for key, g in records.groupby(by, sort=True):
        ratio = g["topk_ratio"].to_numpy(float)
        row = dict(zip(by, key if isinstance(key, tuple) else (key,)), records=len(g))
        for name, (criterion, bound) in CONTRACTION_SHARES.items():
            row[name] = float(criterion(ratio, g[bound].to_numpy(float)).mean())
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


# ------------------------------------------------------------------ the interval of a share
BOOTSTRAP_REPLICATES = 2000
BOOTSTRAP_SEED = 0
SHARE_LEVEL = 0.95
_CHUNK = 4_000_000  # draws per vectorised batch of replicates (memory bound)


ZERO_EVENT_BLOCKS = 30  # blocks a share needs before its interval can clear a cut (3/30 = 10%)


def share_interval(passed, runs, steps, replicates: int = BOOTSTRAP_REPLICATES,
                   seed: int = BOOTSTRAP_SEED, level: float = SHARE_LEVEL
                   ) -> tuple[float, float]:
    """The `level` percentile interval of the share of `passed` units, by a two-stage block
    bootstrap: a block is every unit of one (run, step) (the ranks and densities of a step
    share its u, so they are not independent); each replicate draws the runs with
    replacement, then within each drawn run as many of its steps as it has, with
    replacement, and takes the share over the drawn blocks' units. One run: its steps are
    resampled. Deterministic (`seed`); NaN ends without units.

    A resampling interval cannot see a failure its blocks never showed: B blocks that all
    pass give [1, 1]. So the ends are bounded by the rule of three (the 95% bound on a rate
    never observed in B independent trials is about 3/B): low <= 1 - 3/B and high >= 3/B,
    so a share holds (or fails) only on at least 30 blocks (ZERO_EVENT_BLOCKS)."""
    passed = np.asarray(passed, dtype=bool).reshape(-1)
    if not passed.size:
        return math.nan, math.nan
    run_code = pd.factorize(np.asarray(runs).reshape(-1), sort=True)[0].astype(np.int64)
    step_code = pd.factorize(np.asarray(steps).reshape(-1), sort=True)[0].astype(np.int64)
    keys, block_of = np.unique(run_code * (int(step_code.max()) + 1) + step_code,
                               return_inverse=True)  # sorted: blocks grouped by run
    block_of = np.asarray(block_of).reshape(-1)
    hits = np.bincount(block_of, weights=passed, minlength=keys.size)
    sizes = np.bincount(block_of, minlength=keys.size).astype(np.float64)
    per_run = np.bincount(keys // (int(step_code.max()) + 1))
    per_run = per_run[per_run > 0]
    first = np.concatenate([[0], np.cumsum(per_run)[:-1]])
    n_runs, most = per_run.size, int(per_run.max())
    rng = np.random.default_rng(seed)
    shares = []
    chunk = max(1, _CHUNK // (n_runs * most))
    for start in range(0, replicates, chunk):
        b = min(chunk, replicates - start)
        drawn = rng.integers(0, n_runs, size=(b, n_runs))
        count = per_run[drawn][..., None]
        local = np.floor(rng.random((b, n_runs, most)) * count).astype(np.int64)
        used = np.arange(most) < count
        index = np.where(used, first[drawn][..., None] + local, 0)
        shares.append(np.where(used, hits[index], 0).sum((1, 2))
                      / np.where(used, sizes[index], 0).sum((1, 2)))
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(np.concatenate(shares), [tail, 1.0 - tail])
    unseen = min(1.0, 3.0 / keys.size)  # rule of three: 3/B <= 10% from ZERO_EVENT_BLOCKS
    return float(min(low, 1.0 - unseen)), float(max(high, unseen))


# ------------------------------------------------------------------ means and paired differences
def t_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """(mean, low, high): the two-sided 95% Student-t interval of the mean of `values` (NaN
    ends for fewer than 2 values or a non-finite one)."""
    from scipy import stats

    x = np.asarray(values, dtype=np.float64)
    mean = float(x.mean()) if x.size else math.nan
    if x.size < 2 or not np.isfinite(x).all():
        return mean, math.nan, math.nan
    half = float(stats.t.ppf(0.975, x.size - 1)) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return mean, mean - half, mean + half


paired_interval = t_interval  # of the paired differences method - Top-k


def higher_is_better(metric: str) -> bool:
    return metric != "perplexity"


def diff_unit(metric: str) -> str:
    """The unit of a paired difference: points (accuracy) or % of Top-k's (perplexity)."""
    return "%" if metric == "perplexity" else " points"


def default_margin(metric: str, margin: float = ACCURACY_MARGIN_POINTS,
                   perplexity_margin: float = PERPLEXITY_MARGIN_PCT) -> float:
    return perplexity_margin if metric == "perplexity" else margin


def limit_of(metric: str, margin: float) -> float:
    """The threshold the interval is judged against: -margin (accuracy), +margin (perplexity)."""
    return float(margin) if metric == "perplexity" else -float(margin)


def paired_difference(metric_name: str, topk: float, method: float) -> float:
    """Accuracy: method - Top-k in points (percent); perplexity: method / Top-k - 1 in %."""
    if metric_name == "perplexity":
        return 100.0 * (method / topk - 1.0)
    scale = 1.0 if max(topk, method) > 1.0 else 100.0  # fractions -> points
    return (method - topk) * scale


def signed(value: float, digits: int = 3) -> str:
    """+1.23 / −1.23 (a true minus sign), 'n/a' when undefined."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if math.isinf(value):
        return "+∞" if value > 0 else "−∞"
    text = f"{value:+.{digits}g}"
    return text.replace("-", "−")


def interval_text(low: float, high: float, metric: str, digits: int = 3) -> str:
    """'[−41.8, −21.7] points' / '[+1.2, +2.5]%'."""
    return f"[{signed(low, digits)}, {signed(high, digits)}]{diff_unit(metric)}"


def limit_text(metric: str, margin: float) -> str:
    """'−1 point', '−0.5 points', '+3%': the threshold in words."""
    limit = limit_of(metric, margin)
    if metric == "perplexity":
        return f"{signed(limit)}%"
    return f"{signed(limit)} point" + ("" if abs(limit) == 1 else "s")


def speedup_interval(speedups: Sequence[float | None]) -> tuple[float, float, float]:
    """(mean, low, high): the 95% t-interval of the per-seed speed-ups, a seed that never
    reached the target counted as 0 (its worst value)."""
    return t_interval([0.0 if s is None else s for s in speedups])
