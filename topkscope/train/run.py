"""Set up and run one experiment: result folder, manifest, data, model, workers, loop.

    results/<experiment>/<run_id>/manifest.json, train.parquet, eval.parquet, checkpoints/,
                                  and what the Recorder writes (stats/, hist/, snapshots/)

Everything that can reject the input (config, dataset, model, sparsifier, run id, a checkpoint
that does not fit) is checked before anything is written, so bad input leaves no files behind.
Under torchrun (WORLD_SIZE set) each process is one worker; otherwise P workers are simulated.

A run survives signals, races and resumes:
- the run id is a plain name (validate.plain_name), and the run folder is created with a mkdir
  that fails when it exists, so two processes starting the same run id never share a folder;
- SIGINT and SIGTERM stop the run cleanly (topkscope.interrupts): recorder parts and tables
  flushed, manifest `interrupted` with the signal and the command that resumes it, exit
  128 + signal; under torchrun every rank stops after the same step. SIGKILL leaves status
  `running` and the last checkpoint;
- a resume starts a new manifest segment, first setting aside every row and snapshot of the
  steps it redoes (hooks.lifecycle.supersede_from), so plain readers see each step once; a
  complete run is not resumed (unless asked for more steps); `--resume` without a run id takes
  the newest interrupted or failed run of the same config, and a fresh start without a run id
  is refused while an interrupted run of the same config can be resumed;
- a worker group that `torchrun --max-restarts` restarts (comm.elastic.restart_count > 0)
  continues its own run folder (the --run-id's, else the one with this job's
  TORCHELASTIC_RUN_ID) from its last checkpoint, or from step 0 if it had none;
- only a stop the ranks agreed on is `interrupted`; any other error ends the run `failed`
  (a dead peer's collective error included: the launcher then names the worker that died)
  and the traceback is appended to <run>/run.log (train.failures).
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import traceback
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from topkscope import validate
from topkscope.comm.elastic import init_process_group, restart_count
from topkscope.comm.simulated import SimulatedTransport
from topkscope.comm.transport import Transport
from topkscope.hooks.lifecycle import supersede_from
from topkscope.interrupts import RunInterrupted, StopRequests, handling, interruption_signal
from topkscope.io import Table
from topkscope.manifest import DIVERGED_AT, Manifest, describe_optimizer, find_runs, now_iso
from topkscope.schema import EVAL_COLUMNS, OUTER_COLUMNS, OUTER_FILE, TRAIN_COLUMNS, run_identity
from topkscope.train import checkpoint
from topkscope.train.config import (
    ExperimentConfig,
    RunOptions,
    density_schedule_values,
    deviations,
    run_tags,
)
from topkscope.train.failures import append_log
from topkscope.train.resume import (
    check_resumable,
    find_run,
    interruption_message,
    refuse_if_interrupted,
    resume_fields,
)
from topkscope.train.trainer import DivergedError, Trainer

TORCHELASTIC_RUN_ID = "TORCHELASTIC_RUN_ID"  # torchrun's job id: the same in every restart


def under_torchrun() -> bool:
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ


def default_run_id(cfg: ExperimentConfig, base: Path | None = None) -> str:
    """The run folder's name when none is given, one people can read:
    <sparsifier>-rho<density>-p<workers>-s<seed>[-<tag>...] (config.run_tags: the density
    warm-up, a non-default k rule, the outer loop, the quantization, every named deviation),
    e.g. "topk-rho0.001-p2-s0-ds-paper", and "-2", "-3", ... after it when `base` (the
    experiment's folder) already holds that name, so ids stay unique; only letters, digits,
    '.', '_' and '-' (validate.plain_name)."""
    tags = "".join(f"-{t}" for t in run_tags(cfg))
    name = re.sub(r"[^A-Za-z0-9._-]+", "-",
                  f"{cfg.sparsifier}-rho{cfg.density:g}-p{cfg.workers}-s{cfg.seed}{tags}")
    name = validate.plain_name("run id", name.lstrip("."))
    if base is None or not (Path(base) / name).exists():
        return name
    return next(f"{name}-{n}" for n in itertools.count(2) if not (Path(base) / f"{name}-{n}")
                .exists())


def pick_device(cfg: ExperimentConfig) -> torch.device:
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device = 'cuda' but no CUDA device is available; allowed here: auto, cpu")
    use_cuda = cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available())
    if not use_cuda:
        return torch.device("cpu")
    return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))


def make_transport(cfg: ExperimentConfig, device: torch.device) -> tuple[Transport, bool]:
    """(transport, whether this call initialised torch.distributed)."""
    if not under_torchrun():
        return SimulatedTransport(cfg.workers), False
    import torch.distributed as dist

    world = int(os.environ["WORLD_SIZE"])
    if world != cfg.workers:
        raise ValueError(f"workers = {cfg.workers} but torchrun started {world} processes; "
                         f"pass --workers {world} or start {cfg.workers} processes")
    started = False
    if not dist.is_initialized():
        if device.type == "cuda":
            torch.cuda.set_device(device)
        init_process_group("nccl" if device.type == "cuda" else "gloo")  # restarts too
        started = True
    from topkscope.comm.distributed import DistributedTransport

    return DistributedTransport(), started


def load_data(cfg: ExperimentConfig, root: str | None):
    """(train split, evaluation split, substitute name or None)."""
    from topkscope.data import load

    if cfg.dataset == "ptb":
        train, ev = load("ptb", "train", root), load("ptb", "valid", root)
    else:
        train = load(cfg.dataset, "train", root, allow_substitute=cfg.allow_substitute)
        ev = load(cfg.dataset, "test", root, allow_substitute=cfg.allow_substitute)
    return train, ev, getattr(train, "substitute", None)


def build_model(cfg: ExperimentConfig, train) -> torch.nn.Module:
    from topkscope import models

    args = dict(cfg.model_args)
    vocab = getattr(train, "vocab", None)
    if vocab is not None and "vocab_size" in models.overrides_of(cfg.model):
        args.setdefault("vocab_size", len(vocab))
    torch.manual_seed(cfg.seed)  # every process builds the same initial parameters
    return models.create(cfg.model, **args)


def build_task(cfg: ExperimentConfig, model, train, ev, world_size: int, device: torch.device):
    from topkscope.train.tasks import ClassificationTask, LanguageModelTask

    kind = getattr(model, "task", "classification")
    if kind == "language_model":
        if not hasattr(train, "tokens"):
            raise ValueError(f"model {cfg.model!r} is a language model; dataset "
                             f"{cfg.dataset!r} is not a token stream (use ptb)")
        context = getattr(model, "context", None)
        if context is not None and cfg.bptt is not None and cfg.bptt > context:
            raise ValueError(f"bptt = {cfg.bptt} exceeds the context = {context} of model "
                             f"{cfg.model!r}; allowed bptt in [1, {context}] (or raise "
                             f"model_args.context)")
        return LanguageModelTask(cfg, train, ev, world_size, device)
    if not hasattr(train, "batch"):
        raise ValueError(f"model {cfg.model!r} is a classifier; dataset {cfg.dataset!r} "
                         f"holds no images")
    if hasattr(train, "to"):
        train.to(device)
        ev.to(device)
    return ClassificationTask(cfg, train, ev, world_size, device, augment=cfg.augment)


def build_trainer(cfg: ExperimentConfig, transport: Transport, device: torch.device | str = "cpu",
                  data_root: str | None = None) -> tuple[Trainer, str | None]:
    """Data, model (seeded: the same in every process), task and Trainer for cfg.
    Returns (trainer, name of the dataset standing in for cfg.dataset or None)."""
    device = torch.device(device)
    train, ev, substitute = load_data(cfg, data_root)
    model = build_model(cfg, train).to(device)
    task = build_task(cfg, model, train, ev, transport.world_size, device)
    if cfg.outer is not None:
        from topkscope.train.outer import OuterTrainer

        return OuterTrainer(cfg, model, task, transport, device), substitute
    return Trainer(cfg, model, task, transport, device), substitute


def make_recorder(cfg: ExperimentConfig, run_dir: Path, rank: int, manifest, model,
                  resume: bool = False, total_steps: int | None = None):
    """hooks.Recorder from the config's recorder: block (None without one); a resumed run
    appends to the parts it has (redone steps replace their rows when loaded)."""
    if cfg.recorder is None:
        return None
    from topkscope.hooks import Recorder

    kwargs = dict(cfg.recorder)
    attach = kwargs.pop("attach", False)
    kwargs.setdefault("seed", cfg.seed)
    kwargs.setdefault("total_steps", total_steps)
    rec = Recorder(run_dir, rank=rank, manifest=manifest, mode="append" if resume else None,
                   **kwargs)
    if attach:
        rec.attach(model)
    return rec


def _due(every: int | None, step_done: int, spe: int, last: int) -> bool:
    """After `step_done` steps: every N steps, or at each epoch end when N is None; always last."""
    if step_done == last:
        return True
    return step_done % (every if every is not None else spe) == 0


def _distributed(transport: Transport) -> bool:
    """Workers in other processes (torchrun)?"""
    return transport.world_size != len(transport.local_ranks)


def _from_main(transport: Transport, value: Any) -> Any:
    """Rank 0's value on every process (under torchrun: a broadcast), e.g. the run id, so
    every process writes to the same folder."""
    if not _distributed(transport):
        return value
    import torch.distributed as dist

    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


@dataclass
class Prepared:
    """A run checked and loaded (checkpoint included) but not yet written to disk."""

    cfg: ExperimentConfig
    opts: RunOptions
    trainer: Trainer
    run_dir: Path
    substitute: str | None


def prepare(cfg: ExperimentConfig, opts: RunOptions, transport: Transport,
            device: torch.device) -> Prepared:
    """Every check that can reject the input; reads files, writes none."""
    if opts.run_id is not None:
        validate.plain_name("run id", opts.run_id)
    trainer, substitute = build_trainer(cfg, transport, device, opts.data_root)
    restarted = _restarted_run(opts, cfg, transport)
    if restarted is not None:  # torchrun restarted this worker group: continue its run
        opts = replace(opts, run_id=restarted.name, resume=True)
    if opts.resume:
        run_dir = find_run(opts.out_root, cfg, _from_main(transport, opts.run_id),
                           announce=transport.is_main)
        saved = Manifest.load(run_dir)
        check_resumable(saved["config"], cfg, run_dir)
        ckpt = checkpoint.latest(run_dir)
        if ckpt is None and restarted is not None:  # died before its first checkpoint
            return Prepared(cfg, opts, trainer, run_dir, substitute)
        if ckpt is None:
            raise ValueError(f"cannot resume {str(run_dir)!r}: it has no complete checkpoint")
        done = checkpoint.marker_step(ckpt)
        if saved.get("status") == "complete" and done >= trainer.total_steps:
            raise ValueError(f"cannot resume {str(run_dir)!r}: it is complete ({done} of "
                             f"{trainer.total_steps} steps); pass a larger --steps to train it "
                             f"further, or start another run with a new --run-id")
        checkpoint.load(ckpt, trainer)
    else:
        if opts.run_id is None:
            refuse_if_interrupted(opts.out_root, cfg)
        run_id = _from_main(transport, opts.run_id or default_run_id(
            cfg, Path(opts.out_root) / cfg.experiment))
        run_dir = Path(opts.out_root) / cfg.experiment / run_id
        if run_dir.exists():
            raise ValueError(_taken(run_dir))
    return Prepared(cfg, opts, trainer, run_dir, substitute)


def _restarted_run(opts: RunOptions, cfg: ExperimentConfig, transport: Transport
                   ) -> Path | None:
    """The run folder of a worker group that torchrun restarted (`--max-restarts`), or None
    for a first start (comm.elastic.restart_count is 0) or when the first start died before
    it made its folder. The folder is the --run-id's, else the experiment's run whose
    manifest has this torchrun job's TORCHELASTIC_RUN_ID. Rank 0 decides for every rank."""
    if not under_torchrun() or restart_count() == 0:
        return None
    found = None
    if transport.is_main:
        base = Path(opts.out_root) / cfg.experiment
        if opts.run_id is not None:
            found = base / opts.run_id if (base / opts.run_id / "manifest.json").is_file() \
                else None
        else:
            job = os.environ.get(TORCHELASTIC_RUN_ID)
            runs = [r for r in find_runs(base, experiment=cfg.experiment, status=None)
                    if job and r.manifest.get("torchelastic_run_id") == job]
            found = runs[-1].path if runs else None
    found = _from_main(transport, None if found is None else str(found))
    return None if found is None else Path(found)


def _taken(run_dir: Path) -> str:
    return f"run folder {str(run_dir)!r} already exists; pick another --run-id or add --resume"


def claim_run_folder(run_dir: Path) -> None:
    """Create run_dir, or raise ValueError when it exists: mkdir is atomic, so of two processes
    that start the same run id at once exactly one gets the folder."""
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        run_dir.mkdir()
    except FileExistsError:
        raise ValueError(_taken(run_dir)) from None


def preflight(cfg: ExperimentConfig, opts: RunOptions) -> Path:
    """prepare() with simulated workers on the CPU: the checks a torchrun launch would make,
    done once in the launching process. Returns the run folder the workers will use."""
    pick_device(cfg)
    return prepare(cfg, opts, SimulatedTransport(cfg.workers), torch.device("cpu")).run_dir


def run(cfg: ExperimentConfig, opts: RunOptions) -> Path:
    """Train cfg to the end (or from its last checkpoint with opts.resume); return the run folder.

    Raises interrupts.RunInterrupted on SIGINT/SIGTERM (its message names the signal, the step
    and the command that resumes the run) after the run's files are flushed and its manifest
    says `interrupted`.
    """
    if cfg.threads is not None:
        torch.set_num_threads(cfg.threads)
    stop = StopRequests()
    with handling(stop):
        device = pick_device(cfg)
        transport, started = make_transport(cfg, device)
        try:
            try:
                prepared = prepare(cfg, opts, transport, device)
            except RunInterrupted as exc:
                raise RunInterrupted(exc.signum, f"interrupted by {exc.signal_name} before "
                                     f"training started; nothing was written") from None
            return execute(prepared, stop)
        finally:
            if started:
                import torch.distributed as dist

                dist.destroy_process_group()


def _manifest(p: Prepared) -> Manifest:
    """A resumed run's manifest (reopened for a new segment, after setting aside what it will
    redo) or a new run's (in the folder claimed for it). Rank 0 only."""
    cfg, trainer = p.cfg, p.trainer
    if p.opts.resume:
        aside = supersede_from(p.run_dir, trainer.step)
        segment = {"from_step": trainer.step}
        if aside is not None:
            segment["superseded"] = str(aside.relative_to(p.run_dir))
        manifest = Manifest.resume(p.run_dir, **segment)
        manifest.data.update(config=cfg.to_dict(), total_steps=trainer.total_steps)
        return manifest
    claim_run_folder(p.run_dir)
    inner = trainer.inner[0] if cfg.outer is not None else trainer.optimizer
    return Manifest(p.run_dir, experiment=cfg.experiment, run_id=p.run_dir.name,
                    config=cfg.to_dict(), profile=p.opts.profile, seed=cfg.seed,
                    world_size=trainer.transport.world_size,
                    launcher="torchrun" if under_torchrun() else "sim",
                    torchelastic_run_id=os.environ.get(TORCHELASTIC_RUN_ID)
                    if under_torchrun() else None,
                    model=cfg.model, dataset=cfg.dataset, dataset_substitute=p.substitute,
                    sparsifier=cfg.sparsifier, density=cfg.density, selection=cfg.selection,
                    density_schedule=cfg.density_schedule,
                    density_schedule_values=density_schedule_values(cfg), k_rule=cfg.k_rule,
                    deviations=deviations(cfg),
                    clip_at=cfg.clip_at if cfg.grad_clip is not None else None,
                    lr_in_residual=cfg.lr_in_residual, error=None,
                    optimizer={**describe_optimizer(inner), "lr": cfg.lr,
                               "lr_schedule": cfg.lr_schedule},
                    quantize=cfg.quantize, outer=_outer_fields(cfg, trainer),
                    num_parameters=trainer.layout.d, steps_per_epoch=trainer.steps_per_epoch,
                    total_steps=trainer.total_steps, device=str(trainer.device),
                    threads=torch.get_num_threads())


def _outer_fields(cfg: ExperimentConfig, trainer: Trainer) -> dict | None:
    """The manifest's `outer` field (train.outer.describe), None for per-step training."""
    if cfg.outer is None:
        return None
    from topkscope.train.outer import describe

    return describe(cfg, trainer)


def execute(p: Prepared, stop: StopRequests | None = None) -> Path:
    """Write the manifest, train, log, checkpoint; the manifest ends complete, failed (a
    divergence with `diverged_at_step`; the rows and evaluations before it are flushed), or
    interrupted (stop: the run's signal handler; RunInterrupted is raised after the files are
    flushed, with a message naming the resume command)."""
    transport, trainer = p.trainer.transport, p.trainer
    if stop is not None and _distributed(transport):
        stop.raise_now = False  # ranks leave the collective steps together (StopRequests.agreed)
    transport.barrier()  # every process has checked the run folder before anyone creates it
    manifest, refused = None, None
    if transport.is_main:
        try:
            manifest = _manifest(p)
            manifest.write()
        except (ValueError, OSError) as exc:  # e.g. another process took the run folder first
            refused = exc
    message = _from_main(transport, None if refused is None else str(refused))
    if refused is not None:
        raise refused
    if message is not None:  # every rank stops with rank 0's reason
        raise ValueError(message)
    rank = transport.local_ranks[0] if len(transport.local_ranks) == 1 else 0
    try:
        trainer.recorder = make_recorder(p.cfg, p.run_dir, rank, manifest, trainer.model,
                                         p.opts.resume, trainer.total_steps)
    except BaseException:
        if manifest is not None and not p.opts.resume:
            shutil.rmtree(p.run_dir, ignore_errors=True)  # bad recorder block: leave nothing
        raise
    try:
        _loop(p.cfg, trainer, p.run_dir, manifest, not p.opts.resume, p.opts.progress, stop)
    except BaseException as exc:
        # Only a stop the ranks agreed on (StopRequests) is an interruption. An error after a
        # signal arrived is still a failure: under torchrun a worker that died makes its
        # peers' collectives fail, and torchrun then sends them SIGTERM; the job was not
        # stopped, a worker died (the launcher names which: topkscope.train.launcher).
        signame = interruption_signal(exc)
        if signame is None:
            if manifest is not None:  # a divergence is a result: the step is recorded
                done = ({DIVERGED_AT: exc.step, "steps_done": exc.step}
                        if isinstance(exc, DivergedError) else {"steps_done": trainer.step})
                manifest.fail(exc, **done)
            if not isinstance(exc, DivergedError):
                exc.run_log = append_log(p.run_dir, f"rank {rank}: {now_iso()}\n"
                                         f"{traceback.format_exc()}")
            raise
        raise _interrupted(p, manifest, signame) from exc
    return p.run_dir


def _interrupted(p: Prepared, manifest: Manifest | None, signame: str) -> RunInterrupted:
    """Mark the manifest interrupted (rank 0) and make the exception that reports it."""
    fields: dict[str, Any] = {"steps_done": p.trainer.step,
                              **resume_fields(p.opts, p.run_dir)}
    if manifest is not None:
        manifest.interrupt(signame, **fields)
    return RunInterrupted(signal.Signals[signame],
                          interruption_message(p.run_dir, {"signal": signame, **fields}))


def _loop(cfg: ExperimentConfig, trainer: Trainer, run_dir: Path, manifest: Manifest | None,
          fresh: bool, progress: bool, stop: StopRequests | None = None) -> None:
    from topkscope import progress as bars

    main = trainer.transport.is_main
    identity = run_identity(run_dir, manifest.data if manifest is not None else None)
    train_log = Table(run_dir / "train.parquet", TRAIN_COLUMNS, identity)
    eval_log = Table(run_dir / "eval.parquet", EVAL_COLUMNS, identity)
    outer_log = Table(run_dir / OUTER_FILE, OUTER_COLUMNS, identity) \
        if cfg.outer is not None else None
    logs = [t for t in (train_log, eval_log, outer_log) if t is not None]
    if not fresh and main:
        for table in logs:
            table.reload_before(trainer.step)
    bar = bars.bar(total=trainer.total_steps, initial=trainer.step, desc=cfg.experiment,
                   unit="step", enabled=main and progress)
    rec = trainer.recorder

    def flush() -> None:
        if main:
            for table in logs:
                table.flush()

    try:
        _steps(cfg, trainer, run_dir, train_log, eval_log, bar, flush, stop, outer_log)
    except BaseException:
        bar.close()
        if rec is not None:  # keep what was measured up to the failure, if that still works
            try:
                rec.close()
            except Exception:  # noqa: BLE001 - the original error is the one to report
                pass
        flush()
        raise
    bar.close()
    if rec is not None:
        rec.close()
    flush()
    trainer.transport.barrier()
    if main:
        manifest.complete(steps_done=trainer.step)


def _steps(cfg: ExperimentConfig, trainer: Trainer, run_dir: Path, train_log: Table,
           eval_log: Table, bar, flush, stop: StopRequests | None = None,
           outer_log: Table | None = None) -> None:
    main, rec = trainer.transport.is_main, trainer.recorder
    last, spe = trainer.total_steps, trainer.steps_per_epoch
    agree = stop is not None and not stop.raise_now
    while trainer.step < last:
        if agree:  # one small all-reduce: every rank stops before the same step
            stop.agreed(lambda mine: trainer.transport.sum_scalars([mine]))
        row = trainer.train_step()
        done = trainer.step
        if main:
            train_log.append(row)
            if outer_log is not None and trainer.outer_row is not None:
                outer_log.append(trainer.outer_row)
            bar.update(1)
            if done % 10 == 0 or done == last:
                bar.set_postfix(loss=f"{row['loss']:.4f}", lr=f"{row['lr']:.3g}")
        if _due(cfg.eval_every_steps, done, spe, last) and main:
            eval_log.append(trainer.evaluate())
            flush()
        if _due(cfg.checkpoint_every_steps, done, spe, last):
            if rec is not None:
                rec.flush()
            flush()
            checkpoint.save(run_dir, trainer, cfg.keep_checkpoints)
        elif done % cfg.flush_every_steps == 0:
            flush()
