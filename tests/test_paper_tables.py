"""Tables for papers: the builders' values against direct computations, and the .tex a reader
sees: readable headers with units, a fixed number of decimals per column, the CSV's numbers."""

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

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "results" / "reference"


def body_rows(tex: str) -> list[list[str]]:
    """The data rows of a table written by to_latex: cells split at '&' (the group rows that
    span the table, the head, the '(continued)' line left out)."""
    text = tex.split(r"\midrule", 1)[1]
    if r"\endfoot" in text:  # a longtable: the rows follow its foot
        text = text.split(r"\endfoot", 1)[1]
    text = text.split(r"\bottomrule")[0] if r"\endfoot" not in tex else \
        text.split(r"\end{longtable}")[0]
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if not line.endswith(r"\\") or line.startswith(r"\multicolumn"):
            continue
        rows.append([c.strip() for c in re.split(r"(?<!\\)&", line[:-2])])
    return rows


def head(tex: str) -> list[str]:
    line = tex.split(r"\toprule", 1)[1].strip().splitlines()[0]
    return [c.strip() for c in re.split(r"(?<!\\)&", line.rstrip("\\ "))]


def assert_fixed_decimals(rows: list[list[str]], column: int, decimals: int) -> None:
    for row in rows:
        cell = row[column].strip("$")
        if cell != "--":
            assert re.fullmatch(rf"-?\d+\.\d{{{decimals}}}", cell), (column, cell)


def test_cells_and_names():
    assert pt.fixed(3)(0.98765) == "0.988" and pt.fixed(1, 100)(0.5) == "50.0"
    assert pt.fixed(2)(-1.234) == "$-1.23$" and pt.fixed(2)(float("nan")) == "--"
    assert pt.whole(1234567) == r"1\,234\,567"
    assert pt.breakable("warmup=custom[0.1]") == r"warmup=\allowbreak{}custom[\allowbreak{}0.1]"
    assert pt.caption(r"$\delta$ of u", "fnn3_x", "quick") == \
        r"$\delta$ of u (fnn3\_x; profile quick)."
    with pytest.raises(ValueError, match="table name 'a/b'"):
        pt.write_table(pd.DataFrame({"x": [1]}), Path("."), "a/b", "")


def test_contraction_table_equals_the_exact_ratio_of_known_vectors(tmp_path):
    d, layout = 200, [("w", 0, 150), ("b", 150, 50)]
    vectors = [torch.linspace(-1, 1, d, dtype=torch.float64) ** (1 + step) for step in range(3)]
    with Recorder(tmp_path / "run", densities=[0.05, 0.2]) as rec:
        for step, u in enumerate(vectors):
            rec.record(step, 0, u=u, layout=layout)
    run = load(tmp_path / "run")
    run.manifest["model"] = "fnn3"
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
    tex = pt.contraction_latex(table, pt.caption("m", "toy", "quick"))
    rows = body_rows(tex)
    # the model and condition once, as a group row
    assert len(rows) == 2 and r"\emph{FNN-3; warmup=\allowbreak{}none}" in tex
    assert head(tex)[:3] == [r"$\rho$", "Rows", r"$\delta$"]
    for column in (2, 3, 4, 5):  # δ and the references: four decimals, as the CSV rounds
        assert_fixed_decimals(rows, column, 4)
    assert [float(r[2]) for r in rows] == [round(v, 4) for v in table["delta_emp"]]
    assert [r[6] for r in rows] == [f"{100 * v:.0f}" for v in table["share_at_most_paper"]]
    csv, written = pt.write_table(table, tmp_path, "contraction", tex)
    pd.testing.assert_frame_equal(pd.read_csv(csv), table, check_dtype=False)
    assert written.read_text() == tex


def fake_run(experiment, sparsifier, seed, metric, *, workers=2, selected=10, wire=100,
             payload=80):
    ev = pd.DataFrame({"step": [10, 20], "epoch": [0, 1], "split": ["test", "test"],
                       "loss": [1.0, 0.5], "metric": [metric - 0.1, metric],
                       "metric_name": ["accuracy", "accuracy"]})
    train = pd.DataFrame({"step": [1, 2], "loss": [2.0, 1.5], "selected": [selected] * 2,
                          "bytes_sent": [wire] * 2, "payload_bytes": [payload] * 2})
    return SimpleNamespace(manifest={"experiment": experiment, "sparsifier": sparsifier,
                                     "seed": seed, "model": "fnn3", "dataset": "mnist",
                                     "density": 0.01, "world_size": workers},
                           eval=ev, train=train, path=Path("x"))


