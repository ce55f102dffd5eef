"""When to record: small callables `step -> bool`, combinable with `|` and `&`.

    Every(n, start=0, stop=None)   start, start+n, start+2n, ... (stop exclusive)
    At([s1, s2, ...])              exactly those steps
    LogSpaced(per_decade=5)        0 and round(10**(i / per_decade)) for i = 0, 1, 2, ...
    Never(), Every(1)              nothing / every step
    a | b, a & b                   union / intersection

Cheap statistics can run on every step while histograms, snapshots and the costly
statistics (approximate sparsifiers) run on sparser schedules. `parse_schedule` turns the
config forms (int, list, dict, string) into a schedule.

A schedule that can never fire (`{every: 10, start: 100, stop: 50}`, `{steps: [5], start: 10}`)
is refused when built; `fires_within(n)` tells whether one fires at any step in [0, n), so a
recorder told its run length can warn about a schedule that would record nothing, and
`listed_from(n)` gives the listed steps (`steps: [...]`) at or after n, which a run of n steps
never reaches (the recorder warns about them too).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any

from topkscope import validate

_SCAN_LIMIT = 1_000_000  # fires_within: steps tried one by one for schedules with no closed form


def _step_int(value: Any, what: str, low: int = 0) -> int:
    return validate.integer(what, value, low, whole_floats=True)


class Schedule(ABC):
    """A predicate on step numbers (integers >= 0)."""

    @abstractmethod
    def __call__(self, step: int) -> bool:
        """True when something is to be recorded at this step."""

    def is_never(self) -> bool:
        """True when the schedule provably fires at no step at all."""
        return False

    def fires_within(self, n: int) -> bool | None:
        """Does it fire at some step in [0, n)? None when that cannot be told cheaply
        (more than a million steps to try one by one)."""
        if self.is_never():
            return False
        if n > _SCAN_LIMIT:
            return None
        return any(self(s) for s in range(n))

    def listed_from(self, n: int) -> list[int]:
        """The steps this schedule lists by number (At, alone or combined) that it would fire
        at and that are >= n: what a run of n steps never records. Periodic schedules list
        none."""
        return []

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


def _window(start: Any, stop: Any) -> tuple[int, int | None]:
    """Checked (start, stop); an empty window [start, stop) is refused."""
    start = _step_int(start, "start")
    stop = None if stop is None else _step_int(stop, "stop")
    if stop is not None and stop <= start:
        raise ValueError(f"stop = {stop} is not after start = {start}: the window [start, stop) "
                         f"is empty and the schedule would never fire")
    return start, stop


class Every(Schedule):
    """step in {start, start + n, start + 2n, ...} and step < stop (if given)."""

    def __init__(self, n: int, start: int = 0, stop: int | None = None) -> None:
        self.n = _step_int(n, "every", 1)
        self.start, self.stop = _window(start, stop)

    def __call__(self, step: int) -> bool:
        if step < self.start or (self.stop is not None and step >= self.stop):
            return False
        return (step - self.start) % self.n == 0

    def fires_within(self, n: int) -> bool:
        return self.start < n

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

    def fires_within(self, n: int) -> bool:
        return any(s < n for s in self.steps)

    def listed_from(self, n: int) -> list[int]:
        return sorted(s for s in self.steps if s >= n)

    def __repr__(self) -> str:
        return f"At({sorted(self.steps)})"


class LogSpaced(Schedule):
    """0 and round(10**(i / per_decade)) for i >= 0 (rounded half up), within [start, stop)."""

    def __init__(self, per_decade: int = 5, start: int = 0, stop: int | None = None) -> None:
        self.per_decade = _step_int(per_decade, "per_decade", 1)
        self.start, self.stop = _window(start, stop)
        if self.stop is not None and not any(self(s) for s in range(self.start, self.stop)):
            raise ValueError(f"log:{self.per_decade} has no step in [start = {self.start}, "
                             f"stop = {self.stop}); this schedule would never fire")

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

    def fires_within(self, n: int) -> bool | None:
        answers = [m.fires_within(n) for m in self.members]
        return True if any(answers) else (None if None in answers else False)

    def listed_from(self, n: int) -> list[int]:
        return sorted({s for m in self.members for s in m.listed_from(n)})

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
        if any(m.is_never() for m in self.members):
            return True
        finite = [m for m in self.members if isinstance(m, At)]
        return bool(finite) and not any(self(s) for s in finite[0].steps)

    def listed_from(self, n: int) -> list[int]:
        return sorted({s for m in self.members for s in m.listed_from(n) if self(s)})

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
        base = AllOf(base, Every(1, start, stop))
    if base.is_never():
        raise ValueError(f"schedule {dict(spec)!r} can never fire (no step satisfies it)")
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

    def fires_within(self, n: int) -> None:
        return None  # a user function is not called ahead of time

    def __repr__(self) -> str:
        return f"Callable({getattr(self.fn, '__name__', repr(self.fn))})"
