"""DGC as its authors published it (`dgc`) next to the sampled threshold alone (`dgc-sampled`).

Both run on the same error-compensated gradients u at the same k, with `--draws` independent
samples per vector (seeds 0, 1, ...; each draw is what one training step would do). Per draw:
each method's count / k and the Jaccard index |A & B| / |A | B| of its set with the exact
Top-k set. `dgc` re-selects the exact top k when its sampled threshold keeps more than 1.3 k,
lowers the threshold by x0.8 (at most 10 times) when it keeps fewer than 0.8 k, and never
sends more than k; `dgc-sampled` sends what the sampled threshold keeps.

The vectors: the u snapshots of a result folder (--run DIR), or, without --run, u of rank 0
captured every --every steps of a short FNN-3 / MNIST TopK-SGD run (the quick profile's
settings: 2 workers, batch 128, lr 0.01, momentum 0.9, rho = 0.001, d = 199,210).

    .venv/bin/python benchmarks/dgc_versions.py [--run DIR] [--steps 700] [--every 50]
                                                [--draws 5] [--quick]
    -> results/bench/dgc_versions.csv and a summary (min / median / max over draws) on stdout

--quick: 200 steps, u every 10, 2 draws.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd
import torch

# the sibling script (benchmarks/ is sys.path[0] when a script of it runs) holds the vectors
from _options import benchmark_parser
from redsync_versions import add_vector_arguments, jaccard, vectors_of, write_and_summarise

METHODS = ("dgc", "dgc-sampled")


def compare(vectors: list[tuple[str, torch.Tensor]], density: float, draws: int) -> pd.DataFrame:
    """One row per (vector, draw): count / k of each method and its Jaccard index with Top-k."""
    from topkscope.sparsify import get_sparsifier, k_from_density

    rows = []
    for name, u in vectors:
        k = k_from_density(density, u.numel())
        exact = get_sparsifier("topk").select(u, k)
        for draw in range(draws):
            row = {"vector": name, "draw": draw, "d": u.numel(), "density": density, "k": k}
            for m in METHODS:
                chosen = get_sparsifier(m, seed=draw).select(u, k)
                row[f"{m}_count_over_k"] = chosen.numel() / k
                row[f"jaccard_{m}_vs_topk"] = jaccard(chosen, exact)
            rows.append(row)
    return pd.DataFrame(rows)


def build_parser() -> argparse.ArgumentParser:
    ap = benchmark_parser(__file__, __doc__, quick="200 steps, u every 10, 2 draws")
    add_vector_arguments(ap, steps=700, quick_steps=200)
    ap.add_argument("--draws", type=int, default=5, help="samples drawn per vector")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.quick:
        args.draws = min(args.draws, 2)
    try:
        if args.draws < 1:
            raise ValueError(f"--draws = {args.draws} must be >= 1")
        vectors = vectors_of(args)
        table = compare(vectors, args.density, args.draws)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    write_and_summarise(table, args.out, ["vector", "draw", "d", "density", "k"],
                        f"{len(vectors)} vectors x {args.draws} draws, rho = {args.density}, "
                        f"k = {int(table['k'].iloc[0])}")
    print("share of draws:  count < 0.8 k   = k   > 1.3 k   the exact Top-k set")
    for m in METHODS:
        ratio, same = table[f"{m}_count_over_k"], table[f"jaccard_{m}_vs_topk"] == 1.0
        print(f"  {m:<12} {(ratio < 0.8).mean():13.0%} {(ratio == 1.0).mean():5.0%} "
              f"{(ratio > 1.3).mean():9.0%} {same.mean():20.0%}")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
