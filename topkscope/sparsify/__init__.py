"""Sparsifiers behind one interface: `get_sparsifier(name, **params).select(u, k)`.

| name           | rule                                              | count guarantee        |
|----------------|---------------------------------------------------|------------------------|
| dense          | all indices                                       | d                      |
| topk           | k largest |u| (torch.topk), lowest index on ties  | exactly k, exact set   |
| chunk-topk     | the largest |u| of each chunk of chunk_size       | exactly k; fixed per chunk |
| gaussiank      | Gaussian guess on block maxima, corrected, trimmed| exactly k, exact set   |
| gaussiank-2019 | published: mean + z std, x0.5 / x1.5, 3 evaluations| none; may be 0         |
| randk          | uniform k-subset, seedable                        | exactly k              |
| dgc            | published: strided-sample threshold, x0.8 / top-k | [1, k]                 |
| dgc-sampled    | k_s-th largest of a random sample, optional trim  | >= 1; trim: <= k       |
| redsync        | bisection of r in mean|u| + r (max|u| - mean|u|) | [k, band k] if reached |
| redsync-2019   | the same, as in the Gaussian-k authors' code      | none                   |
| sidco          | published: multi-stage tail fit, stages adapted   | none                   |
| sidco-fixed    | multi-stage tail fit, fixed stage count           | none                   |
| tail-k         | previous threshold, log-log count-corrected steps | none; [2k/3, 4k/3] mostly|
| threshold      | |u| > lambda, k ignored                           | none (may be 0)        |

An empty selection is sent as empty. `empty_fallback="topk"` (accepted by the methods
that can select nothing: `may_return_empty`) is the one named deviation that replaces it
by the exact Top-k; see base.py and docs/methods.md.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from topkscope import validate
from topkscope.sparsify.base import (
    K_RULES,
    Sparsifier,
    check_density,
    check_empty_fallback,
    check_k,
    check_vector,
    k_from_density,
)
from topkscope.sparsify.chunk_topk import ChunkTopK
from topkscope.sparsify.dense import Dense
from topkscope.sparsify.dgc import DGC, DGCSampled
from topkscope.sparsify.engine import top_k_indices
from topkscope.sparsify.gaussiank import GaussianK
from topkscope.sparsify.gaussiank_2019 import GaussianK2019
from topkscope.sparsify.randk import RandK
from topkscope.sparsify.redsync import RedSync, RedSync2019
from topkscope.sparsify.sidco import SIDCo, SIDCoFixed
from topkscope.sparsify.tailk import TailK
from topkscope.sparsify.threshold import Threshold
from topkscope.sparsify.topk import TopK

# name -> factory; filled once at import, never mutated afterwards.
_FACTORIES: dict[str, Callable[..., Sparsifier]] = {
    "dense": Dense,
    "topk": TopK,
    "chunk-topk": ChunkTopK,
    "gaussiank": GaussianK,
    "gaussiank-2019": GaussianK2019,
    "randk": RandK,
    "dgc": DGC,
    "dgc-sampled": DGCSampled,
    "redsync": RedSync,
    "redsync-2019": RedSync2019,
    "sidco": SIDCo,
    "sidco-fixed": SIDCoFixed,
    "tail-k": TailK,
    "threshold": Threshold,
}


def available() -> list[str]:
    """Names accepted by get_sparsifier, sorted."""
    return sorted(_FACTORIES)


def parameters(name: str) -> list[str]:
    """The keyword parameters get_sparsifier(name, ...) accepts: its constructor's, plus
    `empty_fallback` for a method whose rule can select nothing."""
    factory = _FACTORIES[name]
    signature = inspect.signature(factory)
    names = [p.name for p in signature.parameters.values()
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if getattr(factory, "may_return_empty", False):
        names.append("empty_fallback")
    return names


def get_sparsifier(name: str, **params) -> Sparsifier:
    """A new sparsifier instance by registry name, with its own parameters.

    `empty_fallback` ("none" or "topk") is accepted by every method whose rule can select
    nothing (see base.py); the others refuse it. Raises ValueError for an unknown name, an
    unknown parameter (listing the allowed ones) or a bad parameter value (naming the allowed
    values).
    """
    try:
        factory = _FACTORIES[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown sparsifier {name!r}; available: {', '.join(available())}"
        ) from None
    params = dict(params)
    fallback = check_empty_fallback(name, params.pop("empty_fallback", None),
                                    getattr(factory, "may_return_empty", False))
    validate.known_keys("parameter", params, parameters(name), where=f" for sparsifier {name!r}")
    try:
        sparsifier = factory(**params)
    except TypeError as exc:
        raise ValueError(f"bad parameters for sparsifier {name!r}: {exc}") from None
    if fallback != "none":
        sparsifier.empty_fallback = fallback
    return sparsifier


def deviations_of(name: str, params: dict | None = None) -> tuple[str, ...]:
    """The named deviations from the published rule that sparsifier `name` with `params` runs."""
    return get_sparsifier(name, **dict(params or {})).deviations


__all__ = [
    "ChunkTopK",
    "DGC",
    "DGCSampled",
    "Dense",
    "GaussianK",
    "GaussianK2019",
    "RandK",
    "K_RULES",
    "RedSync",
    "RedSync2019",
    "SIDCo",
    "SIDCoFixed",
    "TailK",
    "Sparsifier",
    "Threshold",
    "TopK",
    "available",
    "check_density",
    "check_k",
    "check_vector",
    "deviations_of",
    "get_sparsifier",
    "k_from_density",
    "parameters",
    "top_k_indices",
]
