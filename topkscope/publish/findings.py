"""What the claims say, in words and tables — formatted from the claims' columns, never
recomputed: one sentence per row (claims.md, and the summary `topkscope claims` prints), and
the README's findings, generated from claims.csv between marker comments (`make gallery`):

    <!-- claims-table:start --> ... <!-- claims-table:end -->   the tables (findings_markdown)
    <!-- claims-prose:start --> ... <!-- claims-prose:end -->   the sentences (findings_prose)

A README may hold more than one claims table, each in blocks of its own name (`markers`): the
quick profile's are `claims-*`, the standard profile's `standard-claims-*`.

The tables: distribution and contraction (model x condition), convergence (method x
condition: paired difference with its interval, seeds with the failed ones counted, elements
sent at the target density, each verdict with its cause), predicted speed-ups ((model, method
and training condition, baselines) x network: the verdict with its cause, or the break-even
selection times where no selection time of the compute's device was measured), predicted time
to accuracy ((model, method, training condition) x network), and the checks (rows true by
construction). Every number comes from a row's fields; a claims table of an older schema is
first brought to the current one (topkscope.claims.migrate), and the README says when columns
were derived. Nothing here decides a verdict or reads a number out of a row's text.
"""

from __future__ import annotations

import math
import re

import pandas as pd

from topkscope.analysis import criteria
from topkscope.analysis.units import ALL_CONDITIONS
from topkscope.claims.migrate import current, with_current_networks  # noqa: F401  (this API)
from topkscope.claims.time_to_accuracy import CLAIM_SUFFIX
from topkscope.claims.verdicts import REASONS, VERDICTS
from topkscope.manifest import condition_name
from topkscope.plots.titles import dataset_name, model_name, sparsifier_name

COUNT_ON_TOPK = "_count"                 # <family>_count: a selector on Top-k's u
IN_TRAINING = "_count_in_training"       # <family>_count_in_training


def markers(block: str = "claims") -> tuple[str, str, str, str]:
    """(table start, table end, prose start, prose end) of the README blocks named `block`
    ("claims": README_START ... PROSE_END; "standard-claims": the standard profile's)."""
    return (f"<!-- {block}-table:start -->", f"<!-- {block}-table:end -->",
            f"<!-- {block}-prose:start -->", f"<!-- {block}-prose:end -->")


README_START, README_END, PROSE_START, PROSE_END = markers("claims")
# block -> the heading of its findings sections in docs/findings.md ("### Quick: Convergence")
HEADINGS = {"claims": "Quick", "standard-claims": "Standard"}
MAX_COLUMNS, MAX_CELL = 9, 60  # docs/findings.md: a table's columns, a cell's characters
# the claims columns of the distribution table, in order: (claim, header)
DISTRIBUTION_COLUMNS = (
    ("gaussian_like", "Gaussian-like"),
    ("below_paper", "δ ≤ (1 − k/d)²"),
    ("gaussian_value", "δ ≤ Gaussian value"),
    ("convexity_condition", "convex sorted u²"),
)
LABEL_COLUMNS = ("model", "method", "condition", "claim", "speed-up")
DERIVED_NOTE = ("_These claims were written before the structured columns; the section, the "
                "causes and the paired differences were derived from their rows (the elements "
                "sent are whole-run ratios: the per-phase traffic is not in them)._")


# --------------------------------------------------------------------- columns
def _text(value) -> str:
    return value if isinstance(value, str) else ""


def _number(row, name: str) -> float:
    value = getattr(row, name, math.nan)
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def with_derived_columns(table: pd.DataFrame) -> tuple[pd.DataFrame, bool]:
    """(table, derived): the table in the current schema (topkscope.claims.migrate.current)."""
    return current(table)


# --------------------------------------------------------------------- one sentence per verdict
def verdict_sentence(row) -> str:
    """One plain sentence saying what a claims row's verdict means and why (its cause)."""
    verdict = str(row.verdict)
    cause = _text(getattr(row, "cause", None))
    if not cause:
        frame, _ = with_derived_columns(pd.DataFrame([row._asdict()]))
        cause = _text(frame["cause"].iloc[0])
    lead = {"holds": "Holds", "fails": "Fails", "mixed": "Mixed — neither the claim nor its "
            "negation", "inconclusive": "Not decided", "insufficient-data": "Not judged"}
    if is_time_to_accuracy(row.claim):
        lead = {**lead, **TIME_TO_ACCURACY_LEADS}
    elif _text(getattr(row, "selection_basis", None)) == BREAKEVEN:
        lead = {**lead, **BREAKEVEN_LEADS}
    elif _text(getattr(row, "section", None)) == "prediction":
        lead = {**lead, **PREDICTION_LEADS}
    text = lead.get(verdict, verdict)
    reason = REASONS.get(_text(getattr(row, "reason", None)))
    if reason and verdict in ("inconclusive", "insufficient-data"):
        text += f" ({reason})"
    return f"{text}: {cause}." if cause else f"{text}."


