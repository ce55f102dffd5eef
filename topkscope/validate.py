"""Checks for user-given values: numbers, integers, ranges, choices, lists, keys.

Every check takes the parameter's name and its value, returns the value in its normal form
(int, float, list, ...) and otherwise raises a one-line ValueError that names the parameter,
the bad value and what is allowed, in one style everywhere:

    workers = 0 is outside the allowed range [1, inf)
    seed = 1.5 must be an integer in [0, inf)
    selection = 'all' is not allowed; choose one of: global, layerwise
    unknown sparsifier parameter 'ratio'; allowed: seed, sample_ratio

The config schema, the sparsifiers' parameters, the recorder, the schedules and the data
sharding all check through this module, so a message looks the same wherever it comes from.
"""

from __future__ import annotations

import math
import numbers
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

Check = Callable[[str, Any], Any]  # (name, value) -> normalised value, or ValueError


def allowed_range(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
                  hi_open: bool = False, hi_name: str | None = None) -> str:
    """'[1, inf)', '(0, 1]', '[1, d = 100]': the interval in words; '' when unbounded.

    A missing end is infinite (and so open). hi_name labels the upper end ('d = 100').
    """
    if lo is None and hi is None:
        return ""
    left = "(" if lo_open or lo is None else "["
    right = ")" if hi_open or hi is None or hi == math.inf else "]"
    low = "-inf" if lo is None else str(lo)
    high = "inf" if hi is None else (f"{hi_name} = {hi}" if hi_name else str(hi))
    return f"{left}{low}, {high}{right}"


def _in(lo, hi, lo_open: bool, hi_open: bool, v: float) -> bool:
    above = lo is None or (v > lo if lo_open else v >= lo)
    below = hi is None or (v < hi if hi_open else v <= hi)
    return above and below


def _space(text: str) -> str:
    return f" in {text}" if text else ""


def integer(name: str, value: Any, lo: int | None = None, hi: int | None = None, *,
            hi_name: str | None = None, whole_floats: bool = False) -> int:
    """An integer (not a bool) in [lo, hi]. whole_floats also accepts 3.0 (read as 3)."""
    if whole_floats and isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        allowed = allowed_range(lo, hi, hi_name=hi_name)
        raise ValueError(f"{name} = {value!r} must be an integer{_space(allowed)}")
    value = int(value)
    if not _in(lo, hi, False, False, value):
        allowed = allowed_range(lo, hi, hi_name=hi_name)
        raise ValueError(f"{name} = {value} is outside the allowed range {allowed}")
    return value


def number(name: str, value: Any, lo: float | None = None, hi: float | None = None, *,
           lo_open: bool = False, hi_open: bool = False) -> float:
    """A finite real number (not a bool) in the interval from lo to hi, ends open as asked."""
    allowed = allowed_range(lo, hi, lo_open=lo_open, hi_open=hi_open)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} = {value!r} must be a number{_space(allowed)}")
    v = float(value)
    if not math.isfinite(v):
        if not allowed:
            raise ValueError(f"{name} = {value!r} must be a finite number")
        raise ValueError(f"{name} = {value!r} is outside the allowed range {allowed}")
    if not _in(lo, hi, lo_open, hi_open, v):
        raise ValueError(f"{name} = {value!r} is outside the allowed range {allowed}")
    return v


def choice(name: str, value: Any, allowed: Iterable[Any]) -> Any:
    """One of the allowed values."""
    allowed = list(allowed)
    if value not in allowed:
        raise ValueError(f"{name} = {value!r} is not allowed; choose one of: "
                         f"{', '.join(map(str, allowed))}")
    return value


def boolean(name: str, value: Any) -> bool:
    """True or False (not 0/1, not 'yes')."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} = {value!r} must be true or false")
    return value


def text(name: str, value: Any) -> str:
    """A non-empty string."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} = {value!r} must be a non-empty string")
    return value


_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")


def plain_name(name: str, value: Any) -> str:
    """A name usable as one folder name anywhere: letters, digits, '.', '_' and '-', not
    starting with '.' (so never '..', a path or a hidden file), at most 255 characters."""
    if not isinstance(value, str) or not _PLAIN_NAME.fullmatch(value) or len(value) > 255:
        raise ValueError(f"{name} = {value!r} is not a plain name; allowed: letters, digits, "
                         f"'.', '_' and '-', not starting with '.' (at most 255 characters)")
    return value


def mapping(name: str, value: Any) -> dict:
    """A mapping with string keys (None reads as {})."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ValueError(f"{name} = {value!r} must be a mapping with string keys")
    return dict(value)


def list_of(name: str, value: Any, item: Check, *, increasing: bool = False,
            nonempty: bool = False) -> list:
    """A list (or tuple) whose entries each pass item(f'{name}[i]', x); None reads as []."""
    if value is None:
        value = []
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{name} = {value!r} must be a list")
    if nonempty and not value:
        raise ValueError(f"{name} is empty; give at least one value")
    out = [item(f"{name}[{i}]", x) for i, x in enumerate(value)]
    if increasing and any(b <= a for a, b in zip(out, out[1:])):
        raise ValueError(f"{name} = {value!r} must be strictly increasing")
    return out


def subset(name: str, values: Any, allowed: Iterable[str], *, nonempty: bool = True) -> tuple:
    """Names from `allowed` (a single string counts as one), in allowed's order, no repeats."""
    allowed = tuple(allowed)
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, Iterable):
        raise ValueError(f"{name} = {values!r} must be a list; allowed: a subset of "
                         f"{', '.join(allowed)}")
    values = list(values)
    bad = [v for v in values if v not in allowed]
    if bad or (nonempty and not values):
        what = "a non-empty subset" if nonempty else "a subset"
        raise ValueError(f"{name} = {values!r}; allowed: {what} of {', '.join(allowed)}")
    return tuple(a for a in allowed if a in values)


def known_keys(what: str, keys: Iterable[str], allowed: Iterable[str], where: str = "") -> None:
    """Every key is one of allowed; else "unknown {what} 'x'{where}; allowed: a, b, c"."""
    allowed = list(allowed)
    unknown = [k for k in keys if k not in allowed]
    if unknown:
        names = ", ".join(map(repr, unknown))
        raise ValueError(f"unknown {what} {names}{where}; allowed: {', '.join(allowed) or 'none'}")



def output_folder(flag: str, path: Any) -> Path:
    """path as a folder a command may write into (created if missing): ValueError naming
    `flag` and the path when it, or a folder above it, is a file, or when the folder (or the
    nearest one above it that exists, where it would be created) is read-only."""
    path = Path(path)
    above = next((p for p in (path, *path.parents) if p.exists()), None)
    if above is not None and not above.is_dir():
        inside = "" if above == path else f" (it would lie inside {str(above)!r})"
        raise ValueError(f"{flag} {str(path)!r}: {str(above)!r} is a file{inside}; expected a "
                         "folder, created if missing")
    if above is not None and not os.access(above, os.W_OK | os.X_OK):
        inside = "" if above == path else f" (it would be created inside {str(above)!r})"
        raise ValueError(f"{flag} {str(path)!r}: {str(above)!r} is read-only{inside}; give a "
                         "folder you can write to")
    return path
