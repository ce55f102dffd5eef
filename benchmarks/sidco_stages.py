"""SIDCo in its own training run: the count it sends and its adapted stage count, per step.

`sidco` (the authors' rule: the stage count M adapts every 5 calls from the mean count / k)
and `sidco-fixed` (3 fixed stages) each train a short FNN-3 / MNIST run with the quick
profile's settings (2 workers, batch 128, lr 0.01, momentum 0.9, rho = 0.001, d = 199,210),
from the same seed. Per step: the smallest and largest count over the workers / k, and each
worker's stage count after the step (sidco only).

    .venv/bin/python benchmarks/sidco_stages.py [--steps 700] [--quick] [--data-root DIR]
    -> results/bench/sidco_stages.csv and a summary (min / median / max over steps) on stdout
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd

# the sibling script (benchmarks/ is sys.path[0] when a script of it runs) holds the trainer
from _options import benchmark_parser
from redsync_versions import short_fnn3_trainer, write_and_summarise

METHODS = ("sidco", "sidco-fixed")


def trace(method: str, steps: int, data_root: str | None) -> pd.DataFrame:
    """One row per step of a training run selecting with `method`."""
    trainer = short_fnn3_trainer(steps, data_root, method)
    rows = []
    for _ in range(steps):
        row = trainer.train_step()
        out = {"method": method, "step": row["step"], "k": row["k"],
               "min_count_over_k": row["selected_min"] / row["k"],
               "max_count_over_k": row["selected_max"] / row["k"]}
        for i, source in enumerate(trainer.sources):
            state = source.state_dict()
            out[f"stages_rank{i}"] = state["stages"] if state is not None else float("nan")
        rows.append(out)
    return pd.DataFrame(rows)


def build_parser() -> argparse.ArgumentParser:
    ap = benchmark_parser(__file__, __doc__, quick="100 steps per method")
    ap.add_argument("--steps", type=int, default=700, help="training steps per method")
    ap.add_argument("--data-root", default=None)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.quick:
        args.steps = 100
    if args.steps < 1:
        print(f"error: --steps = {args.steps} must be >= 1", file=sys.stderr)
        return 2
    try:
        table = pd.concat([trace(m, args.steps, args.data_root) for m in METHODS])
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    write_and_summarise(table, args.out, ["step", "k"],
                        f"{args.steps} steps per method, rho = 0.001, "
                        f"k = {int(table['k'].iloc[0])}", by="method")
    return 0


if __name__ == "__main__":
    sys.exit(main())
