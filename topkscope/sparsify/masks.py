"""Turning boolean masks into indices, fast on one CPU thread.

torch.nonzero on CPU costs several times more per element than numpy's single-pass
`flatnonzero` when it runs on one thread (1.7 ms against 0.3 ms for 10^6 elements here),
and boolean indexing goes through it. On other devices torch.nonzero is used as is.
"""

from __future__ import annotations

import numpy as np
import torch


def flat_nonzero(mask: torch.Tensor) -> torch.Tensor:
    """Flat int64 positions of the True entries of a bool tensor (ascending)."""
    if mask.device.type == "cpu":
        return torch.from_numpy(np.flatnonzero(mask.numpy()).astype(np.int64, copy=False))
    return mask.flatten().nonzero().flatten()


def select_where(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """values[mask] for a 1-D tensor and a bool mask of the same length."""
    return values[flat_nonzero(mask)]
