"""Every .tex table we write: well formed everywhere (columns, cells, math, no raw < > |),
and compiled by pdflatex with booktabs and the packages of texlive-latex-base/-recommended
where pdflatex is installed (skipped otherwise)."""

from __future__ import annotations

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
)
from tests.test_claims_evidence import five_seeds, recorded_run
from tests.test_paper_tables import fake_run
from topkscope import claims
from topkscope.analysis.runs import load
from topkscope.claims import speedup
from topkscope.hooks import Recorder
from topkscope.perf import report
from topkscope.publish import paper_tables as pt

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> list[Path]:
    """write_all on every input it takes: a recorded run, convergence runs, claims with every
    section (distribution per condition, failed seeds, predictions), a battery, a bench."""
    out = tmp_path_factory.mktemp("tables")
    with Recorder(out / "run", densities=[0.01, 0.1], sparsifiers=["gaussiank"]) as rec:
        for step in range(4):
            rec.record(step, 0, u=torch.randn(2000), layout=[("w", 0, 2000)])
    run = load(out / "run")
    run.manifest.update(model="fnn3", density=0.01)
    table = claims.build([recorded_run(lambda r: r.standard_normal(4000), density=0.001,
                                       schedule="paper", snapshot_steps=(4,)),
                          *five_seeds([0.951, 0.959, 0.956, 0.0, 0.0], {3: 0.62, 4: None})])
    scaling, _ = report.scaling_table(["fnn3"], ["1gbe"], [16], selection=pd.DataFrame({
        "method": ["topk", "gaussiank"], "d": [199_210] * 2, "density": [0.001] * 2,
        "distribution": ["normal"] * 2, "median_ms": [2.0, 1.0], "device": ["cpu"] * 2}),
        compute_s=0.01)
    table = pd.concat([table, speedup.claims_rows(scaling, errors={"no-overlap": 0.05,
                                                                  "wfbp": 0.3})])
    battery = pd.DataFrame({"model": ["m"] * 2, "step": [1, 2], "statistic": ["ks_D"] * 2,
                            "value": [0.1, 0.3]})
    bench = pd.DataFrame({"method": ["topk"], "d": [100], "density": [0.01],
                          "distribution": ["normal"], "median_ms": [2.0],
                          "ratio_to_topk": [1.0], "device": ["cpu"]})
    convergence = [fake_run("conv", "topk", s, m) for s, m in enumerate([0.90, 0.92, 0.94])]
    files = pt.write_all(out / "tables", "quick", [run], convergence, table, battery, bench)
    return sorted((p for p in files if p.suffix == ".tex"), key=lambda p: p.stem)


def test_every_table_is_written_and_well_formed(written):
    assert [p.stem for p in written] == ["claims", "claims-evidence", "claims-rules",
                                         "contraction", "convergence", "normality",
                                         "selectors", "speed"]
    columns = {p.stem: check_structure(p, MAX_CLAIMS_COLUMNS if p.stem == "claims" else None)
               for p in written}
    assert columns["claims"] == len(pt.CLAIMS_HEADER) == 8
    text = next(p for p in written if p.stem == "claims").read_text()
    assert r"$\delta \le (1-k/d)^2$" in text and "||" not in text and "<=" not in text
    assert "2 failed" in text and "$-$" in text  # failed seeds; signs as math


def test_the_claims_of_the_committed_reference_are_well_formed(tmp_path):
    table = pd.read_csv(REPO / "results" / "reference" / "claims-quick.csv")
    files = pt.write_claims_tables(table, tmp_path, pt.caption("Claims", "reference", "quick"))
    for tex in [p for p in files if p.suffix == ".tex"]:
        check_structure(tex, MAX_CLAIMS_COLUMNS)


@pytest.mark.skipif(not have_pdflatex(), reason="pdflatex is not installed")
def test_every_table_compiles_and_fits_the_text_width(written, tmp_path):
    """Ours, and the committed reference claims twice over (three-digit row numbers)."""
    reference = pd.read_csv(REPO / "results" / "reference" / "claims-quick.csv")
    files = pt.write_claims_tables(pd.concat([reference, reference]), tmp_path / "reference",
                                   pt.caption("Claims", "reference", "quick"))
    assert len(reference) * 2 >= 100
    compile_tables([*written, *(p for p in files if p.suffix == ".tex")], tmp_path / "doc")


@pytest.mark.skipif(not have_pdflatex(), reason="pdflatex is not installed")
def test_the_checks_catch_what_pdflatex_would_print_wrongly(tmp_path):
    """The structure check refuses a raw <=, and pdflatex reports a table that is too wide."""
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


def test_column_count_reads_every_kind_of_spec():
    assert column_count("lrrr") == 4
    assert column_count(r"r>{\raggedright\arraybackslash\hsize=0.5\hsize}Xl") == 3
    assert column_count(r"@{}>{\raggedright}p{\dimexpr 0.1\linewidth-2\tabcolsep}p{3cm}@{}") == 2
    assert np.isfinite(column_count("c"))
