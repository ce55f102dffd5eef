"""`topkscope run`: a run end to end, bad input, and a SIGKILLed torchrun run resumed by name
(its manifest stays `running`; signals, races and resumes: tests/test_run_lifecycle.py)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from topkscope.cli import main
from topkscope.schema import EVAL_COLUMNS, TRAIN_COLUMNS

REPO = Path(__file__).resolve().parents[1]
TINY = dict(model="fnn3", dataset="mnist", workers=2, batch_size=16, train_subset=320,
            eval_subset=200, steps=12, lr=0.05, momentum=0.9, weight_decay=1e-4,
            density=0.01, seed=1, threads=1, checkpoint_every_steps=5)


def write_config(folder: Path, name: str = "tiny", **changes) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({**TINY, **changes}))
    return path


def files_under(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def final_model(run_dir: Path) -> dict[str, torch.Tensor]:
    from topkscope.train import checkpoint

    last = checkpoint.latest(run_dir)
    return torch.load(last / "rank-00000.pt", weights_only=True)["model"]


@pytest.mark.train
def test_sim_run_writes_a_complete_result_folder(tmp_path, capsys):
    cfg = write_config(tmp_path)
    out = tmp_path / "results"
    assert main(["run", str(cfg), "--results", str(out), "--run-id", "r1", "--no-progress"]) == 0
    run_dir = out / "tiny" / "r1"
    assert f"done: {run_dir}" in capsys.readouterr().out
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["error"] is None
    assert (manifest["world_size"], manifest["launcher"], manifest["sparsifier"]) == (2, "sim",
                                                                                   "topk")
    assert manifest["config"]["density"] == 0.01 and manifest["dataset_substitute"] is None
    assert manifest["optimizer"] == {"name": "sgd", "momentum": 0.9, "nesterov": False,
                                     "weight_decay": 1e-4, "no_decay_1d": False, "lr": 0.05,
                                     "lr_schedule": "milestones"}
    train = pd.read_parquet(run_dir / "train.parquet")
    identity = ["experiment", "run_id"]  # every row names its run
    assert list(train.columns) == [*identity, *TRAIN_COLUMNS]
    assert set(train["experiment"]) == {"tiny"} and set(train["run_id"]) == {"r1"}
    assert train["step"].tolist() == list(range(12))
    assert (train["bytes_sent"] > 0).all() and (train["metric_name"] == "accuracy").all()
    # Top-k: every worker sends k pairs, so the wire adds only the 8-byte counts
    assert (train["bytes_sent"] == train["payload_bytes"] + 8 * 2).all()
    evals = pd.read_parquet(run_dir / "eval.parquet")
    assert list(evals.columns) == [*identity, *EVAL_COLUMNS]
    row = pd.read_parquet(run_dir / "run.parquet").iloc[0]
    assert (row["experiment"], row["run_id"], row["status"], row["sparsifier"]) == \
        ("tiny", "r1", "complete", "topk")
    assert evals["step"].tolist() == [9, 11]  # every epoch (10 steps) and at the end
    assert [p.name for p in (run_dir / "checkpoints").iterdir()] != []


@pytest.mark.parametrize("args, words", [
    (["--workers", "0"], ["workers = 0", "[1, inf)"]),
    (["--density", "1.5"], ["density = 1.5", "(0, 1]"]),
    (["--density", "0"], ["density = 0.0", "(0, 1]"]),
    (["--set", "lerning_rate=0.1"], ["unknown config key 'lerning_rate'", "allowed: "]),
    (["--sparsifier", "top-k"], ["sparsifier = 'top-k' is not allowed", "choose one of: chunk-topk, dense"]),
    (["--profile", "huge"], ["profile 'huge' is not defined"]),
    (["--set", "recorder={schedul: 3}"], ["unknown key 'schedul' in recorder"]),
    (["--set", "density=2e0"], ["density = 2 is outside the allowed range (0, 1]"]),
    (["--set", "optimizer=adam"], ["optimizer = 'adam' is not allowed; choose one of: sgd, "
                                   "adamw"]),
    (["--set", "optimizer=adamw"], ["momentum = 0.9 does not apply to optimizer = 'adamw'; "
                                    "allowed with it: betas, eps"]),
    (["--set", "density=[1e-1, 1e-2]"], ["density = [0.1, 0.01] must be a single number",
                                         "set density_schedule: [0.1, 0.01]"]),
    (["--launcher", "torchrun", "--density", "2"], ["density = 2.0"]),
])
def test_bad_input_is_one_line_nonzero_and_leaves_no_files(tmp_path, capsys, args, words):
    cfg = write_config(tmp_path)
    out = tmp_path / "results"
    code = main(["run", str(cfg), "--results", str(out), "--no-progress", *args])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("topkscope run: error: ") and "\n" not in err
    for word in words:
        assert word in err
    assert not out.exists()


@pytest.mark.parametrize("args", [["--workers", "abc"], ["--launcher", "mpi"]])
def test_malformed_options_are_one_line_usage_errors(tmp_path, capsys, args):
    with pytest.raises(SystemExit) as stop:
        main(["run", str(write_config(tmp_path)), "--results", str(tmp_path / "r"), *args])
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and "\n" not in err
    assert err.startswith("topkscope run: error: argument " + args[0])
    assert not (tmp_path / "r").exists()


@pytest.mark.train
def test_checkpoint_of_another_model_is_refused_without_touching_the_run(tmp_path, capsys):
    out = tmp_path / "results"
    fnn = write_config(tmp_path, name="same")
    assert main(["run", str(fnn), "--results", str(out), "--run-id", "a", "--no-progress"]) == 0
    wide_dir = tmp_path / "wide"
    wide_dir.mkdir()
    wide = write_config(wide_dir, name="same", model_args={"hidden": [64]}, steps=5)
    assert main(["run", str(wide), "--results", str(out), "--run-id", "b", "--no-progress"]) == 0
    # plant run b's checkpoint (another model) into run a, then try to resume a
    a, b = out / "same" / "a", out / "same" / "b"
    latest_a = sorted((a / "checkpoints").iterdir())[-1]
    latest_b = sorted((b / "checkpoints").iterdir())[-1]
    for f in latest_b.iterdir():
        (latest_a / f.name).write_bytes(f.read_bytes())
    before = files_under(a)
    capsys.readouterr()
    code = main(["run", str(fnn), "--results", str(out), "--run-id", "a", "--resume", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert "does not fit this model" in err or "is from model" in err
    assert files_under(a) == before


@pytest.mark.train
def test_resume_refuses_a_changed_config(tmp_path, capsys):
    out = tmp_path / "results"
    cfg = write_config(tmp_path)
    assert main(["run", str(cfg), "--results", str(out), "--run-id", "a", "--no-progress"]) == 0
    before = files_under(out)
    capsys.readouterr()
    code = main(["run", str(cfg), "--results", str(out), "--run-id", "a", "--resume",
                 "--density", "0.05", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "config differs in density" in err
    assert files_under(out) == before


@pytest.mark.train
def test_a_run_that_diverges_ends_failed_with_its_error(tmp_path, capsys):
    cfg = write_config(tmp_path, lr=1e30, steps=40)
    out = tmp_path / "results"
    code = main(["run", str(cfg), "--results", str(out), "--run-id", "nan", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert re.fullmatch(r"topkscope run: error: training diverged at step \d+: loss = "
                        r"(nan|inf) on worker \d; lower lr or set grad_clip", err), err
    manifest = json.loads((out / "tiny" / "nan" / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert manifest["error"] == "DivergedError: " + err.removeprefix("topkscope run: error: ")
    assert manifest["end_time"] is not None


@pytest.mark.train
def test_console_script_reports_bad_input_in_one_line(tmp_path):
    script = Path(sys.executable).with_name("topkscope")
    cfg = write_config(tmp_path)
    done = subprocess.run([str(script), "run", str(cfg), "--workers", "-3", "--results",
                           str(tmp_path / "r")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == ("topkscope run: error: workers = -3 is outside the allowed "
                                   "range [1, inf)")
    assert not (tmp_path / "r").exists()


# ---------------------------------------------------------------- SIGKILL + resume
def descendants(pid: int) -> list[int]:
    """Every process below pid (Linux /proc), deepest first."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out[::-1]


