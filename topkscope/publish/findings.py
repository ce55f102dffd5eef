"""What the claims say, in tables and sentences — formatted from the claims' fields through the
registry, never recomputed: one sentence per row (claims.md, and the summary `topkscope
claims` prints), and docs/findings.md's tables, generated from claims.csv between marker
comments (`make gallery`, `make findings`):

    <!-- claims-table:start --> ... <!-- claims-table:end -->   a profile's tables

A document may hold more than one profile's tables, each in blocks of its own name (`markers`):
the quick profile's are `claims-*`, the standard profile's `standard-claims-*`.

Which table shows a row is its claim's (the registry's Presentation.table; a row of section
check: the checks), so a claim of one's own appears like the built-in ones: distribution and
contraction (model × condition, one column per claim of that table: Presentation.column),
counts (model × condition × method), convergence (method × condition: paired difference with
its interval, seeds, elements sent at the target density, each verdict), Top-k on
pseudo-gradients (the outer runs' shares, and the trainings compared with their reference),
predicted speed-ups ((model, method and training condition) × network), predicted time to
accuracy, published runs, other claims and the checks. Conditions are said in words
(topkscope.condition.describe); every number comes from a row's fields; a claims table of an
older schema is first brought to the current one (topkscope.claims.migrate). Nothing here
decides a verdict or reads a number out of a row's text.
"""

from __future__ import annotations

import math
import re

import pandas as pd

from topkscope.analysis import criteria
from topkscope.claims.migrate import current, with_current_networks  # noqa: F401  (this API)
from topkscope.claims.phrases import number as plain
from topkscope.claims.registry import Claim, get_claim, registered
from topkscope.claims.verdicts import DECIDED, REASONS, VERDICTS
from topkscope.condition import describe, from_record
from topkscope.plots.titles import dataset_name, model_name, sparsifier_name


def markers(block: str = "claims") -> tuple[str, str]:
    """(start, end) of the table block named `block` ("claims": the quick profile's;
    "standard-claims": the standard profile's)."""
    return f"<!-- {block}-table:start -->", f"<!-- {block}-table:end -->"


README_START, README_END = markers("claims")
# block -> the heading of its findings sections in docs/findings.md ("### Quick: Convergence")
HEADINGS = {"claims": "Quick", "standard-claims": "Standard"}
# docs/findings.md: a table's columns, a cell's characters (a condition said in words with every
# setting, 'ρ = 1/128, after the first 2 exchanges, outer loop: H = 30, averaged step lr 1,
# error decay 0.95, 2-bit values', takes 111)
MAX_COLUMNS, MAX_CELL = 9, 120
DERIVED_NOTE = ("_These claims were written before the structured columns; their sections and "
                "paired differences were derived from their rows, and their conditions are "
                "shown as written._")
# the tables of docs/findings.md, in order: key (Presentation.table) -> heading
TABLES = {"distribution": "Distribution and contraction",
          "counts": "Counts of the approximate selectors",
          "convergence": "Convergence", "outer": "Top-k on pseudo-gradients",
          "prediction": "Predicted speed-ups", "time": "Predicted time to accuracy",
          "published": "Published runs", "other": "Other claims", "check": "Checks"}


# --------------------------------------------------------------------- fields
def _text(value) -> str:
    return value if isinstance(value, str) else ""


def _number(row, name: str) -> float:
    value = getattr(row, name, math.nan) if not isinstance(row, dict) else row.get(name)
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def with_derived_columns(table: pd.DataFrame) -> tuple[pd.DataFrame, bool]:
    """(table, derived): the table in the current schema (topkscope.claims.migrate.current)."""
    return current(table)


def table_of(claim: Claim | None) -> str:
    """The findings table that shows a claim's rows (its Presentation.table)."""
    return claim.show.table if claim is not None else "other"


def row_table(row) -> str:
    """The findings table of one row: its claim's, the checks for a row of section check."""
    if _text(getattr(row, "section", "")) == "check":
        return "check"
    return table_of(get_claim(_text(getattr(row, "claim_key", ""))))


