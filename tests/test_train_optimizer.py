"""MomentumSGD against torch.optim.SGD (dampening 0) and AdamW against torch.optim.AdamW: the
same numbers, bit for bit; what a manifest records of an optimizer."""

import json

import pytest
import torch

from topkscope.manifest import describe_optimizer
from topkscope.train.optimizer import AdamW, MomentumSGD

SHAPES = [(7, 5), (7,), (3, 7), (3,)]


def decay_groups(params, weight_decay, no_decay_1d):
    """torch.optim parameter groups: weight decay, and none on 1-D tensors if no_decay_1d."""
    decay = [p for p in params if not (no_decay_1d and p.dim() == 1)]
    groups = [{"params": decay, "weight_decay": weight_decay}]
    if len(decay) < len(params):
        groups.append({"params": [p for p in params if no_decay_1d and p.dim() == 1],
                       "weight_decay": 0.0})
    return groups


def assert_steps_like_torch(make_mine, make_torch, steps: int, lr0: float,
                            zero_step: int | None = None):
    """Both optimizers from the same parameters, the same updates (all zero at zero_step) and
    a changing lr: the parameters agree bit for bit after every step. Returns ours."""
    torch.manual_seed(0)
    mine = [torch.randn(s, requires_grad=True) for s in SHAPES]
    theirs = [p.detach().clone().requires_grad_(True) for p in mine]
    opt, ref = make_mine(mine), make_torch(theirs)
    for step in range(steps):
        lr = lr0 / (step + 1)
        updates = [torch.randn(s) * (0 if step == zero_step else 1) for s in SHAPES]
        for p, u in zip(theirs, updates):
            p.grad = u.clone()
        for group in ref.param_groups:
            group["lr"] = lr
        ref.step()
        opt.step(updates, lr)
        for a, b in zip(mine, theirs):
            assert torch.equal(a, b), step
    return opt


@pytest.mark.parametrize("momentum, weight_decay, nesterov, no_decay_1d", [
    (0.0, 0.0, False, False), (0.9, 1e-4, False, False), (0.9, 1e-4, True, False),
    (0.875, 6.1e-5, False, True),
])
def test_matches_torch_sgd(momentum, weight_decay, nesterov, no_decay_1d):
    assert_steps_like_torch(
        lambda p: MomentumSGD(p, momentum, weight_decay, nesterov, no_decay_1d),
        lambda p: torch.optim.SGD(decay_groups(p, weight_decay, no_decay_1d), lr=0.1,
                                  momentum=momentum, nesterov=nesterov, foreach=False),
        steps=5, lr0=0.1)


def test_state_round_trip_and_mismatch():
    params = [torch.zeros(3, requires_grad=True)]
    opt = MomentumSGD(params, 0.9)
    assert opt.state_dict() == {"momentum_buffers": []}
    opt.step([torch.ones(3)], 0.1)
    state = opt.state_dict()
    other = MomentumSGD([torch.zeros(3, requires_grad=True)], 0.9)
    other.load_state_dict(state)
    assert torch.equal(other.buffers[0], torch.ones(3))
    with pytest.raises(ValueError, match="does not match"):
        MomentumSGD([torch.zeros(4, requires_grad=True)], 0.9).load_state_dict(state)
    with pytest.raises(ValueError, match="nesterov"):
        MomentumSGD(params, 0.0, nesterov=True)


@pytest.mark.parametrize("betas, eps, weight_decay, no_decay_1d", [
    ((0.9, 0.999), 1e-8, 0.0, False), ((0.9, 0.95), 1e-8, 0.1, False),
    ((0.8, 0.99), 1e-6, 0.1, True),
])
def test_adamw_matches_torch_adamw(betas, eps, weight_decay, no_decay_1d):
    opt = assert_steps_like_torch(
        lambda p: AdamW(p, betas, eps, weight_decay, no_decay_1d),
        lambda p: torch.optim.AdamW(decay_groups(p, weight_decay, no_decay_1d), lr=0.1,
                                    betas=betas, eps=eps, foreach=False),
        steps=6, lr0=0.01, zero_step=2)  # a step with s = 0: decay and moments alone
    assert opt.steps == 6


def test_adamw_state_round_trip_continues_identically():
    params = [torch.randn(4, 3, requires_grad=True), torch.randn(3, requires_grad=True)]
    updates = [[torch.randn(4, 3), torch.randn(3)] for _ in range(5)]
    whole = AdamW([p.detach().clone() for p in params], (0.9, 0.95), weight_decay=0.1)
    first = AdamW([p.detach().clone() for p in params], (0.9, 0.95), weight_decay=0.1)
    for u in updates[:2]:
        whole.step(u, 0.01)
        first.step(u, 0.01)
    second = AdamW([p.detach().clone() for p in first.params], (0.9, 0.95), weight_decay=0.1)
    second.load_state_dict(first.state_dict())
    for u in updates[2:]:
        whole.step(u, 0.01)
        second.step(u, 0.01)
    assert all(torch.equal(a, b) for a, b in zip(whole.params, second.params))
    with pytest.raises(ValueError, match="does not match"):
        AdamW([torch.zeros(4, requires_grad=True)]).load_state_dict(first.state_dict())


def test_describe_names_our_optimizers_and_torch_ones_with_their_settings():
    p = [torch.zeros(3, 2, requires_grad=True), torch.zeros(2, requires_grad=True)]
    assert describe_optimizer(AdamW(p, (0.9, 0.95), 1e-6, 0.1, True)) == {
        "name": "adamw", "betas": [0.9, 0.95], "eps": 1e-6, "weight_decay": 0.1,
        "no_decay_1d": True}
    assert describe_optimizer(MomentumSGD(p, 0.9, 1e-4)) == {
        "name": "sgd", "momentum": 0.9, "nesterov": False, "weight_decay": 1e-4,
        "no_decay_1d": False}
    torch_adamw = torch.optim.AdamW(decay_groups(p, 0.1, True), lr=3e-4, betas=(0.9, 0.95))
    got = describe_optimizer(torch_adamw)
    json.dumps(got)  # a manifest value
    assert (got["name"], got["lr"], got["betas"], got["eps"]) == \
        ("adamw", 3e-4, [0.9, 0.95], 1e-8)
    assert "weight_decay" not in got  # the class default 0.01 is true of neither group
    assert got["param_groups"] == [{"tensors": 1, "elements": 6, "weight_decay": 0.1},
                                   {"tensors": 1, "elements": 2, "weight_decay": 0.0}]
    # two groups with their own lr under a scheduler: each group's base lr, no default
    sgd = torch.optim.SGD([{"params": p[:1], "lr": 0.1, "weight_decay": 1e-4},
                           {"params": p[1:], "lr": 0.01}], lr=0.05, momentum=0.9)
    torch.optim.lr_scheduler.LambdaLR(sgd, lambda t: 0.1)  # sets lr to 0.1 x, initial_lr
    got = describe_optimizer(sgd)
    assert (got["momentum"], "lr" in got, "weight_decay" in got) == (0.9, False, False)
    assert [(g["lr"], g["weight_decay"]) for g in got["param_groups"]] == [(0.1, 1e-4),
                                                                          (0.01, 0)]
    assert describe_optimizer(torch.optim.SGD(p, lr=0.1, momentum=0.9))["name"] == "sgd"
    with pytest.raises(ValueError, match="optimizer = 'adamw' is not an optimizer"):
        describe_optimizer("adamw")
