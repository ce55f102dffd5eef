"""How well each approximate selector sizes k: in its own training, and on probe vectors.

Training: each method trains its own short FNN-3 / MNIST run with the quick profile's settings
(2 workers, batch 128, lr 0.01, momentum 0.9, rho = 0.001, d = 199,210, no warm-up, seed 0);
per step, the smallest and largest count over the workers, over k. Probe vectors
(topkscope.sparsify.probes: generalised normals, Student-t, Laplace with 30 % zeros, a
two-scale mixture, each a drifting sequence of --probe-steps vectors of --probe-d elements,
and each again with its scale jumping 2x to 5x between calls, `probes.scale_jumps`): per
call, count / k. The selectors that record them (tail-k, the published Gaussian-k and
RedSync) also report the thresholds each call evaluated (`last_evaluations`).

    .venv/bin/python benchmarks/selector_counts.py [--steps 700] [--probe-steps 30] [--quick]
    -> results/bench/selector_counts.csv and, per source and method, the share of steps whose
       counts all lie in [2k/3, 4k/3], the median count / k and the evaluations per call
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import torch
from _options import benchmark_parser
from redsync_versions import short_fnn3_trainer

from topkscope.io import write_bytes_atomic
from topkscope.sparsify import get_sparsifier
from topkscope.sparsify.probes import FAMILIES, drifting, scale_jumps

METHODS = ("gaussiank-2019", "dgc", "redsync", "redsync-2019", "sidco", "tail-k")
DENSITY = 0.001


def _evaluations(sparsifier) -> float:
    return float(getattr(sparsifier, "last_evaluations", np.nan))


def in_training(method: str, steps: int, data_root: str | None) -> pd.DataFrame:
    """One row per step of `method`'s own training run."""
    trainer = short_fnn3_trainer(steps, data_root, method)
    rows = []
    for _ in range(steps):
        row = trainer.train_step()
        rows.append({"source": "fnn3-training", "method": method, "step": row["step"],
                     "min_count_over_k": row["selected_min"] / row["k"],
                     "max_count_over_k": row["selected_max"] / row["k"],
                     "evaluations": _evaluations(trainer.sources[0].at(row["step"]))})
    return pd.DataFrame(rows)


def on_probes(method: str, steps: int, d: int) -> pd.DataFrame:
    """One row per call on each family's drifting sequence, and on it with scale jumps (one
    instance per sequence)."""
    k = max(1, round(DENSITY * d))
    rows = []
    sequences = [(family, family, drifting) for family in FAMILIES] + [
        (f"{family}, scale jumps", family, scale_jumps) for family in FAMILIES]
    for source, family, sequence in sequences:
        sparsifier = get_sparsifier(method, seed=0) if method == "dgc" else get_sparsifier(method)
        for step, x in enumerate(sequence(family, steps, d, seed=0)):
            ratio = sparsifier.select(torch.tensor(x, dtype=torch.float32), k).numel() / k
            rows.append({"source": source, "method": method, "step": step,
                         "min_count_over_k": ratio, "max_count_over_k": ratio,
                         "evaluations": _evaluations(sparsifier)})
    return pd.DataFrame(rows)


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per source and method: share of steps in band, median count / k, evaluations per call."""
    band = (table["min_count_over_k"] >= 2 / 3) & (table["max_count_over_k"] <= 4 / 3)
    return (table.assign(in_band=band)
            .groupby(["source", "method"], sort=False)
            .agg(steps=("step", "size"), in_band=("in_band", "mean"),
                 median_count_over_k=("max_count_over_k", "median"),
                 evaluations=("evaluations", "mean"))
            .reset_index())


def build_parser():
    ap = benchmark_parser(__file__, __doc__, quick="100 training steps, 10 probe steps of 2e5")
    ap.add_argument("--steps", type=int, default=700, help="training steps per method")
    ap.add_argument("--probe-steps", type=int, default=30, help="vectors per probe sequence")
    ap.add_argument("--probe-d", type=int, default=1_000_000, help="elements per probe vector")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS,
                    help="the selectors to compare (space-separated)")
    ap.add_argument("--data-root", default=None)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.quick:
        args.steps, args.probe_steps, args.probe_d = 100, 10, 200_000
    for name in ("steps", "probe_steps", "probe_d"):
        if getattr(args, name) < 1:
            print(f"error: --{name.replace('_', '-')} = {getattr(args, name)} must be >= 1",
                  file=sys.stderr)
            return 2
    try:
        table = pd.concat([part for m in args.methods for part in
                           (in_training(m, args.steps, args.data_root),
                            on_probes(m, args.probe_steps, args.probe_d))])
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(args.out, table.to_csv(index=False, float_format="%.4g").encode())
    print(f"rho = {DENSITY}; training: {args.steps} steps per method; probes: "
          f"{args.probe_steps} vectors of {args.probe_d:,} per family")
    table_summary, sources = summary(table), list(dict.fromkeys(table["source"]))
    for title, column, digits in (("share of steps with every count in [2k/3, 4k/3]", "in_band", ".2f"),
                                  ("median count / k", "median_count_over_k", ".3g")):
        print(f"{title}:")
        wide = table_summary.pivot(index="source", columns="method", values=column).loc[sources]
        print(wide.to_string(float_format=lambda v, digits=digits: format(v, digits)))
    for method, rows in table_summary.dropna(subset=["evaluations"]).groupby("method",
                                                                             sort=False):
        print(f"{method} evaluations per call: mean {rows['evaluations'].mean():.2f}, "
              f"largest source mean {rows['evaluations'].max():.2f}")
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
