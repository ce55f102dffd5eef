"""MNIST from the standard IDX files under <root>/mnist/ (raw or .gz).

train: 60,000 images, test: 10,000; 28x28 uint8, labels 0..9. Normalisation uses the
usual training-set statistics, mean 0.1307 and std 0.3081 (of pixel / 255).
"""

from __future__ import annotations

from pathlib import Path

import torch

from topkscope.data.checksums import MNIST_RAW
from topkscope.data.errors import CorruptDataError, MissingDataError
from topkscope.data.idx import parse_idx, read_raw
from topkscope.data.image_dataset import ImageDataset
from topkscope.data.paths import fetch_command
from topkscope.data.verify import check_bytes

SPLITS = ("train", "test")
FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
MEAN = (0.1307,)
STD = (0.3081,)
NUM_CLASSES = 10


def folder(root: Path) -> Path:
    return Path(root) / "mnist"


def find_file(root: Path, name: str) -> Path | None:
    """<root>/mnist/<name>, else <name>.gz there, else None."""
    for candidate in (folder(root) / name, folder(root) / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None


def read_verified(root: Path, name: str, verify: bool = True) -> bytes:
    """Uncompressed bytes of one standard file, checked against its published checksum."""
    path = find_file(root, name)
    if path is None:
        raise MissingDataError(
            f"MNIST file {name} (or {name}.gz) not found in {folder(root)}; "
            f"run `{fetch_command(root)}` (or `make data`)"
        )
    data = read_raw(path)
    if verify:
        remedy = f"delete it and run `{fetch_command(root)}`"
        check_bytes(data, MNIST_RAW[name], path, remedy)
    return data


def load_mnist(root: Path, split: str, verify: bool = True) -> ImageDataset:
    """The MNIST split as an ImageDataset of shape (1, 28, 28)."""
    if split not in FILES:
        raise ValueError(f"unknown MNIST split {split!r}; allowed: {', '.join(SPLITS)}")
    image_name, label_name = FILES[split]
    images = parse_idx(read_verified(root, image_name, verify), folder(root) / image_name)
    labels = parse_idx(read_verified(root, label_name, verify), folder(root) / label_name)
    if images.ndim != 3 or labels.ndim != 1 or images.shape[0] != labels.shape[0]:
        raise CorruptDataError(
            f"{folder(root)}: images {images.shape} and labels {labels.shape} do not match"
        )
    if labels.size and int(labels.max()) >= NUM_CLASSES:
        raise CorruptDataError(f"{folder(root) / label_name}: label {int(labels.max())} > 9")
    x = torch.from_numpy(images.copy()).unsqueeze(1)  # (N, 1, 28, 28)
    y = torch.from_numpy(labels.astype("int64"))
    return ImageDataset("mnist", split, x, y, MEAN, STD, NUM_CLASSES)
