"""topkscope.checkpoint: a user's script saves and restores its model, optimizer, hook state
and recorder together; a loop of one's own that is stopped and run again records every step
once and ends with the parameters of an uninterrupted run."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from tests._hooks_loop import layout_of, own_step, tiny_model
from topkscope import checkpoint
from topkscope.feedback import ErrorFeedback
from topkscope.hooks import Recorder
from topkscope.hooks.lifecycle import SUPERSEDED
from topkscope.sparsify import get_sparsifier

STEPS, EVERY = 24, 8


def test_save_and_restore_keep_every_object_and_the_newest_two(tmp_path):
    run = tmp_path / "run"
    model = tiny_model(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ef = ErrorFeedback()
    ef.update("flat", torch.arange(5.0), torch.tensor([1]))
    model(torch.randn(2, 12)).sum().backward()
    opt.step()
    assert checkpoint.restore(run, model=model) == 0 and checkpoint.mode(run) is None
    for step in (8, 16, 24):
        checkpoint.save(run, step, model=model, optimizer=opt, feedback=ef)
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["latest", "step-16",
                                                                        "step-24"]
    assert checkpoint.latest(run) == run / "checkpoints" / "step-24"
    assert checkpoint.load(run)["checkpoint"] == {"step": 24, "world_size": 1,
                                                  "restart_count": 0}
    assert checkpoint.mode(run) == "append"

    again, ef2 = tiny_model(1), ErrorFeedback()
    opt2 = torch.optim.SGD(again.parameters(), lr=0.1, momentum=0.9)
    assert checkpoint.restore(run, model=again, optimizer=opt2, feedback=ef2) == 24
    for a, b in zip(model.parameters(), again.parameters()):
        assert torch.equal(a, b)
    assert torch.equal(ef2.residual("flat"), torch.tensor([0.0, 0.0, 2.0, 3.0, 4.0]))
    assert opt2.state_dict()["state"][0]["momentum_buffer"].equal(
        opt.state_dict()["state"][0]["momentum_buffer"])
    with pytest.raises(ValueError, match="holds feedback, model, optimizer; restore was given "
                                         "model, optimizer"):
        checkpoint.restore(run, model=again, optimizer=opt2)
    with pytest.raises(ValueError, match="'checkpoint' is the checkpoint's own entry"):
        checkpoint.save(run, 32, checkpoint=model)


def test_a_torchrun_restart_appends_even_without_a_checkpoint(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    assert checkpoint.mode(tmp_path / "run") == "append"


def test_a_missing_rank_file_is_one_line(tmp_path):
    run = tmp_path / "run"
    checkpoint.save(run, 4, model=tiny_model(0))
    with pytest.raises(ValueError, match=r"rank-1\.pt' is missing \(latest names step-4\)"):
        checkpoint.load(run, rank=1)


def own_loop(run, stop_at: int | None = None) -> torch.Tensor:
    """The recording.md loop on the tiny model: TopK-SGD, a checkpoint every EVERY steps,
    KeyboardInterrupt after step stop_at (a Ctrl-C); returns the final parameters."""
    model = tiny_model(0)
    layout = layout_of(model)
    ef, topk = ErrorFeedback(), get_sparsifier("topk")
    with Recorder(run, schedule=1, snapshot_schedule=[EVERY, 2 * EVERY], densities=[0.05],
                  run_fields={"model": "tiny", "sparsifier": "topk", "density": 0.05},
                  mode=checkpoint.mode(run)) as rec:
        start = checkpoint.restore(run, model=model, feedback=ef, recorder=rec)
        for step in range(start, STEPS):
            g, u, e, idx = own_step(model, ef, topk, step)
            rec.record(step, 0, u=u, e=e, g=g, layout=layout, selected=idx)
            if (step + 1) % EVERY == 0:
                checkpoint.save(run, step + 1, model=model, feedback=ef, recorder=rec)
            if step == stop_at:
                raise KeyboardInterrupt
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def test_a_loop_of_ones_own_stopped_and_run_again_records_every_step_once(tmp_path):
    reference = own_loop(tmp_path / "ref")
    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        own_loop(run, stop_at=EVERY * 2 + 3)   # after the checkpoint at 16, recorded 16..19
    assert json.loads((run / "manifest.json").read_text())["status"] == "interrupted"
    assert torch.equal(own_loop(run), reference)
    stats = pd.read_parquet(run / "stats")
    keys = ["step", "rank", "layer", "kind", "density"]
    assert not stats.duplicated(keys).any() and sorted(set(stats["step"])) == list(range(STEPS))
    assert sorted(p.name for p in (run / "snapshots").iterdir()) == sorted([
        f"step{EVERY}-rank0.npy", f"step{2 * EVERY}-rank0.npy"])
    (aside,) = (run / SUPERSEDED).iterdir()
    assert sorted(set(pd.read_parquet(aside / "stats")["step"])) == [16, 17, 18, 19]
    assert [p.name for p in (aside / "snapshots").iterdir()] == [f"step{2 * EVERY}-rank0.npy"]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["model"] == "tiny"
    assert manifest["segments"][-1]["from_step"] == 16
    assert manifest["segments"][-1]["superseded"] == f"{SUPERSEDED}/{aside.name}"
