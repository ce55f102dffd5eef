"""The verdict rules of the claims table, written once: from the numbers a claim measured to
holds | fails | mixed | inconclusive | insufficient-data, the words that say why (`cause`) and,
for a row that is not decided, the reason as a field (`reason`, one of REASONS). The claims of
this package apply them; renderers (README, findings, LaTeX, report) read the rows' fields and
never decide a verdict. The criteria and intervals they judge by are
topkscope.analysis.criteria's.

Fraction rule (distribution claims): f is the share of units meeting the criterion and [lo, hi]
its 95% block-bootstrap interval: holds if lo >= 0.9, fails if hi <= 0.1, mixed if 0.1 < lo and
hi < 0.9, inconclusive if the interval straddles a cut (with fewer than 30 blocks it always
does: reason too-few-blocks; else share-on-the-cut); < 3 units insufficient-data. Without an
interval (a table written before it) f alone decides: f >= 0.9 holds, f <= 0.1 fails, else
mixed.

Paired-seed rule (convergence claims): the paired difference's 95% interval against the
non-inferiority margin -m (perplexity +m): holds if it lies on the good side, fails if on the
other, inconclusive if it contains the margin. A seed whose run failed never lets the claim
hold: a method failing on some seeds is inconclusive unless the interval says it fails, and
fails when it failed on every seed. Fewer than 3 seeds: insufficient-data (inconclusive when
one of them failed).

Traffic-matched rule: "reaches Top-k's accuracy (perplexity for language models) while sending
at most 4/3 of Top-k's elements", judged on the elements sent at the target density: holds if
the accuracy claim holds and every seed sent at most 4/3; fails if the accuracy claim fails or
every seed sent more; else inconclusive.

Predictions: a speed-up holds when it exceeds 1 + e (e the step-time model's validated error),
fails below 1 - e, else is inconclusive; over an input band, at every corner of the band. A
published number closes under the model (closes_verdict) when the prediction lies within its
error of it at every corner of the inputs' bands, and fails when it does at none. No verdict is stronger than its weakest input (topkscope.perf.model.GRADES): a row that
holds or fails while an `assumed` input it depends on could flip it by taking another value is
inconclusive, reason assumed-input (assumed_input_verdict).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from topkscope.analysis.criteria import (
    MIN_SEEDS,
    MIN_UNITS,
    SHARE_LEVEL,
    TRAFFIC_LIMIT,
    ZERO_EVENT_BLOCKS,
    higher_is_better,
    interval_text,
    limit_of,
    limit_text,
    speedup_interval,
)

VERDICTS = ("holds", "fails", "mixed", "inconclusive", "insufficient-data")
DECIDED = ("holds", "fails", "mixed")
HOLDS_FRACTION = 0.9
FAILS_FRACTION = 0.1

# why a row is not decided (inconclusive or insufficient-data): the `reason` field's codes and
# the words a sentence uses for each
REASONS = {
    "not-measured": "not measured",
    "too-few-units": f"fewer than {MIN_UNITS} measurements",
    "too-few-blocks": f"too few recorded steps ({ZERO_EVENT_BLOCKS} needed)",
    "share-on-the-cut": f"the share is near {FAILS_FRACTION:.0%} or {HOLDS_FRACTION:.0%}",
    "too-few-seeds": f"fewer than {MIN_SEEDS} seeds",
    "interval-contains-margin": "the seeds' interval includes the margin",
    "interval-contains-zero": "the interval includes 0",
    "failed-seeds": "a seed failed or did not finish",
    "seeds-disagree": "the seeds disagree",
    "within-model-error": "within the step-time model's error",
    "not-measured-on-device": "no GPU selection time",
    "counts-not-own-training": "counts from another method's training",
    "input-band-too-wide": "an input's range is too wide to decide",
    "seeds-not-published": "the published logs name no seed",
    "not-significant": "the ordering is not significant",
    "assumed-input": "it holds or fails only at an assumed input's value",
}


def check_reason(verdict: str, reason: str) -> str:
    """A row's reason: one of REASONS exactly when the verdict is not decided; ValueError
    naming the value otherwise."""
    if verdict not in VERDICTS:
        raise ValueError(f"verdict = {verdict!r}; allowed: {', '.join(VERDICTS)}")
    if verdict in DECIDED:
        if reason:
            raise ValueError(f"a {verdict} row has no reason (got {reason!r})")
        return ""
    if reason not in REASONS:
        raise ValueError(f"a {verdict} row needs a reason; {reason!r} is not one of "
                         f"{', '.join(REASONS)}")
    return reason


# ------------------------------------------------------------------ fraction rule
def fraction_verdict(n_pass: int, n_units: int, low: float | None = None,
                     high: float | None = None) -> str:
    """The fraction rule (module doc): with the share's interval [low, hi] (below
    ZERO_EVENT_BLOCKS blocks it straddles a cut): holds above the 90% cut, fails below the 10%
    cut, mixed between them, inconclusive straddling a cut; without one, the share alone
    (>= 90% holds, <= 10% fails, else mixed); < 3 units insufficient-data."""
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


def check_verdict(n_pass: int, n_units: int) -> tuple[str, str, str]:
    """(verdict, cause, reason) of a check (a row true by construction, or for any vector
    that is not flat): holds when every unit meets it, fails when one does not — a check is
    deterministic, never inconclusive —; insufficient-data without a unit."""
    if n_units == 0:
        return "insufficient-data", "no unit measured", "not-measured"
    if n_pass == n_units:
        return "holds", f"all {n_units} units meet it", ""
    return "fails", f"{n_units - n_pass} of {n_units} units do not meet it", ""


def count_in_training_verdict(n_pass: int, n_units: int, low: float, high: float,
                              seeds_in: int, n_seeds: int) -> tuple[str, str]:
    """(verdict, cause) of a count in a method's own training: the fraction rule over its
    steps, and a holds needs every seed's median count/k in the band too (else mixed)."""
    verdict = fraction_verdict(n_pass, n_units, low, high)
    cause = fraction_cause(n_pass, n_units, low, high)
    if verdict == "holds" and seeds_in < n_seeds:
        return "mixed", (f"{cause}; but {n_seeds - seeds_in} of {n_seeds} seeds' median "
                         "count/k is out")
    return verdict, cause


