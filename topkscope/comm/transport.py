"""The one interface both transports implement.

A transport hosts some local workers (`local_ranks`: all P in simulation, one per process
under torch.distributed) and combines what they hold with the other workers'. Every
method takes one entry per local worker and returns the same result on every worker.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from topkscope.comm.sparse import SparseUpdate


class Transport(ABC):
    world_size: int
    local_ranks: list[int]

    @property
    def is_main(self) -> bool:
        """True where rank 0 lives (writes files, shows the progress bar)."""
        return 0 in self.local_ranks

    @abstractmethod
    def gather_sparse(self, local: list[SparseUpdate]) -> list[SparseUpdate]:
        """Every worker's contribution, in rank order (counts may differ, may be zero)."""

    @abstractmethod
    def sum_dense(self, local: list[torch.Tensor]) -> torch.Tensor:
        """Elementwise sum of every worker's dense vector (an all-reduce), computed in place:
        the result may be local[0] itself."""

    @abstractmethod
    def sum_scalars(self, local: list[list[float]]) -> list[float]:
        """Sum of small per-worker statistics (losses, counts), in float64."""

    @abstractmethod
    def barrier(self) -> None:
        """Wait for every worker."""