def condition_text(row, **options) -> str:
    """A row's condition in words (topkscope.condition.describe of its typed fields); a row of
    an older table without them: its condition as written."""
    typed = _text(getattr(row, "warmup", "")) or _text(getattr(row, "phase", "")) or \
        math.isfinite(_number(row, "training_density"))
    if not typed:
        return _text(getattr(row, "condition", "")) or "—"
    return describe(from_record(row), **options) or "—"


def _runs(rows) -> int:
    """The distinct runs behind rows (their run_ids), else the largest n_runs."""
    ids = {i for r in rows for i in _text(getattr(r, "run_ids", "")).split(",") if i}
    if ids:
        return len(ids)
    counts = [_number(r, "n_runs") for r in rows]
    return int(max((c for c in counts if math.isfinite(c)), default=0))


# --------------------------------------------------------------------- one sentence per verdict
def verdict_sentence(row) -> str:
    """One plain sentence saying what a claims row's verdict means and why (its cause)."""
    verdict = str(row.verdict)
    cause = _text(getattr(row, "cause", None))
    lead = {"holds": "Holds", "fails": "Fails", "mixed": "Mixed — neither the claim nor its "
            "negation", "inconclusive": "Not decided", "insufficient-data": "Not judged"}
    key = _text(getattr(row, "claim_key", ""))
    if key == "time_to_accuracy":
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


def claims_summary(table: pd.DataFrame) -> str:
    """One plain line per claims row: model and dataset, the statement, the sparsifier and
    condition, the verdict and verdict_sentence, e.g. "FNN-3 on MNIST: delta_emp is below the
    paper's bound (1 - k/d)^2 [Top-k; ρ = 0.001] — holds. Holds: 880 of 880 units (100%)
    meet the criterion." """
    if len(table) == 0:
        return "no claims could be evaluated (no runs)"
    table = current(table)[0]
    lines = []
    for row in table.itertuples(index=False):
        sub = _text(getattr(row, "dataset_substitute", None)) or None
        sparsifiers = ", ".join(sparsifier_name(s) for s in str(row.sparsifier).split(","))
        cond = condition_text(row)
        where = sparsifiers + (f"; {cond}" if cond != "—" else "")
        lines.append(f"{model_name(row.model)} on {dataset_name(row.dataset, sub)}: "
                     f"{row.statement or row.claim} [{where}] — {row.verdict}. "
                     f"{verdict_sentence(row)}")
    return "\n".join(lines)


# --------------------------------------------------------------------- cells
def _verdict(verdict: str) -> str:
    return f"**{verdict}**" if verdict == "fails" else verdict


def _pct(x: float) -> str:
    return f"{x:.1%}" if 0 < x < 0.01 else f"{x:.0%}"


def _fraction_cell(row) -> str:
    """'mixed (75% [58–88%])': the verdict, the share of recorded steps and its interval."""
    frac = _number(row, "fraction")
    low, high = _number(row, "fraction_low"), _number(row, "fraction_high")
    inside = "" if math.isnan(frac) else _pct(frac) + (
        "" if math.isnan(low) else f" [{_pct(low).rstrip('%')}–{_pct(high)}]")
    return _verdict(str(row.verdict)) + (f" ({inside})" if inside else "")


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _header(names: list[str]) -> list[str]:
    return [_row(names), "|" + "---|" * len(names)]


def _claims_of(table_key: str) -> list[Claim]:
    return [c for c in registered() if c.show.table == table_key]


def _signed(x: float) -> str:
    return criteria.signed(x)


def _interval(row) -> str:
    low, high = _number(row, "ci_low"), _number(row, "ci_high")
    metric = _text(row.metric) or "accuracy"
    mean = _signed(_number(row, "diff_mean"))
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


def _ratio_cell(row, column: str) -> str:
    value = _number(row, column)
    return "—" if math.isnan(value) else f"{plain(value)}×"


