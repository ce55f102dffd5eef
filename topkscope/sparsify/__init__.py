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

Each sparsifier describes itself (class attributes `label`, `family`, `plot_order`: its display
name, the claim family its claims are named after, where figures list it), and a user's own
selector joins the registry with `register_sparsifier(name, cls)`: training, the DDP hook, the
recorder, the claims and the figures then treat it like a built-in one.

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

# name -> factory: the built-in ones, and any a user adds with register_sparsifier
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


_BUILT_IN = frozenset(_FACTORIES)


def register_sparsifier(name: str, cls: type[Sparsifier], *, replace: bool = False) -> None:
    """Add a user's selector under `name` (a plain name: letters, digits, `-`, `_`, `.`): a
    Sparsifier subclass whose constructor takes keyword parameters only. Its class attributes
    say how it is shown (`label`, default the name), the claim family its claims are named
    after (`family`, default the name with `-` and `.` as `_`) and where figures list it
    (`plot_order`). A built-in name is never replaced; another registered name only with
    replace=True. ValueError naming the problem otherwise."""
    validate.plain_name("sparsifier name", name)
    if not (isinstance(cls, type) and issubclass(cls, Sparsifier)):
        raise ValueError(f"sparsifier {name!r}: {cls!r} is not a Sparsifier subclass "
                         "(subclass topkscope.sparsify.Sparsifier and implement _select)")
    if name in _BUILT_IN:
        raise ValueError(f"{name!r} is a built-in sparsifier; choose another name")
    if name in _FACTORIES and not replace:
        raise ValueError(f"sparsifier {name!r} is already registered (replace=True replaces it)")
    _FACTORIES[name] = cls


def unregister_sparsifier(name: str) -> None:
    """Remove a selector added with register_sparsifier (built-in ones stay)."""
    if name in _BUILT_IN:
        raise ValueError(f"{name!r} is a built-in sparsifier and cannot be removed")
    _FACTORIES.pop(name, None)


def _attribute(name: str, attribute: str):
    """A registered class's attribute; None for an unknown name or an unset (empty) value."""
    factory = _FACTORIES.get(str(name))
    value = getattr(factory, attribute, None) if factory is not None else None
    return None if value in (None, "") else value


def label_of(name: str | None) -> str:
    """A method's display name: its class's `label` ("Gaussian-k (2019)", a user's own); the
    scaling model's other methods from topkscope.names (Dense + WFBP, gTop-k); else the name
    as given. A column prefix ("gaussiank_2019") is accepted too."""
    from topkscope.names import SPARSIFIER_NAMES

    key = str(name)
    for candidate in (key, key.replace("_", "-")):
        found = _attribute(candidate, "label") or SPARSIFIER_NAMES.get(candidate)
        if found:
            return found
    return key


def family_of(name: str | None) -> str:
    """The claim family of a method (gaussiank-2019 -> gaussiank, dgc-sampled ->
    dgc_sampled, tail-k -> tail): its class's `family`; for a name no sparsifier has, the name
    with `-` and `.` as `_`."""
    return _attribute(str(name), "family") or str(name).replace("-", "_").replace(".", "_")


def plot_order_of(name: str | None) -> int:
    """Where figures and tables list a method, and how figures draw it: its class's
    `plot_order` (1000 for a name no sparsifier has); its tens are its family's colour, its
    units its line style (topkscope.plots.style.method_styles). A column prefix
    ("gaussiank_2019") is accepted too."""
    for candidate in (str(name), str(name).replace("_", "-")):
        order = _attribute(candidate, "plot_order")
        if order is not None:
            return int(order)
    return 1000


def in_plot_order(names) -> list[str]:
    """The distinct `names` sorted by plot_order_of, then by name."""
    return sorted(set(names), key=lambda n: (plot_order_of(n), str(n)))


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
    "family_of",
    "get_sparsifier",
    "in_plot_order",
    "label_of",
    "plot_order_of",
    "register_sparsifier",
    "unregister_sparsifier",
    "k_from_density",
    "parameters",
    "top_k_indices",
]
