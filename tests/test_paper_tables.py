"""Tables for papers: each .tex holds the same numbers as its CSV; the builders' values."""

import math
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from topkscope.analysis.runs import load
from topkscope.hooks import Recorder
from topkscope.publish import paper_tables as pt

_UNESCAPE = {v: k for k, v in pt._LATEX_SPECIAL.items()}


def read_tex(path: Path) -> tuple[str, list[str], list[list[str]]]:
    """(caption, header, rows) of a booktabs table, cells unescaped; no LaTeX compiler."""
    text = path.read_text()
    assert text.count(r"\toprule") == text.count(r"\midrule") == text.count(r"\bottomrule") == 1
    cap = re.search(r"\\caption\{(.*)\}\n", text).group(1)
    body = text.split(r"\toprule")[1].split(r"\bottomrule")[0]
    head, rows = body.split(r"\midrule")

    def cells(line: str) -> list[str]:
        line = line.strip()
        assert line.endswith(r"\\"), line
        parts = re.split(r"(?<!\\) & ", line[:-2].strip())
        out = []
        for p in parts:
            for esc, ch in _UNESCAPE.items():
                p = p.replace(esc, ch)
            out.append(p)
        return out

    return cap, cells(head), [cells(r) for r in rows.strip().splitlines()]


def assert_tex_matches_csv(csv: Path, tex: Path) -> None:
    frame = pd.read_csv(csv, keep_default_na=False, na_values=[""])
    _, header, rows = read_tex(tex)
    assert header == list(frame.columns)
    assert len(rows) == len(frame)
    for row, (_, expected) in zip(rows, frame.iterrows()):
        for cell, value in zip(row, expected):
            if isinstance(value, str):
                assert cell == value
            elif pd.isna(value):
                assert cell == "--"
            elif float(value).is_integer() and "." not in cell and "e" not in cell:
                assert int(cell) == int(value)
            else:  # SIGNIFICANT significant digits: relative error at most 5e-4
                assert float(cell) == pytest.approx(float(value), rel=5e-4, abs=1e-300)


def test_a_table_round_trips_numbers_text_and_gaps(tmp_path):
    frame = pd.DataFrame({
        "model": ["resnet_20 & co", "fnn3", "50% {x}"],
        "density": [0.001, 0.01, 0.1],
        "records": [12, 7, 3],
        "ratio": [0.987654321, float("nan"), 1.23456789e-7],
        "big": [123456.789, 2.0, -0.5],
    })
    text = pt.caption("delta_emp of u", "FNN-3 on MNIST, 2 workers", "quick")
    csv, tex = pt.write_table(frame, tmp_path, "demo", text)
    assert_tex_matches_csv(csv, tex)
    cap, header, rows = read_tex(tex)
    assert cap == r"delta\_emp of u (FNN-3 on MNIST, 2 workers; profile quick)."
    assert rows[1][3] == "--" and rows[0][0] == "resnet_20 & co"
    assert r"\begin{tabular}{lrrrr}" in tex.read_text() and r"\label{tab:demo}" in tex.read_text()


def test_bad_table_names_are_refused(tmp_path):
    with pytest.raises(ValueError, match="table name 'a/b'"):
        pt.write_table(pd.DataFrame({"x": [1]}), tmp_path, "a/b", "c")


def test_contraction_table_equals_the_exact_ratio_of_known_vectors(tmp_path):
    d, layout = 200, [("w", 0, 150), ("b", 150, 50)]
    vectors = [torch.linspace(-1, 1, d, dtype=torch.float64) ** (1 + step) for step in range(3)]
    with Recorder(tmp_path / "run", densities=[0.05, 0.2]) as rec:
        for step, u in enumerate(vectors):
            rec.record(step, 0, u=u, layout=layout)
    run = load(tmp_path / "run")
    run.manifest["model"] = "toy"
    table = pt.contraction_table([run])
    assert list(table["density"]) == [0.05, 0.2] and list(table["records"]) == [3, 3]
    for rho, row in table.set_index("density").iterrows():
        k = max(1, round(rho * d))
        exact = []
        for u in vectors:
            mags = np.sort(np.abs(u.numpy()))[::-1] ** 2
            exact.append(mags[k:].sum() / mags.sum())
        assert row["delta_emp"] == pytest.approx(np.median(exact), rel=1e-9)
        assert row["classic_bound"] == pytest.approx(1 - k / d)
        assert row["paper_bound"] == pytest.approx((1 - k / d) ** 2)
        t = stats.norm.isf(k / d / 2)  # the Gaussian value, written out
        gaussian = 1 - k / d - 2 * t * stats.norm.pdf(t)
        assert row["share_at_most_gaussian"] == pytest.approx(np.mean(np.array(exact)
                                                                      <= gaussian))
        assert row["share_at_most_paper"] == pytest.approx(np.mean(np.array(exact)
                                                                   <= (1 - k / d) ** 2))
        assert row["condition"] == "warmup=none"  # a recorder run without a manifest density
    csv, tex = pt.write_table(table, tmp_path, "contraction", pt.caption("m", "toy", "quick"))
    assert_tex_matches_csv(csv, tex)