def fraction_reason(verdict: str, n_units: int, n_blocks: int) -> str:
    """Why a fraction-rule row is not decided: no units (not-measured), fewer than MIN_UNITS
    (too-few-units), an interval that straddles a cut on fewer than ZERO_EVENT_BLOCKS blocks
    (too-few-blocks: the rule of three keeps it there) or on enough (share-on-the-cut)."""
    if verdict in DECIDED:
        return ""
    if n_units == 0:
        return "not-measured"
    if n_units < MIN_UNITS:
        return "too-few-units"
    return "too-few-blocks" if n_blocks < ZERO_EVENT_BLOCKS else "share-on-the-cut"


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


def convergence_verdict(low: float, high: float, n_seeds: int, n_failed: int, metric: str,
                        margin: float, blocking: Sequence[str] = ()) -> tuple[str, str]:
    """(verdict, cause) of the paired-seed rule from the interval, the paired seeds and how
    many of them failed (see the module docstring); `blocking` names what else keeps it from
    holding (a failed Top-k seed, an unfinished run): holds becomes inconclusive, and the
    cause names them."""
    verdict, cause = _convergence_verdict(low, high, n_seeds, n_failed, metric, margin)
    if not blocking:
        return verdict, cause
    return ("inconclusive" if verdict == "holds" else verdict), f"{'; '.join(blocking)}; {cause}"


def _convergence_verdict(low: float, high: float, n_seeds: int, n_failed: int, metric: str,
                         margin: float) -> tuple[str, str]:
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


def convergence_reason(verdict: str, n_seeds: int, low: float, high: float,
                       failed_or_unfinished: int) -> str:
    """Why a paired-seed row is not decided: no paired seed (not-measured), fewer than
    MIN_SEEDS (too-few-seeds), a failed or unfinished seed that kept it from holding
    (failed-seeds), else an interval that contains the margin."""
    if verdict in DECIDED:
        return ""
    if n_seeds == 0:
        return "not-measured"
    if n_seeds < MIN_SEEDS or not (math.isfinite(low) and math.isfinite(high)):
        return "too-few-seeds"
    return "failed-seeds" if failed_or_unfinished else "interval-contains-margin"


# ------------------------------------------------------------------ traffic-matched rule
def traffic_verdict(accuracy: str, accuracy_cause: str, target_ratios: Sequence[float],
                    disagree: str = "") -> tuple[str, str]:
    """(verdict, cause) of the traffic-matched claim from the accuracy claim's verdict and
    cause and each seed's elements sent at the target density relative to Top-k's; a
    non-empty `disagree` (the seeds' ratios, when some sent above 4/3 and some below 2/3)
    never lets it hold: the mean describes no seed."""
    verdict, cause = _traffic_verdict(accuracy, accuracy_cause, target_ratios)
    cause = f"{cause} (ratio used: traffic_target, against Top-k under the same warm-up)"
    if disagree:
        cause += f"; seeds disagree in kind, {disagree}: the mean describes no seed"
        verdict = "inconclusive" if verdict == "holds" else verdict
    return verdict, cause


