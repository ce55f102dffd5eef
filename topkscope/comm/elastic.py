"""Processes that torchrun restarts (`torchrun --max-restarts N`): telling a restart from a
second run, and a process group that a restarted worker group can form.

- `restart_count()`: torchrun's TORCHELASTIC_RESTART_COUNT (0 in the first worker group and
  outside torchrun). A worker with a count above 0 was started again by torchrun after a
  worker of its group died: it continues the run it belongs to from its last checkpoint.
- `restarts_left()`: how many more restarts torchrun's --max-restarts allows this group
  (TORCHELASTIC_MAX_RESTARTS less the count): a run that fails with one left is continued by
  torchrun itself, not by running the command again.
- `init_process_group(backend)`: `torch.distributed.init_process_group` that also works in a
  restarted worker group. torchrun's workers share the agent's rendezvous store
  (TORCHELASTIC_USE_AGENT_STORE), and that store outlives a restart with the previous group's
  keys in it: a gloo group formed again under the same keys reads the dead workers' addresses
  and fails ("Gloo connectFullMesh failed ... Connection refused"; pytorch/pytorch#135712). A
  restarted group therefore forms under keys of its own restart count (a PrefixStore). The
  first group, and every process outside torchrun, calls torch's function unchanged.
"""

from __future__ import annotations

import os
from datetime import timedelta

import torch.distributed as dist

RESTART_COUNT = "TORCHELASTIC_RESTART_COUNT"
MAX_RESTARTS = "TORCHELASTIC_MAX_RESTARTS"  # torchrun's --max-restarts, in its workers' env


def restart_count() -> int:
    """How many times torchrun restarted this worker group (0: the first start)."""
    try:
        return int(os.environ.get(RESTART_COUNT, "0"))
    except ValueError:
        return 0


def restarts_left() -> int:
    """How many more times torchrun will restart this worker group when a worker dies
    (--max-restarts less restart_count(); 0 outside torchrun)."""
    try:
        return max(0, int(os.environ.get(MAX_RESTARTS, "0")) - restart_count())
    except ValueError:
        return 0


def init_process_group(backend: str | None = None,
                       timeout: timedelta = timedelta(minutes=10)) -> None:
    """Initialise the default process group from torchrun's environment (see the module doc)."""
    count = restart_count()
    if count == 0 or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        dist.init_process_group(backend, timeout=timeout)
        return
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world,
                          is_master=False, timeout=timeout)
    dist.init_process_group(backend, store=dist.PrefixStore(f"restart-{count}", store),
                            rank=rank, world_size=world, timeout=timeout)
