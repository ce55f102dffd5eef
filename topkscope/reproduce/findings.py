"""What a claims verdict says, in words: one sentence per row (claims.md, and the summary
`topkscope claims` prints) and the README's findings table, generated from claims.csv between
two marker comments (`make gallery`).
"""

from __future__ import annotations

import re

import pandas as pd

from topkscope.plots.frames import text_column
from topkscope.plots.titles import dataset_name, model_name, sparsifier_name


# --------------------------------------------------------------------- one sentence per verdict
def _interval(row) -> str:
    unit = "%" if "perplexity" in str(row.evidence) else " points"
    return f"[{row.ci_low:+.2f}, {row.ci_high:+.2f}]{unit}"


_TIME_SENTENCE = {"holds": "Predicted to reach the target sooner than Top-k",
                  "fails": "Predicted not to reach the target sooner than Top-k",
                  "inconclusive": "Not decided", "insufficient-data": "Not judged"}
_BREAKEVEN_SENTENCE = {
    "fails": "Predicted slower than a baseline even if its selection cost nothing",
    "inconclusive": "Decided by its selection time on the compute's device, which was not "
                    "measured (break-even selection times)"}


def _is_time_to_accuracy(claim) -> bool:
    from topkscope.perf.time_to_accuracy import CLAIM_SUFFIX

    return str(claim).endswith(CLAIM_SUFFIX)


def _is_breakeven(row) -> bool:
    from topkscope.perf.report import BREAKEVEN_EVIDENCE

    return str(row.evidence).startswith(BREAKEVEN_EVIDENCE)


def verdict_sentence(row) -> str:
    """One plain sentence saying what a claims row's verdict means (its numbers included)."""
    claim, verdict = str(row.claim), str(row.verdict)
    n_seeds = getattr(row, "n_seeds", float("nan"))
    if _is_time_to_accuracy(claim):
        return f"{_TIME_SENTENCE.get(verdict, 'Not judged')}: {row.cause}."
    if "_speedup_p" in claim and _is_breakeven(row) and verdict in _BREAKEVEN_SENTENCE:
        return f"{_BREAKEVEN_SENTENCE[verdict]}: {row.cause}."
    if claim.endswith("_accuracy") and claim != "gaussiank_count":
        if verdict == "insufficient-data":
            have = 0 if pd.isna(n_seeds) else int(n_seeds)
            return f"Not judged: {have} paired seed(s) of this method and Top-k, 3 are needed."
        text = {"holds": "matched Top-k within the margin: the whole 95% interval of the "
                         "paired difference, {ci}, lies on the good side of the limit",
                "fails": "fell short of Top-k by more than the margin: the whole 95% interval "
                         "of the paired difference, {ci}, lies beyond the limit",
                "inconclusive": "cannot be told apart from the margin: the 95% interval of "
                                "the paired difference, {ci}, contains the limit"}[verdict]
        return f"{row.sparsifier} {text.format(ci=_interval(row))}."
    if claim.endswith("_traffic"):
        ratio = getattr(row, "traffic_ratio", float("nan"))
        sent = "" if pd.isna(ratio) else f" and sent {ratio:.2f}x Top-k's elements"
        return {"holds": f"{row.sparsifier} matched Top-k's accuracy{sent} (at most 4/3).",
                "fails": f"{row.sparsifier} either missed Top-k's accuracy or sent more than "
                         f"4/3 of its elements on every seed{sent.replace(' and', ':')}.",
                "inconclusive": f"Not decided: the accuracy interval or the seeds' traffic "
                                f"ratios straddle the limits{sent.replace(' and', ';')}.",
                }.get(verdict, "Not judged: fewer than 3 paired seeds.")
    if "_speedup_p" in claim and verdict in ("holds", "fails", "inconclusive"):
        speedups = ", ".join(f"{value}x over {name}"
                             for name, value in _SPEEDUPS.findall(
                                 str(row.evidence).split(" (validated")[0]))
        return {"holds": f"Predicted faster than every baseline by more than the model's "
                         f"validated error ({speedups}).",
                "fails": f"Predicted slower than a baseline by more than the model's validated "
                         f"error ({speedups}).",
                "inconclusive": f"Within the model's validated error of a baseline: the model "
                                f"cannot tell them apart ({speedups})."}[verdict]
    units = int(row.n_units) if not pd.isna(row.n_units) else 0
    share = "" if pd.isna(row.fraction) else f" ({row.fraction:.0%} of {units} units)"
    return {"holds": f"The criterion held almost everywhere{share}.",
            "fails": f"The criterion almost never held{share}.",
            "mixed": f"The criterion held sometimes{share}: neither claim nor its negation.",
            }.get(verdict, f"Not judged: {units} unit(s) measured, at least 3 are needed.")


