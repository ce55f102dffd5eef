"""The P = 16 claims on GPU input bands (topkscope.claims.gpu_bands): verdicts only where every
corner of the band agrees, the deciding input named, and the committed table as generated."""

import pandas as pd
import pytest

from topkscope.claims import gpu_bands as p16_gpu
from topkscope.claims import verdicts
from topkscope.perf import model as pm
from topkscope.perf.model import Input
from topkscope.perf.networks import PRESETS

ERRORS = {"no-overlap": 0.05, "wfbp": 0.25}
D = 14_728_266


def _tables(topk=(0.18, 0.22), rule=(0.001, 0.004), counts="1.1-2.0", missed=0.0,
            count_claim="gaussiank_count_in_training"):
    validation = pd.DataFrame([
        {"model": "vgg16", "method": "dense", "batch_per_gpu": 128, "compute_s": 0.03,
         "measured_s": 0.05, "job": 1, "params": D, "family": "one-node dense",
         "communicate_s": 0.02, "predicted_communicate_s": 0.02},
        {"model": "vgg16", "method": "topk", "batch_per_gpu": 128, "compute_s": 0.03,
         "measured_s": 0.3, "job": 2, "params": D, "family": "one-node sparse",
         "communicate_s": 0.0004 + missed, "predicted_communicate_s": 0.0004}])
    selection = pd.DataFrame([
        {"model": "vgg16", "method": "topk", "phase": "target", "low_s": topk[0],
         "high_s": topk[1], "job": 2, "select_s": sum(topk) / 2, "label": "measured on a GPU"},
        {"model": "vgg16", "method": "gaussiank-2019", "phase": "any k", "low_s": rule[0],
         "high_s": rule[1], "job": None, "select_s": sum(rule) / 2, "label": "modelled (x)"}])
    low, high = (float(c) for c in counts.split("-"))
    claims = pd.DataFrame([{"claim": count_claim, "sparsifier": "gaussiank-2019",
                            "model": "vgg16", "condition": "warmup=paper; rho=0.001",
                            "count_p5": low, "count_over_k": 1.5, "count_p95": high,
                            "evidence": "a text the bands never read"}])
    return validation, selection, claims


def _row(table, network, claim):
    return table[(table["network"] == network) & (table["claim"] == claim)].iloc[0]


def test_a_corner_is_the_models_step():
    validation, selection, claims = _tables()
    bands = p16_gpu.model_bands("vgg16", validation, selection, claims)
    assert (bands["compute"].low, bands["compute"].high) == (0.03, 0.05)
    assert (bands["counts"].low, bands["counts"].high) == (1.1, 2.0)
    net = PRESETS["10gbe"]
    point = {"compute": 0.05, "topk": 0.18, "select": 0.004, "counts": 2.0, "overhead": 0.0}
    t = p16_gpu._steps("vgg16", D, net, point)
    want = pm.step("gaussiank-2019", 16, D, 0.001, net, Input(0.05, "t"),
                   pm.MethodInputs(Input(0.004, "t"), Input(2.0, "t")))["t_step"]
    assert t["gaussiank-2019"] == pytest.approx(want)


def test_holds_only_when_every_corner_agrees_and_names_what_decides():
    table = p16_gpu.claim_rows(*_tables(), errors=ERRORS)
    # Top-k's 180-220 ms selection against the rule's 1-4 ms: faster at every corner
    assert _row(table, "10gbe", "gaussiank_speedup_p16_gpu_topk")["verdict"] == "holds"
    # the missed exchange cost adds to both sparse steps: still faster than Top-k
    table = p16_gpu.claim_rows(*_tables(missed=0.5), errors=ERRORS)
    assert _row(table, "10gbe", "gaussiank_speedup_p16_gpu_topk")["verdict"] == "holds"
    # Top-k's selection somewhere in 0.5 ms ... 300 ms: that band alone decides
    table = p16_gpu.claim_rows(*_tables(topk=(0.0005, 0.3)), errors=ERRORS)
    row = _row(table, "10gbe", "gaussiank_speedup_p16_gpu_topk")
    assert row["verdict"] == "inconclusive"
    assert row["cause"].startswith("decided by topk (0.5 ms: fails; 300 ms: holds)")


def test_counts_read_on_topks_u_never_decide():
    """The rule's counts from its own training decide; the same band read on Top-k's u (no
    training run of the rule for the model) keeps every verdict at inconclusive."""
    own = p16_gpu.claim_rows(*_tables(), errors=ERRORS)
    row = _row(own, "10gbe", "gaussiank_speedup_p16_gpu_topk")
    assert row["verdict"] == "holds" and "in its own training" in row["evidence"]
    other = p16_gpu.claim_rows(*_tables(count_claim="gaussiank_count"), errors=ERRORS)
    row = _row(other, "10gbe", "gaussiank_speedup_p16_gpu_topk")
    assert row["verdict"] == "inconclusive"
    assert row["cause"].startswith("would be holds, but the rule's counts are on Top-k's u")
    assert set(other["verdict"]) == {"inconclusive"}
    # both recorded: its own training wins
    claims = pd.concat([_tables()[2], _tables(counts="5.0-9.0",
                                              count_claim="gaussiank_count")[2]])
    bands = p16_gpu.model_bands("vgg16", *_tables()[:2], claims)
    assert (bands["counts"].low, bands["counts"].high) == (1.1, 2.0)


def test_verdict_rule():
    errors = {"dense": 0.05, "topk": 0.05}
    assert verdicts.band_verdict([{"dense": 1.1, "topk": 2.0}], ("dense", "topk"), errors) == "holds"
    assert verdicts.band_verdict([{"dense": 0.9, "topk": 2.0}, {"dense": 0.8, "topk": 2.0}],
                            ("dense", "topk"), errors) == "fails"
    assert verdicts.band_verdict([{"dense": 0.9, "topk": 2.0}, {"dense": 1.2, "topk": 2.0}],
                            ("dense", "topk"), errors) == "inconclusive"


def test_committed_table_is_generated():
    committed = pd.read_csv(p16_gpu.P16_CSV)
    fresh = p16_gpu.claim_rows()
    assert committed["verdict"].tolist() == fresh["verdict"].tolist()
    assert committed["cause"].tolist() == fresh["cause"].tolist()


def test_docs_show_the_committed_verdicts():
    docs = p16_gpu.REFERENCE.parents[1] / "docs" / "scaling.md"
    assert p16_gpu.markdown(pd.read_csv(p16_gpu.P16_CSV)) in docs.read_text()
