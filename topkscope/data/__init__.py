"""Real datasets (MNIST, CIFAR-10, PTB) from their standard files, and worker sharding.

    load(name, split, root=None, allow_substitute=False)  -> ImageDataset | TokenStream
    shard_indices(n, rank, world_size, epoch, seed, shuffle=True) -> LongTensor
    batchify(tokens, batch_size) -> (T, B) LongTensor

root defaults to $TOPKSCOPE_DATA, else ./data; `topkscope fetch --data DIR` puts MNIST and
PTB there.
"""

from __future__ import annotations

import logging
import os

from topkscope.data.cifar10 import load_cifar10
from topkscope.data.files import CorruptDataError, DataError, MissingDataError, data_root
from topkscope.data.images import ImageDataset, mnist_as_cifar10
from topkscope.data.mnist import load_mnist
from topkscope.data.sharding import epoch_permutation, shard_indices
from topkscope.data.text import TokenStream, batchify, bptt_batch, load_ptb, num_windows

DATASETS = ("mnist", "cifar10", "ptb")
SPLITS = {
    "mnist": ("train", "test"),
    "cifar10": ("train", "test"),
    "ptb": ("train", "valid", "test"),
}
# Which real dataset may stand in for a missing one when a run allows it.
SUBSTITUTES = {"cifar10": "mnist"}

_log = logging.getLogger(__name__)


def load(
    name: str,
    split: str,
    root: str | os.PathLike | None = None,
    allow_substitute: bool = False,
    verify: bool = True,
) -> ImageDataset | TokenStream:
    """One split of a dataset from its standard files under root.

    allow_substitute=True: if CIFAR-10's files are missing, MNIST stands in at 3x32x32 and the
    result's `.substitute` says "mnist" (corrupt files are never substituted: they raise).
    verify=False skips checksums (structure is still checked) -- for hand-made test files.
    """
    if name not in SPLITS:
        raise ValueError(f"unknown dataset {name!r}; available: {', '.join(DATASETS)}")
    if split not in SPLITS[name]:
        raise ValueError(f"unknown {name} split {split!r}; allowed: {', '.join(SPLITS[name])}")
    where = data_root(root)
    if name == "mnist":
        return load_mnist(where, split, verify)
    if name == "ptb":
        return load_ptb(where, split, verify)
    try:
        return load_cifar10(where, split, verify)
    except MissingDataError as missing:
        if not allow_substitute:
            raise
        _log.warning("%s -- substituting MNIST at 3x32x32 (allow_substitute=True)", missing)
        return mnist_as_cifar10(load_mnist(where, split, verify))


__all__ = [
    "DATASETS",
    "CorruptDataError",
    "DataError",
    "ImageDataset",
    "MissingDataError",
    "TokenStream",
    "batchify",
    "bptt_batch",
    "data_root",
    "epoch_permutation",
    "load",
    "num_windows",
    "shard_indices",
]
