"""`topkscope scale`: predicted TopK-SGD step time on a network, per method and worker count.

    topkscope scale --model resnet50 --network 10gbe --workers 16 64 256

Compute comes from --compute-s, else the model's complete runs under --results, else the
model-compute benchmark CSV (this machine's CPU).

Prints one row per (method, P): compute, selection and communication seconds, t_step, the
speed-ups over dense and Top-k, the crossover bandwidth, and where each input came from
(measured here, preset, user, nominal). --csv writes the same table (every column).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from topkscope.commands import CommandError

HELP = "predict the TopK-SGD step time (compute, selection, communication) on a network"


def _select_pair(text: str) -> tuple[str, float]:
    method, sep, value = text.partition("=")
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not sep or not method or not seconds >= 0:
        raise argparse.ArgumentTypeError(f"expected METHOD=SECONDS with SECONDS >= 0, got {text!r}")
    return method, seconds


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="model name (topkscope.models.available())")
    p.add_argument("--network", help="preset (1gbe, 10gbe, 25gbe, ib100, nvlink) or a "
                   "calibration CSV of benchmarks/calibrate_comm.py (default with --alpha and "
                   "--beta: none)")
    p.add_argument("--workers", type=int, nargs="+", required=True, metavar="P")
    p.add_argument("--methods", nargs="+", metavar="METHOD",
                   help="sparsifiers (default: dense topk gaussiank gaussiank-2019; gtopk "
                        "= Top-k selection with gTop-k's tree exchange)")
    p.add_argument("--density", type=float, default=0.001, help="rho = k/d (default 0.001)")
    p.add_argument("--alpha", type=float, help="latency, seconds per message (overrides)")
    p.add_argument("--beta", type=float, help="seconds per byte (overrides)")
    p.add_argument("--compute-s", type=float, help="forward + backward seconds per step")
    p.add_argument("--select-s", type=_select_pair, action="append", default=[],
                   metavar="METHOD=S", help="selection seconds of a method (repeatable)")
    p.add_argument("--selection-csv", type=Path,
                   help="selection benchmark CSV (default: RESULTS/bench/selection.csv, else "
                        "the committed CPU reference)")
    p.add_argument("--compute-csv", type=Path,
                   help="model-compute benchmark CSV, used when the model has no complete run "
                        "(default: RESULTS/bench/model_compute.csv, else the committed CPU "
                        "reference)")
    p.add_argument("--results", type=Path, default=Path("results"),
                   help="results root whose runs give compute times and counts")
    p.add_argument("--layout", choices=("two", "packed"), default="two",
                   help="two all-gathers as published (default) or one packed buffer")
    p.add_argument("--unpadded", action="store_true",
                   help="all-gatherv of the real counts (default: padded to the largest)")
    p.add_argument("--algorithm", choices=("ring", "recursive-doubling"), default="ring")
    p.add_argument("--overlap", type=float, default=0.0,
                   help="fraction of compute the exchange may hide behind (default 0: the "
                        "published code does not overlap)")
    p.add_argument("--csv", type=Path, help="write the table here")


def main(args: argparse.Namespace) -> int:
    from topkscope import models
    from topkscope.io import write_bytes_atomic
    from topkscope.perf import model as pm
    from topkscope.perf import report
    from topkscope.perf.networks import resolve
    from topkscope.sparsify import available as sparsifiers

    try:
        if args.model not in models.available():
            raise ValueError(f"unknown model {args.model!r}; available: "
                             f"{', '.join(models.available())}")
        if any(p < 1 for p in args.workers):
            raise ValueError(f"--workers must be >= 1, got {args.workers}")
        if not 0 < args.density <= 1:
            raise ValueError(f"--density must be in (0, 1], got {args.density}")
        methods = args.methods or list(pm.DEFAULT_METHODS)
        known = set(sparsifiers()) | {"gtopk"}
        unknown = [m for m in methods if m not in known]
        if unknown:
            raise ValueError(f"unknown method(s) {unknown}; allowed: {', '.join(sorted(known))}")
        if "dense" not in methods:
            methods = ["dense", *methods]
        if args.compute_s is not None and not args.compute_s >= 0:
            raise ValueError(f"--compute-s must be >= 0, got {args.compute_s}")
        net = resolve(args.network, args.alpha, args.beta)
        opts = pm.Options(layout=args.layout, padded=not args.unpadded,
                          algorithm=args.algorithm, overlap=args.overlap)
        results = args.results if args.results.is_dir() else None
        selection = report.selection_table(results, args.selection_csv)
        compute = report.compute_table(results, args.compute_csv)
        table, notes = report.scaling_table(
            [args.model], [net], sorted(set(args.workers)), methods, density=args.density,
            results_root=results, selection=selection, compute_s=args.compute_s,
            select_s=dict(args.select_s), opts=opts, compute=compute)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if table.empty:
        raise CommandError(f"nothing to predict for {args.model}: " + "; ".join(notes))
    print(f"{args.model}: d = {int(table['d'].iloc[0]):,}, density {args.density:g}, network "
          f"{net.name} (alpha {net.alpha:.3g} s, beta {net.beta:.3g} s/B = "
          f"{net.bandwidth_gbit:.3g} Gbit/s), {opts.label()}")
    for row in table.itertuples(index=False):
        print(f"  P={row.workers:<5} {row.method:<15} t_step {row.t_step * 1e3:10.3f} ms = "
              f"compute {row.t_compute * 1e3:.3f} + select {row.t_select * 1e3:.3f} + comm "
              f"{row.t_comm * 1e3:.3f}; vs dense {row.speedup_vs_dense:.3f}x, vs topk "
              f"{row.speedup_vs_topk:.3f}x; crossover {row.crossover_gbit:.3g} Gbit/s")
        print(f"      sources: compute {row.compute_source}; select {row.select_source}; "
              f"counts {row.count_source}; comm {row.comm_source}")
    if args.csv is not None:
        write_bytes_atomic(args.csv, table.to_csv(index=False).encode())
        print(f"wrote {args.csv}")
    return 0
