"""Momentum SGD applied to the aggregated update, as the paper's code does (no momentum
correction), element for element what torch.optim.SGD (dampening 0) computes:

    g_i = s_i + wd_i * x_i                   weight decay (wd_i = 0 for 1-D tensors if no_decay_1d)
    v_i = g_i  (first step),  m * v_i + g_i  (later)
    x_i <- x_i - lr * (g_i + m * v_i  if nesterov  else  v_i)

Written out here rather than taken from torch.optim because constructing a torch optimizer
imports the compiler stack (seconds per process), which every simulated run, torchrun worker
and test process would pay.
"""

from __future__ import annotations

import torch


class MomentumSGD:
    """One momentum buffer per parameter; `step(updates, lr)` with updates shaped like params."""

    def __init__(self, params: list[torch.nn.Parameter], momentum: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False,
                 no_decay_1d: bool = False) -> None:
        if nesterov and momentum <= 0:
            raise ValueError("nesterov = true needs momentum > 0")
        self.params = list(params)
        self.momentum = momentum
        self.nesterov = nesterov
        self.decay = [0.0 if (no_decay_1d and p.dim() <= 1) else weight_decay for p in self.params]
        self.buffers: list[torch.Tensor | None] = [None] * len(self.params)

    @torch.no_grad()
    def step(self, updates: list[torch.Tensor], lr: float, decay_scale: float = 1.0) -> None:
        """x <- x - lr * direction(updates); weight decay coefficients are multiplied by
        decay_scale (lr when lr already sits inside the updates)."""
        for i, (p, s) in enumerate(zip(self.params, updates)):
            wd = self.decay[i] * decay_scale
            g = s.add(p, alpha=wd) if wd != 0 else s
            if self.momentum != 0:
                buf = self.buffers[i]
                if buf is None:
                    buf = self.buffers[i] = g.clone()
                else:
                    buf.mul_(self.momentum).add_(g)
                g = g.add(buf, alpha=self.momentum) if self.nesterov else buf
            p.add_(g, alpha=-lr)

    def state_dict(self) -> dict[str, list[torch.Tensor]]:
        if any(b is None for b in self.buffers):
            return {"momentum_buffers": []}
        return {"momentum_buffers": [b.detach().cpu().clone() for b in self.buffers]}

    def load_state_dict(self, state: dict[str, list[torch.Tensor]]) -> None:
        buffers = state.get("momentum_buffers", [])
        if not buffers:
            self.buffers = [None] * len(self.params)
            return
        if len(buffers) != len(self.params) or any(
                b.shape != p.shape for b, p in zip(buffers, self.params)):
            raise ValueError("optimizer state does not match the model's parameters")
        self.buffers = [b.to(p.device).clone() for b, p in zip(buffers, self.params)]