def _traffic_verdict(accuracy: str, accuracy_cause: str, target_ratios: Sequence[float]
                     ) -> tuple[str, str]:
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


def traffic_reason(verdict: str, accuracy_reason: str, target_ratios: Sequence[float]) -> str:
    """Why a traffic-matched row is not decided: the accuracy claim's reason where it is
    undecided, unknown traffic (not-measured), else seeds on both sides of 4/3
    (seeds-disagree)."""
    if verdict in DECIDED:
        return ""
    ratios = np.asarray(target_ratios, dtype=np.float64)
    if accuracy_reason:
        return accuracy_reason
    if not ratios.size or not np.isfinite(ratios).all():
        return "not-measured"
    return "seeds-disagree"


# ------------------------------------------------------------------ predictions
def speedup_verdict(speedups: Sequence[float], errors: Sequence[float]) -> tuple[str, int]:
    """(verdict, comparisons won): holds when every speed-up exceeds 1 + its error, fails when
    one falls below 1 - its error, else inconclusive (the model cannot tell them apart)."""
    faster = sum(s > 1 + e for s, e in zip(speedups, errors))
    if faster == len(speedups):
        return "holds", faster
    if any(s < 1 - e for s, e in zip(speedups, errors)):
        return "fails", faster
    return "inconclusive", faster


def time_verdict(speedups: Sequence[float | None], error: float, counted: bool,
                 n_failed: int = 0, blocked: bool = False) -> tuple[str, int, int]:
    """(verdict, seeds faster beyond the error, seeds that never reached the target) of one
    method's per-seed speed-ups to the target over Top-k (None: never reached), `n_failed` of
    whose seeds' runs failed (topkscope.claims.time_to_accuracy's module doc). counted False
    (selection not counted): at most inconclusive. blocked (a failed Top-k seed, an
    unfinished run of either): never holds."""
    verdict, faster, never = _time_verdict(speedups, error, counted, n_failed)
    return ("inconclusive" if blocked and verdict == "holds" else verdict), faster, never


def blocked_time_reason(speedups: Sequence[float | None], error: float, counted: bool,
                        n_failed: int, n_never: int) -> str:
    """The reason of a time-to-accuracy row kept from holding by a failed Top-k seed or an
    unfinished run (time_verdict's blocked): failed-seeds where the seeds alone would hold,
    else time_reason's."""
    verdict, _, _ = _time_verdict(speedups, error, counted, n_failed)
    if verdict == "holds":
        return "failed-seeds"
    return time_reason(verdict, len(speedups), n_failed, n_never, counted)


def _time_verdict(speedups: Sequence[float | None], error: float, counted: bool,
                  n_failed: int = 0) -> tuple[str, int, int]:
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


def time_reason(verdict: str, n_seeds: int, n_failed: int, n_never: int, counted: bool) -> str:
    """Why a time-to-accuracy row is not decided, in time_verdict's order."""
    if verdict in DECIDED:
        return ""
    if n_seeds == 0:
        return "not-measured"
    if n_seeds < MIN_SEEDS:
        return "too-few-seeds"
    if not counted:
        return "not-measured-on-device"
    if n_failed or n_never:
        return "failed-seeds"
    return "within-model-error"


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


def closes_verdict(predicted: Sequence[float], published: float, error: float,
                   at_least: bool = False) -> str:
    """Whether a published number closes under the model: `predicted` holds the model's value
    at every corner of its inputs' bands (one value where every input is a point), `error` its
    validated error (0 for an exact count). A corner agrees when predicted / published lies in
    [1 - e, 1 + e], or, for a published lower bound (at_least: ">146x"), at or above 1 - e:
    holds when every corner agrees, fails when none does, else inconclusive (the band decides:
    reason input-band-too-wide)."""
    if not predicted or not published > 0:
        raise ValueError(f"closes_verdict needs predicted values and a published value > 0, "
                         f"got {list(predicted)!r} and {published!r}")
    ratios = [p / published for p in predicted]
    agree = [r >= 1 - error if at_least else abs(r - 1) <= error for r in ratios]
    if all(agree):
        return "holds"
    return "fails" if not any(agree) else "inconclusive"


def assumed_input_verdict(verdict: str, flips: Sequence) -> tuple[str, str]:
    """(verdict, reason) once the assumed inputs are weighed: `flips` are the assumed inputs
    the row depends on whose value alone, moved out of what was assumed, changes the verdict.
    A holds or fails with any such input is inconclusive (reason assumed-input); any other
    verdict is returned unchanged (reason "", for the caller's own)."""
    if verdict in ("holds", "fails") and len(flips):
        return "inconclusive", "assumed-input"
    return verdict, ""
