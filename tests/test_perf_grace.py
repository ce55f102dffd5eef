"""topkscope.perf.grace, topkscope.claims.grace and the GRACE figure: does compression pay in the
GRACE release, and our step-time model judged on it. The shares are recomputed by slow obvious
loops over the committed measurement rows (read with the csv module, float64), a model row is
worked out by hand from the alpha-beta formulas, and the committed tables, claims rows and
docs/scaling.md's tables are regenerated and compared."""

from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from topkscope.claims import grace as cg
from topkscope.claims import verdicts
from topkscope.importers import grace as imp
from topkscope.perf import grace as pg
from topkscope.perf.networks import LINE_RATES

DOCS = imp.COMMITTED.parents[3] / "docs"


@pytest.fixture(scope="module")
def run_table():
    return pg.runs()


@pytest.fixture(scope="module")
def raw():
    """The committed measurement rows as plain dicts (csv module), one per measurement."""
    with open(imp.COMMITTED / imp.MEASUREMENTS, newline="") as fh:
        return list(csv.DictReader(fh))


def _rates(raw, mode):
    """{run_id: (settings dict, throughput)} of one mode, the task's throughput metric."""
    out = {}
    for r in raw:
        if r["mode"] == mode and r["metric"] == imp.throughput_metric(r["task"]):
            out[r["run_id"]] = (r, float(r["value"]))
    return out


def test_the_pays_shares_by_a_slow_loop_over_the_raw_rows(run_table, raw):
    runs = _rates(raw, "throughput")
    same = ("task", "model", "workers", "bandwidth_gbps", "backend", "cluster")
    speedups: dict[str, list[float]] = {}
    for row, rate in runs.values():
        if row["compressor"] == "none":
            continue
        dense = [r for r, _ in runs.values()
                 if r["compressor"] == "none" and all(r[k] == row[k] for k in same)]
        assert len(dense) == 1, row["run_id"]
        speedups.setdefault(row["compressor"], []).append(rate / runs[dense[0]["run_id"]][1])
    summary = pg.pays_summary(pg.pairs(run_table)).set_index("compressor")
    assert set(summary.index) == set(speedups) and len(speedups) == 16
    for compressor, values in speedups.items():
        s = summary.loc[compressor]
        assert s["settings"] == len(values)
        assert s["pays"] == sum(v > 1.0 for v in values)
        assert s["median_speedup"] == pytest.approx(statistics.median(values), rel=1e-12)
        assert s["min_speedup"] == pytest.approx(min(values), rel=1e-12)
        assert s["max_speedup"] == pytest.approx(max(values), rel=1e-12)
    # the headline: Top-k beats dense in 11 of 71 settings, Random-k in 37 of 74
    assert (summary.loc["topk", "pays"], summary.loc["topk", "settings"]) == (11, 71)
    assert (summary.loc["randomk", "pays"], summary.loc["randomk", "settings"]) == (37, 74)


def test_topk_against_randk_by_a_slow_loop(run_table, raw):
    runs = _rates(raw, "throughput")
    same = ("task", "model", "workers", "bandwidth_gbps", "backend", "cluster", "ratio",
            "error_feedback")
    ratios = []
    for row, rate in runs.values():
        if row["compressor"] != "topk":
            continue
        rand = [v for r, v in runs.values()
                if r["compressor"] == "randomk" and all(r[k] == row[k] for k in same)]
        if len(rand) == 1:
            ratios.append(rate / rand[0])
    table = pg.topk_vs_randk(run_table)
    assert sorted(table["ratio_topk_randk"]) == pytest.approx(sorted(ratios), rel=1e-12)
    assert sum(r > 1 for r in ratios) == int((table["ratio_topk_randk"] > 1).sum()) == 17


def test_accuracy_differences_against_dense_by_hand(run_table):
    acc = pg.accuracy_pairs(run_table)
    row = acc[(acc["task"] == "imagenet-classification") & (acc["compressor"] == "topk")
              & (acc["setting"] == "ratio=0.01") & (acc["error_feedback"] == True)]  # noqa: E712
    assert len(row) == 1
    # two dense ResNet-50 accuracy runs on ibex: 0.7465 and 0.7463 (mean 0.7464); Top-k 0.7299
    assert row["dense_runs"].iloc[0] == 2
    assert row["difference"].iloc[0] == pytest.approx((0.7299 - 0.7464) * 100, abs=1e-9)
    ptb = acc[acc["task"] == "PTB-language_modeling"]
    assert (ptb["unit"] == "perplexity").all()
    # perplexity: lower is better, so a higher perplexity than dense is a negative difference
    worse = ptb["value"] > ptb["dense_value"]
    assert ((ptb["difference"] < 0) == worse).all()