PREDICTION_LEADS = {
    "holds": "Predicted faster than every baseline by more than the model's validated error",
    "fails": "Predicted slower than a baseline by more than the model's validated error",
    "inconclusive": "Within the model's validated error of a baseline: the model cannot tell "
                    "them apart",
}
BREAKEVEN = "break-even"  # claims column selection_basis of a speed-up judged on break-even
BREAKEVEN_LEADS = {
    "fails": "Predicted slower than a baseline even if its selection cost nothing",
    "inconclusive": "Decided by its selection time on the compute's device, which was not "
                    "measured (break-even selection times)",
}
TIME_TO_ACCURACY_LEADS = {
    "holds": "Predicted to reach the target sooner than Top-k",
    "fails": "Predicted not to reach the target sooner than Top-k",
}


def is_time_to_accuracy(claim) -> bool:
    """A `<family>_time_to_accuracy` row (topkscope.claims.time_to_accuracy)."""
    return str(claim).endswith(CLAIM_SUFFIX)


def claims_summary(table: pd.DataFrame) -> str:
    """One plain line per claims row: model and dataset, the statement, the sparsifier(s) and
    condition, the verdict and verdict_sentence, e.g. "FNN-3 on MNIST: delta_emp is below the
    paper's bound (1 - k/d)^2 [Top-k; warmup=none; rho=0.001] — holds. Holds: 880 of 880 units
    (100%) meet the criterion." """
    if len(table) == 0:
        return "no claims could be evaluated (no runs)"
    lines = []
    for row in table.itertuples(index=False):
        sub = getattr(row, "dataset_substitute", None)
        sub = sub if isinstance(sub, str) and sub else None
        sparsifiers = ", ".join(sparsifier_name(s) for s in str(row.sparsifier).split(","))
        cond = _text(getattr(row, "condition", None))
        where = sparsifiers + (f"; {cond}" if cond else "")
        lines.append(f"{model_name(row.model)} on {dataset_name(row.dataset, sub)}: "
                     f"{row.statement or row.claim} [{where}] — {row.verdict}. "
                     f"{verdict_sentence(row)}")
    return "\n".join(lines)


# --------------------------------------------------------------------- the README tables
def _verdict(verdict: str) -> str:
    return f"**{verdict}**" if verdict == "fails" else verdict


def _fraction_cell(row) -> str:
    """'mixed (75% [58%–88%])': the verdict, the share and its interval; a bound's claim adds
    its margin in gaps between the bounds and a uniform u's δ: 'holds (100% [100%–100%];
    margin 0.41, uniform δ 0.997)'."""
    frac, margin = _number(row, "fraction"), _number(row, "bound_margin")
    low, high = _number(row, "fraction_low"), _number(row, "fraction_high")
    parts = [] if math.isnan(frac) else [f"{frac:.0%}" + (
        "" if math.isnan(low) else f" [{low:.0%}–{high:.0%}]")]
    if not math.isnan(margin):
        shown = f"{margin:.0f}" if abs(margin) >= 100 else f"{margin:.2g}"  # never 4e+02
        parts.append(f"margin {shown}, uniform δ {_number(row, 'delta_uniform'):.4g}")
    inside = "; ".join(parts)
    return _verdict(str(row.verdict)) + (f" ({inside})" if inside else "")


def _condition(value) -> str:
    text = _text(value)
    return text if text else "all runs pooled"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _header(names: list[str]) -> list[str]:
    return [_row(names), "|" + "---|" * len(names)]


def distribution_markdown(table: pd.DataFrame) -> str:
    """One row per (model, condition); runs: the runs behind it (the most of its claims); per
    claim the verdict and the share of units meeting its criterion with its interval; β: the
    median generalised-normal shape of the snapshot fits."""
    counts = sorted({s for s in table.loc[table["claim"] == "gaussiank_count", "sparsifier"]})
    columns = [*DISTRIBUTION_COLUMNS, *((("gaussiank_count", s), f"{sparsifier_name(s)} count "
                                         f"in {criteria.count_band_text()}") for s in counts)]
    cells: dict[tuple, dict] = {}
    for row in table.itertuples(index=False):
        key = row.claim if row.claim != "gaussiank_count" else (row.claim, row.sparsifier)
        where = cells.setdefault((str(row.model), _condition(row.condition)), {})
        where[key] = _fraction_cell(row)
        runs = _number(row, "n_runs")
        if not math.isnan(runs):
            where["runs"] = f"{max(int(runs), int(where.get('runs', '0')))}"
        beta = _number(row, "gennorm_beta")
        if row.claim == "gaussian_like" and not math.isnan(beta):
            where["beta"] = f"{beta:.2f}"
    names = ["model", "condition", "runs", DISTRIBUTION_COLUMNS[0][1], "β",
             *(h for _, h in columns[1:])]
    lines = _header(names)
    for (model, cond), by in cells.items():
        values = [by.get("runs", "—"), by.get(columns[0][0], "—"), by.get("beta", "—")]
        values += [by.get(key, "—") for key, _ in columns[1:]]
        lines.append(_row([model_name(model), condition_name(cond), *values]))
    return "\n".join(lines)


