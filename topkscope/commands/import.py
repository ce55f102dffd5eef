"""`topkscope import FORMAT PATH... --results RESULTS`: published training runs as result folders.

FORMAT `gaussiank-sgd`: the SLURM logs of the Gaussian-k authors' training code, one run per
job (its `<prefix>.e<job>` and `<prefix>.o<job>`), given as files or as folders laid out like
the source's `job/` (topkscope.importers.gaussiank_sgd says what is read). Each job becomes
RESULTS/gaussiank-sgd/<job id>/ with manifest.json (launcher `published`, every logged
setting, the source `owner/repo@commit path` of each file), train.parquet and eval.parquet,
found by topkscope.manifest.find_runs like our own runs. `--source owner/repo@commit` names
where the files came from (default: the published logs' repository and commit).

Every log is read before anything is written: a malformed line is one error naming the file
and line (exit 2), and no run folder is written; each folder is built under a temporary name
and renamed into place, so a reader never sees half a run. `--out RESULTS` is a deprecated
alias of `--results`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from topkscope.commands import CommandError, deprecated

HELP = "import published training runs (the Gaussian-k authors' logs) as result folders"
FORMATS = ("gaussiank-sgd",)
_SOURCE = "kljp/topk_results@4d5937cd6c81f7a3869de9d1355bbc520d72ee27"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("format", choices=FORMATS, metavar="FORMAT",
                   help=f"the log format: {', '.join(FORMATS)}")
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                   help="a job's log file (<prefix>.e<job> / .o<job>) or a folder of them")
    p.add_argument("--results", type=Path, default=None, metavar="DIR",
                   help="the results root the run folders go under")
    deprecated(p, "--out", "--results", type=Path)
    p.add_argument("--source", default=_SOURCE, metavar="OWNER/REPO@COMMIT",
                   help=f"where the logs were published (default {_SOURCE})")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def main(args: argparse.Namespace) -> int:
    from topkscope import progress
    from topkscope.importers import gaussiank_sgd

    results = args.results
    if results is None:
        raise CommandError("--results RESULTS is required (the results root to write under)")
    if results.exists() and not results.is_dir():
        raise CommandError(f"--results {str(results)!r} is a file; give a folder")
    if "@" not in args.source or "/" not in args.source.split("@")[0]:
        raise CommandError(f"--source {args.source!r} is not owner/repo@commit")
    try:
        jobs = gaussiank_sgd.find_jobs(args.paths)
        with progress.bar(total=len(jobs), desc="import", unit="job",
                          enabled=not args.no_progress) as bar:
            folders = gaussiank_sgd.import_runs(args.paths, results, source=args.source,
                                                progress=lambda _job: bar.update())
    except ValueError as exc:  # nothing has been written yet
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"cannot write under {str(results)!r}: {exc}", code=1) from None
    print(f"import: {len(folders)} run(s) -> {results / gaussiank_sgd.EXPERIMENT}")
    return 0