# --------------------------------------------------------------------- the tables
def distribution_markdown(table: pd.DataFrame) -> str:
    """One row per (model, condition): the runs behind it; per claim of the distribution
    table (its Presentation.column) the verdict and the share of recorded steps meeting its
    criterion with its interval; β: the median generalised-normal shape of the snapshot fits;
    Top-k keeps: (1 − δ)/(k/d), how many times a random k-subset's share of ‖u‖² Top-k keeps."""
    columns = [c for c in _claims_of("distribution")]
    groups: dict[tuple, list] = {}
    for row in table.itertuples(index=False):
        groups.setdefault((str(row.model), condition_text(row)), []).append(row)
    names = ["model", "condition", "runs"]
    for c in columns:
        names.append(c.show.column or c.name)
        if c.name == "gaussian_like":
            names.append("β")
    names.append("Top-k keeps")
    lines = _header(names)
    for (model, cond), rows in groups.items():
        by = {r.claim_key: r for r in rows}
        cells = [model_name(model), cond, str(_runs(rows))]
        for c in columns:
            r = by.get(c.name)
            cells.append(_fraction_cell(r) if r is not None else "—")
            if c.name == "gaussian_like":
                beta = _number(r, "gennorm_beta") if r is not None else math.nan
                cells.append("—" if math.isnan(beta) else f"{beta:.2f}")
        gain = next((_number(r, "energy_gain") for r in rows
                     if math.isfinite(_number(r, "energy_gain"))), math.nan)
        cells.append("—" if math.isnan(gain) else f"{plain(gain)}·k/d")
        lines.append(_row(cells))
    return "\n".join(lines)


def counts_markdown(table: pd.DataFrame) -> str:
    """One row per (model, condition, method) of the count claims (the counts table's
    claims: each selector on Top-k's u, in its own training, with the median count over k),
    and the tail above Gaussian-k's first threshold on Top-k's u of that condition."""
    per_method = [c for c in _claims_of("counts") if c.per_method]
    per_condition = [c for c in _claims_of("counts") if not c.per_method]
    cells: dict[tuple, dict] = {}
    shared: dict[tuple, dict] = {}
    for row in table.itertuples(index=False):
        where = (str(row.model), condition_text(row))
        cell = _fraction_cell(row)
        if not math.isnan(_number(row, "count_over_k")):
            cell += f", median {plain(_number(row, 'count_over_k'))}·k"
        if any(row.claim_key == c.name for c in per_condition):
            shared.setdefault(where, {})[row.claim_key] = cell
        else:
            cells.setdefault((*where, str(row.sparsifier)), {})[row.claim_key] = cell
    lines = _header(["model", "condition", "method", *(c.show.column for c in per_method),
                     *(c.show.column for c in per_condition)])
    for (model, cond, method), by in cells.items():
        lines.append(_row([model_name(model), cond, sparsifier_name(method),
                           *(by.get(c.name, "—") for c in per_method),
                           *(shared.get((model, cond), {}).get(c.name, "—")
                             for c in per_condition)]))
    return "\n".join(lines)


CONVERGENCE_RULES = (
    "trains as well as Top-k holds when the interval lies on the good side of the margin (above "
    "−1 point of accuracy, below +3% of perplexity), fails on the other side, else is "
    "inconclusive; traffic-matched holds when it trains as well and sends at most 4/3 of "
    "Top-k's elements at the target density on every seed, fails when it does not train as "
    "well or every seed sends more; each row's cause is in claims.csv")


def convergence_markdown(table: pd.DataFrame) -> str:
    """One row per (model, method, condition): the paired difference with its 95% interval,
    the seeds (failed ones counted), the elements sent at the target density relative to
    Top-k's, and each claim's verdict (the convergence table's claims, their columns); the
    causes a row's cells do not show are numbered notes below it."""
    claims = _claims_of("convergence")
    pairs: dict[tuple, dict] = {}
    for row in table.itertuples(index=False):
        pairs.setdefault((str(row.model), str(row.sparsifier), condition_text(row)),
                         {})[row.claim_key] = row
    lines = _header(["model", "method", "condition", "difference [95% interval]", "seeds",
                     "sent vs Top-k (target ρ)", "whole run vs Top-k without warm-up",
                     *(c.show.column for c in claims)])
    notes: list[str] = []
    for (model, method, cond), by in pairs.items():
        first = next(iter(by.values()))
        verdicts = []
        for c in claims:
            r = by.get(c.name)
            if r is None:
                verdicts.append("—")
                continue
            cell = _verdict(str(r.verdict))
            if c.name == "traffic" and str(r.verdict) not in ("holds", "fails"):
                notes.append(f"{model_name(model)}, {sparsifier_name(method)}, {cond}: "
                             f"{_text(r.cause)}")
                cell += f" (note {len(notes)})"
            verdicts.append(cell)
        target = _number(first, "traffic_target")
        lines.append(_row([model_name(model), sparsifier_name(method), cond, _interval(first),
                           _seeds(first), "—" if math.isnan(target) else f"{plain(target)}×",
                           _ratio_cell(first, "traffic_vs_plain_topk"), *verdicts]))
    text = "\n".join(lines)
    if notes:
        text += "\n\n" + "\n".join(f"{i}. {n}" for i, n in enumerate(notes, 1))
    return text


