"""MNIST from the real IDX files: counts, shapes, checksums, normalisation, bad files."""

from __future__ import annotations

import gzip
import hashlib
import shutil

import numpy as np
import pytest
import torch

from tests.test_data_helpers import MNIST_NAMES, require
from topkscope import data
from topkscope.data import mnist
from topkscope.data.files import MNIST_RAW, CorruptDataError, MissingDataError

# Published per-digit counts of the MNIST training and test sets.
TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


@pytest.fixture(scope="module")
def root(data_root):
    require(data_root, "mnist", MNIST_NAMES)
    return data_root


@pytest.fixture(scope="module")
def train(root):
    return data.load("mnist", "train", root=root)


@pytest.fixture(scope="module")
def test_split(root):
    return data.load("mnist", "test", root=root)


def test_real_files_match_both_checksums(root):
    for name in MNIST_NAMES:
        raw = (root / "mnist" / name).read_bytes()
        assert len(raw) == MNIST_RAW[name].size
        assert hashlib.md5(raw).hexdigest() == MNIST_RAW[name].md5
        assert hashlib.sha256(raw).hexdigest() == MNIST_RAW[name].sha256


@pytest.mark.parametrize(
    "split, n, counts", [("train", 60_000, TRAIN_COUNTS), ("test", 10_000, TEST_COUNTS)]
)
def test_counts_shapes_and_label_histogram(root, train, test_split, split, n, counts):
    ds = train if split == "train" else test_split
    assert len(ds) == n
    assert ds.images.shape == (n, 1, 28, 28)
    assert ds.images.dtype == torch.uint8
    assert ds.labels.dtype == torch.int64
    assert torch.bincount(ds.labels, minlength=10).tolist() == counts
    assert ds.input_shape == (1, 28, 28) and ds.num_classes == 10
    assert ds.name == "mnist" and ds.substitute is None


def test_pixels_are_the_idx_payload(root, test_split):
    raw = (root / "mnist" / "t10k-images-idx3-ubyte").read_bytes()
    payload = np.frombuffer(raw[16:], dtype=np.uint8).reshape(10_000, 28, 28)
    assert np.array_equal(test_split.images[:, 0].numpy(), payload)
    labels = np.frombuffer((root / "mnist" / "t10k-labels-idx1-ubyte").read_bytes()[8:], np.uint8)
    assert np.array_equal(test_split.labels.numpy(), labels.astype(np.int64))


def test_normalisation_constants_are_the_training_statistics(train):
    # exact float64 moments from the 256-bin pixel histogram
    counts = np.bincount(train.images.numpy().ravel(), minlength=256).astype(np.float64)
    values = np.arange(256) / 255.0
    mean = (counts * values).sum() / counts.sum()
    std = np.sqrt((counts * (values - mean) ** 2).sum() / counts.sum())
    assert mean == pytest.approx(mnist.MEAN[0], abs=1e-4)
    assert std == pytest.approx(mnist.STD[0], abs=1e-4)


def test_batch_matches_float64_reference(train):
    idx = torch.tensor([0, 59_999, 17, 17, 4242])
    x, y = train.batch(idx)
    assert x.shape == (5, 1, 28, 28) and x.dtype == torch.float32
    ref = (train.images[idx].double() / 255.0 - mnist.MEAN[0]) / mnist.STD[0]
    torch.testing.assert_close(x.double(), ref, rtol=0, atol=1e-6)
    assert torch.equal(y, train.labels[idx])


def test_batch_rejects_bad_indices(train):
    with pytest.raises(ValueError, match=r"allowed \[0, 59999\]"):
        train.batch(torch.tensor([0, 60_000]))
    with pytest.raises(ValueError, match="1-D int64"):
        train.batch(torch.tensor([0.0, 1.0]))


def test_gzip_files_load_identically(root, tmp_path, test_split):
    for name in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        raw = (root / "mnist" / name).read_bytes()
        (tmp_path / "mnist").mkdir(exist_ok=True)
        (tmp_path / "mnist" / f"{name}.gz").write_bytes(gzip.compress(raw, compresslevel=1))
    ds = data.load("mnist", "test", root=tmp_path)
    assert torch.equal(ds.images, test_split.images)
    assert torch.equal(ds.labels, test_split.labels)


def test_truncated_file_is_a_one_line_checksum_error(root, tmp_path):
    folder = tmp_path / "mnist"
    folder.mkdir()
    shutil.copy(root / "mnist" / "t10k-images-idx3-ubyte", folder)
    raw = (root / "mnist" / "t10k-labels-idx1-ubyte").read_bytes()
    (folder / "t10k-labels-idx1-ubyte").write_bytes(raw[:-100])
    with pytest.raises(CorruptDataError) as info:
        data.load("mnist", "test", root=tmp_path)
    message = str(info.value)
    assert "\n" not in message
    assert "t10k-labels-idx1-ubyte" in message and "checksum mismatch" in message
    # Without checksums the IDX structure check still catches the truncation.
    with pytest.raises(CorruptDataError, match="truncated or corrupt"):
        data.load("mnist", "test", root=tmp_path, verify=False)


def test_flipped_byte_fails_the_checksum(root, tmp_path):
    folder = tmp_path / "mnist"
    folder.mkdir()
    raw = bytearray((root / "mnist" / "t10k-labels-idx1-ubyte").read_bytes())
    raw[100] = (raw[100] + 1) % 10
    (folder / "t10k-labels-idx1-ubyte").write_bytes(bytes(raw))
    shutil.copy(root / "mnist" / "t10k-images-idx3-ubyte", folder)
    with pytest.raises(CorruptDataError, match="md5"):
        data.load("mnist", "test", root=tmp_path)


def test_missing_files_name_the_file_and_the_fix(tmp_path):
    with pytest.raises(MissingDataError) as info:
        data.load("mnist", "train", root=tmp_path)
    message = str(info.value)
    assert "train-images-idx3-ubyte" in message and f"topkscope fetch --data {tmp_path}" in message
    assert "\n" not in message


def test_unknown_names_and_splits_list_the_allowed_ones(root):
    with pytest.raises(ValueError, match="available: mnist, cifar10, ptb"):
        data.load("imagenet", "train", root=root)
    with pytest.raises(ValueError, match="allowed: train, test"):
        data.load("mnist", "valid", root=root)


def test_default_root_comes_from_the_environment(root, monkeypatch):
    monkeypatch.setenv("TOPKSCOPE_DATA", str(root))
    assert len(data.load("mnist", "test")) == 10_000
