"""Sparsifiers behind one interface: `get_sparsifier(name, **params).select(u, k)`.

| name           | rule                                              | count guarantee        |
|----------------|---------------------------------------------------|------------------------|
| dense          | all indices                                       | d                      |
| topk           | k largest |u| (torch.topk), lowest index on ties  | exactly k, exact set   |
| gaussiank      | Gaussian guess on block maxima, corrected, trimmed| exactly k, exact set   |
| gaussiank-2019 | published: mean + z std, x0.5 / x1.5, 3 evaluations| none (band on Gaussian)|
| randk          | uniform k-subset, seedable                        | exactly k              |
| dgc            | k_s-th largest of a random sample, optional trim  | >= 1; trim: <= k       |
| redsync        | bisection of r in mean|u| + r (max|u| - mean|u|) | [k, band k] if reached |
| sidco          | multi-stage exponential / gamma / GPD tail fit    | none                   |
| threshold      | |u| > lambda, k ignored                           | none (may be 0)        |
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from topkscope import validate
from topkscope.sparsify.base import (
    Sparsifier,
    check_density,
    check_k,
    check_vector,
    k_from_density,
)
from topkscope.sparsify.dense import Dense
from topkscope.sparsify.dgc import DGC
from topkscope.sparsify.gaussiank import GaussianK
from topkscope.sparsify.gaussiank_2019 import GaussianK2019
from topkscope.sparsify.randk import RandK
from topkscope.sparsify.redsync import RedSync
from topkscope.sparsify.sidco import SIDCo
from topkscope.sparsify.threshold import Threshold
from topkscope.sparsify.topk import TopK, top_k_indices

# name -> factory; filled once at import, never mutated afterwards.
_FACTORIES: dict[str, Callable[..., Sparsifier]] = {
    "dense": Dense,
    "topk": TopK,
    "gaussiank": GaussianK,
    "gaussiank-2019": GaussianK2019,
    "randk": RandK,
    "dgc": DGC,
    "redsync": RedSync,
    "sidco": SIDCo,
    "threshold": Threshold,
}


def available() -> list[str]:
    """Names accepted by get_sparsifier, sorted."""
    return sorted(_FACTORIES)


def parameters(name: str) -> list[str]:
    """The keyword parameters get_sparsifier(name, ...) accepts (its constructor's)."""
    signature = inspect.signature(_FACTORIES[name])
    return [p.name for p in signature.parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def get_sparsifier(name: str, **params) -> Sparsifier:
    """A new sparsifier instance by registry name, with its own parameters.

    Raises ValueError for an unknown name, an unknown parameter (listing the allowed ones)
    or a bad parameter value (naming the allowed values).
    """
    try:
        factory = _FACTORIES[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown sparsifier {name!r}; available: {', '.join(available())}"
        ) from None
    validate.known_keys("parameter", params, parameters(name), where=f" for sparsifier {name!r}")
    try:
        return factory(**params)
    except TypeError as exc:
        raise ValueError(f"bad parameters for sparsifier {name!r}: {exc}") from None


__all__ = [
    "DGC",
    "Dense",
    "GaussianK",
    "GaussianK2019",
    "RandK",
    "RedSync",
    "SIDCo",
    "Sparsifier",
    "Threshold",
    "TopK",
    "available",
    "check_density",
    "check_k",
    "check_vector",
    "get_sparsifier",
    "k_from_density",
    "parameters",
    "top_k_indices",
]