def claims_summary(table: pd.DataFrame) -> str:
    """One plain line per claims row: model and dataset, the statement, the sparsifier(s) and
    condition, the verdict and verdict_sentence, e.g. "FNN-3 on MNIST: delta_emp is below the
    paper's bound (1 - k/d)^2 [Top-k] — holds. The criterion held almost everywhere (100% of
    12 units)." """
    if len(table) == 0:
        return "no claims could be evaluated (no runs)"
    lines = []
    for row in table.itertuples(index=False):
        sub = getattr(row, "dataset_substitute", None)
        sub = sub if isinstance(sub, str) and sub else None
        sparsifiers = ", ".join(sparsifier_name(s) for s in str(row.sparsifier).split(","))
        cond = getattr(row, "condition", None)
        where = sparsifiers + (f"; {cond}" if isinstance(cond, str) and cond else "")
        lines.append(f"{model_name(row.model)} on {dataset_name(row.dataset, sub)}: "
                     f"{row.statement or row.claim} [{where}] — {row.verdict}. "
                     f"{verdict_sentence(row)}")
    return "\n".join(lines)


# --------------------------------------------------------------------- the README findings table
README_START = "<!-- claims-table:start -->"
README_END = "<!-- claims-table:end -->"


def _cell(row) -> str:
    verdict = str(row.verdict)
    text = f"**{verdict}**" if verdict == "fails" else verdict
    ci_low = getattr(row, "ci_low", float("nan"))
    if not pd.isna(ci_low):
        return f"{text} {_interval(row)}"
    if not pd.isna(row.fraction):
        return f"{text} ({row.fraction:.0%})"
    return text


def _is_prediction(table: pd.DataFrame) -> pd.Series:
    """Rows of the predicted-scaling claims (their condition says they are predictions)."""
    cond = text_column(table, "condition")
    return cond.str.startswith("prediction")


def _measured_markdown(table: pd.DataFrame) -> str:
    models = list(dict.fromkeys(table["model"]))
    rows: dict[tuple, dict] = {}
    for row in table.itertuples(index=False):
        cond = row.condition if isinstance(row.condition, str) and row.condition else ""
        label = str(row.statement or row.claim)
        if "," not in str(row.sparsifier) and str(row.sparsifier) not in label:
            label += f" — {sparsifier_name(str(row.sparsifier))}"
        if cond:
            label += f" ({cond})"
        rows.setdefault((label,), {})[row.model] = _cell(row)
    lines = ["| claim | " + " | ".join(models) + " |", "|---|" + "---|" * len(models)]
    for (label,), cells in rows.items():
        line = [label.replace("|", "\\|")] + [cells.get(m, "—") for m in models]
        lines.append("| " + " | ".join(line) + " |")
    return "\n".join(lines)


_SPEEDUPS = re.compile(r"over ([^,;()]+?) ([0-9.]+)x")
_INPUTS = re.compile(r"^prediction, not a measurement: (GPU inputs from published measurements|"
                     r"this machine|user);")
_TRAINING = re.compile(r"; training condition ([^;]+)")
_BELOW = re.compile(r"below (.+?) ms$")
_SOONER = re.compile(r"([0-9.]+)x \(seeds")
_NEVER = re.compile(r"never reaches the target on (\d+) of (\d+) seeds")


def _network(row) -> str:
    net = re.search(r"\(([^()]+)\)$", str(row.statement))
    return net.group(1) if net else "?"


def _variant(row) -> str:
    """The row's method and the training condition of its counts, in words."""
    found = _TRAINING.search(str(row.condition))
    return sparsifier_name(str(row.sparsifier)) + (f" [{found.group(1)}]" if found else "")


def _breakeven_cell(row) -> str:
    """'inconclusive (select < 161 / Top-k's + 0 ms)': the break-even selection times."""
    from topkscope.perf.report import BREAKEVEN_EVIDENCE

    part = str(row.evidence).split("; with free selection")[0].split(": ", 1)[-1]
    limits = []
    for piece in part.split("; "):
        found = _BELOW.search(piece)
        limits.append("never" if "even with free selection" in piece or not found
                      else found.group(1))
    text = f"**{row.verdict}**" if row.verdict == "fails" else str(row.verdict)
    return f"{text} ({BREAKEVEN_EVIDENCE.split()[0]}: select < {' / '.join(limits)} ms)"


def _prediction_markdown(table: pd.DataFrame) -> str:
    """One row per (model, claim[, method]), one column per network preset: the verdict and the
    predicted speed-ups over the claim's baselines, or the break-even selection times where no
    selection time of the compute's device was measured (the inputs are in each row's
    condition). The method and its training condition name the row when the table has
    several."""
    networks: list[str] = []
    cells: dict[tuple[str, str], dict[str, str]] = {}
    several = len({_variant(r) for r in table.itertuples(index=False)}) > 1
    for row in table.itertuples(index=False):
        net = _network(row)
        networks += [net] if net not in networks else []
        found = _SPEEDUPS.findall(str(row.evidence).split(" (validated")[0])
        versus = ", ".join(name for name, _ in found) or str(row.claim)
        if _is_breakeven(row):
            text = _breakeven_cell(row)
        else:
            text = f"**{row.verdict}**" if row.verdict == "fails" else str(row.verdict)
            if found:
                text += " (" + " / ".join(f"{value}×" for _, value in found) + ")"
        label = f"over {versus}" + (f" — {_variant(row)}" if several else "")
        cells.setdefault((str(row.model), label), {})[net] = text
    return _by_network("speed-up", networks, cells)


