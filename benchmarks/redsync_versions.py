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


def vectors_from_training(steps: int, every: int, data_root: str | None) -> list[tuple[str, torch.Tensor]]:
    from topkscope.comm import SimulatedTransport
    from topkscope.train import build_trainer, validate

    cfg = validate(dict(experiment="redsync-versions", model="fnn3", dataset="mnist", workers=2,
                        batch_size=128, lr=0.01, momentum=0.9, weight_decay=1e-4,
                        no_decay_1d=True, density=0.001, steps=steps, seed=0))
    trainer = build_trainer(cfg, SimulatedTransport(cfg.workers), "cpu", data_root)[0]
    trainer.recorder = Capture(every)
    for _ in range(steps):
        trainer.train_step()
    return trainer.recorder.vectors


def vectors_from_run(run_dir: Path) -> list[tuple[str, torch.Tensor]]:
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


def build_parser() -> argparse.ArgumentParser:
    ap = benchmark_parser(__file__, __doc__,
                          quick=f"without --run, {QUICK_STEPS} steps, u every {QUICK_EVERY}")
    ap.add_argument("--run", type=Path, default=None, help="a result folder with u snapshots")
    ap.add_argument("--steps", type=int, default=None,
                    help=f"training steps without --run (default {STEPS}; --quick {QUICK_STEPS})")
    ap.add_argument("--every", type=int, default=None,
                    help=f"capture u every N steps (default {EVERY}; --quick {QUICK_EVERY})")
    ap.add_argument("--density", type=float, default=0.001)
    ap.add_argument("--data-root", default=None)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.steps = args.steps or (QUICK_STEPS if args.quick else STEPS)
    args.every = args.every or (QUICK_EVERY if args.quick else EVERY)
    if args.steps < 1 or args.every < 1:
        print(f"--steps = {args.steps} and --every = {args.every} must be >= 1", file=sys.stderr)
        return 2
    try:
        vectors = (vectors_from_run(args.run) if args.run is not None
                   else vectors_from_training(args.steps, args.every, args.data_root))
        table = compare(vectors, args.density)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from topkscope.io import write_bytes_atomic

    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(args.out, table.to_csv(index=False, float_format="%.4g").encode())
    summary = table.drop(columns=["vector", "d", "density", "k"]).agg(["min", "median", "max"])
    print(f"{len(table)} vectors, rho = {args.density}, k = {int(table['k'].iloc[0])}")
    print(summary.T.to_string(float_format=lambda v: f"{v:.3f}"))
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
