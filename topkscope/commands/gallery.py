"""`topkscope gallery [--results DIR] [--gallery DIR] [--readme FILE] [--findings FILE]
[--claims CSV] [--standard-claims CSV] [--text-only]`: publish small copies of the figures,
the README's first screen and the findings tables (docs/findings.md) from a results folder
(topkscope.publish.gallery, handed in by topkscope.cli); --text-only regenerates the text
alone from the claims tables (`make findings`: from the committed reference claims).

Refuses, writing nothing, when the results hold less than what is published (a figure the
gallery has, a findings cell the README shows): one line naming what would be lost, exit 2;
--allow-shrink publishes them anyway.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from topkscope.commands import CommandError, deprecated

HELP = "publish the figures and findings of a results folder into docs/gallery/ and the README"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results", type=Path, default=Path("results"), metavar="DIR",
                   help="results folder with figures/ and claims.csv (default: results)")
    p.add_argument("--gallery", type=Path, default=Path("docs/gallery"), metavar="DIR",
                   help="gallery folder the figures' copies go into (default: docs/gallery)")
    deprecated(p, "--out", "--gallery", type=Path)
    p.add_argument("--width", type=int, default=None,
                   help="largest width of a copy in pixels, >= 64 (default 900)")
    p.add_argument("--readme", type=Path, default=None, metavar="FILE",
                   help="regenerate this README's first screen (headline block) and any "
                        "claims blocks it has from the claims table")
    p.add_argument("--findings", type=Path, default=None, metavar="FILE",
                   help="regenerate this findings document's tables and sentences (claims "
                        "blocks; docs/findings.md) from the claims table")
    p.add_argument("--claims", type=Path, default=None, metavar="FILE",
                   help="the quick profile's claims table (default: <results>/claims.csv)")
    p.add_argument("--standard-claims", type=Path, default=None, metavar="FILE",
                   help="also regenerate the standard-claims blocks and the headline's "
                        "standard lines from this claims table (the standard profile's, "
                        "results/reference/claims-standard.csv)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar while the figures are shrunk")
    p.add_argument("--text-only", action="store_true",
                   help="regenerate only the text (--readme, --findings) from the claims "
                        "tables; no figures are read or written")
    p.add_argument("--allow-shrink", action="store_true",
                   help="publish results that lack figures or findings already published "
                        "(default: refuse)")


def main(args: argparse.Namespace, publish: Callable) -> int:
    """publish(**options) is topkscope.publish.gallery.publish (see cli.py)."""
    from topkscope.validate import output_folder

    try:
        if not args.text_only:
            output_folder("--gallery", args.gallery)
        width = {} if args.width is None else {"width": args.width}
        if args.standard_claims is not None and args.readme is None and args.findings is None:
            raise ValueError(f"--standard-claims {args.standard_claims} needs --readme or "
                             "--findings (the file whose standard-claims blocks it fills)")
        if args.text_only and args.readme is None and args.findings is None:
            raise ValueError("--text-only needs --readme or --findings (the text to "
                             "regenerate)")
        written = publish(results=args.results, out=args.gallery, readme=args.readme,
                          allow_shrink=args.allow_shrink, log=print,
                          standard_claims=args.standard_claims, findings=args.findings,
                          claims=args.claims, text_only=args.text_only,
                          progress=not args.no_progress, **width)
    except (ValueError, OSError) as exc:
        raise CommandError(str(exc)) from None
    texts = [str(f) for f in (args.readme, args.findings) if f is not None]
    print(("gallery: text only" if args.text_only else
           f"gallery: {len(written)} figures in {args.gallery}")
          + (f"; {' and '.join(texts)} regenerated" if texts else ""))
    return 0
