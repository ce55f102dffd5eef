"""`topkscope import FORMAT PATH...`: published measurements read into topkscope's formats.

FORMAT `gaussiank-sgd` (`--results RESULTS`): the SLURM logs of the Gaussian-k authors' training
code, one run per job (its `<prefix>.e<job>` and `<prefix>.o<job>`), given as files or as
folders laid out like the source's `job/` (topkscope.importers.gaussiank_sgd says what is
read). Each job becomes RESULTS/gaussiank-sgd/<job id>/ with manifest.json (launcher
`published`, every logged setting, the source `owner/repo@commit path` of each file),
train.parquet and eval.parquet, found by topkscope.manifest.find_runs like our own runs.
`--source owner/repo@commit` names where the files came from (default: the published logs'
repository and commit). Every log is read before anything is written: a malformed line is one
error naming the file and line (exit 2), and no run folder is written; each folder is built
under a temporary name and renamed into place, so a reader never sees half a run. There `--out
RESULTS` is a deprecated spelling of `--results`.

FORMAT `grace` (`topkscope import grace FILE --out DIR`): the GRACE data release
(sands-lab/grace-data, a pickle of pandas DataFrames) as tidy tables in DIR: measurements.csv
and measurements.parquet (one row per measurement) and provenance.json (source, sha256, the
importer's version). The pickle is never executed: a static scan of its opcodes and a
restricted unpickler admit only the pandas/numpy globals that rebuild a DataFrame
(topkscope.importers.grace); anything else is refused in one line, exit 2, nothing written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from topkscope.commands import NEXT_RELEASE, CommandError

HELP = ("import published measurements: the Gaussian-k authors' logs as result folders, the "
        "GRACE data release as tidy tables")
FORMATS = ("gaussiank-sgd", "grace")
_SOURCE = "kljp/topk_results@4d5937cd6c81f7a3869de9d1355bbc520d72ee27"
OUT_IS_OLD_RESULTS = f"--out is deprecated; use --results ({NEXT_RELEASE})"


class _Out(argparse.Action):
    """`--out DIR`: grace's output folder; for gaussiank-sgd the old spelling of --results
    (stored there too, with the one-line note), when the format is known at that point."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        setattr(namespace, self.dest, values)
        if getattr(namespace, "format", None) == "gaussiank-sgd":
            print(f"{parser.prog}: note: {OUT_IS_OLD_RESULTS}", file=sys.stderr)
            namespace.results = values


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("format", choices=FORMATS, metavar="FORMAT",
                   help=f"what is imported: {', '.join(FORMATS)}")
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                   help="gaussiank-sgd: a job's log file (<prefix>.e<job> / .o<job>) or a "
                        "folder of them; grace: the release's GRACE_data_release.pickle")
    p.add_argument("--results", type=Path, default=None, metavar="DIR",
                   help="gaussiank-sgd: the results root the run folders go under")
    p.add_argument("--out", type=Path, default=None, metavar="DIR", action=_Out,
                   help="grace: the folder the tables and provenance.json are written to "
                        "(gaussiank-sgd: a deprecated spelling of --results)")
    p.add_argument("--source", default=None, metavar="OWNER/REPO@COMMIT",
                   help=f"where the input was published (default: gaussiank-sgd {_SOURCE}; "
                        "grace the release's repository and commit)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def main(args: argparse.Namespace) -> int:
    if args.source is not None and ("@" not in args.source
                                    or "/" not in args.source.split("@")[0]):
        raise CommandError(f"--source {args.source!r} is not owner/repo@commit")
    if args.format == "grace":
        return _grace(args)
    return _gaussiank_sgd(args)


def _grace(args: argparse.Namespace) -> int:
    from topkscope.importers import grace

    if args.results is not None:
        raise CommandError("grace writes tables, not run folders: give --out DIR, not "
                           "--results")
    if args.out is None:
        raise CommandError("--out DIR is required (the folder the GRACE tables go in)")
    if len(args.paths) != 1:
        raise CommandError(f"grace reads one file, the release's {grace.PATH}; got "
                           f"{len(args.paths)} paths")
    if args.out.exists() and not args.out.is_dir():
        raise CommandError(f"--out {str(args.out)!r} is a file; give a folder")
    source = grace.SOURCE if args.source is None else f"{args.source} {args.paths[0].name}"
    try:
        conversion = grace.convert(args.paths[0], source=source)
    except grace.Refused as exc:  # nothing has been written
        raise CommandError(f"{args.paths[0]}: refused: {exc}") from None
    try:
        grace.write(conversion, args.out)
    except OSError as exc:
        raise CommandError(f"cannot write under {str(args.out)!r}: {exc}", code=1) from None
    if conversion.sha256 != grace.RELEASE_SHA256:
        print(f"import: note: sha256 {conversion.sha256} is not the published release's "
              f"({grace.RELEASE_SHA256}); converted all the same", file=sys.stderr)
    runs = conversion.table["run_id"].nunique()
    print(f"import: {len(conversion.table)} measurements of {runs} runs -> "
          f"{args.out / grace.MEASUREMENTS} (+ {grace.MEASUREMENTS_PARQUET}, "
          f"{grace.PROVENANCE})")
    return 0


def _gaussiank_sgd(args: argparse.Namespace) -> int:
    from topkscope import progress
    from topkscope.importers import gaussiank_sgd

    results = args.results
    if results is None and args.out is not None:  # --out given before the format
        print(f"topkscope import: note: {OUT_IS_OLD_RESULTS}", file=sys.stderr)
        results = args.out
    if results is None:
        raise CommandError("--results RESULTS is required (the results root to write under)")
    if results.exists() and not results.is_dir():
        raise CommandError(f"--results {str(results)!r} is a file; give a folder")
    source = args.source or _SOURCE
    try:
        jobs = gaussiank_sgd.find_jobs(args.paths)
        with progress.bar(total=len(jobs), desc="import", unit="job",
                          enabled=not args.no_progress) as bar:
            folders = gaussiank_sgd.import_runs(args.paths, results, source=source,
                                                progress=lambda _job: bar.update())
    except ValueError as exc:  # nothing has been written yet
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"cannot write under {str(results)!r}: {exc}", code=1) from None
    print(f"import: {len(folders)} run(s) -> {results / gaussiank_sgd.EXPERIMENT}")
    return 0
