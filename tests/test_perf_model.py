"""The step-time model: parts add up, monotone in bandwidth and size, crossover consistent."""

import math

import pytest

from topkscope.perf import model as pm
from topkscope.perf import patterns
from topkscope.perf.model import Input
from topkscope.perf.networks import Network, resolve

COMPUTE = Input(0.05, "user")


def _inputs(select=0.01, ratio=1.0):
    return pm.MethodInputs(Input(select, "user"), Input(ratio, "user"))


METHODS = {"dense": _inputs(0.0), "topk": _inputs(0.02), "gaussiank": _inputs(0.004, 1.3)}


def test_parts_add_up_and_match_the_patterns():
    net = resolve("10gbe")
    row = pm.step("dense", 8, 10**6, 0.001, net, COMPUTE, METHODS["dense"])
    assert row["t_comm"] == pytest.approx(patterns.ring_allreduce(8, 4e6, net.alpha, net.beta))
    assert row["t_step"] == pytest.approx(row["t_compute"] + row["t_select"] + row["t_comm"])
    g = pm.step("gaussiank", 8, 10**6, 0.001, net, COMPUTE, METHODS["gaussiank"])
    assert g["count_sent"] == 1300  # 1.3 * k, k = 1000
    assert g["t_comm"] == pytest.approx(
        patterns.sparse_allgather([1300] * 8, net.alpha, net.beta))
    assert g["compute_source"] == "user" and "preset" in g["comm_source"]


def test_larger_count_ratio_never_faster():
    net = resolve("1gbe")
    times = [pm.step("gaussiank", 16, 10**7, 0.001, net, COMPUTE, _inputs(0.0, r))["t_step"]
             for r in (0.5, 1.0, 1.5, 3.0)]
    assert times == sorted(times)


@pytest.mark.parametrize("method", ["dense", "topk", "gaussiank", "gtopk"])
def test_more_bandwidth_or_fewer_elements_never_slower(method):
    mi = METHODS.get(method, _inputs(0.02))
    for P in (2, 16, 256):
        by_net = [pm.step(method, P, 10**7, 0.001, resolve(n), COMPUTE, mi)["t_step"]
                  for n in ("1gbe", "10gbe", "25gbe", "ib100")]
        assert by_net == sorted(by_net, reverse=True)
        by_d = [pm.step(method, P, d, 0.001, resolve("10gbe"), COMPUTE, mi)["t_step"]
                for d in (10**5, 10**6, 10**7)]
        assert by_d == sorted(by_d)


def test_one_worker_communicates_nothing():
    row = pm.step("dense", 1, 10**6, 0.001, resolve("1gbe"), COMPUTE, METHODS["dense"])
    assert row["t_comm"] == 0.0 and row["t_step"] == COMPUTE.value


def test_speedups_and_efficiency():
    rows = pm.predict("m", 10**7, 32, 0.001, resolve("1gbe"), [2, 16], COMPUTE, METHODS)
    by = {(r["method"], r["workers"]): r for r in rows}
    d16, g16 = by[("dense", 16)], by[("gaussiank", 16)]
    assert g16["speedup_vs_dense"] == pytest.approx(d16["t_step"] / g16["t_step"])
    assert by[("topk", 16)]["speedup_vs_topk"] == 1.0
    assert g16["efficiency"] == pytest.approx(COMPUTE.value / g16["t_step"])
    assert g16["throughput"] == pytest.approx(16 * 32 / g16["t_step"])