def fake_run(experiment, sparsifier, seed, metric):
    ev = pd.DataFrame({"step": [10, 20], "epoch": [0, 1], "split": ["test", "test"],
                       "loss": [1.0, 0.5], "metric": [metric - 0.1, metric],
                       "metric_name": ["accuracy", "accuracy"]})
    train = pd.DataFrame({"step": [1, 2], "loss": [2.0, 1.5]})
    return SimpleNamespace(manifest={"experiment": experiment, "sparsifier": sparsifier,
                                     "seed": seed}, eval=ev, train=train, path=Path("x"))


def test_convergence_table_mean_and_student_t_interval_over_seeds(tmp_path):
    runs = [fake_run("conv", "topk", s, m) for s, m in enumerate([0.90, 0.92, 0.94])]
    runs.append(fake_run("conv", "dense", 0, 0.95))
    table = pt.convergence_table(runs).set_index("sparsifier")
    topk = table.loc["topk"]
    half = 4.302652729911275 * 0.02 / math.sqrt(3)  # t_{0.975, 2} * s / sqrt(n)
    assert topk["n_seeds"] == 3 and topk["mean"] == pytest.approx(0.92)
    assert (topk["ci_low"], topk["ci_high"]) == pytest.approx((0.92 - half, 0.92 + half))
    assert table.loc["dense", "n_seeds"] == 1 and math.isnan(table.loc["dense", "ci_low"])
    csv, tex = pt.write_table(table.reset_index(), tmp_path, "convergence",
                              pt.caption("final accuracy", "conv", "quick"))
    assert_tex_matches_csv(csv, tex)


def test_normality_selectors_and_speed_tables(tmp_path):
    battery = pd.DataFrame({"model": ["m"] * 4, "step": [1, 2, 1, 2],
                            "statistic": ["ks_D", "ks_D", "qq_r", "qq_r"],
                            "value": [0.1, 0.3, 0.99, 0.97]})
    norm = pt.normality_table(battery).set_index("statistic")
    assert norm.loc["ks_D", "median"] == pytest.approx(0.2) and norm.loc["qq_r", "min"] == 0.97
    bench = pd.DataFrame({"method": ["topk", "gaussiank", "gaussiank"], "d": [100, 100, 100],
                          "density": [0.01] * 3, "distribution": ["normal", "normal", "laplace"],
                          "median_ms": [2.0, 1.0, 1.5], "ratio_to_topk": [1.0, 0.5, 0.75]})
    speed = pt.speed_table(bench)
    assert list(speed["method"]) == ["gaussiank", "topk"]
    with Recorder(tmp_path / "run", densities=[0.1], sparsifiers=["gaussiank"]) as rec:
        for step in range(4):
            rec.record(step, 0, u=torch.randn(500), layout=[("w", 0, 500)])
    run = load(tmp_path / "run")
    sel = pt.selectors_table([run])
    assert list(sel["selector"]) == ["gaussiank"] and sel["records"].iloc[0] == 4
    u = run.stats[(run.stats.layer == "__global__") & (run.stats.kind == "u")]
    assert sel["median_recall"].iloc[0] == pytest.approx(u["gaussiank_recall"].median())
    for name, frame in [("normality", norm.reset_index()), ("speed", speed), ("selectors", sel)]:
        csv, tex = pt.write_table(frame, tmp_path, name, pt.caption(name, "toy", None))
        assert_tex_matches_csv(csv, tex)
        assert "profile unknown" in read_tex(tex)[0]
