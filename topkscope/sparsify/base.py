"""The one protocol every sparsifier follows, and the input checks they share.

A sparsifier maps an error-compensated gradient u (1-D float tensor of d elements)
and a target count k to the indices it would send. Exact methods return exactly k
unique indices; approximate ones return whatever their rule selects and report it
honestly (never padded). An empty selection is allowed only for `threshold`
(`may_return_empty = True`); for every other method an empty rule result, possible
only on degenerate input such as a constant |u|, is replaced by the exact Top-k so
that a worker never sends nothing and hangs a collective.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import torch

from topkscope import validate

_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


class NonFiniteError(ValueError):
    """u holds NaN or Inf (raised by the sparsifiers' input check)."""


def raise_if_nonfinite(u: torch.Tensor) -> None:
    """Full scan: raise NonFiniteError saying how many NaN/Inf values u has and where."""
    bad = (~torch.isfinite(u)).nonzero().flatten()
    if bad.numel():
        n_nan = int(torch.isnan(u[bad]).sum())
        raise NonFiniteError(
            f"u has {bad.numel()} non-finite values of {u.numel()} ({n_nan} NaN, "
            f"{bad.numel() - n_nan} Inf), first at indices {bad[:5].tolist()}; "
            "all values must be finite"
        )


def check_vector(u: torch.Tensor, scan_finite: bool = True) -> int:
    """Validate a vector to sparsify; return d. Raises ValueError naming the problem.

    With scan_finite, the finiteness check costs one native-precision `sum` (a NaN or
    Inf makes it non-finite); only when that sum is not finite (NaN/Inf, or an overflow
    of a finite vector) is the full per-element scan paid.
    """
    if not isinstance(u, torch.Tensor):
        raise ValueError(f"u must be a torch.Tensor, got {type(u).__name__}")
    if u.dim() != 1:
        raise ValueError(f"u must be 1-D, got shape {tuple(u.shape)} (flatten it first)")
    if u.dtype not in _FLOAT_DTYPES:
        raise ValueError(
            f"u must be a float tensor (float16/bfloat16/float32/float64), got {u.dtype}"
        )
    if u.requires_grad:
        raise ValueError("u requires grad; allowed: a tensor without autograd history "
                         "(pass u.detach())")
    d = u.numel()
    if d == 0:
        raise ValueError("u is empty (d = 0); nothing to select from")
    if scan_finite:
        if not math.isfinite(float(u.sum())):
            raise_if_nonfinite(u)  # the sum may also overflow on finite input: then no error
    return d


def check_k(k: int, d: int) -> int:
    """Validate a target count: an integer in [1, d]."""
    if isinstance(k, torch.Tensor) and k.numel() == 1 and not k.is_floating_point():
        k = int(k)
    return validate.integer("k", k, 1, d, hi_name="d")


def check_density(density: float) -> float:
    """Validate a density rho = k/d: a number in (0, 1]."""
    return validate.number("density", density, 0, 1, lo_open=True)


def k_from_density(density: float, d: int) -> int:
    """k = max(1, round(rho * d)): at least one element is always sent."""
    rho = check_density(density)
    return max(1, min(d, int(round(rho * d))))


def check_param(
    name: str,
    value: float,
    low: float,
    high: float,
    *,
    low_open: bool = False,
    high_open: bool = False,
    integer: bool = False,
) -> float:
    """Validate a finite numeric constructor parameter against [low, high] (ends open as asked)."""
    if integer:
        return validate.integer(name, value, low, high)
    return validate.number(name, value, low, high, lo_open=low_open, hi_open=high_open)


class Sparsifier(ABC):
    """Base class: `select(u, k)` validates, delegates to `_select`, and guards emptiness."""

    name: str = "?"
    exact: bool = False  # True when it returns the exact Top-k set (so exactly k indices)
    fixed_count: bool = False  # True when it always returns exactly k indices
    may_return_empty: bool = False  # only `threshold` may legitimately select nothing
    checks_finite: bool = False  # True when _select itself raises on NaN/Inf (saves a pass)

    def select(self, u: torch.Tensor, k: int) -> torch.Tensor:
        """Indices (1-D int64, unique, order unspecified) of the elements of u to send."""
        d = check_vector(u, scan_finite=not self.checks_finite)
        k = check_k(k, d)
        idx = self._select(u, k)
        if idx.numel() == 0 and not self.may_return_empty:
            from topkscope.sparsify.topk import top_k_indices

            idx = top_k_indices(u.abs(), k)  # degenerate input: never send nothing
        return idx.to(torch.int64)

    @abstractmethod
    def _select(self, u: torch.Tensor, k: int) -> torch.Tensor:
        """Return 1-D indices of the selected elements of a validated u."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
