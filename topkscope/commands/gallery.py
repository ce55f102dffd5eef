"""`topkscope gallery [--results DIR] [--out DIR] [--readme FILE] [--standard-claims CSV]`: publish small copies of the
figures and the README's findings table from a results folder (topkscope.reproduce.gallery,
handed in by topkscope.cli).

Refuses, writing nothing, when the results hold less than what is published (a figure the
gallery has, a findings cell the README shows): one line naming what would be lost, exit 2;
--allow-shrink publishes them anyway.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from topkscope.commands import CommandError

HELP = "publish the figures and findings of a results folder into docs/gallery/ and the README"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results", type=Path, default=Path("results"),
                   help="results folder with figures/ and claims.csv (default: results)")
    p.add_argument("--out", type=Path, default=Path("docs/gallery"),
                   help="gallery folder (default: docs/gallery)")
    p.add_argument("--width", type=int, default=None,
                   help="largest width of a copy in pixels, >= 64 (default 900)")
    p.add_argument("--readme", type=Path, default=None,
                   help="regenerate this README's findings table from <results>/claims.csv")
    p.add_argument("--standard-claims", type=Path, default=None, metavar="CSV",
                   help="also regenerate the README's standard-claims blocks from this claims "
                        "table (the standard profile's, results/reference/claims-standard.csv)")
    p.add_argument("--allow-shrink", action="store_true",
                   help="publish results that lack figures or findings already published "
                        "(default: refuse)")


def main(args: argparse.Namespace, publish: Callable) -> int:
    """publish(**options) is topkscope.reproduce.gallery.publish (see cli.py)."""
    try:
        width = {} if args.width is None else {"width": args.width}
        if args.standard_claims is not None and args.readme is None:
            raise ValueError(f"--standard-claims {args.standard_claims} needs --readme "
                             "(the README whose standard-claims blocks it fills)")
        written = publish(results=args.results, out=args.out, readme=args.readme,
                          allow_shrink=args.allow_shrink, log=print,
                          standard_claims=args.standard_claims, **width)
    except (ValueError, OSError) as exc:
        raise CommandError(str(exc)) from None
    print(f"gallery: {len(written)} figures in {args.out}"
          + (f"; findings of {args.readme} regenerated" if args.readme else ""))
    return 0
