"""What the notebooks share: where the results are, which run to show, and skipping the cells
whose data a run lacks.

Default paths do not depend on the kernel's working directory (JupyterLab starts it in
notebooks/, papermill and nbconvert wherever they are called from):

    results_root()      $TOPKSCOPE_RESULTS, else <repository>/results (the checkout this
                        package was imported from), else ./results
    resolve(path)       an absolute path as it is; a relative one against the working
                        directory if it exists there, else against the repository
    pick_run(run_dir, experiment, needs=...)   run_dir if given, else the newest complete
                        recorded run (of `experiment`, when given) under results_root() that
                        holds what the notebook draws (`needs`: HINTS keys), printing the
                        candidates and which it took
    shown(path)         a path as a notebook prints it: relative to the results root when
                        inside it, so executed copies do not hold the machine's folders

A cell that needs data a run may lack is guarded by `need(run, what)`: False, with a one-line
hint naming the recorder option (or command) that would produce it, when it is missing.

Importing this module imports the user's plugins (topkscope.plugins: TOPKSCOPE_PLUGINS and the
entry points), so a notebook that `topkscope figures --plugin MODULE` executes in a kernel of
its own sees the sparsifiers, statistics and claims that command sees.
"""

from __future__ import annotations

import os
from pathlib import Path

from topkscope import plugins
from topkscope.manifest import MANIFEST, Manifest, find_runs
from topkscope.schema import PART_GLOB, SNAPSHOT_RE

plugins.activate()  # a kernel is a process of its own: the command's plugins, named again

RESULTS_ENV = "TOPKSCOPE_RESULTS"

# what -> (what is missing, how to produce it)
HINTS = {
    "stats": ("no recorded statistics",
              "record them with Recorder(schedule=...) (a config's recorder: schedule)"),
    "hist": ("no histograms",
             "record them with Recorder(hist_schedule=...) (a config's recorder: hist_schedule)"),
    "snapshots": ("no snapshots of u",
                  "save them with Recorder(snapshot_schedule=...) (a config's recorder: "
                  "snapshot_schedule)"),
    "selectors": ("no approximate selector columns",
                  "evaluate them with Recorder(sparsifiers=['gaussiank', ...]) (a config's "
                  "recorder: sparsifiers)"),
    "layers": ("no per-layer rows", "record them with Recorder(per_layer=True)"),
    "train": ("no train.parquet",
              "it is written by `topkscope run` and by a TopKHookState with a recorder or "
              "run_dir=..."),
    "loss": ("no training loss in train.parquet",
             "a DDP-hook run gets it from the script: state.note(loss=loss.item()) after "
             "backward()"),
    "eval": ("no evaluation rows (eval.parquet)",
             "they are written by `topkscope run` (eval_every_steps); a DDP-hook run has none"),
}


