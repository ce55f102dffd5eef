"""A recorder that cannot lose or double data: re-runs into one folder, a forgotten close(),
schedules that never fire, densities given as a string."""

import gc
import json
import os
import subprocess
import sys
import textwrap
import warnings

import pandas as pd
import pytest
import torch

from topkscope.analysis.runs import STATS_KEYS, load
from topkscope.hooks import GLOBAL, Recorder
from topkscope.hooks.schedules import parse_schedule

LAYOUT = [("w", 0, 40), ("b", 40, 10)]
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def record_steps(run_dir, steps, offset=0.0, **kwargs):
    kwargs = {"densities": [0.1], "snapshot_schedule": [steps[0]], **kwargs}
    with Recorder(run_dir, **kwargs) as rec:
        for step in steps:
            for rank in (0, 1):
                rec.record(step, rank, u=torch.arange(50.0) + offset + step, layout=LAYOUT)


def global_u(run):
    s = run.stats
    return s[(s.layer == GLOBAL) & (s.kind == "u")].set_index(["step", "rank"])["mean"]


def test_a_second_run_into_a_folder_with_results_is_refused_and_changes_nothing(tmp_path):
    record_steps(tmp_path, [0, 1, 2])
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with pytest.raises(ValueError, match="already holds results .*mode='append'.*"
                                         "mode='overwrite'") as info:
        Recorder(tmp_path, densities=[0.1])
    assert "\n" not in str(info.value)
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert after == before


def test_another_rank_checks_only_its_own_files(tmp_path):
    record_steps(tmp_path, [0])  # rank 0 owns the manifest; ranks 0 and 1 have rows
    with pytest.raises(ValueError, match="already holds results"):
        Recorder(tmp_path, rank=1)
    (tmp_path / "other").mkdir()
    with Recorder(tmp_path / "other", rank=3, densities=[0.1]) as rec:
        rec.record(0, 3, u=torch.randn(50), layout=LAYOUT)
    with pytest.raises(ValueError, match="part-r00003"):
        Recorder(tmp_path / "other", rank=3)


def test_a_users_own_files_in_the_folder_are_not_results(tmp_path):
    (tmp_path / "train.log").write_text("my own log\n")
    with Recorder(tmp_path, densities=[0.1]) as rec:
        rec.record(0, 0, u=torch.randn(50), layout=LAYOUT)
    assert (tmp_path / "train.log").read_text() == "my own log\n"


def test_append_adds_a_segment_and_load_keeps_one_row_per_key(tmp_path):
    record_steps(tmp_path, [0, 1, 2])
    record_steps(tmp_path, [2, 3], offset=100.0, mode="append")  # step 2 again, then step 3
    run = load(tmp_path)
    assert not run.stats.duplicated(STATS_KEYS).any()
    u = global_u(run)
    assert sorted(u.index.get_level_values("step").unique()) == [0, 1, 2, 3]
    assert u[(1, 0)] == pytest.approx(24.5 + 1)         # first segment, kept
    assert u[(2, 1)] == pytest.approx(24.5 + 100 + 2)   # recorded again: the later row wins
    assert u[(3, 0)] == pytest.approx(24.5 + 100 + 3)
    assert len(run.manifest["appended_at"]) == 1 and run.status == "complete"
    parts = sorted(p.name for p in (tmp_path / "stats").iterdir())
    assert parts == ["part-r00000-000000.parquet", "part-r00000-000001.parquet"]


def test_overwrite_moves_the_old_results_aside_and_they_still_load(tmp_path):
    record_steps(tmp_path, [0, 1, 2])
    old = load(tmp_path)
    record_steps(tmp_path, [5], offset=50.0, mode="overwrite")
    new = load(tmp_path)
    assert sorted(new.stats.step.unique()) == [5]
    moved = tmp_path / new.manifest["replaced"]
    assert moved.parent.name == "replaced"
    kept = load(moved)
    pd.testing.assert_frame_equal(kept.stats, old.stats)
    assert kept.manifest["start_time"] == old.manifest["start_time"]
    assert sorted(kept.snapshots.step) == [0, 0] and sorted(new.snapshots.step) == [5, 5]
    record_steps(tmp_path, [6], mode="overwrite")  # a second overwrite gets a folder of its own
    assert len(list((tmp_path / "replaced").iterdir())) == 2
    assert sorted(load(tmp_path).stats.step.unique()) == [6]


def test_mode_must_be_one_of_three(tmp_path):
    with pytest.raises(ValueError, match="mode = 'replace'; allowed: None, 'append', "
                                         "'overwrite'"):
        Recorder(tmp_path, mode="replace")


FORGETS_CLOSE = textwrap.dedent("""
    import sys
    import torch
    from topkscope.hooks import Recorder

    rec = Recorder(sys.argv[1], densities=[0.1], flush_every=1000)  # nothing flushed by itself
    for step in range(6):
        rec.record(step, 0, u=torch.randn(50) + step, layout=[("w", 0, 40), ("b", 40, 10)])
    if sys.argv[2] == "raise":
        raise RuntimeError("the training loop broke")
""")


