"""`topkscope run` under signals, races and resumes: plain run ids, one process per run folder,
SIGTERM/SIGINT as a clean stop, resumes that neither lose nor double a row (pandas, duckdb and
polars read the folder), and the manifest's segment history."""

from __future__ import annotations

import importlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.test_cli_run import REPO, files_under, write_config
from topkscope.cli import main
from topkscope.hooks import Recorder
from topkscope.hooks.lifecycle import SUPERSEDED, supersede_from
from topkscope.interrupts import RunInterrupted
from topkscope.manifest import KILLED, Manifest
from topkscope.schema import COORD_KEYS, HIST_KEYS, STATS_KEYS
from topkscope.train import checkpoint

STATS = list(STATS_KEYS)
HIST = list(HIST_KEYS)
COORDS = list(COORD_KEYS)
RECORDER = {"schedule": 1, "hist_schedule": 3, "snapshot_schedule": 4, "flush_every": 2}
# a run that goes on until it is stopped, checkpointing every 40 steps
LONG = dict(steps=100000, checkpoint_every_steps=40, eval_every_steps=20, recorder=RECORDER)
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "topkscope.cli", *args]


def start(command: list[str]) -> subprocess.Popen:
    return subprocess.Popen(command, cwd=REPO, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def manifest_of(run_dir: Path) -> dict | None:
    try:
        return json.loads((run_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return None


def past_a_checkpoint(run_dir: Path) -> int | None:
    """The latest checkpoint's step when the recorder has flushed rows of a few later steps
    (and the next checkpoint is still far): a resume will have rows to set aside."""
    ckpt = checkpoint.latest(run_dir)
    manifest = manifest_of(run_dir)
    if ckpt is None or manifest is None:
        return None
    step = checkpoint.marker_step(ckpt)
    through = (manifest.get("recorder") or {}).get("flushed_through_step")
    return step if through is not None and step + 3 <= through <= step + 30 else None


def freeze_when(proc: subprocess.Popen, ready, what: str, timeout: float = 180):
    """Poll ready() while the run goes on; SIGSTOP the run when it holds (checked again while
    it is stopped) and return its value. The caller sends its signal, then SIGCONT."""
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, f"the run ended before {what}: {proc.stderr.read()[-3000:]}"
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        if ready() is not None:
            os.kill(proc.pid, signal.SIGSTOP)
            value = ready()
            if value is not None:
                return value
            os.kill(proc.pid, signal.SIGCONT)
        time.sleep(0.02)


def read_three_ways(folder: Path) -> dict[str, pd.DataFrame]:
    """The parts of a stats/ or hist/ folder as plain pandas, duckdb and polars read them."""
    return {"pandas": pd.read_parquet(folder),
            "duckdb": duckdb.sql(f"select * from read_parquet('{folder}/*.parquet')").df(),
            "polars": pl.read_parquet(f"{folder}/*.parquet").to_pandas()}


def sorted_values(frame: pd.DataFrame, keys: list[str], values: list[str]) -> pd.DataFrame:
    out = frame[keys + values].sort_values(keys).reset_index(drop=True)
    return out.astype({c: "float64" for c in values}).astype(
        {c: str for c in ("layer", "kind") if c in out.columns})


# ---------------------------------------------------------------- run ids and the run folder
@pytest.mark.parametrize("run_id", ["../../escape", "a/b", "", ".hidden", "..", "a b", "x\ny"])
@pytest.mark.parametrize("resume", [False, True])
def test_a_run_id_must_be_a_plain_name(tmp_path, capsys, run_id, resume):
    cfg = write_config(tmp_path)
    out = tmp_path / "deep" / "results"
    code = main(["run", str(cfg), "--results", str(out), "--run-id", run_id, "--no-progress",
                 *["--resume"] * resume])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert err == (f"topkscope run: error: run id = {run_id!r} is not a plain name; allowed: "
                   "letters, digits, '.', '_' and '-', not starting with '.' (at most 255 "
                   "characters)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.yaml"]  # nothing written


def test_a_folder_taken_between_the_check_and_the_start_is_refused(tmp_path, capsys,
                                                                   monkeypatch):
    """Another process creating the folder right after this one checked it (the race that
    check-then-create loses) stops this run with one line and nothing written into it."""
    train_run = importlib.import_module("topkscope.train.run")  # the package exports run()
    real = train_run.prepare

    def prepare_then_lose_the_race(*args, **kwargs):
        prepared = real(*args, **kwargs)
        prepared.run_dir.mkdir(parents=True)
        (prepared.run_dir / "theirs.txt").write_text("the other run")
        return prepared

    monkeypatch.setattr(train_run, "prepare", prepare_then_lose_the_race)
    cfg = write_config(tmp_path)
    out = tmp_path / "results"
    code = main(["run", str(cfg), "--results", str(out), "--run-id", "same", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "already exists" in err
    assert files_under(out / "tiny" / "same") == {"theirs.txt": b"the other run"}


@pytest.mark.train
def test_two_runs_started_at_once_with_one_run_id_never_share_its_folder(tmp_path):
    cfg = write_config(tmp_path, name="race")
    for trial in range(3):
        out = tmp_path / f"trial{trial}"
        steps = {12: None, 13: None}  # the two runs differ in length, so files tell whose
        for n in steps:
            steps[n] = start(cli("run", str(cfg), "--results", str(out), "--run-id", "same",
                                 "--steps", str(n), "--no-progress"))
        done = {n: (p.wait(timeout=300), p.stdout.read(), p.stderr.read())
                for n, p in steps.items()}
        for p in steps.values():
            p.stdout.close()
            p.stderr.close()
        codes = sorted(code for code, _, _ in done.values())
        assert codes == [0, 2], done
        winner = next(n for n, (code, _, _) in done.items() if code == 0)
        _, _, err = next(d for d in done.values() if d[0] == 2)
        assert err.strip().count("\n") == 0 and "already exists" in err, err
        run_dir = out / "race" / "same"
        manifest = manifest_of(run_dir)
        assert manifest["status"] == "complete" and manifest["config"]["steps"] == winner
        assert len(manifest["segments"]) == 1
        assert pd.read_parquet(run_dir / "train.parquet")["step"].tolist() == list(range(winner))
        steps_saved = {checkpoint.marker_step(c) for c in checkpoint.complete_folders(run_dir)}
        assert steps_saved == {10, winner}  # every 5 steps, 2 kept: nothing of the loser's


# ---------------------------------------------------------------- SIGTERM / SIGINT, resume
@pytest.mark.train
@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="needs POSIX signals")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_the_run_cleanly_and_the_resume_doubles_no_row(tmp_path, capsys, sig):
    cfg = write_config(tmp_path, name="stop", **LONG)
    out = tmp_path / "results"
    run_dir = out / "stop" / "s"
    proc = start(cli("run", str(cfg), "--results", str(out), "--run-id", "s", "--no-progress"))
    try:
        ckpt = freeze_when(proc, lambda: past_a_checkpoint(run_dir), "rows past a checkpoint")
        os.kill(proc.pid, sig)
        os.kill(proc.pid, signal.SIGCONT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    name = sig.name
    assert proc.returncode == 128 + sig, err[-3000:]

    manifest = manifest_of(run_dir)
    done = manifest["steps_done"]
    resume = shlex.join(["topkscope", "run", str(cfg), "--results", str(out), "--no-progress",
                         "--run-id", "s", "--resume"])
    assert (manifest["status"], manifest["signal"], manifest["error"]) == ("interrupted", name,
                                                                          None)
    assert manifest["resume_command"] == resume and manifest["checkpoint_step"] == ckpt
    assert [(s["status"], s["signal"], s["error"], s["end_time"] is not None)
            for s in manifest["segments"]] == [("interrupted", name, None, True)]
    assert err.strip() == (f"topkscope run: interrupted by {name} at step {done} ({run_dir}); "
                           f"resume from the checkpoint at step {ckpt} with: {resume}")
    # flushed: every finished step's rows and table rows are on disk
    stats = pd.read_parquet(run_dir / "stats")
    assert set(range(done)) <= set(stats["step"]) and stats["step"].max() <= done
    assert pd.read_parquet(run_dir / "train.parquet")["step"].tolist() == list(range(done))
    assert done > ckpt
    if sig == signal.SIGINT:
        return  # the rest is the same for both signals

    # the same command again, without a run id: refused, with the way to resume
    capsys.readouterr()
    assert main(["run", str(cfg), "--results", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(
        f"topkscope run: error: an interrupted run of this config exists: '{run_dir}'")
    assert f"resume it with: {resume}; or start a separate run by naming it with --run-id" in err
    assert [p.name for p in (out / "stop").iterdir()] == ["s"]

    # resume with the manifest's command (shortened), and the same run uninterrupted
    past = {sub: pd.read_parquet(run_dir / sub).query(f"step >= {ckpt}")
            for sub in ("stats", "hist", "coords")}
    assert len(past["stats"]) > 0
    steps = done + 6
    argv = shlex.split(manifest["resume_command"])
    assert argv[0] == "topkscope"
    assert main([*argv[1:], "--steps", str(steps)]) == 0
    assert main(["run", str(cfg), "--results", str(out), "--run-id", "whole", "--steps", str(steps),
                 "--no-progress"]) == 0
    whole = out / "stop" / "whole"

    values = {"stats": ["norm", "skew", "topk_ratio", "max_abs", "hill_alpha"],
              "hist": ["left", "count"], "coords": ["value"]}
    for sub, keys in (("stats", STATS), ("hist", HIST), ("coords", COORDS)):
        expected = sorted_values(pd.read_parquet(whole / sub), keys, values[sub])
        for reader, frame in read_three_ways(run_dir / sub).items():
            assert not frame.duplicated(keys).any(), f"{reader} sees duplicate {sub} rows"
            got = sorted_values(frame, keys, values[sub])
            pd.testing.assert_frame_equal(got, expected, obj=f"{sub} read by {reader}")
    assert sorted(p.name for p in (run_dir / "snapshots").iterdir()) == \
        sorted(p.name for p in (whole / "snapshots").iterdir())
    assert pd.read_parquet(run_dir / "train.parquet")["step"].tolist() == list(range(steps))

    # the rows past the checkpoint were set aside, not deleted
    manifest = manifest_of(run_dir)
    aside = run_dir / manifest["segments"][1]["superseded"]
    assert aside.parent.name == SUPERSEDED
    for sub in ("stats", "hist", "coords"):
        kept = pd.read_parquet(aside / sub).query(f"step >= {ckpt}")
        keys = {"stats": STATS, "hist": HIST, "coords": COORDS}[sub]
        assert sorted_values(kept, keys, []).equals(sorted_values(past[sub], keys, []))
    assert all(int(p.name[4:].split("-")[0]) >= ckpt for p in (aside / "snapshots").iterdir())

    # the history: the interrupted segment keeps its signal, the run ends complete and clean
    assert (manifest["status"], manifest["error"], "signal" in manifest) == ("complete", None,
                                                                            False)
    first, second = manifest["segments"]
    assert (first["status"], first["signal"], first["steps_done"]) == ("interrupted", name, done)
    assert (second["status"], second["from_step"], second["steps_done"]) == ("complete", ckpt,
                                                                            steps)
    assert len(manifest["resumed_at"]) == 1


@pytest.mark.train
@pytest.mark.skipif(not hasattr(signal, "SIGTERM"), reason="needs POSIX signals")
def test_sigterm_to_a_torchrun_launch_stops_every_rank_after_the_same_step(tmp_path, capsys):
    cfg = write_config(tmp_path, name="tr", **dict(LONG, recorder=dict(RECORDER,
                                                                       flush_every=1000)))
    out = tmp_path / "results"
    run_dir = out / "tr" / "t"
    proc = start(cli("run", str(cfg), "--results", str(out), "--run-id", "t", "--launcher",
                     "torchrun", "--workers", "2", "--no-progress"))
    try:
        deadline = time.monotonic() + 240
        while checkpoint.latest(run_dir) is None:
            assert proc.poll() is None, proc.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "no checkpoint within 240 s"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)  # the launcher alone: it forwards to torchrun
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143, err[-3000:]
    manifest = manifest_of(run_dir)  # written by rank 0
    done, ckpt = manifest["steps_done"], manifest["checkpoint_step"]
    resume = shlex.join(["topkscope", "run", str(cfg), "--results", str(out), "--workers", "2",
                         "--launcher", "torchrun", "--no-progress", "--run-id", "t", "--resume"])
    assert (manifest["status"], manifest["signal"], manifest["resume_command"]) == (
        "interrupted", "SIGTERM", resume)
    assert err.strip().splitlines()[-1] == (
        f"topkscope run: interrupted by SIGTERM at step {done} ({run_dir}); resume from the "
        f"checkpoint at step {ckpt} with: {resume}")
    # each rank flushed its own parts (rows are flushed only at checkpoints and at the stop),
    # both through the last step every rank finished
    stats = pd.read_parquet(run_dir / "stats")
    parts = {p.name[:12] for p in (run_dir / "stats").iterdir()}
    assert parts == {"part-r00000-", "part-r00001-"}
    assert stats.groupby("rank")["step"].max().tolist() == [done - 1, done - 1]
    assert pd.read_parquet(run_dir / "train.parquet")["step"].tolist() == list(range(done))

    # resumed in this process with simulated workers: no row twice
    argv = shlex.split(resume)[1:] + ["--launcher", "sim", "--steps", str(done + 4)]
    assert main(argv) == 0
    for reader, frame in read_three_ways(run_dir / "stats").items():
        assert not frame.duplicated(STATS).any(), reader
        assert sorted(frame["step"].unique()) == list(range(done + 4)), reader


# ---------------------------------------------------------------- which run a resume takes
def _stopped(run_dir: Path, status: str, signal_name: str | None = "SIGTERM") -> None:
    """Make a finished run look stopped after its first checkpoint (as a signal leaves it)."""
    for ckpt in checkpoint.complete_folders(run_dir)[1:]:
        (ckpt / checkpoint.MARKER).unlink()
    manifest = manifest_of(run_dir)
    manifest.update(status=status, signal=signal_name, error=None if status != "failed" else
                    "DivergedError: x")
    manifest["segments"][-1].update(status=status, signal=signal_name)
    (run_dir / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.train
def test_resume_without_a_run_id_takes_only_an_interrupted_or_failed_run_of_this_config(
        tmp_path, capsys):
    cfg = write_config(tmp_path, name="pick", steps=12, checkpoint_every_steps=5)
    out = tmp_path / "results"
    base = ["run", str(cfg), "--results", str(out), "--no-progress"]
    for run_id, extra in (("done", []), ("other", ["--density", "0.05"]), ("stopped", [])):
        assert main([*base, "--run-id", run_id, *extra]) == 0
    _stopped(out / "pick" / "other", "interrupted")  # another config: never picked
    _stopped(out / "pick" / "stopped", "interrupted")
    untouched = files_under(out / "pick" / "done")
    resumed_from = checkpoint.marker_step(checkpoint.latest(out / "pick" / "stopped"))
    capsys.readouterr()

    assert main([*base, "--resume"]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[0].startswith(f"topkscope run: resuming {out / 'pick' / 'stopped'} (interrupted "
                              f"by SIGTERM at ")
    assert said[0].endswith(f"; from its checkpoint at step {resumed_from})")
    assert manifest_of(out / "pick" / "stopped")["status"] == "complete"
    assert files_under(out / "pick" / "done") == untouched

    # nothing left to resume: the complete ones are not taken
    assert main([*base, "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no interrupted or failed run of 'pick' with this config" in err
    # named, a complete run is refused (nothing to do) unless asked for more steps
    assert main([*base, "--run-id", "done", "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "it is complete (12 of 12 steps); pass a larger --steps" in err
    assert files_under(out / "pick" / "done") == untouched
    assert main([*base, "--run-id", "done", "--resume", "--steps", "14"]) == 0
    segments = manifest_of(out / "pick" / "done")["segments"]
    assert [(s["status"], s.get("from_step")) for s in segments] == [("complete", None),
                                                                     ("complete", 12)]

    # a failed run is resumed too; a rerun without --run-id is not refused because of it
    _stopped(out / "pick" / "done", "failed", None)
    assert main(base) == 0  # a fresh folder (only interrupted runs block it)
    assert main([*base, "--resume"]) == 0
    assert "resuming " + str(out / "pick" / "done") in capsys.readouterr().out


# ---------------------------------------------------------------- the pieces
def test_manifest_segments_keep_each_end_and_the_top_level_is_the_latest(tmp_path):
    m = Manifest(tmp_path, experiment="x")
    m.write()
    assert [s["status"] for s in m.data["segments"]] == ["running"]
    m.stop(RunInterrupted(signal.SIGTERM), resume_command="again", steps_done=7)
    saved = Manifest.load(tmp_path)
    assert (saved["status"], saved["signal"], saved["error"], saved["steps_done"]) == (
        "interrupted", "SIGTERM", None, 7)
    m = Manifest.resume(tmp_path, from_step=5)
    assert "signal" not in m.data and "resume_command" not in m.data and m.data["error"] is None
    m.fail(ValueError("bad"))
    m = Manifest.resume(tmp_path)
    m.stop(KeyboardInterrupt())
    m = Manifest.resume(tmp_path)
    m.write()
    m = Manifest.resume(tmp_path)  # the segment before died unannounced (SIGKILL)
    m.complete(steps_done=12)
    saved = Manifest.load(tmp_path)
    assert (saved["status"], saved["error"], "signal" in saved) == ("complete", None, False)
    assert [(s["status"], s["error"], s["signal"]) for s in saved["segments"]] == [
        ("interrupted", None, "SIGTERM"), ("failed", "ValueError: bad", None),
        ("interrupted", None, "SIGINT"), ("interrupted", KILLED, None), ("complete", None, None)]
    assert saved["segments"][1]["from_step"] == 5 and len(saved["resumed_at"]) == 4


def test_a_manifest_written_before_segments_gets_one_for_its_past(tmp_path):
    old = {"status": "failed", "start_time": "t0", "end_time": "t1", "error": "E: x"}
    (tmp_path / "manifest.json").write_text(json.dumps(old))
    m = Manifest.resume(tmp_path)
    m.complete()
    assert [(s["start_time"], s["status"], s["error"]) for s in m.data["segments"]] == [
        ("t0", "failed", "E: x"), (m.data["resumed_at"][0], "complete", None)]


def _part(path: Path, steps: list[int]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"step": np.array(steps, dtype=np.int64),
                             "value": np.arange(len(steps), dtype=np.float64)}), path)


def test_supersede_from_sets_aside_every_row_and_snapshot_at_or_past_the_step(tmp_path):
    run = tmp_path / "run"
    _part(run / "train.parquet", list(range(10)))
    _part(run / "outer.parquet", [2, 5, 8])  # an outer-loop run's exchanges (rounds of 3)
    _part(run / "stats" / "part-r00000-000000.parquet", [0, 1, 2, 3, 4])
    _part(run / "stats" / "part-r00000-000001.parquet", [3, 4, 5, 6])  # both sides of 5
    _part(run / "stats" / "part-r00001-000000.parquet", [8, 9])
    _part(run / "hist" / "part-r00000-000000.parquet", [2])
    (run / "snapshots").mkdir()
    for name in ("step2-rank0.npy", "step6-rank0.npy", "step6-rank1-g.npy"):
        np.save(run / "snapshots" / name, np.zeros(3, dtype=np.float32))
    before = {name: pq.read_table(run / name)["step"].to_pylist()
              for name in ("train.parquet", "outer.parquet", "stats/part-r00000-000001.parquet")}

    aside = supersede_from(run, 5)
    assert aside.parent == run / SUPERSEDED
    steps = lambda p: pq.read_table(p)["step"].to_pylist()  # noqa: E731
    assert steps(run / "train.parquet") == [0, 1, 2, 3, 4]
    assert steps(run / "stats" / "part-r00000-000001.parquet") == [3, 4]
    assert sorted(p.name for p in (run / "stats").iterdir()) == ["part-r00000-000000.parquet",
                                                                  "part-r00000-000001.parquet"]
    assert [p.name for p in (run / "snapshots").iterdir()] == ["step2-rank0.npy"]
    # aside: exactly the rows past the step (of split files too), the files past it, the
    # snapshots; what stayed and what went aside add up to each original
    assert steps(aside / "train.parquet") == [5, 6, 7, 8, 9]
    assert steps(run / "outer.parquet") == [2] and steps(aside / "outer.parquet") == [5, 8]
    assert steps(aside / "stats" / "part-r00000-000001.parquet") == [5, 6]
    for name, original in before.items():
        assert steps(run / name) + steps(aside / name) == original
    assert steps(aside / "stats" / "part-r00001-000000.parquet") == [8, 9]
    assert sorted(p.name for p in (aside / "snapshots").iterdir()) == ["step6-rank0.npy",
                                                                        "step6-rank1-g.npy"]
    assert not (aside / "hist").exists()
    assert pd.read_parquet(run / "stats")["step"].tolist() == [0, 1, 2, 3, 4, 3, 4]
    assert supersede_from(run, 5) is None  # nothing left past it


def test_supersede_sets_aside_what_a_killed_write_left_half_done(tmp_path):
    """A process killed inside atomic_write leaves `.<name>.<random>.tmp`: a resume moves it
    aside with the rows it redoes, so the resumed folder holds only finished files."""
    from topkscope.io import atomic_write, is_unfinished_write

    run = tmp_path / "run"
    _part(run / "train.parquet", [0, 1, 2])
    (run / "snapshots").mkdir()
    np.save(run / "snapshots" / "step0-rank0.npy", np.zeros(3, dtype=np.float32))

    names = []

    def killed(tmp):
        names.append(Path(tmp).name)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(run / "snapshots" / "step2-rank0.npy", killed)
    left = run / "snapshots" / names[0]
    assert not left.exists()  # an exception: atomic_write removed its own temp file ...
    left.write_bytes(b"half")  # ... a SIGKILL at that moment would have left it
    assert is_unfinished_write(left.name) and not is_unfinished_write("step2-rank0.npy")

    aside = supersede_from(run, 2)
    assert [p.name for p in (run / "snapshots").iterdir()] == ["step0-rank0.npy"]
    assert [p.name for p in (aside / "snapshots").iterdir()] == [left.name]
    assert pq.read_table(run / "train.parquet")["step"].to_pylist() == [0, 1]


def test_a_damaged_part_stops_supersede_before_anything_moves(tmp_path):
    run = tmp_path / "run"
    _part(run / "stats" / "part-r00000-000000.parquet", [7, 8])
    (run / "stats" / "part-r00000-000001.parquet").write_bytes(b"not parquet")
    before = files_under(run)
    with pytest.raises(Exception, match="(?i)parquet"):
        supersede_from(run, 5)
    assert files_under(run) == before


def test_a_recorder_stopped_by_ctrl_c_marks_its_manifest_interrupted(tmp_path):
    import torch

    with pytest.raises(KeyboardInterrupt):
        with Recorder(tmp_path / "run", schedule=1, densities=[0.1]) as rec:
            rec.record(0, 0, u=torch.randn(50), layout=[("w", 0, 50)])
            raise KeyboardInterrupt
    manifest = manifest_of(tmp_path / "run")
    assert (manifest["status"], manifest["signal"], manifest["error"]) == ("interrupted",
                                                                          "SIGINT", None)
    assert pd.read_parquet(tmp_path / "run" / "stats")["step"].tolist() == [0, 0]


# ---------------------------------------------------------------- the figures' runner
@pytest.mark.train
def test_the_runner_resumes_an_interrupted_run_and_an_interrupted_child_stops_the_plan(
        tmp_path, capsys):
    from topkscope.reproduce.runner import RunSpec, ensure_run, run_all, status_of

    cfg = write_config(tmp_path, name="plan", steps=12, checkpoint_every_steps=5,
                       profiles={"quick": {}})
    spec = RunSpec("plan", cfg, "quick", None, tmp_path / "results")
    run_dir = spec.run_dir()
    assert ensure_run(spec, log=lambda m: None, in_process=main) == (run_dir, "ran")
    _stopped(run_dir, "interrupted")
    assert status_of(run_dir) == "interrupted"
    assert ensure_run(spec, log=lambda m: None, in_process=main) == (run_dir, "resumed")
    assert status_of(run_dir) == "complete"
    assert pd.read_parquet(run_dir / "train.parquet")["step"].tolist() == list(range(12))

    (run_dir / "manifest.json").write_text("{ not json")
    assert status_of(run_dir) is None

    started = []

    def interrupted_child(argv):  # what `topkscope run` returns after SIGTERM
        started.append(argv)
        return 143

    other = RunSpec("plan", cfg, "quick", "dense", tmp_path / "results")
    with pytest.raises(RunInterrupted, match="interrupted"):
        run_all([("a", RunSpec("plan", cfg, "quick", "gaussiank", tmp_path / "results")),
                 ("b", other)], parallel=1, in_process=interrupted_child,
                log=lambda m: None, record=lambda *a: None)
    assert len(started) == 1  # the plan stopped: the second run never started


@pytest.mark.skipif(not hasattr(signal, "SIGTERM"), reason="needs POSIX signals")
def test_a_users_loop_under_the_run_handler_stops_its_recorder_on_sigterm(tmp_path):
    import torch

    from topkscope import interrupts

    previous = signal.getsignal(signal.SIGTERM)
    with pytest.raises(RunInterrupted) as stopped:
        with interrupts.handling(interrupts.StopRequests()):
            with Recorder(tmp_path / "run", schedule=1, densities=[0.1]) as rec:
                for step in range(1000):
                    rec.record(step, 0, u=torch.randn(50), layout=[("w", 0, 50)])
                    if step == 3:
                        signal.raise_signal(signal.SIGTERM)
    assert stopped.value.exit_status == 143
    assert signal.getsignal(signal.SIGTERM) is previous  # restored
    manifest = manifest_of(tmp_path / "run")
    assert (manifest["status"], manifest["signal"]) == ("interrupted", "SIGTERM")
    assert sorted(pd.read_parquet(tmp_path / "run" / "stats")["step"].unique()) == [0, 1, 2, 3]


# ---------------------------------------------------------------- the figures driver's children
def test_children_get_the_first_signal_once_and_none_starts_after_it(tmp_path):
    import threading

    from topkscope.interrupts import ChildProcesses, handling

    started = tmp_path / "started"
    sleeper = [sys.executable, "-c", f"import pathlib, time; pathlib.Path({str(started)!r})"
               ".touch(); time.sleep(60)"]
    children, codes = ChildProcesses(), []
    with handling(children) as installed:
        children.own_session = installed
        worker = threading.Thread(target=lambda: codes.append(children.run(sleeper)))
        worker.start()
        deadline = time.monotonic() + 60
        while not started.exists():
            assert time.monotonic() < deadline, "the child never started"
            time.sleep(0.02)
        signal.raise_signal(signal.SIGTERM)  # a child runs: forwarded, nothing raised here
        signal.raise_signal(signal.SIGTERM)  # a second one is ignored
        worker.join(60)
        assert codes == [-signal.SIGTERM] and children.received == signal.SIGTERM
        with pytest.raises(RunInterrupted, match="SIGTERM before the child started"):
            children.run(sleeper)
    idle = ChildProcesses()
    with pytest.raises(RunInterrupted) as stopped:  # no child running: the parent stops at once
        with handling(idle):
            signal.raise_signal(signal.SIGINT)
    assert stopped.value.exit_status == 130


def test_sigterm_to_the_figures_driver_stops_its_runs_cleanly_for_the_next_to_resume(
        tmp_path, data_root):
    """A real `topkscope figures` process running two `topkscope run` children: SIGTERM to the
    driver alone reaches both, they stop cleanly (manifest `interrupted`, resumable), no other
    run starts, no child outlives the driver, and it exits 143 with one line."""
    experiments = tmp_path / "experiments"
    experiments.mkdir()  # the plan's experiment, made endless: it runs until stopped
    write_config(experiments, name="convergence-fnn3-mnist", steps=100000,
                 checkpoint_every_steps=5, eval_every_steps=1000, profiles={"quick": {}})
    results = tmp_path / "results"
    proc = start(cli("figures", "--results", str(results), "--experiments", str(experiments),
                     "--only", "convergence-fnn3-mnist", "--parallel", "2", "--no-bench",
                     "--no-notebooks", "--no-tables", "--data", str(data_root)))

    def two_checkpointed():
        folders = [d for d in results.glob("convergence-fnn3-mnist/quick-*")
                   if checkpoint.latest(d) is not None]
        return folders if len(folders) == 2 else None

    deadline = time.monotonic() + 240
    while (folders := two_checkpointed()) is None:
        assert proc.poll() is None, f"the driver ended: {proc.stderr.read()[-3000:]}"
        assert time.monotonic() < deadline, "two runs never reached a checkpoint"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)  # the driver alone, not its children
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 143, err[-3000:]
    said = [line for line in err.splitlines() if line.startswith("topkscope figures:")]
    assert said == [
        "topkscope figures: interrupted by SIGTERM: 2 run(s) stopped cleanly "
        "(convergence-fnn3-mnist [dense seed 0 warmup=none]; convergence-fnn3-mnist [topk "
        "seed 0 warmup=paper]); the next `topkscope figures` resumes them"]
    for run_dir in folders:
        manifest = manifest_of(run_dir)
        assert (manifest["status"], manifest["signal"]) == ("interrupted", "SIGTERM")
        assert manifest["resume_command"] and checkpoint.latest(run_dir) is not None
    assert sorted(results.glob("convergence-fnn3-mnist/*")) == sorted(folders)
    assert processes_naming(str(results)) == [], "a child outlived the driver"


def processes_naming(text: str) -> list[str]:
    """Command lines of the live processes (Linux /proc) that contain text."""
    found = []
    for path in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            line = path.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # the process ended meanwhile
            continue
        if text in line:
            found.append(line)
    return found


def test_a_manifest_says_its_layout_and_a_resume_brings_an_old_one_to_it(tmp_path):
    """New manifests carry schema_version; one of the first layout (no segments, no version)
    is converted where it is reopened, by Manifest.resume, not by its readers."""
    import json

    from topkscope.manifest import SCHEMA_VERSION

    Manifest(tmp_path / "new", experiment="e").write()
    assert json.loads((tmp_path / "new" / "manifest.json").read_text())["schema_version"] == 2
    old = tmp_path / "old"
    old.mkdir()
    (old / "manifest.json").write_text(json.dumps(
        {"status": "interrupted", "start_time": "t0", "end_time": "t1", "error": None,
         "versions": {"topkscope": "0"}}))
    m = Manifest.resume(old)
    m.write()
    data = json.loads((old / "manifest.json").read_text())
    assert data["schema_version"] == SCHEMA_VERSION == 2
    assert [s["status"] for s in data["segments"]] == ["interrupted", "running"]
