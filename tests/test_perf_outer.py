"""The step-time model of outer-loop training: its terms against the alpha-beta formulas, the
crossover against DDP solved exactly, and the inputs read back from a run folder."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import yaml

from topkscope.perf.model import Input
from topkscope.perf.networks import PRESETS
from topkscope.perf.outer import (
    OuterMethod,
    crossover_gbit,
    exchange_time,
    network_at,
    run_inputs,
    step_time,
)

NET = PRESETS["1gbe"]
D, P = 744_192, 8
COMPUTE, NO_SELECT = Input(0.2, "given"), Input(0.0, "given")
DDP = OuterMethod("ddp", 1, dense=True)
DILOCO = OuterMethod("diloco", 15, dense=True)
K = D // 64
SPARSELOCO = OuterMethod("sparseloco", 15, False, K, 2, 12, 6 * 5 * 4)


def test_terms_are_the_alpha_beta_formulas():
    a, b = NET.alpha, NET.beta
    ring = 2 * (P - 1) * a + 2 * (P - 1) / P * 4 * D * b
    assert exchange_time(DDP, P, D, NET) == pytest.approx(ring)
    message = math.ceil(K * 2 / 8) + math.ceil(K * 12 / 8) + 120 + 8
    assert SPARSELOCO.message_bytes() == message
    assert exchange_time(SPARSELOCO, P, D, NET) == pytest.approx((P - 1) * a + (P - 1) * message
                                                                 * b)
    row = step_time(DILOCO, P, D, NET, COMPUTE, NO_SELECT)
    assert row["t_step"] == pytest.approx(0.2 + ring / 15)
    assert row["bytes_per_exchange"] == P * 4 * D
    assert exchange_time(SPARSELOCO, 1, D, NET) == 0.0


@pytest.mark.parametrize("method,select", [(SPARSELOCO, Input(0.05, "g")),
                                           (OuterMethod("topk", 1, False, 170), Input(0.01, "g"))])
def test_at_the_crossover_bandwidth_the_two_steps_are_equal(method, select):
    x = crossover_gbit(method, DDP, P, D, NET, COMPUTE, select, NO_SELECT)
    assert 0 < x < math.inf
    at = network_at(NET, x)
    assert step_time(method, P, D, at, COMPUTE, select)["t_step"] == pytest.approx(
        step_time(DDP, P, D, at, COMPUTE, NO_SELECT)["t_step"], rel=1e-9)
    slower = network_at(NET, x / 2)
    assert step_time(method, P, D, slower, COMPUTE, select)["t_step"] < \
        step_time(DDP, P, D, slower, COMPUTE, NO_SELECT)["t_step"]


def test_dense_diloco_moves_the_same_bytes_less_often_so_it_is_faster_at_every_bandwidth():
    assert crossover_gbit(DILOCO, DDP, P, D, NET, COMPUTE, NO_SELECT, NO_SELECT) == math.inf


def test_a_method_slower_at_every_bandwidth_has_crossover_zero_and_one_worker_none():
    worse = OuterMethod("worse", 1, False, D, 32, 32)   # sends everything, with indices
    assert crossover_gbit(worse, DDP, P, D, NET, COMPUTE, Input(0.01, "g"), NO_SELECT) == 0.0
    assert math.isnan(crossover_gbit(DILOCO, DDP, 1, D, NET, COMPUTE, NO_SELECT, NO_SELECT))
    with pytest.raises(ValueError, match="inner_steps = 0"):
        OuterMethod("x", 0, True)
    with pytest.raises(ValueError, match="bandwidth must be > 0"):
        network_at(NET, 0)


@pytest.mark.train
def test_a_runs_inputs_give_back_its_bytes(tmp_path):
    from topkscope.cli import main

    cfg = tmp_path / "o.yaml"
    cfg.write_text(yaml.safe_dump(dict(
        experiment="o", model="fnn3", dataset="mnist", workers=2, batch_size=16,
        train_subset=320, eval_subset=100, steps=6, optimizer="adamw", lr=1e-3,
        sparsifier="chunk-topk", density=0.015625, quantize={"bits": 2}, threads=1,
        outer={"inner_steps": 3, "step": "average", "error_decay": 0.95})))
    assert main(["run", str(cfg), "--results", str(tmp_path), "--run-id", "r",
                 "--no-progress"]) == 0
    run = tmp_path / "o" / "r"
    got = run_inputs(run)
    exchanges = pd.read_parquet(run / "outer.parquet")
    assert (got.workers, got.method.inner_steps, got.method.value_bits,
            got.method.index_bits) == (2, 3, 2, 12)
    assert got.workers * got.method.message_bytes() == exchanges["bytes_sent"].iloc[0]
    assert got.compute.value > 0 and "measured here" in got.compute.source
