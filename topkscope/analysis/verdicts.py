"""The verdict rules of the claims table, written once: criteria, thresholds, verdicts and the
words that say why (`cause`). The claims (topkscope.analysis.claims) apply them; captions,
paper tables, the README and notebooks call them or read the claims' columns, never a copy.

Fraction rule (distribution claims): a unit is one observation; f is the share of units
meeting the criterion and [lo, hi] its 95% block-bootstrap interval (share_interval: blocks =
the steps of a run, runs resampled where there are several): holds if lo >= 0.9, fails if
hi <= 0.1, mixed if 0.1 < lo and hi < 0.9, inconclusive if the interval straddles a cut;
< 3 units insufficient-data. The interval's ends are bounded by the rule of three over its B
blocks (lo <= 1 - 3/B, hi >= 3/B), so a share holds or fails only on >= 30 blocks. Without an interval (a table written before it) f alone decides:
f >= 0.9 holds, f <= 0.1 fails, else mixed.

Paired-seed rule (convergence claims): the paired difference method - Top-k of the final
held-out metric per seed (accuracy in points; perplexity in % of Top-k's), mean and two-sided
95% Student-t interval, against the non-inferiority margin m (default 1 point; perplexity 3%):
accuracy holds if the interval lies above -m, fails if below, inconclusive if it contains -m;
perplexity the same against +m. A seed whose run failed (e.g. diverged) counts with its last
evaluated metric (never evaluated: the worst value, accuracy 0, perplexity infinite) and
never lets the claim hold: a method failing on some seeds is inconclusive unless the interval
says it fails, and fails when it failed on every seed. Fewer than 3 seeds: insufficient-data
(inconclusive when one of them failed).

Traffic-matched rule: "reaches Top-k's accuracy (perplexity for language models) while sending at most 4/3 of Top-k's elements",
judged on the elements sent at the target density (the warm-up phase is reported apart): holds
if the accuracy claim holds and every seed sent at most 4/3; fails if the accuracy claim fails
or every seed sent more; else inconclusive.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

VERDICTS = ("holds", "fails", "mixed", "inconclusive", "insufficient-data")
HOLDS_FRACTION = 0.9
FAILS_FRACTION = 0.1
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


# ------------------------------------------------------------------ fraction rule
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


def fraction_verdict(n_pass: int, n_units: int, low: float | None = None,
                     high: float | None = None) -> str:
    """The fraction rule (module doc): with the share's interval [low, hi] (share_interval:
    below ZERO_EVENT_BLOCKS blocks it straddles a cut): holds above the 90% cut, fails below
    the 10% cut, mixed between them, inconclusive straddling a cut;
    without one, the share alone (>= 90% holds, <= 10% fails, else mixed); < 3 units
    insufficient-data."""
    if n_units < MIN_UNITS:
        return "insufficient-data"
    if low is not None and high is not None and math.isfinite(low) and math.isfinite(high):
        if low >= HOLDS_FRACTION:
            return "holds"
        if high <= FAILS_FRACTION:
            return "fails"
        if low > FAILS_FRACTION and high < HOLDS_FRACTION:
            return "mixed"
        return "inconclusive"
    frac = n_pass / n_units
    if frac >= HOLDS_FRACTION:
        return "holds"
    if frac <= FAILS_FRACTION:
        return "fails"
    return "mixed"


def fraction_cause(n_pass: int, n_units: int, low: float | None = None,
                   high: float | None = None) -> str:
    """'12 of 16 units (75%; 95% interval 58%-88%) meet the criterion'; the count that is
    missing for a verdict; which cut an interval straddles."""
    if n_units < MIN_UNITS:
        return f"{n_units} unit(s) measured, {MIN_UNITS} needed"
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return f"{n_pass} of {n_units} units ({n_pass / n_units:.0%}) meet the criterion"
    text = (f"{n_pass} of {n_units} units ({n_pass / n_units:.0%}; {SHARE_LEVEL:.0%} interval "
            f"{low:.0%}-{high:.0%}) meet the criterion")
    cuts = [c for c in (FAILS_FRACTION, HOLDS_FRACTION) if low < c < high]
    if cuts:
        text += f"; the interval straddles the {cuts[0]:.0%} cut"
    return text


FRACTION_RULE = (
    f"holds if the {SHARE_LEVEL:.0%} block-bootstrap interval of the share of units that "
    f"satisfy the criterion (blocks = steps, runs resampled where there are several) lies at "
    f"or above {HOLDS_FRACTION:.0%}, fails if at or below {FAILS_FRACTION:.0%}, mixed if "
    "strictly between them, inconclusive if it straddles either cut (its ends bounded by the "
    f"rule of three over the blocks: a verdict needs at least {ZERO_EVENT_BLOCKS}); "
    f"insufficient-data with fewer than {MIN_UNITS} units"
)


# ------------------------------------------------------------------ paired-seed rule
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


def interval_verdict(low: float, high: float, n_seeds: int, threshold: float,
                     higher_is_better: bool = True) -> str:
    """holds / fails / inconclusive from a 95% interval against a threshold; < 3 seeds or an
    undefined interval: insufficient-data. higher_is_better: holds when it lies above it."""
    if n_seeds < MIN_SEEDS or not (math.isfinite(low) and math.isfinite(high)):
        return "insufficient-data"
    above, below = low > threshold, high < threshold
    if higher_is_better:
        return "holds" if above else "fails" if below else "inconclusive"
    return "holds" if below else "fails" if above else "inconclusive"


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


def convergence_verdict(low: float, high: float, n_seeds: int, n_failed: int, metric: str,
                        margin: float) -> tuple[str, str]:
    """(verdict, cause) of the paired-seed rule from the interval, the paired seeds and how
    many of them failed (see the module docstring)."""
    base = interval_verdict(low, high, n_seeds, limit_of(metric, margin),
                            higher_is_better(metric))
    failed = f"{n_failed} of {n_seeds} seeds failed" if n_failed else ""
    if n_seeds == 0:
        return "insufficient-data", "no seed has runs of both the method and Top-k"
    if n_failed and n_failed == n_seeds:
        return "fails", f"{failed} (every seed)"
    interval = interval_text(low, high, metric)
    limit = limit_text(metric, margin)
    if base == "insufficient-data":
        why = (f"{n_seeds} paired seed(s), {MIN_SEEDS} needed" if n_seeds < MIN_SEEDS
               else "no finite interval")
        return ("inconclusive", f"{failed}; {why}") if n_failed else ("insufficient-data", why)
    side = {"holds": "above" if higher_is_better(metric) else "below",
            "fails": "below" if higher_is_better(metric) else "above",
            "inconclusive": "contains"}[base]
    text = (f"interval {interval} contains {limit}" if side == "contains"
            else f"interval {interval} {side} {limit}")
    if n_failed and base == "holds":
        return "inconclusive", f"{failed}; {text}"
    return base, f"{failed}; {text}" if n_failed else text


# ------------------------------------------------------------------ traffic-matched rule
def traffic_verdict(accuracy: str, accuracy_cause: str, target_ratios: Sequence[float]
                    ) -> tuple[str, str]:
    """(verdict, cause) of the traffic-matched claim from the accuracy claim's verdict and
    cause and each seed's elements sent at the target density relative to Top-k's."""
    ratios = np.asarray(target_ratios, dtype=np.float64)
    if accuracy == "insufficient-data":
        return "insufficient-data", accuracy_cause
    if not ratios.size or not np.isfinite(ratios).all():
        return "insufficient-data", "elements sent at the target density unknown"
    sent = f"sends {float(ratios.mean()):.3g}× Top-k's elements at the target density"
    if accuracy == "fails":
        return "fails", f"accuracy claim fails: {accuracy_cause}"
    if bool((ratios > TRAFFIC_LIMIT).all()):
        return "fails", f"{sent} (every seed above 4/3)"
    if accuracy == "holds" and bool((ratios <= TRAFFIC_LIMIT).all()):
        return "holds", f"matches Top-k and {sent}"
    if accuracy != "holds":
        return "inconclusive", f"accuracy claim {accuracy}: {accuracy_cause}; {sent}"
    over = int((ratios > TRAFFIC_LIMIT).sum())
    return "inconclusive", f"{sent}; {over} of {ratios.size} seeds above 4/3"


# --- predicted speed-ups (topkscope.perf.p16_claims) -----------------------------------
def speedup_verdict(speedups: Sequence[float], errors: Sequence[float]) -> tuple[str, int]:
    """(verdict, comparisons won): holds when every speed-up exceeds 1 + its error, fails when
    one falls below 1 - its error, else inconclusive (the model cannot tell them apart)."""
    faster = sum(s > 1 + e for s, e in zip(speedups, errors))
    if faster == len(speedups):
        return "holds", faster
    if any(s < 1 - e for s, e in zip(speedups, errors)):
        return "fails", faster
    return "inconclusive", faster


def speedup_interval(speedups: Sequence[float | None]) -> tuple[float, float, float]:
    """(mean, low, high): the 95% t-interval of the per-seed speed-ups, a seed that never
    reached the target counted as 0 (its worst value)."""
    return t_interval([0.0 if s is None else s for s in speedups])


def time_verdict(speedups: Sequence[float | None], error: float, counted: bool,
                 n_failed: int = 0) -> tuple[str, int, int]:
    """(verdict, seeds faster beyond the error, seeds that never reached the target) of one
    method's per-seed speed-ups to the target over Top-k (None: never reached), `n_failed` of
    whose seeds' runs failed; topkscope.perf.time_to_accuracy's module doc. counted False (selection not counted): at
    most inconclusive."""
    never = sum(s is None for s in speedups)
    reached = [s for s in speedups if s is not None]
    faster = sum(s > 1 + error for s in reached)
    n = len(speedups)
    if n == 0:
        return "insufficient-data", faster, never
    if (n_failed and n_failed == n) or never == n:
        return "fails", faster, never
    if n < MIN_SEEDS:
        return ("inconclusive" if n_failed or never else "insufficient-data"), faster, never
    if not counted:
        return "inconclusive", faster, never
    _, low, high = speedup_interval(speedups)
    verdict = interval_verdict(low, high, n, 1.0 + error)
    if verdict == "holds":
        return ("inconclusive" if n_failed or never else "holds"), faster, never
    if interval_verdict(low, high, n, 1.0 - error) == "fails":
        return "fails", faster, never
    return "inconclusive", faster, never


def free_selection_verdict(slower: Sequence) -> str:
    """The speed-up verdict when no selection time was measured on the compute's device: fails
    when the method is slower than a dense baseline beyond its error even with free
    selection (`slower`: those baselines), else inconclusive (its selection time decides)."""
    return "fails" if slower else "inconclusive"


def band_verdict(speedups: Sequence[dict], baselines: Sequence[str],
                 errors: dict) -> str:
    """The verdict over every point of an input band (each point: baseline -> speed-up):
    holds when every speed-up exceeds 1 + its baseline's error at every point, fails when one
    baseline's speed-up is below 1 - its error at every point, else inconclusive."""
    if all(s[b] > 1 + errors[b] for s in speedups for b in baselines):
        return "holds"
    if any(all(s[b] < 1 - errors[b] for s in speedups) for b in baselines):
        return "fails"
    return "inconclusive"
