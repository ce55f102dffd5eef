"""Published GPU inputs and the model's check on published clusters (topkscope.perf.published):
the committed tables regenerate from the committed measurements, the fit is the least-squares
optimum, FLOP counts match hand formulas and a real (non-meta) count."""

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from topkscope.perf import model as pm
from topkscope.perf import networks, published
from topkscope.perf.model import Input
from topkscope.perf.workload import WORKLOADS, flop_counts

DOCS = Path(__file__).resolve().parents[1] / "docs" / "scaling.md"


def test_committed_tables_regenerate_from_the_committed_measurements(tmp_path):
    written = published.write(tmp_path)
    assert [p.name for p in written] == ["gpu_compute.csv", "published.csv"]
    for path in written:
        pd.testing.assert_frame_equal(pd.read_csv(path),
                                      pd.read_csv(published.REFERENCE_SCALING / path.name),
                                      check_exact=False, rtol=1e-9)


def test_every_published_number_names_its_file_and_commit():
    table = published.measurements()
    commit = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40} \S+")
    assert table["source"].map(lambda s: bool(commit.match(s))).all()
    cited = table["params"].notna()
    assert table.loc[cited, "params_source"].map(lambda s: bool(commit.match(s))).all()
    assert table.loc[~cited, "model"].isin(WORKLOADS).all()  # else counted by code


def test_preset_factors_are_the_fit_of_the_committed_measurements():
    assert published.fit_factors() == networks.FIT_FACTORS
    for name, factor in networks.FIT_FACTORS.items():
        fit = networks.PRESETS[name]
        assert fit.beta == pytest.approx(networks.LINE_RATES[name].beta / factor)
        assert fit.bandwidth_factor == factor and "preset" in fit.beta_source


def test_the_closed_form_fit_is_the_least_squares_optimum():
    from scipy.optimize import minimize_scalar

    table = published.measurements()
    factors = published.fit_factors(table)

    def loss(factor: float, network: str) -> float:
        rows = published.validation_table(table, {**factors, network: factor})
        rows = rows[(rows["network"] == network) & (rows["use"] == "fit")]
        return float(((rows["ratio"] - 1) ** 2).sum())

    for network, factor in factors.items():
        best = minimize_scalar(loss, bounds=(0.05, 1.0), args=(network,), method="bounded",
                               options={"xatol": 1e-6}).x
        assert factor == pytest.approx(best, abs=6e-4)


def test_synthetic_measurements_give_back_their_bandwidth_factor():
    """Throughputs made by the model itself at a known factor: the fit finds it, ratios are 1."""
    base = published.measurements()
    rows = []
    for _, row in base.iterrows():
        if row["gpus"] > 1:
            net = networks.fitted(networks.LINE_RATES[row["network"]], 0.5)
            compute = published.seconds_per_step(published._single_gpu(base, row["model"]))
            t, _ = published._predict(row, compute, net)
            row = row.copy()
            row["samples_per_s"] = row["gpus"] * row["batch_per_gpu"] / t
        rows.append(row)
    synthetic = pd.DataFrame(rows)
    assert published.fit_factors(synthetic) == {"10gbe": 0.5, "ib100": 0.5}
    table = published.validation_table(synthetic)
    np.testing.assert_allclose(table[table["method"] == "dense"]["ratio"], 1.0, rtol=1e-12)


def test_validation_rows_measured_time_and_use():
    meas = published.measurements()
    table = published.cluster_rows(pd.read_csv(published.PUBLISHED_CSV)).reset_index(drop=True)
    multi = meas[meas["gpus"] > 1].reset_index(drop=True)
    assert len(table) == len(multi)
    np.testing.assert_allclose(table["measured_s"],
                               multi["gpus"] * multi["batch_per_gpu"] / multi["samples_per_s"])
    fit = table["model"].isin(published.FIT_MODELS) & (table["method"] == "dense")
    assert (table.loc[fit, "use"] == "fit").all() and (table.loc[~fit, "use"] == "held-out").all()
    assert set(table.loc[table["use"] == "held-out", "model"]) >= {"bert-base"}
    np.testing.assert_allclose(table["ratio"], table["predicted_s"] / table["measured_s"])
    # the compute of every row is its own model's 1-GPU time
    single = meas[meas["gpus"] == 1].set_index("model")
    np.testing.assert_allclose(table["compute_s"], single.loc[table["model"], "batch_per_gpu"]
                               .to_numpy() / single.loc[table["model"], "samples_per_s"].to_numpy())


