"""Calibrate alpha and beta of this machine's gloo transport: all-reduce and all-gather.

For P in {2, 4} processes (1 torch thread each) and message sizes from 8 bytes to 32 MB, time
both collectives (barrier, then the collective; the slower process's time; median over
repetitions, every size of one P measured in one run), then fit the alpha-beta model of
topkscope.perf.calibrate per collective and P, and over both P ("all": the row
`topkscope scale --network results/bench/calibrate_comm.csv` uses).

    .venv/bin/python benchmarks/calibrate_comm.py            8 B .. 32 MB, 9 repetitions
    .venv/bin/python benchmarks/calibrate_comm.py --quick    8 B .. 4 MB, 5 repetitions

Writes results/bench/calibrate_comm.csv (the fit) and results/bench/calibrate_comm_timings.csv
(every median). On a 2-core machine shared with other work, 4 processes measure scheduling as
much as the transport: read the fit's relative errors.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np
import torch
from _options import benchmark_parser

COLLECTIVES = ("allreduce", "allgather")


def _time_collectives(rank: int, world: int, sizes: list[int], reps: int) -> list[dict]:
    import torch.distributed as dist

    rows = []
    for nbytes in sizes:
        n = max(1, nbytes // 4)  # float32 elements
        x = torch.ones(n)
        out = [torch.empty(n) for _ in range(world)]
        for coll in COLLECTIVES:
            times = []
            for rep in range(reps + 1):  # one warm-up
                dist.barrier()
                t0 = time.perf_counter()
                if coll == "allreduce":
                    dist.all_reduce(x)
                else:
                    dist.all_gather(out, x)
                dt = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
                dist.all_reduce(dt, op=dist.ReduceOp.MAX)
                if rep:
                    times.append(float(dt))
            rows.append({"collective": coll, "workers": world, "nbytes": n * 4,
                         "seconds": float(np.median(times)), "min_seconds": min(times),
                         "reps": reps})
    return rows


def _worker(rank: int, world: int, store: str, sizes: list[int], reps: int, out: str) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    rows = _time_collectives(rank, world, sizes, reps)
    if rank == 0:
        torch.save(rows, out)
    dist.destroy_process_group()


def measure(worlds: list[int], sizes: list[int], reps: int) -> list[dict]:
    import torch.multiprocessing as mp

    rows = []
    for world in worlds:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "rows.pt")
            mp.spawn(_worker, args=(world, os.path.join(tmp, "store"), sizes, reps, out),
                     nprocs=world, join=True)
            rows += torch.load(out, weights_only=False)
    return rows


def build_parser() -> argparse.ArgumentParser:
    parser = benchmark_parser(__file__, __doc__, quick="sizes up to 4 MB, 5 repetitions")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if any(w < 2 for w in args.workers):
        parser.error(f"--workers must all be >= 2, got {args.workers}")
    top = 22 if args.quick else 25  # 4 MB or 32 MB
    sizes = [8] + [2**e for e in range(10, top + 1, 3)]
    reps = args.reps or (5 if args.quick else 9)

    import pandas as pd

    from topkscope.io import write_bytes_atomic
    from topkscope.perf.calibrate import fit_table

    timings = pd.DataFrame(measure(args.workers, sizes, reps))
    fit = fit_table(timings)
    fit["backend"] = "gloo"
    fit["threads_per_process"] = 1
    fit["cpus"] = os.cpu_count()
    timings_path = args.out.with_name(args.out.stem + "_timings.csv")
    write_bytes_atomic(timings_path, timings.to_csv(index=False).encode())
    write_bytes_atomic(args.out, fit.to_csv(index=False).encode())
    with pd.option_context("display.width", 160):
        print(timings.to_string(index=False))
        print(fit.to_string(index=False))
    print(f"wrote {args.out} and {timings_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
