"""Where datasets live: an explicit root, else $TOPKSCOPE_DATA, else ./data."""

from __future__ import annotations

import os
from pathlib import Path

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
    return f"python -m topkscope.data.fetch --root {root}{tail}"
