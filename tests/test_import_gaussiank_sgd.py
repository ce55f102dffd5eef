"""topkscope import gaussiank-sgd: the authors' logs as result folders, every column checked
against numbers worked out by hand from the small logs tests/_gaussiank_logs.py writes."""

import math

import numpy as np
import pandas as pd
import pytest

from tests._gaussiank_logs import write_job
from topkscope.analysis.runs import load
from topkscope.cli import main
from topkscope.importers import gaussiank_sgd as imp
from topkscope.manifest import find_runs


def _import(tmp_path, *jobs, **kw):
    logs = tmp_path / "job"
    for job in jobs:
        write_job(logs, job, **kw)
    assert main(["import", "gaussiank-sgd", str(logs), "--results", str(tmp_path / "res"),
                 "--no-progress"]) == 0
    return tmp_path / "res"


def _row(train, step, rank):
    rows = train[(train["step"] == step) & (train["rank"] == rank)]
    assert len(rows) == 1
    return rows.iloc[0]


def test_every_column_of_a_sparse_run_matches_the_log(tmp_path):
    res = _import(tmp_path, "7")
    run = load(res / "gaussiank-sgd" / "7")
    tr = run.train
    assert len(tr) == 6  # 3 intervals x 2 workers
    # interval at iteration 8 (logged epoch 1), worker 1: iterations 5..8, both workers' lines
    r = _row(tr, 8, 1)
    assert r["epoch"] == 1
    assert r["loss"] == pytest.approx(1.92)
    assert r["lr"] == pytest.approx(0.02)
    assert r["time_forward"] == pytest.approx(0.0051)
    assert r["time_backward"] == pytest.approx(0.2002)
    assert r["time_compute"] == pytest.approx(0.2053)
    # COMP = 0.1 + 0.001 it + 0.0001 rank over it 6..8 (5 follows the validation at 4 and is
    # left out), ranks 0, 1: 0.1 + 0.007 + 0.00005
    assert r["time_select"] == pytest.approx(0.10705, abs=1e-9)
    # COMM_TOTAL = 0.01 + 0.0002 it + 0.00001 rank: 0.01 + 0.0014 + 0.000005
    assert r["time_communicate"] == pytest.approx(0.011405, abs=1e-9)
    # the two "Time per iteration" lines after the interval: 0.308 and 0.318
    assert r["time_iteration"] == pytest.approx(0.313)
    assert r["time_io"] == pytest.approx(0.001)
    # epoch 1 of the warm-up: max(0.001, 0.004) * 1000 = 4 per iteration
    assert (r["selected"], r["k"], r["density"]) == (4.0, 4, pytest.approx(0.004))
    first, last = _row(tr, 4, 0), _row(tr, 12, 0)
    assert (first["k"], first["density"]) == (15, pytest.approx(0.015))
    assert (last["k"], last["density"]) == (1, pytest.approx(0.001))
    assert first["time_select"] == pytest.approx(0.1 + 0.001 * 2.5 + 0.00005, abs=1e-9)
    for col in ("metric", "bytes_sent", "selected_min", "selected_median", "selected_max"):
        assert tr[col].isna().all(), col  # the log does not say: null, not invented
    ev = run.eval
    assert ev["epoch"].tolist() == [1, 2, 3] and ev["step"].tolist() == [4, 8, 12]
    assert ev["metric"].tolist() == pytest.approx([0.5, 0.6, 0.7])
    assert set(ev["split"]) == {"val"} and set(ev["metric_name"]) == {"accuracy"}


def test_the_manifest_names_settings_source_and_what_is_unknown(tmp_path):
    res = _import(tmp_path, "7")
    m = load(res / "gaussiank-sgd" / "7").manifest
    assert m["status"] == "complete" and m["launcher"] == "published"
    assert m["run_id"] == "7" and m["experiment"] == "gaussiank-sgd"
    assert (m["model"], m["dataset"], m["sparsifier"], m["density"]) == (
        "vgg16", "cifar10", "topk", 0.001)
    assert m["seed"] is None and m["seed_note"] == "not published"
    assert m["gpu"] == "not named" and m["node"] == "gpu99"
    assert m["nccl_version"] == "2.8.4+cuda11.2" and m["nccl_transport"] == ["P2P/IPC"]
    assert m["config"]["batch_size"] == 32 and m["config"]["threshold"] == 524288000
    assert m["config"]["params"] == 1000 and m["workers"] == 2
    assert m["source"]["files"] == [f"{imp.SOURCE} job/topk.e7", f"{imp.SOURCE} job/topk.o7"]
    assert m["density_schedule"] == "paper" and m["steps_per_epoch"] == 4
    assert m["density_trained"] == pytest.approx(0.001) and m["deviations"] == []


