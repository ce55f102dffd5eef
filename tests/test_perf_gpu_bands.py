"""The numbers of the P = 16 GPU bands (topkscope.perf.gpu_bands), the memory-traffic model of
the threshold selectors (topkscope.perf.traffic) and the published torch.topk measurements
(topkscope.perf.torch_topk), each against a hand computation on small synthetic inputs."""

import math

import numpy as np
import pandas as pd
import pytest

from topkscope.perf import gpu_bands as gb
from topkscope.perf import gtopkssgd, torch_topk, traffic
from topkscope.perf import model as pm
from topkscope.perf.model import Band, Input
from topkscope.perf.networks import PRESETS

D = 14_728_266
LOGGED = "measured on a GPU (kljp/topk_results@x job/topk.o1; ...)"


def validation(**extra) -> pd.DataFrame:
    rows = [
        # dense runs at the common batch (128) on an A100 and an unnamed GPU, one at batch 64
        {"job": 1, "model": "vgg16", "method": "dense", "batch_per_gpu": 128, "gpu": "A100",
         "compute_s": 0.027, "measured_s": 0.035, "params": D, "family": "one-node dense"},
        {"job": 2, "model": "vgg16", "method": "dense", "batch_per_gpu": 128,
         "gpu": "not named", "compute_s": 0.033, "measured_s": 0.049, "params": D,
         "family": "one-node dense"},
        {"job": 3, "model": "vgg16", "method": "dense", "batch_per_gpu": 64, "gpu": "A100",
         "compute_s": 0.010, "measured_s": 0.090, "params": D, "family": "one-node dense"},
        # sparse rows: the exchange beyond the model's all-gather, 0.2 ms and 1.4 ms
        {"job": 4, "model": "vgg16", "method": "topk", "batch_per_gpu": 128, "gpu": "A100",
         "params": D, "family": "one-node sparse", "exchange_s": 0.0015,
         "predicted_communicate_s": 0.0001, "ratio_slowest": 0.95, "ratio": 0.9},
        {"job": 5, "model": "vgg16", "method": "randk", "batch_per_gpu": 128, "gpu": "A100",
         "params": D, "family": "one-node sparse", "exchange_s": 0.0003,
         "predicted_communicate_s": 0.0001, "ratio_slowest": 0.85, "ratio": 0.84},
    ]
    return pd.DataFrame(rows).assign(**extra)


def selection() -> pd.DataFrame:
    return pd.DataFrame([
        {"method": "topk", "model": "vgg16", "d": D, "job": 4, "phase": "target",
         "low_s": 0.18, "high_s": 0.19, "slowest_high_s": 0.21, "label": LOGGED},
        {"method": "topk", "model": "vgg16", "d": D, "job": 4, "phase": "warm-up",
         "low_s": 0.17, "high_s": 0.2, "slowest_high_s": 0.24, "label": LOGGED},
        {"method": "randk", "model": "vgg16", "d": D, "job": 5, "phase": "target",
         "low_s": 1e-4, "high_s": 2e-4, "slowest_high_s": 3e-4, "label": LOGGED},
        # a fitted row: no job, no slowest worker; never read as a logged COMP
        {"method": "topk", "model": "vgg16", "d": D, "job": None, "phase": "any k",
         "low_s": 1e-6, "high_s": 1e-6, "slowest_high_s": None, "label": "fitted by"}])


def own_training(p5=0.8, p95=1.6, condition="warmup=paper; rho=0.001", model="vgg16",
                 claim=gb.OWN_TRAINING_CLAIM) -> pd.DataFrame:
    return pd.DataFrame([{"claim": claim, "sparsifier": gb.METHOD, "model": model,
                          "condition": condition, "count_p5": p5, "count_p95": p95,
                          "profile": "quick", "evidence": "text the bands never read"}])


def sources(tmp_path, claims=(), **kw) -> gb.Sources:
    evaluations = tmp_path / "selector_counts.csv"
    pd.DataFrame([{"method": gb.METHOD, "source": "fnn3-training", "evaluations": e}
                  for e in (1, 2, 2, 3)]).to_csv(evaluations, index=False)
    return gb.Sources(kw.get("validation", validation()), selection(), gtopkssgd.measurements(),
                      list(claims), evaluations, torch_topk.measurements(),
                      {"vgg16": 0.666, "alexnet": 0.655, "resnet20": 0.665})


# ------------------------------------------------------------------ bands by hand
def test_compute_band_is_the_dense_runs_of_the_common_batch(tmp_path):
    bands = gb.model_bands("vgg16", sources(tmp_path))
    assert (bands["compute"].low, bands["compute"].high) == (0.027, 0.049)
    assert bands["batch"].low == 128
    assert "jobs 1, 2" in bands["compute"].source