def test_a_model_row_by_hand(run_table):
    """ResNet-50, Top-k 1% with error feedback, 8 workers at 1 Gbit/s."""
    model = pg.model_rows(run_table)
    rows = model[(model["model"] == "resnet50") & (model["compressor"] == "topk")
                 & (model["setting"] == "ratio=0.01") & (model["error_feedback"] == True)  # noqa: E712
                 & (model["workers"] == 8) & (model["mode"] == "throughput")]
    row = rows[rows["bandwidth_gbps"] == 1.0].iloc[0]
    r = run_table
    thr = r[(r["mode"] == "throughput") & (r["model"] == "resnet50")]
    dense1 = thr[(thr["compressor"] == "none") & (thr["workers"] == 1)]["rate"].item()
    dense8 = thr[(thr["compressor"] == "none") & (thr["workers"] == 8)
                 & (thr["bandwidth_gbps"] == 1.0)]["rate"].item()
    d = 102_236_324 // 4  # the dense data-volume run's bytes / 4
    k = round(0.01 * d)
    net = LINE_RATES["1gbe"]
    a, b = net.alpha, net.beta
    dense_comm = 2 * 7 * a + 2 * 7 / 8 * 4 * d * b
    topk_comm = 2 * (7 * a + 7 * 4 * k * b)  # two ring all-gathers: values, indices
    cost = []
    for bw in (10.0, 25.0):  # the held-out bandwidths, never the row's 1 Gbit/s
        sel = r[(r["model"] == "resnet50") & (r["compressor"] == "topk")
                & (r["setting"] == "ratio=0.01") & (r["error_feedback"] == True)  # noqa: E712
                & (r["workers"] == 8) & (r["bandwidth_gbps"] == bw)]
        t = sel[sel["mode"] == "throughput"]["rate"].item()
        u = sel[sel["mode"] == "upper-bound"]["rate"].item()
        cost.append(8 / t - 8 / u)
    tau = 1 / dense1 + float(np.median(cost)) + (8 / dense8 - 1 / dense1) * topk_comm / dense_comm
    assert row["d"] == d and row["count_ratio"] == pytest.approx(2_044_264 / (8 * k))
    assert row["predicted"] == pytest.approx(8 / tau * 1.0, rel=2e-4)  # count: measured bytes
    assert row["error"] == pytest.approx(row["predicted"] / row["measured"] - 1, rel=1e-12)
    assert row["pays_measured"] == (row["measured"] > dense8)
    # a row measured at one bandwidth only has no held-out compression cost
    p2 = model[(model["model"] == "resnet50") & (model["compressor"] == "topk")
               & (model["workers"] == 2) & (model["mode"] == "throughput")]
    assert (p2["reason"] == "no compression cost at another bandwidth").all()


def test_the_confusion_table_counts_the_predicted_rows(run_table):
    model = pg.model_rows(run_table)
    c = pg.confusion(model)
    done = model[(model["mode"] == "throughput") & (model["reason"] == "")]
    assert int(c.to_numpy().sum()) == len(done) == 66
    for measured, predicted in ((True, True), (True, False), (False, True), (False, False)):
        label = {True: "pays", False: "does not pay"}
        n = int(((done["pays_measured"] == measured) & (done["pays_predicted"] == predicted))
                .sum())
        assert c.loc[label[measured], label[predicted]] == n


def test_vgg19_parameters_counted():
    convs = [(3, 64), (64, 64), (64, 128), (128, 128), (128, 256), (256, 256), (256, 256),
             (256, 256), (256, 512), *[(512, 512)] * 7]
    total = sum(9 * cin * cout + cout for cin, cout in convs)
    for cin, cout in ((512 * 7 * 7, 4096), (4096, 4096), (4096, 1000)):
        total += cin * cout + cout
    assert len(convs) == 16 and total == pg.VGG19_PARAMETERS


def test_the_upper_bound_reading_the_docs_state(run_table):
    """Upper-bound keeps the exchange: VGG-19's dense upper bound equals its throughput, far
    below 8 x one worker; a compressor's upper bound exceeds its throughput (docs)."""
    r = run_table[(run_table["model"] == "vgg19") & (run_table["compressor"] == "none")]
    ub = r[(r["mode"] == "upper-bound") & (r["workers"] == 8)]["rate"].item()
    thr = r[(r["mode"] == "throughput") & (r["workers"] == 8)]["rate"].item()
    one = r[(r["mode"] == "throughput") & (r["workers"] == 1)]["rate"].item()
    assert (round(ub, 1), round(thr, 1), round(8 * one)) == (176.9, 177.6, 232)
    s = run_table[(run_table["model"] == "resnet50") & (run_table["workers"] == 2)
                  & (run_table["setting"] == "ratio=0.01") & (run_table["backend"] == "mpi")
                  & (run_table["error_feedback"] == True)]  # noqa: E712
    got = {(c, m): round(v) for c, m, v in zip(s["compressor"], s["mode"], s["rate"])
           if m in ("throughput", "upper-bound")}
    assert got[("topk", "upper-bound")] == 726 and got[("topk", "throughput")] == 416
    assert got[("randomk", "upper-bound")] == 776 and got[("randomk", "throughput")] == 741


