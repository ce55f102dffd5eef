"""What the DDP communication hook writes about a user's own run, so that `topkscope analyze`,
the claims table, the figures and the notebooks work on it as on a `topkscope run` folder.

On rank 0 only (every rank knows every rank's count after the all-gather):

* manifest fields as `topkscope run` writes them: experiment and run_id (the folder's parent
  and name), world_size, launcher "ddp-hook", sparsifier and sparsifier_args, density (or
  `density_function` when it is a function of the step), selection, k_rule, error_feedback,
  dense_steps, seed, model (the module's class name unless given), num_parameters (d), layers
  ([name, numel] in parameter order), device, threads, optimizer (name and hyper-parameters of
  the optimizer given to the state, manifest.describe_optimizer; else null); versions and the git commit come with
  every Manifest. `run_fields` add to or override them (e.g. model="resnet20",
  dataset="cifar10").
* train.parquet (TRAIN_COLUMNS), one row per step from the hook's own bookkeeping: density, k,
  the counts sent per worker (mean, min, median, max), bytes on the wire, select and
  communicate seconds, and compute seconds (forward + backward: from the first training-mode
  forward of the model since the last step to the arrival of DDP's last gradient bucket).
  What only the training loop knows (loss, lr, metric, epoch) is missing (NaN / null) unless
  the script tells it with `state.note(loss=..., ...)`. A row is written once the next step
  begins (the loop has noted it by then) or when the state closes. The dense all-reduce steps
  are rows with density 1 and k = d (their select and communicate times are not measured: the
  all-reduce runs asynchronously).
* a resumed script (one that loads `state.load_state_dict` from its checkpoint and appends to
  the folder) first sets aside what the folder holds for the steps it redoes: each rank its
  own files, into one folder the ranks agreed on (TopKHookState at its first step; `begin`).

The manifest is the recorder's (rank 0 owns it) when the state has one, else the log's own,
created in run_dir and finished when the state closes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from topkscope.hooks.lifecycle import failed_set_up, prepare_folder, script_resume_fields
from topkscope.io import Table
from topkscope.manifest import Manifest
from topkscope.schema import TRAIN_COLUMNS, run_identity

NOTABLE = ("loss", "lr", "metric", "metric_name", "epoch", "time_compute")


def manifest_fields(state, model: torch.nn.Module, run_dir: Path, sparsifier: str,
                    sparsifier_args: dict | None, density: float | Callable, selection: str,
                    error_feedback: bool, seed: int, k_rule: str,
                    run_fields: dict | None, optimizer: dict | None = None) -> dict[str, Any]:
    layout = state.layout
    fields: dict[str, Any] = {
        "experiment": run_dir.parent.name, "run_id": run_dir.name,
        "launcher": "ddp-hook", "world_size": state.transport.world_size,
        "sparsifier": sparsifier, "sparsifier_args": dict(sparsifier_args or {}),
        "density": None if callable(density) else float(density),
        "selection": selection, "k_rule": k_rule, "error_feedback": bool(error_feedback),
        "dense_steps": state.dense_steps, "seed": seed, "model": type(model).__name__,
        "dataset": None, "dataset_substitute": None,
        "num_parameters": layout.d,
        "layers": [[name, int(n)] for name, n in zip(layout.names, layout.numels)],
        "device": str(state.device), "threads": torch.get_num_threads(),
        "optimizer": optimizer,
    }
    if callable(density):
        fields["density_function"] = getattr(density, "__name__", repr(density))
    fields.update(run_fields or {})
    return fields


class HookRunLog:
    """Rank 0's manifest fields and train.parquet for a DDP-hook run (see the module doc)."""

    def __init__(self, run_dir: Path, manifest: Manifest | None, owns_manifest: bool,
                 fields: dict[str, Any], flush_every: int = 50) -> None:
        self.run_dir = run_dir
        self.manifest = manifest
        self.owns_manifest = owns_manifest
        self.flush_every = flush_every
        self._aside: Path | None = None  # superseded/<name>/ of this segment, once made
        if manifest is not None:
            manifest.update(**fields)
        self.table = Table(run_dir / "train.parquet", TRAIN_COLUMNS, run_identity(
            run_dir, manifest.data if manifest is not None else None))

    @classmethod
    def start(cls, run_dir: str | Path | None, recorder, fields: dict[str, Any]
              ) -> HookRunLog | None:
        """The log of this process (None on ranks other than 0 or with nowhere to write)."""
        if run_dir is None and recorder is None:
            return None
        folder = Path(run_dir) if run_dir is not None else Path(recorder.out_dir)
        manifest = getattr(recorder, "manifest", None)
        owns = manifest is None
        if owns:
            replaced = None
            if (folder / "manifest.json").exists() and recorder is None:
                if not failed_set_up(folder):
                    raise ValueError(f"{str(folder)!r} already holds a run (manifest.json); "
                                     f"choose another run_dir")
                replaced = prepare_folder(folder, 0, None, manifest_given=False)
            manifest = Manifest(folder, launcher="ddp-hook")
            if replaced is not None:
                manifest.data["replaced"] = str(replaced.relative_to(folder))
        return cls(folder, manifest, owns, fields)

    def begin(self, step: int, aside: Path | None = None) -> None:
        """The hook's first step in this process is `step` (0, or the step of the checkpoint
        the script resumed from). Every rank has set aside its own files of steps >= step
        (hooks.lifecycle.supersede_from, rank=), rank 0 train.parquet's rows, into `aside`
        (the folder they agreed on, made by whichever rank moved something first); keep the
        rows before it, so train.parquet and stats/ end with every step once and steps_done is
        the run's true total. The segment names `aside` once it exists (other ranks may make
        it after this)."""
        self.table.reload_before(step)
        self._aside = aside
        if self.manifest is not None:
            segments = self.manifest.data.get("segments") or [{}]
            segments[-1]["from_step"] = step
            self.manifest.update(segments=segments, steps_done=len(self.table.rows))
            self._note_aside()

    def _note_aside(self) -> None:
        """Name the set-aside folder in the latest segment once some rank has made it."""
        aside = self._aside
        if aside is None or self.manifest is None or not aside.is_dir():
            return
        self._aside = None
        segments = self.manifest.data.get("segments") or [{}]
        segments[-1]["superseded"] = str(aside.relative_to(self.run_dir))
        self.manifest.update(segments=segments)

    def add(self, row: dict[str, Any]) -> None:
        """A new step's row. The rows before it are complete (the loop has noted them), so
        this is when they are written, every flush_every rows."""
        if self.table.rows and len(self.table.rows) % self.flush_every == 0:
            self.flush()
        full = {"epoch": pd.NA, "loss": math.nan, "lr": math.nan, "metric": math.nan,
                "metric_name": None, "time_compute": math.nan, **row}
        self.table.append(full)

    def note(self, **values: Any) -> None:
        """Fill what only the training loop knows into the latest step's row."""
        unknown = sorted(set(values) - set(NOTABLE))
        if unknown:
            raise ValueError(f"note() got {unknown}; allowed: {', '.join(NOTABLE)}")
        if not self.table.rows:
            raise ValueError("note() before the hook's first step: nothing to note on")
        self.table.amend_last(**values)

    @property
    def steps(self) -> int:
        return len(self.table.rows)

    def flush(self) -> None:
        self.table.flush()
        if self.manifest is not None:
            self._note_aside()
            self.manifest.update(steps_done=len(self.table.rows))

    def close(self, error: BaseException | None = None) -> None:
        self.flush()
        if self.owns_manifest:
            if error is None:
                self.manifest.complete()
            else:  # failed, or interrupted for Ctrl-C / interrupts.RunInterrupted
                self.manifest.stop(error, **script_resume_fields(self.run_dir))
