"""Validate the step-time model (topkscope.perf) against real torchrun runs on this machine.

For each model (FNN-3, and FNN-3 widened to 1000-1000 hidden units: 1.8M parameters) and each
P in {2, 4}, one `torch.distributed.run` launch of P gloo processes (1 thread each) builds the
repository's Trainer (topkscope.train.run.build_trainer, the code `topkscope run --launcher
torchrun` runs) once per method (dense, topk, gaussiank, gaussiank-2019) and trains them side
by side: rounds of a few steps of each method in turn, so that load from other work falls on
all methods alike. A step's time is the slowest process's wall clock (barrier, train_step,
max over ranks); per step the largest count over workers, the largest compute and selection
times over ranks and the smallest exchange time (the last process to arrive waits least: its
exchange time is the transfer itself) are recorded.

The model is then fed this machine's inputs (calibration fit, selection benchmark, the dense
run's compute time; see topkscope.perf.validate) and its t_step compared with the median
measured step. Two cores shared by up to four processes measure scheduling as much as
bandwidth: the 4-process rows are the least reliable.

    .venv/bin/python benchmarks/scaling_validation.py            3 rounds x 8 steps per method
    .venv/bin/python benchmarks/scaling_validation.py --quick    FNN-3 only, 2 rounds x 5 steps

Calibrates first (benchmarks/calibrate_comm.py --quick, into results/bench/calibrate_comm.csv)
unless --calibration names a fit; needs MNIST under $TOPKSCOPE_DATA. Writes
results/bench/scaling_validation.csv (and the per-step table *_steps.csv).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _options import benchmark_parser

METHODS = ("dense", "topk", "gaussiank", "gaussiank-2019")
MODELS = {"fnn3": {}, "fnn3-wide": {"hidden": [1000, 1000]}}
CONFIG = Path(__file__).resolve().parents[1] / "experiments" / "fnn3-mnist.yaml"


def _worker(args: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist

    from topkscope.comm.distributed import DistributedTransport
    from topkscope.train.config import load_config
    from topkscope.train.run import build_trainer

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    P, rank = dist.get_world_size(), dist.get_rank()

    class CountingTransport(DistributedTransport):
        """Remembers the largest count over workers of the last sparse exchange."""

        last_max = 0

        def gather_sparse(self, local):
            out = super().gather_sparse(local)
            self.last_max = max(u.count for u in out)
            return out

    trainers = {}
    for method in METHODS:
        overrides = {"workers": P, "launcher": "torchrun", "sparsifier": method, "threads": 1,
                     "model_args": json.loads(args.model_args), "recorder": None,
                     "steps": 10**6}
        cfg, _ = load_config(CONFIG, "quick", overrides)
        transport = CountingTransport()
        trainers[method] = (build_trainer(cfg, transport, "cpu", args.data)[0], transport)
    rows = []
    for rnd in range(args.rounds + 1):  # round 0: warm-up, not kept
        for method, (trainer, transport) in trainers.items():
            for _ in range(args.steps if rnd else 2):
                dist.barrier()
                t0 = time.perf_counter()
                row = trainer.train_step()
                # max over ranks of: wall, compute, select, -exchange (the least waiting)
                t = torch.tensor([time.perf_counter() - t0, row["time_compute"],
                                  row["time_select"], -row["time_communicate"]],
                                 dtype=torch.float64)
                dist.all_reduce(t, op=dist.ReduceOp.MAX)
                if rnd:
                    rows.append({"model": args.model, "workers": P, "method": method,
                                 "d": trainer.layout.d, "density": row["density"],
                                 "wall": float(t[0]), "time_compute": float(t[1]),
                                 "time_select": float(t[2]), "time_communicate": -float(t[3]),
                                 "count_max": transport.last_max if method != "dense"
                                 else trainer.layout.d, "round": rnd})
    if rank == 0:
        Path(args.rows_out).write_text(json.dumps(rows))
    dist.destroy_process_group()
    return 0


def _launch(model: str, P: int, rounds: int, steps: int, data: str | None, out: str) -> None:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
           "--nproc-per-node", str(P), __file__, "--worker", "--model", model,
           "--model-args", json.dumps(MODELS[model]), "--rounds", str(rounds),
           "--steps", str(steps), "--rows-out", out]
    if data:
        cmd += ["--data", data]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run(cmd, check=True, env=env)


def build_parser() -> argparse.ArgumentParser:
    parser = benchmark_parser(__file__, __doc__, quick="FNN-3 only, 2 rounds x 5 steps")
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--calibration", type=Path, default=None,
                        help="an existing calibration fit (default: calibrate now, into "
                             "results/bench/calibrate_comm.csv, just before the runs)")
    parser.add_argument("--selection", type=Path,
                        default=Path("results/reference/bench-cpu/selection.csv"))
    parser.add_argument("--data", default=os.environ.get("TOPKSCOPE_DATA"))
    # worker-side arguments (the script re-runs itself under torch.distributed.run)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", default="fnn3", help=argparse.SUPPRESS)
    parser.add_argument("--model-args", default="{}", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=3, help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=8, help=argparse.SUPPRESS)
    parser.add_argument("--rows-out", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.worker:
        return _worker(args)

    import pandas as pd

    from topkscope.io import write_bytes_atomic
    from topkscope.perf.inputs import read_selection_csv
    from topkscope.perf.validate import validation_table

    if args.calibration is None:  # measured just before the runs, under the same load
        args.calibration = args.out.with_name("calibrate_comm.csv")
        subprocess.run([sys.executable, str(Path(__file__).with_name("calibrate_comm.py")),
                        "--quick", "--workers", *map(str, args.workers),
                        "--out", str(args.calibration)], check=True)
    selection = read_selection_csv(args.selection)
    models = ["fnn3"] if args.quick else list(MODELS)
    rounds, steps = (2, 5) if args.quick else (3, 8)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in models:
            for P in args.workers:
                out = os.path.join(tmp, f"{model}-{P}.json")
                t0 = time.perf_counter()
                _launch(model, P, rounds, steps, args.data, out)
                print(f"{model} P={P}: {time.perf_counter() - t0:.0f} s")
                rows += json.loads(Path(out).read_text())
    steps_df = pd.DataFrame(rows)
    table = validation_table(steps_df, args.calibration, selection)
    table["calibration"] = args.calibration.name
    table["threads_per_process"] = 1
    table["cpus"] = os.cpu_count()
    write_bytes_atomic(args.out.with_name(args.out.stem + "_steps.csv"),
                       steps_df.to_csv(index=False).encode())
    write_bytes_atomic(args.out, table.to_csv(index=False).encode())
    with pd.option_context("display.width", 200):
        print(table[["model", "workers", "method", "measured_step_s", "predicted_step_s",
                     "ratio_pred_over_meas", "measured_comm_s", "predicted_comm_s",
                     "measured_select_s", "predicted_select_s"]].to_string(index=False))
    ratio = table["ratio_pred_over_meas"]
    print(f"median predicted/measured {ratio.median():.3f}; within 0.75-1.33: "
          f"{int(((ratio >= 0.75) & (ratio <= 1.33)).sum())} of {len(ratio)}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
