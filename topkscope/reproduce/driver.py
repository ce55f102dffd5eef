"""`topkscope figures`: from nothing to every figure, the claims table and the index.

    1. bench  benchmarks/selection.py unless results/bench/selection.csv exists (alone)
    2. run    every experiment of the plan under the profile, skipping variants a finished
              run with the plan's settings covers (found by manifest content, wherever it
              lies: runner.covering_runs), `parallel` runs at a time (two on a 2-core CPU in
              the CPU profiles, quick and standard)
    3. draw   analyze each run's snapshots and draw its figures into <results>/figures/
    4. claims <results>/claims.csv + claims.md (topkscope.claims.build, margins from
              Options.margin / perplexity_margin), with the predicted scaling rows;
              <results>/scaling.csv and its figures (topkscope.perf.report);
              <results>/time_to_accuracy.csv, its figure and claims rows from the seeded
              convergence runs (topkscope.perf.time_to_accuracy: the same runs and margins as
              the convergence claims). The selection times are Options.selection_csv, else
              the first selection CSV measured on the compute's device
              (topkscope.perf.inputs.selection_table). A convergence variant's failed run
              (diverged or not) is among the runs drawn, so the claims count it as a failed
              seed
    5. tables <results>/tables/*.csv + *.tex: claims and key numbers for papers (paper_tables)
    6. notebooks  every notebook executed on the runs just made: <results>/notebooks/*.ipynb
              with its figures inline, plus a static .html of each (notebook_runs)
    7. index  <results>/figures/index.md with every figure and caption (the scaling figures
              under "predicted scaling"); timing.csv

A user's own experiment under the results root (runs of the DDP hook or of a Recorder in a
loop of their own, of an experiment the plan does not have: topkscope.reproduce.own_runs) is
drawn too, never run, with the figures its runs hold the data for; `only` may name it. Its
runs go to the claims; the tables and notebooks stay the plan's.

--no-run (Options.run False) runs nothing, benchmarks included: it draws from what exists. A
variant that only a run with other settings covers (e.g. a hand run with fewer steps) is drawn
from that run, named with what differs in the log, in the index notes and in the claims'
`differs_from_plan` column.

Each phase prints what it does and how long it took; a failing experiment is reported and the
others still run, and the command exits non-zero at the end. A run whose training diverged is a
result, not a failure: it is drawn and handed to the claims (manifest `failed` with
`diverged_at_step`), never rerun; a run that failed otherwise is a failure, and is drawn and
handed to the claims all the same. SIGINT/SIGTERM are forwarded to the runs in flight, which
stop cleanly; the command then exits with 128 + the signal and one line saying that the next
invocation resumes them.

Benchmark experiment configs (e.g. experiments/selection-speed.yaml), validated.

    experiment: <name>            benchmark: <script in benchmarks/, without .py>
    output: <file under results/bench/>    args: [<arguments for every profile>]
    description: <text>           profiles: {quick: {args: [...]}, full: {args: [...]}}

The command is `python benchmarks/<benchmark>.py <args> <profile args> --out <results>/bench/<output>`.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import yaml

from topkscope import validate
from topkscope.analysis.criteria import ACCURACY_MARGIN_POINTS, PERPLEXITY_MARGIN_PCT
from topkscope.analysis.runs import load
from topkscope.claims import what_is_missing
from topkscope.interrupts import ChildProcesses, handling
from topkscope.io import write_bytes_atomic
from topkscope.reproduce import own_runs, plan
from topkscope.reproduce.runner import (
    Covering,
    RunFailed,
    RunSpec,
    covering_runs,
    diverged_step,
    pick_covering,
    run_all,
    status_of,
    variant_fields,
)

if TYPE_CHECKING:
    from topkscope.publish.figures import FigureEntry


@dataclasses.dataclass
class Options:
    profile: str = "quick"
    results_root: Path = Path("results")
    experiments_dir: Path = Path("experiments")
    benchmarks_dir: Path = Path("benchmarks")
    data_root: Path | None = None
    only: Sequence[str] | None = None
    run: bool = True            # False: draw from existing complete runs only
    # None: each run in a child process; the `topkscope` entry point (cli.main): in this process
    in_process: Callable[[Sequence[str]], int] | None = None
    launcher: str | None = None  # passed to `topkscope run --launcher` (None: the config's)
    dry_run: bool = False       # print each run's folder and command, run and draw nothing
    parallel: int | None = None  # training runs at a time (None: default_parallel(profile))
    bench: bool = True          # False: never start the benchmark
    notebooks: bool = True      # execute every notebook into <results>/notebooks/ (+ HTML)
    tables: bool = True         # CSV + LaTeX tables for papers into <results>/tables/
    jobs: Sequence[plan.TrainingJob | plan.BenchmarkJob] | None = None  # None: plan.JOBS
    selection_csv: Path | None = None  # the predictions' selection times (None: found)
    # the claims' non-inferiority margins (convergence claims and time-to-accuracy targets)
    margin: float = ACCURACY_MARGIN_POINTS
    perplexity_margin: float = PERPLEXITY_MARGIN_PCT  # the same for perplexity, in %
    progress: bool = True       # False (--no-progress): no run shows a progress bar

    @property
    def figures_dir(self) -> Path:
        return Path(self.results_root) / "figures"


@dataclasses.dataclass
class Outcome:
    entries: list[FigureEntry]
    failures: list[str]
    timings: pd.DataFrame
    claims: pd.DataFrame | None
    index: Path | None


class Clock:
    """Wall time per (experiment, phase), printed as it goes."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self.log = log
        self.rows: list[dict] = []
        self.start = time.perf_counter()

    def record(self, experiment: str, phase: str, seconds: float, action: str = "") -> None:
        self.rows.append({"experiment": experiment, "phase": phase, "seconds": round(seconds, 2),
                          "action": action})
        total = time.perf_counter() - self.start
        self.log(f"  {phase} {experiment}: {action + ' ' if action else ''}{seconds:.1f} s "
                 f"(total {total / 60:.1f} min)")

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=["experiment", "phase", "seconds", "action"])


