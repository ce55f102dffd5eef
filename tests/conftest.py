"""Shared test set-up: deterministic threads, the data root, small helpers."""

import os
from pathlib import Path

import pytest
import torch

# Two cores on the reference machine; xdist runs two workers, so one thread each.
torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def data_root() -> Path:
    """Where `make data` put the datasets (TOPKSCOPE_DATA, else ./data)."""
    return Path(os.environ.get("TOPKSCOPE_DATA", REPO / "data"))