def test_gtopkssgd_compute_is_its_one_worker_time_and_breakdown(tmp_path):
    bands = gb.model_bands("alexnet", sources(tmp_path))
    one_worker = 64 / 173.469  # batch / samples per s per worker (gtopkssgd.csv)
    assert bands["compute"].low == pytest.approx(0.257205)  # the breakdown's compute
    assert bands["compute"].high == pytest.approx(one_worker)
    # Top-k: the breakdown's compression, measured on the compute's own source: no fit added
    assert bands["topk"].low == bands["topk"].high == pytest.approx(0.383776)


def test_topk_band_spans_phases_the_slowest_worker_and_the_breakdown(tmp_path):
    bands = gb.model_bands("vgg16", sources(tmp_path))
    # low: min(the phases' 5th percentiles of the mean, the breakdown's 91.353 ms); high: the
    # slowest worker's 95th percentile over every phase
    assert bands["topk"].low == pytest.approx(0.091353)
    assert bands["topk"].high == pytest.approx(0.24)


def test_topk_without_a_measurement_on_the_computes_gpus_uses_the_fit_times_its_ratios(tmp_path):
    rows = validation()
    extra = rows.iloc[:1].assign(model="resnet20", params=269_722, job=9, gpu="not named")
    src = sources(tmp_path, validation=pd.concat([rows, extra], ignore_index=True))
    bands = gb.model_bands("resnet20", src)
    fit = gtopkssgd.AUTHORS_TOPK_S * 269_722 * math.log2(269_722)
    fit_vgg = gtopkssgd.AUTHORS_TOPK_S * D * math.log2(D)
    ratios = [0.18 / fit_vgg, 0.21 / fit_vgg, 0.17 / fit_vgg, 0.24 / fit_vgg]
    breakdown = 0.001618  # ResNet-20's compression in the gtopkssgd breakdown
    assert bands["topk"].low == pytest.approx(min(breakdown, fit * min(ratios)))
    assert bands["topk"].high == pytest.approx(max(breakdown, fit * max(ratios)))


def test_counts_come_from_the_rules_own_training_fields_else_nominal(tmp_path):
    assert gb.model_bands("vgg16", sources(tmp_path))["counts"] == Band(1.0, 1.0, gb.NOMINAL)
    own = gb.model_bands("vgg16", sources(tmp_path, [own_training()]))["counts"]
    assert (own.low, own.high) == (0.8, 1.6)
    # the paper's warm-up preferred over another condition of the same model
    both = pd.concat([own_training(0.01, 0.05, "warmup=none; rho=0.001"), own_training()])
    assert gb.model_bands("vgg16", sources(tmp_path, [both]))["counts"].high == 1.6
    # on Top-k's u, a warm-up phase, or a table of an earlier schema: not the rule's counts
    for table in (own_training(claim="gaussiank_count"),
                  own_training(condition="warmup=paper; rho=0.001; during warm-up at rho=0.004"),
                  own_training().drop(columns=["count_p5", "count_p95"])):
        assert gb.model_bands("vgg16", sources(tmp_path, [table]))["counts"].source == gb.NOMINAL


def test_overhead_band_is_the_envelope_of_a_constant_and_a_per_parameter_cost(tmp_path):
    missed = np.array([0.0015 - 0.0001, 0.0003 - 0.0001])
    for model, d in (("vgg16", D), ("alexnet", 61_100_840)):
        band = gb.model_bands(model, sources(tmp_path))["overhead"]
        per_d = missed / D
        assert band.low == pytest.approx(min(missed.min(), per_d.min() * d))
        assert band.high == pytest.approx(max(missed.max(), per_d.max() * d))


def test_sparse_error_is_the_one_node_sparse_rows_with_the_slowest_selection():
    assert gb.sparse_error(validation()) == pytest.approx(0.15)
    cluster = {"no-overlap": 0.045, "wfbp": 0.275}
    assert gb.comparison_error("dense", cluster, 0.15) == 0.15
    assert gb.comparison_error("dense-wfbp", cluster, 0.15) == 0.275
    assert gb.comparison_error("gtopk", cluster, 0.15) == 0.15


def test_a_corner_is_the_models_step_and_the_overhead_lands_on_the_sparse_steps():
    net = PRESETS["ib100"]
    point = {"compute": 0.05, "topk": 0.2, "select": 0.004, "counts": 2.0, "overhead": 0.001}
    t = gb.steps(D, net, point, 0.666)
    rule = pm.step(gb.METHOD, 16, D, 0.001, net, Input(0.05, "t"),
                   pm.MethodInputs(Input(0.004, "t"), Input(2.0, "t")))["t_step"]
    dense = pm.step("dense", 16, D, 0.001, net, Input(0.05, "t"),
                    pm.MethodInputs(Input(0.0, "t"), Input(1.0, "t")))["t_step"]
    assert t[gb.METHOD] == pytest.approx(rule + 0.001)
    assert t["dense"] == pytest.approx(dense)
    assert t["gtopk"] - t["topk"] < 0  # the tree moves fewer pairs than the all-gather
    assert len(gb.corner_points({k: Band(0, 1, "") for k in gb.VARIED})) == 2 ** 5


