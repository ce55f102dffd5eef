"""The renderers decide nothing: no module of topkscope/publish/ (nor the figures driver)
calls a verdict rule, sets a verdict, or reads a number back out of a row's evidence or cause
text; the claims package is the only place where verdicts are decided (tests/test_architecture.py
checks the import order)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "topkscope"
RENDERERS = sorted((PACKAGE / "publish").glob("*.py")) + sorted(
    (PACKAGE / "reproduce").glob("*.py"))
VERDICT_RULES = {"fraction_verdict", "interval_verdict", "convergence_verdict",
                 "traffic_verdict", "speedup_verdict", "time_verdict", "band_verdict",
                 "free_selection_verdict", "verdict"}
PROSE = {"evidence", "cause"}


def _calls(tree: ast.AST) -> set[str]:
    return {n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
            for n in ast.walk(tree) if isinstance(n, ast.Call)}


def _regex_over_prose(tree: ast.AST) -> list[int]:
    """Lines where a regex (re.*, .str.extract/contains/findall) is applied to a row's
    evidence or cause text."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        text = ast.unparse(node)
        regex = (node.func.attr in ("search", "match", "findall", "fullmatch", "finditer")
                 or node.func.attr in ("extract", "extractall", "findall", "contains", "match"))
        if regex and any(f'"{p}"' in text or f"'{p}'" in text or f".{p}" in text for p in PROSE):
            found.append(node.lineno)
    return found


def test_renderers_call_no_verdict_rule_and_parse_no_prose():
    assert RENDERERS
    for path in RENDERERS:
        tree = ast.parse(path.read_text())
        assert not (_calls(tree) & VERDICT_RULES), (path.name, _calls(tree) & VERDICT_RULES)
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                    and (n.module or "").endswith("claims.verdicts") for a in n.names}
        assert imported <= {"REASONS", "VERDICTS", "DECIDED"}, (path.name, imported)
        assert _regex_over_prose(tree) == [], (path.name, _regex_over_prose(tree))


def test_the_check_finds_what_it_looks_for():
    """The checks can fail: a verdict rule called and a cause read with a regex are seen."""
    bad = ast.parse("import re\nfrom topkscope.claims.verdicts import fraction_verdict\n"
                    "v = fraction_verdict(1, 2)\nx = re.search('(\\\\d+)x', row['cause'])\n"
                    "y = table['evidence'].str.extract('share (\\\\d+)%')\n")
    assert "fraction_verdict" in _calls(bad)
    assert _regex_over_prose(bad) == [4, 5]


def test_analysis_and_perf_build_no_claim_rows():
    """analysis/ and perf/ compute numbers: neither imports the claims nor makes a row."""
    for folder in ("analysis", "perf"):
        for path in sorted((PACKAGE / folder).glob("*.py")):
            tree = ast.parse(path.read_text())
            modules = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
            modules |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import)
                        for a in n.names}
            assert not any(m.startswith("topkscope.claims") for m in modules), path.name
            assert "ClaimRow" not in _calls(tree), path.name
