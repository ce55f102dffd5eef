"""CIFAR-10 binary batches (tiny files written here in the exact format) and the MNIST stand-in."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.test_data_helpers import MNIST_NAMES, require
from topkscope import data
from topkscope.data import cifar10, mnist
from topkscope.data.files import CorruptDataError, MissingDataError

RECORDS_PER_FILE = 3


def write_batches(folder, records=RECORDS_PER_FILE, seed=0):
    """Write the six official file names with random records; return {name: (pixels, labels)}."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for split in ("train", "test"):
        for name in cifar10.FILES[split]:
            labels = rng.integers(0, 10, records, dtype=np.uint8)
            # planes: red 1024 bytes, green 1024, blue 1024, each row-major 32x32
            pixels = rng.integers(0, 256, (records, 3, 32, 32), dtype=np.uint8)
            with open(folder / name, "wb") as fh:
                for label, image in zip(labels, pixels):
                    fh.write(bytes([int(label)]))
                    for channel in range(3):
                        fh.write(image[channel].tobytes(order="C"))
            written[name] = (pixels, labels)
    return written


def test_reads_the_exact_binary_layout(tmp_path):
    written = write_batches(tmp_path / "cifar10")
    train = data.load("cifar10", "train", root=tmp_path, verify=False)
    test = data.load("cifar10", "test", root=tmp_path, verify=False)
    assert len(train) == 5 * RECORDS_PER_FILE and len(test) == RECORDS_PER_FILE
    assert train.images.shape == (15, 3, 32, 32) and train.images.dtype == torch.uint8
    expected = np.concatenate([written[n][0] for n in cifar10.FILES["train"]])
    labels = np.concatenate([written[n][1] for n in cifar10.FILES["train"]]).astype(np.int64)
    assert np.array_equal(train.images.numpy(), expected)
    assert np.array_equal(train.labels.numpy(), labels)
    assert np.array_equal(test.images.numpy(), written["test_batch.bin"][0])
    assert train.input_shape == (3, 32, 32) and train.num_classes == 10
    assert train.substitute is None and train.name == "cifar10"


def test_batch_normalises_per_channel_like_a_float64_reference(tmp_path):
    write_batches(tmp_path / "cifar10")
    train = data.load("cifar10", "train", root=tmp_path, verify=False)
    idx = torch.tensor([14, 0, 3])
    x, y = train.batch(idx)
    mean = torch.tensor(cifar10.MEAN, dtype=torch.float64).view(1, 3, 1, 1)
    std = torch.tensor(cifar10.STD, dtype=torch.float64).view(1, 3, 1, 1)
    ref = (train.images[idx].double() / 255 - mean) / std
    torch.testing.assert_close(x.double(), ref, rtol=0, atol=1e-5)
    assert torch.equal(y, train.labels[idx])


def test_official_layout_folder_is_found(tmp_path):
    write_batches(tmp_path / "cifar-10-batches-bin")
    assert len(data.load("cifar10", "test", root=tmp_path, verify=False)) == RECORDS_PER_FILE


def test_tiny_files_fail_the_official_checksum(tmp_path):
    write_batches(tmp_path / "cifar10")
    pattern = r"data_batch_1\.bin: checksum mismatch \(size 9,219"
    with pytest.raises(CorruptDataError, match=pattern):
        data.load("cifar10", "train", root=tmp_path)


def test_truncated_record_and_bad_label_are_rejected(tmp_path):
    folder = tmp_path / "cifar10"
    write_batches(folder)
    raw = (folder / "test_batch.bin").read_bytes()
    (folder / "test_batch.bin").write_bytes(raw[:-5])
    with pytest.raises(CorruptDataError, match="not a positive multiple of the 3073-byte"):
        data.load("cifar10", "test", root=tmp_path, verify=False)
    (folder / "test_batch.bin").write_bytes(bytes([10]) + raw[1:])
    with pytest.raises(CorruptDataError, match="label byte 10 outside 0..9"):
        data.load("cifar10", "test", root=tmp_path, verify=False)


