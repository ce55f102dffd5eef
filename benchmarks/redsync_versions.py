"""The two RedSync versions side by side on recorded error-compensated gradients u.

`redsync` (the RedSync paper's search, run until its band) and `redsync-2019` (the
version in the Gaussian-k authors' code, the comparator of the Gaussian-k paper) are run
on the same u at the same k, next to exact Top-k and the published Gaussian-k rule.
Per vector: each method's count / k, and the Jaccard index |A & B| / |A | B| of the two
RedSync sets and of each set with the exact Top-k set.

The vectors: the u snapshots of a result folder (--run DIR, e.g. a quick-profile
fnn3-mnist run), or, without --run, u of rank 0 captured every --every steps of a short
FNN-3 / MNIST TopK-SGD run (the quick profile's settings: 2 workers, batch 128, lr 0.01,
momentum 0.9, rho = 0.001).

    .venv/bin/python benchmarks/redsync_versions.py [--run DIR] [--steps 400] [--every 50]
    .venv/bin/python benchmarks/redsync_versions.py --quick     40 steps, u every 10
    -> results/bench/redsync_versions.csv and a summary on stdout
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from _options import benchmark_parser

STEPS, EVERY = 400, 50
QUICK_STEPS, QUICK_EVERY = 40, 10
METHODS = ("topk", "redsync", "redsync-2019", "gaussiank-2019")


class Capture:
    """A recorder stand-in: keeps rank 0's u at every `every`-th step (from step `every`)."""

    def __init__(self, every: int) -> None:
        self.every, self.vectors = every, []

    def wants(self, step: int) -> bool:
        return step > 0 and step % self.every == 0

    def record(self, step, rank, *, u, e=None, g=None, layout=None, selected=None) -> None:
        if rank == 0:
            self.vectors.append((f"step{step}", u.detach().float().clone()))


def short_fnn3_trainer(steps: int, data_root: str | None, sparsifier: str = "topk"):
    """A TopK-SGD trainer of FNN-3 / MNIST with the quick profile's settings (2 workers, batch
    128, lr 0.01, momentum 0.9, rho = 0.001), selecting with `sparsifier`."""
    from topkscope.comm import SimulatedTransport
    from topkscope.train import build_trainer, validate

    cfg = validate(dict(experiment="selector-versions", model="fnn3", dataset="mnist", workers=2,
                        batch_size=128, lr=0.01, momentum=0.9, weight_decay=1e-4,
                        no_decay_1d=True, density=0.001, steps=steps, seed=0,
                        sparsifier=sparsifier))
    return build_trainer(cfg, SimulatedTransport(cfg.workers), "cpu", data_root)[0]


def vectors_from_training(steps: int, every: int, data_root: str | None) -> list[tuple[str, torch.Tensor]]:
    """u of rank 0 every `every` steps of a short FNN-3 / MNIST TopK-SGD run (rho = 0.001)."""
    trainer = short_fnn3_trainer(steps, data_root)
    trainer.recorder = Capture(every)
    for _ in range(steps):
        trainer.train_step()
    return trainer.recorder.vectors


def vectors_from_run(run_dir: Path) -> list[tuple[str, torch.Tensor]]:
    """The u snapshots of a result folder, by step and rank."""
    from topkscope.analysis.runs import load

    run = load(run_dir)
    snaps = run.snapshots[run.snapshots["kind"] == "u"].sort_values(["step", "rank"])
    if snaps.empty:
        raise ValueError(f"{str(run_dir)!r} holds no u snapshots")
    return [(f"step{int(s)}-rank{int(r)}", torch.from_numpy(run.snapshot(int(s), int(r))))
            for s, r in snaps[["step", "rank"]].itertuples(index=False)]


def jaccard(a: torch.Tensor, b: torch.Tensor) -> float:
    sa, sb = set(a.tolist()), set(b.tolist())
    union = len(sa | sb)
    return len(sa & sb) / union if union else 1.0


def compare(vectors: list[tuple[str, torch.Tensor]], density: float) -> pd.DataFrame:
    from topkscope.sparsify import get_sparsifier, k_from_density

    rows = []
    for name, u in vectors:
        k = k_from_density(density, u.numel())
        sets = {m: get_sparsifier(m).select(u, k) for m in METHODS}
        row = {"vector": name, "d": u.numel(), "density": density, "k": k}
        for m in METHODS:
            row[f"{m}_count_over_k"] = sets[m].numel() / k
        row["jaccard_redsync_vs_redsync_2019"] = jaccard(sets["redsync"], sets["redsync-2019"])
        for m in METHODS[1:]:
            row[f"jaccard_{m}_vs_topk"] = jaccard(sets[m], sets["topk"])
        rows.append(row)
    return pd.DataFrame(rows)


def add_vector_arguments(ap: argparse.ArgumentParser, steps: int, quick_steps: int) -> None:
    """The options that choose the vectors (a run's snapshots or a short training) and the
    density; shared by the scripts that compare selector versions (--quick and --out come from
    benchmark_parser)."""
    ap.add_argument("--run", type=Path, default=None, help="a result folder with u snapshots")
    ap.add_argument("--steps", type=int, default=None,
                    help=f"training steps without --run (default {steps}; --quick {quick_steps})")
    ap.add_argument("--every", type=int, default=None,
                    help=f"capture u every N steps (default {EVERY}; --quick {QUICK_EVERY})")
    ap.add_argument("--density", type=float, default=0.001)
    ap.add_argument("--data-root", default=None)
    ap.set_defaults(default_steps=steps, quick_steps=quick_steps)


def vectors_of(args: argparse.Namespace) -> list[tuple[str, torch.Tensor]]:
    """The vectors the options of add_vector_arguments name; ValueError on bad options."""
    args.steps = args.steps or (args.quick_steps if args.quick else args.default_steps)
    args.every = args.every or (QUICK_EVERY if args.quick else EVERY)
    if args.steps < 1 or args.every < 1:
        raise ValueError(f"--steps = {args.steps} and --every = {args.every} must be >= 1")
    if not 0.0 < args.density <= 1.0:
        raise ValueError(f"--density = {args.density} is outside the allowed range (0, 1]")
    if args.run is not None:
        return vectors_from_run(args.run)
    return vectors_from_training(args.steps, args.every, args.data_root)


def write_and_summarise(table: pd.DataFrame, out: Path, keys: list[str], header: str,
                        by: str | None = None) -> None:
    """Write the CSV atomically and print min / median / max of every column but `keys`
    (and `by`), for each value of the column `by` when given."""
    from topkscope.io import write_bytes_atomic

    out.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(out, table.to_csv(index=False, float_format="%.4g").encode())
    print(header)
    groups = table.groupby(by, sort=False) if by else [(None, table)]
    for name, part in groups:
        summary = part.drop(columns=keys + ([by] if by else [])).agg(["min", "median", "max"])
        if name is not None:
            print(f"{by} = {name} ({len(part)} rows):")
        print(summary.T.to_string(float_format=lambda v: f"{v:.3f}"))
    print(f"-> {out}")


def build_parser() -> argparse.ArgumentParser:
    ap = benchmark_parser(__file__, __doc__,
                          quick=f"without --run, {QUICK_STEPS} steps, u every {QUICK_EVERY}")
    add_vector_arguments(ap, steps=STEPS, quick_steps=QUICK_STEPS)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        table = compare(vectors_of(args), args.density)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    write_and_summarise(table, args.out, ["vector", "d", "density", "k"],
                        f"{len(table)} vectors, rho = {args.density}, "
                        f"k = {int(table['k'].iloc[0])}")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
