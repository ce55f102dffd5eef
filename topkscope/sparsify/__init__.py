"""Sparsifiers behind one interface: `get_sparsifier(name, **params).select(u, k)`."""

from __future__ import annotations

from collections.abc import Callable

from topkscope.sparsify.base import (
    Sparsifier,
    check_density,
    check_k,
    check_vector,
    k_from_density,
)
from topkscope.sparsify.dense import Dense
from topkscope.sparsify.topk import TopK

# name -> factory; filled once at import, never mutated afterwards.
_FACTORIES: dict[str, Callable[..., Sparsifier]] = {
    "dense": Dense,
    "topk": TopK,
}


def available() -> list[str]:
    """Names accepted by get_sparsifier, sorted."""
    return sorted(_FACTORIES)


def get_sparsifier(name: str, **params) -> Sparsifier:
    """A new sparsifier instance by registry name, with its own parameters."""
    try:
        factory = _FACTORIES[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown sparsifier {name!r}; available: {', '.join(available())}"
        ) from None
    try:
        return factory(**params)
    except TypeError as exc:
        raise ValueError(f"bad parameters for sparsifier {name!r}: {exc}") from None


__all__ = [
    "Sparsifier",
    "available",
    "check_density",
    "check_k",
    "check_vector",
    "get_sparsifier",
    "k_from_density",
]
