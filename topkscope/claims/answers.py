"""The answers: one quotable sentence per question of a registered claim and claims table.

    for answer in answers(table):      # every question whose rows the table holds
        answer.question.text, answer.word, answer.text

The questions are the registry's (each Claim's `questions`), so every family's questions are
asked of any table that holds its rows: the paper's, the pseudo-gradients', a user's own
claim's. An answer says yes / no / only in some conditions / partly / not settled / not
measured, then the numbers that carry it in the claim's own words (its Presentation.numbers:
the effect with its interval, the share of recorded steps, the traffic, the seeds, the
condition it holds for) and, where conditions are not decided, how many and why in plain
words (each row's `reason`). Conditions are never pooled: where they behave differently the
sentence names them. The word is read off the rows' verdicts, never re-judged:

    every row holds                    yes
    every row fails                    no
    every decided row holds, others not decided   yes where decided
    every decided row fails, others not decided   no where decided
    some hold, the others do not       only in some conditions
    none holds, some are mixed         partly (the share lies between the cuts)
    no row decided                     not settled (the commonest reason)
    no row                             not measured

Rows that pool conditions (phase "pooled") and checks (section "check") never answer.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from topkscope.claims.registry import Claim, Question, questions
from topkscope.claims.verdicts import DECIDED, REASONS

WORDS = ("yes", "no", "yes where decided", "no where decided", "only in some conditions",
         "partly", "not settled", "not measured")
MAX_SENTENCE = 300  # an answer per question and profile (the README's second block)
MAX_SUMMARY = 200   # a line of the README's summary


@dataclass(frozen=True)
class Answer:
    question: Question
    claim: Claim | None  # None: an answer of no claims row (whether sparsification pays)
    word: str
    text: str
    rows: pd.DataFrame


def word_of(verdicts) -> str:
    """The answer's word from the rows' verdicts (module docstring)."""
    verdicts = [str(v) for v in verdicts]
    if not verdicts:
        return "not measured"
    decided = [v for v in verdicts if v in DECIDED]
    if not decided:
        return "not settled"
    some_open = len(decided) < len(verdicts)
    if all(v == "holds" for v in decided):
        return "yes where decided" if some_open else "yes"
    if all(v == "fails" for v in decided):
        return "no where decided" if some_open else "no"
    if "holds" in decided:
        return "only in some conditions"
    return "partly" if "mixed" in decided else "no"


def _text(value) -> str:
    return value if isinstance(value, str) else ""


def rows_for(table: pd.DataFrame, question: Question, claim: Claim) -> pd.DataFrame:
    """The rows that answer `question` of `claim`: rows the claim (or the question's `also`
    claims) made, of the question's methods — a question naming none takes the methods its
    claim's other questions do not name —, of per-step or outer-loop runs as it asks; pooled
    rows and checks left out."""
    if table.empty or "claim_key" not in table:
        return table.iloc[0:0]
    rows = table[table["claim_key"].isin((claim.name, *question.also))]
    if question.sparsifiers is not None:
        rows = rows[rows["sparsifier"].isin(question.sparsifiers)]
    else:
        named = {s for q in claim.questions if q.on == question.on and q.sparsifiers
                 for s in q.sparsifiers}
        rows = rows[~rows["sparsifier"].isin(named)]
    outer = rows["outer_step"].map(_text).ne("") | rows["claim_family"].eq("outer")
    if question.on == "per-step":
        rows = rows[~outer]
    elif question.on == "outer":
        rows = rows[outer]
    return rows[(rows["phase"].map(_text) != "pooled") & (rows["section"] != "check")]


def _undecided(rows: pd.DataFrame, unit: str) -> str:
    """'3 of 11 conditions undecided: too few recorded steps (30 needed)' (the commonest
    reason, 'mostly' when there are others); '' when all are decided."""
    open_ = rows[~rows["verdict"].astype(str).isin(DECIDED)]
    if open_.empty:
        return ""
    told = open_["reason"].map(lambda r: REASONS.get(str(r), "no reason given")).value_counts()
    why = told.index[0] + (" (mostly)" if len(told) > 1 else "")
    if len(open_) == len(rows):
        return f"{why}" if len(told) == 1 else f"undecided: {why}"
    return f"{len(open_)} of {len(rows)} {unit} undecided: {why}"


def _unit(claim: Claim) -> str:
    return "predictions" if claim.family == "prediction" else "conditions"


def run_count(rows: pd.DataFrame) -> int:
    """The distinct runs behind rows (their run_ids; the findings tables count them the same
    way), 0 when the rows name none."""
    ids = {i for text in rows.get("run_ids", pd.Series(dtype=object)).map(_text)
           for i in text.split(",") if i}
    return len(ids)


def evidence_count(rows: pd.DataFrame, claim: Claim) -> str:
    """'11 conditions, 9 runs' / '1 prediction': how much evidence an answer rests on, counted
    the same way wherever it is shown."""
    unit = _unit(claim)
    n = len(rows)
    text = f"{n} {unit if n != 1 else unit[:-1]}"
    runs = run_count(rows)
    return text + (f", {runs} run{'s' if runs != 1 else ''}" if runs else "")


MAIN_PHASES = ("", "later-exchanges")  # what an answer's word is read off first
PHASE_WORDS = {"warm-up": "during the density warm-up",
               "first-exchanges": "at the first exchanges", "unknown": "where the phase is "
               "unknown"}


def _told(rows: pd.DataFrame, claim: Claim) -> tuple[str, str]:
    """(word, text without its final stop) of rows of one phase group."""
    word = word_of(rows["verdict"])
    numbers = claim.show.numbers(rows) if claim.show.numbers else ""
    undecided = "" if claim.show.says_why else _undecided(rows, _unit(claim))
    lead = word.capitalize()
    if word == "not settled" and undecided and not undecided[0].isdigit():
        lead, undecided = f"{lead} — {undecided}", ""
    text = f"{lead}: {numbers}" if numbers else lead
    return word, text + (f"; {undecided}" if undecided else "")


def answer(table: pd.DataFrame, question: Question, claim: Claim) -> Answer:
    """The question's answer from one claims table (module docstring). Where rows of another
    phase (a density warm-up, an outer loop's first exchanges) answer differently from the
    target density's (or the later exchanges'), the word is the target's and the other
    phase's word follows: 'No: …; during the density warm-up: partly.'"""
    rows = rows_for(table, question, claim)
    if rows.empty:
        return Answer(question, claim, "not measured",
                      "Not measured: these runs hold no row of it.", rows)
    phase = rows["phase"].map(_text)
    main, other = rows[phase.isin(MAIN_PHASES)], rows[~phase.isin(MAIN_PHASES)]
    counted = f" ({evidence_count(rows, claim)})"
    if main.empty or other.empty:
        word, text = _told(rows, claim)
        return Answer(question, claim, word, text + counted + ".", rows)
    word, text = _told(main, claim)
    for name, part in other.groupby(phase[~phase.isin(MAIN_PHASES)], sort=False):
        other_word = word_of(part["verdict"])
        if other_word != word:
            text += f"; {PHASE_WORDS.get(name, name)}: {other_word}"
    return Answer(question, claim, word, text + counted + ".", rows)


