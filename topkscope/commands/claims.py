"""`topkscope claims RUN_OR_RESULTS... [--out FILE]`: the paper's claims table for any runs.

Each path is a run folder, an experiment folder or a results root; its complete and failed
runs are found by manifest content (topkscope.manifest.runs_at), `topkscope run` folders and
users' own runs alike (a DDP-hook run, launcher "ddp-hook", or a Recorder in their own loop);
a failed run (e.g. one that diverged) counts as a failed seed in the convergence claims.
`--margin POINTS` and `--perplexity-margin PERCENT` set the non-inferiority margins. The
table is the figures driver's (topkscope.claims.build, the one builder: the same runs give the
same table by `claims`, `figures` and `report`, the predicted P = 16 rows of the runs' models
included; columns as results/claims.csv, with its schema_version), written atomically to
FILE (default ./claims.csv; `--out -`: the CSV on stdout), and one plain sentence per row,
the sentences of claims.md, is printed (on stderr with `--out -`). The table and the
sentences come from topkscope.reproduce, handed in by topkscope.cli.

A run that failed at set-up (before its first step: no recorded row) found under a results
root or an experiment folder is left out with one line naming it on stderr, so that one such
folder does not block the rest; named as a path itself, it is refused (below).

Bad input (a path that holds no complete or failed run, a damaged run, a folder the claims
cannot read — a manifest.json that is not topkscope's, a run named itself that failed at
set-up, a run with no recorded rows, one whose manifest names no model —, --out a folder, a negative
margin): one line naming the folder and what it lacks, exit 2, nothing written. A damaged run
(a manifest.json or a table that cannot be read) found under a results root or an experiment
folder does not block the others: it is named on stderr and left out, the table of the rest is
written, and the exit status is 1; named itself, it is refused as bad input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from topkscope.commands import CommandError

HELP = "the paper's claims table (claims.csv) and its verdicts in words, for any run folders"
STDOUT = "-"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", type=Path, metavar="RUN_OR_RESULTS",
                   help="run folder, experiment folder or results root (its complete and "
                        "failed runs are used; a failed run is a failed seed)")
    p.add_argument("--out", default="claims.csv", metavar="FILE",
                   help="where the table goes (default: ./claims.csv; '-': stdout)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar while the runs are read")
    add_margin_arguments(p)


def add_margin_arguments(p: argparse.ArgumentParser) -> None:
    """--margin and --perplexity-margin: the claims' non-inferiority margins (also used by
    `topkscope figures`, where they set the time-to-accuracy target too)."""
    from topkscope.analysis.criteria import ACCURACY_MARGIN_POINTS, PERPLEXITY_MARGIN_PCT

    p.add_argument("--margin", type=float, default=ACCURACY_MARGIN_POINTS, metavar="POINTS",
                   help="non-inferiority margin of the accuracy claims, in points of accuracy "
                        f"(default {ACCURACY_MARGIN_POINTS:g})")
    p.add_argument("--perplexity-margin", type=float, default=PERPLEXITY_MARGIN_PCT,
                   metavar="PERCENT",
                   help="the same for perplexity, in %% of Top-k's perplexity (default "
                        f"{PERPLEXITY_MARGIN_PCT:g})")


def readable_runs(paths, load: Callable, runs_at: Callable, progress_shown: bool = True,
                  skipped: list | None = None, damaged: list | None = None) -> list:
    """The complete, failed and unfinished (interrupted, running: the convergence claims count
    them as unfinished seeds) runs under paths, loaded; ValueError naming the first complete
    or failed folder the claims cannot read and what it lacks
    (topkscope.claims.what_is_missing); a folder whose manifest.json is not
    topkscope's is named before any status is looked at. A run that failed at set-up found
    under a results root or experiment folder is left out, one line naming it appended to
    `skipped` (topkscope.analysis.runs.skip_setup_failures); named itself, it is refused.
    A damaged run (a manifest or a table that cannot be read) found under a results root or
    experiment folder is left out and appended to `damaged` (a list: manifest.DamagedRun;
    None: it is refused like one named itself)."""
    from topkscope.analysis.runs import load_found, skip_setup_failures
    from topkscope.analysis.seeds import CLAIMED_STATUSES, UNFINISHED_STATUSES
    from topkscope.claims import what_is_missing
    from topkscope.manifest import not_ours

    for found in runs_at(paths, status=None, damaged=None if damaged is None else []):
        foreign = not_ours(found.manifest)
        if foreign is not None:
            raise ValueError(f"{str(found.path)!r}: {foreign}")
    from topkscope import progress

    found = runs_at(paths, status=CLAIMED_STATUSES, damaged=damaged)
    with progress.bar(total=len(found), desc="claims: read", unit="run",
                      enabled=progress_shown) as bar:
        runs = load_found(found, named=paths, damaged=damaged, loader=load,
                          progress=bar.update)
    # an unfinished run may have no rows yet: an unfinished seed all the same, where its
    # manifest says whose (a Recorder in a loop of one's own names no model until it ends)
    runs = [r for r in runs if r.manifest.get("status") not in UNFINISHED_STATUSES
            or all(r.manifest.get(k) is not None for k in ("model", "sparsifier"))]
    runs, notes = skip_setup_failures(runs, named=paths)
    if skipped is not None:
        skipped.extend(notes)
    for run in runs:
        if run.manifest.get("status") in UNFINISHED_STATUSES:
            continue
        missing = what_is_missing(run)
        if missing is not None:
            raise ValueError(f"{str(run.path)!r}: {missing}; give the paths of the runs to "
                             "tabulate, or move this folder aside")
    return runs


def main(args: argparse.Namespace, tabulate: Callable, summarize: Callable) -> int:
    """tabulate(runs, roots=, margin=, perplexity_margin=) -> the claims DataFrame (roots:
    the paths the runs were found under, the predictions' inputs), summarize(table)
    -> its sentences (cli.py)."""
    from topkscope.analysis.runs import load
    from topkscope.io import write_bytes_atomic
    from topkscope.manifest import runs_at

    out = None if args.out == STDOUT else Path(args.out)
    try:
        if out is not None and out.is_dir():
            raise ValueError(f"--out {str(out)!r} is a folder; give a file name (e.g. "
                             f"{out / 'claims.csv'}) or '-' for stdout")
        skipped: list[str] = []
        damaged: list = []
        quiet_repeats()
        runs = readable_runs(args.paths, load, runs_at, progress_shown=not args.no_progress,
                             skipped=skipped, damaged=damaged)
        table = tabulate(runs, roots=args.paths, margin=args.margin,
                         perplexity_margin=args.perplexity_margin)
    except ValueError as exc:  # nothing has been written yet
        raise CommandError(str(exc)) from None
    for note in skipped:
        print(f"claims: {note}", file=sys.stderr)
    name_damaged("claims", damaged)
    csv = table.to_csv(index=False)
    summary = summarize(table)
    if out is None:
        sys.stdout.write(csv)
        print(summary, file=sys.stderr)
        return fail_if_damaged(damaged, len(runs))
    try:
        write_bytes_atomic(out, csv.encode())
    except OSError as exc:
        raise CommandError(f"cannot write {str(out)!r}: {exc}", code=1) from None
    print(summary)
    print(f"claims: {len(table)} rows from {len(runs)} run(s) -> {out}")
    return fail_if_damaged(damaged, len(runs))


def quiet_repeats() -> None:
    """Ignore find_runs' warnings on damaged run folders for the rest of the command: the
    readers under it (the predictions' inputs) find them again, and name_damaged names each
    once."""
    import warnings

    from topkscope.manifest import DamagedRunWarning

    warnings.simplefilter("ignore", DamagedRunWarning)


def name_damaged(command: str, damaged: list) -> None:
    """One line on stderr per damaged run a command left out (manifest.DamagedRun)."""
    for run in damaged:
        print(f"{command}: skipped damaged run {run}", file=sys.stderr)


def fail_if_damaged(damaged: list, used: int) -> int:
    """0, or — after the output of the readable runs is written — a CommandError (exit 1)
    counting the damaged runs left out (each named above by name_damaged)."""
    if not damaged:
        return 0
    raise CommandError(f"{len(damaged)} damaged run(s) left out (named above; move them aside "
                       f"or rerun them); the output holds the other {used} run(s)", code=1)
