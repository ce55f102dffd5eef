"""The recorder's CPU time per call, in short runs of experiment configs as their profiles set it up.

For each EXPERIMENT:PROFILE this trains --steps steps of the config's resolved settings
(simulated workers, one torch thread, the model, densities and warm-up of that profile) with
the config's own recorder settings (densities, approximate sparsifiers, sparsifier_per_layer,
per-layer rows, kinds) but its schedules replaced: the statistics at every step, the approximate
sparsifiers at every other step, no histograms and no snapshots. Each record() call (one
worker's u) is timed in CPU seconds of the process (time.process_time: robust to other jobs on
a shared machine, which wall times are not) and counted by what it computed:

    stats_ms      a call with the cheap statistics only: the moments of g, u and e and the exact
                  Top-k contraction of u against the bounds, for every row and density
    selectors_ms  a call that also runs the config's approximate sparsifiers on u

and each call's CPU time is split by what it computed (`<stage>_ms`, mean per call with the
cheap statistics only; STAGES, timed by wrapping the recorder's own functions):

    moments_ms      the power sums of g, u and e (e from u's when it is u's residual) and the
                    moments of every row
    topk_ms         the exact top-k of every ranked row (one thresholded pass per vector)
    topk_ratio_ms   delta of every row and density from those tops
    hill_ms         the Hill tail index and its interval of every ranked row and density
    quantized_ms    topk_quantized_ratio (configs with `quantize` only)
    coords_ms       the sampled coordinates' values (coords/)
    columns_ms      the rows' numpy columns and their buffering
    other_ms        the rest: argument checks, e's residual check, the parts' writes

The first two steps (plan caches, allocator) are not counted. `snapshot_mb` is the size of one
raw snapshot of u (float32). `--sparsifier-per-layer true|false` replaces the configs' setting
(e.g. to price the selectors' layer rows). The figures plan (topkscope/reproduce/plan.py) prices
a profile's recorder with these numbers: calls per run x the time of a call.

    .venv/bin/python benchmarks/recorder_calls.py [--quick] [--configs fnn3-mnist:quick,...]
        [--sparsifier-per-layer true|false]
    -> results/bench/recorder_calls.csv
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from _options import benchmark_parser

REPO = Path(__file__).resolve().parents[1]
# the configs whose recorder the CPU profiles run (experiment:profile)
CONFIGS = ("fnn3-mnist:quick", "vgg16-cifar10:quick", "lstm-ptb:quick", "gpt-ptb:quick",
           "resnet20-cifar10:standard", "convergence-fnn3-mnist:quick",
           "convergence-lstm-ptb:standard", "convergence-gpt-ptb:standard")
QUICK_CONFIGS = ("fnn3-mnist:quick", "convergence-fnn3-mnist:quick")
WARMUP_STEPS = 2


# stage -> the functions of topkscope.hooks.recorder (module attribute or Recorder/RowTops
# method) whose CPU time it is
STAGES = {
    "moments": ["Recorder._power_sums", "row_moments"],
    "topk": ["RowTops"],
    "topk_ratio": ["RowTops.top_sums", "topk_ratio_rows"],
    "hill": ["RowTops.hill", "kernel.hill_interval"],
    "quantized": ["Recorder._quantized"],
    "coords": ["Recorder._record_coordinates"],
    "columns": ["stats_columns", "row_statistics"],
}


class StageClock:
    """Wraps the functions of STAGES (while installed) and adds up each stage's CPU seconds."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(STAGES, 0.0)
        self._undo: list = []

    def install(self) -> None:
        from topkscope.hooks import recorder as module

        for stage, names in STAGES.items():
            for name in names:
                owner_name, _, attr = name.rpartition(".")
                owner = getattr(module, owner_name) if owner_name else module
                real = getattr(owner, attr)
                self._undo.append((owner, attr, real))
                setattr(owner, attr, self._timed(stage, real))

    def remove(self) -> None:
        for owner, attr, real in reversed(self._undo):
            setattr(owner, attr, real)
        self._undo = []

    def _timed(self, stage: str, real):
        import functools

        if isinstance(real, type):  # a class (RowTops): time its construction
            clock = self

            class Timed(real):
                def __init__(self, *args, **kwargs):
                    t0 = time.process_time()
                    super().__init__(*args, **kwargs)
                    clock.seconds[stage] += time.process_time() - t0

            Timed.__name__ = real.__name__
            return Timed

        @functools.wraps(real)
        def timed(*args, **kwargs):
            t0 = time.process_time()
            try:
                return real(*args, **kwargs)
            finally:
                self.seconds[stage] += time.process_time() - t0

        return timed

    def take(self) -> dict[str, float]:
        out, self.seconds = self.seconds, dict.fromkeys(STAGES, 0.0)
        return out


