"""Checkpoints of a user's own training script: the model, the optimizer (and scheduler), the
DDP hook's state and the recorder, saved and restored together, so that running the same
command again after a stop, a crash or a killed rank, or a torchrun restart, continues the run.

    from topkscope import checkpoint

    with Recorder(out_dir, ..., rank=rank, mode=checkpoint.mode(out_dir)) as rec, \\
            TopKHookState(model, ..., recorder=rec) as state:
        ddp.register_comm_hook(state, topk_hook)
        start = checkpoint.restore(out_dir, model=model, optimizer=opt, topk=state)
        for step in range(start, steps):
            ...                                            # one training step
            if (step + 1) % 50 == 0 or step + 1 == steps:
                checkpoint.save(out_dir, step + 1, model=model, optimizer=opt, topk=state)

`<run>/checkpoints/step-<N>/rank-<r>.pt` holds, per rank, every object's `state_dict()` under
the name it was given (`model`, `optimizer`, `topk`, ...) and `checkpoint`: the step, the world
size and torchrun's restart count when it was saved. Each rank's file is written under a
temporary name and renamed; after a barrier, rank 0 names the step in `<run>/checkpoints/latest`
(also atomically) and removes all but the newest `keep`, so a rank that dies while saving
leaves the previous checkpoint in force. Files are read with torch.load(weights_only=True).

- `mode(run_dir)`: the Recorder's mode — "append" when the run continues (a checkpoint is
  named in `latest`, or torchrun restarted the worker group, `comm.elastic.restart_count`, even
  one that died before its first checkpoint), else None (a new run; a folder holding results
  is refused).
- `save(run_dir, step, recorder=None, **objects)`: the objects' states (a TopKHookState's
  writes its recorder's rows and train.parquet first); `recorder=`: a Recorder used without the
  hook, whose rows are flushed. Returns the checkpoint folder.
- `restore(run_dir, recorder=None, **objects)`: load `latest` into the same names (a name
  missing on either side is an error: nothing is silently left unrestored) and return its
  step (0 when there is none). A TopKHookState sets aside, at its first step, what the run
  folder holds for that step and later, each rank its own files; `recorder=` does the same for
  a Recorder used without the hook (hooks.lifecycle.supersede_from), so the run ends with
  every step once.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from topkscope.comm.elastic import restart_count
from topkscope.hooks.lifecycle import (
    CHECKPOINTS,
    LATEST,
    SUPERSEDED,
    aside_name,
    run_folder_is_a_file,
    supersede_from,
)
from topkscope.io import atomic_write, write_bytes_atomic

FOLDER = CHECKPOINTS  # the layout (hooks.lifecycle reads a stopped run's checkpoint step too)
META = "checkpoint"  # the entry of a rank's file that describes the checkpoint itself


def _group() -> tuple[int, int]:
    """(rank, world size) of the default process group, (0, 1) without one."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def folder(run_dir: str | Path, step: int) -> Path:
    return Path(run_dir) / FOLDER / f"step-{int(step)}"


def rank_file(ckpt: Path, rank: int) -> Path:
    return ckpt / f"rank-{rank}.pt"


def latest(run_dir: str | Path) -> Path | None:
    """The checkpoint folder `latest` names (every rank finished it), or None."""
    pointer = Path(run_dir) / FOLDER / LATEST
    try:
        name = pointer.read_text().strip()
    except FileNotFoundError:
        return None
    except NotADirectoryError:  # run_dir, or its checkpoints/, is a file
        raise ValueError(run_folder_is_a_file(run_dir)) from None
    return Path(run_dir) / FOLDER / name


def mode(run_dir: str | Path) -> str | None:
    """"append" when the script continues its run (a checkpoint, or a torchrun restart), else
    None: the Recorder's `mode=`. ValueError (one line) when run_dir is a file."""
    if Path(run_dir).is_file():
        raise ValueError(run_folder_is_a_file(run_dir))
    return "append" if latest(run_dir) is not None or restart_count() > 0 else None


def _step_of(path: Path) -> int:
    try:
        return int(path.name.split("-", 1)[1])
    except (IndexError, ValueError):
        return -1