def test_found_like_our_runs(tmp_path):
    res = _import(tmp_path, "7", "8")
    found = find_runs(res, sparsifier="topk", model="vgg16")
    assert sorted(r.manifest["run_id"] for r in found) == ["7", "8"]


def test_status_from_the_epochs_reached(tmp_path):
    logs = tmp_path / "job"
    write_job(logs, "1", epochs=2, max_epochs=3)
    write_job(logs, "2", epochs=2, max_epochs=3, cancelled=True)
    runs = {j.job_id: imp.parse_job(j) for j in imp.find_jobs([logs])}
    assert runs["1"].status == "failed" and "after 2 of 3 epochs" in runs["1"].error
    assert runs["2"].status == "interrupted" and "CANCELLED" in runs["2"].error


def test_dense_runs_and_the_density_floor(tmp_path):
    logs = tmp_path / "job"
    write_job(logs, "3", compressor="none", density=1.0)
    write_job(logs, "4", density=0.0001)
    parsed = {j.job_id: imp.parse_job(j) for j in imp.find_jobs([logs])}
    dense = parsed["3"]
    assert dense.manifest["sparsifier"] == "dense" and dense.manifest["density_schedule"] == "none"
    assert all(v is None for v in dense.train["time_select"])
    assert dense.train["k"] == [1000] * 6  # the dense all-reduce sends all d
    # COMM= lines of iterations 10..12 (9 follows a validation): 0.01 + 0.0002 * 11 + 0.000005
    assert dense.train["time_communicate"][-1] == pytest.approx(0.012205, abs=1e-9)
    floor = parsed["4"].manifest
    assert floor["density"] == 0.0001 and floor["density_trained"] == pytest.approx(0.001)
    assert floor["deviations"] and "max(density, 0.001)" in floor["deviations"][0]


def test_times_are_null_where_the_lines_cannot_be_assigned(tmp_path):
    logs = tmp_path / "job"
    e, o = write_job(logs, "5")
    o.write_text(o.read_text() + "COMP=0.5\n")  # one line too many: P does not divide them
    run = imp.parse_job(imp.find_jobs([logs])[0])
    assert all(v is None for v in run.train["time_select"])
    assert "not a multiple" in run.manifest["timing_alignment"]
    assert not any(v is None for v in run.train["time_communicate"])