@pytest.mark.train
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_sigkilled_torchrun_run_resumes_to_the_uninterrupted_result(tmp_path):
    steps = 160
    cfg = write_config(tmp_path, name="killed", steps=steps, checkpoint_every_steps=20,
                       eval_every_steps=40, train_subset=2048)
    out = tmp_path / "results"
    run_dir = out / "killed" / "k"
    command = [sys.executable, "-m", "topkscope.cli", "run", str(cfg), "--launcher", "torchrun",
               "--workers", "2", "--results", str(out), "--run-id", "k", "--no-progress"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while not list(run_dir.glob("checkpoints/*/COMPLETE")):
            assert proc.poll() is None, proc.stdout.read().decode()[-2000:]
            assert time.monotonic() < deadline, "no checkpoint within 120 s"
            time.sleep(0.02)
        victims = descendants(proc.pid) + [proc.pid]  # workers, torchrun agent, launcher
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    finally:
        proc.wait(timeout=60)
        proc.stdout.close()
    from topkscope.train import checkpoint

    killed_at = checkpoint.marker_step(checkpoint.latest(run_dir))
    assert 20 <= killed_at < steps
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "running"

    resumed = subprocess.run(command + ["--resume"], cwd=REPO, env=env, capture_output=True,
                             text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete" and len(manifest["resumed_at"]) == 1
    # SIGKILL left no word: resumed by name, its segment is marked as killed
    from topkscope.manifest import KILLED

    assert [(s["status"], s["error"]) for s in manifest["segments"]] == [
        ("interrupted", KILLED), ("complete", None)]
    assert manifest["error"] is None and manifest["segments"][1]["from_step"] == killed_at

    # the uninterrupted run of the same config (simulated workers: the same math, bit for bit)
    assert main(["run", str(cfg), "--results", str(out), "--run-id", "whole", "--no-progress"]) == 0
    whole = out / "killed" / "whole"
    a, b = final_model(run_dir), final_model(whole)
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    train_k, train_w = (pd.read_parquet(d / "train.parquet") for d in (run_dir, whole))
    assert train_k["step"].tolist() == list(range(steps))
    assert train_k["loss"].tolist() == train_w["loss"].tolist()
    assert pd.read_parquet(run_dir / "eval.parquet")["step"].tolist() == [39, 79, 119, 159]

    # a torchrun checkpoint resumes under simulated workers too (here: extending the run)
    for run_id in ("k", "whole"):
        assert main(["run", str(cfg), "--results", str(out), "--run-id", run_id, "--resume",
                     "--launcher", "sim", "--steps", str(steps + 10), "--no-progress"]) == 0
    a, b = final_model(run_dir), final_model(whole)
    assert all(torch.equal(a[name], b[name]) for name in a)
    assert pd.read_parquet(run_dir / "train.parquet")["step"].tolist() == list(range(steps + 10))


@pytest.mark.train
def test_the_gpt_experiment_trains_with_adamw_and_records(tmp_path, capsys):
    """experiments/gpt-ptb.yaml as shipped (quick profile), cut to 4 steps."""
    out = tmp_path / "results"
    code = main(["run", str(REPO / "experiments" / "gpt-ptb.yaml"), "--results", str(out),
                 "--run-id", "g", "--no-progress", "--steps", "4",
                 "--set", "eval_every_steps=2", "--set", "eval_subset=2000",
                 "--set", "recorder={schedule: 1, hist_schedule: 0, snapshot_schedule: [3], "
                          "densities: [0.001]}"])
    assert code == 0, capsys.readouterr().err
    run_dir = out / "gpt-ptb" / "g"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert (manifest["model"], manifest["num_parameters"], manifest["profile"]) == \
        ("gpt-mini", 744_192, "quick")
    assert manifest["clip_at"] == "aggregate" and manifest["deviations"] == []
    assert manifest["optimizer"] == {"name": "adamw", "betas": [0.9, 0.99], "eps": 1e-8,
                                     "weight_decay": 0.1, "no_decay_1d": True, "lr": 3e-3,
                                     "lr_schedule": "cosine"}
    train = pd.read_parquet(run_dir / "train.parquet")
    assert train["lr"].tolist() == pytest.approx([3e-3 * (t + 1) / 40 for t in range(4)])
    assert (train["metric_name"] == "perplexity").all()
    evals = pd.read_parquet(run_dir / "eval.parquet")
    assert evals["step"].tolist() == [1, 3]
    assert evals["metric"].tolist() == pytest.approx(np.exp(evals["loss"]).tolist())
    assert evals["metric"].iloc[1] < evals["metric"].iloc[0]  # warming up, already learning
    from topkscope.analysis.runs import load

    run = load(run_dir)
    assert sorted(run.stats["step"].unique()) == [0, 1, 2, 3]
    assert sorted(run.snapshots["step"].unique()) == [3]