def test_missing_files_are_a_clear_error(tmp_path):
    with pytest.raises(MissingDataError) as info:
        data.load("cifar10", "train", root=tmp_path)
    message = str(info.value)
    assert "data_batch_1.bin" in message and "--datasets cifar10" in message
    assert "\n" not in message


@pytest.fixture(scope="module")
def mnist_root(data_root):
    require(data_root, "mnist", MNIST_NAMES)
    return data_root


def test_substitute_is_mnist_padded_to_3x32x32(mnist_root, tmp_path):
    (tmp_path / "mnist").symlink_to(mnist_root / "mnist", target_is_directory=True)
    stand_in = data.load("cifar10", "test", root=tmp_path, allow_substitute=True)
    real = data.load("mnist", "test", root=mnist_root)
    assert stand_in.substitute == "mnist" and stand_in.name == "cifar10"
    assert stand_in.input_shape == (3, 32, 32) and len(stand_in) == 10_000
    images = stand_in.images
    assert images.shape == (10_000, 3, 32, 32) and images.dtype == torch.uint8
    for c in range(3):
        assert torch.equal(images[:, c, 2:30, 2:30], real.images[:, 0])
    border = torch.ones(32, 32, dtype=torch.bool)
    border[2:30, 2:30] = False
    assert int(images[:, :, border].max()) == 0
    assert torch.equal(stand_in.labels, real.labels)
    idx = torch.tensor([5, 9_999])
    x, y = stand_in.batch(idx)
    assert x.shape == (2, 3, 32, 32)
    ref = (images[idx].double() / 255 - mnist.MEAN[0]) / mnist.STD[0]
    torch.testing.assert_close(x.double(), ref, rtol=0, atol=1e-6)
    assert torch.equal(y, real.labels[idx])


def test_no_substitute_unless_allowed_and_never_for_corrupt_files(mnist_root, tmp_path):
    (tmp_path / "mnist").symlink_to(mnist_root / "mnist", target_is_directory=True)
    with pytest.raises(MissingDataError):
        data.load("cifar10", "test", root=tmp_path)
    write_batches(tmp_path / "cifar10")
    with pytest.raises(CorruptDataError):
        data.load("cifar10", "test", root=tmp_path, allow_substitute=True)


def test_augmented_batch_pads_with_black_and_keeps_labels(tmp_path):
    write_batches(tmp_path / "cifar10", records=40)
    train = data.load("cifar10", "train", root=tmp_path, verify=False)
    idx = torch.arange(0, 200, 3)
    x, y = train.batch(idx, augment=True, generator=torch.Generator().manual_seed(3))
    plain, _ = train.batch(idx)
    assert x.shape == plain.shape and torch.equal(y, train.labels[idx])
    black = (-torch.tensor(cifar10.MEAN) / torch.tensor(cifar10.STD)).view(1, 3, 1, 1)
    # every value is an original normalised pixel of that image or black padding
    for i in range(0, len(idx), 17):
        allowed = torch.cat([plain[i].flatten(), black.flatten()])
        assert torch.isin(x[i], allowed).all()
    assert not torch.equal(x, plain)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_batches_built_on_the_gpu_equal_the_cpu_ones(tmp_path):
    write_batches(tmp_path / "cifar10", records=10)
    cpu = data.load("cifar10", "train", root=tmp_path, verify=False)
    gpu = data.load("cifar10", "train", root=tmp_path, verify=False).to("cuda")
    idx = torch.tensor([3, 0, 49])
    x, y = gpu.batch(idx)
    assert x.device.type == "cuda" and y.device.type == "cuda"
    x_cpu, y_cpu = cpu.batch(idx)
    torch.testing.assert_close(x.cpu(), x_cpu)
    assert torch.equal(y.cpu(), y_cpu)
    xa, _ = gpu.batch(idx, augment=True, generator=torch.Generator().manual_seed(0))
    xb, _ = cpu.batch(idx, augment=True, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(xa.cpu(), xb)
