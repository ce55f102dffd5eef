"""The one protocol every sparsifier follows, and the input checks they share.

A sparsifier maps an error-compensated gradient u (1-D float tensor of d elements)
and a target count k to the indices it would send. Exact methods return exactly k
unique indices; approximate ones return whatever their rule selects and report it
honestly (never padded, never replaced). When a rule selects nothing, nothing is sent:
the variable-count exchange handles a worker with an empty update, and the unsent u
stays in that worker's residual. Methods whose rule can select nothing say so with
`may_return_empty = True` (gaussiank-2019 on ordinary gradients, threshold, and
redsync, redsync-2019 and sidco on a constant |u|).

The one named deviation: `empty_fallback="topk"` (a `sparsifier_args` entry, off by
default, accepted only by methods that can select nothing) sends the exact Top-k when
the rule selects nothing. It is not part of any published rule; runs that use it say so
in their folder name and manifest (`deviations`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import torch

from topkscope import validate
from topkscope.bounds import K_RULES, check_density, k_from_density  # noqa: F401  (part of this API)
from topkscope.sparsify.engine import top_k_indices

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


EMPTY_FALLBACKS = ("none", "topk")


def check_empty_fallback(name: str, value: object, may_return_empty: bool) -> str:
    """Validate the `empty_fallback` option of sparsifier `name`; returns "none" or "topk"."""
    if value is None:
        return "none"
    validate.choice("empty_fallback", value, EMPTY_FALLBACKS)
    if value != "none" and not may_return_empty:
        raise ValueError(f"empty_fallback = {value!r} does not apply to {name!r}: its rule "
                         "always selects at least one element")
    return str(value)


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
    """Base class: `select(u, k)` validates and delegates to `_select` (see the module doc)."""

    name: str = "?"
    label: str = ""       # the display name in titles, tables and the report ("Gaussian-k (2019)");
                          # a built-in sparsifier's is topkscope.names.SPARSIFIER_NAMES's
    family: str = ""      # the claim family its claims are named after (gaussiank_accuracy); a
                          # published and a reference version of one rule share it
    # where figures and tables list it (dense 0, topk 10, ...); in figures its tens pick its
    # family's colour and its units its line style (gaussiank 20 and gaussiank-2019 21: one
    # hue, solid and dashed; plots.style.method_styles)
    plot_order: int = 1000
    exact: bool = False  # True when it returns the exact Top-k set (so exactly k indices)
    fixed_count: bool = False  # True when it always returns exactly k indices
    may_return_empty: bool = False  # True when the method's rule can select nothing
    randomised: bool = False  # draws at random; accepts `seed` (SparsifierSource reseeds it per step)
    sends_everything: bool = False  # selects all d elements (`dense`): workers exchange g itself
    checks_finite: bool = False  # True when _select itself raises on NaN/Inf (saves a pass)
    empty_fallback: str = "none"  # "topk": the named deviation (module doc); set by the registry

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("label"):  # the one table of display names, else the name
            from topkscope.names import SPARSIFIER_NAMES

            cls.label = SPARSIFIER_NAMES.get(cls.name, "") if cls.name != "?" else ""

    def select(self, u: torch.Tensor, k: int) -> torch.Tensor:
        """Indices (1-D int64, unique, order unspecified) of the elements of u to send.

        Empty when the method's rule selects nothing, unless empty_fallback = "topk".
        """
        d = check_vector(u, scan_finite=not self.checks_finite)
        k = check_k(k, d)
        idx = self._select(u, k)
        if idx.numel() == 0 and self.empty_fallback == "topk":
            idx = top_k_indices(u.abs(), k)  # the named deviation, never the default
        return idx.to(torch.int64)

    @property
    def deviations(self) -> tuple[str, ...]:
        """The named departures from the method's published rule this instance runs with."""
        return ("empty_fallback=topk",) if self.empty_fallback == "topk" else ()

    @abstractmethod
    def _select(self, u: torch.Tensor, k: int) -> torch.Tensor:
        """Return 1-D indices of the selected elements of a validated u."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