def test_committed_tables_equal_a_fresh_computation(tmp_path):
    pg.write(tmp_path)
    for name in (pg.PAYS_CSV.name, pg.MODEL_CSV.name):
        assert (tmp_path / name).read_bytes() == (imp.COMMITTED / name).read_bytes(), name


def test_docs_scaling_shows_the_committed_numbers():
    pair_table, model_table = pg.read_committed()
    docs = (DOCS / "scaling.md").read_text()
    for block in (pg.pays_markdown(pg.pays_summary(pair_table)),
                  pg.headline_markdown(pair_table, model_table),
                  pg.error_markdown(model_table), pg.confusion_markdown(model_table),
                  pg.confusion_markdown(model_table, "upper-bound"),
                  pg.model_markdown(model_table)):
        assert block in docs
    assert "![The step-time model against the GRACE release](gallery/published-grace-model.png)" \
        in docs and (DOCS / "gallery" / "published-grace-model.png").is_file()


def test_the_claims_rows(tmp_path):
    table = cg.claim_rows()
    committed = pd.read_csv(cg.CLAIMS_CSV)
    fresh = pd.read_csv(pd.io.common.StringIO(imp.csv_bytes(table).decode()))
    pd.testing.assert_frame_equal(committed, fresh)
    assert (table["section"] == "published").all()
    assert table["inputs"].str.startswith("published: sands-lab/grace-data@41915bb").all()
    pays = table[table["claim"] == "grace_pays"].set_index("sparsifier")
    assert len(pays) == 16
    for _, row in pays.iterrows():
        n_pass = round(row["fraction"] * row["n_units"])
        assert row["verdict"] == verdicts.fraction_verdict(n_pass, int(row["n_units"]))
    assert pays.loc["inceptionn", "verdict"] == "fails"  # 0 of 21
    assert pays.loc["topk", "verdict"] == "mixed"
    acc = table[table["claim"].str.contains("accuracy")]
    assert (acc["verdict"] == "insufficient-data").all()
    assert (acc["reason"] == "seeds-not-published").all()
    agree = table[table["claim"] == "grace_model_pays"].iloc[0]
    assert (agree["n_units"], agree["verdict"]) == (66, "holds")
    assert agree["fraction"] == pytest.approx(63 / 66)


def test_the_claims_are_registered_as_table_claims():
    from topkscope.claims.registry import registered

    names = {c.name for c in registered("reference", section="published")}
    assert {"grace_pays", "grace_accuracy_cost", "grace_topk_vs_randk",
            "grace_model_pays"} <= names


def test_the_figure_from_the_committed_model_rows(tmp_path):
    from topkscope import plots
    from topkscope.publish.figures import grace_model_figure

    entry = grace_model_figure(tmp_path)
    assert entry.name == "published-grace-model"
    assert all(Path(f).is_file() and Path(f).stat().st_size > 0 for f in entry.files)
    _, model_table = pg.read_committed()
    rows = model_table[(model_table["mode"] == "throughput")
                       & (model_table["reason"] == "")].reset_index(drop=True)
    fig = plots.model_vs_measured(rows, "t")
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    left = fig.axes[0]
    points = sum(len(c.get_offsets()) for c in left.collections if hasattr(c, "get_offsets")
                 and len(c.get_offsets()) and c.get_label() and not c.get_label().startswith("_"))
    assert points == len(rows)  # one marker per predicted row
    with pytest.raises(ValueError, match="predicted"):
        plots.model_vs_measured(rows.drop(columns=["predicted"]), "t")


def test_counts_come_from_the_data_volume_runs(run_table):
    model = pg.model_rows(run_table)
    done = model[model["reason"] == ""]
    topk = done[done["compressor"] == "topk"]
    # Top-k's data-volume runs send 8 bytes per kept element: count ratio 1, up to the
    # per-tensor rounding of k (at most 0.6% on the CIFAR-10 models' small layers)
    measured = topk[topk["count_source"].str.startswith("published")]
    assert len(measured) and np.allclose(measured["count_ratio"], 1.0, atol=0.006)
    assert (measured["count_ratio"] != 1.0).any()  # measured, not the nominal 1
    dgc = done[(done["compressor"] == "dgc") & (done["setting"] == "ratio=0.5")]
    assert (dgc["count_ratio"] <= 1.0 + 1e-9).all()
    assert math.isfinite(float(done["error"].abs().median()))
