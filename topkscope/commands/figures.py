"""`topkscope figures`: run the profile's experiments, draw every figure, write the claims table.

The options are parsed here; the figures driver (topkscope.reproduce.driver) is handed in by
topkscope.cli, so `commands` and `reproduce` never import each other.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from topkscope.commands import CommandError, claims, list_option

HELP = "run the experiments of a profile (skipping complete ones) and draw every figure"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default="quick", choices=("quick", "standard", "full"),
                   help="quick: the distribution study and FNN-3 convergence, 20 minutes on a "
                        "2-core CPU; standard: the convergence models quick cannot afford "
                        "(LSTM-PTB, GPT-PTB), 120 minutes on 2 cores; full: the paper's settings "
                        "(default quick)")
    p.add_argument("--results", type=Path, metavar="DIR",
                   help="results root (runs, bench/, figures/, claims.csv); default: results "
                        "for the quick profile, results/<profile> for the others (as `make "
                        "reproduce-figures PROFILE=...`)")
    p.add_argument("--experiments", type=Path, default=Path("experiments"), metavar="DIR",
                   help="folder of experiment YAMLs (default: experiments)")
    p.add_argument("--benchmarks", type=Path, default=Path("benchmarks"), metavar="DIR",
                   help="folder of benchmark scripts (default: benchmarks)")
    p.add_argument("--data", type=Path, metavar="DIR",
                   help="dataset root (default: $TOPKSCOPE_DATA or ./data)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bars (the runs' and the claims'): plain lines only")
    list_option(p, "--only", metavar="EXPERIMENT",
                help="restrict to these experiments of the plan, or of your own runs (DDP hook, "
                     "Recorder) under --results, which are drawn, never run; space-separated "
                     "(repeatable)")
    p.add_argument("--no-run", action="store_true",
                   help="run nothing (no training, no benchmark): draw from complete runs "
                        "and benchmark tables that already exist")
    p.add_argument("--no-bench", action="store_true", help="never start a benchmark")
    p.add_argument("--no-notebooks", action="store_true",
                   help="do not execute the notebooks into <results>/notebooks/ (+ HTML)")
    p.add_argument("--no-tables", action="store_true",
                   help="do not write the CSV + LaTeX tables into <results>/tables/")
    p.add_argument("--launcher", choices=("sim", "torchrun"),
                   help="how `topkscope run` starts the workers (default: as each config says)")
    p.add_argument("--parallel", type=int, metavar="N",
                   help="training runs at a time (default: 2 in the quick and standard "
                        "profiles on a 2+-core CPU, each run using one thread; 1 in the full "
                        "profile)")
    p.add_argument("--selection-csv", type=Path, metavar="FILE",
                   help="selection benchmark CSV for the predictions (e.g. benchmarks/"
                        "selection.py run on a GPU; default: the first of RESULTS/bench/"
                        "selection.csv and the committed references measured on the compute's "
                        "device)")
    claims.add_margin_arguments(p)
    p.add_argument("--dry-run", action="store_true",
                   help="print every run folder, its state and its `topkscope run` command; "
                        "run nothing (e.g. to submit the full profile to a cluster)")


def default_results(profile: str) -> Path:
    """results for the quick profile, results/<profile> otherwise: each profile's runs and
    claims in their own folder, where the Makefile puts them."""
    return Path("results") if profile == "quick" else Path("results", profile)


def main(args: argparse.Namespace, driver: Callable) -> int:
    """driver(log, **options) runs the figures driver with these Options fields (see cli.py).
    SIGINT/SIGTERM: the driver stops the runs in flight cleanly and raises RunInterrupted;
    its one line goes to stderr and the exit status is 128 + the signal."""
    from topkscope.interrupts import RunInterrupted

    if args.results is None:
        args.results = default_results(args.profile)
    options = dict(profile=args.profile, results_root=args.results,
                   experiments_dir=args.experiments, benchmarks_dir=args.benchmarks,
                   data_root=args.data, only=args.only, run=not args.no_run,
                   bench=not args.no_bench, launcher=args.launcher, dry_run=args.dry_run,
                   parallel=args.parallel, notebooks=not args.no_notebooks,
                   tables=not args.no_tables, selection_csv=args.selection_csv,
                   margin=args.margin, perplexity_margin=args.perplexity_margin,
                   progress=not args.no_progress)
    from topkscope.validate import output_folder

    try:
        output_folder("--results", args.results)
        outcome = driver(lambda m: print(m, flush=True), **options)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    except RunInterrupted as exc:
        print(f"topkscope figures: {exc}", file=sys.stderr, flush=True)
        return exc.exit_status
    return 1 if outcome.failures else 0
