"""Training throughput with simulated workers: FNN-3 (MNIST) and ResNet-20 (CIFAR-10), P = 4, 16.

One process runs all P workers in turn (topkscope.comm.SimulatedTransport), so a step costs
about P forward/backward passes plus P selections. Reported per configuration: median seconds
per step, samples per second (P * batch / step time), and the per-worker time split. CIFAR-10
is replaced by MNIST at 3x32x32 when its files are missing (column dataset_substitute).

    .venv/bin/python benchmarks/sim_throughput.py            P in {4, 16}, 8 timed steps
    .venv/bin/python benchmarks/sim_throughput.py --quick    2 timed steps; ResNet-20 at P = 4 only

Writes results/bench/sim_throughput.csv (and prints it).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

import numpy as np
import torch
from _options import benchmark_parser

CONFIGS = [  # (model, dataset, batch per worker, lr): the paper's settings
    ("fnn3", "mnist", 128, 0.01),
    ("resnet20", "cifar10", 32, 0.1),
]


def measure(model: str, dataset: str, batch: int, lr: float, workers: int, sparsifier: str,
            steps: int, data_root: str | None) -> dict:
    from topkscope.comm import SimulatedTransport
    from topkscope.train import build_trainer, validate

    cfg = validate(dict(experiment="bench", model=model, dataset=dataset, allow_substitute=True,
                        workers=workers, batch_size=batch, lr=lr, momentum=0.9,
                        weight_decay=1e-4, density=0.001, sparsifier=sparsifier,
                        steps=steps + 1))
    trainer, substitute = build_trainer(cfg, SimulatedTransport(workers), "cpu", data_root)
    trainer.train_step()  # warm-up: first-touch allocations, caches
    times, rows = [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        rows.append(trainer.train_step())
        times.append(time.perf_counter() - t0)
    step_s = float(np.median(times))
    return {"model": model, "dataset": dataset, "dataset_substitute": substitute,
            "workers": workers, "sparsifier": sparsifier, "batch_per_worker": batch,
            "d": trainer.layout.d, "steps_timed": steps, "median_step_s": step_s,
            "samples_per_s": workers * batch / step_s,
            "compute_s_per_worker": float(np.mean([r["time_compute"] for r in rows])),
            "select_s_per_worker": float(np.mean([r["time_select"] for r in rows])),
            "communicate_s": float(np.mean([r["time_communicate"] for r in rows]))}


def build_parser() -> argparse.ArgumentParser:
    parser = benchmark_parser(__file__, __doc__, quick="2 timed steps; ResNet-20 at the fewest workers only")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--workers", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--sparsifiers", nargs="+", default=["topk", "gaussiank"])
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--data", default=None, help="dataset root (default: $TOPKSCOPE_DATA or ./data)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    steps = args.steps or (2 if args.quick else 8)
    torch.set_num_threads(args.threads)

    import pandas as pd

    from topkscope.io import write_bytes_atomic

    logging.getLogger("topkscope.data").setLevel(logging.ERROR)  # substitution: in the table
    rows = [measure(m, ds, b, lr, p, s, steps, args.data)
            for m, ds, b, lr in CONFIGS for p in args.workers for s in args.sparsifiers
            if not (args.quick and m == "resnet20" and p > min(args.workers))]
    df = pd.DataFrame(rows)
    df["threads"] = args.threads
    df["device"] = "cpu"
    write_bytes_atomic(args.out, df.to_csv(index=False).encode())
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(df.drop(columns=["batch_per_worker", "steps_timed", "device"]).to_string(index=False))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
