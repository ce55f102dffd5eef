"""When to record: small callables `step -> bool`, combinable with `|` and `&`.

    Every(n, start=0, stop=None)   start, start+n, start+2n, ... (stop exclusive)
    At([s1, s2, ...])              exactly those steps
    LogSpaced(per_decade=5)        0 and round(10**(i / per_decade)) for i = 0, 1, 2, ...
    Never(), Every(1)              nothing / every step
    a | b, a & b                   union / intersection

Cheap statistics can run on every step while histograms, snapshots and the costly
statistics (approximate sparsifiers) run on sparser schedules. `parse_schedule` turns the
config forms (int, list, dict, string) into a schedule.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any

from topkscope import validate


def _step_int(value: Any, what: str, low: int = 0) -> int:
    return validate.integer(what, value, low, whole_floats=True)


class Schedule(ABC):
    """A predicate on step numbers (integers >= 0)."""

    @abstractmethod
    def __call__(self, step: int) -> bool:
        """True when something is to be recorded at this step."""

    def is_never(self) -> bool:
        return False

    def __or__(self, other: Schedule) -> Schedule:
        return AnyOf(self, parse_schedule(other))

    def __and__(self, other: Schedule) -> Schedule:
        return AllOf(self, parse_schedule(other))


class Never(Schedule):
    def __call__(self, step: int) -> bool:
        return False

    def is_never(self) -> bool:
        return True

    def __repr__(self) -> str:
        return "Never()"


class Every(Schedule):
    """step in {start, start + n, start + 2n, ...} and step < stop (if given)."""

    def __init__(self, n: int, start: int = 0, stop: int | None = None) -> None:
        self.n = _step_int(n, "every", 1)
        self.start = _step_int(start, "start")
        self.stop = None if stop is None else _step_int(stop, "stop")

    def __call__(self, step: int) -> bool:
        if step < self.start or (self.stop is not None and step >= self.stop):
            return False
        return (step - self.start) % self.n == 0

    def is_never(self) -> bool:
        return self.stop is not None and self.stop <= self.start

    def __repr__(self) -> str:
        extra = "" if self.start == 0 else f", start={self.start}"
        extra += "" if self.stop is None else f", stop={self.stop}"
        return f"Every({self.n}{extra})"


class At(Schedule):
    """Exactly the listed steps."""

    def __init__(self, steps: Iterable[int]) -> None:
        if isinstance(steps, (str, bytes)) or not isinstance(steps, Iterable):
            raise ValueError(f"steps = {steps!r} must be a list of integers >= 0")
        self.steps = frozenset(_step_int(s, "step") for s in steps)

    def __call__(self, step: int) -> bool:
        return step in self.steps

    def is_never(self) -> bool:
        return not self.steps

    def __repr__(self) -> str:
        return f"At({sorted(self.steps)})"


class LogSpaced(Schedule):
    """0 and round(10**(i / per_decade)) for i >= 0 (rounded half up), within [start, stop)."""

    def __init__(self, per_decade: int = 5, start: int = 0, stop: int | None = None) -> None:
        self.per_decade = _step_int(per_decade, "per_decade", 1)
        self.start = _step_int(start, "start")
        self.stop = None if stop is None else _step_int(stop, "stop")

    def _point(self, i: int) -> int:
        return int(math.floor(10.0 ** (i / self.per_decade) + 0.5))

    def __call__(self, step: int) -> bool:
        if step < self.start or (self.stop is not None and step >= self.stop):
            return False
        if step == 0:
            return True
        i0 = round(self.per_decade * math.log10(step))
        return any(self._point(i) == step for i in (i0 - 1, i0, i0 + 1) if i >= 0)

    def __repr__(self) -> str:
        extra = "" if self.start == 0 else f", start={self.start}"
        extra += "" if self.stop is None else f", stop={self.stop}"
        return f"LogSpaced({self.per_decade}{extra})"


class AnyOf(Schedule):
    """Union: any member fires."""

    def __init__(self, *members: Schedule) -> None:
        self.members = tuple(parse_schedule(m) for m in members)

    def __call__(self, step: int) -> bool:
        return any(m(step) for m in self.members)

    def is_never(self) -> bool:
        return all(m.is_never() for m in self.members)

    def __repr__(self) -> str:
        return " | ".join(map(repr, self.members)) or "Never()"


class AllOf(Schedule):
    """Intersection: every member fires."""

    def __init__(self, *members: Schedule) -> None:
        if not members:
            raise ValueError("AllOf needs at least one schedule")
        self.members = tuple(parse_schedule(m) for m in members)

    def __call__(self, step: int) -> bool:
        return all(m(step) for m in self.members)

    def is_never(self) -> bool:
        return any(m.is_never() for m in self.members)

    def __repr__(self) -> str:
        return "(" + " & ".join(map(repr, self.members)) + ")"


_DICT_KEYS = ("every", "steps", "at", "log", "start", "stop", "any", "all")


def _from_mapping(spec: Mapping) -> Schedule:
    validate.known_keys("schedule key", spec, _DICT_KEYS)
    start, stop = spec.get("start", 0), spec.get("stop")
    forms = [k for k in ("every", "steps", "at", "log", "any", "all") if k in spec]
    if len(forms) != 1:
        raise ValueError(
            f"schedule {dict(spec)!r} must have exactly one of every / steps / at / log / any / all"
        )
    form = forms[0]
    if form == "every":
        return Every(spec["every"], start, stop)
    if form == "log":
        return LogSpaced(spec["log"], start, stop)
    if form in ("steps", "at"):
        base: Schedule = At(spec[form])
    else:
        members = spec[form]
        if not isinstance(members, (list, tuple)):
            raise ValueError(f"schedule {form!r} takes a list of schedules, got {members!r}")
        base = AnyOf(*members) if form == "any" else AllOf(*members)
    if start or stop is not None:
        return AllOf(base, Every(1, start, stop))
    return base


def _from_string(text: str) -> Schedule:
    parts = [p.strip() for p in text.split("|")]
    if len(parts) > 1:
        return AnyOf(*(_from_string(p) for p in parts))
    word, _, arg = text.strip().partition(":")
    word = word.strip().lower()
    try:
        if word in ("never", "off", "none", ""):
            return Never()
        if word in ("always", "every") and not arg:
            return Every(1)
        if word == "every":
            return Every(int(arg))
        if word == "log":
            return LogSpaced(int(arg) if arg else 5)
        if word in ("at", "steps"):
            return At(int(s) for s in arg.split(",") if s.strip())
    except ValueError as exc:
        raise ValueError(f"bad schedule {text!r}: {exc}") from None
    raise ValueError(
        f"bad schedule {text!r}; use never, always, every:N, log:K, at:s1,s2,... joined by '|'"
    )


def parse_schedule(spec: Any) -> Schedule:
    """A Schedule from its config form.

    Schedule -> itself; None/False/0 -> never; True -> every step; int n >= 1 -> every n steps;
    list of ints -> at those steps; dict {every: n[, start, stop]} | {steps: [...]} | {at: [...]}
    | {log: per_decade} | {any: [...]} | {all: [...]}; string 'every:10|log:5', 'at:1,2', 'never'.
    """
    if isinstance(spec, Schedule):
        return spec
    if spec is None or spec is False:
        return Never()
    if spec is True:
        return Every(1)
    if isinstance(spec, int):
        n = _step_int(spec, "schedule (0 = never)")
        return Never() if n == 0 else Every(n)
    if isinstance(spec, str):
        return _from_string(spec)
    if isinstance(spec, Mapping):
        return _from_mapping(spec)
    if isinstance(spec, (list, tuple, set, frozenset, range)):
        return At(spec)
    if callable(spec):
        return _Callable(spec)
    raise ValueError(f"cannot make a schedule from {spec!r} ({type(spec).__name__})")


class _Callable(Schedule):
    """Wraps a user function step -> bool."""

    def __init__(self, fn) -> None:
        self.fn = fn

    def __call__(self, step: int) -> bool:
        return bool(self.fn(step))

    def __repr__(self) -> str:
        return f"Callable({getattr(self.fn, '__name__', repr(self.fn))})"