def _interval(row) -> str:
    low, high = _number(row, "ci_low"), _number(row, "ci_high")
    metric = _text(row.metric) or "accuracy"
    mean = criteria.signed(_number(row, "diff_mean"))
    if math.isnan(low):
        return f"{mean}{criteria.diff_unit(metric)}, no interval"
    return f"{mean} {criteria.interval_text(low, high, metric)}"


def _seeds(row) -> str:
    n = _number(row, "n_seeds")
    failed = _number(row, "n_failed_seeds")
    unfinished = _number(row, "n_unfinished_seeds")
    text = "0" if math.isnan(n) else str(int(n))
    return (text + (f" ({int(failed)} failed)" if not math.isnan(failed) and failed else "")
            + (f" ({int(unfinished)} unfinished)" if not math.isnan(unfinished) and unfinished
               else ""))


def _sent(row, derived: bool) -> str:
    target = _number(row, "traffic_target")
    if not math.isnan(target):
        return f"{target:.3g}×"
    whole = _number(row, "traffic_ratio")
    return f"{whole:.3g}× (whole run)" if derived and not math.isnan(whole) else "—"


def _ratio_cell(row, column: str) -> str:
    value = _number(row, column)
    return "—" if math.isnan(value) else f"{value:.3g}×"


def counts_markdown(table: pd.DataFrame) -> str:
    """One row per (model, condition, method) of the count claims: the published rule's count
    on Top-k's u (gaussiank_count, <family>_count), in the method's own training
    (<family>_count_in_training), each with the median count/k, and the tail at its first
    threshold (gaussian_tail, Top-k's u); "" when the table has none."""
    claim = table["claim"].astype(str)
    wanted = table[claim.str.endswith(COUNT_ON_TOPK) | (claim == "gaussian_tail")
                   | claim.str.endswith(IN_TRAINING)]
    if wanted.empty:
        return ""
    cells: dict[tuple, dict] = {}
    tails = {}
    for row in wanted.itertuples(index=False):
        where = (str(row.model), _condition(row.condition))
        if row.claim == "gaussian_tail":
            tails[where] = _fraction_cell(row)
            continue
        kind = "own" if str(row.claim).endswith(IN_TRAINING) else "topk"
        cell = _fraction_cell(row)
        if not math.isnan(_number(row, "count_over_k")):
            cell += f", median {_number(row, 'count_over_k'):.3g}k"
        cells.setdefault((*where, str(row.sparsifier)), {})[kind] = cell
    lines = _header(["model", "condition", "method", "count on Top-k's u",
                     "count in its own training", "tail at the first threshold (Top-k's u)"])
    for (model, cond, method), by in cells.items():
        lines.append(_row([model_name(model), condition_name(cond), sparsifier_name(method),
                           by.get("topk", "—"), by.get("own", "—"),
                           tails.get((model, cond), "—")]))
    return "\n".join(lines)


def convergence_markdown(table: pd.DataFrame, derived: bool = False) -> str:
    """One row per (model, method, condition): the paired difference with its 95% interval,
    the seeds (failed ones counted), the elements sent at the target density relative to
    Top-k's, and each claim's verdict; the rules are stated above the table (CONVERGENCE_RULES)
    and the causes a row's cells do not show (a traffic verdict neither holds nor fails by
    the accuracy claim alone) are numbered notes below it."""
    pairs: dict[tuple, dict] = {}
    for row in table.itertuples(index=False):
        kind = "traffic" if str(row.claim).endswith("_traffic") else "accuracy"
        pairs.setdefault((str(row.model), str(row.sparsifier), _condition(row.condition)),
                         {})[kind] = row
    lines = _header(["model", "method", "condition", "difference [95% interval]", "seeds",
                     "sent vs Top-k (target ρ)", "whole run vs Top-k without warm-up",
                     "trains as well as Top-k", "traffic-matched"])
    notes: list[str] = []
    for (model, method, cond), by in pairs.items():
        acc = by.get("accuracy") or by.get("traffic")
        verdict = {}
        for kind, r in by.items():
            verdict[kind] = _verdict(str(r.verdict))
            if kind == "traffic" and str(r.verdict) not in ("holds", "fails"):
                notes.append(f"{model_name(model)}, {sparsifier_name(method)}, {cond}: "
                             f"{_text(r.cause)}")
                verdict[kind] += f" (note {len(notes)})"
        lines.append(_row([model_name(model), sparsifier_name(method), condition_name(cond),
                           _interval(acc), _seeds(acc), _sent(acc, derived),
                           _ratio_cell(acc, "traffic_vs_plain_topk"),
                           verdict.get("accuracy", "—"), verdict.get("traffic", "—")]))
    text = "\n".join(lines)
    if notes:
        text += "\n\n" + "\n".join(f"{i}. {n}" for i, n in enumerate(notes, 1))
    return text