def outer_markdown(table: pd.DataFrame) -> str:
    """The pseudo-gradients' own claims: the shares on the outer u (chunk-wise against global
    Top-k, quantization), one row per (model, condition); then the trainings compared, one row
    per (experiment, training, reference) with the difference, its interval, the seeds and
    the bytes sent relative to the reference's."""
    shares = table[table["fraction"].notna()]
    compared = table[table["fraction"].isna()]
    parts = []
    if len(shares):
        claims = [c for c in _claims_of("outer") if c.name in set(shares["claim_key"])]
        groups: dict[tuple, dict] = {}
        for row in shares.itertuples(index=False):
            groups.setdefault((str(row.model), condition_text(row)), {})[row.claim_key] = row
        lines = _header(["model", "condition", *(c.show.column for c in claims),
                         "median effect"])
        for (model, cond), by in groups.items():
            # the column says "median": the unit without its own "(median)"
            effects = [f"{plain(_number(r, 'diff_mean'))} "
                       f"{_text(r.diff_unit).removesuffix(' (median)')}"
                       for r in by.values() if math.isfinite(_number(r, "diff_mean"))]
            lines.append(_row([model_name(model), cond,
                               *(_fraction_cell(by[c.name]) if c.name in by else "—"
                                 for c in claims), "; ".join(effects) or "—"]))
        parts.append("\n".join(lines))
    if len(compared):
        lines = _header(["model", "experiment", "training", "against", "difference [95% "
                         "interval]", "seeds", "bytes vs the reference", "verdict"])
        for row in compared.itertuples(index=False):
            lines.append(_row([model_name(row.model), _text(row.experiment) or "—",
                               str(row.sparsifier), _text(row.reference) or "—",
                               _interval(row), _seeds(row), _ratio_cell(row, "bytes_ratio"),
                               _verdict(str(row.verdict))]))
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _variants(table: pd.DataFrame) -> dict[int, str]:
    """Row position -> the method's name, with its training condition in brackets where the
    table has the method under several training conditions."""
    conditions = table["training_condition"].map(_text)
    several = conditions.groupby(table["sparsifier"]).nunique() > 1
    words = [describe(from_record(r)) if _text(c) else "" for (_, r), c in
             zip(table.iterrows(), conditions)]
    return {i: sparsifier_name(str(m)) + (f" [{w}]" if several[m] and w else "")
            for i, (m, w) in enumerate(zip(table["sparsifier"], words))}


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
            number = "—" if math.isnan(value) else f"{_signed(value)} ms"
        else:
            value = _number(row, "breakeven_ms")
            number = ("—" if math.isnan(value) else
                      f"< {plain(value)} ms" if value > 0 else "never")
    else:
        low, high = ((_number(row, "speedup_topk_low"), _number(row, "speedup_topk_high"))
                     if baseline == sparsifier_name("topk") else
                     (_number(row, "speedup_low"), _number(row, "speedup_high")))
        number = ("—" if math.isnan(low) else f"{plain(low)}×" if plain(low) == plain(high)
                  else f"{plain(low)}–{plain(high)}×")
    return f"{_mark(row.verdict)} {number}"


def network_name(name: str) -> str:
    """A network preset as people write it ('10gbe-fit' -> '10 GbE (fitted)')."""
    from topkscope.perf.networks import display_name

    return display_name(name)


