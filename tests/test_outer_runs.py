"""`topkscope run` of an outer-loop experiment: torchrun processes against simulated workers
(the same parameters, bit for bit on CPU), and a SIGTERM mid-round resumed to the
uninterrupted result. Both start processes (slow)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from tests.test_run_lifecycle import cli, freeze_when, start
from topkscope.cli import main
from topkscope.schema import OUTER_FILE
from topkscope.train import checkpoint

pytestmark = [pytest.mark.train, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
OUTER = dict(experiment="outer-tiny", model="fnn3", dataset="mnist", workers=2, batch_size=16,
             train_subset=640, eval_subset=200, steps=20, optimizer="adamw", lr=2e-3,
             weight_decay=0.01, sparsifier="chunk-topk", sparsifier_args={"chunk_size": 1024},
             density=0.015625, quantize={"bits": 2}, seed=2, threads=1,
             checkpoint_every_steps=5, eval_every_steps=10,
             outer={"inner_steps": 3, "step": "average", "error_decay": 0.95},
             recorder={"schedule": 1, "densities": [0.015625], "sparsifiers": ["chunk-topk"],
                       "quantize": {"bits": 2}})
TIMES = ["time_compute", "time_select", "time_communicate"]


def write(folder: Path, **changes) -> Path:
    path = folder / "outer.yaml"
    path.write_text(yaml.safe_dump({**OUTER, **changes}))
    return path


def final_model(run_dir: Path) -> dict[str, torch.Tensor]:
    return torch.load(checkpoint.latest(run_dir) / "rank-00000.pt", weights_only=True)["model"]


def same_tables(a: Path, b: Path) -> None:
    for name in ("train.parquet", OUTER_FILE):
        x, y = (pd.read_parquet(d / name) for d in (a, b))
        keep = [c for c in x.columns if c not in (*TIMES, "run_id")]  # not the run's name
        pd.testing.assert_frame_equal(x[keep], y[keep], obj=name)
    values = ["norm", "topk_ratio", "topk_quantized_ratio", "chunk_topk_ratio"]
    x, y = (pd.read_parquet(d / "stats").sort_values(["step", "rank", "layer", "kind"])
            .reset_index(drop=True)[["step", "rank", "layer", "kind", *values]] for d in (a, b))
    pd.testing.assert_frame_equal(x, y, obj="stats")


def test_torchrun_processes_train_what_simulated_workers_train(tmp_path):
    cfg = write(tmp_path)
    out = tmp_path / "results"
    assert main(["run", str(cfg), "--results", str(out), "--run-id", "sim", "--no-progress"]) == 0
    assert main(["run", str(cfg), "--results", str(out), "--run-id", "tr", "--no-progress",
                 "--launcher", "torchrun"]) == 0
    sim, tr = out / "outer-tiny" / "sim", out / "outer-tiny" / "tr"
    manifest = json.loads((tr / "manifest.json").read_text())
    assert manifest["launcher"] == "torchrun" and manifest["outer"]["inner_steps"] == 3
    a, b = final_model(sim), final_model(tr)
    assert all(torch.equal(a[n], b[n]) for n in a)
    same_tables(sim, tr)


def test_sigterm_mid_round_resumes_to_the_uninterrupted_result(tmp_path):
    cfg = write(tmp_path, steps=100000, checkpoint_every_steps=7)
    out = tmp_path / "results"
    run_dir = out / "outer-tiny" / "s"
    proc = start(cli("run", str(cfg), "--results", str(out), "--run-id", "s", "--no-progress"))

    def past_step_14():
        ckpt = checkpoint.latest(run_dir)
        return ckpt if ckpt is not None and checkpoint.marker_step(ckpt) >= 14 else None

    try:  # stopped before the next checkpoint (step 21), then told to stop
        freeze_when(proc, past_step_14, "a checkpoint at step 14")
        proc.send_signal(signal.SIGTERM)
        os.kill(proc.pid, signal.SIGCONT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    assert manifest["checkpoint_step"] == 14  # inside a round of 3 (rounds end at 3, 6, ...)
    steps = manifest["steps_done"] + 5
    assert main(["run", str(cfg), "--results", str(out), "--run-id", "s", "--resume",
                 "--steps", str(steps), "--no-progress"]) == 0
    assert main(["run", str(cfg), "--results", str(out), "--run-id", "whole", "--steps",
                 str(steps), "--no-progress"]) == 0
    whole = out / "outer-tiny" / "whole"
    a, b = final_model(run_dir), final_model(whole)
    assert all(torch.equal(a[n], b[n]) for n in a)
    same_tables(run_dir, whole)
    assert pd.read_parquet(run_dir / OUTER_FILE)["outer_step"].tolist() == \
        list(range(len(pd.read_parquet(whole / OUTER_FILE))))