def test_validated_errors_are_the_largest_held_out_misses():
    table = published.cluster_rows(pd.read_csv(published.PUBLISHED_CSV))
    held = table[table["use"] == "held-out"]
    errors = published.validated_errors()
    wfbp = held["method"] == "dense-wfbp"
    assert errors["wfbp"] == pytest.approx((held[wfbp]["ratio"] - 1).abs().max())
    assert errors["no-overlap"] == pytest.approx((held[~wfbp]["ratio"] - 1).abs().max())
    assert published.error_family("gaussiank") == "no-overlap"


def test_gpu_compute_is_the_measured_resnet50_rate_times_each_models_flops():
    meas = published.measurements()
    ref = meas[(meas["model"] == "resnet50") & (meas["gpus"] == 1)].iloc[0]
    table = published.gpu_compute_table(meas).set_index("model")
    assert list(table.index) == list(WORKLOADS)
    # ResNet-50 at the paper's batch 32: the batch-64 measurement, halved (FLOPs are linear)
    assert table.loc["resnet50", "compute_s"] == pytest.approx(32 / ref["samples_per_s"], rel=1e-12)
    for model in table.index:
        ratio = table.loc[model, "compute_s"] / table.loc["resnet50", "compute_s"]
        assert ratio == pytest.approx(table.loc[model, "flops_per_step"]
                                      / table.loc["resnet50", "flops_per_step"])
        assert 0.5 < table.loc[model, "backward_fraction"] < 0.7
    compute, batch = published.gpu_compute("vgg16")
    assert compute.device == "gpu" and batch == 128 and "estimate" in compute.source
    assert published.gpu_compute("resnet56") is None


def test_fnn3_flops_match_the_hand_count():
    """FNN-3 (784-200-200-10): forward 2 B sum(in x out); backward the weight gradients (the
    same) plus the input gradients of the two upper layers (the first layer's is not needed)."""
    B, layers = 128, [(784, 200), (200, 200), (200, 10)]
    forward = 2 * B * sum(i * o for i, o in layers)
    backward = forward + 2 * B * sum(i * o for i, o in layers[1:])
    flops = flop_counts("fnn3", B)
    assert (flops.forward, flops.backward) == (forward, backward)


def test_meta_device_count_equals_a_real_run():
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from topkscope import models
    from topkscope.perf.workload import loss_of, synthetic_inputs

    torch.manual_seed(0)
    model = models.create("resnet20")
    x, y = synthetic_inputs("resnet20", model, 2)
    with FlopCounterMode(display=False) as forward:
        loss = loss_of("resnet20", model, x, y)
    with FlopCounterMode(display=False) as backward:
        loss.backward()
    flops = flop_counts("resnet20", 2)
    assert flops.forward == forward.get_total_flops()
    assert flops.backward == backward.get_total_flops()


def test_bad_measurements_are_refused(tmp_path):
    table = published.measurements()
    table.drop(columns=["samples_per_s"]).to_csv(tmp_path / "a.csv", index=False)
    with pytest.raises(ValueError, match="samples_per_s"):
        published.measurements(tmp_path / "a.csv")
    table.assign(samples_per_s=0.0).to_csv(tmp_path / "b.csv", index=False)
    with pytest.raises(ValueError, match="not > 0"):
        published.measurements(tmp_path / "b.csv")
    with pytest.raises(ValueError, match="do not exist"):
        published.measurements(tmp_path / "none.csv")
    with pytest.raises(ValueError, match="methods the model has no dense form of"):
        published.validation_table(table.assign(method="topk"))


def test_docs_show_the_generated_tables():
    docs = DOCS.read_text()
    assert published.validation_markdown(pd.read_csv(published.PUBLISHED_CSV)) in docs
    assert published.gpu_compute_markdown(pd.read_csv(published.GPU_COMPUTE_CSV)) in docs


def test_the_prediction_of_a_row_is_the_models_step():
    """A published row's prediction is topkscope.perf.model.step on the fitted preset."""
    table = pd.read_csv(published.PUBLISHED_CSV)
    row = table[(table["model"] == "resnet50") & (table["method"] == "dense-wfbp")].iloc[0]
    net = networks.PRESETS[row["network"]]
    fraction = flop_counts("resnet50", 64).backward_fraction
    inputs = pm.MethodInputs(Input(0.0, "none"), Input(1.0, "exact"), Input(fraction, "t"))
    step = pm.step("dense-wfbp", int(row["gpus"]), int(row["params"]), 0.001, net,
                   Input(float(row["compute_s"]), "t"), inputs)
    assert step["t_step"] == pytest.approx(row["predicted_s"], rel=1e-6)
