"""`topkscope run CONFIG`: train one experiment with TopK-SGD (simulated or torchrun workers)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from topkscope.commands import CommandError, deprecated

HELP = "train an experiment config with TopK-SGD on simulated or torchrun workers"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", type=Path, help="experiment YAML (e.g. experiments/fnn3-mnist.yaml)")
    p.add_argument("--profile", help="profile of the config to apply (default: quick if defined)")
    p.add_argument("--workers", type=int, help="number of workers P (overrides the config)")
    p.add_argument("--launcher", choices=("sim", "torchrun"),
                   help="sim: P workers in this process; torchrun: one process per worker")
    p.add_argument("--sparsifier", help="sparsifier name (see topkscope.sparsify.available())")
    p.add_argument("--density", type=float, help="target density rho = k/d, in (0, 1]")
    p.add_argument("--steps", type=int, help="total optimizer steps (overrides epochs)")
    p.add_argument("--seed", type=int, help="random seed")
    p.add_argument("--set", dest="assignments", action="append", default=[], metavar="KEY=VALUE",
                   help="override any config key (value read as YAML); repeatable")
    p.add_argument("--results", type=Path, default=Path("results"), metavar="DIR",
                   help="results root; the run goes to DIR/<experiment>/<run_id>/ (default: "
                        "results)")
    deprecated(p, "--out", "--results", type=Path)
    p.add_argument("--run-id", help="name of the run folder (default: <sparsifier>-rho<density>"
                        "-p<workers>-s<seed>, then the warm-up and other settings; -2, -3, ... "
                        "after it when taken)")
    p.add_argument("--resume", action="store_true",
                   help="continue --run-id (default: the newest run with a checkpoint)")
    p.add_argument("--data", metavar="DIR", help="dataset root (default: $TOPKSCOPE_DATA or "
                   "./data)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def overrides_from(args: argparse.Namespace) -> dict:
    from topkscope.train.config import parse_assignment

    out = dict(parse_assignment(a) for a in args.assignments)
    for key in ("workers", "launcher", "sparsifier", "density", "steps", "seed"):
        value = getattr(args, key)
        if value is not None:
            out[key] = value
    if "WORLD_SIZE" in os.environ and "RANK" in os.environ:  # we are a torchrun worker
        out.setdefault("workers", int(os.environ["WORLD_SIZE"]))
        out["launcher"] = "torchrun"
    return out


def run_arguments(args: argparse.Namespace, workers: int | None = None,
                  launcher: str | None = None) -> list[str]:
    """`run CONFIG` with the options that make this run (not --run-id, --resume): what a
    resume or a torchrun relaunch repeats. workers, launcher: the ones to name (default: the
    effective ones, as given or, in a torchrun worker, its world size and torchrun)."""
    given = overrides_from(args)
    workers = given.get("workers") if workers is None else workers
    launcher = given.get("launcher") if launcher is None else launcher
    argv = ["run", str(args.config), "--results", str(args.results)]
    argv += ["--workers", str(workers)] * (workers is not None)
    argv += ["--launcher", launcher] * (launcher is not None)
    for flag in ("profile", "sparsifier", "density", "steps", "seed", "data"):
        value = getattr(args, flag)
        if value is not None:
            argv += [f"--{flag}", str(value)]
    for assignment in args.assignments:
        argv += ["--set", assignment]
    return argv + ["--no-progress"] * args.no_progress


def torchrun_command(args: argparse.Namespace, workers: int, run_id: str) -> list[str]:
    """This same command, re-run as `workers` torchrun processes on this machine."""
    argv = [*run_arguments(args, workers, "torchrun"), "--run-id", run_id]
    argv += ["--resume"] * args.resume
    return [sys.executable, "-m", "topkscope.train.launcher", "--standalone", "--nnodes", "1",
            "--nproc-per-node", str(workers), "-m", "topkscope.cli", *argv]


def record_worker_failure(run_dir: Path, opts, failures: list[dict]) -> str:
    """The launcher's word on workers that died: the manifest's latest segment ends `failed`
    with which rank and how (`worker_failures`; the error names it), unless the run had
    already completed; returns the one line to print."""
    from topkscope.manifest import Manifest
    from topkscope.train.failures import RUN_LOG, failure_message
    from topkscope.train.resume import resume_fields

    message = failure_message(failures)
    try:
        manifest = Manifest.reopen(run_dir)
    except (OSError, ValueError):
        return f"{message} before the run folder {run_dir} was written"
    if manifest.data.get("status") != "complete":
        fields = resume_fields(opts, run_dir)
        manifest.fail(message, worker_failures=failures, **fields)
        again = f"; resume with: {fields['resume_command']}" if fields else ""
        return f"{message}; run {run_dir} failed (log: {run_dir / RUN_LOG}){again}"
    return f"{message} after the run completed ({run_dir})"


def main(args: argparse.Namespace) -> int:
    from topkscope.data import DataError
    from topkscope.interrupts import RunInterrupted, run_child
    from topkscope.train.config import load_config
    from topkscope.train.failures import RUN_DIR_ENV, worker_failures
    from topkscope.train.resume import interruption_report
    from topkscope.train.run import RunOptions, preflight, run, under_torchrun
    from topkscope.train.trainer import DivergedError
    from topkscope.validate import output_folder

    try:
        output_folder("--results", args.results)
        cfg, profile = load_config(args.config, args.profile, overrides_from(args))
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    opts = RunOptions(out_root=args.results, run_id=args.run_id, resume=args.resume,
                      profile=profile, data_root=args.data, progress=not args.no_progress,
                      command=run_arguments(args))
    try:
        if cfg.launcher == "torchrun" and not under_torchrun():
            run_dir = preflight(cfg, opts)
            env = {**os.environ, RUN_DIR_ENV: str(run_dir)}
            env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // cfg.workers)))
            code, signum = run_child(torchrun_command(args, cfg.workers, run_dir.name), env)
            if signum is not None and code != 0:  # forwarded; the workers stopped cleanly
                print(f"topkscope run: {interruption_report(run_dir, opts, signum)}",
                      file=sys.stderr)
                return 128 + signum
            if code != 0:
                failures = worker_failures(run_dir)
                if failures and all(f["exitcode"] == 2 for f in failures):
                    return 2  # bad input or a divergence: the workers said it in one line
                raise CommandError(record_worker_failure(run_dir, opts, failures), code=1)
        else:
            run_dir = run(cfg, opts)
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        log = getattr(exc, "run_log", None)  # a run that failed (train.run.execute wrote it)
        if log is not None:  # one line, the traceback in the run folder's log
            if RUN_DIR_ENV in os.environ or os.environ.get("RANK", "0") != "0":
                return 1  # the launcher, or rank 0, speaks for this worker
            raise CommandError(f"{type(exc).__name__}: {first} (traceback: {log})",
                               code=1) from None
        if isinstance(exc, (ValueError, DataError, OSError, DivergedError)):  # bad input
            raise CommandError(first) from None
        raise
    except RunInterrupted as exc:  # files flushed, manifest `interrupted`
        # torchrun: rank 0 speaks for the workers, and the launcher (if any) for rank 0
        if os.environ.get("RANK", "0") == "0" and RUN_DIR_ENV not in os.environ:
            print(f"topkscope run: {exc}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:  # before the run installed its own handling: nothing written
        print("topkscope run: interrupted before training started; nothing was written",
              file=sys.stderr)
        return 130
    if not under_torchrun():  # the launching process reports, not each worker
        print(f"topkscope run: done: {run_dir}")
    return 0