CONVERGENCE_RULES = (
    "trains as well as Top-k holds when the interval lies on the good side of the margin (above "
    "−1 point of accuracy, below +3% of perplexity), fails on the other side, else is "
    "inconclusive; traffic-matched holds when it trains as well and sends at most 4/3 of "
    "Top-k's elements at the target density on every seed, fails when it does not train as "
    "well or every seed sends more; each row's cause is in claims.csv")


def _variants(table: pd.DataFrame) -> dict[int, str]:
    """Row position -> the method's name, with its training condition in brackets where the
    table has the method under several training conditions ("Gaussian-k (2019)
    [warmup=paper; rho=0.001]")."""
    conditions = table["training_condition"].map(_text)
    several = conditions.groupby(table["sparsifier"]).nunique() > 1
    return {i: sparsifier_name(str(m)) + (f" [{condition_name(c)}]" if several[m] and c else "")
            for i, (m, c) in enumerate(zip(table["sparsifier"], conditions))}


MARKS = {"holds": "✓", "fails": "✗", "inconclusive": "?", "mixed": "~",
         "insufficient-data": "·"}
MARKS_TEXT = ("✓ holds, ✗ fails, ? inconclusive (within the model's validated error, or "
              "decided by a selection time not measured on the compute's device), · "
              "insufficient data")


def _mark(verdict) -> str:
    return MARKS.get(str(verdict), str(verdict))


def _versus(row, baseline: str) -> str:
    """The one number of a speed-up row against `baseline`, after the verdict's mark: the
    predicted speed-up ("1.49×"), or, judged on break-even (selection_basis), the longest
    selection that still beats a dense baseline ("< 161 ms"; "never": slower even with free
    selection) or the most it may exceed Top-k's ("+0.2 ms")."""
    if _text(row.selection_basis) == BREAKEVEN:
        if baseline == sparsifier_name("topk"):
            value = _number(row, "breakeven_topk_ms")
            number = "—" if math.isnan(value) else f"{criteria.signed(value)} ms"
        else:
            value = _number(row, "breakeven_ms")
            number = ("—" if math.isnan(value) else
                      f"< {value:.3g} ms" if value > 0 else "never")
    else:
        low, high = ((_number(row, "speedup_topk_low"), _number(row, "speedup_topk_high"))
                     if baseline == sparsifier_name("topk") else
                     (_number(row, "speedup_low"), _number(row, "speedup_high")))
        number = ("—" if math.isnan(low) else f"{low:.3g}×" if f"{low:.3g}" == f"{high:.3g}"
                  else f"{low:.3g}–{high:.3g}×")
    return f"{_mark(row.verdict)} {number}"


def prediction_tables(table: pd.DataFrame) -> list[tuple[str, str]]:
    """(baseline, markdown table) per baseline of the speed-up rows: one row per (model,
    method and training condition), one column per network preset, each cell the verdict's
    mark and one number (_versus)."""
    table = with_current_networks(table.reset_index(drop=True))
    networks = list(dict.fromkeys(table["network"].astype(str)))
    variants = _variants(table)
    by_baseline: dict[str, dict[tuple, dict]] = {}
    for i, row in enumerate(table.itertuples(index=False)):
        for baseline in _text(row.baselines).split(", "):
            cells = by_baseline.setdefault(baseline, {})
            cells.setdefault((model_name(row.model), variants[i]), {})[str(row.network)] = \
                _versus(row, baseline)
    out = []
    for baseline, cells in by_baseline.items():
        lines = _header(["model", "method", *networks])
        lines += [_row([*label, *(by.get(n, "—") for n in networks)])
                  for label, by in cells.items()]
        out.append((baseline, "\n".join(lines)))
    return out


def prediction_markdown(table: pd.DataFrame) -> str:
    """The predicted speed-ups: the rule, the inputs and the model's error stated once, then
    one table per baseline (prediction_tables)."""
    if "network" not in table or table["network"].isna().all():
        return ("_These claims predate the structured prediction columns (network, "
                "baselines); regenerate them (`make reproduce-figures`) to list the predicted "
                "speed-ups here._")
    inputs = "; ".join(sorted({str(v) for v in table.get("inputs", pd.Series()).dropna()}))
    errors = sorted({f"±{e:.1%}" for e in pd.to_numeric(
        table.get("model_error", pd.Series(dtype=float)), errors="coerce").dropna()})
    sparsifiers = ", ".join(sparsifier_name(s) for s in dict.fromkeys(table["sparsifier"]))
    breakeven = (table["selection_basis"].map(_text) == BREAKEVEN).any()
    intro = (f"Predicted, not measured — the step-time speed-up of {sparsifiers} at P = 16 "
             "over each baseline, per network preset (10gbe and ib100 fitted on published "
             "measurements, the others line rates): the verdict as a mark ("
             + MARKS_TEXT + ") and one number: the predicted speed-up, or, "
             + ("where the selection times were another device's than the compute's (every "
                "row here), the break-even selection time — the longest selection that still "
                "beats a dense baseline (< ms; never: slower even with free selection), or the "
                "most it may exceed Top-k's selection (± ms)" if breakeven else
                "judged on break-even, the break-even selection time")
             + (f"; inputs: {inputs}" if inputs else "")
             + (f"; the model's validated error {', '.join(errors)}" if errors else "")
             + "; the rule and every input are in each claims row (rule, condition); see "
               "docs/scaling.md.")
    parts = [intro]
    for baseline, md in prediction_tables(table):
        parts.append(f"Against {baseline}:\n\n{md}")
    return "\n\n".join(parts)


