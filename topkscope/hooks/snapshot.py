"""Raw whole-model vectors at scheduled steps: `snapshots/step{t}-rank{r}.npy` (float32).

u is saved as `step{t}-rank{r}.npy`; other kinds, when asked for, as
`step{t}-rank{r}-{kind}.npy`. Each file is written under a temporary name and renamed.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch

from topkscope.io import atomic_write

SNAPSHOT_RE = re.compile(r"^step(\d+)-rank(\d+)(?:-([gue]))?\.npy$")


def snapshot_name(step: int, rank: int, kind: str = "u") -> str:
    suffix = "" if kind == "u" else f"-{kind}"
    return f"step{int(step)}-rank{int(rank)}{suffix}.npy"


def write_snapshot(folder: Path, step: int, rank: int, x: torch.Tensor, kind: str = "u") -> Path:
    """Save the 1-D x as float32 .npy, atomically."""
    arr = x.detach().to("cpu", torch.float32).contiguous().numpy()

    def _write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            np.save(fh, arr, allow_pickle=False)

    return atomic_write(Path(folder) / snapshot_name(step, rank, kind), _write)
