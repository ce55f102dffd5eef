"""Small shared helpers of the sparsifiers: scratch buffers, mask -> indices, cheap moments, RNGs.

Reusable scratch buffers (`Workspace`), owned by one sparsifier instance. Allocating a fresh 100 MB tensor costs more than the pass that fills it (page faults
on first touch), so the per-call temporaries of a selection — |u|, a boolean mask,
block maxima — live here and are reused while the vector size is stable. Each slot
keeps one grow-only buffer per (dtype, device); `take` returns a view of the first n
elements. A buffer is scratch: its content is undefined until the caller writes it.

Turning boolean masks into indices, fast on one CPU thread (`flat_nonzero`, `select_where`):
torch.nonzero on CPU costs several times more per element than numpy's single-pass
`flatnonzero` when it runs on one thread (1.7 ms against 0.3 ms for 10^6 elements here),
and boolean indexing goes through it. On other devices torch.nonzero is used as is.

Moments and normal quantiles for threshold rules, computed the cheap way (`mean_std`):

    mean = sum(u) / d,   var = (u . u - d mean^2) / (d - 1)   (unbiased, like torch.std)

One `sum` and one `dot` are several times faster than `torch.std_mean` on CPU.

Per-instance random generators for the randomised sparsifiers, no global RNG state
(`seeded_generator`).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from topkscope import validate


class Workspace:
    """Named grow-only scratch buffers; one instance per sparsifier (no shared state)."""

    def __init__(self) -> None:
        self._buffers: dict[tuple[str, torch.dtype, torch.device], torch.Tensor] = {}

    def take(self, slot: str, n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """A 1-D scratch tensor of n elements (a view into a buffer of at least n)."""
        key = (slot, dtype, torch.device(device))
        buf = self._buffers.get(key)
        if buf is None or buf.numel() < n:
            buf = torch.empty(n, dtype=dtype, device=device)
            self._buffers[key] = buf
        return buf[:n]

    def nbytes(self) -> int:
        """Bytes held by all buffers."""
        return sum(b.numel() * b.element_size() for b in self._buffers.values())

    def clear(self) -> None:
        """Release every buffer."""
        self._buffers.clear()


def flat_nonzero(mask: torch.Tensor) -> torch.Tensor:
    """Flat int64 positions of the True entries of a bool tensor (ascending)."""
    if mask.device.type == "cpu":
        return torch.from_numpy(np.flatnonzero(mask.numpy()).astype(np.int64, copy=False))
    return mask.flatten().nonzero().flatten()


def select_where(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """values[mask] for a 1-D tensor and a bool mask of the same length."""
    return values[flat_nonzero(mask)]


def mean_std(x: torch.Tensor, unbiased: bool = True) -> tuple[float, float]:
    """(mean, std) of a 1-D tensor from one sum and one dot product."""
    if x.element_size() < 4:  # half types: accumulate in float32
        x = x.float()
    n = x.numel()
    total = float(x.sum())
    squares = float(torch.dot(x, x))
    mean = total / n
    dof = n - 1 if unbiased and n > 1 else n
    var = max(0.0, (squares - n * mean * mean) / dof)
    return mean, math.sqrt(var)


def strided_sample(u: torch.Tensor, size: int) -> torch.Tensor:
    """Every (d // size)-th element of u: a deterministic sample of about `size` values."""
    step = max(1, u.numel() // max(1, size))
    return u[::step]


def two_sided_normal_quantile(tail: float) -> float:
    """z with P(|Z| > z) = tail for Z ~ N(0, 1), i.e. |Phi^-1(tail / 2)|; 0 for tail >= 1."""
    if tail >= 1.0:
        return 0.0
    tail = max(tail, 1e-300)
    return -float(torch.special.ndtri(torch.tensor(tail / 2.0, dtype=torch.float64)))


def seeded_generator(seed: int | None) -> torch.Generator:
    """A CPU generator seeded with `seed` (an integer in [0, 2^63 - 1]); None draws a fresh one."""
    generator = torch.Generator()
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(validate.integer("seed", seed, 0, 2**63 - 1))
    return generator
