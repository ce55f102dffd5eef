"""MomentumSGD against torch.optim.SGD (dampening 0): the same numbers, bit for bit."""

import pytest
import torch

from topkscope.train.optimizer import MomentumSGD


@pytest.mark.parametrize("momentum, weight_decay, nesterov, no_decay_1d", [
    (0.0, 0.0, False, False), (0.9, 1e-4, False, False), (0.9, 1e-4, True, False),
    (0.875, 6.1e-5, False, True),
])
def test_matches_torch_sgd(momentum, weight_decay, nesterov, no_decay_1d):
    torch.manual_seed(0)
    shapes = [(7, 5), (7,), (3, 7), (3,)]
    mine = [torch.randn(s, requires_grad=True) for s in shapes]
    theirs = [p.detach().clone().requires_grad_(True) for p in mine]
    decay = [p for p in theirs if not (no_decay_1d and p.dim() == 1)]
    no_decay = [p for p in theirs if no_decay_1d and p.dim() == 1]
    groups = [{"params": decay, "weight_decay": weight_decay}]
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    ref = torch.optim.SGD(groups, lr=0.1, momentum=momentum, nesterov=nesterov, foreach=False)
    opt = MomentumSGD(mine, momentum, weight_decay, nesterov, no_decay_1d)
    for step in range(5):
        lr = 0.1 / (step + 1)
        updates = [torch.randn(s) for s in shapes]
        for p, u in zip(theirs, updates):
            p.grad = u.clone()
        for group in ref.param_groups:
            group["lr"] = lr
        ref.step()
        opt.step(updates, lr)
        for a, b in zip(mine, theirs):
            assert torch.equal(a, b), step


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