def test_crossover_is_where_the_steps_are_equal():
    net = resolve("10gbe")
    x = pm.crossover_gbit("gaussiank", 16, 10**7, 0.001, net, COMPUTE, METHODS["gaussiank"],
                          METHODS["dense"])
    assert 0 < x < math.inf
    at = Network("x", net.alpha, 8.0 / (x * 1e9), "t", "t")
    d = pm.step("dense", 16, 10**7, 0.001, at, COMPUTE, METHODS["dense"])["t_step"]
    g = pm.step("gaussiank", 16, 10**7, 0.001, at, COMPUTE, METHODS["gaussiank"])["t_step"]
    assert g == pytest.approx(d, rel=1e-9)
    slower = Network("s", net.alpha, 8.0 / (x / 2 * 1e9), "t", "t")  # below the crossover
    assert (pm.step("gaussiank", 16, 10**7, 0.001, slower, COMPUTE, METHODS["gaussiank"])["t_step"]
            < pm.step("dense", 16, 10**7, 0.001, slower, COMPUTE, METHODS["dense"])["t_step"])
    # with overlap the crossover is found by bisection; it agrees with the linear one at 0
    xo = pm._crossover_bisect("gaussiank", 16, 10**7, 0.001, net, COMPUTE,
                              METHODS["gaussiank"], METHODS["dense"], pm.Options())
    assert xo == pytest.approx(x, rel=1e-6)


def test_crossover_extremes():
    net = resolve("10gbe")
    free = pm.MethodInputs(Input(0.0, "u"), Input(1.0, "u"))
    assert pm.crossover_gbit("gaussiank", 16, 10**7, 0.001, net, COMPUTE, free,
                             METHODS["dense"]) == math.inf
    # dense density: the sparse exchange moves more bytes than the all-reduce
    assert pm.crossover_gbit("topk", 64, 10**6, 0.5, net, COMPUTE, METHODS["topk"],
                             METHODS["dense"]) == 0.0


def test_overlap_hides_communication_and_is_named():
    opts = pm.Options(overlap=1.0)
    row = pm.step("dense", 16, 10**6, 0.001, resolve("10gbe"), COMPUTE, METHODS["dense"], opts)
    assert row["t_comm"] == pytest.approx(max(0.0, row["t_comm_total"] - COMPUTE.value))
    assert "overlap=1" in row["options"] and "deviation" in row["options"]
    assert "overlap" not in pm.Options().label()
    with pytest.raises(ValueError, match="overlap"):
        pm.Options(overlap=1.5)
    with pytest.raises(ValueError, match="layout"):
        pm.Options(layout="three")


def test_dense_fp16_moves_half_the_bytes_of_dense():
    net = resolve("10gbe")
    for P in (2, 16, 64):
        fp16 = pm.step("dense-fp16", P, 10**7, 0.001, net, COMPUTE, METHODS["dense"])
        assert fp16["t_comm"] == pytest.approx(patterns.ring_allreduce(P, 2 * 10**7, net.alpha,
                                                                       net.beta))
        dense = pm.step("dense", P, 10**7, 0.001, net, COMPUTE, METHODS["dense"])
        alpha_part = 2 * (P - 1) * net.alpha
        assert fp16["t_comm"] - alpha_part == pytest.approx((dense["t_comm"] - alpha_part) / 2)
        assert fp16["count_sent"] == 10**7 and fp16["t_select"] == 0


@pytest.mark.parametrize("network, P", [("1gbe", 16), ("10gbe", 8), ("ib100", 64), ("nvlink", 2)])
def test_dense_wfbp_is_forward_plus_max_of_backward_and_exchange(network, P):
    """t = t_forward + max(t_backward, t_comm): the exchange overlaps the backward pass."""
    net, fraction = resolve(network), 0.65
    wfbp = pm.MethodInputs(Input(0.0, "none"), Input(1.0, "exact"), Input(fraction, "test"))
    row = pm.step("dense-wfbp", P, 10**7, 0.001, net, COMPUTE, wfbp)
    comm = pm.step("dense", P, 10**7, 0.001, net, COMPUTE, METHODS["dense"])["t_comm"]
    forward, backward = (1 - fraction) * COMPUTE.value, fraction * COMPUTE.value
    assert row["t_step"] == pytest.approx(forward + max(backward, comm))
    assert row["t_comm_total"] == pytest.approx(comm) and row["overlap"] == fraction
    assert row["overlap_source"] == "test" and "overlap" not in row["options"]


