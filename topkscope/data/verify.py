"""Check bytes against a FileSum: size first (cheap), then every digest that is known."""

from __future__ import annotations

import hashlib
from pathlib import Path

from topkscope.data.checksums import FileSum
from topkscope.data.errors import CorruptDataError


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