def _by_network(second: str, networks: list[str], cells: dict[tuple[str, str], dict]) -> str:
    """A markdown table: model, `second`, one column per network; "—" where a cell is empty."""
    lines = [f"| model | {second} | " + " | ".join(networks) + " |",
             "|---|---|" + "---|" * len(networks)]
    for (model, label), by_net in cells.items():
        lines.append("| " + " | ".join([model, label] + [by_net.get(n, "—") for n in networks])
                     + " |")
    return "\n".join(lines)


def _time_to_accuracy_markdown(table: pd.DataFrame) -> str:
    """One row per (model, method [condition]), one column per network: the verdict of
    reaching the accuracy target sooner than Top-k, with the mean speed-up to it or how many
    seeds never reached it."""
    networks: list[str] = []
    cells: dict[tuple[str, str], dict[str, str]] = {}
    for row in table.itertuples(index=False):
        net = _network(row)
        networks += [net] if net not in networks else []
        text = f"**{row.verdict}**" if row.verdict == "fails" else str(row.verdict)
        never, sooner = _NEVER.search(str(row.cause)), _SOONER.search(str(row.cause))
        if never:
            text += f" (never on {never.group(1)}/{never.group(2)} seeds)"
        elif sooner:
            text += f" ({sooner.group(1)}×)"
        cells.setdefault((str(row.model), _variant(row)), {})[net] = text
    return _by_network("method", networks, cells)


def _prediction_intro(table: pd.DataFrame) -> str:
    inputs = sorted({m.group(1) for m in map(_INPUTS.match, table["condition"].astype(str)) if m})
    sparsifiers = ", ".join(sparsifier_name(s) for s in dict.fromkeys(table["sparsifier"]))
    named = f"inputs: {'; '.join(inputs)}; " if inputs else ""
    return (f"Predicted, not measured — the step-time speed-up of {sparsifiers} at P = 16 over "
            "each baseline: verdict (predicted speed-ups) per network preset; "
            f"{named}the rule and every input are in each claims row (rule, condition); see "
            "docs/scaling.md.")


def findings_markdown(table: pd.DataFrame) -> str:
    """The README's findings: the measured claims as one row per (claim, sparsifier,
    condition) and one column per model, each cell the verdict with its share of units or its
    95% interval; then the predicted P = 16 speed-up claims as a (model, baseline) x network
    table."""
    if len(table) == 0:
        return "_no claims (no runs)_"
    table = table.copy()
    if "condition" not in table:
        table["condition"] = float("nan")
    predicted = _is_prediction(table)
    timed = predicted & table["claim"].map(_is_time_to_accuracy)
    speedups = predicted & ~timed
    parts = [_measured_markdown(table[~predicted])] if (~predicted).any() else []
    if speedups.any():
        parts.append(_prediction_intro(table[speedups]) + "\n\n"
                     + _prediction_markdown(table[speedups]))
    if timed.any():
        parts.append("Predicted from the measured convergence — reaching the accuracy target "
                     "(Top-k's final accuracy of the same seed less the claims' margin) sooner "
                     "than Top-k at P = 16: verdict (mean speed-up to the target, or the seeds "
                     "that never reached it) per network; see docs/scaling.md.\n\n"
                     + _time_to_accuracy_markdown(table[timed]))
    return "\n\n".join(parts)


def findings_block(readme: str) -> str:
    """The text between the README's claims-table markers ('' without them)."""
    start, end = readme.find(README_START), readme.find(README_END)
    return readme[start + len(README_START): end] if 0 <= start < end else ""


_UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def findings_cells(block: str) -> set[tuple[str, str, str]]:
    """The filled cells of the findings tables in `block` (as findings_markdown writes them):
    (the table's first header, the row's label, the column), "—" cells left out. Two
    versions of the findings compare by these: a cell in the old one and not the new is lost."""
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
            cells.update((header[0], parts[0], column) for column, cell in
                         zip(header[1:], parts[1:]) if cell not in ("", "—"))
    return cells


def replace_findings(readme: str, table: pd.DataFrame) -> str:
    """readme with the text between the claims-table markers replaced by findings_markdown."""
    start, end = readme.find(README_START), readme.find(README_END)
    if start < 0 or end < start:
        raise ValueError(f"the README has no {README_START} ... {README_END} block")
    body = findings_markdown(table)
    return readme[: start + len(README_START)] + "\n" + body + "\n" + readme[end:]
