"""Loading result folders: every table as a DataFrame, empty ones with the right columns."""

import json

import numpy as np
import pandas as pd
import pytest
import torch

from topkscope.analysis.runs import EVAL_COLUMNS, TRAIN_COLUMNS, find, load
from topkscope.hooks import GLOBAL, Recorder
from topkscope.manifest import Manifest
from topkscope.schema import HIST_COLUMNS, STATS_KEYS, STATS_VALUES

LAYOUT = [("w", 0, 40), ("b", 40, 10)]


def make_run(run_dir, steps=3, **kwargs):
    kwargs = {"densities": [0.1], "hist_schedule": [1], "snapshot_schedule": [2], **kwargs}
    with Recorder(run_dir, **kwargs) as rec:
        for step in range(steps):
            for rank in (0, 1):
                rec.record(step, rank, u=torch.randn(50), g=torch.randn(50), layout=LAYOUT)
    return run_dir


def test_load_reads_every_table(tmp_path):
    run_dir = make_run(tmp_path / "exp" / "run1", sparsifiers=["gaussiank"])
    train = pd.DataFrame({c: pd.Series([1, 2], dtype=t) if t != "object" else ["accuracy"] * 2
                          for c, t in TRAIN_COLUMNS.items()})
    train.to_parquet(run_dir / "train.parquet")
    run = load(run_dir)
    assert run.path == run_dir and run.status == "complete"
    assert list(run.train.columns) == list(TRAIN_COLUMNS) and len(run.train) == 2
    assert list(run.eval.columns) == list(EVAL_COLUMNS) and run.eval.empty
    assert list(run.stats.columns[: len(STATS_KEYS) + len(STATS_VALUES)]) == [*STATS_KEYS,
                                                                         *STATS_VALUES]
    assert {"gaussiank_count", "gaussiank_ratio", "gaussiank_recall"} <= set(run.stats.columns)
    assert len(run.stats) == 3 * 2 * 2 * 3  # steps x ranks x kinds(g, u) x rows
    assert run.stats.step.dtype == np.int64 and run.stats["rank"].dtype == np.int64
    assert list(run.hist.columns) == list(HIST_COLUMNS) and set(run.hist.step) == {1}
    assert list(run.snapshots.columns) == ["step", "rank", "kind", "path"]
    assert run.snapshot(2, 1).shape == (50,) and run.snapshot(2, 1).dtype == np.float32
    with pytest.raises(ValueError, match=r"no u snapshot at step 1, rank 0.*\(2, 0\)"):
        run.snapshot(1, 0)


def test_a_folder_with_only_a_manifest_loads_empty_typed_frames(tmp_path):
    m = Manifest(tmp_path, experiment="x", recorder={"sparsifiers": ["gaussiank-2019"]})
    m.write()
    run = load(tmp_path)
    assert run.status == "running"
    for frame in (run.train, run.eval, run.stats, run.hist, run.snapshots):
        assert frame.empty
    assert "gaussiank_2019_count" in run.stats.columns
    assert run.stats["gaussiank_2019_count"].dtype == "Int64"
    assert run.stats["topk_ratio"].dtype == np.float64
    assert list(run.hist.columns) == list(HIST_COLUMNS)
    assert run.train.step.dtype == np.int64


def test_not_a_result_folder(tmp_path):
    with pytest.raises(ValueError, match="not a result folder"):
        load(tmp_path)
    (tmp_path / "manifest.json").write_text("{broken")
    with pytest.raises(ValueError, match="not valid JSON"):
        load(tmp_path)


def test_filters_read_only_the_asked_rows(tmp_path):
    make_run(tmp_path)
    run = load(tmp_path, layers=GLOBAL, kinds=["u"], ranks=1)
    assert set(run.stats.layer) == {GLOBAL} and set(run.stats.kind) == {"u"}
    assert set(run.stats["rank"]) == {1} and len(run.stats) == 3
    assert set(run.hist.layer) == {GLOBAL} and set(run.hist["rank"]) == {1}


def test_a_resumed_run_keeps_the_redone_rows(tmp_path):
    make_run(tmp_path, steps=3, hist_schedule=None, snapshot_schedule=None)
    before = load(tmp_path).stats
    m = Manifest.resume(tmp_path)
    m.write()
    with Recorder(tmp_path, densities=[0.1], manifest=m, mode="append") as rec:  # redo 2, do 3
        for step in (2, 3):
            rec.record(step, 0, u=torch.full((50,), 7.0) + torch.arange(50.0), layout=LAYOUT)
    after = load(tmp_path).stats
    assert sorted(after.step.unique()) == [0, 1, 2, 3]
    redo = after[(after.step == 2) & (after["rank"] == 0) & (after.layer == GLOBAL)
                 & (after.kind == "u")]
    assert len(redo) == 1 and redo["mean"].iloc[0] == pytest.approx(7.0 + 24.5)
    kept = after[(after.step == 2) & (after["rank"] == 1)]
    pd.testing.assert_frame_equal(
        kept.reset_index(drop=True),
        before[(before.step == 2) & (before["rank"] == 1)].reset_index(drop=True))


def test_find_lists_run_folders(tmp_path):
    for exp, run_id in [("a", "r2"), ("a", "r1"), ("b", "r1")]:
        Manifest(tmp_path / exp / run_id, experiment=exp).write()
    (tmp_path / "a" / "not-a-run").mkdir()
    assert find(tmp_path) == [tmp_path / "a" / "r1", tmp_path / "a" / "r2", tmp_path / "b" / "r1"]
    assert find(tmp_path, "b") == [tmp_path / "b" / "r1"]
    assert find(tmp_path, "missing") == []
    with pytest.raises(ValueError, match="is not a folder"):
        find(tmp_path / "nowhere")


def test_manifest_records_the_recorder_settings(tmp_path):
    make_run(tmp_path, densities=[0.01, 0.2], flush_every=7)
    rec = json.loads((tmp_path / "manifest.json").read_text())["recorder"]
    assert rec["densities"] == [0.01, 0.2] and rec["flush_every"] == 7
    assert rec["hist_schedule"] == "At([1])" and rec["kinds"] == ["g", "u", "e"]


def test_sparsifier_counts_are_nullable_integers_even_without_gaps(tmp_path):
    with Recorder(tmp_path, densities=[0.1], kinds=["u"], sparsifiers=["gaussiank"]) as rec:
        rec.record(0, 0, u=torch.randn(50), layout=LAYOUT)
    s = load(tmp_path).stats
    assert s.gaussiank_count.dtype == "Int64" and s.gaussiank_count.notna().all()
    assert s.numel.dtype == np.int64 and s.nonfinite.dtype == np.int64


@pytest.mark.parametrize("damaged", ["stats/part-r00000-000000.parquet", "train.parquet"])
def test_an_unreadable_table_is_one_line_naming_the_file(tmp_path, damaged):
    run_dir = make_run(tmp_path / "exp" / "run1")
    path = run_dir / damaged
    assert damaged == "train.parquet" or path.is_file()  # a real part, overwritten below
    path.write_bytes(b"PAR1 not really parquet")
    with pytest.raises(ValueError) as err:
        load(run_dir)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{str(path)!r} is not a readable parquet file (")
    assert message.endswith(f"; move it out of {str(path.parent)!r} to load the rest of the "
                            "run, or run the experiment again")
    path.unlink()
    assert len(load(run_dir).hist)  # without it, the rest loads
