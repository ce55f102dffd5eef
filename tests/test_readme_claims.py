"""The README's first screen and docs/findings.md are generated from the committed reference
claims, never typed, and keep to their limits: a summary line per question of at most
MAX_SUMMARY characters, an answer per question and profile of at most MAX_SENTENCE, in words
(no `rho=`, `warmup=`, `custom[…]`, no exponent notation), findings tables at most 9 columns of
cells of at most 120 characters."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from topkscope.claims.answers import MAX_SENTENCE, MAX_SUMMARY
from topkscope.publish import gallery
from topkscope.publish.findings import (
    MAX_CELL,
    MAX_COLUMNS,
    MAX_LINE,
    decided_markdown,
    replace_findings,
    width_problems,
)
from topkscope.publish.headline import (
    ATLAS_END,
    ATLAS_START,
    HEADLINE_END,
    HEADLINE_START,
    SUMMARY_END,
    SUMMARY_START,
    long_lines,
)

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "results" / "reference"
FINDINGS = REPO / "docs" / "findings.md"
README = REPO / "README.md"
# what a reader must never meet in the answers: the condition keys' and the CSV's vocabulary
INTERNAL = ("rho=", "warmup=", "custom[", "e+0", "e-0", "__global__", "insufficient-data",
            "not-significant")


def _regenerated():
    return gallery.prepare(REPO / "results", readme=README, findings=FINDINGS,
                           claims=REFERENCE / "claims-quick.csv",
                           standard_claims=REFERENCE / "claims-standard.csv", text_only=True)


def _block(text: str, start: str, end: str) -> str:
    return text[text.index(start) + len(start):text.index(end)]


def test_committed_readme_and_findings_equal_what_the_reference_claims_give():
    """`make findings` from the committed claims alone reproduces both files exactly, so
    neither can drift from the claims (nor be edited by hand)."""
    text = _regenerated()
    assert text.readme == README.read_text()
    assert text.findings == FINDINGS.read_text()


def _items(block: str) -> list[str]:
    """The block's bullets with their wrapped continuation lines joined."""
    items: list[str] = []
    for line in block.splitlines():
        if re.match(r"^\s*- ", line):
            items.append(line.strip()[2:])
        elif line.strip() and items and not line.startswith(("<!--", "[")):
            items[-1] += " " + line.strip()
    return items


def test_the_summary_and_the_answers_are_short_and_in_words():
    """Directly under the commands: a line per question of at most MAX_SUMMARY characters; then
    per question and profile one sentence of at most MAX_SENTENCE; no internal vocabulary."""
    readme = README.read_text()
    assert readme.index(SUMMARY_START) < readme.index(HEADLINE_START)
    summary = _items(_block(readme, SUMMARY_START, SUMMARY_END))
    assert 4 <= len(summary) <= 8
    for line in summary:
        assert len(line) <= MAX_SUMMARY, line
        assert re.search(r"\d", line), line  # a number to repeat
    answers = _items(_block(readme, HEADLINE_START, HEADLINE_END))
    sentences = [re.sub(r"\s*·?\s*\[[^\]]+\]\[[^\]]+\]", "", a) for a in answers]
    sentences = [s for s in sentences if re.match(r"^(quick|standard|published)", s)]
    assert sentences
    for text in summary + sentences:
        assert not [w for w in INTERNAL if w in text], text
    for sentence in sentences:
        said = sentence.split(": ", 1)[1]
        assert len(said) <= MAX_SENTENCE, sentence
    # the answers' lines wrap at MAX_LINE (the summary's lines are whole sentences of <= 200)
    assert long_lines(_block(readme, HEADLINE_START, HEADLINE_END)) == [] and MAX_LINE == 160
    # the atlas's questions (asked of any run's saved vectors) answered in the same style
    atlas = _block(readme, ATLAS_START, ATLAS_END)
    for asked in ("Does a Gaussian predict how much energy Top-k keeps", "Is u power-law "
                  "heavy-tailed across its coordinates", "SIDCo's fitted tail laws"):
        assert asked in atlas


def test_findings_tables_keep_to_the_width_limits():
    """docs/findings.md: at most 9 columns a table, cells of at most 120 characters (a
    condition in words with every setting fits)."""
    text = FINDINGS.read_text()
    assert (MAX_COLUMNS, MAX_CELL) == (9, 120)
    assert text.count("\n|---") >= 8  # the tables are there: the limits are checked on them
    assert width_problems(text) == []
    assert width_problems("| " + " | ".join("c" * 9 + str(i) for i in range(10)) + " |") == [
        "line 1: 10 columns"]
    assert "a 121-character cell" in width_problems("| " + "x" * 121 + " |")[0]


def test_a_readme_without_markers_is_refused():
    with pytest.raises(ValueError, match="claims-table"):
        replace_findings("no markers here", pd.DataFrame())


def test_readme_and_findings_count_conditions_and_runs_the_same_way():
    """Each answer's '(N conditions, M runs)' is the same in the README and docs/findings.md:
    both blocks come from one function over the same rows."""
    pattern = r"\((\d+) conditions?(?:, (\d+) runs?)?\)"
    readme = re.findall(pattern, _block(README.read_text(), HEADLINE_START, HEADLINE_END))
    findings = re.findall(pattern, _block(FINDINGS.read_text(), HEADLINE_START, HEADLINE_END))
    assert len(readme) >= 8 and sorted(readme) == sorted(findings)


def test_how_much_is_decided_is_counted_from_the_rows():
    """decided_markdown counts a group's rows, its decided ones (holds, fails, mixed) and the
    undecided by reason, most first; measured claims also without the rows of no unit."""
    rows = [("distribution", "holds", "", 30), ("distribution", "mixed", "", 40),
            ("convergence", "fails", "", 5), ("distribution", "inconclusive", "too-few-blocks", 9),
            ("distribution", "inconclusive", "too-few-blocks", 6),
            ("explanation", "inconclusive", "share-on-the-cut", 90),
            ("distribution", "insufficient-data", "not-measured", 0),
            ("prediction", "inconclusive", "not-measured-on-device", None),
            ("check", "holds", "", 12)]
    table = pd.DataFrame(rows, columns=["section", "verdict", "reason", "n_units"])
    lines = decided_markdown(table).splitlines()
    assert lines[0] == (
        "- measured claims: 7 rows, 3 decided, 4 undecided (57%): too few recorded steps (30 "
        "needed) 2, not measured 1, the share is near 10% or 90% 1; without the 1 row that "
        "measured nothing, 3 of 6 undecided (50%)")
    assert lines[1] == "- predictions: 1 row, 0 decided, 1 undecided (100%): no GPU selection time 1"
    assert lines[2] == "- checks: 1 row, 1 decided, 0 undecided (0%)"
    assert len(lines) == 3  # no published rows: no line


def test_every_section_is_counted_in_one_group():
    """decided_markdown's groups partition the claims sections (a new section is counted)."""
    from topkscope.claims.row import SECTIONS
    from topkscope.publish.findings import SECTION_GROUPS

    grouped = [s for _, sections in SECTION_GROUPS for s in sections]
    assert sorted(grouped) == sorted(SECTIONS)
