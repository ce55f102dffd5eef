"""Which run folder a resume continues, and what a stopped run tells its user.

- `find_run`: the folder `--resume` continues: the one named by --run-id, else the newest
  interrupted or failed run of the same config with a complete checkpoint (`resumable_runs`,
  selected by manifest content through manifest.find_runs), announced on stdout;
- `refuse_if_interrupted`: a fresh start without --run-id while an interrupted run of the same
  config can be resumed is refused, with the command that resumes it;
- `resume_command`, `interruption_message` (manifest's, re-exported), `interruption_report`: the
  one line an interrupted run prints (the signal, the step, the command to paste), from the
  worker that stopped or from the launcher that waited for its torchrun workers.

A run killed by SIGKILL keeps status `running` and its last checkpoint: it is resumed by
naming it (`--run-id ID --resume`), never picked automatically.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import Any

from topkscope.interrupts import signal_name
from topkscope.manifest import FoundRun, Manifest, find_runs, interruption_message
from topkscope.train import checkpoint
from topkscope.train.config import ExperimentConfig, RunOptions, with_defaults

# keys that may differ between a run and its resumption
RESUMABLE_CHANGES = ("steps", "epochs", "launcher", "device", "threads", "eval_every_steps",
                     "eval_max_batches", "checkpoint_every_steps", "keep_checkpoints",
                     "flush_every_steps")


def config_differences(saved: dict[str, Any], cfg: ExperimentConfig) -> list[str]:
    """Config keys whose values differ between a run's saved config and cfg, sorted, except
    the keys a resumed run may change (RESUMABLE_CHANGES)."""
    mine, saved = cfg.to_dict(), with_defaults(saved)  # runs saved before newer config keys
    return sorted(k for k in set(saved) | set(mine)
                  if k not in RESUMABLE_CHANGES and saved.get(k) != mine.get(k))


def check_resumable(saved: dict[str, Any], cfg: ExperimentConfig, run_dir: Path) -> None:
    differ = config_differences(saved, cfg)
    if differ:
        k = differ[0]
        raise ValueError(f"cannot resume {str(run_dir)!r}: config differs in {', '.join(differ)} "
                         f"(e.g. {k} = {saved.get(k)!r} there, {cfg.to_dict().get(k)!r} now)")


def resumable_runs(out_root: Path, cfg: ExperimentConfig, statuses: tuple[str, ...]
                   ) -> list[tuple[FoundRun, Path]]:
    """(run, its latest complete checkpoint) for every run of cfg's experiment under out_root
    whose status is one of statuses and whose config is cfg's (but for RESUMABLE_CHANGES),
    newest checkpoint first."""
    found = []
    for run in find_runs(Path(out_root) / cfg.experiment, experiment=cfg.experiment,
                         status=statuses):
        ckpt = checkpoint.latest(run.path)
        if ckpt is not None and not config_differences(run.manifest.get("config") or {}, cfg):
            found.append((run, ckpt))
    return sorted(found, key=lambda item: (item[1] / checkpoint.MARKER).stat().st_mtime,
                  reverse=True)


def find_run(out_root: Path, cfg: ExperimentConfig, run_id: str | None, announce: bool = False
             ) -> Path:
    """The folder to resume: the named one, else the newest interrupted or failed run of the
    same config with a complete checkpoint (announced on stdout when `announce`)."""
    base = Path(out_root) / cfg.experiment
    if run_id is not None:
        run_dir = base / run_id
        if not run_dir.exists():
            raise ValueError(f"cannot resume {str(run_dir)!r}: there is no such run; drop "
                             f"--resume to start it (under torchrun --max-restarts a "
                             f"restarted worker continues its run without --resume)")
        if not (run_dir / "manifest.json").is_file():
            raise ValueError(f"cannot resume: {str(run_dir)!r} is not a result folder")
        return run_dir
    candidates = resumable_runs(out_root, cfg, ("interrupted", "failed"))
    if not candidates:
        raise ValueError(f"cannot resume: no interrupted or failed run of {cfg.experiment!r} "
                         f"with this config under {str(base)!r} has a complete checkpoint (a "
                         f"run killed by SIGKILL still says 'running': resume it with --run-id)")
    run, ckpt = candidates[0]
    if announce:
        print(f"topkscope run: resuming {run.path} ({run.manifest.get('status')} "
              f"{_how(run.manifest)}; from its checkpoint at step {checkpoint.marker_step(ckpt)})",
              flush=True)
    return run.path


def _how(manifest: dict) -> str:
    """'by SIGTERM at <time>' or 'at <time>' for an interrupted or failed manifest."""
    by = f"by {manifest['signal']} " if manifest.get("signal") else ""
    return f"{by}at {manifest.get('end_time')}"


def refuse_if_interrupted(out_root: Path, cfg: ExperimentConfig) -> None:
    """A fresh start without a run id while an interrupted run of the same config could be
    resumed is most likely a rerun meant to resume: say how, instead of starting a second
    folder."""
    found = resumable_runs(out_root, cfg, ("interrupted",))
    if found:
        run, ckpt = found[0]
        again = run.manifest.get("resume_command") or \
            f"the same command with --run-id {run.path.name} --resume"
        raise ValueError(f"an interrupted run of this config exists: {str(run.path)!r} "
                         f"(interrupted {_how(run.manifest)}, checkpoint at step "
                         f"{checkpoint.marker_step(ckpt)}); resume it with: {again}; or start "
                         f"a separate run by naming it with --run-id NAME")


def resume_command(opts: RunOptions, run_id: str) -> str:
    """The command line (to paste) that resumes run_id."""
    if opts.command is None:  # started from Python
        return (f"run(cfg, RunOptions(out_root={str(opts.out_root)!r}, run_id={run_id!r}, "
                f"resume=True))")
    return shlex.join(["topkscope", *opts.command, "--run-id", run_id, "--resume"])


def resume_fields(opts: RunOptions, run_dir: Path) -> dict[str, Any]:
    """checkpoint_step and resume_command of a stopped run (empty without a checkpoint)."""
    ckpt = checkpoint.latest(run_dir)
    if ckpt is None:
        return {}
    return {"checkpoint_step": checkpoint.marker_step(ckpt),
            "resume_command": resume_command(opts, run_dir.name)}


def interruption_report(run_dir: Path, opts: RunOptions, signum: int, wait_s: float = 30.0
                        ) -> str:
    """The line a launcher prints after forwarding signum to its torchrun workers: the one
    rank 0 wrote into the manifest, once it is there (waiting up to wait_s for the workers'
    cleanup), else what is known."""
    deadline = time.monotonic() + wait_s
    manifest: dict[str, Any] | None = None
    while True:
        try:
            manifest = Manifest.load(run_dir)
        except (OSError, ValueError):
            manifest = None
        if (manifest or {}).get("status") != "running" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    name = signal_name(signum)
    if manifest is None:
        return f"interrupted by {name} before training started; nothing was written"
    if manifest.get("status") == "interrupted":
        return interruption_message(run_dir, manifest)
    return (f"interrupted by {name}; {run_dir} says {manifest.get('status')!r}; resume it "
            f"from its last checkpoint with: {resume_command(opts, run_dir.name)}")
