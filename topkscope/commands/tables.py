"""`topkscope tables [RUN_OR_RESULTS...] [--claims FILE] [--tables DIR]`: the tables for a
paper, for any runs or a committed claims table.

Each path is a run folder, an experiment folder or a results root; its runs are read as
`topkscope claims` reads them (topkscope.commands.claims.readable_runs). `--claims FILE` takes
the claims from a claims table written earlier (a profile's claims.csv, the committed
results/reference/claims-quick.csv; any schema version: topkscope.claims.migrate), with or
without paths. Into DIR (default ./tables) go, each as CSV (every value) and as a LaTeX table
that compiles on its pages with booktabs and tabularx in a one-column and a two-column class:
the contraction, normality and selectors tables of the runs with snapshots of u (one per
experiment), the convergence table of the runs with evaluations, the selection speed of a
results root's bench/selection.csv, and the claims with their views
(topkscope.publish.paper_tables, handed in by topkscope.cli). A results root that `topkscope
figures` wrote gives its own claims.csv; other paths are tabulated now. The tables' labels
carry the profile (of the runs, else the one the claims' rows name). `--margin` and
`--perplexity-margin` are the claims' (as `topkscope claims`).

Bad input (neither paths nor --claims, a path that holds no complete or failed run, a folder
the claims cannot read, a --claims file that is missing or no claims table, --tables a file):
one line naming it, exit 2, nothing written. A damaged run (a manifest or a table that cannot
be read) found under a results root or experiment folder is named on stderr and left out; the
tables of the others are written, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

from topkscope.commands import CommandError
from topkscope.commands.claims import (
    add_margin_arguments,
    fail_if_damaged,
    name_damaged,
    quiet_repeats,
    readable_runs,
)

HELP = "the tables for a paper (CSV + LaTeX) of any runs or claims: contraction, claims, ..."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", type=Path, metavar="RUN_OR_RESULTS",
                   help="run folder, experiment folder or results root (its complete and "
                        "failed runs are used; a failed run is a failed seed)")
    p.add_argument("--claims", type=Path, metavar="FILE",
                   help="a claims table written earlier (claims.csv of any schema version, "
                        "e.g. results/reference/claims-quick.csv): its views and appendix")
    p.add_argument("--tables", type=Path, default=Path("tables"), metavar="DIR",
                   help="the folder the tables go to (default: ./tables)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar while the runs are read")
    add_margin_arguments(p)


def read_claims(path: Path):
    """The claims table in FILE, in the current schema; ValueError naming the file when it is
    missing, unreadable or not a claims table."""
    import pandas as pd

    from topkscope.claims.migrate import current

    if not path.is_file():
        raise ValueError(f"--claims {str(path)!r} does not exist or is not a file")
    try:
        table = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ValueError(f"--claims {str(path)!r} is not a CSV table: {exc}") from None
    missing = [c for c in ("model", "claim", "sparsifier", "verdict") if c not in table]
    if missing:
        raise ValueError(f"--claims {str(path)!r} is not a claims table (no column "
                         f"{', '.join(missing)}; see docs/results.md)")
    return current(table)[0]


def main(args: argparse.Namespace, write: Callable) -> int:
    """write(runs, paths, out_dir, claims=, margin=, perplexity_margin=) is
    topkscope.publish.paper_tables.write_for_paths (cli.py)."""
    from topkscope.analysis.runs import load
    from topkscope.manifest import runs_at

    out = Path(args.tables)
    start = time.perf_counter()
    try:
        if not args.paths and args.claims is None:
            raise ValueError("give run folders or results roots (RUN_OR_RESULTS), or a "
                             "claims table with --claims FILE")
        if out.exists() and not out.is_dir():
            raise ValueError(f"--tables {str(out)!r} is a file; give a folder")
        claims = read_claims(args.claims) if args.claims is not None else None
        damaged: list = []
        quiet_repeats()
        runs = readable_runs(args.paths, load, runs_at, progress_shown=not args.no_progress,
                             damaged=damaged) if args.paths else []
        files = write(runs, args.paths, out, claims=claims, margin=args.margin,
                      perplexity_margin=args.perplexity_margin)
    except ValueError as exc:  # nothing has been written yet
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"cannot write into {str(out)!r}: {exc}", code=1) from None
    tex = sorted(p.stem for p in files if p.suffix == ".tex")
    source = " and ".join(([f"{len(runs)} run(s)"] if args.paths else [])
                          + ([str(args.claims)] if args.claims is not None else []))
    print(f"tables: {len(tex)} LaTeX tables with their CSV from {source} -> {out} "
          f"({', '.join(tex)}; {time.perf_counter() - start:.1f} s)")
    name_damaged("tables", damaged)
    return fail_if_damaged(damaged, len(runs))
