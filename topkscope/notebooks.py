"""What the notebooks share: where the results are, which run to show, and skipping the cells
whose data a run lacks.

Default paths do not depend on the kernel's working directory (JupyterLab starts it in
notebooks/, papermill and nbconvert wherever they are called from):

    results_root()      $TOPKSCOPE_RESULTS, else <repository>/results (the checkout this
                        package was imported from), else ./results
    resolve(path)       an absolute path as it is; a relative one against the working
                        directory if it exists there, else against the repository
    pick_run(run_dir, experiment)   run_dir if given, else the newest complete run (of
                        `experiment`, when given) under results_root() that has a recorder

A cell that needs data a run may lack is guarded by `need(run, what)`: False, with a one-line
hint naming the recorder option (or command) that would produce it, when it is missing.
"""

from __future__ import annotations

import os
from pathlib import Path

from topkscope.manifest import Manifest, find_runs

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


def pick_run(run_dir: str | os.PathLike | None = None, experiment: str | None = None,
             results: str | os.PathLike | None = None) -> Path:
    """The run folder to show: run_dir if given, else the newest complete run with a recorder
    (of `experiment`, if given) under results_root(results). ValueError naming the
    parameters when there is none."""
    if run_dir is not None:
        found = resolve(run_dir)
        try:
            Manifest.load(found)
        except ValueError as exc:
            raise ValueError(f"run_dir = {str(run_dir)!r} ({found}): {exc}") from None
        return found
    root = results_root(results)
    runs = [(str(r.manifest.get("start_time") or ""), r.path)
            for r in find_runs(root, experiment=experiment) if r.manifest.get("recorder")]
    if not runs:
        where = f"experiment {experiment!r} under " if experiment else ""
        raise ValueError(f"no complete recorded run of {where}{str(root)!r}; set the run_dir "
                         f"parameter, or {RESULTS_ENV} to a results folder")
    return max(runs)[1]


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
        experiment = max(by_experiment, key=lambda e: (len(by_experiment[e]), e))
    runs = by_experiment.get(experiment or "", [])
    if not runs:
        raise ValueError(f"no complete run of experiment {experiment!r} under {str(root)!r}; "
                         f"set the experiment and results_root parameters, or {RESULTS_ENV}")
    return runs


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
    return f"skipped: {run.path} has {lacks}{of_rank}; {how}"


def need(run, what: str, rank: int | None = None) -> bool:
    """True if run has `what`; otherwise print the one-line hint and return False."""
    reason = missing(run, what, rank)
    if reason is not None:
        print(reason)
    return reason is None
