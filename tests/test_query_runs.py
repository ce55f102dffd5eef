"""Many runs read as one table: every row names its run (experiment, run_id), run.parquet holds
each run's method, seed and condition, and every part of a table has one schema, so DuckDB,
polars and pandas read a glob of runs that recorded different selectors whole; the recipe of
docs/results.md runs as written on such a results root."""

from __future__ import annotations

import glob
import json
import re
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow.parquet as pq
import pytest
import torch

from topkscope.analysis.runs import load, runs_table
from topkscope.hooks import Recorder
from topkscope.hooks.settings import recordable
from topkscope.io import Table
from topkscope.manifest import Manifest, condition_of
from topkscope.schema import RUN_KEYS, TRAIN_COLUMNS, column_prefix, run_identity

REPO = Path(__file__).resolve().parents[1]
LAYOUT = [("w", 0, 200), ("b", 200, 100)]
# (run id, method, seed, selectors the recorder evaluates, warm-up)
RUNS = [("a", "topk", 0, ["gaussiank"], None), ("b", "gaussiank", 1, ["dgc", "randk"], None),
        ("c", "gaussiank", 2, [], "paper")]


def make_run(root: Path, run_id: str, method: str, seed: int, selectors: list[str],
             warmup: str | None) -> Path:
    """A run folder written as `topkscope run` writes one: manifest, recorder parts, train
    table, without training (random u)."""
    run_dir = root / "fnn3-mnist" / run_id
    run_dir.mkdir(parents=True)
    manifest = Manifest(run_dir, experiment="fnn3-mnist", run_id=run_id, sparsifier=method,
                        seed=seed, density=0.01, model="fnn3", dataset="mnist", world_size=2,
                        density_schedule=warmup, profile="quick")
    manifest.write()
    gen = torch.Generator().manual_seed(seed)
    with Recorder(run_dir, manifest=manifest, densities=[0.01, 0.1], sparsifiers=selectors,
                  seed=seed) as rec:
        for step in (0, 5, 10):
            for rank in (0, 1):
                rec.record(step, rank, u=torch.randn(300, generator=gen), layout=LAYOUT)
    train = Table(run_dir / "train.parquet", TRAIN_COLUMNS, run_identity(run_dir, manifest.data))
    for step in range(12):
        train.append({c: (step if TRAIN_COLUMNS[c] in ("int64", "Int64")
                          else "accuracy" if c == "metric_name" else 0.5) for c in TRAIN_COLUMNS})
    train.flush()
    manifest.complete(steps_done=12)
    return run_dir


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("many") / "results"
    for spec in RUNS:
        make_run(root, *spec)
    return root


def test_every_part_has_one_schema_with_every_selector_and_the_run_identity(results):
    parts = sorted(results.glob("*/*/stats/*.parquet"))
    schemas = {tuple(pq.read_schema(p).names) for p in parts}
    assert len(parts) == 3 and len(schemas) == 1
    (names,) = schemas
    assert names[:2] == RUN_KEYS
    for selector in recordable():
        assert f"{column_prefix(selector)}_recall" in names
    # a selector the run did not evaluate is null there; one it did holds values
    b = pd.read_parquet(next((results / "fnn3-mnist" / "b" / "stats").iterdir()))
    assert b["gaussiank_count"].isna().all() and b["dgc_count"].notna().any()
    assert set(b["experiment"]) == {"fnn3-mnist"} and set(b["run_id"]) == {"b"}
    # the loader shows one run: no identity, only the selectors it recorded
    run = load(results / "fnn3-mnist" / "b")
    assert not set(RUN_KEYS) & (set(run.stats.columns) | set(run.train.columns))
    assert {c for c in run.stats.columns if c.endswith("_count")} == {"dgc_count", "randk_count"}


def expected_rows(results: Path, run_id: str) -> pd.DataFrame:
    s = load(results / "fnn3-mnist" / run_id).stats
    return s[(s.layer == "__global__") & (s.kind == "u")].sort_values(
        ["step", "rank", "density"]).reset_index(drop=True)