def _target(row) -> str:
    metric, margin = _text(row.metric) or "accuracy", _number(row, "margin")
    if math.isnan(margin):
        return "—"
    return f"Top-k {criteria.limit_text(metric, margin)}"


NOT_COUNTED = "not counted"  # selection_basis of a time to accuracy without selection


def _time_cell(row) -> str:
    """The verdict's mark and one number of a time-to-accuracy row: the speed-up to the target
    over Top-k (the mean over seeds) with the seeds' range, or on how many seeds it never
    reached the target."""
    n, failed, never = (_number(row, c) for c in ("n_seeds", "n_failed_seeds", "n_never"))
    prefix = f"{int(failed)}/{int(n)} failed, " if failed and not math.isnan(failed) else ""
    mean, low, high = (_number(row, c) for c in ("diff_mean", "speedup_low", "speedup_high"))
    if not math.isnan(never) and never and never == n:
        number = f"never on {int(never)}/{int(n)} seeds"
    elif not math.isnan(mean):
        number = f"{mean:.3g}×" + (f" ({low:.3g}–{high:.3g})" if f"{low:.3g}" != f"{high:.3g}"
                                   else "")
        if not math.isnan(never) and never:
            number += f", never on {int(never)}/{int(n)}"
    else:
        number = REASONS.get(_text(row.reason), _text(row.cause)) or "—"
    return f"{_mark(row.verdict)} {prefix}{number}"


def time_to_accuracy_markdown(table: pd.DataFrame) -> str:
    """One row per (model, method, training condition), one column per network preset: the
    verdict of reaching the target sooner than Top-k as a mark and the speed-up to the target
    (the seeds' range) or the seeds that never reached it; the target (Top-k's final metric
    less the margin) and the seeds (failed ones counted) beside; the rule and inputs above."""
    table = with_current_networks(table)
    networks = list(dict.fromkeys(table["network"].astype(str)))
    cells: dict[tuple, dict] = {}
    for row in table.itertuples(index=False):
        label = (model_name(row.model), sparsifier_name(str(row.sparsifier)),
                 condition_name(_text(row.training_condition)), _target(row), _seeds(row))
        cells.setdefault(label, {})[str(row.network)] = _time_cell(row)
    lines = _header(["model", "method", "condition", "target", "seeds", *networks])
    for label, by in cells.items():
        lines.append(_row([*label, *(by.get(n, "—") for n in networks)]))
    inputs = "; ".join(sorted({str(v) for v in table.get("inputs", pd.Series()).dropna()}))
    uncounted = (table["selection_basis"].map(_text) == NOT_COUNTED).any()
    intro = ("Predicted from the measured convergence — the wall-clock each method needs at "
             "P = 16 to reach the target (Top-k's final metric of the same seed and condition "
             "less the claims' margin) against Top-k's, per network preset: the verdict as a "
             f"mark ({MARKS_TEXT}) and the speed-up to the target over Top-k (mean, the "
             "seeds' range), or the seeds that never reached it"
             + ("; ? where the selection was not counted (the selection times were another "
                "device's than the compute's): its selection time on the compute's device "
                "decides" if uncounted else "")
             + (f"; inputs: {inputs}" if inputs else "") + "; see docs/scaling.md.")
    return intro + "\n\n" + "\n".join(lines)


SHOWN_ELSEWHERE = {c for c, _ in DISTRIBUTION_COLUMNS} | {"gaussian_tail"}


