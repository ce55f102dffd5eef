"""A condition as typed fields (topkscope.condition): its key is the claims table's condition
column exactly as runs wrote it before, a claims row carries and gives back every field, and
people read it in words with every setting kept and no config syntax."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from topkscope import claims
from topkscope.condition import (
    Condition,
    density_text,
    describe,
    from_record,
    run_condition,
)
from topkscope.manifest import condition_of

OUTER_AVERAGE = {"step": "average", "inner_steps": 15, "lr": 1.0, "error_decay": 0.95}
OUTER_NESTEROV = {"step": "nesterov", "inner_steps": 500, "lr": 0.7, "momentum": 0.9,
                  "error_decay": 1.0}


@pytest.mark.parametrize("manifest, key", [
    ({"density_schedule": None}, "warmup=none"),
    ({"density_schedule": "paper"}, "warmup=paper"),
    ({"config": {"density_schedule": [0.25, 0.0625]}}, "warmup=custom[0.25,0.0625]"),
    ({"density_schedule": "none", "k_rule": "floor"}, "warmup=none; k_rule=floor"),
    ({"outer": OUTER_AVERAGE, "quantize": {"bits": 2}},
     "warmup=none; outer=average(H=15, lr=1, beta=0.95); quantize=2bit"),
    ({"outer": OUTER_NESTEROV}, "warmup=none; outer=nesterov(H=500, lr=0.7, mu=0.9, beta=1)"),
    ({"deviations": ["empty_fallback=topk"]}, "warmup=none; empty_fallback=topk"),
])
def test_the_key_is_the_training_condition_runs_were_keyed_by(manifest, key):
    assert run_condition(manifest).training_key() == key == condition_of(manifest)


def test_the_key_adds_the_density_phase_and_recorder_density():
    cond = run_condition({"density_schedule": "paper", "density": 0.001})
    assert cond.key() == "warmup=paper; rho=0.001"
    warm = Condition(warmup="paper", training_density=0.001, phase="warm-up",
                     phase_density=0.015625, recorder_density=0.004)
    assert warm.key() == ("warmup=paper; rho=0.001; during warm-up at rho=0.015625; "
                          "recorded at rho=0.004")
    early = Condition(outer_step="average", outer_inner_steps=15, phase="first-exchanges")
    assert early.key() == "warmup=none; outer=average(H=15); exchanges 1-2"
    with pytest.raises(ValueError, match="phase"):
        Condition(phase="sometime")


def test_a_claims_row_carries_every_field_and_gives_it_back():
    cond = Condition(experiment="outer-fnn3-mnist", world_size=4, training_density=1 / 128,
                     recorder_density=0.0001155, warmup="custom",
                     warmup_schedule=(0.25, 0.0625), phase="later-exchanges",
                     k_rule="floor", outer_step="nesterov", outer_inner_steps=15,
                     outer_lr=0.5, outer_momentum=0.9, outer_error_decay=1.0,
                     quantize_bits=2, deviations=("a=b", "c=d"), reference="diloco")
    row = claims.ClaimRow(model="fnn3", dataset="mnist", dataset_substitute=None, claim="x",
                          sparsifier="topk", verdict="holds")
    row.set_condition(cond)
    assert row.condition == cond.key()
    # through a CSV and back: the same condition
    table = claims.frame([row])
    again = pd.read_csv(pd.io.common.StringIO(table.to_csv(index=False)))
    assert from_record(again.iloc[0]) == cond
    assert from_record({}) == Condition()


@pytest.mark.parametrize("cond, words", [
    (Condition(warmup="paper", warmup_schedule=(0.015625, 0.004), training_density=0.001),
     "ρ = 0.001 after the paper's warm-up (1/64 → 0.004)"),
    (Condition(training_density=0.001), "ρ = 0.001"),
    (Condition(training_density=0.001, warmup="paper", warmup_schedule=(0.015625, 0.004),
               phase="warm-up", phase_density=0.015625),
     "ρ = 0.001 after the paper's warm-up (1/64 → 0.004), during the warm-up, at ρ = 1/64"),
    (Condition(training_density=1 / 128, outer_step="average", outer_inner_steps=15,
               outer_lr=1.0, outer_error_decay=0.95, quantize_bits=2),
     "ρ = 1/128, outer loop: H = 15, averaged step lr 1, error decay 0.95, 2-bit values"),
    (Condition(training_density=0.001, recorder_density=0.01),
     "ρ = 0.001, Top-k evaluated at ρ = 0.01"),
])
def test_people_read_a_condition_in_words(cond, words):
    text = describe(cond)
    assert text == words
    for syntax in ("rho=", "warmup=", "custom[", "outer=", "_"):
        assert syntax not in text


def test_two_outer_loops_that_differ_only_in_lr_or_mu_read_differently():
    a = Condition(outer_step="nesterov", outer_inner_steps=15, outer_lr=0.5, outer_momentum=0.9)
    b = Condition(outer_step="nesterov", outer_inner_steps=15, outer_lr=0.7, outer_momentum=0.9)
    c = Condition(outer_step="nesterov", outer_inner_steps=15, outer_lr=0.7, outer_momentum=0.8)
    assert len({describe(a), describe(b), describe(c)}) == 3
    assert len({a.key(), b.key(), c.key()}) == 3


@pytest.mark.parametrize("rho, text", [(0.015625, "1/64"), (1 / 128, "1/128"), (0.25, "1/4"),
                                       (0.001, "0.001"), (0.0001155, "0.0001155"),
                                       (0.5, "0.5"), (None, "?"), (math.nan, "?")])
def test_densities_as_people_write_them(rho, text):
    assert density_text(rho) == text


def test_conditions_sort_by_their_keys():
    found = [Condition(training_density=0.01), Condition(warmup="paper", training_density=0.001),
             Condition(training_density=0.001)]
    assert [c.key() for c in sorted(found)] == sorted(c.key() for c in found)


def test_describe_is_its_parts_joined_and_each_setting_is_a_part():
    """describe_parts gives the parts describe joins (the warm-up after the density, the outer
    loop's settings under one 'outer loop:'), each outer setting a part of its own."""
    from topkscope.condition import describe_parts

    warm = Condition(warmup="paper", warmup_schedule=(1 / 64, 0.004), training_density=0.001,
                     phase="warm-up", phase_density=1 / 64, recorder_density=0.01)
    assert describe_parts(warm) == [
        ("density", "ρ = 0.001"), ("warmup", "the paper's warm-up (1/64 → 0.004)"),
        ("phase", "during the warm-up, at ρ = 1/64"), ("recorder", "Top-k evaluated at ρ = 0.01")]
    assert describe(warm) == ("ρ = 0.001 after the paper's warm-up (1/64 → 0.004), during the "
                              "warm-up, at ρ = 1/64, Top-k evaluated at ρ = 0.01")
    outer = Condition(training_density=1 / 128, phase="later-exchanges", outer_step="average",
                      outer_inner_steps=15, outer_lr=1.0, outer_error_decay=0.95,
                      quantize_bits=2, experiment="e", world_size=4)
    assert [k for k, _ in describe_parts(outer)] == ["density", "phase"] + ["outer"] * 4
    assert describe(outer, experiment=True) == (
        "e, ρ = 1/128, after the first 2 exchanges, outer loop: H = 15, averaged step lr 1, "
        "error decay 0.95, 2-bit values, P = 4")
    assert describe(warm, density=False) == ("the paper's warm-up (1/64 → 0.004), during the "
                                             "warm-up, at ρ = 1/64, Top-k evaluated at ρ = 0.01")


def test_answers_tell_two_conditions_apart_by_their_differing_parts():
    """An outer loop's later exchanges are no warm-up (they were once named 'without a
    warm-up' against the first exchanges); a warm-up's absence is said where only the other
    row has one."""
    from topkscope.claims.phrases import apart

    def row(**fields):
        return {"model": "fnn3", "sparsifier": "topk",
                **Condition(**fields, training_density=0.001).record()}

    first = row(outer_step="average", outer_inner_steps=15, phase="first-exchanges")
    later = row(outer_step="average", outer_inner_steps=15, phase="later-exchanges")
    assert apart(later, first) == ("FNN-3 after the first 2 exchanges",
                                   "FNN-3 in the first 2 exchanges")
    assert apart(row(warmup="paper", warmup_schedule=(1 / 64,)), row()) == (
        "FNN-3 after the paper's warm-up (1/64)", "FNN-3 without a warm-up")
