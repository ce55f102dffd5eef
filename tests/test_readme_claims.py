"""The README's first screen and docs/findings.md are generated from the committed reference
claims, never typed, and keep to their width limits."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from topkscope.analysis.criteria import signed
from topkscope.publish import gallery
from topkscope.publish.findings import (
    PROSE_END,
    PROSE_START,
    README_END,
    README_START,
    findings_markdown,
    findings_prose,
    replace_findings,
    verdict_sentence,
)

REPO = Path(__file__).resolve().parents[1]


REFERENCE = REPO / "results" / "reference"
FINDINGS = REPO / "docs" / "findings.md"


def _regenerated():
    return gallery.prepare(REPO / "results", readme=REPO / "README.md", findings=FINDINGS,
                           claims=REFERENCE / "claims-quick.csv",
                           standard_claims=REFERENCE / "claims-standard.csv", text_only=True)


def test_committed_readme_and_findings_equal_what_the_reference_claims_give():
    """`make findings` from the committed claims alone reproduces both files exactly, so
    neither can drift from the claims (nor be edited by hand)."""
    text = _regenerated()
    assert text.readme == (REPO / "README.md").read_text()
    assert text.findings == FINDINGS.read_text()
    table = pd.read_csv(REFERENCE / "claims-quick.csv")
    block = text.findings[text.findings.index(README_START) + len(README_START):
                          text.findings.index(README_END)]
    assert block.strip() == findings_markdown(table, "Quick").strip()
    prose = text.findings[text.findings.index(PROSE_START) + len(PROSE_START):
                          text.findings.index(PROSE_END)]
    assert prose.strip() == findings_prose(table).strip()


def test_findings_tables_keep_to_the_width_limits():
    """docs/findings.md: at most 9 columns a table, cells under 60 characters; checks true by
    construction are one line per check."""
    from topkscope.publish.findings import MAX_CELL, MAX_COLUMNS, width_problems

    text = FINDINGS.read_text()
    assert (MAX_COLUMNS, MAX_CELL) == (9, 60)
    assert text.count("\n|---") >= 8  # the tables are there: the limits are checked on them
    assert width_problems(text) == []
    assert width_problems("| " + " | ".join("c" * 9 + str(i) for i in range(10)) + " |") == [
        "line 1: 10 columns"]
    assert "a 61-character cell" in width_problems("| " + "x" * 61 + " |")[0]
    for profile in ("Quick", "Standard"):
        checks = text.split(f"### {profile}: Checks")[1].split("<!--")[0]
        items = [ln for ln in checks.splitlines() if ln.startswith("- ")]
        claims = pd.read_csv(REFERENCE / f"claims-{profile.lower()}.csv")
        by = claims[claims["section"] == "check"].groupby(["claim", "sparsifier"])
        assert len(items) == by.ngroups and "holds (100%)" not in checks


def test_the_readme_answers_on_its_first_screen():
    """Before the first "More" link: at most 70 rendered lines (reference-link definitions and
    HTML comments render as nothing), none over 160 characters; one bullet per question of the
    paper, then per profile its answer — a word (yes, no, only in some conditions, partly, not
    settled, not measured) and the numbers — generated from the committed claims; a figure of
    the gallery and a table of docs/findings.md that exist."""
    import re

    from topkscope.claims.answers import QUESTIONS, WORDS, answer
    from topkscope.claims.migrate import read
    from topkscope.publish.findings import slug
    from topkscope.publish.headline import MAX_LINE, long_lines

    readme = (REPO / "README.md").read_text()
    screen = readme[: readme.index("\nMore: ")]
    rendered = [ln for ln in screen.splitlines()
                if not re.match(r"^\[[^\]]+\]: \S+$", ln) and not ln.startswith("<!--")]
    assert len(rendered) <= 70 and long_lines(screen) == [] and MAX_LINE == 160
    bullets = [ln for ln in screen.splitlines() if ln.startswith("- **")]
    assert [b.split("**")[1] for b in bullets] == [q.text for q in QUESTIONS]
    words = "|".join(re.escape(w.capitalize()) for w in WORDS)
    items = re.findall(r"^  - (quick|standard|published GPU runs): (.*?)(?=^  - |^- |\Z)",
                       screen, flags=re.M | re.S)
    assert items and all(re.match(rf"({words})\b", text) for _, text in items), items
    quick = read(REFERENCE / "claims-quick.csv")
    accuracy = answer(quick, next(q for q in QUESTIONS if q.key == "gaussiank_accuracy"))
    told = " ".join(next(t for p, t in items if p == "quick" and "seeds" in t and "Top-k's"
                         in t).split())
    assert told.startswith(" ".join(accuracy.text.split()))  # the answer, as generated
    for r in accuracy.rows.itertuples():  # every condition named with its own interval
        assert f"[{signed(r.ci_low)}, {signed(r.ci_high)}]" in told
    links = dict(re.findall(r"^\[([^\]]+)\]: (\S+)$", screen, flags=re.M))
    assert links and all(f"[{k}]" in screen.replace(f"[{k}]: ", "") for k in links)
    for target in links.values():
        path, _, anchor = target.partition("#")
        assert (REPO / path).is_file(), target
        headings = [ln for ln in (REPO / path).read_text().splitlines() if ln.startswith("#")] \
            if path.endswith(".md") else []
        assert not anchor or anchor in {slug(ln) for ln in headings}, target


def test_update_readme_rewrites_only_the_block(tmp_path):
    table = pd.DataFrame([{
        "model": "fnn3", "dataset": "mnist", "dataset_substitute": None,
        "claim": "gaussiank_accuracy", "sparsifier": "gaussiank-2019",
        "statement": "gaussiank-2019 trains as well as exact Top-k", "n_runs": 6, "n_units": 3,
        "fraction": float("nan"), "evidence": "accuracy ...", "verdict": "inconclusive",
        "rule": "r", "condition": "warmup=paper", "n_seeds": 3, "ci_low": -2.5, "ci_high": 0.4,
        "traffic_ratio": 1.9}])
    table.to_csv(tmp_path / "claims.csv", index=False)
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{README_START}\nold table\n{README_END}\noutro\n")
    gallery.update_readme(readme, tmp_path / "claims.csv")
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith("outro\n") and "old table" not in text
    assert ("| FNN-3 | Gaussian-k (2019) | warmup=paper | −1.05 [−2.5, +0.4] points | 3 | "
            "1.9× (whole run) | — | inconclusive | — |" in text)
    row = next(table.itertuples(index=False))
    assert verdict_sentence(row) == ("Not decided: interval [−2.5, +0.4] points contains "
                                     "−1 point.")


def test_a_readme_without_markers_is_refused():
    with pytest.raises(ValueError, match="claims-table"):
        replace_findings("no markers here", pd.DataFrame())


def test_findings_format_the_claims_columns_of_fresh_claims():
    """Distribution rows per condition, convergence rows with failed seeds, checks: every cell
    and number of the README comes from a column of the claims."""
    from tests.test_analysis_claims import make_run
    from tests.test_claims_evidence import five_seeds, recorded_run
    from topkscope import claims

    gauss = recorded_run(lambda r: r.standard_normal(4000), density=0.001, schedule="paper")
    robust = make_run("fnn3", lambda r: r.standard_normal(4000), steps=30, ranks=1)  # 30 blocks
    robust.stats["gaussiank_count"] = robust.stats["k"]  # the robust variant: exactly k
    table = claims.build([gauss, robust, *five_seeds([0.951, 0.959, 0.956, 0.0, 0.0],
                                                     {3: 0.62, 4: None})], max_snapshots=0)
    md = findings_markdown(table)
    below = table[(table["claim"] == "below_paper") & (table["model"] == "m")]
    for row in below.itertuples(index=False):  # one table row per condition, warm-up apart
        assert f"| m | {row.condition.replace('rho=', 'ρ=')} | ".replace(
            "during warm-up", "in warm-up") in md
    acc = table[table["claim"] == "randk_accuracy"].iloc[0]
    traffic = table[table["claim"] == "randk_traffic"].iloc[0]
    line = next(ln for ln in md.splitlines() if ln.startswith("| acc | Rand-k |"))
    assert "| 5 (2 failed) |" in line and f"| {acc['verdict']} |" in line
    assert traffic["verdict"] in line.split("|")[-2]
    assert "### Checks" in md
    checks = md.split("### Checks")[1]
    assert "Gaussian-k selects about k elements on Top-k's u — Gaussian-k: holds in" in checks
    assert "Gaussian-k: holds" not in md.split("### Checks")[0]  # not among the findings
    prose = findings_prose(table)
    assert "1 (method, condition) comparison on" in prose and "2 method seed(s) failed" in prose


def test_the_largest_shortfall_is_a_higher_perplexity_or_a_lower_accuracy():
    def row(model, method, metric, diff):
        return {"model": model, "section": "convergence", "claim": f"{method}_accuracy",
                "sparsifier": method, "metric": metric, "diff_mean": diff, "verdict": "fails",
                "n_seeds": 3, "n_failed_seeds": 0, "ci_low": diff - 1, "ci_high": diff + 1,
                "condition": "warmup=none", "cause": "given", "margin": 3.0,
                "traffic_target": 1.0, "evidence": "e", "rule": "r", "statement": "s"}

    from topkscope.claims import COLUMNS

    ppl = pd.DataFrame([row("lstm", "dgc", "perplexity", -1.15),
                        row("lstm", "gaussiank-2019", "perplexity", 20.1)], columns=COLUMNS)
    assert "The largest shortfall: Gaussian-k (2019)" in findings_prose(ppl)
    acc = pd.DataFrame([row("fnn3", "dgc", "accuracy", -1.15),
                        row("fnn3", "gaussiank-2019", "accuracy", 20.1)], columns=COLUMNS)
    assert "The largest shortfall: DGC" in findings_prose(acc)


def test_a_profile_line_too_long_for_the_screen_puts_its_table_link_on_the_next_line(monkeypatch):
    from topkscope.publish import headline

    claims = pd.read_csv(Path(__file__).resolve().parents[1] / "results/reference/claims-standard.csv")
    monkeypatch.setattr(headline, "MAX_LINE", 100)
    lines = headline.verdict_counts_markdown({"Standard": claims}).splitlines()
    profile = [i for i, line in enumerate(lines) if line.startswith("  - standard: ")]
    wrapped = [i for i in profile if len(lines[i]) > 0 and "[table][" not in lines[i]]
    assert wrapped, "no profile line needed the wrap at 100 characters"
    for i in wrapped:
        assert lines[i + 1].startswith("    · [table][")
    for i in profile:
        if "[table][" in lines[i]:
            assert len(lines[i]) <= 100