def run_specs(job: plan.TrainingJob, opts: Options) -> list[tuple[str, RunSpec]]:
    """(label, spec) of every variant the job runs under the profile."""
    out = []
    for variant in job.variants(opts.profile):
        spec = RunSpec.of(job.experiment, job.config_path(opts.experiments_dir), opts.profile,
                          variant, Path(opts.results_root), opts.data_root, opts.launcher)
        label = variant.label()
        out.append((job.experiment + (f" [{label}]" if label else ""), spec))
    return out


def print_plan(jobs: Sequence, opts: Options, log: Callable[[str], None]) -> None:
    """Each run's folder, state and `topkscope run` command (e.g. to submit to a cluster)."""
    from topkscope.reproduce.runner import command

    for job in jobs:
        if isinstance(job, plan.BenchmarkJob):
            cfg = load_benchmark_config(job.config_path(opts.experiments_dir), opts.profile)
            argv = cfg.command("python", opts.benchmarks_dir, opts.results_root)
            log(f"{job.experiment}: {' '.join(argv)}")
            continue
        for _, spec in run_specs(job, opts):
            run_dir = spec.run_dir()
            state = status_of(run_dir) or "missing"
            if (step := diverged_step(run_dir)) is not None:
                state += f"; diverged at step {step}: a result, not rerun"
            elif state != "complete":
                same = [c for c in covering_runs(spec) if not c.differences]
                state += f"; covered by {same[0].path}" if same else ""
            log(f"{run_dir} [{state}]")
            log("  topkscope " + shlex.join(command(spec, resume=False)[3:]))


