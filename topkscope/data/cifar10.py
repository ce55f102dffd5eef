"""CIFAR-10 from the official *binary* batches (never the pickled version).

Each file is a sequence of 3,073-byte records: 1 label byte (0..9), then 1,024 red,
1,024 green, 1,024 blue pixel bytes, each plane row-major 32x32. train = data_batch_1..5
(50,000 images), test = test_batch (10,000). Looked for in <root>/cifar10/,
<root>/cifar10/cifar-10-batches-bin/ and <root>/cifar-10-batches-bin/.
Normalisation: training-set channel means (0.4914, 0.4822, 0.4465), stds (0.2470, 0.2435, 0.2616).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from topkscope.data.files import (
    CIFAR10_BATCHES,
    CorruptDataError,
    MissingDataError,
    check_bytes,
    fetch_command,
)
from topkscope.data.images import ImageDataset

SPLITS = ("train", "test")
FILES = {
    "train": tuple(f"data_batch_{i}.bin" for i in range(1, 6)),
    "test": ("test_batch.bin",),
}
RECORD_BYTES = 1 + 3 * 32 * 32
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)
NUM_CLASSES = 10
CLASSES = (
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
)


def candidate_folders(root: Path) -> list[Path]:
    root = Path(root)
    return [
        root / "cifar10",
        root / "cifar10" / "cifar-10-batches-bin",
        root / "cifar-10-batches-bin",
    ]


def find_folder(root: Path, split: str) -> Path | None:
    """The first candidate folder holding every file of split, else None."""
    for candidate in candidate_folders(root):
        if all((candidate / name).is_file() for name in FILES[split]):
            return candidate
    return None


def parse_batch(data: bytes, path: Path | str = "<bytes>") -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 (n,3,32,32), labels uint8 (n,)) from one binary batch file's bytes."""
    if len(data) == 0 or len(data) % RECORD_BYTES:
        raise CorruptDataError(
            f"{path}: {len(data):,} bytes is not a positive multiple of the "
            f"{RECORD_BYTES}-byte CIFAR-10 record (truncated or not a binary batch)"
        )
    records = np.frombuffer(data, dtype=np.uint8).reshape(-1, RECORD_BYTES)
    labels = records[:, 0]
    if int(labels.max()) >= NUM_CLASSES:
        raise CorruptDataError(f"{path}: label byte {int(labels.max())} outside 0..9")
    return records[:, 1:].reshape(-1, 3, 32, 32), labels


def load_cifar10(root: Path, split: str, verify: bool = True) -> ImageDataset:
    """The CIFAR-10 split as an ImageDataset of shape (3, 32, 32).

    verify=True checks each file's size and published SHA-1 (the official files);
    verify=False checks the record structure only (for hand-made files in tests).
    """
    if split not in FILES:
        raise ValueError(f"unknown CIFAR-10 split {split!r}; allowed: {', '.join(SPLITS)}")
    where = find_folder(root, split)
    if where is None:
        names = ", ".join(FILES[split])
        raise MissingDataError(
            f"CIFAR-10 {split} files ({names}) not found in {Path(root) / 'cifar10'}; run "
            f"`{fetch_command(root, '--datasets cifar10')}` where the network allows, or copy "
            f"cifar-10-batches-bin/ from cifar-10-binary.tar.gz there"
        )
    images, labels = [], []
    for name in FILES[split]:
        path = where / name
        data = path.read_bytes()
        if verify:
            check_bytes(data, CIFAR10_BATCHES[name], path, "replace it with the official file")
        x, y = parse_batch(data, path)
        images.append(x)
        labels.append(y)
    x = torch.from_numpy(np.concatenate(images))
    y = torch.from_numpy(np.concatenate(labels).astype(np.int64))
    return ImageDataset("cifar10", split, x, y, MEAN, STD, NUM_CLASSES)
