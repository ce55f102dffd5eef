"""Two real gloo processes against the simulated transport and dense single-process references.

Starting a pair of processes costs seconds, so each pair does several things: one pair
exchanges hand-made sparse updates and trains through the DDP hook, another trains with
the Trainer on torch.distributed and with plain DDP.
"""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F

from tests._topk_reference import (
    exact_topk,
    max_rel_diff,
    mnist,
    reference_topk_sgd,
    run_gloo,
    trainer_on,
    worker_batch,
)
from topkscope.comm import SimulatedTransport, SparseUpdate, scatter_sum
from topkscope.sparsify import available, get_sparsifier
from topkscope.train import validate

# every test here trains in gloo worker processes (the DDP hook, the Trainer, plain DDP)
pytestmark = pytest.mark.train

# FNN-3 on real MNIST shards: 2 workers, 20 steps (issue 4's equivalence setting).
EQUIV = dict(experiment="equivalence", model="fnn3", dataset="mnist", workers=2, batch_size=32,
             steps=20, lr=0.1, momentum=0.9, weight_decay=1e-4, density=0.01, seed=3, threads=1)
SPARSIFIERS = [s for s in ("topk", "gaussiank", "gaussiank-2019") if s in available()]

# Sparse contributions (rank 0, rank 1) of a d = 16 vector: unequal, overlapping, empty.
D = 16
CASES = {
    "3 vs 7, overlapping": ([1, 5, 9], [0, 1, 2, 5, 6, 9, 15]),
    "rank 1 sends nothing": ([0, 3, 4, 8, 12], []),
    "nobody sends": ([], []),
    "nothing vs everything": ([], list(range(D))),
}


def case_update(indices: list[int], rank: int, dtype: torch.dtype) -> SparseUpdate:
    values = torch.tensor([(i + 1) * (0.5 if rank else -1.25) for i in indices], dtype=torch.float32)
    return SparseUpdate(values, torch.tensor(indices, dtype=dtype))


def dense_mean(case: tuple[list[int], list[int]]) -> torch.Tensor:
    """Obvious reference: each worker's dense vector, summed in float64, divided by P."""
    total = torch.zeros(D, dtype=torch.float64)
    for rank, indices in enumerate(case):
        dense = torch.zeros(D, dtype=torch.float64)
        for v, i in zip(case_update(indices, rank, torch.int64).values.tolist(), indices):
            dense[i] = v
        total += dense
    return total / len(case)


# ---------------------------------------------------------------- process bodies
def _exchange_body(rank: int, world: int) -> dict:
    from topkscope.comm import DistributedTransport

    transport = DistributedTransport()
    out = {"hook": _hook_body(rank, world, HOOK_DENSE_STEPS, HOOK_STEPS)}
    for name, case in CASES.items():
        for dtype in (torch.int32, torch.int64):
            everyone = transport.gather_sparse([case_update(case[rank], rank, dtype)])
            out[name, dtype] = (scatter_sum(everyone, D, torch.float32, "cpu") / world,
                                [u.count for u in everyone])
    out["dense"] = transport.sum_dense([torch.full((4,), float(rank + 1))])
    out["scalars"] = transport.sum_scalars([[rank + 0.5, 2.0]])
    return out


def _training_body(rank: int, world: int, sparsifiers: list[str]) -> dict:
    from torch.nn.parallel import DistributedDataParallel

    from topkscope.comm import DistributedTransport

    out = {}
    for name in sparsifiers + ["dense"]:
        trainer = trainer_on(validate({**EQUIV, "sparsifier": name}), DistributedTransport(),
                             mnist())
        rows = [trainer.train_step() for _ in range(EQUIV["steps"])]
        out[name] = ([p.detach().clone() for p in trainer.params], rows)
    # ordinary data-parallel SGD: torch DDP with its own all-reduce, same data and init
    trainer = trainer_on(validate({**EQUIV, "sparsifier": "dense"}), DistributedTransport(),
                         mnist())
    model, ds = trainer.model, trainer.task.train
    ddp = DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=EQUIV["lr"], momentum=EQUIV["momentum"],
                          weight_decay=EQUIV["weight_decay"])
    for step in range(EQUIV["steps"]):
        x, y = worker_batch(ds, rank, world, step, EQUIV["batch_size"], EQUIV["seed"])
        opt.zero_grad()
        F.cross_entropy(ddp(x), y).backward()
        opt.step()
    out["ddp"] = [p.detach().clone() for p in model.parameters()]
    return out


HOOK_STEPS, HOOK_DENSE_STEPS = 6, (0, 2)


@functools.lru_cache(maxsize=1)
def exchange_and_hook_results() -> list[dict]:
    return run_gloo(_exchange_body)


