"""Helpers shared by the data tests (locate the real files `make data` wrote), and their test."""

from __future__ import annotations

from pathlib import Path

import pytest

MNIST_NAMES = (
    "train-images-idx3-ubyte", "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte",
)
PTB_NAMES = ("ptb.train.txt", "ptb.valid.txt", "ptb.test.txt")


def require(root: Path, sub: str, names: tuple[str, ...]) -> Path:
    """root/sub with every file in names, else fail telling how to get them (never skip)."""
    folder = root / sub
    missing = [n for n in names if not (folder / n).is_file()]
    if missing:
        pytest.fail(
            f"{', '.join(missing)} missing in {folder}: run `make data` "
            f"(topkscope fetch --data {root})"
        )
    return folder


def test_require_fails_loudly_naming_the_missing_files(tmp_path):
    (tmp_path / "ptb").mkdir()
    (tmp_path / "ptb" / "ptb.train.txt").write_text("x\n")
    with pytest.raises(pytest.fail.Exception, match=r"ptb\.valid\.txt, ptb\.test\.txt missing"):
        require(tmp_path, "ptb", PTB_NAMES)
    assert require(tmp_path, "ptb", ("ptb.train.txt",)) == tmp_path / "ptb"
