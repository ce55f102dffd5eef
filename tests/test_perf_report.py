"""Scaling table, claims rows (claims.csv columns), figures and the validation table."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from topkscope.perf import calibrate, report, validate

REFERENCE = Path(__file__).resolve().parents[1] / "results" / "reference"


def _selection():
    rows = [{"distribution": "normal", "d": d, "density": 0.001, "method": m,
             "median_ms": ms * d / 1e6, "device": "cpu"}
            for d in (10**5, 10**7) for m, ms in (("topk", 20.0), ("gaussiank", 2.0),
                                                   ("gaussiank-2019", 3.0))]
    return pd.DataFrame(rows)


def test_claims_rows_have_the_claims_columns_and_a_verdict():
    table, notes = report.scaling_table(["fnn3"], ["1gbe", "nvlink"], [2, 16],
                                        selection=_selection(), compute_s=0.01)
    assert notes == []
    claims = report.claims_rows(table)
    header = pd.read_csv(REFERENCE / "claims-quick.csv", nrows=0).columns
    assert set(header) <= set(claims.columns)
    assert {"condition", "n_seeds", "ci_low", "ci_high", "traffic_ratio"} <= set(claims.columns)
    assert len(claims) == 2 and set(claims["verdict"]) <= {"holds", "fails", "mixed"}
    row = claims.iloc[0]
    assert row["condition"].startswith("prediction") and "compute user" in row["condition"]
    g = table[(table.network == row["statement"].split("(")[-1].rstrip(")"))
              & (table.workers == 16) & (table.method == "gaussiank")].iloc[0]
    expect = {2: "holds", 0: "fails"}.get(int(g.speedup_vs_dense > 1) + int(g.speedup_vs_topk > 1),
                                          "mixed")
    assert row["verdict"] == expect


def _compute_csv(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame([{"model": m, "threads": t, "batch_per_worker": b, "batch_measured": bm,
                   "compute_s": s, "device": "cpu", "load_avg_1min": "1.0-1.0"}
                  for m, t, b, bm, s in rows]).to_csv(path, index=False)


def test_write_scaling_from_a_results_folder(tmp_path):
    run = tmp_path / "fnn3-mnist" / "r1"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({
        "status": "complete", "model": "fnn3", "sparsifier": "topk", "density": 0.001,
        "world_size": 2, "device": "cpu", "config": {"batch_size": 128}}))
    pd.DataFrame({"step": np.arange(5), "time_compute": [0.01] * 5,
                  "selected": [199.0] * 5}).to_parquet(run / "train.parquet")
    # the benchmark has fnn3 too: the run wins; resnet20 has no run: the benchmark's fastest row
    _compute_csv(tmp_path / "bench" / "model_compute.csv",
                 [("fnn3", 1, 128, 128, 9.0), ("resnet20", 1, 32, 32, 0.5),
                  ("resnet20", 2, 32, 8, 0.25)])
    claims, figures = report.write_scaling(tmp_path, "quick", log=lambda s: None)
    table = pd.read_csv(tmp_path / "scaling.csv")
    assert set(table["model"]) == {"fnn3", "resnet20"} and table["workers"].max() == 64
    by = table.drop_duplicates("model").set_index("model")
    assert by.loc["fnn3", "t_compute"] == pytest.approx(0.01)
    assert by.loc["fnn3", "compute_source"].startswith("measured here (median time_compute")
    assert by.loc["resnet20", "t_compute"] == pytest.approx(0.25)
    assert by.loc["resnet20", "batch_per_worker"] == 32
    src = by.loc["resnet20", "compute_source"]
    assert src.startswith("measured here, CPU, benchmark") and "2 thread(s)" in src
    assert "measured at batch 8 and scaled linearly" in src
    assert [name for name, _, _ in figures] == list(report.FIGURES)
    for name, caption, files in figures:
        assert (tmp_path / "figures" / f"{name}.png") in files
        assert "prediction" in caption and "resnet20: measured here, CPU, benchmark" in caption
    assert len(claims) == 2 * table["network"].nunique()


def test_compute_input_precedence_and_no_source():
    bench = pd.DataFrame({"model": ["vgg16", "vgg16", "alexnet"], "threads": [1, 2, 1],
                          "batch_per_worker": [128, 128, 128],
                          "compute_s": [3.0, np.nan, np.nan]})  # nan: not measured
    got, batch = report.compute_input("vgg16", None, None, bench)
    assert got.value == 3.0 and batch == 128 and "benchmark" in got.source
    got, _ = report.compute_input("vgg16", None, 0.2, bench)
    assert got.value == 0.2 and got.source == "user"
    assert report.compute_input("alexnet", None, None, bench) == (None, None)
    table, notes = report.scaling_table(["alexnet"], ["10gbe"], [16], selection=_selection(),
                                        compute=bench)
    assert table.empty and notes and "no compute time" in notes[0]


def test_validation_table_predicts_from_calibration(tmp_path):
    alpha, beta = 1e-4, 2e-9
    timings = pd.DataFrame([{"collective": c, "workers": 2, "nbytes": n, "seconds": t}
                            for n in (8, 1e4, 1e6)
                            for c, t in (("allreduce", 2 * alpha + n * beta),
                                         ("allgather", alpha + n * beta))])
    cal = tmp_path / "cal.csv"
    calibrate.fit_table(timings).to_csv(cal, index=False)
    d = 10**6
    steps = []
    for method, comm, count in (("dense", 2 * alpha + 4e6 * beta, d), ("topk", 0.001, 1000)):
        for _ in range(3):
            steps.append({"model": "m", "workers": 2, "method": method, "d": d,
                          "density": 0.001, "wall": 0.05 + comm, "time_select": 0.0,
                          "time_communicate": comm, "count_max": count})
    table = validate.validation_table(pd.DataFrame(steps), cal, _selection())
    dense = table.set_index("method").loc["dense"]
    assert dense["compute_s"] == pytest.approx(0.05)
    assert dense["ratio_pred_over_meas"] == pytest.approx(1.0, rel=1e-6)
    assert table.set_index("method").loc["topk", "predicted_select_s"] == pytest.approx(0.02)
    with pytest.raises(ValueError, match="no dense run"):
        validate.validation_table(pd.DataFrame(steps[3:]), cal, _selection())
