"""Older claims tables read into the current schema (topkscope.claims.migrate): columns added,
rows named by the claim they measured, never re-judged."""

from __future__ import annotations

import pandas as pd
import pytest

from topkscope.claims.migrate import GLOBAL_QUANTIZATION, current, legacy_condition
from topkscope.claims.registry import get_claim
from topkscope.claims.row import COLUMNS, SCHEMA_VERSION
from topkscope.condition import Condition, describe, from_record


def _row(claim: str, version: int, **fields) -> dict:
    return {"model": "gpt-mini", "dataset": "ptb", "claim": claim, "sparsifier": "topk",
            "statement": "s", "n_runs": 3, "n_units": 336, "fraction": 0.91, "evidence": "e",
            "verdict": "inconclusive", "rule": "r", "condition": "c", "schema_version": version,
            **fields}


def test_an_old_quantization_row_is_named_by_the_set_it_measured():
    """Before schema 3, quantization_error measured the global Top-k set (a set training does
    not send): it is read as quantization_error_global, its verdict and numbers unchanged."""
    old = pd.DataFrame([_row("quantization_error", 2), _row("below_paper", 2)])
    table, _ = current(old)
    assert list(table["claim"]) == [GLOBAL_QUANTIZATION, "below_paper"]
    owner = get_claim(table.at[0, "claim_key"])
    assert owner is not None and owner.name == GLOBAL_QUANTIZATION
    assert table.at[0, "claim_family"] == owner.family
    assert (table.at[0, "verdict"], table.at[0, "fraction"]) == ("inconclusive", 0.91)
    assert (table["schema_version"] == SCHEMA_VERSION).all()
    assert list(table.columns[:len(COLUMNS)]) == COLUMNS


def test_a_current_quantization_row_keeps_its_name():
    table, _ = current(pd.DataFrame([_row("quantization_error", SCHEMA_VERSION)]))
    assert table.at[0, "claim"] == "quantization_error"


def test_a_newer_schema_is_refused():
    with pytest.raises(ValueError, match="update topkscope"):
        current(pd.DataFrame([_row("below_paper", SCHEMA_VERSION + 1)]))


@pytest.mark.parametrize("key, expect", [
    ("warmup=paper; rho=0.001", Condition(warmup="paper", training_density=0.001)),
    ("warmup=custom[0.015625]; rho=0.001; during warm-up at rho=0.015625",
     Condition(warmup="custom", warmup_schedule=(0.015625,), training_density=0.001,
               phase="warm-up", phase_density=0.015625)),
    ("warmup=none; outer=average(H=15, lr=1, beta=0.95); quantize=2bit; rho=0.015625",
     Condition(outer_step="average", outer_inner_steps=15, outer_lr=1.0,
               outer_error_decay=0.95, quantize_bits=2, training_density=0.015625)),
    ("warmup=none; outer=nesterov(H=15, lr=0.7, mu=0.9, beta=1); rho=0.0078125",
     Condition(outer_step="nesterov", outer_inner_steps=15, outer_lr=0.7, outer_momentum=0.9,
               outer_error_decay=1.0, training_density=0.0078125)),
    ("all conditions (target density)", Condition(phase="pooled")),
    ("gap=final", None),
    ("warmup=paper; rho=zero", None),
])
def test_an_old_condition_key_gives_its_typed_condition(key, expect):
    """The one reader of the keys topkscope wrote before rows carried typed fields: each
    reads back to the condition whose key it was."""
    cond = legacy_condition(key)
    assert cond == expect
    if cond is not None and cond.phase != "pooled":
        assert cond.key() == key


def test_an_old_table_says_its_conditions_in_words():
    old = pd.DataFrame([_row("below_paper", 2, condition="warmup=custom[0.015625]; rho=0.001; "
                                                          "during warm-up at rho=0.015625")])
    row = next(current(old)[0].itertuples(index=False))
    assert describe(from_record(row)) == ("ρ = 0.001 after a warm-up (1/64), during the "
                                          "warm-up, at ρ = 1/64")
