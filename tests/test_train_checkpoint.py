"""Checkpoints: resuming reproduces the uninterrupted run exactly; wrong checkpoints are refused."""

from __future__ import annotations

import shutil

import pytest
import torch

from topkscope.comm import SimulatedTransport
from topkscope.train import build_trainer, checkpoint, validate

FNN = dict(experiment="ckpt", model="fnn3", dataset="mnist", workers=2, batch_size=16,
           train_subset=256, eval_subset=100, steps=12, lr=0.05, momentum=0.9,
           weight_decay=1e-4, density=0.01, seed=11)
LSTM = dict(FNN, model="lstm-ptb-small", dataset="ptb", bptt=4, batch_size=3,
            model_args={"hidden_size": 8, "num_layers": 2, "dropout": 0.3},
            train_subset=300, eval_subset=60, eval_batch_size=3, momentum=0.0,
            weight_decay=0.0, grad_clip=0.25, lr=2.0)
GPT = dict(LSTM, model="gpt-mini", model_args={"layers": 1, "heads": 2, "width": 8,
                                                "context": 4, "dropout": 0.2},
           optimizer="adamw", betas=[0.9, 0.95], weight_decay=0.1, no_decay_1d=True, lr=1e-2,
           lr_schedule="cosine", lr_warmup_steps=3, grad_clip=1.0)


def trainer_for(spec: dict, **changes):
    cfg = validate({**spec, **changes})
    return build_trainer(cfg, SimulatedTransport(cfg.workers))[0]


def state_of(trainer) -> list[torch.Tensor]:
    out = [p.detach().clone() for p in trainer.params]
    out += [c.feedback.residual("__global__").clone() for c in trainer.compressors]
    return out


SIDCO = dict(FNN, sparsifier="sidco", density=0.001)  # its stage count adapts every 5 steps


@pytest.mark.train
@pytest.mark.parametrize("spec", [FNN, LSTM, SIDCO, GPT],
                         ids=["fnn3", "lstm", "fnn3-sidco", "gpt-adamw"])
def test_resume_mid_epoch_equals_the_uninterrupted_run(tmp_path, spec):
    whole = trainer_for(spec)
    rows_whole = [whole.train_step() for _ in range(12)]

    first = trainer_for(spec)
    for _ in range(7):
        first.train_step()
    checkpoint.save(tmp_path, first, keep=2)
    if spec is SIDCO:  # mid-way between two adaptations: the state is not the initial one
        states = [first.worker_state(i)["sparsifier"] for i in range(2)]
        assert all(s["calls"] == 2 and s["stages"] > 1 for s in states)
    del first
    second = trainer_for(spec)
    checkpoint.load(checkpoint.latest(tmp_path), second)
    assert second.step == 7
    rows_resumed = [second.train_step() for _ in range(5)]
    for a, b in zip(state_of(whole), state_of(second)):
        assert torch.equal(a, b)
    assert [r["loss"] for r in rows_whole[7:]] == [r["loss"] for r in rows_resumed]


@pytest.mark.train
def test_checkpoint_folder_layout_marker_and_pruning(tmp_path):
    trainer = trainer_for(FNN)
    for _ in range(3):
        trainer.train_step()
        checkpoint.save(tmp_path, trainer, keep=2)
    done = checkpoint.complete_folders(tmp_path)
    assert [p.name for p in done] == ["step-000000002", "step-000000003"]
    assert sorted(f.name for f in done[-1].iterdir()) == ["COMPLETE", "rank-00000.pt",
                                                          "rank-00001.pt"]
    assert checkpoint.marker_step(done[-1]) == 3
    # a folder without its marker (a run killed while saving) is not a checkpoint
    partial = checkpoint.folder(tmp_path, 9)
    shutil.copytree(done[-1], partial)
    (partial / "COMPLETE").unlink()
    assert checkpoint.latest(tmp_path) == done[-1]
    # files hold only tensors and plain containers
    state = torch.load(done[-1] / "rank-00001.pt", weights_only=True)
    assert set(state) == {"rank", "residual", "hidden", "sparsifier"} and state["rank"] == 1


@pytest.mark.parametrize("changes, words", [
    ({"model_args": {"hidden": [50, 50]}}, ["checkpoint", "is from model 'fnn3'",
                                            "this run trains 'fnn3' {'hidden': [50, 50]}"]),
    ({"model": "resnet20", "model_args": {"in_channels": 1, "width": 4}},
     ["is from model 'fnn3'", "this run trains 'resnet20'"]),
    ({"workers": 4}, ["holds 2 workers", "this run has 4"]),
])
@pytest.mark.train
def test_a_checkpoint_of_another_model_or_world_is_refused(tmp_path, changes, words):
    trainer = trainer_for(FNN)
    trainer.train_step()
    saved = checkpoint.save(tmp_path, trainer, keep=1)
    other = trainer_for(FNN, **changes)
    with pytest.raises(ValueError) as err:
        checkpoint.load(saved, other)
    assert "\n" not in str(err.value)
    for word in words:
        assert word in str(err.value)
    assert other.step == 0  # nothing was loaded


def test_an_unreadable_checkpoint_file_is_a_one_line_error(tmp_path):
    trainer = trainer_for(FNN)
    saved = checkpoint.save(tmp_path, trainer, keep=1)
    (saved / "rank-00000.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="cannot be read") as err:
        checkpoint.load(saved, trainer_for(FNN))
    assert "\n" not in str(err.value)
