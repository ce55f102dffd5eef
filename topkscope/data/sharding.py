"""Split a dataset's indices among P workers, like torch's DistributedSampler (drop_last).

For epoch e:  perm = randperm(n) from a generator seeded with seed + e (or arange(n)
if not shuffle); keep the first m * P entries, m = n // P; rank r takes perm[r :: P].
Shards are disjoint, equally long (m), and depend only on (n, P, rank, epoch, seed) --
never on global RNG state -- so real processes and simulated workers get the same shards.
"""

from __future__ import annotations

import torch

from topkscope import validate


def epoch_permutation(n: int, epoch: int, seed: int, shuffle: bool = True) -> torch.Tensor:
    """The epoch's order of all n indices (int64), the same in every process."""
    if not shuffle:
        return torch.arange(n, dtype=torch.int64)
    generator = torch.Generator()
    generator.manual_seed(seed + epoch)
    return torch.randperm(n, generator=generator)


def shard_indices(
    n: int, rank: int, world_size: int, epoch: int, seed: int, shuffle: bool = True
) -> torch.Tensor:
    """Rank's int64 indices into n examples for this epoch (n // world_size of them)."""
    validate.integer("world_size", world_size, 1)
    validate.integer("n", n, world_size)
    validate.integer("rank", rank, 0, world_size - 1)
    validate.integer("epoch", epoch, 0)
    validate.integer("seed", seed, 0)
    per_rank = n // world_size
    order = epoch_permutation(n, epoch, seed, shuffle)
    return order[: per_rank * world_size][rank::world_size].clone()