class TimedRecorder:
    """Passes every call to the real Recorder and adds up the CPU seconds of record(), apart
    for calls that ran the approximate sparsifiers and calls that did not, and the stages of
    the calls that did not (StageClock)."""

    def __init__(self, recorder, clock: StageClock | None = None) -> None:
        self.recorder = recorder
        self.seconds = {"stats": [], "selectors": []}
        self.stages = {stage: [] for stage in STAGES}
        self.clock = clock
        self.counting = False

    def wants(self, step: int) -> bool:
        return self.recorder.wants(step)

    def record(self, step: int, rank: int, **kwargs) -> None:
        rec = self.recorder
        with_selectors = bool(rec.describe()["sparsifiers"]) and rec.sparsifier_schedule(step)
        if self.clock is not None:
            self.clock.take()
        t0 = time.process_time()
        rec.record(step, rank, **kwargs)
        took = time.process_time() - t0
        split = self.clock.take() if self.clock is not None else {}
        if self.counting:
            self.seconds["selectors" if with_selectors else "stats"].append(took)
            if not with_selectors:
                for stage, seconds in split.items():
                    self.stages[stage].append(seconds)


def measure(experiment: str, profile: str, steps: int, data_root: str | None,
            per_layer: bool | None = None) -> dict:
    from topkscope.comm import SimulatedTransport
    from topkscope.train import build_trainer
    from topkscope.train.config import load_config
    from topkscope.train.run import make_recorder

    path = REPO / "experiments" / f"{experiment}.yaml"
    cfg, _ = load_config(path, profile)
    if not cfg.recorder:
        raise SystemExit(f"{experiment} ({profile}) has no recorder")
    timing = {"schedule": 1, "sparsifier_schedule": {"every": 2}, "hist_schedule": None,
              "snapshot_schedule": None}
    if per_layer is not None:
        timing["sparsifier_per_layer"] = per_layer
    cfg, _ = load_config(path, profile, {"steps": steps, "recorder": {**cfg.recorder, **timing}})
    trainer, substitute = build_trainer(cfg, SimulatedTransport(cfg.workers), "cpu", data_root)
    clock = StageClock()
    with tempfile.TemporaryDirectory() as tmp:
        rec = make_recorder(cfg, Path(tmp), 0, None, trainer.model)
        timed = TimedRecorder(rec, clock)
        trainer.recorder = timed
        clock.install()
        try:
            for step in range(steps):
                timed.counting = step >= WARMUP_STEPS
                trainer.train_step()
        finally:
            clock.remove()
        rec.close()
    stats, sel = (np.array(timed.seconds[k]) for k in ("stats", "selectors"))
    split = {f"{stage}_ms": round(1e3 * float(np.mean(v)), 3) if v else ""
             for stage, v in timed.stages.items()}
    if stats.size:
        split["other_ms"] = round(1e3 * float(stats.mean()) - sum(
            v for v in split.values() if v != ""), 3)
    return {
        "experiment": experiment, "profile": profile, "model": cfg.model,
        "substitute": substitute or "", "d": trainer.layout.d,
        "layers": len(trainer.layout.names), "workers": cfg.workers,
        "densities": len(rec.densities), "sparsifiers": len(rec.describe()["sparsifiers"]),
        "sparsifier_per_layer": rec.sparsifier_per_layer, "threads": torch.get_num_threads(),
        "steps": steps, "stats_calls": stats.size,
        "stats_ms": round(1e3 * float(stats.mean()), 2) if stats.size else "",
        "selector_calls": sel.size,
        "selectors_ms": round(1e3 * float(sel.mean()), 2) if sel.size else "",
        **split,
        "snapshot_mb": round(4 * trainer.layout.d / 1e6, 2),
    }


def build_parser() -> argparse.ArgumentParser:
    p = benchmark_parser(__file__, __doc__, quick="the two FNN-3 configs, 8 steps")
    p.add_argument("--configs", default=None,
                   help=f"comma-separated EXPERIMENT:PROFILE (default: {','.join(CONFIGS)})")
    p.add_argument("--steps", type=int, default=None, help="steps per config (default 24)")
    p.add_argument("--sparsifier-per-layer", choices=("true", "false"), default=None,
                   help="replace the configs' sparsifier_per_layer (default: the config's)")
    p.add_argument("--data-root", default=os.environ.get("TOPKSCOPE_DATA"))
    return p


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    given = args.configs.split(",") if args.configs else (QUICK_CONFIGS if args.quick
                                                          else CONFIGS)
    pairs = [c.strip().split(":") for c in given if c.strip()]
    bad = [":".join(c) for c in pairs if len(c) != 2
           or not (REPO / "experiments" / f"{c[0]}.yaml").is_file()]
    if bad:
        p.error(f"--configs {bad}: each must be EXPERIMENT:PROFILE of an experiments/*.yaml")
    steps = args.steps or (8 if args.quick else 24)
    if steps < WARMUP_STEPS + 2:
        p.error(f"--steps must be at least {WARMUP_STEPS + 2} (the first {WARMUP_STEPS} are "
                f"not counted)")
    torch.set_num_threads(1)
    from topkscope.io import write_bytes_atomic

    per_layer = None if args.sparsifier_per_layer is None else args.sparsifier_per_layer == "true"
    rows = [measure(experiment, profile, steps, args.data_root, per_layer)
            for experiment, profile in pairs]
    table = pd.DataFrame(rows)
    print(table.to_string(index=False))
    write_bytes_atomic(args.out, table.to_csv(index=False).encode())
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