def test_convergence_table_mean_interval_and_traffic_over_seeds():
    runs = [fake_run("conv", "topk", s, m, wire=100 + s) for s, m in enumerate([0.90, 0.92,
                                                                                  0.94])]
    runs.append(fake_run("conv", "dense", 0, 0.95, selected=1000, wire=8000, payload=8000))
    table = pt.convergence_table(runs)
    assert list(table["sparsifier"]) == ["dense", "topk"]  # Dense first
    topk = table.set_index("sparsifier").loc["topk"]
    half = 4.302652729911275 * 0.02 / math.sqrt(3)  # t_{0.975, 2} * s / sqrt(n)
    assert topk["n_seeds"] == 3 and topk["mean"] == pytest.approx(0.92)
    assert (topk["ci_low"], topk["ci_high"]) == pytest.approx((0.92 - half, 0.92 + half))
    # two steps, two workers, 10 elements each; wire 100, 101, 102 bytes per step
    assert topk["elements"] == 40 and topk["wire_bytes"] == pytest.approx(2 * 101)
    assert topk["payload_bytes"] == 160
    dense = table.set_index("sparsifier").loc["dense"]
    assert dense["n_seeds"] == 1 and math.isnan(dense["ci_low"]) and math.isnan(dense["density"])
    tex = pt.convergence_latex(table, "c")
    rows = body_rows(tex)
    assert rows[0][0] == "Dense" and rows[0][2] == "--"  # no density for Dense
    assert rows[1][4] == f"92.00 [{100 * (0.92 - half):.2f}, {100 * (0.92 + half):.2f}]"
    assert rows[0][4] == "95.00"  # one seed: no interval
    assert "final accuracy, \\%" in tex and "Wire (MB)" in head(tex)[7]


def laplace_run(tmp_path: Path, name: str, draw) -> object:
    with Recorder(tmp_path / name, densities=[0.01], snapshot_schedule=[0, 1, 2]) as rec:
        for step in range(3):
            rec.record(step, 0, u=torch.from_numpy(draw(step)), layout=[("w", 0, 4000)])
    run = load(tmp_path / name)
    run.manifest.update(model=name, sparsifier="topk")
    return run


def test_normality_table_gives_the_moments_effect_sizes_and_fitted_family(tmp_path):
    rng = np.random.default_rng(0)
    normal = laplace_run(tmp_path, "normal", lambda s: rng.standard_normal(4000))
    laplace = laplace_run(tmp_path, "laplace", lambda s: rng.laplace(size=4000))
    table = pt.normality_table([normal, laplace]).set_index("model")
    assert list(table["snapshots"]) == [3, 3]
    assert table.loc["laplace", "best_family"] == "laplace" and \
        table.loc["laplace", "gennorm_beta"] == pytest.approx(1.0, abs=0.2)
    assert table.loc["normal", "gennorm_beta"] == pytest.approx(2.0, abs=0.35)
    assert table.loc["laplace", "excess_kurtosis"] == pytest.approx(3.0, abs=0.8)
    u = normal.snapshot(1, 0).astype(np.float64)
    assert table.loc["normal", "ks_D"] < table.loc["laplace", "ks_D"]
    skews = [stats.skew(normal.snapshot(s, 0).astype(np.float64)) for s in range(3)]
    assert table.loc["normal", "skew"] == pytest.approx(np.median(skews), rel=1e-4, abs=1e-6)
    assert u.size == 4000
    tex = pt.normality_latex(table.reset_index(), "n")
    assert head(tex)[:5] == ["Method", "Condition", "Snap.", "Skew", r"Ex.\ kurt."]
    assert r"\emph{laplace}" in tex  # the model once, as a group row
    assert "anderson" not in tex and "n\\_sub" not in tex  # no raw identifiers
    assert "Laplace (" in tex


