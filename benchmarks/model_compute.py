"""Forward + backward seconds per step of every paper model on this machine's CPU.

For each model of topkscope.models at its per-worker batch size of the paper's setting (the
authors' published configuration where the paper's table is not in this repository), one
step = forward, cross-entropy loss, backward (no optimizer update, no selection, no
communication: what train.parquet's `time_compute` holds), on synthetic inputs of the
dataset's shape. Timed at 1 thread and at the machine's threads; median of a few repeats
after one warm-up step.

A model whose full-batch step would exceed --max-step-s (estimated from a probe step at a
small batch) is measured at a smaller batch (halved until it fits, never below 8) and its
time scaled linearly to the full batch (an overestimate: small batches use a CPU less well;
columns `batch_measured`, `scaled`, `note`). One whose step would still exceed
10 x --max-step-s at batch 8 (e.g. more threads than free cores on a shared machine) is not
measured: its row says so and has no compute_s. The machine's load average is recorded: on a
shared machine absolute times are upper bounds.

    .venv/bin/python benchmarks/model_compute.py            3-5 repeats, step <= 2 s
    .venv/bin/python benchmarks/model_compute.py --quick    2 repeats, step <= 1 s

Writes results/bench/model_compute.csv (and prints it); topkscope.perf uses it as the compute
time of a model that has no complete run (the fastest thread count's row: on a loaded machine
more threads can be much slower).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np
import torch
from _options import benchmark_parser

from topkscope.perf.workload import WORKLOADS as MODELS
from topkscope.perf.workload import synthetic_step

MIN_BATCH = 8  # never scale from a smaller batch: tiny batches under-use the CPU


def _time(step) -> float:
    t0 = time.perf_counter()
    step()
    return time.perf_counter() - t0


def measure(name: str, threads: int, max_step_s: float, budget_s: float,
            max_repeats: int, give_up_s: float) -> dict:
    from topkscope import models

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = models.create(name)
    model.train()
    full, _, source = MODELS[name]
    probe = min(full, 4)
    _time(synthetic_step(name, model, probe))  # warm-up: allocations, kernel choice
    estimate = _time(synthetic_step(name, model, probe)) * full / probe
    batch = full
    while batch > MIN_BATCH and estimate * batch / full > max_step_s:
        batch = max(MIN_BATCH, batch // 2)
    row = {"model": name, "d": models.count_parameters(model), "batch_per_worker": full,
           "batch_source": source, "threads": threads}
    if estimate * batch / full > give_up_s:  # e.g. more threads than free cores: skip it
        return {**row, "batch_measured": batch, "scaled": batch != full, "repeats": 0,
                "median_s_measured": float("nan"), "min_s_measured": float("nan"),
                "compute_s": float("nan"),
                "note": f"not measured: the probe predicted {estimate * batch / full:.3g} s "
                        f"per step at batch {batch} (limit {give_up_s:g} s)"}
    step = synthetic_step(name, model, batch)
    first = _time(step)  # warm-up at the measured batch
    repeats = int(np.clip(budget_s // max(first, 1e-9), 2, max_repeats))
    times = [_time(step) for _ in range(repeats)]
    median = float(np.median(times))
    return {**row, "batch_measured": batch, "scaled": batch != full, "repeats": repeats, "median_s_measured": median,
            "min_s_measured": float(min(times)), "compute_s": median * full / batch,
            "note": (f"measured at batch {batch}, scaled linearly to {full}" if batch != full
                     else "measured at the full batch")}


def build_parser() -> argparse.ArgumentParser:
    parser = benchmark_parser(__file__, __doc__, quick="2 repeats, steps <= 1 s")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--threads", type=int, nargs="+",
                        default=sorted({1, os.cpu_count() or 1}))
    parser.add_argument("--max-step-s", type=float, default=None,
                        help="largest step timed; bigger ones at a smaller batch (default 2)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if any(t < 1 for t in args.threads):
        parser.error(f"--threads must be >= 1, got {args.threads}")
    max_step = args.max_step_s or (1.0 if args.quick else 2.0)
    if not max_step > 0:
        parser.error(f"--max-step-s must be > 0, got {max_step}")

    import pandas as pd

    from topkscope.io import write_bytes_atomic

    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    rows = []
    for name in args.models:
        for threads in args.threads:
            rows.append(measure(name, threads, max_step, budget_s=3 * max_step,
                                max_repeats=2 if args.quick else 5, give_up_s=10 * max_step))
            print(f"{name:10s} threads {threads}: {rows[-1]['compute_s']:.4f} s "
                  f"({rows[-1]['note']})", file=sys.stderr)
    df = pd.DataFrame(rows)
    df["device"] = "cpu"
    df["torch"] = torch.__version__
    df["machine"] = platform.machine()
    df["cpu_count"] = os.cpu_count()
    df["load_avg_1min"] = f"{load_before:.1f}-{os.getloadavg()[0]:.1f}"
    write_bytes_atomic(args.out, df.to_csv(index=False).encode())
    print(df.drop(columns=["batch_source"]).to_string(index=False))
    print(f"wrote {args.out} in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