def answers(table: pd.DataFrame, on: str | None = None) -> list[Answer]:
    """Every registered question's answer from a claims table of the current schema, those
    with rows (`on`: only the questions on per-step or outer-loop runs)."""
    found = [answer(table, q, c) for q, c in questions() if on is None or q.on == on]
    return [a for a in found if len(a.rows)]


def summary_line(tables: dict[str, pd.DataFrame], question: Question, claim: Claim) -> str:
    """The README's summary line of a question over every profile's table: its short form,
    the word over every profile's rows, and the claim's one number (Presentation.lead);
    '' without rows."""
    parts = [rows_for(t, question, claim).assign(_profile=name) for name, t in tables.items()]
    rows = pd.concat([p for p in parts if len(p)], ignore_index=True) if any(
        len(p) for p in parts) else pd.DataFrame()
    if rows.empty:
        return ""
    main = rows[rows["phase"].map(_text).isin(MAIN_PHASES)]
    rows = main if len(main) else rows
    word = word_of(rows["verdict"]).capitalize()
    tell = claim.show.lead or claim.show.numbers
    number = tell(rows) if tell else ""
    return f"{word}: {number}." if number else f"{word}."


# ------------------------------------------------------------------ a user's run
PAYS = Question("pays", "Would sparsification pay on a cluster at the run's own density "
                "(predicted)?", on="any", order=1000)


def pays_answer(scaling: pd.DataFrame, workers: int = 16) -> Answer:
    """Whether a sparse step would be shorter than every baseline's at P = `workers`, per
    network of a step-time table (topkscope.perf.pays.run_prediction for a run), by the rule
    of topkscope.claims.pays (the model's validated error; the same sentence `topkscope
    scale` prints); the word over networks is word_of's."""
    from topkscope.claims.pays import pays

    told = pays(scaling, workers)
    if not told:
        return Answer(PAYS, None, "not measured", "Not measured: no step-time prediction with a "
                      "Dense and a sparse step for this model (no compute time or parameter "
                      "count).", pd.DataFrame())
    word = word_of([p.verdict for p in told])
    text = (f"{word.capitalize()}: " + "; ".join(p.text for p in told)
            + " (predicted, not measured).")
    return Answer(PAYS, None, word, text, scaling[scaling["workers"] == workers])


def run_answers(table: pd.DataFrame, pays: Answer | None = None) -> list[Answer]:
    """The questions a user asks of their own run, answered: every registered question whose
    rows the run's claims hold (the paper's, and for an outer-loop run the pseudo-gradients'),
    then whether sparsification would pay on a cluster (`pays`, topkscope.perf's answer for
    the run, when given)."""
    from topkscope.claims.migrate import current

    table = current(table)[0] if len(table) else table
    told = answers(table) if len(table) else []
    return [*told, *([pays] if pays is not None else [])]