def other_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The distribution and explanation rows no other findings table shows: the claims beyond
    the distribution table's columns and the count table (fitted_value, a user's own)."""
    claim = table["claim"].astype(str)
    shown = claim.isin(SHOWN_ELSEWHERE) | claim.str.endswith((COUNT_ON_TOPK, IN_TRAINING))
    return table[table["section"].isin(("distribution", "explanation")) & ~shown]


def other_markdown(table: pd.DataFrame) -> str:
    """One row per (claim, model, condition): the statement, the verdict cell (a share with its
    interval, or the effect with its interval and unit) and the reason a row is not decided."""
    lines = _header(["claim", "model", "condition", "verdict", "not decided because"])
    for row in table.itertuples(index=False):
        if not math.isnan(_number(row, "fraction")) and math.isnan(_number(row, "diff_mean")):
            cell = _fraction_cell(row)
        else:
            unit = _text(getattr(row, "diff_unit", ""))
            low, high = _number(row, "ci_low"), _number(row, "ci_high")
            effect = (f"{criteria.signed(_number(row, 'diff_mean'))}"
                      + ("" if math.isnan(low) else
                         f" [{criteria.signed(low)}, {criteria.signed(high)}]")
                      + (f" {unit}" if unit else ""))
            cell = f"{_verdict(str(row.verdict))} ({effect})"
        lines.append(_row([str(row.claim), model_name(row.model), condition_name(_condition(
            row.condition)), cell, REASONS.get(_text(row.reason), "—")]))
    return "\n".join(lines)


def checks_markdown(table: pd.DataFrame) -> str:
    """The rows true by construction, one line per (claim, sparsifier): how many rows hold,
    on which models, the share of units: checks of the code, not findings."""
    lines = []
    for (claim, sparsifier), g in table.groupby(["claim", "sparsifier"], sort=False):
        counts = g["verdict"].astype(str).value_counts()
        told = ", ".join(f"{v} {counts[v]}" for v in VERDICTS if v in counts)
        if len(counts) == 1:
            told = f"{counts.index[0]} in {len(g)} of {len(g)} rows"
        else:
            told += f" of {len(g)} rows"
        models = ", ".join(model_name(m) for m in dict.fromkeys(g["model"]))
        units = _span(g["fraction"])
        statement = _text(g["statement"].iloc[0]) or claim
        lines.append(f"- {statement} — {sparsifier_name(sparsifier)}: {told} ({models}"
                     + (f"; {units} of units" if units else "") + ")")
    return "\n".join(lines)


SECTIONS = {"distribution": "Distribution and contraction", "convergence": "Convergence",
            "prediction": "Predicted speed-ups", "time": "Predicted time to accuracy",
            "other": "Other claims", "check": "Checks"}


def section_heading(heading: str | None, section: str) -> str:
    """The markdown heading of a findings section ("### Quick profile: Convergence"; without a
    heading "### Convergence"), whose anchor slug() gives."""
    return f"### {heading}: {SECTIONS[section]}" if heading else f"### {SECTIONS[section]}"


def slug(heading: str) -> str:
    """The anchor a markdown renderer gives a heading: lower case, punctuation dropped,
    spaces as hyphens ("### Quick profile: Checks" -> "quick-profile-checks")."""
    text = re.sub(r"^#+\s*", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def findings_markdown(table: pd.DataFrame, heading: str | None = None) -> str:
    """The findings, each section under its own heading (section_heading): the distribution
    and contraction table, the convergence table, the predictions, and the checks (each only
    where the claims have rows for it)."""
    if len(table) == 0:
        return "_no claims (no runs)_"
    table, derived = with_derived_columns(table)
    parts = [DERIVED_NOTE] if derived else []

    def part(section: str, body: str) -> None:
        parts.append(f"{section_heading(heading, section)}\n\n{body}")

    by = {s: table[table["section"] == s] for s in ("distribution", "convergence",
                                                    "prediction", "check")}
    if len(by["distribution"]):
        part("distribution", "Top-k's u per model and condition (density warm-up and target "
             "density ρ): verdict (share of units meeting the criterion [its 95% block-bootstrap "
             "interval]); runs behind the row; β: median "
             "generalised-normal shape of the snapshot fits (2 = normal, 1 = Laplace).\n\n"
             + distribution_markdown(by["distribution"])
             + ("\n\nCounts in " + criteria.count_band_text() + " (share of units): each "
                "selector on Top-k's u (the recorder runs it on the u Top-k trains on), in "
                "each method's own training, and the tail above Gaussian-k's first "
                "threshold.\n\n" + counts
                if (counts := counts_markdown(by["distribution"])) else ""))
    if len(by["convergence"]):
        part("convergence", "Each method against exact Top-k on the same seeds: difference "
             "method − Top-k of the final held-out metric (points of accuracy, % of "
             "perplexity) with its 95% interval; elements sent relative to Top-k's in the "
             f"target-density phase; {CONVERGENCE_RULES}.\n\n"
             + convergence_markdown(by["convergence"], derived))
    timed = by["prediction"]["claim"].map(is_time_to_accuracy).astype(bool)
    if (~timed).any():
        part("prediction", prediction_markdown(by["prediction"][~timed]))
    if timed.any():
        part("time", time_to_accuracy_markdown(by["prediction"][timed]))
    other = other_rows(table)
    if len(other):
        part("other", "Every other claim (beyond the paper's, or of your own: "
             "docs/development.md), one row per model and condition: its verdict with the "
             "share of units or the effect and interval, and why a row is not decided.\n\n"
             + other_markdown(other))
    if len(by["check"]):
        part("check", "True by construction, or for any vector that is not flat: checks, not "
             "findings.\n\n"
             + checks_markdown(by["check"]))
    return "\n\n".join(parts)


# --------------------------------------------------------------------- the README sentences
def _span(values, fmt: str = "{:.0%}") -> str:
    x = [float(v) for v in values if not pd.isna(v)]
    if not x:
        return ""
    lo, hi = min(x), max(x)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else \
        f"{fmt.format(lo)}–{fmt.format(hi)}"


def findings_prose(table: pd.DataFrame) -> str:
    """The README's findings in words, every number taken from the claims' columns."""
    if len(table) == 0:
        return "_no claims (no runs)_"
    table, derived = with_derived_columns(table)
    dist = table[(table["section"] == "distribution")
                 & (table["condition"].astype(str) != ALL_CONDITIONS)]
    sentences = []

    def share(claim: str, sparsifier: str | None = None) -> str:
        rows = dist[dist["claim"] == claim]
        if sparsifier is not None:
            rows = rows[rows["sparsifier"] == sparsifier]
        return _span(rows["fraction"])

    n_cond = len(dist[["model", "condition"]].drop_duplicates())
    if share("below_paper"):
        sentences.append(
            f"Over {n_cond} (model, condition) pairs on {dist['model'].nunique()} models, Top-k's "
            f"δ stayed below the paper's (1 − k/d)² in {share('below_paper')} of each "
            "condition's units"
            + (f", and at most the Gaussian value in {share('gaussian_value')}"
               if share("gaussian_value") else "")
            + (f"; the convexity condition behind the paper's bound held in "
               f"{share('convexity_condition')}" if share("convexity_condition") else "") + ".")
    if share("gaussian_like"):
        betas = _span(dist.loc[dist["claim"] == "gaussian_like", "gennorm_beta"], "{:.2f}")
        sentences.append(
            f"u met the Gaussian-like criterion (|skew| ≤ {criteria.MAX_ABS_SKEW:g}, |excess "
            f"kurtosis| ≤ {criteria.MAX_ABS_EXCESS_KURTOSIS:g}) in {share('gaussian_like')} of "
            "the units per condition"
            + (f"; the generalised-normal shape β of the snapshot fits had medians {betas} "
               "(2 = normal, 1 = Laplace)" if betas else "") + ".")
    if share("gaussiank_count", "gaussiank-2019"):
        sentences.append(
            "The published Gaussian-k rule (`gaussiank-2019`) selected within "
            f"{criteria.count_band_text()} in {share('gaussiank_count', 'gaussiank-2019')} of "
            "the units per condition.")
    conv = table[table["section"] == "convergence"]
    acc = conv[~conv["claim"].astype(str).str.endswith("_traffic")]
    if len(acc):
        counts = acc["verdict"].value_counts()
        told = ", ".join(f"{counts[v]} {v}" for v in VERDICTS if v in counts)
        seeds = _span(acc["n_seeds"], "{:.0f}")
        failed = int(pd.to_numeric(acc["n_failed_seeds"], errors="coerce").fillna(0).sum())
        # a shortfall is a lower accuracy but a higher perplexity: rank by the signed loss
        metric = acc.get("metric", pd.Series("accuracy", index=acc.index))
        metric = metric.where(metric.notna(), "accuracy").astype(str)
        loss = pd.to_numeric(acc["diff_mean"], errors="coerce") * [
            -1.0 if criteria.higher_is_better(m) else 1.0 for m in metric]
        worst = acc.loc[loss.idxmax()]
        traffic = conv[conv["claim"].astype(str).str.endswith("_traffic")]
        sentences.append(
            f"Against exact Top-k over {seeds} seeds, {len(acc)} (method, condition) "
            f"comparison{'s' if len(acc) != 1 else ''} on {', '.join(model_name(m) for m in dict.fromkeys(acc['model']))}: "
            f"{told}; {failed} method seed(s) failed. The largest shortfall: "
            f"{sparsifier_name(worst['sparsifier'])} ({_condition(worst['condition'])}), "
            f"{_interval(next(worst.to_frame().T.itertuples(index=False)))}. Traffic-matched "
            f"claims: {(traffic['verdict'] == 'holds').sum()} of {len(traffic)} hold, judged "
            "on the elements sent " + ("over the whole run (these claims predate the "
                                       "per-phase traffic)." if derived
                                       else "at the target density."))
    if (table["section"] == "check").any():
        sentences.append("The checks (listed apart, not findings): δ < 1 − k/d, true for any "
                         "vector that is not flat, and the robust `gaussiank`'s count, exactly "
                         "k by construction.")
    predicted = table[table["section"] == "prediction"]
    if len(predicted):
        timed = predicted["claim"].map(is_time_to_accuracy).astype(bool)
        rows = " and ".join(what for what, some in (("speed-up", (~timed).any()),
                                                   ("time-to-accuracy", timed.any())) if some)
        sentences.append(f"The {rows} rows are predictions of the step-time model, not "
                         "measurements" + (" (the steps to the target are measured in the "
                                           "runs)." if timed.any() else "."))
    return " ".join(sentences)


# --------------------------------------------------------------------- the README blocks
def _block(readme: str, start: str, end: str) -> str:
    i, j = readme.find(start), readme.find(end)
    return readme[i + len(start): j] if 0 <= i < j else ""


def findings_block(readme: str, block: str = "claims") -> str:
    """The text between the README's `block` table markers ('' without them)."""
    start, end, _, _ = markers(block)
    return _block(readme, start, end)


_UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def findings_cells(block: str) -> set[tuple[str, str, str]]:
    """The filled cells of the findings tables in `block` (as findings_markdown writes them):
    (the table's first header, the row's label — its cells under LABEL_COLUMNS — , the
    column), "—" cells left out. Two versions of the findings compare by these: a cell in the
    old one and not the new is lost."""
    cells: set[tuple[str, str, str]] = set()
    header: list[str] = []
    for line in block.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            header = []
            continue
        parts = [c.strip() for c in _UNESCAPED_PIPE.split(line)[1:-1]]
        if not header:
            header = parts
        elif not all(set(c) <= {"-", ":"} for c in parts):
            labels = [i for i, h in enumerate(header) if h in LABEL_COLUMNS] or [0]
            label = " · ".join(parts[i] for i in labels if i < len(parts))
            cells.update((header[0], label, column) for i, (column, cell) in
                         enumerate(zip(header, parts)) if i not in labels
                         and cell not in ("", "—"))
    return cells


def width_problems(markdown: str, max_columns: int = MAX_COLUMNS,
                   max_cell: int = MAX_CELL) -> list[str]:
    """Each table row of `markdown` with more than max_columns columns, and each cell longer
    than max_cell characters (as shown: bold marks not counted), one phrase each."""
    problems = []
    for number, line in enumerate(markdown.splitlines(), 1):
        if not line.startswith("|"):
            continue
        cells = [c.strip().replace("**", "") for c in _UNESCAPED_PIPE.split(line)[1:-1]]
        if len(cells) > max_columns:
            problems.append(f"line {number}: {len(cells)} columns")
        problems += [f"line {number}: a {len(c)}-character cell {c!r}" for c in cells
                     if len(c) > max_cell]
    return problems