def ensure_benchmark(job: plan.BenchmarkJob, opts: Options, clock: Clock,
                     children: ChildProcesses | None = None) -> Path:
    """The benchmark's CSV: kept when it exists, else written by running the benchmark (through
    `children`, the driver's signal forwarding, when given)."""

    cfg = load_benchmark_config(job.config_path(opts.experiments_dir), opts.profile)
    out = Path(opts.results_root) / "bench" / cfg.output
    t = time.perf_counter()
    if out.exists():
        clock.record(job.experiment, "run", time.perf_counter() - t, "skipped")
        return out
    if not opts.bench or not opts.run:
        raise RuntimeError(f"{out} is missing and --no-run / --no-bench run nothing, "
                           f"benchmarks included (drop them to run it)")
    argv = cfg.command(sys.executable, opts.benchmarks_dir, opts.results_root)
    clock.log("  $ python " + " ".join(argv[1:]))
    code = (children or ChildProcesses()).run(argv)
    if code != 0 or not out.exists():
        raise RuntimeError(f"benchmark failed (exit {code}) or wrote no {out}")
    clock.record(job.experiment, "run", time.perf_counter() - t, "ran")
    return out


def draw_training(job: plan.TrainingJob, run_dirs: list, opts: Options,
                  clock: Clock) -> tuple[list[FigureEntry], list]:
    """Draw the job's figures from its run folders (or runs already loaded); the snapshot
    analysis stays on the run (the claims and the tables reuse it)."""
    from topkscope.analysis.snapshots import analyze_run, snapshot_densities
    from topkscope.publish.figures import CONVERGENCE_DRAWERS, DISTRIBUTION_DRAWERS
    from topkscope.publish.outer_figures import OUTER_DRAWERS

    runs = [d if hasattr(d, "manifest") else load(d) for d in run_dirs]
    entries: list[FigureEntry] = []
    t = time.perf_counter()
    wanted = [f for f in job.figures if f in DISTRIBUTION_DRAWERS]
    if wanted:
        run = runs[0]
        analysis = analyze_run(run)  # kept on the run: the claims reuse it
        densities = sorted(set(analysis.ratios["density"])) or snapshot_densities(run)
        clock.record(job.experiment, "analyze", time.perf_counter() - t)
        t = time.perf_counter()
        for name in wanted:
            entries.append(DISTRIBUTION_DRAWERS[name](run, analysis, densities,
                                                      opts.figures_dir, job.experiment))
    by_runs = {**CONVERGENCE_DRAWERS, **OUTER_DRAWERS}
    for name in [f for f in job.figures if f in by_runs]:
        entry = by_runs[name](runs, opts.figures_dir, job.experiment)
        if entry is not None:  # e.g. no density sensitivity runs in this plan
            entries.append(entry)
    clock.record(job.experiment, "draw", time.perf_counter() - t, f"{len(entries)} figures")
    return entries, runs


def draw_benchmark(job: plan.BenchmarkJob, csv: Path, opts: Options,
                   clock: Clock) -> list[FigureEntry]:
    from topkscope.publish.figures import selection_speed_figure

    t = time.perf_counter()
    entries = selection_speed_figure(pd.read_csv(csv), opts.figures_dir, job.experiment)
    clock.record(job.experiment, "draw", time.perf_counter() - t, f"{len(entries)} figures")
    return entries


SCALING_EXPERIMENT = "predicted scaling"


