"""Worker shards: disjoint, equal, deterministic, epoch-dependent, same in real processes."""

from __future__ import annotations

import multiprocessing

import pytest
import torch
from torch.utils.data.distributed import DistributedSampler

from topkscope.data import shard_indices


@pytest.mark.parametrize("n, world", [(100, 4), (103, 4), (7, 7), (1000, 3), (5, 1)])
def test_disjoint_equal_length_cover(n, world):
    shards = [shard_indices(n, r, world, epoch=2, seed=11) for r in range(world)]
    assert all(s.dtype == torch.int64 and len(s) == n // world for s in shards)
    joined = torch.cat(shards)
    assert len(joined.unique()) == len(joined) == world * (n // world)
    assert int(joined.min()) >= 0 and int(joined.max()) < n


@pytest.mark.parametrize("n, world, seed, epoch", [(100, 4, 0, 0), (103, 4, 5, 3), (50, 3, 9, 1)])
def test_matches_torch_distributed_sampler_with_drop_last(n, world, seed, epoch):
    for rank in range(world):
        sampler = DistributedSampler(
            range(n), num_replicas=world, rank=rank, shuffle=True, seed=seed, drop_last=True
        )
        sampler.set_epoch(epoch)
        assert shard_indices(n, rank, world, epoch, seed).tolist() == list(sampler)


def test_deterministic_and_independent_of_global_rng():
    torch.manual_seed(0)
    a = shard_indices(1000, 1, 4, epoch=3, seed=42)
    torch.manual_seed(123)
    torch.rand(10)
    b = shard_indices(1000, 1, 4, epoch=3, seed=42)
    assert torch.equal(a, b)


def test_epoch_and_seed_change_the_order_but_not_the_sizes():
    base = shard_indices(1000, 0, 4, epoch=0, seed=1)
    assert not torch.equal(base, shard_indices(1000, 0, 4, epoch=1, seed=1))
    assert not torch.equal(base, shard_indices(1000, 0, 4, epoch=0, seed=2))
    assert len(shard_indices(1000, 0, 4, epoch=1, seed=1)) == len(base)


def test_no_shuffle_is_round_robin():
    assert shard_indices(10, 1, 3, epoch=5, seed=9, shuffle=False).tolist() == [1, 4, 7]


def _rank_shard(args):
    n, rank, world, epoch, seed = args
    torch.manual_seed(1000 + rank)  # each process has its own global RNG state
    return shard_indices(n, rank, world, epoch, seed).tolist()


def test_real_processes_get_the_same_shards_as_simulated_workers():
    n, world, epoch, seed = 997, 2, 4, 17
    simulated = [shard_indices(n, r, world, epoch, seed).tolist() for r in range(world)]
    with multiprocessing.get_context("spawn").Pool(world) as pool:
        real = pool.map(_rank_shard, [(n, r, world, epoch, seed) for r in range(world)])
    assert real == simulated


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        (dict(n=10, rank=4, world_size=4), r"rank = 4 is outside the allowed range \[0, 3\]"),
        (dict(n=10, rank=0, world_size=0), r"world_size = 0 is outside the allowed range \[1, inf\)"),
        (dict(n=3, rank=0, world_size=4), r"n = 3 is outside the allowed range \[4, inf\)"),
        (dict(n=10, rank=0, world_size=2, epoch=-1), r"epoch = -1"),
        (dict(n=10, rank=0, world_size=2, seed=1.5), r"seed = 1.5 must be an integer in \[0, inf\)"),
    ],
)
def test_bad_arguments_name_the_value_and_range(kwargs, pattern):
    args = dict(epoch=0, seed=0) | kwargs
    with pytest.raises(ValueError, match=pattern):
        shard_indices(**args)
