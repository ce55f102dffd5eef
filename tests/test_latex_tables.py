"""Every .tex table we write: well formed everywhere (columns, cells, math, no raw < > |), and
compiled by pdflatex in a minimal article with the documented packages where pdflatex is
installed (skipped otherwise): no line wider than the text, no float taller than the page (its
rows would be lost), no page overfull, no reference to a table the article lacks."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from tests._latex import (
    MAX_CLAIMS_COLUMNS,
    check_structure,
    column_count,
    compile_tables,
    have_pdflatex,
    pages,
)
from tests.test_claims_evidence import five_seeds, recorded_run
from tests.test_paper_tables import fake_run
from topkscope import claims
from topkscope.analysis.runs import load
from topkscope.claims import speedup
from topkscope.condition import Condition, describe
from topkscope.hooks import Recorder
from topkscope.perf import report
from topkscope.publish import paper_tables as pt

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "results" / "reference"
VIEWS = ["claims-convergence", "claims-distribution", "claims-predictions"]


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> list[Path]:
    """write_all on every input it takes: a recorded run with snapshots, convergence runs,
    claims with every section (distribution per condition, failed seeds, predictions), a
    benchmark table."""
    out = tmp_path_factory.mktemp("tables")
    with Recorder(out / "run", densities=[0.01, 0.1], sparsifiers=["compared"],
                  snapshot_schedule=[1, 3]) as rec:
        for step in range(4):
            rec.record(step, 0, u=torch.randn(2000), layout=[("w", 0, 2000)])
    run = load(out / "run")
    run.manifest.update(model="fnn3", density=0.01, sparsifier="topk",
                        density_schedule=[0.015625, 0.004], deviations=["empty_fallback=topk"])
    table = claims.build([recorded_run(lambda r: r.standard_normal(4000), density=0.001,
                                       schedule="paper", snapshot_steps=(4,)),
                          *five_seeds([0.951, 0.959, 0.956, 0.0, 0.0], {3: 0.62, 4: None})])
    scaling, _ = report.scaling_table(["fnn3"], ["1gbe"], [16], selection=pd.DataFrame({
        "method": ["topk", "gaussiank"], "d": [199_210] * 2, "density": [0.001] * 2,
        "distribution": ["normal"] * 2, "median_ms": [2.0, 1.0], "device": ["cpu"] * 2}),
        compute_s=0.01)
    table = pd.concat([table, speedup.claims_rows(scaling, errors={"no-overlap": 0.05,
                                                                  "wfbp": 0.3})])
    bench = pd.read_csv(REFERENCE / "bench-cpu" / "selection.csv")
    convergence = [fake_run("conv", "topk", s, m) for s, m in enumerate([0.90, 0.92, 0.94])]
    files = pt.write_all(out / "tables", "tiny", [run], convergence, table, bench)
    return sorted((p for p in files if p.suffix == ".tex"), key=lambda p: p.stem)


def test_every_table_is_written_and_well_formed(written):
    assert [p.stem for p in written] == ["claims", "claims-convergence", "claims-counts",
                                         "claims-distribution", "claims-evidence",
                                         "claims-predictions", "claims-rules", "contraction",
                                         "convergence", "normality", "selectors", "speed"]
    columns = {p.stem: check_structure(p, MAX_CLAIMS_COLUMNS if p.stem == "claims" else None)
               for p in written}
    assert columns["claims"] == len(pt.CLAIMS_HEADER) == 8
    text = next(p for p in written if p.stem == "claims").read_text()
    assert r"$\delta$ $\le$ (1 $-$ k/d)$^2$" in text and "||" not in text and "<=" not in text
    assert "2 failed" in text and "$-$" in text  # failed seeds; signs as math
    for path in written:  # each file stands alone: no reference to another table
        body = path.read_text()
        assert r"\ref{" not in body, path.stem
        assert r"\resizebox" not in body, path.stem  # nothing shrunk


def test_the_claims_of_the_committed_references_are_well_formed(tmp_path):
    for profile in ("quick", "standard"):
        table = pd.read_csv(REFERENCE / f"claims-{profile}.csv")
        files = pt.write_all(tmp_path / profile, profile, claims=table)
        for tex in [p for p in files if p.suffix == ".tex"]:
            check_structure(tex, MAX_CLAIMS_COLUMNS if tex.stem == "claims" else None)


LONG_CONDITION = Condition(warmup="custom", warmup_schedule=(0.015625, 0.004), k_rule="ceil",
                           deviations=("empty_fallback=topk",))


def many_models(n: int, condition: Condition = LONG_CONDITION) -> pd.DataFrame:
    """A normality table of n (model, method) rows: as long as the issue's 80-row dump."""
    rng = np.random.default_rng(1)
    return pd.DataFrame({
        "experiment": [f"exp-{i // 4}" for i in range(n)], "world_size": [4] * n,
        "model": [f"model-{i // 4}" for i in range(n)],
        "condition": [condition.key()] * n, "condition_text": [describe(condition)] * n,
        "sparsifier": ["topk", "gaussiank-2019", "dgc", "redsync"] * (n // 4),
        "snapshots": rng.integers(1, 40, n), "skew": rng.normal(size=n),
        "excess_kurtosis": rng.gamma(2, 5, n), "ks_D": rng.uniform(0, 0.2, n),
        "qq_r": rng.uniform(0.9, 1, n), "gennorm_beta": rng.uniform(0.3, 2, n),
        "best_family": ["gennorm"] * n, "best_family_share": rng.uniform(0, 1, n)})


def test_a_table_longer_than_a_page_is_continued_with_its_heading_and_a_short_one_floats():
    """No longtable (it fails in a two-column class): a long table is several table* floats,
    each continued one under the caption's number and the model heading it continues."""
    long = pt.normality_latex(many_models(80), "n")
    short = pt.normality_latex(many_models(8, Condition()), "n")
    assert "longtable" not in long + short
    floats = long.split(r"\begin{table*}")[1:]
    assert len(floats) >= 2 and short.count(r"\begin{table*}") == 1
    for chunk in floats[1:]:
        assert r"\addtocounter{table}{-1}" in chunk and "(continued)" in chunk
        first = chunk.split(r"\midrule", 1)[1].strip().splitlines()[0]
        assert first.startswith(r"\multicolumn") and "model-" in first, first
    assert long.count(r"\label{") == 1


def test_the_caption_keeps_its_distance_from_the_rule():
    """article's caption above a table sits on the table (belowcaptionskip 0pt): each float
    sets a skip below its caption before \toprule."""
    for tex in (pt.normality_latex(many_models(80), "n"),
                pt.normality_latex(many_models(8), "n")):
        for chunk in tex.split(r"\begin{table*}")[1:]:
            before = chunk.split(r"\toprule", 1)[0]
            assert r"\setlength{\belowcaptionskip}{" in before.split(r"\caption", 1)[0]
            skip = re.search(r"\\belowcaptionskip\}\{(\d+(\.\d+)?)pt\}", before)
            assert skip and float(skip.group(1)) >= 4, before


@pytest.mark.skipif(not have_pdflatex(), reason="pdflatex is not installed")
@pytest.mark.parametrize("twocolumn", [False, True], ids=["article", "twocolumn"])
def test_every_table_compiles_on_its_pages_in_both_classes(written, tmp_path, twocolumn):
    """Every .tex the writer makes — ours, the long ones (80 models; the committed reference
    claims of both profiles, the quick ones twice over: three-digit row numbers), the catalog
    of every view — in a one-column and in a two-column article, each table on pages of its
    own: no overfull or underfull box, no float too large, no label twice."""
    from tests.test_paper_tables import catalog

    long = tmp_path / "long"
    pt.write_table(many_models(80), long, "normality", pt.normality_latex(many_models(80), "n"))
    extra = [long / "normality.tex"]
    for profile, times in (("quick", 2), ("standard", 1)):
        table = pd.read_csv(REFERENCE / f"claims-{profile}.csv")
        files = pt.write_all(tmp_path / profile, profile, claims=pd.concat([table] * times))
        extra += [p for p in files if p.suffix == ".tex"]
    extra += [p for p in pt.write_all(tmp_path / "catalog", "catalog", claims=catalog())
              if p.suffix == ".tex"]
    log = compile_tables([*written, *extra], tmp_path / "doc", twocolumn=twocolumn)
    assert pages(log) >= len(written) + len(extra)


@pytest.mark.skipif(not have_pdflatex(), reason="pdflatex is not installed")
def test_two_profiles_tables_in_one_paper(tmp_path):
    """A paper \\inputs the quick and the standard profile's tables: every label differs."""
    paths = []
    for profile in ("quick", "standard"):
        table = pd.read_csv(REFERENCE / f"claims-{profile}.csv")
        paths += sorted(p for p in pt.write_all(tmp_path / profile, profile, claims=table)
                        if p.suffix == ".tex")
    labels = [re.findall(r"\\label\{([^}]*)\}", p.read_text()) for p in paths]
    flat = [x for found in labels for x in found]
    assert len(flat) == len(set(flat)) == len(paths)
    assert "tab:claims-distribution-quick" in flat and "tab:claims-distribution-standard" in flat
    compile_tables(paths, tmp_path / "doc", twocolumn=True)


@pytest.mark.skipif(not have_pdflatex(), reason="pdflatex is not installed")
def test_number_columns_are_as_wide_as_their_widest_cell(tmp_path):
    """The full profile's convergence table: a billion elements sent ('1115.58') beside the
    wire bytes collided in a fixed-width column (overfull 6.3 pt); a number column is as wide
    as its widest cell, in both classes."""
    runs = [fake_run("convergence-resnet20-cifar10", "topk", s, m, workers=16,
                     selected=34_865_000 + s, wire=558_000_000 + s, payload=557_000_000)
            for s, m in enumerate([0.90, 0.92, 0.94])]
    # dense: every element of a 14.7M-parameter model from 16 workers, 30,000 steps' worth
    runs += [fake_run("convergence-resnet20-cifar10", "dense", 0, 0.95, workers=16,
                      selected=220_000_000_000, wire=14_000_000_000_000,
                      payload=14_000_000_000_000)]
    table = pt.convergence_table(runs)
    assert table["elements"].max() > 1e9
    tex = pt.convergence_latex(table, "c")
    path = tmp_path / "convergence.tex"
    path.write_text(tex)
    for twocolumn in (False, True):
        compile_tables([path], tmp_path / f"doc{twocolumn}", twocolumn=twocolumn)


@pytest.mark.skipif(not have_pdflatex(), reason="pdflatex is not installed")
def test_the_paper_views_of_the_reference_claims_fit_a_few_pages(tmp_path):
    """The compact views stay compact: the convergence and outer claims of the quick profile
    on a page each; the distribution claims, a line per experiment, condition, recorder
    density and phase (never pooled: 40 lines in the quick profile, a third of them the outer
    loop's), on five; the predictions, every recorded approximate selector at P = 16 per
    network and training condition (515 rows), on nine."""
    table = pd.read_csv(REFERENCE / "claims-quick.csv")
    files = {p.stem: p for p in pt.write_all(tmp_path, "quick", claims=table)
             if p.suffix == ".tex"}
    budget = {"claims-distribution": 5, "claims-convergence": 1, "claims-outer": 1,
              "claims-predictions": 9}
    for name, most in budget.items():
        assert pages(compile_tables([files[name]], tmp_path / name)) <= most, name


@pytest.mark.skipif(not have_pdflatex(), reason="pdflatex is not installed")
def test_the_checks_catch_what_pdflatex_would_print_wrongly(tmp_path):
    """The structure check refuses a raw <=; pdflatex reports a table too wide, a float taller
    than its page, and a reference to a table the article does not hold."""
    raw = tmp_path / "raw.tex"
    raw.write_text("\\begin{tabular}{ll}\n\\toprule\na & delta <= b \\\\\n\\bottomrule\n"
                   "\\end{tabular}\n")
    with pytest.raises(AssertionError, match="raw <"):
        check_structure(raw)
    wide = tmp_path / "wide.tex"
    wide.write_text("\\begin{tabular}{" + "l" * 8 + "}\n\\toprule\n"
                    + " & ".join(["a-rather-long-unbreakable-cell"] * 8) + " \\\\\n"
                    "\\bottomrule\n\\end{tabular}\n")
    with pytest.raises(AssertionError, match="Overfull"):
        compile_tables([wide], tmp_path / "doc")
    tall = tmp_path / "tall.tex"
    tall.write_text("\\begin{table}\\centering\\begin{tabular}{l}\\toprule\n"
                    + "".join(f"row {i} \\\\\n" for i in range(90))
                    + "\\bottomrule\\end{tabular}\\end{table}\n")
    with pytest.raises(AssertionError, match="Float too large"):
        compile_tables([tall], tmp_path / "tall")
    dangling = tmp_path / "dangling.tex"
    dangling.write_text("See Table~\\ref{tab:elsewhere}.\n")
    with pytest.raises(AssertionError, match="Reference"):
        compile_tables([dangling], tmp_path / "dangling")
    loose = tmp_path / "loose.tex"  # a cell stretched past its badness: underfull
    loose.write_text("\\begin{tabular}{p{3cm}}\\toprule\n\\hspace{0pt}a b c d e f g h i j k l "
                     "m n\\linebreak o\\\\\n\\bottomrule\\end{tabular}\n")
    with pytest.raises(AssertionError, match="Underfull"):
        compile_tables([loose], tmp_path / "loose")
    twice = tmp_path / "twice.tex"
    twice.write_text("\\begin{table}\\caption{a}\\label{tab:x}\\end{table}"
                     "\\begin{table}\\caption{b}\\label{tab:x}\\end{table}\n")
    with pytest.raises(AssertionError, match="multiply defined"):
        compile_tables([twice], tmp_path / "twice")


def test_column_count_reads_every_kind_of_spec():
    assert column_count("lrrr") == 4
    assert column_count(r"r>{\raggedright\arraybackslash\hsize=0.5\hsize}Xl") == 3
    assert column_count(r"@{}>{\raggedright}p{\dimexpr 0.1\linewidth-2\tabcolsep}p{3cm}@{}") == 2
    assert np.isfinite(column_count("c"))


@pytest.fixture(scope="module")
def small(tmp_path_factory, data_root):
    from tests._figures_results import shared_small_results

    return shared_small_results(tmp_path_factory, data_root)


def test_the_tables_command_writes_every_table_of_any_runs(small, tmp_path, capsys):
    """`topkscope tables` on a results root that `topkscope figures` wrote (its claims.csv)
    and on an experiment folder (claims tabulated now): every table compiles on its pages."""
    from topkscope.cli import main

    assert main(["tables", str(small.root), "--tables", str(tmp_path / "all"),
                 "--no-progress"]) == 0
    written = sorted((tmp_path / "all").glob("*.tex"))
    assert {p.stem for p in written} >= {"claims", "claims-distribution", "contraction",
                                         "convergence", "normality", "selectors", "speed"}
    assert "tables: " in capsys.readouterr().out
    claims_csv = pd.read_csv(tmp_path / "all" / "claims.csv")
    assert len(claims_csv) == len(pd.read_csv(small.root / "claims.csv"))  # the profile's own
    assert main(["tables", str(small.root / "tiny-seeds"), "--tables", str(tmp_path / "seeds"),
                 "--no-progress"]) == 0
    seeds = sorted((tmp_path / "seeds").glob("*.tex"))
    assert {p.stem for p in seeds} >= {"claims", "claims-convergence", "convergence"}
    convergence = pd.read_csv(tmp_path / "seeds" / "convergence.csv")
    assert (convergence["wire_bytes"] >= convergence["payload_bytes"]).all()
    for path in [*written, *seeds]:
        check_structure(path, MAX_CLAIMS_COLUMNS if path.stem == "claims" else None)
    if have_pdflatex():  # two writes of one profile: one paper each (their labels agree)
        compile_tables(written, tmp_path / "doc")
        compile_tables(seeds, tmp_path / "doc-seeds", twocolumn=True)
    # bad input: one line, exit 2, nothing written
    assert main(["tables", str(tmp_path / "nowhere"), "--tables", str(tmp_path / "bad")]) == 2
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "bad").exists()


