"""How cheap is a training mini-batch? `.batch(idx)` against two slower ways, side by side.

    .venv/bin/python benchmarks/data_batch.py [--quick] [--root DIR] [--threads N]

Methods, all returning the same normalised float32 (B, C, H, W) batch:
  preloaded   ImageDataset.batch(idx): one index into the cached normalised tensor
  per_batch   index the uint8 images, then convert and normalise the batch
  per_sample  a map-style loop: normalise each image, then stack (what a naive Dataset does)
plus `augmented` (preloaded + random crop/flip) for the 3x32x32 stand-in.
Writes results/bench/data_batch.csv: dataset, method, batch_size, ms_per_batch,
ratio_to_preloaded, threads, device.
"""

from __future__ import annotations

import argparse
import sys
import time

import pandas as pd
import torch
from _options import benchmark_parser

from topkscope import data
from topkscope.io import write_bytes_atomic


def per_batch(ds: data.ImageDataset, idx: torch.Tensor) -> torch.Tensor:
    mean, std = ds.stats_tensors(torch.device("cpu"))
    x = ds.images.index_select(0, idx).to(torch.float32).div_(255.0)
    return x.sub_(mean).div_(std)


def per_sample(ds: data.ImageDataset, idx: torch.Tensor) -> torch.Tensor:
    mean, std = ds.stats_tensors(torch.device("cpu"))
    images = ds.images
    return torch.stack([((images[i].float() / 255.0) - mean[0]) / std[0] for i in idx.tolist()])


def seconds_per_call(fn, repeats: int) -> float:
    fn()  # warm-up
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        best = min(best, (time.perf_counter() - start) / repeats)
    return best


def build_parser() -> argparse.ArgumentParser:
    parser = benchmark_parser(__file__, __doc__, quick="20 repeats instead of 200")
    parser.add_argument("--root", default=None, help="data root (default: $TOPKSCOPE_DATA, ./data)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    try:
        cifar = data.load("cifar10", "train", root=args.root, allow_substitute=True)
        datasets = {
            "mnist": data.load("mnist", "train", root=args.root),
            # the real CIFAR-10 if present, else MNIST at 3x32x32 (declared in the label)
            f"cifar10 (substitute: {cifar.substitute})" if cifar.substitute else "cifar10": cifar,
        }
    except data.DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    repeats = 20 if args.quick else 200
    generator = torch.Generator().manual_seed(0)
    rows = []
    for name, ds in datasets.items():
        ds.normalised()  # build the cache outside the timing, as a training loop would
        for batch_size in (32, 128):
            idx = torch.randint(0, len(ds), (batch_size,), generator=generator)
            reference, _ = ds.batch(idx)
            for fn in (per_batch, per_sample):
                got = fn(ds, idx)
                got = got.repeat(1, reference.shape[1] // got.shape[1], 1, 1)
                torch.testing.assert_close(got, reference, rtol=0, atol=1e-5)
            timings = {
                "preloaded": seconds_per_call(lambda: ds.batch(idx), repeats),  # noqa: B023
                "per_batch": seconds_per_call(lambda: per_batch(ds, idx), repeats),  # noqa: B023
                "per_sample": seconds_per_call(
                    lambda: per_sample(ds, idx), max(2, repeats // 10)  # noqa: B023
                ),
            }
            if ds.input_shape[1] == 32:
                timings["augmented"] = seconds_per_call(
                    lambda: ds.batch(idx, augment=True, generator=generator), repeats  # noqa: B023
                )
            for method, seconds in timings.items():
                rows.append({
                    "dataset": name, "method": method, "batch_size": batch_size,
                    "ms_per_batch": seconds * 1e3,
                    "ratio_to_preloaded": seconds / timings["preloaded"],
                    "threads": torch.get_num_threads(), "device": "cpu",
                })
    frame = pd.DataFrame(rows)
    write_bytes_atomic(args.out, frame.to_csv(index=False).encode())
    print(frame.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
