"""The README's findings table is generated from the committed reference claims, never typed."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from topkscope.reproduce import gallery
from topkscope.reproduce.findings import (
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


def test_committed_readme_table_equals_the_reference_claims():
    readme = (REPO / "README.md").read_text()
    block = readme[readme.index(README_START) + len(README_START): readme.index(README_END)]
    table = pd.read_csv(REPO / "results" / "reference" / "claims-quick.csv")
    assert block.strip() == findings_markdown(table).strip()
    prose = readme[readme.index(PROSE_START) + len(PROSE_START): readme.index(PROSE_END)]
    assert prose.strip() == findings_prose(table).strip()


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
            "1.9× (whole run) | inconclusive: interval [−2.5, +0.4] points contains −1 point |"
            in text)
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
    from topkscope.analysis import claims

    gauss = recorded_run(lambda r: r.standard_normal(4000), density=0.001, schedule="paper")
    robust = make_run("fnn3", lambda r: r.standard_normal(4000))
    robust.stats["gaussiank_count"] = robust.stats["k"]  # the robust variant: exactly k
    table = claims.build([gauss, robust, *five_seeds([0.951, 0.959, 0.956, 0.0, 0.0],
                                                     {3: 0.62, 4: None})], max_snapshots=0)
    md = findings_markdown(table)
    below = table[(table["claim"] == "below_paper") & (table["model"] == "m")]
    for row in below.itertuples(index=False):  # one table row per condition, warm-up apart
        assert f"| m | {row.condition} | " in md
    acc = table[table["claim"] == "randk_accuracy"].iloc[0]
    traffic = table[table["claim"] == "randk_traffic"].iloc[0]
    line = next(ln for ln in md.splitlines() if ln.startswith("| acc | Rand-k |"))
    assert "| 5 (2 failed) |" in line and f"{acc['verdict']}: {acc['cause']}" in line
    assert traffic["cause"] in line
    assert "**Checks** (true by construction)" in md
    checks = md.split("**Checks**")[1]
    assert "Gaussian-k selects about k elements — Gaussian-k: FNN-3 holds (100%)" in checks
    assert "Gaussian-k: FNN-3" not in md.split("**Checks**")[0]  # not among the findings
    prose = findings_prose(table)
    assert "1 (method, condition) comparison on" in prose and "2 method seed(s) failed" in prose


def test_committed_standard_findings_equal_the_standard_reference_claims():
    from topkscope.reproduce.findings import findings_block, markers

    readme = (REPO / "README.md").read_text()
    table = gallery.without_repeated_predictions(
        pd.read_csv(REPO / "results" / "reference" / "claims-standard.csv"))
    assert findings_block(readme, "standard-claims").strip() == findings_markdown(table).strip()
    _, _, start, end = markers("standard-claims")
    prose = readme[readme.index(start) + len(start): readme.index(end)]
    assert prose.strip() == findings_prose(table).strip()


def test_the_largest_shortfall_is_a_higher_perplexity_or_a_lower_accuracy():
    def row(model, method, metric, diff):
        return {"model": model, "section": "convergence", "claim": f"{method}_accuracy",
                "sparsifier": method, "metric": metric, "diff_mean": diff, "verdict": "fails",
                "n_seeds": 3, "n_failed_seeds": 0, "ci_low": diff - 1, "ci_high": diff + 1,
                "condition": "warmup=none", "cause": "given", "margin": 3.0,
                "traffic_target": 1.0, "evidence": "e", "rule": "r", "statement": "s"}

    from topkscope.analysis.claims import COLUMNS

    ppl = pd.DataFrame([row("lstm", "dgc", "perplexity", -1.15),
                        row("lstm", "gaussiank-2019", "perplexity", 20.1)], columns=COLUMNS)
    assert "The largest shortfall: Gaussian-k (2019)" in findings_prose(ppl)
    acc = pd.DataFrame([row("fnn3", "dgc", "accuracy", -1.15),
                        row("fnn3", "gaussiank-2019", "accuracy", 20.1)], columns=COLUMNS)
    assert "The largest shortfall: DGC" in findings_prose(acc)
