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
