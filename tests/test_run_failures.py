"""`topkscope run` under torchrun ends for what happened: a killed worker fails the run naming
its rank and how (exit 1), Ctrl-C is one line and `interrupted` (exit 130) and its resume is
whole, a worker group that `torchrun --max-restarts` restarts continues its own run to the
parameters of an uninterrupted one, and a failure's traceback goes to the run's log."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from topkscope.cli import main

REPO = Path(__file__).resolve().parents[1]
STEPS, CHECKPOINT_EVERY = 200, 20
CONFIG = dict(model="fnn3", dataset="mnist", workers=2, batch_size=16, train_subset=2048,
              eval_subset=200, steps=STEPS, lr=0.05, momentum=0.9, weight_decay=1e-4,
              density=0.01, seed=1, threads=1, checkpoint_every_steps=CHECKPOINT_EVERY,
              eval_every_steps=50, recorder={"schedule": {"every": 10}, "densities": [0.01]})

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def write_config(folder: Path) -> Path:
    path = folder / "tiny.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    return path


def manifest_of(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


def env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def worker(under: int, rank: int) -> int:
    """The pid of the torchrun worker of `rank` anywhere below process `under`."""
    todo = [under]
    while todo:
        pid = todo.pop()
        for child in children(pid):
            try:
                environ = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"RANK={rank}".encode() in environ and b"LOCAL_RANK=%d" % rank in environ:
                return child
            todo.append(child)
    raise AssertionError(f"no rank-{rank} worker below {under}")


def start_and_stop(command: list[str], experiment: Path, stop) -> subprocess.CompletedProcess:
    """Run command; after its second complete checkpoint call stop(Popen); wait for the end."""
    proc = subprocess.Popen(command, cwd=REPO, env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while len(list(experiment.glob("*/checkpoints/step-*/COMPLETE"))) < 2:
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "no second checkpoint within 180 s"
            time.sleep(0.02)
        time.sleep(0.2)  # past the checkpoint, not at a boundary
        stop(proc)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def launcher(config: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "topkscope.cli", "run", str(config), "--launcher", "torchrun",
            "--results", str(out), "--run-id", "k", "--no-progress", *extra]


def model_of(run: Path) -> dict[str, torch.Tensor]:
    from topkscope.train import checkpoint

    last = checkpoint.latest(run)
    assert checkpoint.marker_step(last) == STEPS
    return torch.load(last / "rank-00000.pt", weights_only=True)["model"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    """The same config run whole with simulated workers (the same math, bit for bit)."""
    folder = tmp_path_factory.mktemp("whole")
    assert main(["run", str(write_config(folder)), "--results", str(folder / "results"),
                 "--run-id", "whole", "--no-progress"]) == 0
    return folder / "results" / "tiny" / "whole"


def assert_whole_as(run: Path, reference: Path, resumed_from: int) -> None:
    train, ref = (pd.read_parquet(r / "train.parquet") for r in (run, reference))
    assert train["step"].tolist() == list(range(STEPS))
    assert train["loss"].tolist() == ref["loss"].tolist()
    assert pd.read_parquet(run / "eval.parquet")["step"].tolist() == \
        pd.read_parquet(reference / "eval.parquet")["step"].tolist()
    stats, ref_stats = (pd.read_parquet(r / "stats") for r in (run, reference))
    keys = ["step", "rank", "layer", "kind", "density"]
    assert not stats.duplicated(keys).any()
    assert sorted(map(tuple, stats[keys].values)) == sorted(map(tuple, ref_stats[keys].values))
    for aside in (run / "superseded").glob("*"):  # none when nothing past it was written
        for part in [*aside.glob("*.parquet"), *aside.glob("stats/*.parquet")]:
            assert pd.read_parquet(part)["step"].min() >= resumed_from, part
    manifest = manifest_of(run)
    assert (manifest["status"], manifest["steps_done"]) == ("complete", STEPS)
    assert manifest["segments"][-1]["from_step"] == resumed_from
    a, b = model_of(run), model_of(reference)
    assert all(torch.equal(a[name], b[name]) for name in b)


@pytest.mark.train
def test_a_killed_worker_fails_the_run_naming_its_rank_in_one_line(tmp_path):
    out = tmp_path / "results"
    done = start_and_stop(launcher(write_config(tmp_path), out), out / "tiny",
                          lambda p: os.kill(worker(p.pid, 1), signal.SIGKILL))
    run = out / "tiny" / "k"
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("topkscope run: error: worker rank 1 was killed by SIGKILL")
    assert "--run-id k --resume" in lines[0]
    manifest = manifest_of(run)
    assert (manifest["status"], manifest["error"]) == ("failed",
                                                       "worker rank 1 was killed by SIGKILL")
    assert manifest["worker_failures"][0] == {**manifest["worker_failures"][0], "rank": 1,
                                              "exitcode": -9, "signal": "SIGKILL"}
    assert manifest.get("signal") is None and manifest["checkpoint_step"] >= 2 * CHECKPOINT_EVERY
    log = (run / "run.log").read_text()  # what torchrun said, not on the terminal
    assert "closing signal SIGTERM" in log and "ChildFailedError" in log


@pytest.mark.train
@pytest.mark.slow
def test_ctrl_c_is_one_line_and_its_resume_is_whole(tmp_path, uninterrupted):
    out = tmp_path / "results"
    config = write_config(tmp_path)
    done = start_and_stop(launcher(config, out), out / "tiny",
                          lambda p: os.killpg(p.pid, signal.SIGINT))  # a terminal's Ctrl-C
    run = out / "tiny" / "k"
    assert done.returncode == 130, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("topkscope run: interrupted by SIGINT at step ")
    manifest = manifest_of(run)
    assert (manifest["status"], manifest["signal"]) == ("interrupted", "SIGINT")
    checkpoint_step = manifest["checkpoint_step"]
    assert manifest["steps_done"] > checkpoint_step  # stopped between two checkpoints

    again = subprocess.run(launcher(config, out, "--resume"), cwd=REPO, env=env(),
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert_whole_as(run, uninterrupted, resumed_from=checkpoint_step)
    assert [s["status"] for s in manifest_of(run)["segments"]] == ["interrupted", "complete"]


@pytest.mark.train
@pytest.mark.slow
@pytest.mark.parametrize("named", [True, False], ids=["run-id", "no-run-id"])
def test_torchrun_max_restarts_continues_the_run_to_the_uninterrupted_parameters(
        tmp_path, uninterrupted, named):
    out = tmp_path / "results"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc-per-node", "2", "--max-restarts", "1", "-m", "topkscope.cli", "run",
               str(write_config(tmp_path)), "--results", str(out), "--no-progress",
               *(["--run-id", "e"] * named)]
    t0 = time.monotonic()
    done = start_and_stop(command, out / "tiny",
                          lambda p: os.kill(worker(p.pid, 1), signal.SIGKILL))
    wall = time.monotonic() - t0
    assert done.returncode == 0, done.stderr[-3000:]
    runs = list((out / "tiny").iterdir())
    assert len(runs) == 1  # the restart continued the run, in its own folder
    manifest = manifest_of(runs[0])
    first, last = manifest["segments"]
    assert first["status"] == "failed" and last["status"] == "complete"
    assert_whole_as(runs[0], uninterrupted, resumed_from=last["from_step"])
    assert last["from_step"] >= 2 * CHECKPOINT_EVERY
    print(f"elastic restart of topkscope run ({'named' if named else 'unnamed'}): "
          f"{wall:.1f} s wall")


def test_resume_of_a_run_that_does_not_exist_says_what_it_needs(tmp_path, capsys):
    code = main(["run", str(write_config(tmp_path)), "--results", str(tmp_path / "results"),
                 "--run-id", "new", "--resume", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "there is no such run; drop --resume to start it" in err
    assert not (tmp_path / "results" / "tiny" / "new").exists()


@pytest.mark.train
def test_a_failing_run_exits_1_with_one_line_and_its_traceback_in_the_log(tmp_path, capsys,
                                                                          monkeypatch):
    from topkscope.train.trainer import Trainer

    real = Trainer.train_step

    def breaks_at_step_3(self):  # a fault in the middle of training (not bad input)
        if self.step == 3:
            raise RuntimeError("device lost")
        return real(self)

    monkeypatch.setattr(Trainer, "train_step", breaks_at_step_3)
    out = tmp_path / "results"
    code = main(["run", str(write_config(tmp_path)), "--results", str(out), "--run-id", "f",
                 "--no-progress"])
    run = out / "tiny" / "f"
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1, err
    assert err[0] == (f"topkscope run: error: RuntimeError: device lost (traceback: "
                      f"{run / 'run.log'})")
    manifest = manifest_of(run)
    assert (manifest["status"], manifest["error"], manifest["steps_done"]) == (
        "failed", "RuntimeError: device lost", 3)
    log = (run / "run.log").read_text()
    assert log.startswith("rank 0: ") and "breaks_at_step_3" in log
    assert pd.read_parquet(run / "train.parquet")["step"].tolist() == [0, 1, 2]
