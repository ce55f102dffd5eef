"""Scaling table, claims rows (claims.csv columns), figures and the validation table."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from topkscope.claims import speedup
from topkscope.claims import verdicts as claims_verdicts
from topkscope.perf import calibrate, inputs, report, validate
from topkscope.perf import model as pm
from topkscope.perf import published as published_errors
from topkscope.plots.frames import text_column
from topkscope.plots.titles import sparsifier_name

REFERENCE = Path(__file__).resolve().parents[1] / "results" / "reference"


def _selection():
    rows = [{"distribution": "normal", "d": d, "density": 0.001, "method": m,
             "median_ms": ms * d / 1e6, "device": "cpu"}
            for d in (10**5, 10**7) for m, ms in (("topk", 20.0), ("gaussiank", 2.0),
                                                   ("gaussiank-2019", 3.0))]
    return pd.DataFrame(rows)


ERRORS = {"no-overlap": 0.05, "wfbp": 0.3}
# the approximate selectors among the scaling table's default methods (perf.model.DEFAULT_METHODS):
# claim_rows predicts each selector the table holds
TABLE_SELECTORS = ("gaussiank", "gaussiank-2019")


def _claim_network(row) -> str:
    return row.statement.split("(")[-1].rstrip(")")


REFERENCES = {"gaussiank_speedup_p16": ("dense", "topk"),
              "gaussiank_speedup_p16_wfbp": ("dense-wfbp",),
              "gaussiank_speedup_p16_fp16": ("dense-fp16",)}


def test_claims_rows_have_the_claims_columns_and_a_verdict():
    # a selection CSV without a device: its times are not another device's (measured basis)
    selection = _selection().drop(columns="device")
    table, notes = report.scaling_table(["fnn3"], ["1gbe", "nvlink"], [2, 16],
                                        selection=selection, compute_s=0.01)
    assert notes == [] and (table["selection_basis"] == "measured").all()
    claims = speedup.claims_rows(table, errors=ERRORS)
    header = pd.read_csv(REFERENCE / "claims-quick.csv", nrows=0).columns
    # differs_from_plan describes the runs behind a row: the driver adds it to every row
    assert set(header) - {"differs_from_plan"} <= set(claims.columns)
    from topkscope.claims import COLUMNS, PREDICTION_COLUMNS

    assert set(COLUMNS) - {"diff_mean", "traffic_warmup", "traffic_target", "gennorm_beta"} \
        <= set(claims.columns) <= {*COLUMNS, *PREDICTION_COLUMNS, "profile", "model_args"}
    assert set(PREDICTION_COLUMNS) <= set(claims.columns)
    # one row per network, sparsifier and baseline: over Dense and Top-k, Dense + WFBP, fp16
    assert len(claims) == 2 * 2 * 3 and set(claims["claim"]) == set(speedup.SPEEDUP_CLAIMS)
    assert set(claims["sparsifier"]) == set(TABLE_SELECTORS) == {
        m for m in pm.DEFAULT_METHODS if speedup.approximate(m)}
    assert set(claims["verdict"]) <= {"holds", "fails", "inconclusive"}
    assert (claims["section"] == "prediction").all()
    for row in claims.itertuples(index=False):
        assert row.condition.startswith("prediction, not a measurement: user")
        assert "compute user" in row.condition
        at = table[(table.network == _claim_network(row)) & (table.workers == 16)]
        at = at.set_index("method")
        references = REFERENCES[row.claim]
        speedups = [at.loc[r, "t_step"] / at.loc[row.sparsifier, "t_step"] for r in references]
        errors = [ERRORS["wfbp" if r == "dense-wfbp" else "no-overlap"] for r in references]
        faster = [s > 1 + e for s, e in zip(speedups, errors)]
        slower = [s < 1 - e for s, e in zip(speedups, errors)]
        expect = "holds" if all(faster) else "fails" if any(slower) else "inconclusive"
        assert row.verdict == expect and row.n_units == len(references)
        assert row.fraction == sum(faster) / len(references)
        assert row.model_error == max(errors) and np.isnan(row.margin)
        for s in speedups:
            assert f"{s:.3f}x" in row.evidence
        assert _claim_network(row) in row.cause
        # the structured columns the README's prediction table prints
        assert row.section == "prediction" and row.network == _claim_network(row)
        assert row.baselines == {"gaussiank_speedup_p16": "Dense, Top-k",
                                 "gaussiank_speedup_p16_wfbp": "Dense + WFBP",
                                 "gaussiank_speedup_p16_fp16": "Dense fp16"}[row.claim]
        assert row.selection_basis == "measured" and row.training_condition == ""
        g = at.loc[row.sparsifier]
        assert row.breakeven_ms == pytest.approx(
            g[pm.breakeven_column(references[0])] * 1e3)
        assert (row.breakeven_topk_ms == pytest.approx(g[pm.breakeven_column("topk")] * 1e3)
                if "topk" in references else np.isnan(row.breakeven_topk_ms))


def test_break_even_claims_when_the_selection_is_another_devices():
    """GPU compute beside CPU selection times: no speed-up with those times is claimed; the
    verdict rests on the break-even selection times (fails only when even free selection
    leaves the method slower than a dense baseline beyond the error)."""
    table, _ = report.scaling_table(["fnn3", "vgg16"], ["1gbe", "ib100"], [16],
                                    selection=_selection())
    sparse = table[~table["method"].isin(["dense", "dense-wfbp", "dense-fp16"])]
    assert (sparse["selection_basis"] == "break-even").all()
    claims = speedup.claims_rows(table, errors=ERRORS)
    assert len(claims) == 2 * 2 * 2 * 3
    for row in claims.itertuples(index=False):
        at = table[(table.model == row.model) & (table.network == _claim_network(row))]
        at = at.set_index("method")
        g = at.loc[row.sparsifier]
        own = g["t_compute"] + g["t_comm"]  # the step without its selection
        slower = False
        for ref in REFERENCES[row.claim]:
            r = at.loc[ref]
            free = (r["t_compute"] + r["t_comm"]) / own
            assert f"over {sparsifier_name(ref)} {free:.3f}x" in row.evidence
            slower |= ref != "topk" and free < 1 - ERRORS[
                "wfbp" if ref == "dense-wfbp" else "no-overlap"]
        assert row.verdict == ("fails" if slower else "inconclusive")
        assert row.evidence.startswith(speedup.BREAKEVEN_EVIDENCE) and np.isnan(row.fraction)
        assert f"{g['t_select'] * 1e3:.3g}" not in row.evidence.split("; dense")[0]
        assert "not counted: break-even selection times" in row.condition
        assert row.selection_basis == "break-even"
        for ref in REFERENCES[row.claim]:
            column = "breakeven_ms" if ref != "topk" else "breakeven_topk_ms"
            assert getattr(row, column) == pytest.approx(g[pm.breakeven_column(ref)] * 1e3)


@pytest.mark.parametrize("speedups, errors, verdict", [
    ([1.2, 1.1], [0.05, 0.05], "holds"),
    ([1.2, 1.04], [0.05, 0.05], "inconclusive"),   # within the error: cannot be told apart
    ([1.2, 0.94], [0.05, 0.05], "fails"),
    ([1.25], [0.3], "inconclusive"),
    ([0.69], [0.3], "fails"),
])
def test_speedup_verdict_against_the_validated_error(speedups, errors, verdict):
    assert claims_verdicts.speedup_verdict(speedups, errors)[0] == verdict


def test_comparison_error_is_the_larger_family_error():
    assert published_errors.comparison_error("gaussiank", "topk", ERRORS) == 0.05
    assert published_errors.comparison_error("gaussiank", "dense-wfbp", ERRORS) == 0.3
    with pytest.raises(ValueError, match="no validated error"):
        published_errors.comparison_error("gaussiank", "dense-wfbp", {"no-overlap": 0.05})


def test_inputs_warning_only_when_devices_differ():
    gpu_selection = _selection().assign(device="cuda:0")
    table, _ = report.scaling_table(["fnn3"], ["10gbe"], [16], selection=gpu_selection)
    assert (table["inputs_warning"] == "").all()  # published GPU compute, GPU selection
    table, _ = report.scaling_table(["fnn3"], ["10gbe"], [16], selection=_selection())
    warned = table[table["inputs_warning"] != ""]
    assert set(warned["model"]) == {"fnn3"}
    assert "compute on a GPU but selection measured on a CPU" in warned["inputs_warning"].iloc[0]


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
    written, figures = report.write_scaling(tmp_path, "quick", log=lambda s: None, inputs="here")
    table = pd.read_csv(tmp_path / "scaling.csv")
    assert len(written) == len(table)
    claims = speedup.claims_rows(written)
    assert set(table["model"]) == {"fnn3", "resnet20"} and table["workers"].max() == 64
    assert (table["inputs"] == "this machine").all()
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
        assert "this machine" in caption
    assert len(claims) == 2 * table["network"].nunique() * len(speedup.CLAIMS) * len(
        TABLE_SELECTORS)


def test_write_scaling_uses_the_published_gpu_inputs_by_default(tmp_path):
    from topkscope.perf import published

    logged = []
    written, figures = report.write_scaling(tmp_path, "quick", log=logged.append)
    table = pd.read_csv(tmp_path / "scaling.csv")
    claims = speedup.claims_rows(written)
    gpu = pd.read_csv(published.GPU_COMPUTE_CSV).set_index("model")
    assert set(table["model"]) == set(gpu.index)
    by = table.drop_duplicates("model").set_index("model")
    np.testing.assert_allclose(by.loc[gpu.index, "t_compute"], gpu["compute_s"])
    assert (by["batch_per_worker"] == gpu.loc[by.index, "batch_per_worker"]).all()
    assert (table["inputs"] == inputs.INPUTS["published"]).all()
    assert by["compute_source"].str.startswith("published, GPU").all()
    # no GPU selection benchmark: exact Top-k and the published rule take the published GPU
    # inputs (Top-k's logged or fitted GPU times; the rule's memory-traffic model, which is
    # modelled: its claims rest on break-even times); our Gaussian-k has none: the CPU's, warned
    topk = table[table["method"] == "topk"]
    assert topk["select_source"].str.match("published GPU measurements|fitted by the authors").all()
    assert (topk["selection_basis"] == "measured").all()
    rule = table[table["method"] == "gaussiank-2019"]
    assert rule["select_source"].str.startswith("modelled: memory traffic").all()
    assert (rule["selection_basis"] == "break-even").all()
    warned = [line for line in logged if "warning:" in line]
    assert warned and all("warning: gaussiank:" in line for line in warned)
    assert claims["condition"].str.startswith(
        "prediction, not a measurement: GPU inputs from published measurements").all()
    assert claims["condition"].str.contains("warning:").all()
    assert claims["evidence"].str.startswith(speedup.BREAKEVEN_EVIDENCE).all()
    assert len(claims) == len(gpu) * table["network"].nunique() * len(speedup.CLAIMS) * len(
        TABLE_SELECTORS)
    assert all("GPU inputs from published measurements" in caption for _, caption, _ in figures)


def test_compute_input_precedence_and_no_source():
    bench = pd.DataFrame({"model": ["vgg16", "vgg16", "alexnet"], "threads": [1, 2, 1],
                          "batch_per_worker": [128, 128, 128],
                          "compute_s": [3.0, np.nan, np.nan],  # nan: not measured
                          "device": ["cpu"] * 3})
    got, batch = inputs.compute_input("vgg16", None, None, bench, inputs="here")
    assert got.value == 3.0 and batch == 128 and "benchmark" in got.source
    assert got.device == "cpu"
    got, _ = inputs.compute_input("vgg16", None, 0.2, bench, inputs="here")
    assert got.value == 0.2 and got.source == "user" and got.device is None
    assert inputs.compute_input("alexnet", None, None, bench, inputs="here") == (None, None)
    got, batch = inputs.compute_input("vgg16", None, None, bench)  # published by default
    assert got.device == "gpu" and got.source.startswith("published") and batch == 128
    half, batch = inputs.compute_input("vgg16", None, None, bench, batch=64)
    assert half.value == pytest.approx(got.value / 2) and batch == 64
    with pytest.raises(ValueError, match="inputs must be one of"):
        inputs.compute_input("vgg16", inputs="cloud")
    table, notes = report.scaling_table(["alexnet"], ["10gbe"], [16], selection=_selection(),
                                        compute=bench, inputs="here")
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


def test_committed_p16_table_regenerates_and_the_docs_show_it():
    path = REFERENCE / "scaling" / "p16-published.csv"
    table, notes = report.scaling_table(pm.PAPER_MODELS, ["10gbe", "ib100"], [16])
    assert notes == []
    committed = pd.read_csv(path, keep_default_na=False, na_values=[""])
    committed["condition"] = text_column(committed, "condition")  # no training condition
    pd.testing.assert_frame_equal(table.reset_index(drop=True),
                                  committed.astype(table.dtypes.to_dict()),
                                  check_exact=False, rtol=1e-9)
    docs = (REFERENCE.parents[1] / "docs" / "scaling.md").read_text()
    assert report.breakeven_markdown(pd.read_csv(path)) in docs
    # the speed-ups in that table are the ratios of the step times
    g = table[table["method"] == "gaussiank"].set_index(["model", "network"])
    d = table[table["method"] == "dense-fp16"].set_index(["model", "network"])
    np.testing.assert_allclose(g["speedup_vs_dense_fp16"], d["t_step"] / g["t_step"])
    # its break-even selection times: Gaussian-k selected in exactly that time ties the step
    np.testing.assert_allclose(g["t_compute"] + g["t_comm"] + g["breakeven_select_vs_dense_fp16"],
                               d["t_step"])


def test_each_predicted_verdict_reads_as_a_sentence_with_its_speedups():
    from topkscope.publish.findings import findings_markdown, verdict_sentence

    table, _ = report.scaling_table(["fnn3"], ["1gbe", "nvlink"], [16],
                                    selection=_selection().drop(columns="device"),
                                    compute_s=0.01)
    claims = speedup.claims_rows(table, sparsifiers="gaussiank", errors=ERRORS)
    start = {"holds": "Predicted faster", "fails": "Predicted slower",
             "inconclusive": "Within the model's validated error"}
    for row in claims.itertuples(index=False):
        sentence = verdict_sentence(row)
        assert sentence.startswith(start[row.verdict])
        g = table[(table.workers == 16) & (table.method == "gaussiank")
                  & (table.network == row.statement.split("(")[-1].rstrip(")"))].iloc[0]
        assert f"{g.speedup_vs_dense_fp16:.3g}× over Dense fp16" in sentence \
            or not row.claim.endswith("_fp16")
    md = findings_markdown(claims)
    assert "Against Dense + WFBP:" in md and "user" in md
    for row in claims.itertuples(index=False):  # each cell: the mark and the speed-up
        g = table[(table.workers == 16) & (table.method == "gaussiank")
                  & (table.network == row.network)].iloc[0]
        mark = {"holds": "✓", "fails": "✗", "inconclusive": "?"}[row.verdict]
        if row.claim.endswith("_fp16"):
            fp16 = md.split("Against Dense fp16:")[1]
            line = next(ln for ln in fp16.splitlines() if ln.startswith("| FNN-3 |"))
            assert f"| {mark} {g.speedup_vs_dense_fp16:.3g}× |" in line
    # another device's selection times: the break-even sentence and cells
    table, _ = report.scaling_table(["fnn3"], ["1gbe"], [16], selection=_selection())
    claims = speedup.claims_rows(table, errors=ERRORS)
    start = {"fails": "Predicted slower than a baseline even if its selection cost nothing",
             "inconclusive": "Decided by its selection time on the compute's device"}
    for row in claims.itertuples(index=False):
        assert verdict_sentence(row).startswith(start[row.verdict]) and row.cause in \
            verdict_sentence(row)
    md = findings_markdown(claims)
    for method in ("gaussiank", "gaussiank-2019"):  # the cells formatted from the columns
        g = table[table.method == method].iloc[0]
        row = claims[(claims.sparsifier == method)
                     & (claims.claim == "gaussiank_speedup_p16")].iloc[0]
        over_topk = g.breakeven_select_over_topk * 1e3
        mark = {"fails": "✗", "inconclusive": "?"}[row.verdict]
        dense, topk = md.split("Against Dense:")[1], md.split("Against Top-k:")[1]
        assert (f"| FNN-3 | {sparsifier_name(method)} | {mark} < "
                f"{g.breakeven_select_vs_dense * 1e3:.3g} ms |") in dense
        assert (f"| FNN-3 | {sparsifier_name(method)} | {mark} "
                f"{'+' if over_topk >= 0 else '−'}{abs(over_topk):.3g} ms |") in topk


def test_selection_table_prefers_the_computes_device(tmp_path, monkeypatch):
    cpu = tmp_path / "results" / "bench" / "selection.csv"
    cpu.parent.mkdir(parents=True)
    _selection().to_csv(cpu, index=False)
    gpu = tmp_path / "bench-gpu" / "selection.csv"
    gpu.parent.mkdir()
    _selection().assign(device="cuda:0", median_ms=1.0).to_csv(gpu, index=False)
    monkeypatch.setattr(inputs, "REFERENCE_GPU_BENCH", gpu.parent)
    root = tmp_path / "results"
    from topkscope.perf.inputs import table_device

    assert table_device(inputs.selection_table(root, device="gpu")) == "gpu"
    assert table_device(inputs.selection_table(root, device="cpu")) == "cpu"
    assert table_device(inputs.selection_table(root)) == "cpu"  # any: the results' own first
    assert table_device(inputs.selection_table(root, path=gpu, device="cpu")) == "gpu"
    assert inputs.selection_device("published") == "gpu"
    assert inputs.selection_device("here") == "cpu" and inputs.selection_device(
        "published", compute_s=0.1) is None
    # with the GPU CSV the published predictions are judged on their speed-ups
    table, _ = report.scaling_table(["fnn3"], ["10gbe"], [16], results_root=root)
    assert (table["selection_basis"] == "measured").all() and (table["inputs_warning"] == "").all()
    claims = speedup.claims_rows(table, errors=ERRORS)
    assert claims["evidence"].str.startswith("predicted speed-up").all()
    with pytest.raises(ValueError, match="does not exist"):
        inputs.selection_table(root, path=tmp_path / "none.csv")
