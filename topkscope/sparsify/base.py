"""The one protocol every sparsifier follows, and the input checks they share.

A sparsifier maps an error-compensated gradient u (1-D float tensor of d elements)
and a target count k to the indices it would send. Exact methods return exactly k
unique indices; approximate ones return whatever their rule selects and report it
honestly (never padded). An empty selection is allowed only for `threshold`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import torch

_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_vector(u: torch.Tensor) -> int:
    """Validate a vector to sparsify; return d. Raises ValueError naming the problem."""
    if not isinstance(u, torch.Tensor):
        raise ValueError(f"u must be a torch.Tensor, got {type(u).__name__}")
    if u.dim() != 1:
        raise ValueError(f"u must be 1-D, got shape {tuple(u.shape)} (flatten it first)")
    if u.dtype not in _FLOAT_DTYPES:
        raise ValueError(f"u must be a float tensor (float16/bfloat16/float32/float64), got {u.dtype}")
    d = u.numel()
    if d == 0:
        raise ValueError("u is empty (d = 0); nothing to select from")
    # One cheap pass: a finite sum proves every element finite; only then pay for the full scan.
    if not math.isfinite(float(u.sum(dtype=torch.float64))):
        bad = (~torch.isfinite(u)).nonzero().flatten()
        if bad.numel():
            first = bad[:5].tolist()
            raise ValueError(
                f"u has {bad.numel()} non-finite values (NaN/Inf) of {d}, first at indices {first}"
            )
    return d


def check_k(k: int, d: int) -> int:
    """Validate a target count: an integer in [1, d]."""
    if isinstance(k, bool) or not isinstance(k, (int,)) and not (
        isinstance(k, torch.Tensor) and k.numel() == 1
    ):
        raise ValueError(f"k must be an integer in [1, {d}], got {k!r}")
    k = int(k)
    if not 1 <= k <= d:
        raise ValueError(f"k = {k} is outside the allowed range [1, d = {d}]")
    return k


def check_density(density: float) -> float:
    """Validate a density rho = k/d: a number in (0, 1]."""
    try:
        rho = float(density)
    except (TypeError, ValueError):
        raise ValueError(f"density must be a number in (0, 1], got {density!r}") from None
    if not (0.0 < rho <= 1.0) or math.isnan(rho):
        raise ValueError(f"density = {density!r} is outside the allowed range (0, 1]")
    return rho


def k_from_density(density: float, d: int) -> int:
    """k = max(1, round(rho * d)): at least one element is always sent."""
    rho = check_density(density)
    return max(1, min(d, int(round(rho * d))))


class Sparsifier(ABC):
    """Base class: `select(u, k)` validates, then delegates to `_select`."""

    name: str = "?"
    exact: bool = False  # True when the method always returns exactly k indices

    def select(self, u: torch.Tensor, k: int) -> torch.Tensor:
        d = check_vector(u)
        k = check_k(k, d)
        idx = self._select(u, k)
        return idx.to(torch.int64)

    @abstractmethod
    def _select(self, u: torch.Tensor, k: int) -> torch.Tensor:
        """Return 1-D indices of the selected elements of a validated u."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
