"""One TopK-SGD communication step on 2 gloo processes: select + exchange + apply.

For each d and each method (dense all-reduce, topk, gaussiank) every process compresses its
own u (error feedback on), the two exchange, and the mean is applied to a d-vector. A step's
time is the slower process's; the table holds medians (and minima, less sensitive to other
load on the machine) over repetitions, measured side by side in one run, and each sparse
method's speedup over the dense all-reduce at the same d. `communicate` includes waiting for
the slower process to finish its selection.

    .venv/bin/python benchmarks/comm.py            d in {1e6, 1e7}, rho = 0.001
    .venv/bin/python benchmarks/comm.py --quick    d in {1e5, 1e6}, fewer repetitions

Writes results/bench/comm.csv (and prints it).
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

METHODS = ("dense", "topk", "gaussiank")


def _step_times(rank: int, world: int, d: int, method: str, rho: float, reps: int) -> dict:
    import torch.distributed as dist

    from topkscope.comm import DistributedTransport, Layout, WorkerCompressor, exchange
    from topkscope.sparsify import get_sparsifier

    transport = DistributedTransport()
    x = torch.zeros(d, requires_grad=True)
    comp = WorkerCompressor(get_sparsifier(method), Layout.of([("x", x)]))
    gen = torch.Generator().manual_seed(1000 * rank + d % 997)
    grads = [torch.randn(d, generator=gen) for _ in range(2)]
    receive = torch.empty(d)  # the mean's buffer, reused across steps as the Trainer does
    total, select, communicate, apply_, nbytes = [], [], [], [], 0
    for rep in range(reps + 2):  # two warm-up steps
        g = grads[rep % 2]
        dist.barrier()
        t0 = time.perf_counter()
        result = exchange(transport, [comp], [g], rho, out=receive)
        t1 = time.perf_counter()
        with torch.no_grad():
            x.add_(result.mean, alpha=-0.01)
        t2 = time.perf_counter()
        slowest = torch.tensor([t2 - t0, result.time_select, result.time_communicate, t2 - t1],
                               dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        if rep >= 2:
            total.append(float(slowest[0]))
            select.append(float(slowest[1]))
            communicate.append(float(slowest[2]))
            apply_.append(float(slowest[3]))
            nbytes = result.bytes_sent
    med = lambda xs: float(np.median(xs))  # noqa: E731
    return {"d": d, "method": method, "median_step_s": med(total), "min_step_s": min(total),
            "median_select_s": med(select),
            "median_communicate_s": med(communicate), "median_apply_s": med(apply_),
            "bytes_sent": nbytes, "reps": reps}


def _worker(rank: int, world: int, store: str, sizes: list[int], rho: float, reps: int,
            threads: int, out: str) -> None:
    import torch.distributed as dist

    torch.set_num_threads(threads)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    rows = [_step_times(rank, world, d, m, rho, reps) for d in sizes for m in METHODS]
    if rank == 0:
        torch.save(rows, out)
    dist.destroy_process_group()


def build_parser() -> argparse.ArgumentParser:
    parser = benchmark_parser(__file__, __doc__, quick="d in {1e5, 1e6}, fewer repetitions")
    parser.add_argument("--density", type=float, default=0.001)
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    sizes = [10**5, 10**6] if args.quick else [10**6, 10**7]
    reps = args.reps or (5 if args.quick else 20)

    import pandas as pd
    import torch.multiprocessing as mp

    from topkscope.io import write_bytes_atomic

    world = 2
    with tempfile.TemporaryDirectory() as tmp:
        result = os.path.join(tmp, "rows.pt")
        mp.spawn(_worker, args=(world, os.path.join(tmp, "store"), sizes, args.density, reps,
                                args.threads, result), nprocs=world, join=True)
        rows = torch.load(result, weights_only=False)
    df = pd.DataFrame(rows)
    dense = df[df.method == "dense"].set_index("d")["median_step_s"]
    df["speedup_vs_dense"] = dense.loc[df.d].to_numpy() / df["median_step_s"]
    dense_min = df[df.method == "dense"].set_index("d")["min_step_s"]
    df["speedup_vs_dense_min"] = dense_min.loc[df.d].to_numpy() / df["min_step_s"]
    df["density"] = args.density
    df["world_size"] = world
    df["backend"] = "gloo"
    df["threads_per_process"] = args.threads
    df["device"] = "cpu"
    write_bytes_atomic(args.out, df.to_csv(index=False).encode())
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(df[["d", "method", "median_step_s", "min_step_s", "median_select_s",
                  "median_communicate_s", "median_apply_s", "bytes_sent", "speedup_vs_dense",
                  "speedup_vs_dense_min"]].to_string(index=False))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