def write_claims(runs: list, opts: Options, clock: Clock, differing: dict[str, str] | None = None,
                 own_only: bool = False) -> tuple[pd.DataFrame, str, list[FigureEntry]]:
    """claims.csv/.md by the one builder (topkscope.claims.build: the same table `topkscope
    claims` and `topkscope report` make of these runs, the predictions those of the models
    the runs trained); and the scaling figures (results/scaling.csv for the paper's models and
    the runs', unless own_only: --only named a user's own experiments alone) and the time to
    accuracy (time_to_accuracy.csv) with their entries. differing: run folder -> what differs
    from the plan."""
    from topkscope.claims import Options as ClaimOptions
    from topkscope.claims import build
    from topkscope.perf.report import write_scaling
    from topkscope.perf.time_to_accuracy import write_time_to_accuracy
    from topkscope.publish.figures import FigureEntry
    from topkscope.publish.findings import claims_markdown

    t = time.perf_counter()
    root = Path(opts.results_root)
    notes: list[str] = []
    table = build(runs, ClaimOptions(margin=opts.margin, perplexity_margin=opts.perplexity_margin,
                                     selection_csv=opts.selection_csv),
                  roots=[root], differing=differing, notes=notes)
    for note in notes:
        print(f"  {note}")
    entries: list[FigureEntry] = []
    scaling = () if own_only else (("scaling prediction", write_scaling),)
    for what, write in (*scaling,
                        ("time to accuracy", write_time_to_accuracy)):
        try:
            kwargs = ({"profile": opts.profile} if what == "scaling prediction" else
                      {"runs": runs, "margin": opts.margin,
                       "perplexity_margin": opts.perplexity_margin})
            _, figures = write(root, selection_csv=opts.selection_csv, **kwargs)
        except (ValueError, OSError) as exc:
            print(f"  {what} figures skipped: {exc}")
            continue
        entries += [FigureEntry(name=name, experiment=SCALING_EXPERIMENT, caption=caption,
                                files=tuple(files)) for name, caption, files in figures]
    write_bytes_atomic(root / "claims.csv", table.to_csv(index=False).encode())
    md = claims_markdown(table)
    write_bytes_atomic(root / "claims.md", (md + "\n").encode())
    clock.record("all", "claims", time.perf_counter() - t, f"{len(table)} rows")
    return table, md, entries


def draw_atlas(made: dict, opts: Options, clock: Clock) -> list[FigureEntry]:
    """The atlas page (publish.figures.atlas_figure) over the first run of each experiment
    drawn; [] when none saved a vector. A failure is logged, never fatal."""
    from topkscope.publish.figures import ATLAS_EXPERIMENT, atlas_figure

    t = time.perf_counter()
    try:
        entry = atlas_figure([runs[0] for _, runs in made.values() if runs], opts.figures_dir)
    except (RuntimeError, ValueError, OSError) as exc:
        clock.log(f"  FAILED atlas: {exc}")
        return []
    clock.record(ATLAS_EXPERIMENT, "draw", time.perf_counter() - t,
                 "1 figure" if entry else "nothing saved")
    return [entry] if entry else []


def _distribution_runs(made: dict) -> dict[str, list]:
    return {exp: runs for exp, (job, runs) in made.items()
            if any(f in plan.DISTRIBUTION_FIGURES for f in job.figures) and runs}


def write_tables(made: dict, csvs: dict, claims, opts: Options,
                 clock: Clock) -> list[str]:
    """<results>/tables/: the claims and the key numbers as CSV + LaTeX; returns failures."""
    from topkscope.publish import paper_tables

    t = time.perf_counter()
    dist = [runs[0] for runs in _distribution_runs(made).values()]
    conv = [r for exp, (job, runs) in made.items() if "convergence" in job.figures
            for r in runs]
    bench = [pd.read_csv(c) for c in csvs.values() if isinstance(c, Path)]
    try:
        files = paper_tables.write_all(
            Path(opts.results_root) / "tables", opts.profile, dist, conv, claims,
            pd.concat(bench, ignore_index=True) if bench else None)
    except (ValueError, OSError, KeyError) as exc:
        clock.log(f"  FAILED tables: {exc}")
        return [f"tables: {exc}"]
    clock.record("all", "tables", time.perf_counter() - t, f"{len(files)} files")
    return []


def notebook_jobs(made: dict, csvs: dict, opts: Options) -> list:
    """The notebooks of the experiments drawn (`made`) and the benchmark tables (`csvs`)."""
    from topkscope.reproduce import notebook_runs

    root = Path(opts.results_root).resolve()
    dist = {exp: runs[0].path.resolve() for exp, runs in _distribution_runs(made).items()}
    conv = [exp for exp, (job, _) in made.items() if "convergence" in job.figures]
    outer = [exp for exp, (job, _) in made.items() if "pseudo_gradient" in job.figures]
    bench = {exp: Path(c).resolve() for exp, c in csvs.items() if isinstance(c, Path)}
    return notebook_runs.notebook_jobs(dist, conv, bench, root, outer)