def test_duckdb_reads_the_recursive_glob_whole_and_filters_by_method_and_seed(results,
                                                                            monkeypatch):
    monkeypatch.chdir(results.parent)
    every = set().union(*(pq.read_schema(p).names for p in results.glob("*/*/stats/*.parquet")))
    got = duckdb.sql("SELECT * FROM 'results/**/stats/*.parquet'").df()
    assert set(got.columns) == every and len(got) == sum(
        len(load(p).stats) for p in sorted((results / "fnn3-mnist").iterdir()))
    picked = duckdb.sql("""
        SELECT s.*, r.sparsifier, r.seed FROM 'results/**/stats/*.parquet' AS s
        JOIN 'results/**/run.parquet' AS r USING (experiment, run_id)
        WHERE r.sparsifier = 'gaussiank' AND r.seed = 1 AND s.layer = '__global__'
          AND s.kind = 'u' ORDER BY s.step, s.rank, s.density""").df()
    want = expected_rows(results, "b")
    assert len(picked) == len(want) == 3 * 2 * 2 and set(picked["run_id"]) == {"b"}
    np.testing.assert_array_equal(picked["topk_ratio"], want["topk_ratio"])
    np.testing.assert_array_equal(picked["dgc_recall"], want["dgc_recall"])


def test_polars_and_pandas_read_the_same_glob_whole(results, monkeypatch):
    monkeypatch.chdir(results.parent)
    files = sorted(glob.glob("results/*/*/stats/*.parquet"))
    frame = pd.concat(map(pd.read_parquet, files), ignore_index=True)
    stats = pl.read_parquet("results/**/stats/*.parquet")
    assert stats.columns == list(frame.columns) and stats.height == len(frame)
    runs = pl.read_parquet("results/**/run.parquet")
    joined = stats.join(runs.select("experiment", "run_id", "sparsifier", "seed"),
                        on=["experiment", "run_id"]).filter(
        (pl.col("sparsifier") == "gaussiank") & (pl.col("seed") == 2)
        & (pl.col("layer") == "__global__") & (pl.col("kind") == "u")).sort(
        ["step", "rank", "density"])
    want = expected_rows(results, "c")
    np.testing.assert_array_equal(joined["topk_ratio"].to_numpy(), want["topk_ratio"])


def test_run_table_follows_the_manifest_and_runs_table_builds_it_for_any_run(results,
                                                                            tmp_path):
    table = pd.concat(map(pd.read_parquet, sorted(results.glob("*/*/run.parquet"))),
                      ignore_index=True)
    assert list(table["run_id"]) == ["a", "b", "c"]
    assert list(table["sparsifier"]) == ["topk", "gaussiank", "gaussiank"]
    assert str(table["seed"].dtype) == "Int64" and list(table["seed"]) == [0, 1, 2]
    assert set(table["status"]) == {"complete"} and list(table["steps_done"]) == [12] * 3
    assert list(table["condition"]) == [condition_of(json.loads(
        (results / "fnn3-mnist" / r / "manifest.json").read_text())) for r in "abc"]
    assert list(table["condition"])[2] == "warmup=paper"
    assert list(table.loc[1, "recorder_sparsifiers"]) == ["dgc", "randk"]
    assert list(table.loc[0, "recorder_densities"]) == [0.01, 0.1]
    assert table["train_density"].tolist() == [0.01] * 3
    pd.testing.assert_frame_equal(runs_table(results), table)
    # a run written before run.parquet existed: its manifest alone gives the same row
    old = tmp_path / "old" / "fnn3-mnist" / "b"
    shutil.copytree(results / "fnn3-mnist" / "b", old)
    (old / "run.parquet").unlink()
    pd.testing.assert_frame_equal(runs_table(tmp_path / "old"), table.iloc[[1]].reset_index(
        drop=True))
    # a run still going says so
    going = tmp_path / "going"
    Manifest(going, experiment="x", run_id="going", seed=None).write()
    row = pd.read_parquet(going / "run.parquet").iloc[0]
    assert row["status"] == "running" and pd.isna(row["seed"]) and row["experiment"] == "x"


def test_the_recursive_glob_reaches_what_a_resume_set_aside_and_the_documented_one_does_not(
        results, tmp_path, monkeypatch):
    root = tmp_path / "results"
    shutil.copytree(results, root)
    aside = root / "fnn3-mnist" / "a" / "superseded" / "t" / "stats"
    aside.mkdir(parents=True)
    shutil.copy(next((root / "fnn3-mnist" / "a" / "stats").iterdir()), aside)
    monkeypatch.chdir(tmp_path)
    count = "SELECT count(*) FROM '{}' WHERE run_id = 'a'"
    once = duckdb.sql(count.format("results/*/*/stats/*.parquet")).fetchall()[0][0]
    twice = duckdb.sql(count.format("results/**/stats/*.parquet")).fetchall()[0][0]
    assert once == len(load(root / "fnn3-mnist" / "a").stats) and twice == 2 * once