def prediction_tables(table: pd.DataFrame) -> list[tuple[str, str]]:
    """(baseline, markdown table) per baseline of the speed-up rows: one row per (model,
    method and training condition), one column per network, each cell the verdict's mark and
    one number (_versus)."""
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
        lines = _header(["model", "method", *(network_name(n) for n in networks)])
        lines += [_row([*label, *(by.get(n, "—") for n in networks)])
                  for label, by in cells.items()]
        out.append((baseline, "\n".join(lines)))
    return out


def prediction_markdown(table: pd.DataFrame) -> str:
    """The predicted speed-ups: the rule, the inputs and the model's error stated once, then
    one table per baseline (prediction_tables)."""
    if "network" not in table or table["network"].map(_text).eq("").all():
        return ("_These claims predate the structured prediction columns (network, "
                "baselines); regenerate them (`make reproduce-figures`) to list the predicted "
                "speed-ups here._")
    inputs = "; ".join(sorted({str(v) for v in table.get("inputs", pd.Series()).dropna()
                               if str(v)}))
    errors = sorted({f"±{e:.1%}" for e in pd.to_numeric(
        table.get("model_error", pd.Series(dtype=float)), errors="coerce").dropna()})
    sparsifiers = ", ".join(sparsifier_name(s) for s in dict.fromkeys(table["sparsifier"]))
    breakeven = (table["selection_basis"].map(_text) == BREAKEVEN).any()
    intro = (f"Predicted, not measured — the step-time speed-up of {sparsifiers} at P = 16 "
             "over each baseline, per network (10 GbE and 100 Gb InfiniBand fitted on "
             "published measurements, the others line rates): the verdict as a mark ("
             + MARKS_TEXT + ") and one number: the predicted speed-up, or, "
             + ("where the selection times were another device's than the compute's, the "
                "break-even selection time — the longest selection that still beats a dense "
                "baseline (< ms; never: slower even with free selection), or the most it may "
                "exceed Top-k's selection (± ms)" if breakeven else
                "judged on break-even, the break-even selection time")
             + (f"; inputs: {inputs}" if inputs else "")
             + (f"; the model's validated error {', '.join(errors)}" if errors else "")
             + "; the rule and every input are in each claims row (rule, condition); see "
               "[scaling](scaling.md).")
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
        number = f"{plain(mean)}×" + (f" ({plain(low)}–{plain(high)})"
                                      if plain(low) != plain(high) else "")
        if not math.isnan(never) and never:
            number += f", never on {int(never)}/{int(n)}"
    else:
        number = REASONS.get(_text(row.reason), _text(row.cause)) or "—"
    return f"{_mark(row.verdict)} {prefix}{number}"


def time_to_accuracy_markdown(table: pd.DataFrame) -> str:
    """One row per (model, method, training condition), one column per network: the verdict
    of reaching the target sooner than Top-k as a mark and the speed-up to the target (the
    seeds' range) or the seeds that never reached it; the target and the seeds beside."""
    table = with_current_networks(table)
    networks = list(dict.fromkeys(table["network"].astype(str)))
    cells: dict[tuple, dict] = {}
    for row in table.itertuples(index=False):
        label = (model_name(row.model), sparsifier_name(str(row.sparsifier)),
                 condition_text(row), _target(row), _seeds(row))
        cells.setdefault(label, {})[str(row.network)] = _time_cell(row)
    lines = _header(["model", "method", "condition", "target", "seeds",
                     *(network_name(n) for n in networks)])
    for label, by in cells.items():
        lines.append(_row([*label, *(by.get(n, "—") for n in networks)]))
    inputs = "; ".join(sorted({str(v) for v in table.get("inputs", pd.Series()).dropna()
                               if str(v)}))
    uncounted = (table["selection_basis"].map(_text) == NOT_COUNTED).any()
    intro = ("Predicted from the measured convergence — the wall-clock each method needs at "
             "P = 16 to reach the target (Top-k's final metric of the same seed and condition "
             "less the claims' margin) against Top-k's, per network: the verdict as a "
             f"mark ({MARKS_TEXT}) and the speed-up to the target over Top-k (mean, the "
             "seeds' range), or the seeds that never reached it"
             + ("; ? where the selection was not counted (the selection times were another "
                "device's than the compute's): its selection time on the compute's device "
                "decides" if uncounted else "")
             + (f"; inputs: {inputs}" if inputs else "") + "; see [scaling](scaling.md).")
    return intro + "\n\n" + "\n".join(lines)


