"""Error feedback: u = g + e, e = u - s, with s + e == u bit-exactly over many steps."""

from __future__ import annotations

import io

import pytest
import torch

from tests._process_group import one_process_group
from topkscope.feedback import ErrorFeedback
from topkscope.sparsify import get_sparsifier


def _sent(u: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """The dense form of what was sent: s = u on idx, 0 elsewhere."""
    s = torch.zeros_like(u)
    s[idx] = u[idx]
    return s


@pytest.mark.parametrize("name", ["topk", "gaussiank", "gaussiank-2019", "randk", "dgc", "sidco"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_conservation_is_bit_exact_over_many_steps(name, dtype):
    gen = torch.Generator().manual_seed(3)
    sparsifier = get_sparsifier(name, seed=1) if name in ("randk", "dgc") else get_sparsifier(name)
    ef = ErrorFeedback()
    d, k = 50_000, 50
    previous = torch.zeros(d, dtype=dtype)
    for _ in range(30):
        g = (torch.randn(d, generator=gen) * 1e-2).to(dtype)
        u = ef.compensate("w", g)
        assert torch.equal(u, g + previous)  # u = g + e_{t-1}, exactly
        idx = sparsifier.select(u, k)
        e = ef.update("w", u, idx)
        s = _sent(u, idx)
        assert torch.equal(s + e, u)  # bit-exact: each position is in exactly one of s, e
        assert torch.count_nonzero(e[idx]) == 0
        assert torch.equal(e[e != 0], u[e != 0])
        previous = e
    assert torch.equal(ef.residual("w"), previous)


def test_residual_accumulates_what_was_not_sent():
    ef = ErrorFeedback()
    g = torch.tensor([1.0, 2.0, 3.0, 4.0])
    u = ef.compensate("a", g)
    ef.update("a", u, torch.tensor([3]))
    assert torch.equal(ef.residual("a"), torch.tensor([1.0, 2.0, 3.0, 0.0]))
    u = ef.compensate("a", g)
    assert torch.equal(u, torch.tensor([2.0, 4.0, 6.0, 4.0]))
    ef.update("a", u, torch.tensor([2, 1]))
    assert torch.equal(ef.residual("a"), torch.tensor([2.0, 0.0, 0.0, 4.0]))


def test_compensate_does_not_modify_g_and_starts_from_zero():
    ef = ErrorFeedback()
    g = torch.randn(10)
    g0 = g.clone()
    u = ef.compensate("x", g)
    assert torch.equal(u, g) and u.data_ptr() != g.data_ptr()
    ef.update("x", u, torch.tensor([0]))
    ef.compensate("x", g)
    assert torch.equal(g, g0)


def test_inplace_update_reuses_u():
    ef = ErrorFeedback()
    u = torch.randn(10)
    e = ef.update("x", u, torch.tensor([1, 2]), inplace=True)
    assert e.data_ptr() == u.data_ptr() and float(u[1]) == 0.0


def test_names_are_independent_and_instances_share_nothing():
    a, b = ErrorFeedback(), ErrorFeedback()
    a.update("w", torch.ones(3), torch.tensor([0]))
    a.update("v", torch.ones(2) * 2, torch.tensor([1]))
    assert b.names() == [] and b.residual("w") is None
    assert a.names() == ["w", "v"]
    assert torch.equal(a.residual("v"), torch.tensor([2.0, 0.0]))
    a.reset()
    assert a.names() == []


def test_state_dict_round_trip_continues_identically():
    gen = torch.Generator().manual_seed(0)
    grads = [torch.randn(1000, generator=gen) for _ in range(6)]
    topk = get_sparsifier("topk")

    def run(ef: ErrorFeedback, steps: list[torch.Tensor]) -> list[torch.Tensor]:
        out = []
        for g in steps:
            u = ef.compensate("w", g)
            idx = topk.select(u, 10)
            ef.update("w", u, idx)
            out.append(idx)
        return out

    straight = ErrorFeedback()
    expected = run(straight, grads)
    first = ErrorFeedback()
    run(first, grads[:3])
    buffer = io.BytesIO()
    torch.save(first.state_dict(), buffer)
    buffer.seek(0)
    resumed = ErrorFeedback()
    resumed.load_state_dict(torch.load(buffer, weights_only=True))
    got = run(resumed, grads[3:])
    for a, b in zip(expected[3:], got):
        assert torch.equal(a, b)
    assert torch.equal(resumed.residual("w"), straight.residual("w"))


def test_state_dict_is_a_copy():
    ef = ErrorFeedback()
    ef.update("w", torch.ones(4), torch.tensor([0]))
    state = ef.state_dict()
    state["w"][1] = 99.0
    assert float(ef.residual("w")[1]) == 1.0


def test_bad_input_is_refused():
    ef = ErrorFeedback()
    ef.update("w", torch.ones(4), torch.tensor([0]))
    with pytest.raises(ValueError, match=r"shape \(4,\) but the gradient has \(5,\)"):
        ef.compensate("w", torch.ones(5))
    with pytest.raises(ValueError, match="must lie in \\[0, 3\\]"):
        ef.update("w", torch.ones(4), torch.tensor([4]))
    with pytest.raises(ValueError, match="integer indices"):
        ef.update("w", torch.ones(4), torch.tensor([0.0]))
    with pytest.raises(ValueError, match="integer indices"):
        ef.update("w", torch.ones(4), torch.tensor([True, False, False, False]))
    with pytest.raises(ValueError, match="1-D"):
        ef.update("w", torch.ones(2, 2), torch.tensor([0]))
    with pytest.raises(ValueError, match="dict of name -> tensor"):
        ef.load_state_dict({"w": [1.0]})


@pytest.mark.parametrize("device", [None, "cpu"])
def test_load_state_dict_leaves_the_callers_dict_unchanged(device):
    # Tensor.to(device) returns the tensor itself when it already lies there; the load must
    # still copy, or training (which adds g into the residual in place) writes into `state`
    from topkscope.comm.compressor import RESIDUAL_KEY, WorkerCompressor
    from topkscope.comm.layout import Layout

    gen = torch.Generator().manual_seed(1)
    state = {RESIDUAL_KEY: torch.randn(64, generator=gen)}
    before = state[RESIDUAL_KEY].clone()
    compressor = WorkerCompressor(get_sparsifier("topk"), Layout.of([("w", torch.zeros(64, requires_grad=True))]))
    if device is None:
        compressor.feedback.load_state_dict(state)
    else:
        compressor.load_state_dict(state, device)
    for _ in range(3):
        compressor.compress(torch.randn(64, generator=gen), density=0.0625)
    assert torch.equal(state[RESIDUAL_KEY], before)
    assert not torch.equal(compressor.feedback.residual(RESIDUAL_KEY), before)  # it trained


def test_hook_state_load_state_dict_leaves_the_callers_dict_unchanged():
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel

    from topkscope.comm import TopKHookState, topk_hook

    with one_process_group():
        torch.manual_seed(0)
        model = nn.Linear(8, 2)
        ddp = DistributedDataParallel(model)
        state = TopKHookState(model, sparsifier="topk", density=0.25, dense_steps=0)
        saved = {"step": 4, "residual": {"__global__": torch.randn(18)}}
        before = saved["residual"]["__global__"].clone()
        state.load_state_dict(saved)
        ddp.register_comm_hook(state, topk_hook)
        for _ in range(3):
            ddp(torch.randn(5, 8)).square().sum().backward()
        assert state.step == 7
        assert torch.equal(saved["residual"]["__global__"], before)
        assert not torch.equal(state.compressor.feedback.residual("__global__"), before)


def test_ddp_hook_state_carries_an_adapting_sparsifier():
    """sidco's stage count is part of TopKHookState.state_dict(), and load_state_dict restores
    it, so a user's checkpoint resumes the adaptation where it stopped."""
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel

    from topkscope.comm import TopKHookState, topk_hook

    with one_process_group():
        torch.manual_seed(0)
        model = nn.Linear(400, 100)
        ddp = DistributedDataParallel(model)
        state = TopKHookState(model, sparsifier="sidco", density=0.001, dense_steps=0)
        ddp.register_comm_hook(state, topk_hook)
        for _ in range(7):
            ddp(torch.randn(5, 400)).square().sum().backward()
        saved = state.state_dict()
        assert saved["sparsifier"]["calls"] == 2 and saved["sparsifier"]["ratio_sum"] > 0
        restored = TopKHookState(model, sparsifier="sidco", density=0.001, dense_steps=0)
        assert restored.source.state_dict()["calls"] == 0
        restored.load_state_dict(saved)
        assert restored.source.state_dict() == saved["sparsifier"]
        assert TopKHookState(model, sparsifier="topk").state_dict()["sparsifier"] is None
