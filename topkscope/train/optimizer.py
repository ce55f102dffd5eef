"""The optimizers applied to the aggregated update s (the mean of what the workers sent), as
the paper's code applies momentum SGD (no momentum correction). Error feedback happens before:
s is built from u = g + e, and the optimizer sees s as its gradient.

MomentumSGD (`optimizer: sgd`), element for element what torch.optim.SGD (dampening 0) computes:

    g_i = s_i + wd_i * x_i                   weight decay (wd_i = 0 for 1-D tensors if no_decay_1d)
    v_i = g_i  (first step),  m * v_i + g_i  (later)
    x_i <- x_i - lr * (g_i + m * v_i  if nesterov  else  v_i)

AdamW (`optimizer: adamw`; Loshchilov & Hutter, "Decoupled Weight Decay Regularization",
ICLR 2019), element for element what torch.optim.AdamW (amsgrad off) computes at step n = 1, 2, ...:

    x_i <- x_i * (1 - lr * wd_i)             decoupled: on the parameters, never through s
    m_i <- b1 m_i + (1 - b1) s_i ;  v_i <- b2 v_i + (1 - b2) s_i^2       (m, v start at 0)
    x_i <- x_i - lr / (1 - b1^n) * m_i / (sqrt(v_i) / sqrt(1 - b2^n) + eps)

Written out here rather than taken from torch.optim because constructing a torch optimizer
imports the compiler stack (seconds per process), which every simulated run, torchrun worker
and test process would pay. `describe(optimizer)` names an optimizer and its hyper-parameters
for a manifest, ours or a torch.optim one.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from topkscope.train.config import ExperimentConfig


def _decays(params: list[torch.nn.Parameter], weight_decay: float,
            no_decay_1d: bool) -> list[float]:
    """Each parameter's weight decay: 0 for 1-D tensors (biases, norms) if no_decay_1d."""
    return [0.0 if (no_decay_1d and p.dim() <= 1) else weight_decay for p in params]


class MomentumSGD:
    """One momentum buffer per parameter; `step(updates, lr)` with updates shaped like params."""

    name = "sgd"

    def __init__(self, params: list[torch.nn.Parameter], momentum: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False,
                 no_decay_1d: bool = False) -> None:
        if nesterov and momentum <= 0:
            raise ValueError("nesterov = true needs momentum > 0")
        self.params = list(params)
        self.momentum = momentum
        self.nesterov = nesterov
        self.settings = {"momentum": momentum, "nesterov": nesterov,
                         "weight_decay": weight_decay, "no_decay_1d": no_decay_1d}
        self.decay = _decays(self.params, weight_decay, no_decay_1d)
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


class AdamW:
    """Adam with decoupled weight decay on the aggregated update (formula in the module doc);
    `step(updates, lr)` with updates shaped like params."""

    name = "adamw"

    def __init__(self, params: list[torch.nn.Parameter], betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0, no_decay_1d: bool = False) -> None:
        self.params = list(params)
        self.beta1, self.beta2 = (float(b) for b in betas)
        self.eps = eps
        self.settings = {"betas": [self.beta1, self.beta2], "eps": eps,
                         "weight_decay": weight_decay, "no_decay_1d": no_decay_1d}
        self.decay = _decays(self.params, weight_decay, no_decay_1d)
        self.steps = 0
        self.exp_avg = [torch.zeros_like(p, memory_format=torch.preserve_format)
                        for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p, memory_format=torch.preserve_format)
                           for p in self.params]

    @torch.no_grad()
    def step(self, updates: list[torch.Tensor], lr: float, decay_scale: float = 1.0) -> None:
        """One AdamW step with s = updates; weight decay coefficients times decay_scale."""
        self.steps += 1
        correction1 = 1 - self.beta1**self.steps
        step_size = lr / correction1
        correction2_sqrt = math.sqrt(1 - self.beta2**self.steps)
        for i, (p, s) in enumerate(zip(self.params, updates)):
            wd = self.decay[i] * decay_scale
            if wd != 0:
                p.mul_(1 - lr * wd)
            m, v = self.exp_avg[i], self.exp_avg_sq[i]
            m.lerp_(s, 1 - self.beta1)
            v.mul_(self.beta2).addcmul_(s, s, value=1 - self.beta2)
            denom = (v.sqrt() / correction2_sqrt).add_(self.eps)
            p.addcdiv_(m, denom, value=-step_size)

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "exp_avg": [m.detach().cpu().clone() for m in self.exp_avg],
                "exp_avg_sq": [v.detach().cpu().clone() for v in self.exp_avg_sq]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        moments = (state.get("exp_avg", []), state.get("exp_avg_sq", []))
        if any(len(ms) != len(self.params) or any(m.shape != p.shape
                                                   for m, p in zip(ms, self.params))
               for ms in moments):
            raise ValueError("optimizer state does not match the model's parameters")
        self.steps = int(state["steps"])
        self.exp_avg = [m.to(p.device).clone() for m, p in zip(moments[0], self.params)]
        self.exp_avg_sq = [v.to(p.device).clone() for v, p in zip(moments[1], self.params)]


def make_optimizer(cfg: ExperimentConfig, params: list[torch.nn.Parameter]) -> MomentumSGD | AdamW:
    """The config's optimizer (`optimizer: sgd | adamw`) over params."""
    if cfg.optimizer == "adamw":
        return AdamW(params, tuple(cfg.betas), cfg.eps, cfg.weight_decay, cfg.no_decay_1d)
    return MomentumSGD(params, cfg.momentum, cfg.weight_decay, cfg.nesterov, cfg.no_decay_1d)