def start_notebooks(opts: Options, clock: Clock):
    """A notebook_runs.Background executing into <results>/notebooks/ (+ HTML), in the results
    root; None when the notebooks are off."""
    if not opts.notebooks:
        return None
    from topkscope.reproduce import notebook_runs

    root = Path(opts.results_root).resolve()
    return notebook_runs.Background(root / "notebooks", log=clock.log, cwd=root)


def finish_notebooks(background, started: float, clock: Clock) -> list[str]:
    """Wait for the notebooks handed to `background`; their failures, one line each. The
    wall time recorded runs from the first notebook's start (side by side with the claims)."""
    if background is None:
        return []
    files, failures = background.finish()
    clock.record("all", "notebooks", time.perf_counter() - started,
                 f"{len(files)} files (beside the drawing and the claims)")
    return failures


def default_parallel(profile: str) -> int:
    """Runs at a time: two on a CPU with 2+ cores in the CPU profiles (plan.CPU_PROFILES:
    quick, standard; each run uses one thread), one in the full profile (each run owns the
    accelerator)."""
    return max(1, min(2, os.cpu_count() or 1)) if profile in plan.CPU_PROFILES else 1


@dataclasses.dataclass
class JobRuns:
    """What a training job has to draw: its runs (each a Covering: folder, what differs from
    the plan, the step it diverged at if it did) and its variants' errors (failures of the
    driver: a run that failed other than by diverging is still among the runs)."""

    runs: list[Covering] = dataclasses.field(default_factory=list)
    errors: list[Exception] = dataclasses.field(default_factory=list)


def failed_run(spec: RunSpec):
    """The newest failed run (manifest status `failed`) of spec's variant, by manifest content,
    or None: what --no-run hands to the claims as a failed seed when nothing covers it."""
    from topkscope.manifest import find_runs

    found = find_runs(spec.results_root, status="failed", **variant_fields(spec))
    return max(found, key=lambda r: str(r.manifest.get("end_time") or ""), default=None)


def ensure_training(jobs: Sequence[plan.TrainingJob], opts: Options, clock: Clock,
                    children: ChildProcesses | None = None) -> dict[str, JobRuns]:
    """Every run of every training job; job -> its JobRuns.

    Training (opts.run): each variant's finished run with the plan's settings, wherever it
    lies, else its own hashed folder (resumed or trained; a diverged one kept as it is).
    --no-run: the covering run with the plan's settings, else the only covering run, whatever
    differs (runner.pick_covering), else the variant is missing. Runs are matched by manifest
    content, never folder name. children: the driver's signal forwarding (runner.run_all).
    """
    labelled = [(job, label, spec) for job in jobs for label, spec in run_specs(job, opts)]
    done: dict[str, Covering | Exception] = {}
    if opts.run:
        parallel = opts.parallel or default_parallel(opts.profile)
        clock.log(f"training: {len(labelled)} runs, {parallel} at a time")
        actions: dict[str, str] = {}

        def record(label: str, seconds: float, action: str) -> None:
            actions[label] = action
            clock.record(label, "run", seconds, action)

        ran = run_all([(label, spec) for _, label, spec in labelled], parallel=parallel,
                      in_process=opts.in_process, log=clock.log, record=record,
                      children=children, progress=opts.progress)
        for label, got in ran.items():
            if isinstance(got, Exception):
                done[label] = got
            else:
                done[label] = Covering(got, diverged_at=diverged_step(got)
                                       if actions.get(label) == "diverged" else None)
    else:
        for _, label, spec in labelled:
            try:
                found = pick_covering(label, covering_runs(spec))
            except ValueError as exc:
                found = exc
            if found is None:
                failed = failed_run(spec)  # a failed seed is a failure and data too
                found = (RunFailed(f"{label} failed: {failed.manifest.get('error')}",
                                   failed.path) if failed is not None else
                         RuntimeError(f"no complete run of {label} under {opts.results_root} "
                                      "(by manifest: experiment, profile, sparsifier, seed, "
                                      "density, condition); drop --no-run to train it"))
            done[label] = found
            if isinstance(found, Covering) and found.differences:
                clock.log(f"  {label}: drawing from {found.path}, whose settings differ from "
                          f"the plan: {found.describe()}")
            clock.record(label, "run", 0.0,
                         "missing" if isinstance(found, Exception) else "found")
    out: dict[str, JobRuns] = {}
    for job, label, _ in labelled:
        got, runs = done[label], out.setdefault(job.experiment, JobRuns())
        if isinstance(got, Covering):
            runs.runs.append(got)
            continue
        runs.errors.append(got)
        if isinstance(got, RunFailed) and got.run_dir is not None:
            runs.runs.append(Covering(got.run_dir))  # a failed seed is data too
    diverged = [c.path for r in out.values() for c in r.runs if c.diverged_at is not None]
    if diverged:
        clock.log(f"  {len(diverged)} run(s) diverged (results: manifest `failed` with "
                  f"diverged_at_step; handed to the claims)")
    return out


