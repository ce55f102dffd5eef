"""MNIST from the standard IDX files under <root>/mnist/ (raw or .gz).

train: 60,000 images, test: 10,000; 28x28 uint8, labels 0..9. Normalisation uses the
usual training-set statistics, mean 0.1307 and std 0.3081 (of pixel / 255).

The IDX file format of MNIST (LeCun): a big-endian header, then the raw array.

    bytes 0-1: 0x00 0x00; byte 2: type code (0x08 = uint8); byte 3: number of dims n;
    then n big-endian uint32 sizes; then prod(sizes) items in C order.
Files may be stored gzip-compressed (name ending in .gz).
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import torch

from topkscope.data.files import (
    MNIST_RAW,
    CorruptDataError,
    MissingDataError,
    check_bytes,
    fetch_command,
)
from topkscope.data.images import ImageDataset

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


_UINT8 = 0x08


def parse_idx(data: bytes, path: Path | str = "<bytes>") -> np.ndarray:
    """The uint8 array stored in IDX bytes; CorruptDataError if the header or length is off."""
    if len(data) < 4:
        raise CorruptDataError(f"{path}: {len(data)} bytes is too short for an IDX header")
    zero, dtype_code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype_code != _UINT8 or not 1 <= ndim <= 4:
        raise CorruptDataError(
            f"{path}: not a uint8 IDX file (magic {data[:4].hex()}, expected 000008 then 01..04)"
        )
    header = 4 + 4 * ndim
    if len(data) < header:
        raise CorruptDataError(f"{path}: truncated IDX header ({len(data)} bytes)")
    shape = struct.unpack(f">{ndim}I", data[4:header])
    n_items = int(np.prod(shape, dtype=np.int64))
    if len(data) != header + n_items:
        raise CorruptDataError(
            f"{path}: IDX header says shape {shape} ({header + n_items:,} bytes) "
            f"but the file has {len(data):,} bytes (truncated or corrupt)"
        )
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


def read_raw(path: Path) -> bytes:
    """The uncompressed bytes of path (gunzipped if it ends in .gz)."""
    if path.suffix == ".gz":
        try:
            return gzip.decompress(path.read_bytes())
        except (OSError, EOFError) as exc:
            raise CorruptDataError(f"{path}: not a valid gzip file ({exc})") from None
    return path.read_bytes()