def other_markdown(table: pd.DataFrame) -> str:
    """One row per (claim, model, condition): the statement, the verdict cell (a share with its
    interval, or the effect with its interval and unit) and the reason a row is not decided."""
    lines = _header(["claim", "model", "condition", "verdict", "not decided because"])
    for row in table.itertuples(index=False):
        if math.isnan(_number(row, "diff_mean")):
            cell = _fraction_cell(row)
        else:
            unit = _text(getattr(row, "diff_unit", ""))
            low, high = _number(row, "ci_low"), _number(row, "ci_high")
            effect = (f"{_signed(_number(row, 'diff_mean'))}"
                      + ("" if math.isnan(low) else f" [{_signed(low)}, {_signed(high)}]")
                      + (f" {unit}" if unit else ""))
            cell = f"{_verdict(str(row.verdict))} ({effect})"
        lines.append(_row([str(row.claim), model_name(row.model), condition_text(row), cell,
                           REASONS.get(_text(row.reason), "—")]))
    return "\n".join(lines)


def published_markdown(table: pd.DataFrame) -> str:
    """One row per published row: claim, model, the setting in words, verdict, why."""
    lines = _header(["claim", "model", "setting", "verdict", "why"])
    for row in table.itertuples(index=False):
        lines.append(_row([str(row.claim), model_name(row.model),
                           _text(row.condition).removeprefix("published: ") or "—",
                           _verdict(str(row.verdict)),
                           REASONS.get(_text(row.reason), "") or _text(row.cause) or "—"]))
    return "\n".join(lines)


def checks_markdown(table: pd.DataFrame) -> str:
    """The rows true by construction, one line per (claim, sparsifier): how many rows hold,
    on which models, the share of recorded steps: checks of the code, not findings."""
    lines = []
    for (claim, sparsifier), g in table.groupby(["claim", "sparsifier"], sort=False):
        counts = g["verdict"].astype(str).value_counts()
        told = ", ".join(f"{v} {counts[v]}" for v in VERDICTS if v in counts)
        if len(counts) == 1:
            told = f"{counts.index[0]} in {len(g)} of {len(g)} rows"
        else:
            told += f" of {len(g)} rows"
        models = ", ".join(model_name(m) for m in dict.fromkeys(g["model"]))
        shares = [f for f in pd.to_numeric(g["fraction"], errors="coerce").dropna()]
        units = (_pct(min(shares)) if _pct(min(shares)) == _pct(max(shares))
                 else f"{_pct(min(shares))}–{_pct(max(shares))}") if shares else ""
        statement = _text(g["statement"].iloc[0]) or claim
        lines.append(f"- {statement} — {sparsifier_name(sparsifier)}: {told} ({models}"
                     + (f"; {units} of recorded steps" if units else "") + ")")
    return "\n".join(lines)


INTROS = {
    "distribution": "Top-k's u per model and condition: verdict (share of recorded steps "
                    "meeting the criterion [its 95% block-bootstrap interval]); runs behind the "
                    "row; β: median generalised-normal shape of the snapshot fits (2 = normal, "
                    "1 = Laplace); Top-k keeps: (1 − δ)/(k/d), the share of ‖u‖² Top-k keeps "
                    "over the k/d a random k-subset keeps.",
    "counts": f"Counts in {criteria.count_band_text()} (share of steps): each selector on "
              "Top-k's u (the recorder runs it on the u Top-k trains on), in each method's own "
              "training, and the tail above Gaussian-k's first threshold.",
    "convergence": "Each method against exact Top-k on the same seeds: difference method − "
                   "Top-k of the final held-out metric (points of accuracy, % of perplexity) "
                   "with its 95% interval; elements sent relative to Top-k's in the "
                   f"target-density phase; {CONVERGENCE_RULES}.",
    "outer": "DiLoCo-style training: the pseudo-gradient's own claims (share of recorded "
             "exchanges), then each training against its reference on the same seeds.",
    "published": "Runs imported from published logs (no seed published: never paired).",
    "other": "Every other claim (beyond the paper's, or of your own: "
             "[development](development.md)), one row per model and condition: its verdict "
             "with the share of recorded steps or the effect and interval, and why a row is "
             "not decided.",
    "check": "True by construction, or for any vector that is not flat: checks, not findings.",
}
RENDER = {"distribution": distribution_markdown, "counts": counts_markdown,
          "convergence": convergence_markdown, "outer": outer_markdown,
          "prediction": prediction_markdown, "time": time_to_accuracy_markdown,
          "published": published_markdown, "other": other_markdown, "check": checks_markdown}


