"""Checkpoints: one folder per step, one file per worker, a marker written last.

    checkpoints/step-000000040/rank-00000.pt   step, model, optimizer, RNG state, identity
                              /rank-0000p.pt   worker p's error-feedback residual, carried
                                               data state (LM hidden) and sparsifier state
                                               (an adapting rule's, e.g. sidco), every rank p
                              /COMPLETE        written by rank 0 after every rank's file exists

Each file is written under a temporary name and renamed; a folder without COMPLETE (a run
killed while saving) is ignored on resume. Files are read with torch.load(weights_only=True).
Per-rank files make a checkpoint independent of the launcher: a simulated run's checkpoint
resumes under torchrun with the same P, and the other way round.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch

from topkscope.io import atomic_write, write_json_atomic
from topkscope.train.trainer import Trainer

MARKER = "COMPLETE"


def folder(run_dir: Path, step: int) -> Path:
    return Path(run_dir) / "checkpoints" / f"step-{step:09d}"


def rank_file(ckpt: Path, rank: int) -> Path:
    return ckpt / f"rank-{rank:05d}.pt"


def identity(trainer: Trainer) -> dict[str, Any]:
    """What must match for a checkpoint to belong to this run."""
    cfg = trainer.cfg
    return {"model": cfg.model, "model_args": cfg.model_args, "world_size":
            trainer.transport.world_size, "layout": trainer.layout.describe()}


def save(run_dir: Path, trainer: Trainer, keep: int) -> Path:
    """Write the checkpoint of trainer.step (every local rank), mark it complete, prune old ones."""
    ckpt = folder(run_dir, trainer.step)
    ckpt.mkdir(parents=True, exist_ok=True)
    for i, rank in enumerate(trainer.transport.local_ranks):
        state = trainer.worker_state(i)
        if rank == 0:
            state.update(trainer.shared_state(), identity=identity(trainer))
        atomic_write(rank_file(ckpt, rank), lambda tmp, s=state: torch.save(s, tmp))
    trainer.transport.barrier()
    if trainer.transport.is_main:
        write_json_atomic(ckpt / MARKER, {"step": trainer.step,
                                          "world_size": trainer.transport.world_size})
        for old in complete_folders(run_dir)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    trainer.transport.barrier()
    return ckpt


def complete_folders(run_dir: Path) -> list[Path]:
    """Checkpoint folders with their marker, oldest first."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    return sorted(p for p in root.glob("step-*") if (p / MARKER).is_file())


def latest(run_dir: Path) -> Path | None:
    done = complete_folders(run_dir)
    return done[-1] if done else None


def _read(path: Path) -> dict[str, Any]:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise ValueError(f"checkpoint file {str(path)!r} is missing") from None
    except Exception as exc:  # unpickling refuses anything but tensors and plain containers
        raise ValueError(f"checkpoint file {str(path)!r} cannot be read: "
                         f"{str(exc).splitlines()[0]}") from None


def check_identity(saved: dict[str, Any], trainer: Trainer, path: Path) -> None:
    """ValueError naming the first difference between a checkpoint and this run."""
    mine = identity(trainer)
    if saved.get("model") != mine["model"] or saved.get("model_args") != mine["model_args"]:
        raise ValueError(f"checkpoint {str(path)!r} is from model {saved.get('model')!r} "
                         f"{saved.get('model_args') or ''}; this run trains {mine['model']!r} "
                         f"{mine['model_args'] or ''}")
    if saved.get("layout") != mine["layout"]:
        theirs = {n: s for n, s in saved.get("layout", [])}
        for name, shape in mine["layout"]:
            if theirs.get(name) != shape:
                raise ValueError(f"checkpoint {str(path)!r} does not fit this model: parameter "
                                 f"{name!r} is {theirs.get(name)} there and {shape} here")
        raise ValueError(f"checkpoint {str(path)!r} has parameters this model lacks")
    if saved.get("world_size") != mine["world_size"]:
        raise ValueError(f"checkpoint {str(path)!r} holds {saved.get('world_size')} workers; "
                         f"this run has {mine['world_size']} (resume with the same --workers)")


def load(ckpt: Path, trainer: Trainer) -> None:
    """Restore trainer (shared state and every local rank's state) from a checkpoint folder."""
    first = _read(rank_file(ckpt, 0))
    check_identity(first.get("identity", {}), trainer, ckpt)
    states = {0: first}
    for rank in trainer.transport.local_ranks:
        if rank not in states:
            states[rank] = _read(rank_file(ckpt, rank))
    trainer.load_shared_state(first)
    for i, rank in enumerate(trainer.transport.local_ranks):
        trainer.load_worker_state(i, states[rank])


def marker_step(ckpt: Path) -> int:
    return int(json.loads((ckpt / MARKER).read_text())["step"])
