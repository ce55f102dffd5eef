"""Atomic file writes: write to a temporary name in the same folder, fsync, rename.

A reader (or a crash) never sees a half-written file: either the old one or the new one.
`Table` is the per-step table written that way (train.parquet, eval.parquet, the DDP hook's
train.parquet): rows kept in memory, the whole file rewritten atomically on flush.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

TEMP_SUFFIX = ".tmp"


def is_unfinished_write(name: str) -> bool:
    """True for the name of atomic_write's temporary file (`.<name>.<random>.tmp`): what a
    process killed mid-write (SIGKILL, a lost node) leaves behind, never a finished file."""
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


def atomic_write(path: str | os.PathLike, write: Callable[[str], None]) -> Path:
    """Call write(tmp_path) then rename tmp_path onto path. Returns path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    try:  # from here on an exception (a signal's included) removes tmp
        os.close(fd)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give ordinary permissions
        write(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> Path:
    def _write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            fh.write(data)

    return atomic_write(path, _write)


def write_json_atomic(path: str | os.PathLike, obj) -> Path:
    return write_bytes_atomic(path, (json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n").encode())


def write_parquet_atomic(path: str | os.PathLike, df) -> Path:
    """A pandas DataFrame to parquet (pyarrow), atomically. Empty strings in text columns are
    stored as nulls (a missing note or shape name is null, never "")."""
    from pandas.api.types import is_string_dtype

    text = [c for c in df.columns if is_string_dtype(df[c].dtype)]
    if text:
        df = df.copy()
        for c in text:
            df[c] = df[c].where(df[c] != "", None)
    return atomic_write(path, lambda tmp: df.to_parquet(tmp, engine="pyarrow", index=False))


def check_writable(folder: str | os.PathLike, need_bytes: int = 1 << 20) -> Path:
    """Fail early (before training) if folder cannot be created/written or its disk is full:
    one-line OSError saying what is in the way (a file where a folder must be, a read-only
    folder, the disk)."""
    folder = Path(folder)
    above = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if above is not None and not above.is_dir():
        raise OSError(f"output directory {str(folder)!r}: {str(above)!r} is a file, not a "
                      f"folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # a unique probe name, so several ranks can check one folder at once
        fd, probe = tempfile.mkstemp(prefix=".write-probe.", dir=folder)
        try:
            os.write(fd, b"\0" * min(need_bytes, 1 << 16))
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise OSError(f"output directory {str(folder)!r} is read-only "
                          f"({exc.strerror or exc}); give a folder you can write to") from None
        raise OSError(f"output directory {str(folder)!r} is not writable: {exc.strerror or exc}") from None
    free = os_free_bytes(folder)
    if free is not None and free < need_bytes:
        raise OSError(f"output directory {str(folder)!r} has {free} bytes free, need at least {need_bytes}")
    return folder


def os_free_bytes(folder: str | os.PathLike) -> int | None:
    try:
        st = os.statvfs(folder)
    except (OSError, AttributeError):
        return None
    return st.f_bavail * st.f_frsize


class Table:
    """An append-only table with a fixed schema, flushed to one parquet file.

    columns maps each column to its pandas dtype. identity: text columns with one value for
    every row (the run's experiment and run_id: topkscope.schema.run_identity), written first
    and never given to append(). A reader always sees a complete file (the previous flush or
    this one). On resume the rows at or after the checkpoint's step are dropped
    (`reload_before`): they are recomputed.
    """

    def __init__(self, path: Path, columns: dict[str, str],
                 identity: dict[str, str] | None = None) -> None:
        self.path = Path(path)
        self.columns = columns
        self.identity = dict(identity or {})
        self.rows: list[dict[str, Any]] = []
        self._dirty = False  # rows added or changed since the last flush

    def append(self, row: dict[str, Any]) -> None:
        missing = set(self.columns) - set(row)
        if missing:
            raise ValueError(f"row for {self.path.name} lacks {sorted(missing)}")
        self.rows.append({c: row[c] for c in self.columns})
        self._dirty = True

    def amend_last(self, **values: Any) -> None:
        """Change columns of the latest row; the next flush writes the change."""
        unknown = set(values) - set(self.columns)
        if unknown:
            raise ValueError(f"{self.path.name} has no column {sorted(unknown)}")
        self.rows[-1].update(values)
        self._dirty = True

    def frame(self):
        """The rows as a pandas DataFrame with the table's dtypes."""
        import pandas as pd

        df = pd.DataFrame(self.rows, columns=list(self.columns)).astype(self.columns)
        for i, (name, value) in enumerate(self.identity.items()):
            df.insert(i, name, pd.Series([value] * len(df), dtype="object"))
        return df

    def flush(self) -> None:
        if self._dirty or not self.path.exists():
            write_parquet_atomic(self.path, self.frame())
            self._dirty = False

    def reload_before(self, step: int) -> None:
        """Resume: keep the rows already on disk whose step is below `step`."""
        import pandas as pd

        if self.path.exists():
            df = pd.read_parquet(self.path)
            kept = df[df["step"] < step].drop(columns=list(self.identity), errors="ignore")
            self.rows = kept.to_dict("records")
        self._dirty = True  # rewrite on the next flush