def test_a_malformed_line_names_file_and_line_and_nothing_is_written(tmp_path, capsys):
    logs = tmp_path / "job"
    write_job(logs, "1")
    write_job(logs, "2", bad_line="2022-08-12 16:45:28,224 [dl_trainer.py:731] WARNING "
              "[  0][    4/    4][rank:0] loss: oops, average forward (x) and backward (y)")
    code = main(["import", "gaussiank-sgd", str(logs), "--results", str(tmp_path / "res"),
                 "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "topk.e2:11" in err
    assert not (tmp_path / "res" / "gaussiank-sgd" / "1").exists()


def test_bad_paths_and_half_pairs(tmp_path, capsys):
    logs = tmp_path / "job"
    e, o = write_job(logs, "1")
    o.unlink()
    assert main(["import", "gaussiank-sgd", str(logs), "--results", str(tmp_path)]) == 2
    assert "has no .o1" in capsys.readouterr().err
    assert main(["import", "gaussiank-sgd", str(tmp_path / "nope"), "--results",
                 str(tmp_path)]) == 2
    assert "does not exist" in capsys.readouterr().err
    other = tmp_path / "notes.txt"
    other.write_text("x")
    assert main(["import", "gaussiank-sgd", str(other), "--results", str(tmp_path)]) == 2
    assert "is not a job log" in capsys.readouterr().err


def test_out_is_a_deprecated_alias_and_a_rerun_replaces_the_run(tmp_path, capsys):
    logs = tmp_path / "job"
    write_job(logs, "9")
    res = tmp_path / "res"
    assert main(["import", "gaussiank-sgd", str(logs / "topk.e9"), str(logs / "topk.o9"),
                 "--out", str(res), "--no-progress"]) == 0
    assert "--out is deprecated" in capsys.readouterr().err
    write_job(logs, "9", lr=0.5)
    assert main(["import", "gaussiank-sgd", str(logs), "--results", str(res),
                 "--no-progress"]) == 0
    runs = find_runs(res)
    assert len(runs) == 1 and runs[0].manifest["config"]["lr"] == 0.5
    assert [p.name for p in (res / "gaussiank-sgd").iterdir()] == ["9"]  # no temporaries left


def test_run_summary_medians_at_the_target_density(tmp_path):
    res = _import(tmp_path, "7", every=2)
    row = imp.run_summary(load(res / "gaussiank-sgd" / "7"))
    # target density (0.001) only in loop epoch 2: iterations 9..12, intervals at 10 and 12;
    # the selection's median over the iterations 10..12 (9 follows a validation)
    assert row["intervals_target"] == 4
    sel = [0.1 + 0.001 * it + 0.00005 for it in (10, 11, 12)]
    assert row["median_select_s"] == pytest.approx(float(np.median(sel)), abs=1e-9)
    assert row["median_select_slowest_s"] == pytest.approx(0.1 + 0.011 + 0.0001, abs=1e-9)
    assert row["final_accuracy"] == pytest.approx(0.7)
    assert row["median_forward_s"] == pytest.approx(0.00505)
    assert not math.isnan(row["median_iteration_s"])


def test_the_iteration_after_a_validation_is_marked_and_left_out_of_the_medians(tmp_path):
    # by hand: COMM 0.5 ms in every iteration, and 1.2 s more in the first iteration of
    # epochs 2 and 3 (steps 5 and 9: rank 0 validates there, the other workers wait)
    res = _import(tmp_path, "8", eval_wait=1.2, comm=lambda it, rank: 0.0005)
    run = load(res / "gaussiank-sgd" / "8")
    its = pd.read_parquet(res / "gaussiank-sgd" / "8" / imp.ITERATIONS)
    assert its.loc[its["after_eval"], "step"].tolist() == [5, 9]  # kept, marked
    assert its.loc[its["step"] == 5, "time_communicate"].iloc[0] == pytest.approx(1.2005)
    assert its["time_communicate"].mean() > 0.2  # what a mean over every iteration carried
    row = imp.run_summary(run)
    assert row["median_communicate_s"] == pytest.approx(0.0005, abs=1e-9)
    tr = run.train
    r = _row(tr, 8, 1)  # the interval 5..8: its exchange mean without step 5
    assert r["time_communicate"] == pytest.approx(0.0005, abs=1e-9)
    # the window 5..8 logged 0.3 + 0.01 + 0.008 + 1.2 / 4 per worker; net: the wait removed
    assert r["time_iteration"] == pytest.approx(0.313 + 0.3, abs=1e-6)
    assert r["time_iteration_net"] == pytest.approx(0.313, abs=1e-6)
    first = _row(tr, 4, 0)  # the window 1..4 holds no validation: as logged
    assert first["time_iteration_net"] == first["time_iteration"]


def test_display_windows_follow_the_authors_rule():
    # 48 iterations per loop epoch: a line at loop index 40 of each epoch, the window running on
    assert imp.display_windows(48, 3) == [(1, 41), (42, 89), (90, 137)]
    # a short epoch (4 iterations): display 3, one line per epoch at index 3
    assert imp.display_windows(4, 2) == [(1, 4), (5, 8)]
    # 100 iterations: lines at 40 and 80
    assert imp.display_windows(100, 1) == [(1, 41), (42, 81)]
    assert imp.after_eval_steps([49, 98, 147], 140).nonzero()[0].tolist() == [49, 98]


def test_a_job_that_failed_at_setup_is_skipped_in_a_root_and_refused_by_name(tmp_path, capsys):
    logs = tmp_path / "job"
    write_job(logs, "7")
    # the source's job 129094: the launcher found no hostfile, nothing ran
    (logs / "topk.e6").write_text("--------\nOpen RTE was unable to open the hostfile:\n"
                                  "    cluster2\n--------\n")
    (logs / "topk.o6").write_text("==========\nSLURM_JOB_ID = 6\nSLURM_NODELIST = gpu25\n"
                                  "==========\n")
    res = tmp_path / "res"
    assert main(["import", "gaussiank-sgd", str(logs), "--results", str(res),
                 "--no-progress"]) == 0
    capsys.readouterr()
    out = tmp_path / "claims.csv"
    assert main(["claims", str(res), "--out", str(out), "--no-progress"]) == 0
    err = capsys.readouterr().err
    skipped = [line for line in err.splitlines() if "skipped" in line]
    assert len(skipped) == 1 and str(res / "gaussiank-sgd" / "6") in skipped[0]
    assert "failed at set-up" in skipped[0] and "Open RTE" in skipped[0]
    assert pd.read_csv(out)["n_runs"].notna().any()  # the other job's rows are there
    named = res / "gaussiank-sgd" / "6"
    assert main(["claims", str(named), "--out", str(tmp_path / "c2.csv"),
                 "--no-progress"]) == 2
    assert "failed at set-up" in capsys.readouterr().err
    assert not (tmp_path / "c2.csv").exists()
