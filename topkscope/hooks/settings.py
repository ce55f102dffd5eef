"""The Recorder's settings: each keyword argument (other than out_dir, rank, manifest, mode and
total_steps) with its check.

A `recorder:` block of an experiment config holds exactly these keys (`SETTINGS`);
`check_settings` checks such a block without building a Recorder or touching a folder, so a
bad config is refused before anything is written. In `sparsifiers`, the name "compared"
stands for every selector of topkscope.columns.RECORDED_SELECTORS (the approximate selectors
compared on Top-k's u), so a new selector is added there, once.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from typing import Any

from topkscope import validate
from topkscope.columns import RECORDED_SELECTORS
from topkscope.hooks.schedules import Schedule, parse_schedule
from topkscope.schema import KINDS
from topkscope.sparsify import available, check_density


def _densities(name: str, value: Any) -> tuple[float, ...]:
    if isinstance(value, str):  # "0.01" is one density, never its characters
        try:
            value = float(value)
        except ValueError:
            raise ValueError(f"{name} = {value!r} must be a number in (0, 1] or a list of "
                             f"them") from None
    if isinstance(value, numbers.Real):
        value = [value]
    elif isinstance(value, Iterable) and not isinstance(value, (str, list, tuple)):
        value = list(value)  # e.g. a numpy array
    rhos = validate.list_of(name, value, lambda _, rho: check_density(rho), nonempty=True)
    return tuple(sorted(set(rhos)))


COMPARED = "compared"  # stands for topkscope.columns.RECORDED_SELECTORS, in that order


def _sparsifier_names(name: str, value: Any) -> tuple[str, ...]:
    given = [value] if isinstance(value, str) else list(value or ())
    expanded = [m for n in given for m in (RECORDED_SELECTORS if n == COMPARED else [n])]
    names = list(dict.fromkeys(expanded))
    validate.known_keys("sparsifier", names, available(), where=f" in {name}")
    if "topk" in names:  # its columns would overwrite the exact reference's topk_ratio
        raise ValueError(f"{name} may not include 'topk': exact Top-k is always recorded "
                         "(topk_ratio); list approximate methods only")
    return tuple(names)


def recordable() -> tuple[str, ...]:
    """Every selector a recorder may evaluate on u (the registry but exact Top-k), the
    compared ones (RECORDED_SELECTORS) first: the stats table has columns for each of them,
    null where a run did not evaluate it, so the parts of many runs share one schema."""
    return tuple(dict.fromkeys([*RECORDED_SELECTORS, *(n for n in available() if n != "topk")]))


def _schedule(name: str, value: Any) -> Schedule:
    return parse_schedule(value)


def _at_least(low: int):
    return lambda name, value: validate.integer(name, value, low)


def _ranks(name: str, value: Any) -> tuple[int, ...] | None:
    """None (every rank) or a non-empty list of ranks >= 0, e.g. [0]."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        value = [value]
    ranks = tuple(sorted({validate.integer(name, r, 0) for r in value}))
    if not ranks:
        raise ValueError(f"{name} = [] names no rank; use null for every rank or a list of "
                         f"ranks >= 0")
    return ranks


def check_quantize(name: str, value: Any) -> dict | None:
    """A `quantize:` block (the recorder's, or an experiment config's for training): None, or
    {bits, range} of sparsify.quantize, returned with both filled."""
    if value is None:
        return None
    from topkscope.sparsify.quantize import quantizer_from

    try:
        return quantizer_from(validate.mapping(name, value)).describe()
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def _kinds(empty_ok: bool = False):
    return lambda name, value: validate.subset(name, value, KINDS, nonempty=not empty_ok)


# The Recorder's settings (its keyword arguments other than out_dir, rank and manifest),
# each with its check: a `recorder:` config block may hold exactly these.
_SETTING_CHECKS = {
    "schedule": _schedule,
    "hist_schedule": _schedule,
    "snapshot_schedule": _schedule,
    "sparsifier_schedule": lambda name, value: None if value is None else parse_schedule(value),
    "sparsifier_per_layer": validate.boolean,
    "densities": _densities,
    "sparsifiers": _sparsifier_names,
    "flush_every": _at_least(1),
    "kinds": _kinds(),
    "topk_kinds": _kinds(empty_ok=True),
    "per_layer": validate.boolean,
    "hist_bins": _at_least(1),
    "hist_range": lambda name, value: validate.number(name, value, 0, None, lo_open=True),
    "snapshot_kinds": _kinds(),
    "snapshot_ranks": _ranks,
    "min_free_bytes": _at_least(0),
    "seed": _at_least(0),
    "quantize": check_quantize,
    "coordinates": _at_least(0),
}
SETTINGS = tuple(_SETTING_CHECKS)


def check_settings(settings: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Check recorder settings (any subset of SETTINGS) without building a Recorder or
    touching a folder; return them normalised. Raises a one-line ValueError naming the
    setting (after prefix, e.g. 'recorder.')."""
    validate.known_keys("recorder setting", settings, SETTINGS)
    return {key: _SETTING_CHECKS[key](prefix + key, value) for key, value in settings.items()}
