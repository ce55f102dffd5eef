"""Every stored table has the dtypes docs/results-schema.md states, read with plain pandas."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from tests._figures_results import shared_small_results
from topkscope.cli import main as cli

REPO = Path(__file__).resolve().parents[1]


def documented() -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    text = (REPO / "docs" / "results-schema.md").read_text()
    for table, column, dtype in re.findall(r"^\| (\w+) \| `?([<>\w]+)`? \| (\w+) \|$", text,
                                           flags=re.M):
        if table != "table":  # the header row
            out.setdefault(table, {})[column] = dtype
    return out


def matches(dtype, documented_dtype: str) -> bool:
    if documented_dtype == "str":
        return pd.api.types.is_string_dtype(dtype)
    if documented_dtype == "list":  # lists of values (or null) are object columns
        return str(dtype) == "object"
    return str(dtype) == documented_dtype


def check(frame: pd.DataFrame, schema: dict[str, str], table: str) -> None:
    patterns = {c[len("<S>"):]: t for c, t in schema.items() if c.startswith("<S>")}
    fixed = {c: t for c, t in schema.items() if not c.startswith("<S>")}
    assert [c for c in frame.columns if c in fixed] == list(fixed), table
    for column in frame.columns:
        want = fixed.get(column) or next(
            (t for suffix, t in patterns.items() if column.endswith(suffix)), None)
        assert want is not None, f"{table}.{column} is not documented"
        assert matches(frame[column].dtype, want), (table, column, frame[column].dtype, want)
    for column in frame.columns:  # nulls, not empty strings
        if fixed.get(column) == "str":
            assert not (frame[column] == "").any(), (table, column)


@pytest.fixture(scope="module")
def small(tmp_path_factory, data_root):
    return shared_small_results(tmp_path_factory, data_root)


def test_every_table_of_a_run_and_its_analysis_has_the_documented_dtypes(small, tmp_path):
    schema = documented()
    assert set(schema) == {"train", "eval", "stats", "hist", "coords", "normality", "fits",
                           "contraction", "tails", "run", "outer"}  # outer: test_train_outer.py
    run = next(p for p in (small.root / "tiny-fnn3").iterdir() if (p / "manifest.json").exists())
    assert cli(["analyze", str(run), "--results", str(tmp_path), "--densities", "0.01",
                "--no-progress"]) == 0
    analysis = tmp_path / run.parent.name / run.name
    paths = {"run": run / "run.parquet", "train": run / "train.parquet",
             "eval": run / "eval.parquet",
             "stats": run / "stats", "hist": run / "hist", "coords": run / "coords",
             **{n: analysis / f"{n}.parquet"
                for n in ("normality", "fits", "contraction", "tails")}}
    for table, path in paths.items():
        frame = pd.read_parquet(path)
        assert len(frame), table
        check(frame, schema[table], table)
        if table != "run":  # every row names its run, as run.parquet does
            assert list(frame.columns[:2]) == ["experiment", "run_id"], table
            assert set(frame["run_id"]) == {run.name}, table
            assert set(frame["experiment"]) == {run.parent.name}, table
