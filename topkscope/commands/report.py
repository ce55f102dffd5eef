"""`topkscope report RUN_OR_RESULTS... [--out FILE.html]`: one self-contained HTML page (figures
embedded, no network) for a user's own run, a folder of runs or a whole profile's results:
what ran, the claims with their verdicts and causes, the figures with their captions, the
predicted scaling for the runs' model size with its inputs, and where each table lies
(topkscope.publish.report, handed in by topkscope.cli).

Bad input (a path that holds no complete or failed run, a file, an empty folder, another
tool's run folder; --out a folder or not .html): one line, exit 2, nothing written. A damaged
run (a manifest or a table that cannot be read) found under a results root or experiment folder
is named on stderr and left out; the page of the others is written, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from topkscope.commands import CommandError
from topkscope.commands.claims import (
    add_margin_arguments,
    fail_if_damaged,
    name_damaged,
    quiet_repeats,
)

HELP = "one self-contained HTML page of runs: what ran, claims, figures, predicted scaling"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", type=Path, metavar="RUN_OR_RESULTS",
                   help="run folder, experiment folder or results root (its complete and "
                        "failed runs are used; a profile's results root with figures/index.md "
                        "and claims.csv is shown as make reproduce-figures wrote it)")
    p.add_argument("--out", type=Path, default=Path("report.html"), metavar="FILE.html",
                   help="the page to write (default: ./report.html)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_margin_arguments(p)


def main(args: argparse.Namespace, write: Callable) -> int:
    """write(paths, out, progress=, margin=, perplexity_margin=) is
    topkscope.publish.report.write_report (cli.py)."""
    out = Path(args.out)
    start = time.perf_counter()
    try:
        if out.is_dir():
            raise ValueError(f"--out {str(out)!r} is a folder; give a file name (e.g. "
                             f"{out / 'report.html'})")
        if out.suffix.lower() not in (".html", ".htm"):
            raise ValueError(f"--out {str(out)!r} is not an .html file; give e.g. report.html")
        if not out.parent.is_dir():
            raise ValueError(f"--out {str(out)!r}: its folder {str(out.parent)!r} does not "
                             "exist (or is a file)")
        quiet_repeats()
        report = write(args.paths, out, progress=not args.no_progress, margin=args.margin,
                       perplexity_margin=args.perplexity_margin)
    except ValueError as exc:  # nothing has been written
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"cannot write {str(out)!r}: {exc}", code=1) from None
    for note in report.skipped:
        print(f"report: {note}", file=sys.stderr)
    print(f"report: {len(report.runs)} run(s), {len(report.claims)} claims rows, "
          f"{len(report.figures)} figures -> {out} ({out.stat().st_size / 1e6:.2f} MB, "
          f"{time.perf_counter() - start:.1f} s)")
    name_damaged("report", report.damaged)
    return fail_if_damaged(report.damaged, len(report.runs))
