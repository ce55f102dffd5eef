"""A gloo process group of world size 1 in the test's own process (for the DDP hook)."""

from __future__ import annotations

from contextlib import contextmanager

import pytest


@contextmanager
def one_process_group():
    """A gloo group of world size 1 in this process, destroyed afterwards."""
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()