def repo_root() -> Path | None:
    """The checkout this package was imported from (None for an installed copy)."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() else None


def results_root(path: str | os.PathLike | None = None) -> Path:
    """path (resolved), else $TOPKSCOPE_RESULTS, else <repository>/results, else ./results."""
    if path is not None:
        return resolve(path)
    if os.environ.get(RESULTS_ENV):
        return resolve(os.environ[RESULTS_ENV])
    repo = repo_root()
    return repo / "results" if repo is not None else Path.cwd() / "results"


def resolve(path: str | os.PathLike) -> Path:
    """Absolute as given; relative against the working directory if it exists there, else
    against the repository."""
    p = Path(path).expanduser()
    if p.is_absolute() or p.exists():
        return p.resolve()
    repo = repo_root()
    return (repo / p).resolve() if repo is not None else p.resolve()


def shown(path: str | os.PathLike, results: str | os.PathLike | None = None) -> str:
    """path relative to results_root(results), else to the working directory, when it lies
    inside it (what a notebook prints, so an executed copy holds no machine's folders: the
    figures driver runs them in the results root), else, for a path in a run folder, relative
    to the results root that run lies in (<root>/<experiment>/<run_id>/...), else as given."""
    path = Path(path).resolve()
    run = next((p for p in (path, *path.parents) if (p / MANIFEST).is_file()), None)
    bases = [results_root(results), Path.cwd()]
    if run is not None and len(run.parents) > 2:
        bases.append(run.parents[1])
    for base in bases:
        try:
            return str(path.relative_to(base.resolve())) or "."
        except ValueError:
            continue
    return str(path)


def root_named(results: str | os.PathLike | None = None) -> str:
    """The results root in words, as the user set it and never as this machine's folder:
    "the results root 'runs/'", "the results root ($TOPKSCOPE_RESULTS)", "the results root
    (the repository's results/)"; "the results root" for '.' (the figures driver's)."""
    if results is not None:
        return "the results root" + ("" if str(results) in (".", "./") else f" {str(results)!r}")
    if os.environ.get(RESULTS_ENV):
        return f"the results root (${RESULTS_ENV})"
    return "the results root (the repository's results/)" if repo_root() is not None else \
        "the results root (./results)"


def holds(run_dir: Path, manifest: dict, what: str) -> bool:
    """Whether a run folder holds `what` (a HINTS key), told from its files and manifest
    without loading its tables (pick_run looks at every run)."""
    recorder = manifest.get("recorder") or {}
    if what in ("stats", "hist"):
        return any((run_dir / what).glob(PART_GLOB))
    if what == "snapshots":
        folder = run_dir / "snapshots"
        return folder.is_dir() and any((m := SNAPSHOT_RE.match(p.name)) and m.group(3) is None
                                       for p in folder.iterdir())
    if what == "selectors":
        return bool(recorder.get("sparsifiers")) and any((run_dir / "stats").glob(PART_GLOB))
    if what == "layers":
        return bool(recorder.get("per_layer", True)) and any((run_dir / "stats").glob(PART_GLOB))
    if what in ("train", "loss"):
        return (run_dir / "train.parquet").is_file()
    if what == "eval":
        return (run_dir / "eval.parquet").is_file()
    raise ValueError(f"what = {what!r}; allowed: {', '.join(HINTS)}")


def pick_run(run_dir: str | os.PathLike | None = None, experiment: str | None = None,
             results: str | os.PathLike | None = None, needs: tuple[str, ...] = ()) -> Path:
    """The run folder to show: run_dir if given, else, of the complete runs with a recorder
    (of `experiment`, if given) under results_root(results), the newest that holds every
    one of `needs` (HINTS keys: what the notebook draws), else the one that holds the most of
    them, newest first. Prints the candidates and which it took. ValueError naming the
    parameters when there is none."""
    if run_dir is not None:
        found = resolve(run_dir)
        try:
            Manifest.load(found)
        except ValueError as exc:
            raise ValueError(f"run_dir = {str(run_dir)!r} ({shown(found, results)}): {exc}"
                             ) from None
        return found
    root = results_root(results)
    runs = [r for r in find_runs(root, experiment=experiment) if r.manifest.get("recorder")]
    if not runs:
        of = f" of experiment {experiment!r}" if experiment else ""
        raise ValueError(f"no complete recorded run{of} under {root_named(results)}; set the "
                         f"run_dir parameter, or {RESULTS_ENV} to a results folder")
    has = {r.path: [w for w in needs if holds(r.path, r.manifest, w)] for r in runs}
    ranked = sorted(runs, key=lambda r: (len(has[r.path]), str(r.manifest.get("start_time")
                                                               or "")), reverse=True)
    chosen = ranked[0]
    lacking = [w for w in needs if w not in has[chosen.path]]
    wanted = f" that holds {', '.join(needs)}" if needs else ""
    print(f"run_dir = None: {len(runs)} complete recorded run(s) under the results root; "
          f"took {shown(chosen.path, results)}, the newest{wanted}"
          + (f" (none holds {', '.join(lacking)}: those cells are skipped)" if lacking else "")
          + "; set run_dir to show another:")
    for r in ranked[:8]:
        print(f"  {shown(r.path, results)}: holds {', '.join(has[r.path]) or 'none'}"
              f" of {', '.join(needs) or '-'}")
    if len(ranked) > 8:
        print(f"  ... and {len(ranked) - 8} more")
    return chosen.path


def pick_runs(experiment: str | None = None, results: str | os.PathLike | None = None,
              profile: str | None = None, outer: bool = False) -> list[Path]:
    """Every complete run of `experiment` (default: the experiment under the results root
    with the most complete runs; with outer=True, among the experiments with an outer-loop
    run) whose profile is `profile` (None: any)."""
    root = results_root(results)
    by_experiment: dict[str, list[Path]] = {}
    found = find_runs(root, profile=profile)
    if outer:
        with_outer = {r.manifest.get("experiment") for r in found if r.manifest.get("outer")}
        found = [r for r in found if r.manifest.get("experiment") in with_outer]
    for run in found:
        by_experiment.setdefault(str(run.manifest.get("experiment")), []).append(run.path)
    if experiment is None and by_experiment:
        ranked = sorted(by_experiment, key=lambda e: (len(by_experiment[e]), e), reverse=True)
        experiment = ranked[0]
        others = ", ".join(f"{e} ({len(by_experiment[e])})" for e in ranked[1:8])
        print(f"experiment = None: took {experiment}, the experiment with the most complete "
              f"runs ({len(by_experiment[experiment])})"
              + (f"; others: {others}" if others else "") + "; set experiment to show another")
    runs = by_experiment.get(experiment or "", [])
    if not runs:
        kind = "outer-loop run" if outer else "run"
        of = f" of the {profile} profile" if profile else ""
        what = f"no complete {kind} of experiment {experiment!r}{of}" if experiment else \
            f"no complete {kind}{of}"
        others = f" (its experiments with one: {', '.join(sorted(by_experiment))})" \
            if by_experiment else ""
        raise ValueError(f"{what} under {root_named(results)}{others}; set the experiment and "
                         f"results_root parameters, or {RESULTS_ENV}")
    return runs


def densities_line(run) -> str:
    """'training ρ = 0.01 (warmup=none) | recorder ρ = 0.001, 0.01': the density training
    selected at (its target, with the warm-up that led to it) apart from the densities the
    recorder evaluated u at (the stats rows' `density`, each figure panel's)."""
    from topkscope.manifest import condition_of
    from topkscope.plots.titles import format_density

    m = run.manifest
    recorded = (m.get("recorder") or {}).get("densities")
    if not recorded and "density" in run.stats:
        recorded = sorted(run.stats["density"].unique())
    out = f"training {format_density(m.get('density'))} ({condition_of(m)})"
    if recorded:
        out += " | recorder ρ = " + ", ".join(f"{float(r):g}" for r in recorded)
    return out


def missing(run, what: str, rank: int | None = None) -> str | None:
    """Why `run` cannot feed a cell that needs `what` (a HINTS key), or None if it can."""
    if what not in HINTS:
        raise ValueError(f"what = {what!r}; allowed: {', '.join(HINTS)}")
    if what == "stats":
        absent = run.stats.empty
    elif what == "hist":
        absent = run.hist.empty or (rank is not None and not (run.hist["rank"] == rank).any())
    elif what == "snapshots":
        snaps = run.snapshots[run.snapshots["kind"] == "u"]
        absent = snaps.empty or (rank is not None and not (snaps["rank"] == rank).any())
    elif what == "selectors":
        absent = run.stats.empty or not any(c.endswith("_count") for c in run.stats.columns)
    elif what == "layers":
        absent = run.stats.empty or bool((run.stats["layer"] == "__global__").all())
    elif what == "loss":
        absent = run.train.empty or bool(run.train["loss"].isna().all())
    else:
        absent = getattr(run, what).empty
    if not absent:
        return None
    lacks, how = HINTS[what]
    of_rank = f" of rank {rank}" if rank is not None and what in ("hist", "snapshots") else ""
    return f"skipped: {shown(run.path)} has {lacks}{of_rank}; {how}"


def need(run, what: str, rank: int | None = None) -> bool:
    """True if run has `what`; otherwise print the one-line hint and return False."""
    reason = missing(run, what, rank)
    if reason is not None:
        print(reason)
    return reason is None