def section_heading(heading: str | None, section: str) -> str:
    """The markdown heading of a findings table ("### Quick: Convergence"; without a heading
    "### Convergence"), whose anchor slug() gives."""
    return f"### {heading}: {TABLES[section]}" if heading else f"### {TABLES[section]}"


def slug(heading: str) -> str:
    """The anchor a markdown renderer gives a heading: lower case, punctuation dropped,
    spaces as hyphens ("### Quick profile: Checks" -> "quick-profile-checks")."""
    text = re.sub(r"^#+\s*", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def split_tables(table: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The rows of each findings table (row_table), in TABLES' order, those with rows."""
    keys = [row_table(r) for r in table.itertuples(index=False)]
    found = pd.Series(keys, index=table.index, dtype=object)
    return {k: table[found == k] for k in TABLES if (found == k).any()}


# the sections (claims.row.SECTIONS, each in one group) whose rows rest on this project's own
# runs (not predictions, published logs or checks), and how a reader names each group of rows
# in decided_markdown
MEASURED_SECTIONS = ("distribution", "convergence", "explanation")
SECTION_GROUPS = (("measured claims", MEASURED_SECTIONS), ("predictions", ("prediction",)),
                  ("published runs", ("published",)), ("checks", ("check",)))


def decided_markdown(table: pd.DataFrame) -> str:
    """How much of a claims table is decided: per group of sections (SECTION_GROUPS), its rows,
    how many are decided (holds, fails or mixed) and the undecided ones by reason, most
    first; measured claims also without the rows that measured nothing (no unit: the
    profile does not record that input in that condition). Counted from the rows' verdict,
    reason, section and n_units fields."""
    lines = []
    for name, sections in SECTION_GROUPS:
        rows = table[table["section"].astype(str).isin(sections)]
        if rows.empty:
            continue
        verdicts = rows["verdict"].astype(str)
        undecided = rows[~verdicts.isin(DECIDED)]
        share = len(undecided) / len(rows)
        text = (f"- {name}: {len(rows)} row{'s' * (len(rows) != 1)}, "
                f"{len(rows) - len(undecided)} decided, "
                f"{len(undecided)} undecided ({share:.0%})")
        if len(undecided):
            reasons = undecided["reason"].map(_text).replace("", "no reason given")
            order = list(REASONS)  # ties in REASONS' order
            counts = sorted(reasons.value_counts().items(), key=lambda rn: (
                -rn[1], order.index(rn[0]) if rn[0] in order else len(order)))
            text += ": " + ", ".join(f"{REASONS.get(r, r)} {n}" for r, n in counts)
        if name == "measured claims" and "n_units" in rows:
            units = pd.to_numeric(rows["n_units"], errors="coerce")
            empty = int((units == 0).sum())
            if empty:
                left = rows[units != 0]
                open_ = int((~left["verdict"].astype(str).isin(DECIDED)).sum())
                text += (f"; without the {empty} row{'s' * (empty != 1)} that measured "
                         f"nothing, {open_} of "
                         f"{len(left)} undecided ({open_ / len(left):.0%})")
        lines.append(text)
    return "\n".join(lines)


def findings_markdown(table: pd.DataFrame, heading: str | None = None) -> str:
    """The findings: how much is decided (decided_markdown), then each table under its own
    heading (section_heading): one per findings table with rows (split_tables)."""
    if len(table) == 0:
        return "_no claims (no runs)_"
    table, derived = with_derived_columns(table)
    parts = [DERIVED_NOTE] if derived else []
    decided = decided_markdown(table)
    if decided:
        parts.append("How much of this profile's table is decided (a row is undecided with "
                     "its reason: the claims table's `reason`):\n\n" + decided)
    for key, rows in split_tables(table).items():
        intro = INTROS.get(key, "")
        body = RENDER[key](rows)
        parts.append(f"{section_heading(heading, key)}\n\n" + (f"{intro}\n\n" if intro else "")
                     + body)
    return "\n\n".join(parts)


# --------------------------------------------------------------------- the blocks
MAX_LINE = 160  # a markdown line of the README's first screen and the answers: no longer


def wrapped(line: str, indent: str = "    ") -> list[str]:
    """line as markdown lines of at most MAX_LINE characters, continuation lines indented
    (one list item); words and links are never split."""
    import textwrap

    return textwrap.wrap(line, width=MAX_LINE, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False)


def replace_block(text: str, start: str, end: str, body: str) -> str:
    """text with the lines between its `start` and `end` markers replaced by body."""
    i, j = text.find(start), text.find(end)
    if i < 0 or j < i:
        raise ValueError(f"no {start} ... {end} block")
    return text[: i + len(start)] + "\n" + body + "\n" + text[j:]



def findings_block(text: str, block: str = "claims") -> str:
    """The text between the `block` table markers ('' without them)."""
    start, end = markers(block)
    i, j = text.find(start), text.find(end)
    return text[i + len(start): j] if 0 <= i < j else ""


_UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


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


def replace_findings(text: str, table: pd.DataFrame, block: str = "claims") -> str:
    """text with the lines between its `block` table markers replaced by findings_markdown."""
    start, end = markers(block)
    return replace_block(text, start, end, findings_markdown(table, HEADINGS.get(block)))


def lost_rows(old: pd.DataFrame, new: pd.DataFrame) -> list[str]:
    """The rows of claims table `old` that `new` lacks, as 'claim · model · sparsifier ·
    condition' (publishing new would drop them); both brought to the current schema."""
    def keys(table: pd.DataFrame) -> set[tuple]:
        table = current(table)[0]
        return set(zip(table["claim"].astype(str), table["model"].astype(str),
                       table["sparsifier"].astype(str), table["condition"].astype(str)))

    return [" · ".join(k) for k in sorted(keys(old) - keys(new))]


# --------------------------------------------------------------------- claims.md
VERDICT_MARKS = {"holds": "holds ✅", "fails": "fails ❌", "mixed": "mixed ⚠️",
                 "inconclusive": "inconclusive ❔", "insufficient-data": "insufficient data"}


def claims_markdown(table: pd.DataFrame) -> str:
    """A markdown table: model, dataset (+ substitution), claim, sparsifier, condition in
    words, verdict, the verdict's sentence, evidence; the verdict rules below."""
    if len(table) == 0:
        return "_no claims could be evaluated (no runs)_"
    table = current(table)[0]
    lines = ["| model | dataset | claim | sparsifier | condition | units | fraction | verdict | "
             "in one sentence | evidence |", "|---|---|---|---|---|---|---|---|---|---|"]
    for row in table.itertuples(index=False):
        sub = _text(row.dataset_substitute) or None
        frac = "" if pd.isna(row.fraction) else f"{row.fraction:.2f}"
        sparsifiers = ", ".join(sparsifier_name(s) for s in str(row.sparsifier).split(","))
        args = _text(getattr(row, "model_args", ""))
        model = model_name(row.model) + (f" ({args})" if args else "")
        units = "" if pd.isna(row.n_units) else str(int(row.n_units))
        cells = [model, dataset_name(row.dataset, sub), row.statement or row.claim,
                 sparsifiers, condition_text(row), units, frac,
                 VERDICT_MARKS.get(row.verdict, row.verdict), verdict_sentence(row),
                 str(row.evidence)]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    rules = table.drop_duplicates("claim")[["claim", "rule"]]
    lines += ["", "Verdict rules:", ""]
    lines += [f"- **{r.claim}**: {r.rule}" for r in rules.itertuples(index=False)]
    return "\n".join(lines)
