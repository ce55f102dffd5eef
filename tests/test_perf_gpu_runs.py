"""topkscope.perf.gpu_runs: the step-time model on imported GPU runs and the GPU selection
inputs, on small logs with known numbers, and the committed tables the docs show."""

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from tests._gaussiank_logs import bwd, comm_time, fwd, select_time, write_job
from topkscope.importers import gaussiank_sgd as imp
from topkscope.perf import gpu_runs
from topkscope.perf import model as pm
from topkscope.perf.model import Input
from topkscope.perf.networks import PRESETS

DOCS = gpu_runs.REFERENCE.parents[1] / "docs" / "scaling.md"


@pytest.fixture
def runs(tmp_path):
    logs = tmp_path / "job"
    write_job(logs, "1", every=1, d=200_000)
    write_job(logs, "2", every=1, d=200_000, compressor="none", density=1.0)
    write_job(logs, "3", every=1, d=200_000, compressor="randomk")
    imp.import_runs([logs], tmp_path / "res")
    return gpu_runs.published_runs(tmp_path / "res")


def test_measured_inputs_are_the_logged_medians_at_the_target_density(runs):
    table = gpu_runs.validation_rows(runs).set_index("job")
    topk = table.loc["1"]
    # loop epoch 2 (target density 0.001): iterations 9..12, P = 2; iteration 9 follows the
    # validation of epoch 2: left out of every per-iteration median and interval mean
    kept = range(10, 13)
    per_it_select = [np.mean([select_time(i, r) for r in (0, 1)]) for i in kept]
    assert topk["select_s"] == pytest.approx(np.median(per_it_select), abs=1e-9)
    # compute: per interval the workers' mean forward + backward less the selection
    compute = [np.mean([fwd(i, r) + bwd(i, r) for r in (0, 1)]) - s
               for i, s in zip(kept, per_it_select)]
    assert topk["compute_s"] == pytest.approx(np.median(compute), abs=1e-9)
    slowest = [max(select_time(i, r) for r in (0, 1)) for i in kept]
    assert topk["select_slowest_s"] == pytest.approx(np.median(slowest), abs=1e-9)
    comm = [np.mean([comm_time(i, r) for r in (0, 1)]) for i in kept]
    assert topk["communicate_s"] == pytest.approx(np.median(comm), abs=1e-9)
    # the straggler wait: slowest COMP less the workers' mean (0.00005 here), the exchange the rest
    assert topk["wait_s"] == pytest.approx(0.00005, abs=1e-9)
    assert topk["exchange_s"] == pytest.approx(np.median(comm) - 0.00005, abs=1e-9)
    # one display window at the target density (iterations 9..12, logged at 12); its wait for
    # the validation (fixture eval_wait 0) is the excess of iteration 9's slowest COMM over the
    # median slowest COMM of the other iterations: 0.01 + 0.0002 (9 - 6) + 0.00001 spread
    # over the window's 4 iterations
    base = np.median([comm_time(i, 1) for i in (1, 2, 3, 4, 6, 7, 8, 10, 11, 12)])
    excess = comm_time(9, 1) - base
    iteration = np.mean([0.3 + 0.01 * r + 0.012 for r in (0, 1)]) - excess / 4
    assert topk["measured_s"] == pytest.approx(iteration, abs=2e-6)  # the log's 6 decimals
    assert (topk["use"], topk["family"]) == ("held-out", "one-node sparse")
    assert (table.loc["2", "use"], table.loc["2", "family"]) == ("fit", "one-node dense")


def test_sparse_rows_are_predicted_on_the_dense_rows_fit(runs):
    table = gpu_runs.validation_rows(runs).set_index("job")
    dense = table.loc["2"]
    # one dense row: the fit reproduces it exactly (a fit row, not a test of the model)
    assert dense["ratio"] == pytest.approx(1.0, rel=1e-9)
    factor = dense["bandwidth_factor"]
    net = replace(PRESETS["nvlink"], beta=PRESETS["nvlink"].beta / factor)
    for job, method in (("1", "topk"), ("3", "randk")):
        row = table.loc[job]
        step = pm.step(method, 2, 200_000, 0.001, net, Input(row["compute_s"], "t"),
                       pm.MethodInputs(Input(row["select_s"], "t"), Input(1.0, "t")))
        assert row["predicted_s"] == pytest.approx(step["t_step"], rel=1e-9)
        assert row["predicted_s"] == pytest.approx(
            row["compute_s"] + row["select_s"] + step["t_comm"], rel=1e-9)
        assert row["bandwidth_factor"] == factor
    assert set(gpu_runs.errors(table.reset_index())) == {"one-node dense", "one-node sparse"}


def test_selection_inputs_carry_their_labels(runs):
    table = gpu_runs.selection_inputs(runs)
    fit = table[table["label"].str.startswith("fitted by the authors")].iloc[0]
    assert fit["select_s"] == pytest.approx(2.18896957e-10 * 200_000 * math.log2(200_000))
    measured = table[(table["method"] == "topk") & (table["phase"] == "target")].iloc[0]
    assert measured["label"].startswith("measured on a GPU (")
    assert "job/topk.o1" in measured["label"]
    assert measured["density"] == pytest.approx(0.001)
    # Rand-k's logged COMP is host-side launch time, no anchor: the threshold rules' GPU times
    # are topkscope.perf.traffic's, not rows of this table
    assert not table["label"].str.startswith("modelled").any()
    assert set(table["method"]) == {"topk", "randk"}
    phases = table[table["method"] == "topk"]["phase"].tolist()
    assert phases.count("warm-up") == 2  # 1/64 and 0.004, each its own row


def test_docs_show_the_committed_tables():
    text = DOCS.read_text()
    val = pd.read_csv(gpu_runs.PUBLISHED_DIR / "validation.csv")
    sel = pd.read_csv(gpu_runs.PUBLISHED_DIR / "gpu_selection.csv")
    assert gpu_runs.validation_markdown(val) in text
    assert gpu_runs.selection_markdown(sel) in text


def test_imported_runs_are_not_inputs_measured_here(runs, tmp_path):
    from topkscope.perf import inputs

    root = tmp_path / "res"
    assert len(runs) == 3  # found by the manifest index ...
    assert inputs.complete_runs(root) == []  # ... but never this machine's inputs
    assert inputs.compute_time(root, "vgg16") is None
    assert inputs.method_conditions(root, "vgg16", "gaussiank-2019", 0.001) == []