@pytest.mark.parametrize("name, baseline", [("overhead", "dense"), ("overhead", "topk"),
                                             ("select", "dense-fp16"), ("counts", "dense")])
def test_breakeven_is_where_the_speedup_crosses_one_plus_e(tmp_path, name, baseline):
    """Just below the break-even value every corner of the other bands still clears 1 + e;
    just above it one does not (the overhead also lands on a sparse baseline's step)."""
    bands = gb.model_bands("vgg16", sources(tmp_path))
    net, e = PRESETS["ib100"], 0.1
    limit = gb.breakeven(0.666, D, net, bands, baseline, e, name)
    assert math.isfinite(limit) and limit > (1.0 if name == "counts" else 0.0)
    corners = [p for p in gb.corner_points(bands)]

    def lowest(value):
        pts = [{**p, name: value} for p in corners]
        return min(s[baseline] for s in gb.speedups(0.666, D, net, pts, (baseline,)))

    assert lowest(limit * (1 - 1e-6)) > 1 + e
    assert lowest(limit * (1 + 1e-3)) <= 1 + e


# ------------------------------------------------------------------ the memory-traffic model
def test_traffic_model_against_a_float64_restatement(tmp_path):
    sel = selection()
    evaluations = tmp_path / "e.csv"
    pd.DataFrame({"method": [gb.METHOD] * 3, "source": ["fnn3-training", "t3", "t3"],
                  "evaluations": [2, 1, 3]}).to_csv(evaluations, index=False)
    for gpus, (b_lo, b_hi) in ((("A100",), (1555e9, 2039e9)),
                               (("A100", "not named"), (300e9, 2039e9)),
                               (("not named",), (300e9, 2039e9))):
        band = traffic.selection_band(gb.METHOD, D, gpus, sel, evaluations)
        kernel_hi = 2e-4 / 4  # Rand-k's 95th percentile over its fewest 4 kernels
        low = np.float64((36 + 7 * 1) * D) / (1.0 * b_hi) + (9 + 4 * 1) * 5e-6
        high = np.float64((36 + 7 * 3) * D) / (0.5 * b_lo) + (9 + 4 * 3) * kernel_hi
        assert band.low == pytest.approx(float(low), rel=1e-12)
        assert band.high == pytest.approx(float(high), rel=1e-12)
        assert "recorded 1-3 over 3 calls" in band.source
    # no recording: the loop's bounds, said so
    band = traffic.selection_band("redsync-2019", D, ("A100",), sel, tmp_path / "none.csv")
    assert "its loop's bounds 1-3" in band.source
    with pytest.raises(ValueError, match="no memory-traffic counts for 'dgc'"):
        traffic.selection_band("dgc", D, ("A100",), sel)


def test_committed_band_and_traffic_tables_are_generated_and_shown():
    committed = pd.read_csv(traffic.TRAFFIC_CSV)
    fresh = traffic.table(gb.input_gpus())
    pd.testing.assert_frame_equal(committed, fresh, check_exact=False, rtol=1e-9)
    bands = pd.read_csv(gb.BANDS_CSV)
    pd.testing.assert_frame_equal(bands, gb.bands_table(), check_exact=False, rtol=1e-9)
    docs = (gb.REFERENCE.parents[1] / "docs" / "scaling.md").read_text()
    assert traffic.markdown(committed) in docs and gb.bands_markdown(bands) in docs
    assert torch_topk.markdown() in docs


# ------------------------------------------------------------------ torch.topk, published
def test_published_torch_topk_band_interpolates_in_log_log():
    table = torch_topk.measurements()
    assert set(table["source"]) == {
        "pytorch/pytorch pull request #164459 (description, 2025-10-02: its table of "
        "torch.topk times)"}
    d = 14_728_266
    per_version = []
    for version, (t6, t8) in {"2.6.0": (0.135, 3.56), "2.8.0": (0.145, 17.4),
                              "2.8.0 + #164459": (0.098, 2.54)}.items():
        slope = math.log(t8 / t6) / math.log(1e8 / 1e6)
        per_version.append(t6 / 1e3 * (d / 1e6) ** slope)
        assert torch_topk.seconds(table, version, d)[0] == pytest.approx(per_version[-1])
    band = torch_topk.band(d, table)
    assert (band.low, band.high) == pytest.approx((min(per_version), max(per_version)))
    assert "H20" in band.source and "#164459" in band.source
    _, how = torch_topk.seconds(table, "2.6.0", 269_722)
    assert how.startswith("extrapolated")