def test_baseline_speedups_and_no_crossover_for_dense_methods():
    wfbp = pm.MethodInputs(Input(0.0, "none"), Input(1.0, "exact"), Input(0.6, "test"))
    methods = {**METHODS, "dense-wfbp": wfbp, "dense-fp16": METHODS["dense"]}
    rows = pm.predict("m", 10**7, 32, 0.001, resolve("1gbe"), [16], COMPUTE, methods)
    by = {r["method"]: r for r in rows}
    for ref in pm.SPEEDUP_REFERENCES:
        assert by["gaussiank"][pm.speedup_column(ref)] == pytest.approx(
            by[ref]["t_step"] / by["gaussiank"]["t_step"])
    assert pm.speedup_column("dense-wfbp") == "speedup_vs_dense_wfbp"
    for m in pm.DENSE_METHODS:
        assert math.isnan(by[m]["crossover_gbit"])
    assert by["gaussiank"]["crossover_gbit"] > 0
    partial = pm.predict("m", 10**7, 32, 0.001, resolve("1gbe"), [16], COMPUTE, METHODS)
    assert all(math.isnan(r["speedup_vs_dense_fp16"]) for r in partial)


@pytest.mark.parametrize("overlap", [0.0, 0.3])
def test_breakeven_selection_ties_the_step_exactly(overlap):
    """At its break-even selection time a method's step equals the baseline's: Dense's whole
    step, or Top-k's when the method selects that much longer than Top-k (recomputed here by
    predicting again with that selection time)."""
    opts = pm.Options(overlap=overlap)
    methods = {**METHODS, "dense-fp16": _inputs(0.0),
               "gaussiank-2019": _inputs(0.003, 2.4)}
    for P in (2, 16, 256):
        rows = {r["method"]: r for r in pm.predict("m", 10**7, 32, 0.001, resolve("10gbe"),
                                                   [P], COMPUTE, methods, opts)}
        for name in ("topk", "gaussiank", "gaussiank-2019"):
            row = rows[name]
            assert math.isnan(rows["dense"][pm.breakeven_column("dense")])  # selects nothing
            for ref in ("dense", "dense-fp16", "topk"):
                b = row[pm.breakeven_column(ref)]
                select = b + (rows[ref]["t_select"] if ref == "topk" else 0.0)
                if select < 0:  # slower even if it selected in no time
                    assert rows[name]["t_compute"] + rows[name]["t_comm"] > \
                        rows[ref]["t_step"] - rows[ref]["t_select"]
                    continue
                tied = pm.step(name, P, 10**7, 0.001, resolve("10gbe"), COMPUTE,
                               pm.MethodInputs(Input(select, "u"), methods[name].count_ratio),
                               opts)
                reference = rows[ref]["t_step"]
                assert tied["t_step"] == pytest.approx(reference, rel=1e-12)
    assert pm.breakeven_column("topk") == "breakeven_select_over_topk"
    assert pm.breakeven_column("dense-wfbp") == "breakeven_select_vs_dense_wfbp"


def test_predict_rows_carry_the_condition_and_the_seeds_of_the_counts():
    from topkscope.perf.inputs import Counts

    counts = Counts(2.0, "measured", None, "warmup=paper", ((0, 1.5), (1, 2.5)))
    methods = {**METHODS, "gaussiank-2019 [warmup=paper]": pm.MethodInputs(
        Input(0.003, "u"), counts, method="gaussiank-2019", condition="warmup=paper")}
    rows = pm.predict("m", 10**7, 32, 0.001, resolve("1gbe"), [16], COMPUTE, methods)
    g = next(r for r in rows if r["method"] == "gaussiank-2019")
    assert g["condition"] == "warmup=paper" and g["count_ratio"] == 2.0
    assert (g["count_seeds"], g["count_ratio_low"], g["count_ratio_high"]) == (2, 1.5, 2.5)
    assert g["count_sent"] == 2 * 10**4  # 2.0 x k, k = 10^4
    dense = next(r for r in rows if r["method"] == "dense")
    assert dense["condition"] == "" and math.isnan(dense["count_seeds"])
    assert g["speedup_vs_topk"] == pytest.approx(
        next(r for r in rows if r["method"] == "topk")["t_step"] / g["t_step"])
