"""The IDX file format of MNIST (LeCun): a big-endian header, then the raw array.

    bytes 0-1: 0x00 0x00; byte 2: type code (0x08 = uint8); byte 3: number of dims n;
    then n big-endian uint32 sizes; then prod(sizes) items in C order.
Files may be stored gzip-compressed (name ending in .gz).
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

from topkscope.data.errors import CorruptDataError

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