def test_the_recipe_of_the_results_page_runs_as_written(results, monkeypatch, capsys):
    text = (REPO / "docs" / "results.md").read_text()
    section = text[text.index("## Many runs at once"):]
    section = section[:section.index("\n## ", 1)]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    monkeypatch.chdir(results.parent)
    scope: dict = {}
    for block in blocks:
        exec(compile(block, "docs/results.md", "exec"), scope)  # noqa: S102 - our own docs
    want = expected_rows(results, "b")
    assert list(scope["picked"]["sparsifier"].unique()) == ["gaussiank"]
    np.testing.assert_array_equal(scope["picked"]["topk_ratio"], want["topk_ratio"])
    assert scope["same"].height == len(want)
    assert f"{len(want)} rows;" in capsys.readouterr().out


def nested_profile_root(results: Path, tmp_path: Path) -> Path:
    """A copy of the results with what a real results folder also holds: a profile's results
    root nested in it with the same run ids (results/standard/), checkpoints (their COMPLETE
    markers), snapshots, and rows a resume set aside."""
    root = tmp_path / "results"
    shutil.copytree(results, root)
    shutil.copytree(results, root / "standard")
    for run in ("a", "b"):
        marker = root / "fnn3-mnist" / run / "checkpoints" / "step-000000010"
        marker.mkdir(parents=True)
        (marker / "COMPLETE").write_text("10\n")
        (marker / "rank-00000.pt").write_bytes(b"not parquet either")
    (root / "fnn3-mnist" / "a" / "snapshots" / "step10-rank0.npy").write_bytes(b"\x93NUMPY")
    aside = root / "fnn3-mnist" / "a" / "superseded" / "t" / "stats"
    aside.mkdir(parents=True)
    shutil.copy(next((root / "fnn3-mnist" / "a" / "stats").iterdir()), aside)
    return root


def test_the_documented_reads_give_each_row_once_per_root_and_say_which_root(
        results, tmp_path, monkeypatch, capsys):
    """pandas on a results folder fails on the files that are not tables (the docs say so and
    give the glob instead); the documented globs and the pandas recipe read each run once per
    results root — a nested profile root with the same run ids fans nothing out — and the
    pandas recipe names each row's root; the recursive glob does fan out."""
    root = nested_profile_root(results, tmp_path)
    monkeypatch.chdir(tmp_path)
    text = (REPO / "docs" / "results.md").read_text()
    assert '`pd.read_parquet("results")` does not work' in text
    with pytest.raises(Exception, match="COMPLETE|parquet"):
        pd.read_parquet("results")  # what the docs warn against: it reads every file below
    one_root = sum(len(load(p).stats) for p in sorted((root / "fnn3-mnist").iterdir()))
    count = "SELECT count(*) FROM '{}'"
    assert duckdb.sql(count.format("results/*/*/stats/*.parquet")).fetchall()[0][0] == one_root
    assert pl.read_parquet("results/*/*/stats/*.parquet").height == one_root
    joined = duckdb.sql("""SELECT count(*) FROM 'results/*/*/stats/*.parquet' AS s
        JOIN 'results/*/*/run.parquet' AS r USING (experiment, run_id)""").fetchall()[0][0]
    assert joined == one_root
    fanned = duckdb.sql("""SELECT count(*) FROM 'results/**/stats/*.parquet' AS s
        JOIN 'results/**/run.parquet' AS r USING (experiment, run_id)""").fetchall()[0][0]
    assert fanned > 2 * one_root  # why the docs never use ** across results roots
    section = text[text.index("## Many runs at once"):]
    recipe = next(b for b in re.findall(r"```python\n(.*?)```", section, flags=re.S)
                  if "results_root=root" in b)
    scope: dict = {}
    exec(compile(recipe, "docs/results.md", "exec"), scope)  # noqa: S102 - our own docs
    stats, both = scope["stats"], scope["both"]
    assert stats.groupby("results_root").size().to_dict() == {
        "results": one_root, "results/standard": one_root}
    assert len(both) == len(stats) == 2 * one_root  # the join adds no row
    for run_id, (method, seed) in {"a": ("topk", 0), "b": ("gaussiank", 1)}.items():
        rows = both[(both["results_root"] == "results/standard") & (both["run_id"] == run_id)]
        assert set(zip(rows["sparsifier"], rows["seed"])) == {(method, seed)}
        assert len(rows) == len(load(root / "standard" / "fnn3-mnist" / run_id).stats)
    assert "results/standard" in capsys.readouterr().out  # the printed counts name the root