def _replace(readme: str, start: str, end: str, body: str) -> str:
    i, j = readme.find(start), readme.find(end)
    if i < 0 or j < i:
        raise ValueError(f"the README has no {start} ... {end} block")
    return readme[: i + len(start)] + "\n" + body + "\n" + readme[j:]


def replace_findings(readme: str, table: pd.DataFrame, block: str = "claims") -> str:
    """readme with the text between the `block` table markers replaced by findings_markdown,
    and between its prose markers (where it has them) by findings_prose."""
    start, end, prose_start, prose_end = markers(block)
    text = _replace(readme, start, end, findings_markdown(table, HEADINGS.get(block)))
    if prose_start in text:
        text = _replace(text, prose_start, prose_end, findings_prose(table))
    return text


# --------------------------------------------------------------------- claims.md
VERDICT_MARKS = {"holds": "holds ✅", "fails": "fails ❌", "mixed": "mixed ⚠️",
                 "inconclusive": "inconclusive ❔", "insufficient-data": "insufficient data"}


def claims_markdown(table: pd.DataFrame) -> str:
    """A markdown table: model, dataset (+ substitution), claim, sparsifier, verdict, evidence."""
    if len(table) == 0:
        return "_no claims could be evaluated (no runs)_"
    lines = ["| model | dataset | claim | sparsifier | condition | units | fraction | verdict | "
             "in one sentence | evidence |", "|---|---|---|---|---|---|---|---|---|---|"]
    for row in table.itertuples(index=False):
        sub = row.dataset_substitute if isinstance(row.dataset_substitute, str) else None
        frac = "" if pd.isna(row.fraction) else f"{row.fraction:.2f}"
        sparsifiers = ", ".join(sparsifier_name(s) for s in str(row.sparsifier).split(","))
        args = getattr(row, "model_args", "")
        model = model_name(row.model) + (f" ({args})" if isinstance(args, str) and args else "")
        cells = [model, dataset_name(row.dataset, sub),
                 row.statement or row.claim,
                 sparsifiers, str(getattr(row, "condition", "") or "").replace("nan", ""),
                 str(row.n_units), frac, VERDICT_MARKS.get(row.verdict, row.verdict),
                 verdict_sentence(row), str(row.evidence)]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    rules = table.drop_duplicates("claim")[["claim", "rule"]]
    lines += ["", "Verdict rules:", ""]
    lines += [f"- **{r.claim}**: {r.rule}" for r in rules.itertuples(index=False)]
    return "\n".join(lines)