def test_the_tables_command_writes_the_tables_of_committed_claims(tmp_path, capsys):
    """`topkscope tables --claims FILE`: the claims views and the appendix of a committed
    claims table, their labels carrying the profile its rows name; a file that is no claims
    table, or none at all: one line, exit 2, nothing written."""
    from topkscope.cli import main

    out = tmp_path / "tables"
    assert main(["tables", "--claims", str(REFERENCE / "claims-standard.csv"),
                 "--tables", str(out)]) == 0
    stems = {p.stem for p in out.glob("*.tex")}
    assert {"claims", "claims-distribution", "claims-convergence", "claims-outer",
            "claims-predictions"} <= stems
    assert r"\label{tab:claims-distribution-standard}" in \
        (out / "claims-distribution.tex").read_text()
    assert "tables: " in capsys.readouterr().out
    for path in sorted(out.glob("*.tex")):
        check_structure(path, MAX_CLAIMS_COLUMNS if path.stem == "claims" else None)
    if have_pdflatex():
        compile_tables(sorted(out.glob("*.tex")), tmp_path / "doc", twocolumn=True)
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    for given in (bad, tmp_path / "missing.csv"):
        assert main(["tables", "--claims", str(given), "--tables", str(tmp_path / "no")]) == 2
        err = capsys.readouterr().err
        assert str(given.name) in err and len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "no").exists()
    assert main(["tables", "--tables", str(tmp_path / "no")]) == 2
    assert "--claims" in capsys.readouterr().err
