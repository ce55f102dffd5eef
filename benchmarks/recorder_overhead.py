"""Recorder overhead: TopK-SGD step time with the recorder on vs off, measured in one run.

Setting (issue: gradient recorder): simulated workers on the CPU, cheap statistics every step
at two densities (moments of g, u and e, exact top-k contraction of u and the three bounds,
the Hill tail index of u with its interval, for the whole model and every layer, and the
recorder's default 256 sampled coordinates of g, u and e), no histograms/snapshots/approximate
sparsifiers. Where the time of a call goes, statistic by statistic: benchmarks/recorder_calls.py. On and
off blocks alternate step by step in the same process so both see the same machine load:
`overhead_pct` is the median over neighbouring (on, off) step pairs of on/off - 1;
`record_pct_of_step` is the time spent inside Recorder.record itself over the median step
without it, and `record_ms_per_call` the mean time of one record() call (one worker's g, u,
e). Peak RSS comes from two fresh processes per model (one on, one off); `rss_growth_mb` is
the resident-memory change from just after the recorder's second flush to the end of the run
(flushes keep it flat: nothing is kept per step).

    .venv/bin/python benchmarks/recorder_overhead.py [--quick] [--models fnn3,resnet20]
    -> results/bench/recorder_overhead.csv
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from _options import benchmark_parser

REPO = Path(__file__).resolve().parents[1]
MODELS = {
    "fnn3": dict(model="fnn3", dataset="mnist", batch_size=128),
    "resnet20": dict(model="resnet20", dataset="cifar10", allow_substitute=True, batch_size=32),
    "vgg16": dict(model="vgg16", dataset="cifar10", allow_substitute=True, batch_size=128),
}
RECORDER = dict(schedule=1, densities=[0.001, 0.01], flush_every=50)


class TimedRecorder:
    """Passes every call to the real Recorder and adds up the seconds spent in record()."""

    def __init__(self, recorder) -> None:
        self.recorder, self.seconds, self.calls = recorder, 0.0, 0

    def wants(self, step: int) -> bool:
        return self.recorder.wants(step)

    def record(self, *args, **kwargs) -> None:
        t0 = time.perf_counter()
        self.recorder.record(*args, **kwargs)
        self.seconds += time.perf_counter() - t0
        self.calls += 1


def make_trainer(name: str, workers: int, data_root: str | None, steps: int):
    from topkscope.comm import SimulatedTransport
    from topkscope.train import build_trainer, validate

    cfg = validate(dict(experiment=f"bench-{name}", workers=workers, steps=steps, lr=0.01,
                        momentum=0.9, density=0.001, seed=0, train_subset=4096,
                        eval_subset=100, **MODELS[name]))
    trainer, substitute = build_trainer(cfg, SimulatedTransport(workers), "cpu", data_root)
    return trainer, substitute


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def child(args: argparse.Namespace) -> None:
    """One fresh process: `steps` steps with the recorder on or off; prints a JSON line.

    The on-process flushes every steps // 6 steps; the growth is measured from just after its
    second flush to the end (allocator and parquet-writer warm-up excluded)."""
    from topkscope.hooks import Recorder

    torch.set_num_threads(args.threads)
    trainer, _ = make_trainer(args.child_model, args.workers, args.data_root, args.steps + 1)
    flush_every = max(2, args.steps // 6)
    with tempfile.TemporaryDirectory() as tmp:
        if args.child_mode == "on":
            trainer.recorder = Recorder(tmp, **{**RECORDER, "flush_every": flush_every})
        samples = []
        for _ in range(args.steps):
            trainer.train_step()
            samples.append(rss_mb())
        if trainer.recorder is not None:
            trainer.recorder.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    base = samples[min(2 * flush_every + 1, len(samples) - 1)]
    print(json.dumps({"peak_rss_mb": peak, "rss_growth_mb": samples[-1] - base,
                      "flush_every": flush_every}))


def measure_in_process(name: str, args: argparse.Namespace) -> dict:
    from topkscope.hooks import Recorder

    steps = 2 + 2 * args.reps * args.block
    trainer, substitute = make_trainer(name, args.workers, args.data_root, steps + 1)
    with tempfile.TemporaryDirectory() as tmp:
        timed = TimedRecorder(Recorder(tmp, **RECORDER))
        for _ in range(2):  # warm-up: allocator, first-touch, plan caches
            trainer.recorder = timed
            trainer.train_step()
        timed.seconds, timed.calls = 0.0, 0
        off, on = [], []
        for _ in range(args.reps):
            for mode, times in (("off", off), ("on", on)):
                trainer.recorder = timed if mode == "on" else None
                for _ in range(args.block):
                    t0 = time.perf_counter()
                    trainer.train_step()
                    times.append(time.perf_counter() - t0)
        timed.recorder.close()
    med_off, med_on = float(np.median(off)), float(np.median(on))
    pairs = np.array(on) / np.array(off)  # neighbouring on/off steps share the machine's load
    record_per_step = timed.seconds / len(on)
    return {
        "model": name, "dataset": MODELS[name]["dataset"], "substitute": substitute or "",
        "d": trainer.layout.d, "layers": len(trainer.layout.names), "workers": args.workers,
        "batch_per_worker": MODELS[name]["batch_size"], "threads": torch.get_num_threads(),
        "device": "cpu", "steps_each": len(on),
        "step_off_s": round(med_off, 4), "step_on_s": round(med_on, 4),
        "overhead_pct": round(100 * (float(np.median(pairs)) - 1), 2),
        "overhead_of_medians_pct": round(100 * (med_on / med_off - 1), 2),
        "record_ms_per_step": round(1e3 * record_per_step, 2),
        "record_pct_of_step": round(100 * record_per_step / med_off, 2),
        "record_ms_per_call": round(1e3 * timed.seconds / max(1, timed.calls), 3),
    }


def memory(name: str, args: argparse.Namespace) -> dict:
    out = {}
    for mode in ("off", "on"):
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child-model", name,
               "--child-mode", mode, "--steps", str(args.rss_steps), "--workers",
               str(args.workers), "--threads", str(args.threads)]
        if args.data_root:
            cmd += ["--data-root", args.data_root]
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
        if res.returncode != 0:
            raise SystemExit(f"memory child for {name} ({mode}) failed:\n{res.stderr}")
        got = json.loads(res.stdout.strip().splitlines()[-1])
        out[f"peak_rss_{mode}_mb"] = round(got["peak_rss_mb"], 1)
        out[f"rss_growth_{mode}_mb"] = round(got["rss_growth_mb"], 1)
    out["rss_steps"] = args.rss_steps
    out["rss_flush_every"] = got["flush_every"]
    return out


def build_parser() -> argparse.ArgumentParser:
    p = benchmark_parser(__file__, __doc__, quick="4 on/off block pairs, 8 steps per RSS child")
    p.add_argument("--models", default="fnn3,resnet20",
                   help=f"comma-separated, from {', '.join(MODELS)}")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--reps", type=int, default=None, help="on/off block pairs")
    p.add_argument("--block", type=int, default=None, help="steps per block")
    p.add_argument("--rss-steps", type=int, default=None)
    p.add_argument("--data-root", default=os.environ.get("TOPKSCOPE_DATA"))
    p.add_argument("--steps", type=int, default=10, help=argparse.SUPPRESS)
    p.add_argument("--child-model", help=argparse.SUPPRESS)
    p.add_argument("--child-mode", choices=("on", "off"), help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    if args.child_model:
        child(args)
        return 0
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    bad = [m for m in names if m not in MODELS]
    if bad:
        p.error(f"unknown model(s) {bad}; choose from {', '.join(MODELS)}")
    if args.workers < 1 or args.threads < 1:
        p.error("--workers and --threads must be at least 1")
    args.reps = args.reps or (4 if args.quick else 30)
    args.block = args.block or 1
    args.rss_steps = args.rss_steps or (8 if args.quick else 60)
    if args.rss_steps < 8:
        p.error("--rss-steps must be at least 8 (growth is measured after two flushes)")
    torch.set_num_threads(args.threads)
    rows = []
    for name in names:
        row = measure_in_process(name, args)
        row.update(memory(name, args))
        rows.append(row)
        print(", ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    from topkscope.io import write_bytes_atomic

    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    write_bytes_atomic(args.out, text.getvalue().encode())
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
