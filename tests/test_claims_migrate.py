"""Older claims tables read into the current schema (topkscope.claims.migrate): columns added,
rows named by the claim they measured, never re-judged."""

from __future__ import annotations

import pandas as pd
import pytest

from topkscope.claims.migrate import GLOBAL_QUANTIZATION, current
from topkscope.claims.registry import get_claim
from topkscope.claims.row import COLUMNS, SCHEMA_VERSION


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