def reproduce(opts: Options, log: Callable[[str], None] = print) -> Outcome:
    """Run the plan, draw every figure, write claims and the index (see module docstring).

    SIGINT and SIGTERM (in the main thread) are forwarded to the runs and the benchmark in
    flight, which stop cleanly; then interrupts.RunInterrupted is raised with one line naming
    them and saying that the next invocation resumes them (with nothing in flight it is
    raised at once: every file is written atomically).
    """
    children = ChildProcesses()
    with handling(children) as installed:
        children.own_session = installed
        return _reproduce(opts, log, children)


def _reproduce(opts: Options, log: Callable[[str], None], children: ChildProcesses) -> Outcome:
    plan.check_profile(opts.profile)
    validate.number("margin", opts.margin, 0.0)
    validate.number("perplexity_margin", opts.perplexity_margin, 0.0)
    if opts.parallel is not None and opts.parallel < 1:
        raise ValueError(f"parallel = {opts.parallel} must be at least 1")
    if opts.selection_csv is not None:  # checked before anything runs
        from topkscope.perf.inputs import read_selection_csv

        read_selection_csv(opts.selection_csv)
    own = own_runs.own_experiments(opts.results_root,
                                   [j.experiment for j in (opts.jobs or plan.JOBS)])
    if opts.only:  # names of the plan, or of a user's own experiment found under the results
        own = {name: dirs for name, dirs in own.items() if name in opts.only}
        planned = [n for n in opts.only if n not in own]
        names = [j.experiment for j in (opts.jobs or plan.JOBS)]
        unknown = [n for n in planned if n not in names]
        if unknown:
            raise ValueError(f"unknown experiment(s) {unknown}: not in the plan ({', '.join(names)})"
                             f" and no complete or failed run of your own (DDP hook or Recorder)"
                             f" under {str(opts.results_root)!r} names it")
        jobs = plan.jobs(planned, opts.jobs, opts.profile) if planned else []
    else:
        jobs = plan.jobs(None, opts.jobs, opts.profile)
    own_only = bool(opts.only) and not jobs  # --only names a user's own experiments alone
    if jobs and not Path(opts.experiments_dir).is_dir():
        raise ValueError(f"no experiments folder at {str(opts.experiments_dir)!r} (outside the "
                         f"repository?): pass --experiments DIR, the folder of experiment YAMLs")
    if opts.dry_run:
        print_plan(jobs, opts, log)
        for name, dirs in own.items():
            log(f"{name} [your own runs: {len(dirs)}, drawn, never run]")
        return Outcome([], [], pd.DataFrame(), None, None)
    clock = Clock(log)
    failures: list[str] = []
    entries: list[FigureEntry] = []
    all_runs: list = []
    made: dict[str, tuple[plan.TrainingJob, list]] = {}
    differing: dict[str, str] = {}  # run folder -> what differs from the plan (--no-run)
    opts.figures_dir.mkdir(parents=True, exist_ok=True)
    benches = [j for j in jobs if isinstance(j, plan.BenchmarkJob)]
    trainings = [j for j in jobs if isinstance(j, plan.TrainingJob)]
    # benchmarks first and alone: their timings must not compete with training
    csvs: dict[str, Path | Exception] = {}
    for job in benches:
        log(f"benchmark {job.experiment} ({opts.profile} profile)")
        try:
            csvs[job.experiment] = ensure_benchmark(job, opts, clock, children)
        except (RuntimeError, ValueError, OSError) as exc:
            csvs[job.experiment] = exc
    folders = ensure_training(trainings, opts, clock, children) if trainings else {}
    notebooks = start_notebooks(opts, clock)
    notebooks_started = time.perf_counter()
    for i, job in enumerate(jobs, 1):
        log(f"[{i}/{len(jobs)}] drawing {job.experiment}")
        try:
            if isinstance(job, plan.TrainingJob):
                got = folders[job.experiment]
                for exc in got.errors if got.runs else []:  # drawn all the same
                    failures.append(f"{job.experiment}: {exc}")
                if not got.runs:
                    raise got.errors[0] if got.errors else RuntimeError("no runs")
                differing.update({str(Path(c.path).resolve()): c.describe()
                                  for c in got.runs if c.differences})
                new, runs = draw_training(job, [c.path for c in got.runs], opts, clock)
                all_runs += runs
                made[job.experiment] = (job, runs)
            else:
                got = csvs[job.experiment]
                if isinstance(got, Exception):
                    raise got
                new = draw_benchmark(job, got, opts, clock)
            entries += new
            if notebooks is not None:  # its notebooks run while the next ones are drawn
                done = {job.experiment: made[job.experiment]} if job.experiment in made else {}
                got = {job.experiment: csvs[job.experiment]} if job.experiment in csvs else {}
                notebooks.submit(notebook_jobs(done, got, opts))
        except (RuntimeError, ValueError, OSError) as exc:
            msg = f"{job.experiment}: {exc}"
            failures.append(msg)
            log(f"  FAILED {msg}")
    if made:  # the atlas page: one panel per model and vector across the runs drawn
        entries += draw_atlas(made, opts, clock)
    for name, dirs in own.items():
        log(f"drawing {name} (your own runs: {len(dirs)}; drawn, never run)")
        try:
            runs = own_runs.distribution_first([load(d) for d in dirs])
            job = plan.TrainingJob(name, figures=own_runs.figures_for(runs))
            new, runs = draw_training(job, runs, opts, clock)
            entries += new
            for run in runs:  # the claims take the runs they can read (claims.what_is_missing)
                missing = what_is_missing(run)
                if missing is None:
                    all_runs.append(run)
                else:
                    log(f"  {run.path}: not in the claims: {missing}")
        except (RuntimeError, ValueError, OSError) as exc:
            failures.append(f"{name}: {exc}")
            log(f"  FAILED {name}: {exc}")
    try:  # imported published runs under the results root: drawn, and claims of their own
        from topkscope.publish import published_findings

        skipped: list[str] = []
        imported = [] if own_only else published_findings.imported_runs(opts.results_root,
                                                                         skipped)
        for note in skipped:
            log(f"  imported runs: {note}")
        if imported:
            entries += published_findings.draw(imported, opts.figures_dir)
            all_runs += imported
    except (RuntimeError, ValueError, OSError) as exc:
        failures.append(f"published runs: {exc}")
        log(f"  FAILED published runs: {exc}")
    if not own_only:  # the step-time model on the GRACE release (its committed tables)
        try:
            from topkscope.publish.figures import grace_model_figure

            entries.append(grace_model_figure(opts.figures_dir))
        except (ValueError, OSError, KeyError) as exc:
            failures.append(f"GRACE model figure: {exc}")
            log(f"  FAILED GRACE model figure: {exc}")
    claims, md = None, ""
    if all_runs:
        try:
            claims, md, scaling_entries = write_claims(all_runs, opts, clock, differing,
                                                       own_only)
            entries += scaling_entries
        except (RuntimeError, ValueError) as exc:
            failures.append(f"claims: {exc}")
            log(f"  FAILED claims: {exc}")
    if opts.tables:
        failures += write_tables(made, csvs, claims, opts, clock)
    failures += finish_notebooks(notebooks, notebooks_started, clock)
    timings = clock.frame()
    total = time.perf_counter() - clock.start
    notes = [f"profile `{opts.profile}`, wall time {total / 60:.1f} min "
             f"(per-experiment breakdown: timing.csv)"]
    notes += [f"failed — {f}" for f in failures]
    notes += [f"drawn from `{path}`, whose settings differ from the plan: {what}"
              for path, what in sorted(differing.items())]
    write_bytes_atomic(opts.figures_dir / "timing.csv", timings.to_csv(index=False).encode())
    from topkscope.publish.figures import write_index

    index = write_index(entries, opts.figures_dir, profile=opts.profile, claims_markdown=md,
                        notes=notes)
    if claims is not None:  # the whole profile on one page: results/report.html
        from topkscope.publish.report import write_report

        try:
            write_report([Path(opts.results_root)], Path(opts.results_root) / "report.html")
        except (ValueError, OSError) as exc:
            failures.append(f"report: {exc}")
            log(f"  FAILED report: {exc}")
    log(f"done in {total / 60:.1f} min: {len(entries)} figures, index {index}"
        + (f"; {len(failures)} failure(s)" if failures else ""))
    return Outcome(entries, failures, timings, claims, index)