def test_selectors_and_speed_tables(tmp_path):
    bench = pd.read_csv(REFERENCE / "bench-cpu" / "selection.csv")
    speed = pt.speed_table(bench)
    normal = bench[bench["distribution"] == "normal"]
    assert len(speed) == len(normal) and set(speed["method"]) == set(normal["method"])
    tex = pt.speed_latex(speed, "s")
    rows = body_rows(tex)
    assert len(rows) == 2 * normal["method"].nunique()  # one row per method and density
    one = normal[(normal["method"] == "gaussiank") & (normal["density"] == 0.001)
                 & (normal["d"] == 1_000_000)].iloc[0]
    assert f"{one['median_ms']:.2f} ({one['ratio_to_topk']:.2f})" in tex
    with Recorder(tmp_path / "run", densities=[0.1], sparsifiers=["gaussiank"]) as rec:
        for step in range(4):
            rec.record(step, 0, u=torch.randn(500), layout=[("w", 0, 500)])
    run = load(tmp_path / "run")
    sel = pt.selectors_table([run])
    assert list(sel["selector"]) == ["gaussiank"] and sel["records"].iloc[0] == 4
    u = run.stats[(run.stats.layer == "__global__") & (run.stats.kind == "u")]
    assert sel["median_recall"].iloc[0] == pytest.approx(u["gaussiank_recall"].median())
    rows = body_rows(pt.selectors_latex(sel, "x"))
    assert rows[0][1] == "Gaussian-k" and rows[0][5] == f"{u['gaussiank_recall'].median():.3f}"


@pytest.fixture(scope="module")
def reference() -> pd.DataFrame:
    return pd.read_csv(REFERENCE / "claims-quick.csv")


def test_the_distribution_view_shows_each_claims_share_and_verdict(reference):
    view = pt.claims_distribution_table(reference)
    row = view[(view["model"] == "fnn3") & (view["condition"] == "warmup=none; rho=0.001")]
    source = reference[(reference["model"] == "fnn3") & (reference["section"] == "distribution")
                       & (reference["condition"] == "warmup=none; rho=0.001")].set_index(
        "claim")
    for claim in pt.DISTRIBUTION_VIEW:
        assert row[f"{claim}_fraction"].iloc[0] == source.loc[claim, "fraction"]
        assert row[f"{claim}_verdict"].iloc[0] == source.loc[claim, "verdict"]
    tex = pt.claims_distribution_latex(view, "d")
    frac = source.loc["gaussian_like", "fraction"]
    assert f"{100 * frac:.0f} {pt.VERDICT_SHORT[source.loc['gaussian_like', 'verdict']]}" in tex


def test_the_convergence_view_pairs_each_accuracy_row_with_its_traffic_verdict(reference):
    view = pt.claims_convergence_table(reference)
    conv = reference[reference["section"] == "convergence"]
    assert len(view) == conv["claim"].str.endswith("_accuracy").sum()
    row = view[(view["sparsifier"] == "gaussiank-2019")
               & (view["condition"] == "warmup=paper; rho=0.001")].iloc[0]
    acc = conv[(conv["claim"] == "gaussiank_accuracy") & (conv["sparsifier"] == "gaussiank-2019")
               & (conv["condition"] == "warmup=paper; rho=0.001")].iloc[0]
    traffic = conv[(conv["claim"] == "gaussiank_traffic")
                   & (conv["sparsifier"] == "gaussiank-2019")
                   & (conv["condition"] == "warmup=paper; rho=0.001")].iloc[0]
    assert (row["diff_mean"], row["ci_low"], row["traffic_target"]) == \
        (acc["diff_mean"], acc["ci_low"], acc["traffic_target"])
    assert (row["accuracy_verdict"], row["traffic_verdict"]) == (acc["verdict"],
                                                                traffic["verdict"])
    tex = pt.claims_convergence_latex(view, "c")
    show = pt.fixed(2)  # a negative bound is typeset as math
    cells = f"{show(acc['diff_mean'])} [{show(acc['ci_low'])}, {show(acc['ci_high'])}]"
    assert cells in tex and "points of accuracy" in tex


def test_the_predictions_view_has_one_row_per_setting_and_a_column_per_baseline(reference):
    view = pt.claims_predictions_table(reference)
    speedups = reference[reference["claim"].str.contains("speedup_p16")]
    assert len(view) * 3 == len(speedups)
    row = speedups.iloc[0]
    hit = view[(view["model"] == row["model"]) & (view["sparsifier"] == row["sparsifier"])
               & (view["network"] == row["network"])].iloc[0]
    assert hit["Dense_breakeven_ms"] == row["breakeven_ms"]
    assert hit["Dense_verdict"] == row["verdict"]
