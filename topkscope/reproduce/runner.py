"""Make sure one training run exists: skip it when complete results exist, resume it when a
checkpoint was left behind, otherwise start it — always through `topkscope run` in a child
process (its progress bar shows; a crash in one run does not take the driver down).

Complete results are found by manifest content (topkscope.manifest.find_runs), never by
folder name: a run *covers* a plan variant when its manifest has the variant's experiment,
profile, sparsifier, seed, density and condition (covering_runs). Its settings are then
compared with the plan's resolved config (the keys that change the numbers): equal, it is
used as the plan's own run wherever it lies (a hand run of `topkscope run` included);
different (e.g. other steps or workers), it is named with what differs, and only drawn
from when nothing else covers the variant and the driver may not train (`--no-run`).

A run's folder name is derived from what it computes, so the same config finds the same folder:

    <profile>-<sparsifier>[-<tags>][-rho<density>][-s<seed>]-<sha1(resolved config)[:10]>

where the tags name the density warm-up, a non-default k rule and every deviation of the run
(train.config.run_tags), the density and seed are named when the plan sets them, and the resolved config
excludes keys that do not change the numbers (threads, device, launcher, checkpoint and flush
cadence).

Run many training runs, `parallel` at a time, with a heartbeat while they train.

Each run is a child process (`topkscope run`), so runs on a 2-core CPU with one thread each can
go two at a time. With more than one at a time the children's progress bars would overwrite
each other, so they are silenced and the driver prints every `heartbeat_s` seconds how far
each run has got (rows of its train.parquet against the manifest's total_steps).

The children run through the driver's interrupts.ChildProcesses: a SIGINT or SIGTERM to the
driver is forwarded to the runs in flight, which stop cleanly (manifest `interrupted`), no
further run starts, and the next invocation resumes them.

A run whose training diverges (train.trainer.DivergedError: manifest `failed` with
`diverged_at_step`) is a result, like a complete run: it is never resumed or rerun (it would
diverge again) and is handed to the drawing and the claims; any other failure is a failure of
the driver, and its run folder is still handed on.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from topkscope.interrupts import SIGNALS, ChildProcesses, RunInterrupted, signal_name
from topkscope.manifest import Manifest, condition_of, diverged_at, find_runs

INTERRUPTED_EXITS = tuple(128 + s for s in SIGNALS)  # `topkscope run` stopped by SIGINT/SIGTERM
# keys of the resolved config that do not change what a run computes
NOT_HASHED = ("threads", "device", "launcher", "checkpoint_every_steps", "keep_checkpoints",
              "flush_every_steps", "description")


def computed_config(config: dict) -> dict:
    """The keys of a resolved config that change what a run computes, as JSON would store
    them (so a config and a manifest's copy of it compare equal)."""
    keep = {k: v for k, v in config.items() if k not in NOT_HASHED}
    return json.loads(json.dumps(keep, sort_keys=True, default=str))


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One run to ensure: the config file, profile, sparsifier override, and where it goes."""

    experiment: str
    config_path: Path
    profile: str
    sparsifier: str | None
    results_root: Path
    data_root: Path | None = None
    launcher: str | None = None  # sim | torchrun; None: as the config says
    seed: int | None = None      # the rest: the plan's variant (None: as the config says)
    density_schedule: str | None = None
    density: float | None = None
    recorded: bool | None = None  # False: the config's recorder switched off
    settings: tuple[tuple[str, str], ...] = ()  # more --set overrides (plan.Variant.settings)

    @classmethod
    def of(cls, experiment: str, config_path: Path, profile: str, variant, results_root: Path,
           data_root: Path | None = None, launcher: str | None = None) -> RunSpec:
        """The spec of one plan.Variant of an experiment."""
        return cls(experiment, config_path, profile, variant.sparsifier, results_root, data_root,
                   launcher, variant.seed, variant.density_schedule, variant.density,
                   variant.recorded, variant.settings)

    def overrides(self) -> dict:
        """The config overrides of the variant this spec runs (plan.Variant.overrides)."""
        from topkscope.reproduce.plan import Variant

        return Variant(self.sparsifier, self.seed, self.density_schedule, self.density,
                       self.recorded, settings=self.settings).overrides()

    def resolved(self):
        from topkscope.train.config import load_config

        cfg, _ = load_config(self.config_path, self.profile, self.overrides())
        return cfg

    def run_id(self) -> str:
        cfg = self.resolved()
        keep = computed_config(cfg.to_dict())
        digest = hashlib.sha1(json.dumps(keep, sort_keys=True, default=str).encode()).hexdigest()
        from topkscope.train.config import run_tags

        parts = [self.profile, cfg.sparsifier, *run_tags(cfg)]
        if self.density is not None:
            parts.append(f"rho{cfg.density:g}")
        if self.seed is not None:
            parts.append(f"s{cfg.seed}")
        return "-".join([*parts, digest[:10]])

    def run_dir(self) -> Path:
        return Path(self.results_root) / self.resolved().experiment / self.run_id()


@dataclasses.dataclass(frozen=True)
class Covering:
    """A finished run that covers a plan variant — complete, or failed by a divergence at step
    `diverged_at` (a result, never rerun) — and how its settings differ from the plan's
    resolved config: ("steps=10 (plan: unset)", ...); empty for the plan's own settings."""

    path: Path
    differences: tuple[str, ...] = ()
    diverged_at: int | None = None

    def describe(self) -> str:
        return ", ".join(self.differences) if self.differences else "the plan's settings"


def _shown(value) -> str:
    return "unset" if value is None else json.dumps(value, sort_keys=True)


def config_differences(saved: dict, plan: dict) -> tuple[str, ...]:
    """'key=saved (plan: planned)' for every computed key that differs (mappings such as
    the recorder block compared key by key: 'recorder.schedule=...')."""
    saved, plan = computed_config(saved), computed_config(plan)
    out = []
    for key in sorted(set(saved) | set(plan)):
        mine, theirs = saved.get(key), plan.get(key)
        if mine == theirs:
            continue
        if isinstance(mine, dict) and isinstance(theirs, dict):
            out += [f"{key}.{k}={_shown(mine.get(k))} (plan: {_shown(theirs.get(k))})"
                    for k in sorted(set(mine) | set(theirs)) if mine.get(k) != theirs.get(k)]
        else:
            out.append(f"{key}={_shown(mine)} (plan: {_shown(theirs)})")
    return tuple(out)


def variant_fields(spec: RunSpec) -> dict:
    """What a covering run's manifest must say: find_runs' fields of the resolved variant."""
    from topkscope.train.config import deviations

    cfg = spec.resolved()
    condition = condition_of({"density_schedule": cfg.density_schedule, "k_rule": cfg.k_rule,
                              "deviations": deviations(cfg), "outer": cfg.outer,
                              "quantize": cfg.quantize})
    return dict(experiment=cfg.experiment, profile=spec.profile, sparsifier=cfg.sparsifier,
                seed=cfg.seed, density=cfg.density, condition=condition)


def covering_runs(spec: RunSpec) -> list[Covering]:
    """The finished runs under spec.results_root that cover spec's variant (variant_fields,
    by manifest content): complete ones and diverged ones (manifest.diverged_at), each with
    its config_differences from the plan. Order: the plan's settings first (spec.run_dir()
    first among them), then by newest end time."""
    plan = spec.resolved().to_dict()
    own = Path(spec.run_dir()).resolve()
    runs = [r for r in find_runs(spec.results_root, status=("complete", "failed"),
                                 **variant_fields(spec))
            if r.manifest.get("status") == "complete" or diverged_at(r.manifest) is not None]
    found = [Covering(r.path, config_differences(r.manifest.get("config") or {}, plan),
                      diverged_at(r.manifest))
             for r in sorted(runs, key=lambda r: str(r.manifest.get("end_time") or ""),
                             reverse=True)]
    return sorted(found, key=lambda c: (bool(c.differences), c.path.resolve() != own))


def pick_covering(label: str, found: Sequence[Covering]) -> Covering | None:
    """The run to draw a variant from when the driver may not train: the first with the plan's
    settings, else the only covering one (whatever differs, named); None when nothing covers
    it. ValueError (naming them) when several runs cover it, none with the plan's settings."""
    if not found or not found[0].differences:
        return found[0] if found else None
    if len(found) == 1:
        return found[0]
    listed = "; ".join(f"{c.path} ({c.describe()})" for c in found)
    raise ValueError(f"{label}: {len(found)} finished runs cover it, none with the plan's "
                     f"settings: {listed}; keep one of them, or drop --no-run to train the "
                     "plan's own")


def _manifest_of(run_dir: Path) -> dict | None:
    try:
        return Manifest.load(run_dir)
    except (FileNotFoundError, ValueError):
        return None


def status_of(run_dir: Path) -> str | None:
    """'complete' | 'running' | 'failed' | 'interrupted' (manifest.STATUSES) from the
    manifest; None when there is no run folder or its manifest cannot be read."""
    manifest = _manifest_of(run_dir)
    return None if manifest is None else manifest.get("status")


def diverged_step(run_dir: Path) -> int | None:
    """The step at which the run in run_dir diverged (manifest.diverged_at), else None."""
    manifest = _manifest_of(run_dir)
    return None if manifest is None else diverged_at(manifest)


class RunFailed(RuntimeError):
    """A run that failed (other than by diverging): a failure of the driver. `run_dir`: its
    folder when it left a manifest (its rows are still handed to the claims), else None."""

    def __init__(self, message: str, run_dir: Path | None = None) -> None:
        super().__init__(message)
        self.run_dir = run_dir


def has_checkpoint(run_dir: Path) -> bool:
    return any(Path(run_dir).glob("checkpoints/*/COMPLETE"))


def command(spec: RunSpec, resume: bool, progress: bool = True) -> list[str]:
    """The `topkscope run` command line that produces spec's run folder."""
    argv = [sys.executable, "-m", "topkscope.cli", "run", str(spec.config_path),
            "--profile", spec.profile, "--results", str(spec.results_root), "--run-id", spec.run_id()]
    if spec.sparsifier is not None:
        argv += ["--sparsifier", spec.sparsifier]
    if spec.seed is not None:
        argv += ["--seed", str(spec.seed)]
    if spec.density is not None:
        argv += ["--density", repr(float(spec.density))]
    if spec.density_schedule is not None:
        argv += ["--set", f"density_schedule={spec.density_schedule}"]
    for key, text in spec.settings:
        argv += ["--set", f"{key}={text}"]
    if spec.recorded is False:
        argv += ["--set", "recorder=null"]
    if spec.data_root is not None:
        argv += ["--data", str(spec.data_root)]
    if spec.launcher is not None:
        argv += ["--launcher", spec.launcher]
    if resume:
        argv.append("--resume")
    if not progress:
        argv.append("--no-progress")
    return argv


def set_aside(run_dir: Path) -> Path:
    """Rename an unusable earlier attempt (no checkpoint to resume) out of the way; never delete."""
    n = 1
    while (target := run_dir.with_name(f"{run_dir.name}.attempt{n}")).exists():
        n += 1
    run_dir.rename(target)
    return target


InProcess = Callable[[Sequence[str]], int]  # the `topkscope` entry point: argv -> exit code


def ensure_run(spec: RunSpec, log=print, in_process: InProcess | None = None,
               progress: bool = True, children: ChildProcesses | None = None
               ) -> tuple[Path, str]:
    """Run spec unless finished results exist. Returns (run folder, action taken).

    action: 'skipped' (complete results with the plan's settings found: the driver's own
    folder, or another covering run, e.g. a hand run, which is then the folder returned),
    'diverged' (the run's training diverged, now or in an earlier invocation: a result — the
    manifest says `failed` with `diverged_at_step`, its rows and evaluations up to then are
    kept — never resumed or rerun, since it would diverge again), 'resumed' (a run left
    running, interrupted or failed otherwise with a checkpoint), 'ran'. The run starts in a
    child process (through `children`, the driver's signal forwarding, when given), or, given
    in_process (the `topkscope` entry point, topkscope.cli.main, handed in by the caller), in
    this process (no interpreter start-up; for tests). Raises RunFailed with the command when
    the run fails otherwise, and interrupts.RunInterrupted when it was interrupted
    (SIGINT/SIGTERM: the plan stops; the next invocation resumes it).
    """
    run_dir = spec.run_dir()
    state = status_of(run_dir)
    if state == "complete":
        return run_dir, "skipped"
    if (step := diverged_step(run_dir)) is not None:
        log(f"  diverged at step {step} in an earlier invocation: a result, not rerun")
        return run_dir, "diverged"
    same = [c for c in covering_runs(spec) if not c.differences]
    if same:
        what = ("a complete run" if same[0].diverged_at is None
                else f"a run that diverged at step {same[0].diverged_at}")
        log(f"  covered by {same[0].path} ({what} with the plan's settings)")
        return same[0].path, "skipped" if same[0].diverged_at is None else "diverged"
    resume = run_dir.exists() and has_checkpoint(run_dir)
    if run_dir.exists() and not resume:
        old = set_aside(run_dir)
        log(f"  earlier attempt without a checkpoint moved to {old}")
    argv = command(spec, resume, progress)
    log("  $ topkscope " + shlex.join(argv[3:]))
    if in_process is not None:
        code = in_process(argv[3:])
    else:
        code = (children or ChildProcesses()).run(argv)
    state = status_of(run_dir)
    if state == "interrupted" or code in INTERRUPTED_EXITS:
        signum = code - 128 if code in INTERRUPTED_EXITS else signal.SIGINT
        raise RunInterrupted(signum, f"run {run_dir} interrupted (exit {code}); the next "
                             f"`topkscope figures` resumes it")
    if (step := diverged_step(run_dir)) is not None:
        log(f"  training diverged at step {step}: kept as a result (manifest `failed`), "
            "never rerun")
        return run_dir, "diverged"
    if code != 0 or state != "complete":
        raise RunFailed(f"run failed (exit {code}): topkscope {' '.join(argv[3:])}",
                        run_dir if state is not None else None)
    return run_dir, "resumed" if resume else "ran"


def steps_done(run_dir: Path) -> tuple[int, int | None]:
    """(steps logged so far, total steps) of a run in progress; (0, None) before it starts."""
    total = None
    try:
        total = Manifest.load(run_dir).get("total_steps")
    except (OSError, ValueError):
        pass
    try:
        import pyarrow.parquet as pq

        done = pq.read_metadata(run_dir / "train.parquet").num_rows
    except (OSError, ValueError):
        done = 0
    return done, total


class Heartbeat:
    """Logs the progress of the runs in flight every `every` seconds (in its own thread)."""

    def __init__(self, log: Callable[[str], None], every: float | None) -> None:
        self.log, self.every = log, every
        self.flying: dict[str, tuple[Path, float]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    def __enter__(self) -> Heartbeat:
        if self.every is not None:  # None: silent (a single run shows its own progress bar)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def started(self, label: str, run_dir: Path) -> None:
        with self._lock:
            self.flying[label] = (run_dir, time.perf_counter())

    def finished(self, label: str) -> None:
        with self._lock:
            self.flying.pop(label, None)

    def _beat(self) -> None:
        while not self._stop.wait(self.every):
            with self._lock:
                flying = dict(self.flying)
            for label, (run_dir, t0) in flying.items():
                done, total = steps_done(run_dir)
                self.log(f"  … {label}: {done}/{total or '?'} steps logged, "
                         f"{time.perf_counter() - t0:.0f} s")


def run_all(specs: Sequence[tuple[str, RunSpec]], *, parallel: int, in_process: InProcess | None,
            log: Callable[[str], None], record: Callable[[str, float, str], None],
            heartbeat_s: float = 30.0, children: ChildProcesses | None = None,
            progress: bool = True) -> dict[str, Path | Exception]:
    """ensure_run for every (label, spec), `parallel` at a time. Returns label -> folder or
    error (a diverged run is a folder: record() gets the action 'diverged').

    record(label, seconds, action) is called as each run ends. In-process runs (in_process given)
    share this interpreter's global state, so they always go one at a time. An interrupted run
    (interrupts.RunInterrupted), or a signal that `children` (the driver's SIGINT/SIGTERM
    handler, which forwards it to the runs in flight) received, stops the plan: runs not yet
    started are not started, and once the runs in flight have stopped cleanly one
    RunInterrupted is raised, naming them and saying that the next invocation resumes them.
    """
    if parallel < 1:
        raise ValueError(f"parallel = {parallel} must be at least 1")
    parallel = parallel if in_process is None else 1
    out: dict[str, Path | Exception] = {}
    stopped: dict[str, RunInterrupted] = {}  # runs that were interrupted, by label
    halt = threading.Event()  # the plan stops: no run starts

    def signalled() -> int | None:
        return None if children is None else children.received

    with Heartbeat(log, heartbeat_s if parallel > 1 else None) as beat:
        def one(label: str, spec: RunSpec) -> None:
            if halt.is_set() or signalled() is not None:
                return
            t = time.perf_counter()
            beat.started(label, spec.run_dir())
            try:
                run_dir, action = ensure_run(spec, log=log, in_process=in_process,
                                             progress=progress and parallel == 1,
                                             children=children)
                out[label] = run_dir
                record(label, time.perf_counter() - t, action)
            except (RuntimeError, ValueError, OSError) as exc:
                out[label] = exc
                log(f"  FAILED {label}: {exc}")
            except RunInterrupted as exc:
                halt.set()
                stopped[label] = exc
            except BaseException:  # e.g. a KeyboardInterrupt raised in this thread
                halt.set()
                raise
            finally:
                beat.finished(label)

        signum = None
        try:
            with ThreadPoolExecutor(max_workers=parallel) as pool:
                for future in [pool.submit(one, label, spec) for label, spec in specs]:
                    future.result()
        except RunInterrupted as exc:  # the handler's, with no run in flight at that moment
            halt.set()
            signum = exc.signum
    signum = signum or signalled() or next((e.signum for e in stopped.values()), None)
    if signum is not None:
        in_plan_order = [label for label, _ in specs if label in stopped]
        raise RunInterrupted(signum, interruption_summary(signum, in_plan_order))
    return out


def interruption_summary(signum: int, stopped: Sequence[str]) -> str:
    """The one line the figures driver ends with after SIGINT/SIGTERM: the runs it stopped
    and that the next invocation resumes them."""
    if not stopped:
        return (f"interrupted by {signal_name(signum)} with no run in flight; the next "
                "`topkscope figures` continues the plan")
    return (f"interrupted by {signal_name(signum)}: {len(stopped)} run(s) stopped cleanly "
            f"({'; '.join(stopped)}); the next `topkscope figures` resumes them")