def _hook_body(rank: int, world: int, dense_steps_list: tuple[int, ...], steps: int) -> dict:
    from torch.nn.parallel import DistributedDataParallel

    from topkscope.comm import DistributedTransport, TopKHookState, topk_hook

    out = {}
    for dense_steps in dense_steps_list:
        trainer = trainer_on(validate({**EQUIV, "sparsifier": "dense"}),
                             DistributedTransport(), mnist())
        model, ds = trainer.model, trainer.task.train
        # tiny buckets: FNN-3 spreads over several, which DDP regroups after step 0
        ddp = DistributedDataParallel(model, bucket_cap_mb=0.05)
        density = EQUIV["density"] if dense_steps else (lambda step: EQUIV["density"])
        state = TopKHookState(model, sparsifier="topk", density=density, dense_steps=dense_steps)
        ddp.register_comm_hook(state, topk_hook)
        opt = torch.optim.SGD(model.parameters(), lr=EQUIV["lr"], momentum=EQUIV["momentum"],
                              weight_decay=EQUIV["weight_decay"])
        for step in range(steps):
            x, y = worker_batch(ds, rank, world, step, EQUIV["batch_size"], EQUIV["seed"])
            opt.zero_grad()
            F.cross_entropy(ddp(x), y).backward()
            opt.step()
        restored = TopKHookState(model, sparsifier="topk", density=EQUIV["density"])
        restored.load_state_dict(state.state_dict())
        same = restored.step == state.step and torch.equal(
            restored.compressor.feedback.residual("__global__"),
            state.compressor.feedback.residual("__global__"))
        out[dense_steps] = ([p.detach().clone() for p in model.parameters()], state.step,
                            state.last.counts, same)
    return out


# ---------------------------------------------------------------- tests
def test_unequal_counts_aggregate_like_the_dense_reference():
    for rank_result in exchange_and_hook_results():
        for name, case in CASES.items():
            expected = dense_mean(case)
            for dtype in (torch.int32, torch.int64):
                mean, counts = rank_result[name, dtype]
                assert counts == [len(case[0]), len(case[1])], name
                torch.testing.assert_close(mean.double(), expected, rtol=1e-7, atol=0,
                                           msg=f"{name} ({dtype})")
                # the simulated transport gives the same bits
                sim = SimulatedTransport(2).gather_sparse(
                    [case_update(case[r], r, dtype) for r in range(2)])
                assert torch.equal(scatter_sum(sim, D, torch.float32, "cpu") / 2, mean)
        assert torch.equal(rank_result["dense"], torch.full((4,), 3.0))
        assert rank_result["scalars"] == [2.0, 4.0]


def test_gloo_training_matches_simulation_reference_and_ddp():
    results = run_gloo(_training_body, SPARSIFIERS)
    assert results[0].keys() == results[1].keys()
    for name in SPARSIFIERS + ["dense"]:
        cfg = validate({**EQUIV, "sparsifier": name})
        sim = trainer_on(cfg, SimulatedTransport(2), mnist())
        sim_rows = [sim.train_step() for _ in range(EQUIV["steps"])]
        sim_params = [p.detach() for p in sim.params]
        for rank in range(2):
            gloo_params, gloo_rows = results[rank][name]
            assert max_rel_diff(gloo_params, sim_params) <= 1e-5, (name, rank)
            assert [r["selected"] for r in gloo_rows] == [r["selected"] for r in sim_rows]
            assert [r["bytes_sent"] for r in gloo_rows] == [r["bytes_sent"] for r in sim_rows]
        if name == "dense":
            continue
        ref_model = trainer_on(cfg, SimulatedTransport(1), mnist())
        select = exact_topk if name == "topk" else get_sparsifier(name).select
        ref = reference_topk_sgd(
            ref_model.model, ref_model.task.train, world=2, steps=EQUIV["steps"],
            batch_size=EQUIV["batch_size"], seed=EQUIV["seed"], density=EQUIV["density"],
            lr=EQUIV["lr"], momentum=EQUIV["momentum"], weight_decay=EQUIV["weight_decay"],
            select=select)
        assert max_rel_diff(sim_params, ref) <= 1e-5, name
        moved = max_rel_diff([p.detach() for p in ref_model.params], ref)
        assert moved == 0.0  # the reference trained the very model it returns
    # dense TopK-SGD is ordinary data-parallel SGD (torch DDP)
    for rank in range(2):
        assert max_rel_diff(results[rank]["dense"][0], results[rank]["ddp"]) <= 1e-5
    if "gaussiank-2019" in SPARSIFIERS:  # its counts differ between workers: exercised above
        rows = results[0]["gaussiank-2019"][1]
        assert len({r["selected"] for r in rows}) > 1


def test_ddp_hook_matches_the_dense_reference_through_bucket_rebuild():
    steps = HOOK_STEPS
    results = [r["hook"] for r in exchange_and_hook_results()]
    cfg = validate({**EQUIV, "sparsifier": "topk"})
    for dense_steps in HOOK_DENSE_STEPS:
        ref_trainer = trainer_on(cfg, SimulatedTransport(1), mnist())
        ref = reference_topk_sgd(
            ref_trainer.model, ref_trainer.task.train, world=2, steps=steps,
            batch_size=EQUIV["batch_size"], seed=EQUIV["seed"], density=EQUIV["density"],
            lr=EQUIV["lr"], momentum=EQUIV["momentum"], weight_decay=EQUIV["weight_decay"],
            select=exact_topk, dense_steps=dense_steps)
        k = max(1, round(EQUIV["density"] * sum(p.numel() for p in ref)))
        for rank in range(2):
            params, hook_steps, counts, restored = results[rank][dense_steps]
            assert hook_steps == steps and restored
            assert counts == [k, k]
            assert max_rel_diff(params, ref) <= 1e-5, (dense_steps, rank)
