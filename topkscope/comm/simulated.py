"""P workers in one process: contributions are combined in memory, in rank order."""

from __future__ import annotations

import torch

from topkscope import validate
from topkscope.comm.sparse import SparseUpdate
from topkscope.comm.transport import Transport


class SimulatedTransport(Transport):
    """Hosts ranks 0..P-1; the loop computes each worker's gradient in turn."""

    def __init__(self, world_size: int) -> None:
        self.world_size = validate.integer("workers", world_size, 1)
        self.local_ranks = list(range(world_size))

    def _check(self, local: list) -> None:
        if len(local) != self.world_size:
            raise ValueError(f"expected {self.world_size} local contributions, got {len(local)}")

    def gather_sparse(self, local: list[SparseUpdate]) -> list[SparseUpdate]:
        self._check(local)
        return list(local)

    def sum_dense(self, local: list[torch.Tensor]) -> torch.Tensor:
        self._check(local)
        total = local[0]
        for t in local[1:]:
            total += t  # rank order, like a two-rank all-reduce
        return total

    def barrier(self) -> None:
        """Nothing to wait for: every worker lives in this process."""

    def sum_scalars(self, local: list[list[float]]) -> list[float]:
        self._check(local)
        return [float(sum(col)) for col in zip(*local)]
