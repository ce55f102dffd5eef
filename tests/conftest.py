"""Shared test set-up: deterministic threads, the data root, small helpers."""

import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch

# Two cores on the reference machine; xdist runs two workers, so one thread each.
torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def data_root() -> Path:
    """Where `make data` put the datasets (TOPKSCOPE_DATA, else ./data)."""
    return Path(os.environ.get("TOPKSCOPE_DATA", REPO / "data"))


@pytest.fixture(scope="session")
def outer_runs(tmp_path_factory, data_root) -> Path:
    """The results root of tests/_outer_runs.py (short runs of the outer-loop trainings)."""
    from tests._outer_runs import shared_outer_runs

    return shared_outer_runs(tmp_path_factory, data_root)


@pytest.fixture(autouse=True)
def _seeded_global_rng():
    """Every test starts from the same global random state, whatever ran before it in this
    process (xdist distributes tests differently from run to run)."""
    torch.manual_seed(0)
    np.random.seed(0)
    random.seed(0)


@pytest.fixture
def spy(monkeypatch):
    """spy(module, name) -> list: replaces module.name for this test by a wrapper that records
    the positional arguments of every call and then runs the real function. A user that calls
    the function through the module is seen; a copy of the function's code is not."""

    def watch(module, name: str) -> list:
        calls: list = []
        real = getattr(module, name)

        def wrapped(*args, **kwargs):
            calls.append(args)
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapped)
        return calls

    return watch


# ---- the `train` marker: kept honest in the tier that leaves it out -------------------------
#
# Tests that train (a Trainer step, `topkscope run`, torchrun, a training loop in worker
# processes; in the test or in a fixture it sets up) carry @pytest.mark.train, and so does every
# test that uses a fixture of TRAINING_FIXTURES (added at collection). `make test-fast`
# deselects them (-m "not slow and not train"); in such a session a test without the marker
# that trains in this process or starts `topkscope run` / torchrun fails, naming the marker, so
# the fast tier cannot grow slow unnoticed. Other sessions are not watched.

# the small results tree of tests/_figures_results.py, built by training
TRAINING_FIXTURES = ("small", "outer_runs")

_training_allowed = True


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(name in TRAINING_FIXTURES for name in getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.train)


def _refuse_training(what: str) -> None:
    if not _training_allowed:
        raise RuntimeError(f"this test trains ({what}) without @pytest.mark.train; mark it "
                           "(make test-fast leaves such tests out)")


def _launches_training(argv) -> str | None:
    """What a subprocess's argv starts that trains: `topkscope run` or torchrun."""
    if isinstance(argv, (str, bytes, os.PathLike)):
        return None  # a shell string or a bare program: not one of ours
    words = [os.path.basename(str(a)) for a in argv]
    if any(w in ("torchrun", "torch.distributed.run") for w in words):
        return "torchrun"
    for i, w in enumerate(words[:-1]):
        if w in ("topkscope", "topkscope.cli") and words[i + 1] == "run":
            return "topkscope run"
    return None


def pytest_configure(config):
    if "not train" not in (config.option.markexpr or ""):
        return
    import subprocess

    from topkscope.train.trainer import Trainer

    train_step = Trainer.train_step

    def watched_train_step(self, *args, **kwargs):
        _refuse_training("Trainer.train_step")
        return train_step(self, *args, **kwargs)

    class WatchedPopen(subprocess.Popen):
        def __init__(self, args, *rest, **kwargs):
            what = _launches_training(args)
            if what:
                _refuse_training(what)
            super().__init__(args, *rest, **kwargs)

    Trainer.train_step = watched_train_step
    subprocess.Popen = WatchedPopen


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before the item's fixtures are set up (session fixtures that train included)."""
    global _training_allowed
    _training_allowed = item.get_closest_marker("train") is not None