@pytest.mark.parametrize("how", ["exit", "raise"])
def test_a_forgotten_close_still_writes_the_rows_and_finishes_the_manifest(tmp_path, how):
    proc = subprocess.run([sys.executable, "-c", FORGETS_CLOSE, str(tmp_path), how],
                          capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": REPO, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == (0 if how == "exit" else 1), proc.stderr
    run = load(tmp_path)
    assert sorted(run.stats.step.unique()) == list(range(6))
    assert run.manifest["closed_by"] == "exit without close()"
    if how == "exit":
        assert run.status == "complete" and proc.stderr == ""
    else:
        assert run.status == "failed"
        assert run.manifest["error"] == "RuntimeError: the training loop broke"


def test_a_recorder_dropped_without_close_is_flushed_when_collected(tmp_path):
    rec = Recorder(tmp_path, densities=[0.1], flush_every=100)
    rec.record(0, 0, u=torch.randn(50), layout=LAYOUT)
    del rec
    gc.collect()
    run = load(tmp_path)
    assert list(run.stats.step.unique()) == [0] and run.status == "complete"


def test_a_schedule_that_never_fires_in_the_run_warns(tmp_path):
    with pytest.warns(UserWarning, match="no schedule fires .*total_steps = 60"):
        rec = Recorder(tmp_path, schedule={"steps": [1000]}, total_steps=60)
    for step in range(60):
        assert not rec.wants(step)
    with pytest.warns(UserWarning, match="zero rows: its schedules fired at none of the "
                                         "steps 0..59"):
        rec.close()
    assert load(tmp_path).status == "complete"


def test_a_schedule_that_fires_gives_no_warning(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with Recorder(tmp_path, schedule={"every": 10, "start": 50}, densities=[0.1],
                      total_steps=60) as rec:
            for step in range(60):
                if rec.wants(step):
                    rec.record(step, 0, u=torch.randn(50), layout=LAYOUT)
    assert sorted(load(tmp_path).stats.step.unique()) == [50]


def test_listed_steps_past_the_end_of_the_run_are_named_in_a_warning(tmp_path):
    with pytest.warns(UserWarning, match=r"snapshot_schedule lists step\(s\) \[60, 90\] at or "
                      r"past the end of the run \(total_steps = 60: the last step is 59\)"):
        rec = Recorder(tmp_path, schedule=10, snapshot_schedule=[10, 60, 90], densities=[0.1],
                       total_steps=60)
    rec.record(10, 0, u=torch.randn(50), layout=LAYOUT)
    rec.close()
    with warnings.catch_warnings():  # every listed step inside the run: no warning
        warnings.simplefilter("error")
        with Recorder(tmp_path / "b", snapshot_schedule={"steps": [10, 59]}, densities=[0.1],
                      total_steps=60) as rec:
            rec.record(10, 0, u=torch.randn(50), layout=LAYOUT)


def test_listed_from_gives_the_listed_steps_the_schedule_fires_at():
    cases = [({"steps": [3, 90]}, [3, 90]), ({"steps": [3, 90], "stop": 50}, [3]),
             ("every:5 | at:2,77", [2, 77]), ({"all": [{"steps": [4, 8, 70]}, {"every": 4}]},
                                              [4, 8]), ({"every": 7}, []), (None, [])]
    for spec, listed in cases:
        s = parse_schedule(spec)
        assert all(s(t) for t in listed)
        for n in (1, 4, 60, 91):
            assert s.listed_from(n) == [t for t in listed if t >= n], (spec, n)


@pytest.mark.parametrize("spec, message", [
    ({"every": 10, "start": 100, "stop": 50}, "stop = 50 is not after start = 100"),
    ({"every": 10, "start": 7, "stop": 7}, "stop = 7 is not after start = 7"),
    ({"steps": [5, 8], "start": 10}, "can never fire"),
    ({"steps": [5], "stop": 3}, "can never fire"),
    ({"log": 1, "start": 2, "stop": 9}, "never fire"),
])
def test_impossible_schedules_are_refused_when_built(tmp_path, spec, message):
    with pytest.raises(ValueError, match=message):
        parse_schedule(spec)
    with pytest.raises(ValueError, match=message):
        Recorder(tmp_path, hist_schedule=spec)
    assert not (tmp_path / "manifest.json").exists()


def test_fires_within_agrees_with_trying_every_step():
    specs = [{"every": 7, "start": 30}, {"steps": [3, 90]}, {"log": 2, "start": 4},
             {"all": [{"every": 4}, {"every": 6, "start": 6}]}, "every:5 | at:2", None]
    for spec in specs:
        s = parse_schedule(spec)
        for n in (1, 3, 4, 12, 31, 91):
            assert s.fires_within(n) == any(s(t) for t in range(n)), (spec, n)
    assert parse_schedule(lambda t: t == 3).fires_within(10) is None


def test_densities_as_a_string_is_one_number(tmp_path):
    assert Recorder(tmp_path / "a", densities="0.01").densities == (0.01,)
    assert Recorder(tmp_path / "b", densities=0.5).densities == (0.5,)
    with pytest.raises(ValueError, match="densities = '0.01,0.1' must be a number"):
        Recorder(tmp_path / "c", densities="0.01,0.1")
    with pytest.raises(ValueError, match="outside the allowed range"):
        Recorder(tmp_path / "d", densities="5")


def test_manifest_of_an_unclosed_recorder_says_running_until_it_is_closed(tmp_path):
    rec = Recorder(tmp_path, densities=[0.1], flush_every=1)
    rec.record(0, 0, u=torch.randn(50), layout=LAYOUT)
    assert json.loads((tmp_path / "manifest.json").read_text())["status"] == "running"
    rec.close()
    assert "closed_by" not in json.loads((tmp_path / "manifest.json").read_text())