def save(run_dir: str | Path, step: int, *, recorder=None, keep: int = 2,
         **objects: Any) -> Path:
    """Save every object's state_dict() for this rank at `step` (the number of steps done);
    see the module docstring. Every rank calls it at the same step."""
    if META in objects:
        raise ValueError(f"{META!r} is the checkpoint's own entry; give the object another name")
    if keep < 1:
        raise ValueError(f"keep = {keep}; allowed: 1 or more checkpoints")
    rank, world = _group()
    if recorder is not None:
        recorder.flush()
    state = {name: obj.state_dict() for name, obj in objects.items()}
    state[META] = {"step": int(step), "world_size": world, "restart_count": restart_count()}
    ckpt = folder(run_dir, step)
    atomic_write(rank_file(ckpt, rank), lambda tmp: torch.save(state, tmp))
    if world > 1:
        dist.barrier()  # every rank's file is there before `latest` names the step
    if rank == 0:
        write_bytes_atomic(Path(run_dir) / FOLDER / LATEST, ckpt.name.encode())
        done = sorted((p for p in (Path(run_dir) / FOLDER).glob("step-*") if p.is_dir()),
                      key=_step_of)
        for old in done[:-keep]:
            if old != ckpt:
                shutil.rmtree(old, ignore_errors=True)
    return ckpt


def load(run_dir: str | Path, rank: int | None = None) -> dict[str, Any] | None:
    """The state a rank saved in the `latest` checkpoint (None when there is none); one-line
    ValueError when its file is missing or unreadable."""
    ckpt = latest(run_dir)
    if ckpt is None:
        return None
    path = rank_file(ckpt, _group()[0] if rank is None else rank)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise ValueError(f"checkpoint file {str(path)!r} is missing ({LATEST} names "
                         f"{ckpt.name}); was the run started with more ranks?") from None
    except Exception as exc:  # unpickling refuses anything but tensors and plain containers
        raise ValueError(f"checkpoint file {str(path)!r} cannot be read: "
                         f"{str(exc).splitlines()[0]}") from None


def restore(run_dir: str | Path, *, recorder=None, **objects: Any) -> int:
    """Load the `latest` checkpoint of this rank into the objects (by name, as saved) and
    return its step, or 0 when the run has none; see the module docstring."""
    rank, world = _group()
    saved = load(run_dir, rank)
    if saved is None:  # a new run, or a restarted group that died before its first checkpoint
        if recorder is not None:
            _set_aside(Path(recorder.out_dir), 0, recorder, rank, world)
        return 0
    meta = saved.pop(META, {})
    step = int(meta.get("step", 0))
    if meta.get("world_size", world) != world:
        raise ValueError(f"the checkpoint at step {step} of {str(run_dir)!r} was saved by "
                         f"{meta['world_size']} ranks; this run has {world} (resume with the "
                         f"same number of processes)")
    missing, extra = sorted(set(objects) - set(saved)), sorted(set(saved) - set(objects))
    if missing or extra:
        raise ValueError(f"the checkpoint at step {step} of {str(run_dir)!r} holds "
                         f"{', '.join(sorted(saved)) or 'nothing'}; restore was given "
                         f"{', '.join(sorted(objects)) or 'nothing'} (every saved object must "
                         f"be restored, by the name it was saved under)")
    for name, obj in objects.items():
        obj.load_state_dict(saved[name])
    if recorder is not None:
        _set_aside(Path(recorder.out_dir), step, recorder, rank, world)
    return step


def _set_aside(run_dir: Path, step: int, recorder, rank: int, world: int) -> None:
    """A Recorder used without the hook: each rank sets aside its own files of steps >= step
    into one superseded/ folder the ranks agree on; the manifest's segment says so."""
    name = aside_name(run_dir) if rank == 0 else None
    if world > 1:
        names = [name]
        dist.broadcast_object_list(names, src=0)
        name = names[0]
    supersede_from(run_dir, step, rank=rank if world > 1 else None, dest=name)
    if world > 1:
        dist.barrier()  # every rank's files are aside before rank 0 looks
    manifest = getattr(recorder, "manifest", None)
    if rank == 0 and manifest is not None:
        segments = manifest.data.get("segments") or [{}]
        segments[-1]["from_step"] = step
        aside = run_dir / SUPERSEDED / name
        if aside.is_dir():
            segments[-1]["superseded"] = str(aside.relative_to(run_dir))
        manifest.update(segments=segments)


__all__ = ["folder", "latest", "load", "mode", "restore", "save"]
