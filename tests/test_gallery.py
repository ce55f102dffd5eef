"""`topkscope gallery` (`make gallery`): partial results never shrink what is published."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from topkscope.cli import main as cli
from topkscope.publish.findings import (
    README_END,
    README_START,
    findings_block,
    findings_markdown,
    markers,
)


def claim_row(model: str, claim: str, verdict: str, fraction: float) -> dict:
    return {"model": model, "dataset": "mnist", "dataset_substitute": None, "claim": claim,
            "sparsifier": "topk", "statement": f"statement of {claim}", "n_runs": 1,
            "n_units": 10, "fraction": fraction, "evidence": "e", "verdict": verdict,
            "rule": "r", "condition": None, "n_seeds": float("nan"), "ci_low": float("nan"),
            "ci_high": float("nan"), "traffic_ratio": float("nan")}


def make_results(root: Path, figures: list[str], models: list[str],
                 published: list[str] | None = None) -> Path:
    """A results root: figures, claims.csv of `models`, and, with `published`, the committed
    claims of those models (reference/claims-quick.csv: what is published)."""
    (root / "figures").mkdir(parents=True)
    for i, name in enumerate(figures):
        Image.new("RGB", (1200, 600), (40 * i, 100, 200)).save(root / "figures" / f"{name}.png")
    claims_of(models).to_csv(root / "claims.csv", index=False)
    (root / "claims.md").write_text("| claims |\n")
    if published is not None:
        (root / "reference").mkdir()
        claims_of(published).to_csv(root / "reference" / "claims-quick.csv", index=False)
    return root


def claims_of(models: list[str]) -> pd.DataFrame:
    return pd.DataFrame([claim_row(m, c, "holds", 1.0) for m in models
                         for c in ("below_paper", "gaussian_like")])


@pytest.fixture
def published(tmp_path) -> tuple[Path, Path]:
    """A gallery and README published from complete results: two figures, two models."""
    full = make_results(tmp_path / "full", ["a-histogram", "b-convergence"], ["fnn3", "resnet20"])
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{README_START}\nold\n{README_END}\noutro\n")
    out = tmp_path / "gallery"
    assert cli(["gallery", "--results", str(full), "--gallery", str(out), "--readme",
                str(readme)]) == 0
    return out, readme


def snapshot(*folders_or_files: Path) -> dict:
    files = [p for f in folders_or_files for p in ([f] if f.is_file() else sorted(f.iterdir()))]
    return {str(p): p.read_bytes() for p in files}


def test_complete_results_publish_small_copies_and_the_findings(published):
    out, readme = published
    assert sorted(p.name for p in out.glob("*.png")) == ["a-histogram.png", "b-convergence.png"]
    for png in out.glob("*.png"):
        with Image.open(png) as img:
            assert img.width == 900
    block = findings_block(readme.read_text())
    rows = [ln for ln in block.splitlines() if ln.startswith("| FNN-3") or
            ln.startswith("| ResNet-20")]
    assert len(rows) == 2 and all(ln.count("holds (100%)") == 2 for ln in rows)


def test_partial_results_are_refused_naming_what_would_be_lost(published, tmp_path, capsys):
    out, readme = published
    before = snapshot(out, readme)
    partial = make_results(tmp_path / "partial", ["a-histogram"], ["fnn3"],
                           published=["fnn3", "resnet20"])
    assert cli(["gallery", "--results", str(partial), "--gallery", str(out), "--readme",
                str(readme)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("topkscope gallery: error: ")
    assert "would lose 1 figure(s): b-convergence.png" in err
    assert ("the quick claims would lose 2 row(s): below_paper · resnet20 · topk · , "
            "gaussian_like · resnet20 · topk · ") in err
    assert "--allow-shrink" in err
    assert snapshot(out, readme) == before  # nothing written


def test_allow_shrink_publishes_partial_results_and_says_what_went(published, tmp_path, capsys):
    out, readme = published
    partial = make_results(tmp_path / "partial", ["a-histogram"], ["fnn3"],
                           published=["fnn3", "resnet20"])
    assert cli(["gallery", "--results", str(partial), "--gallery", str(out), "--readme",
                str(readme), "--allow-shrink"]) == 0
    assert "--allow-shrink: " in capsys.readouterr().out
    assert sorted(p.name for p in out.glob("*.png")) == ["a-histogram.png"]
    assert "b-convergence" not in (out / "README.md").read_text()
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith("outro\n")
    assert findings_block(text).strip() == findings_markdown(
        pd.read_csv(partial / "claims.csv"), "Quick").strip()


def test_more_results_are_published_without_asking(published, tmp_path):
    out, readme = published
    more = make_results(tmp_path / "more", ["a-histogram", "b-convergence", "c-qq"],
                        ["fnn3", "resnet20", "vgg16"])
    assert cli(["gallery", "--results", str(more), "--gallery", str(out), "--readme",
                str(readme)]) == 0
    assert len(list(out.glob("*.png"))) == 3
    assert "VGG-16" in findings_block(readme.read_text())


def test_bad_input_writes_nothing(published, tmp_path, capsys):
    out, readme = published
    before = snapshot(out, readme)
    assert cli(["gallery", "--results", str(tmp_path / "nowhere"), "--gallery", str(out)]) == 2
    assert "no figures in" in capsys.readouterr().err
    unmarked = tmp_path / "plain.md"
    unmarked.write_text("no markers\n")
    full = tmp_path / "full"
    assert cli(["gallery", "--results", str(full), "--gallery", str(out), "--readme",
                str(unmarked)]) == 2
    assert "claims-table" in capsys.readouterr().err
    assert cli(["gallery", "--results", str(full), "--gallery", str(out), "--width", "10"]) == 2
    assert "width = 10 is too small" in capsys.readouterr().err
    assert snapshot(out, readme) == before and unmarked.read_text() == "no markers\n"


def test_the_standard_profiles_claims_fill_their_own_blocks_and_never_shrink(tmp_path, capsys):
    """--standard-claims fills the standard-claims blocks from its CSV and leaves the quick
    profile's as results/claims.csv says; a standard table with fewer cells is refused."""
    quick = make_results(tmp_path / "quick", ["a-histogram"], ["fnn3"])
    standard = make_results(tmp_path / "standard", [], ["lstm-ptb", "gpt-mini"])
    rows = pd.read_csv(standard / "claims.csv").assign(section="distribution")
    predicted = {**claim_row("vgg16", "gaussiank_speedup_p16", "inconclusive", float("nan")),
                 "section": "prediction", "sparsifier": "gaussiank", "network": "10gbe",
                 "baselines": "Dense", "selection_basis": "break-even", "breakeven_ms": 2.5}
    pd.concat([rows, pd.DataFrame([predicted])]).to_csv(standard / "claims.csv", index=False)
    start, end = markers("standard-claims")
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{README_START}\nold\n{README_END}\nmiddle\n{start}\nold\n"
                      f"{end}\noutro\n")
    out = tmp_path / "gallery"
    args = ["gallery", "--results", str(quick), "--gallery", str(out), "--readme", str(readme)]
    assert cli([*args, "--standard-claims", str(standard / "claims.csv")]) == 0
    text = readme.read_text()
    assert findings_block(text).strip() == findings_markdown(
        pd.read_csv(quick / "claims.csv"), "Quick").strip()
    shown = findings_block(text, "standard-claims")
    assert "LSTM" in shown and "FNN-3" not in shown and "LSTM" not in findings_block(text)
    # a profile's predictions are its own runs' models' (the one builder): shown in its block
    assert "VGG" in shown and "VGG" not in findings_block(text)
    (quick / "reference").mkdir()
    pd.read_csv(standard / "claims.csv").to_csv(quick / "reference" / "claims-standard.csv",
                                                index=False)  # what is published
    fewer = make_results(tmp_path / "fewer", [], ["lstm-ptb"])
    assert cli([*args, "--standard-claims", str(fewer / "claims.csv")]) == 2
    assert "would lose" in capsys.readouterr().err and readme.read_text() == text
    assert cli([*args[:-2], "--standard-claims", str(fewer / "claims.csv")]) == 2
    assert "needs --readme or --findings" in capsys.readouterr().err