KEYS = ("experiment", "description", "benchmark", "output", "args", "profiles")
PROFILE_KEYS = ("args",)


@dataclasses.dataclass(frozen=True)
class BenchmarkConfig:
    experiment: str
    benchmark: str
    output: str
    args: tuple[str, ...]
    description: str = ""

    def command(self, python: str, benchmarks_dir: Path, results_root: Path) -> list[str]:
        out = Path(results_root) / "bench" / self.output
        return [python, str(Path(benchmarks_dir) / f"{self.benchmark}.py"), *self.args,
                "--out", str(out)]


def _strings(value, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
        raise ValueError(f"{where} = {value!r} must be a list of command-line arguments")
    return [str(v) for v in value]


def load_benchmark_config(path: str | Path, profile: str) -> BenchmarkConfig:
    """Read and validate a benchmark config; the profile's args follow the common ones."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"benchmark config {str(path)!r} does not exist") from None
    if not isinstance(raw, Mapping):
        raise ValueError(f"benchmark config {str(path)!r} must be a mapping of keys to values")
    unknown = [k for k in raw if k not in KEYS]
    if unknown:
        raise ValueError(f"unknown key(s) {unknown} in {path.name}; allowed: {', '.join(KEYS)}")
    for key in ("experiment", "benchmark", "output"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise ValueError(f"{path.name}: {key} = {raw.get(key)!r} must be a non-empty string")
    if "/" in raw["benchmark"] or "/" in raw["output"]:
        raise ValueError(f"{path.name}: benchmark and output must be plain names, not paths")
    profiles = raw.get("profiles") or {}
    if profile not in profiles:
        raise ValueError(f"profile {profile!r} is not defined in {path.name}; "
                         f"profiles: {', '.join(profiles) or 'none'}")
    block = profiles[profile] or {}
    bad = [k for k in block if k not in PROFILE_KEYS]
    if bad:
        raise ValueError(f"unknown key(s) {bad} in {path.name} profiles.{profile}; allowed: args")
    args = _strings(raw.get("args"), "args") + _strings(block.get("args"), f"profiles.{profile}.args")
    return BenchmarkConfig(raw["experiment"], raw["benchmark"], raw["output"], tuple(args),
                           raw.get("description") or "")
