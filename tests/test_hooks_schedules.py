"""Recording schedules: the predicates, their combinations and the config forms."""

import pytest

from topkscope.hooks.schedules import (
    AllOf,
    AnyOf,
    At,
    Every,
    LogSpaced,
    Never,
    parse_schedule,
)


def fired(schedule, upto=120):
    return [s for s in range(upto) if schedule(s)]


def test_every_with_start_and_stop():
    assert fired(Every(25)) == [0, 25, 50, 75, 100]
    assert fired(Every(10, start=5, stop=40)) == [5, 15, 25, 35]
    assert fired(Every(1, start=118)) == [118, 119]


def test_at_and_never():
    assert fired(At([3, 1, 3, 200])) == [1, 3]
    assert fired(Never()) == [] and Never().is_never()
    assert At([]).is_never() and not At([0]).is_never()


def test_log_spaced_matches_the_formula():
    ref = sorted({0} | {int(10 ** (i / 4) + 0.5) for i in range(20)})
    assert fired(LogSpaced(4), 10_000) == [s for s in ref if s < 10_000]
    assert fired(LogSpaced(1), 2000) == [0, 1, 10, 100, 1000]
    assert fired(LogSpaced(2, start=5, stop=400)) == [10, 32, 100]


def test_combinations():
    s = Every(50) | At([7]) | LogSpaced(1)
    assert fired(s) == [0, 1, 7, 10, 50, 100]
    both = AllOf(Every(2), Every(3))
    assert fired(both, 20) == [0, 6, 12, 18]
    assert fired(Every(2) & At([3, 4]), 10) == [4]
    assert AnyOf().is_never() and AnyOf(Never(), At([])).is_never()


@pytest.mark.parametrize("spec,expected", [
    (None, []), (False, []), (0, []), (True, list(range(12))), (5, [0, 5, 10]),
    ([2, 9], [2, 9]), ({"every": 4}, [0, 4, 8]), ({"every": 4, "start": 2}, [2, 6, 10]),
    ({"steps": [1, 11]}, [1, 11]), ({"at": [3]}, [3]), ({"log": 1}, [0, 1, 10]),
    ({"steps": [1, 5, 9], "stop": 6}, [1, 5]),
    ({"any": [{"every": 5}, [1]]}, [0, 1, 5, 10]), ({"all": [2, 3]}, [0, 6]),
    ("every:6", [0, 6]), ("log:1", [0, 1, 10]), ("at:4,7", [4, 7]), ("never", []),
    ("always", list(range(12))), ("every:5 | at:3", [0, 3, 5, 10]),
    (lambda s: s % 7 == 1, [1, 8]),
])
def test_parse_schedule_config_forms(spec, expected):
    assert fired(parse_schedule(spec), 12) == expected


@pytest.mark.parametrize("spec", [
    -1, {"every": 0}, {"every": 2, "steps": [1]}, {"evry": 3}, "every:x", "sometimes",
    [1, -2], [1.5], {"log": 0}, object(), {"every": True},
])
def test_bad_schedules_raise_value_error(spec):
    with pytest.raises(ValueError):
        parse_schedule(spec)


def test_reprs_are_readable_for_the_manifest():
    assert repr(parse_schedule({"every": 10})) == "Every(10)"
    assert repr(parse_schedule("every:5|at:3")) == "Every(5) | At([3])"
