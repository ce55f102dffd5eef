"""Error feedback holds for parameters DDP does not update: with find_unused_parameters=True
and a head used on alternate steps, what DDP hands each parameter (its .grad, None when DDP
left it untouched) plus the residual is u = e + g, per parameter and on every step, and the
parameters equal a single-process reference that never sends the unused head's values. Once
the hook sent the unused head's largest values, DDP dropped them, and they were gone from the
residual too."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests._process_group import one_process_group
from topkscope.comm.compressor import RESIDUAL_KEY
from topkscope.sparsify import get_sparsifier, k_from_density

STEPS, DENSITY, LR = 12, 0.1, 0.1


class TwoHeads(nn.Module):
    """A trunk, a head used every step and one used on even steps only."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.trunk, self.head, self.extra = nn.Linear(6, 16), nn.Linear(16, 3), nn.Linear(16, 3)

    def forward(self, x: torch.Tensor, use_extra: bool) -> torch.Tensor:
        h = torch.relu(self.trunk(x))
        return self.head(h) + self.extra(h) if use_extra else self.head(h)


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(step)
    # scaled so the extra head's residual grows past the used tensors' values on odd steps
    return torch.randn(8, 6, generator=g) * 3, torch.randint(0, 3, (8,), generator=g)


def flat(tensors) -> torch.Tensor:
    return torch.cat([t.reshape(-1) for t in tensors])


def test_unused_parameters_keep_their_values_in_the_residual_and_train_as_a_reference():
    from torch.nn.parallel import DistributedDataParallel as DDP

    from topkscope.comm import TopKHookState, topk_hook

    with one_process_group():
        model = TwoHeads()
        ddp = DDP(model, find_unused_parameters=True)
        state = TopKHookState(model, density=DENSITY, dense_steps=0)
        ddp.register_comm_hook(state, topk_hook)
        opt = torch.optim.SGD(model.parameters(), lr=LR)
        raw: dict[int, torch.Tensor] = {}
        for i, p in enumerate(model.parameters()):
            p.register_post_accumulate_grad_hook(
                lambda p, i=i: raw.__setitem__(i, p.grad.detach().clone()))
        held_back = 0
        for step in range(STEPS):
            before = state.compressor.feedback.residual(RESIDUAL_KEY)
            e_prev = torch.zeros(state.layout.d) if before is None else before.clone()
            raw.clear()
            opt.zero_grad()
            x, y = batch(step)
            F.cross_entropy(ddp(x, use_extra=step % 2 == 0), y).backward()
            params = list(model.parameters())
            g = flat([raw.get(i, torch.zeros_like(p)) for i, p in enumerate(params)])
            applied = flat([torch.zeros_like(p) if p.grad is None else p.grad for p in params])
            e = state.compressor.feedback.residual(RESIDUAL_KEY)
            u = e_prev + g
            for name, view_a, view_e, view_u in zip(state.layout.names,
                                                    state.layout.views(applied),
                                                    state.layout.views(e),
                                                    state.layout.views(u)):
                assert torch.equal(view_a + view_e, view_u), (step, name)
            if step % 2:  # the extra head was unused: DDP left it alone, nothing sent for it
                assert model.extra.weight.grad is None
                held_back += int(torch.count_nonzero(state.layout.views(e)[-2]))
            opt.step()
        state.close()
        mine = flat([p.detach() for p in model.parameters()])
    assert held_back > 0  # the test would have caught a lost value
    assert torch.equal(mine, reference())


def reference() -> torch.Tensor:
    """TopK-SGD in one process without DDP: u = e + g, top-k of u over the tensors that got a
    gradient (k from their size), the others' u kept whole in e; plain SGD on what was sent."""
    model = TwoHeads()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    params = list(model.parameters())
    topk = get_sparsifier("topk")
    e = torch.zeros(sum(p.numel() for p in params))
    for step in range(STEPS):
        opt.zero_grad()
        x, y = batch(step)
        F.cross_entropy(model(x, use_extra=step % 2 == 0), y).backward()
        used = [p.grad is not None for p in params]
        u = e + flat([p.grad if p.grad is not None else torch.zeros_like(p) for p in params])
        offsets = torch.cumsum(torch.tensor([0] + [p.numel() for p in params]), 0).tolist()
        active = torch.cat([torch.arange(offsets[i], offsets[i + 1])
                            for i in range(len(params)) if used[i]])
        idx = active[topk.select(u[active], k_from_density(DENSITY, active.numel()))]
        sent = torch.zeros_like(u)
        sent[idx] = u[idx]
        e = u - sent
        for i, p in enumerate(params):
            p.grad = sent[offsets[i] : offsets[i + 1]].view_as(p).clone() if used[i] else None
        opt.step()
    return flat([p.detach() for p in model.parameters()])
