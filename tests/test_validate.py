"""The one validation helper: each check returns the normal form or raises one line naming
the parameter, the bad value and what is allowed."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
import torch

from topkscope import validate
from topkscope.hooks.recorder import SETTINGS, Recorder, check_settings
from topkscope.sparsify import available, get_sparsifier, parameters
from topkscope.train import validate as validate_config


def _message(fn, *args, **kwargs) -> str:
    with pytest.raises(ValueError) as err:
        fn(*args, **kwargs)
    message = str(err.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("lo, hi, kw, text", [
    (1, None, {}, "[1, inf)"),
    (None, 5, {}, "(-inf, 5]"),
    (0, 1, {"lo_open": True}, "(0, 1]"),
    (0.0, math.inf, {"hi_open": True}, "[0.0, inf)"),
    (1, 100, {"hi_name": "d"}, "[1, d = 100]"),
    (None, None, {}, ""),
])
def test_allowed_range_words(lo, hi, kw, text):
    assert validate.allowed_range(lo, hi, **kw) == text


def test_integer_accepts_integers_in_range_and_names_the_rest():
    assert validate.integer("n", 3, 1, 5) == 3
    assert type(validate.integer("n", np.int64(4), 1)) is int
    assert validate.integer("n", 4.0, 1, whole_floats=True) == 4
    assert _message(validate.integer, "n", 0, 1) == "n = 0 is outside the allowed range [1, inf)"
    assert _message(validate.integer, "n", 2.5, 1) == "n = 2.5 must be an integer in [1, inf)"
    assert _message(validate.integer, "n", 4.0, 1) == "n = 4.0 must be an integer in [1, inf)"
    assert _message(validate.integer, "n", True) == "n = True must be an integer"
    assert _message(validate.integer, "n", "3", 0, 9) == "n = '3' must be an integer in [0, 9]"


def test_number_checks_type_finiteness_and_open_ends():
    assert validate.number("lr", 1, 0, lo_open=True) == 1.0
    assert validate.number("x", np.float32(0.5), 0, 1) == 0.5
    assert _message(validate.number, "rho", 0, 0, 1, lo_open=True) == \
        "rho = 0 is outside the allowed range (0, 1]"
    assert _message(validate.number, "rho", math.nan, 0, 1) == \
        "rho = nan is outside the allowed range [0, 1]"
    assert _message(validate.number, "x", math.inf) == "x = inf must be a finite number"
    assert _message(validate.number, "x", "1e-2", 0, 1) == "x = '1e-2' must be a number in [0, 1]"
    assert _message(validate.number, "x", False) == "x = False must be a number"
    assert _message(validate.number, "m", 1.0, 0, 1, hi_open=True) == \
        "m = 1.0 is outside the allowed range [0, 1)"


def test_choices_lists_subsets_and_keys():
    assert validate.choice("launcher", "sim", ("sim", "torchrun")) == "sim"
    assert _message(validate.choice, "launcher", "mpi", ("sim", "torchrun")) == \
        "launcher = 'mpi' is not allowed; choose one of: sim, torchrun"
    assert validate.list_of("xs", (1, 2), lambda n, v: validate.integer(n, v, 0)) == [1, 2]
    assert validate.list_of("xs", None, validate.boolean) == []
    assert _message(validate.list_of, "xs", [1, -2], lambda n, v: validate.integer(n, v, 0)) == \
        "xs[1] = -2 is outside the allowed range [0, inf)"
    assert "strictly increasing" in _message(validate.list_of, "xs", [2, 1], validate.integer,
                                             increasing=True)
    assert "xs is empty" in _message(validate.list_of, "xs", [], validate.integer, nonempty=True)
    assert _message(validate.list_of, "xs", 3, validate.integer) == "xs = 3 must be a list"
    assert validate.subset("kinds", ["e", "g"], ("g", "u", "e")) == ("g", "e")
    assert validate.subset("kinds", "u", ("g", "u", "e")) == ("u",)
    assert "a non-empty subset of g, u, e" in _message(validate.subset, "kinds", [], "gue")
    validate.known_keys("key", ["a"], ["a", "b"])
    assert _message(validate.known_keys, "key", ["a", "z"], ["a", "b"], where=" in x") == \
        "unknown key 'z' in x; allowed: a, b"


def test_recorder_settings_are_the_recorders_keyword_arguments():
    # declared, not discovered: this keeps the declaration and the signature in step
    params = inspect.signature(Recorder.__init__).parameters
    # mode, total_steps and run_fields belong to one run, not to a config: the training loop
    # sets them (and writes what ran into its own manifest)
    assert set(SETTINGS) == set(params) - {"self", "out_dir", "rank", "manifest", "mode",
                                           "total_steps", "run_fields"}


def test_recorder_settings_are_checked_without_a_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert check_settings({"densities": 0.01, "kinds": ["u", "g"]}) == \
        {"densities": (0.01,), "kinds": ("g", "u")}
    assert _message(check_settings, {"hist_bins": 0}, prefix="recorder.") == \
        "recorder.hist_bins = 0 is outside the allowed range [1, inf)"
    assert "unknown recorder setting 'bins'" in _message(check_settings, {"bins": 3})
    minimal = dict(experiment="x", model="fnn3", dataset="mnist", batch_size=8, lr=0.1,
                   density=0.01, steps=2)
    assert "recorder.hist_range = 0" in _message(validate_config,
                                                 {**minimal, "recorder": {"hist_range": 0}})
    assert list(tmp_path.iterdir()) == []  # nothing was built or written


def test_unknown_sparsifier_parameters_list_the_allowed_ones():
    for name in available():
        message = _message(get_sparsifier, name, no_such_parameter=1)
        allowed = ", ".join(parameters(name)) or "none"
        assert message == (f"unknown parameter 'no_such_parameter' for sparsifier {name!r}; "
                           f"allowed: {allowed}")
    assert parameters("dgc") == ["sample_ratio", "seed"]
    assert parameters("dgc-sampled") == ["sample_ratio", "min_sample", "trim", "seed"]
    assert parameters("sidco") == ["dist", "stages", "first_ratio", "empty_fallback"]


@pytest.mark.parametrize("name", available())
def test_a_vector_that_requires_grad_is_refused_in_one_line(name):
    u = torch.randn(100, requires_grad=True)
    assert "u requires grad; allowed: a tensor without autograd history" in \
        _message(get_sparsifier(name).select, u, 5)
    assert get_sparsifier(name).select(u.detach(), 5).numel() >= 1
