"""The README's first screen and the answers of docs/findings.md, formatted from the claims
tables through the registry's questions (topkscope.claims.answers), never typed
(`make gallery`, `make findings`):

    <!-- summary:start --> ... <!-- summary:end -->                README: one line per question
        of the summary (Question.summary), each at most MAX_SUMMARY characters: the answer
        over every profile and the one number that carries it
    <!-- headline:start --> ... <!-- headline:end -->              README and findings: per
        question on per-step runs its answer in one sentence per profile (at most
        answers.MAX_SENTENCE characters), its figure in the gallery, its table in findings.md
    <!-- pseudo-gradients:start --> ... <!-- pseudo-gradients:end -->  the same for the
        questions on outer-loop runs
    <!-- atlas:start --> ... <!-- atlas:end -->                    the same for the questions
        asked of any run's saved vectors (the atlas: δ(k) by family, the tails, SIDCo's
        thresholds, the quantizers' range)

Markdown lines are wrapped at MAX_LINE characters; the full tables are docs/findings.md's
(topkscope.publish.findings).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from topkscope.claims.answers import MAX_SENTENCE, MAX_SUMMARY, answer, summary_line
from topkscope.claims.registry import Claim, Question, questions
from topkscope.publish.findings import (  # noqa: F401  (replace_block: this API too)
    MAX_LINE,
    replace_block,
    section_heading,
    slug,
    table_of,
    wrapped,
)

SUMMARY_START, SUMMARY_END = "<!-- summary:start -->", "<!-- summary:end -->"
HEADLINE_START, HEADLINE_END = "<!-- headline:start -->", "<!-- headline:end -->"
OUTER_START, OUTER_END = "<!-- pseudo-gradients:start -->", "<!-- pseudo-gradients:end -->"
ATLAS_START, ATLAS_END = "<!-- atlas:start -->", "<!-- atlas:end -->"
GALLERY = "docs/gallery"  # the figures, linked from the README


def _tables(profiles: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    from topkscope.claims.migrate import current

    return {name: current(t)[0] for name, t in profiles.items() if len(t)}


def summary_markdown(profiles: dict[str, pd.DataFrame],
                     reference: dict[str, pd.DataFrame] | None = None) -> str:
    """One line per question of the summary, in Question.summary's order: '- **<short>**
    <answer over every profile>: <its one number>.' (answers.summary_line); the reference
    tables of published measurements answer their own questions."""
    tables = _tables({**profiles, **(reference or {})})
    lines = []
    for question, claim in sorted((qc for qc in questions() if qc[0].summary is not None),
                                  key=lambda qc: qc[0].summary):
        told = summary_line(tables, question, claim)
        if told:
            lines.append(f"- **{question.short}** {told}")
    return "\n".join(lines) if lines else "_no claims (no runs)_"


def figure_of(claim: Claim, rows: pd.DataFrame, gallery: Path | None) -> str:
    """The gallery figure that shows a claim's rows: '<experiment>-<figure>' for the first
    experiment of the rows whose figure the gallery holds, else the figure's own name; ''
    when the gallery holds neither (gallery None: the first experiment's, unchecked)."""
    kind = claim.show.figure
    if not kind:
        return ""
    experiments = [e for e in dict.fromkeys(rows.get("experiment", pd.Series(dtype=object)))
                   if isinstance(e, str) and e]
    names = [f"{e}-{kind}" for e in experiments] + [kind]
    if gallery is None:
        return names[0]
    return next((n for n in names if (Path(gallery) / f"{n}.png").exists()), "")


def answers_markdown(profiles: dict[str, pd.DataFrame], on: str = "per-step",
                     gallery: Path | None = None, links: bool = True,
                     base: str = "docs/") -> str:
    """Per question (on per-step or outer-loop runs, `on`) with rows in some profile: the
    question and its figure, then per profile its answer in one sentence and its table in
    docs/findings.md; links False: no links. base: where docs/ is from the file the links
    are in ("docs/" from the README, "" from docs/findings.md)."""
    tables = _tables(profiles)
    lines, refs = [], {}
    for question, claim in questions():
        if question.on != on:
            continue
        found = {name: answer(t, question, claim) for name, t in tables.items()}
        found = {name: a for name, a in found.items() if len(a.rows)}
        if not found:
            continue
        head = f"- **{question.text}**"
        figure = figure_of(claim, next(iter(found.values())).rows, gallery) if links else ""
        if figure:
            refs[figure] = f"{base}gallery/{figure}.png"
            head += f" · [figure][{figure}]"
        lines += wrapped(head, "  ")
        for name, told in found.items():
            line = f"  - {name.lower()}: {told.text}"
            if links:
                anchor = slug(section_heading(name, table_of(claim)))
                refs[anchor] = f"{base}findings.md#{anchor}" if base else f"#{anchor}"
                line += f" · [table][{anchor}]"
            lines += wrapped(line)
    if not lines:
        return ("_no outer-loop runs in these claims: `make reproduce-figures` runs "
                "outer-fnn3-mnist_" if on == "outer" else "_no claims (no runs)_")
    text = "\n".join(lines)
    return text + ("\n\n" + "\n".join(f"[{k}]: {v}" for k, v in refs.items()) if refs else "")


def too_long(profiles: dict[str, pd.DataFrame]) -> list[str]:
    """Each summary line over MAX_SUMMARY characters and each answer over MAX_SENTENCE, one
    phrase each (a test keeps this empty for the committed claims)."""
    tables = _tables(profiles)
    from topkscope.publish.published_findings import reference_tables

    problems = [f"summary line of {len(line)} characters: {line!r}"
                for line in summary_markdown(profiles, reference_tables()).splitlines()
                if len(line) > MAX_SUMMARY]
    for question, claim in questions():
        for name, table in tables.items():
            told = answer(table, question, claim)
            if len(told.rows) and len(told.text) > MAX_SENTENCE:
                problems.append(f"{name} answer to {question.key!r} of {len(told.text)} "
                                f"characters: {told.text!r}")
    return problems


def replace_headline(readme: str, profiles: dict[str, pd.DataFrame],
                     gallery: Path | None = None, links: bool = True,
                     base: str = "docs/", reference: dict | None = None) -> str:
    """readme (or findings.md) with each of its answer blocks it has (summary, headline,
    pseudo-gradients, atlas) regenerated; ValueError when it has none."""
    blocks = ((SUMMARY_START, SUMMARY_END, lambda: summary_markdown(profiles, reference)),
              (HEADLINE_START, HEADLINE_END,
               lambda: answers_markdown(profiles, "per-step", gallery, links, base)),
              (OUTER_START, OUTER_END,
               lambda: answers_markdown(profiles, "outer", gallery, links, base)),
              (ATLAS_START, ATLAS_END,
               lambda: answers_markdown(profiles, "any", gallery, links, base)))
    found = False
    for start, end, body in blocks:
        if start in readme:
            readme, found = replace_block(readme, start, end, body()), True
    if not found:
        raise ValueError(f"the text has no {SUMMARY_START}, {HEADLINE_START} or {OUTER_START} "
                         "block")
    return readme


def long_lines(text: str, limit: int = MAX_LINE) -> list[tuple[int, int]]:
    """(line number, length) of each line of text longer than `limit` characters."""
    return [(i, len(line)) for i, line in enumerate(text.splitlines(), 1) if len(line) > limit]


__all__ = ["ATLAS_END", "ATLAS_START", "GALLERY", "HEADLINE_END", "HEADLINE_START", "MAX_LINE", "OUTER_END", "OUTER_START",
           "Question", "SUMMARY_END", "SUMMARY_START", "answers_markdown", "figure_of",
           "long_lines", "replace_block", "replace_headline", "summary_markdown", "too_long"]