def test_text_only_regenerates_the_readme_and_the_findings_from_claims_alone(published,
                                                                             tmp_path, capsys):
    """--text-only --claims CSV: the README's headline and the findings document's tables
    from a claims table, with no figures read or written; a file with no block to fill is
    refused and nothing is written."""
    from topkscope.publish.headline import HEADLINE_END, HEADLINE_START, answers_markdown

    out, _ = published
    before = snapshot(out)
    claims = make_results(tmp_path / "claims-only", [], ["fnn3", "vgg16"]) / "claims.csv"
    (tmp_path / "claims-only" / "figures").rmdir()
    readme, doc = tmp_path / "R.md", tmp_path / "findings.md"
    readme.write_text(f"top\n{HEADLINE_START}\nold\n{HEADLINE_END}\nMore: below\n")
    doc.write_text(f"# all\n{README_START}\nold\n{README_END}\n")
    args = ["gallery", "--text-only", "--claims", str(claims), "--gallery", str(out)]
    assert cli([*args, "--readme", str(readme), "--findings", str(doc)]) == 0
    assert "text only" in capsys.readouterr().out and snapshot(out) == before
    table = pd.read_csv(claims)
    told = answers_markdown({"Quick": table}, gallery=tmp_path / "gallery")
    assert readme.read_text() == (f"top\n{HEADLINE_START}\n{told}\n{HEADLINE_END}\n"
                                  "More: below\n")
    assert "- **Is u bell-shaped" in readme.read_text()  # the answers, per question
    assert findings_block(doc.read_text()).strip() == findings_markdown(table, "Quick").strip()
    plain = tmp_path / "plain.md"
    plain.write_text("nothing to fill\n")
    kept = snapshot(readme, doc)
    assert cli([*args, "--readme", str(readme), "--findings", str(plain)]) == 2
    assert f"{plain} has no {HEADLINE_START}" in capsys.readouterr().err
    assert snapshot(readme, doc) == kept and plain.read_text() == "nothing to fill\n"
    assert cli(args) == 2 and "--text-only needs --readme or --findings" in \
        capsys.readouterr().err


def test_the_reports_screenshot_is_no_figure_of_the_gallery(published, tmp_path):
    """docs/gallery/report.png (the README's picture of `topkscope report`) is kept when
    results without it are published, and never counted as lost."""
    out, readme = published
    (out / "report.png").write_bytes((out / "a-histogram.png").read_bytes())
    same = make_results(tmp_path / "same", ["a-histogram", "b-convergence"],
                        ["fnn3", "resnet20"])
    assert cli(["gallery", "--results", str(same), "--gallery", str(out), "--readme",
                str(readme)]) == 0
    assert (out / "report.png").is_file()
