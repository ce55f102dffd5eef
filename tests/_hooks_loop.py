"""A tiny TopK-SGD loop for the recorder tests: P simulated workers, global selection.

    u_t^p = g_t^p + e_{t-1}^p,  I = S(u, k),  e_t^p = u with u[I] = 0,
    x <- x - lr * (1/P) sum_p u^p[I^p]

Kept deliberately plain (no topkscope.train) so the recorder is tested on its own; it
returns what every worker computed at every step, for float64 references.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from topkscope.feedback import ErrorFeedback
from topkscope.sparsify import get_sparsifier, k_from_density


def tiny_model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 16), nn.ReLU(),
                         nn.Linear(16, 3))


def layout_of(model: nn.Module) -> list[tuple[str, int, int]]:
    out, offset = [], 0
    for name, p in model.named_parameters():
        out.append((name, offset, p.numel()))
        offset += p.numel()
    return out


@dataclass
class History:
    g: dict = field(default_factory=dict)   # (step, rank) -> tensor
    u: dict = field(default_factory=dict)
    e: dict = field(default_factory=dict)
    idx: dict = field(default_factory=dict)
    params: torch.Tensor | None = None


def run(steps: int, recorder=None, workers: int = 2, sparsifier: str = "topk",
        density: float = 0.05, seed: int = 0, pass_g: bool = True, pass_e: bool = True,
        keep: bool = True, sparsifier_args: dict | None = None) -> History:
    """Train the tiny model on random batches; record every step the recorder wants."""
    model = tiny_model(seed)
    layout = layout_of(model)
    d = layout[-1][1] + layout[-1][2]
    sel = get_sparsifier(sparsifier, **(sparsifier_args or {}))
    feedback = [ErrorFeedback() for _ in range(workers)]
    hist = History()
    torch.manual_seed(seed + 1)
    for step in range(steps):
        total = torch.zeros(d)
        for rank in range(workers):
            x = torch.randn(16, 12)
            y = torch.randint(0, 3, (16,))
            model.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            g = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
            u = feedback[rank].compensate("flat", g)
            idx = sel.select(u, k_from_density(density, d))
            total[idx] += u[idx]
            e = feedback[rank].update("flat", u, idx)
            if recorder is not None and recorder.wants(step):
                recorder.record(step, rank, u=u, e=e if pass_e else None,
                                g=g if pass_g else None, layout=layout, selected=idx)
            if keep:
                hist.g[step, rank], hist.u[step, rank] = g.clone(), u.clone()
                hist.e[step, rank], hist.idx[step, rank] = e.clone(), idx.clone()
        with torch.no_grad():
            flat = torch.cat([p.reshape(-1) for p in model.parameters()])
            flat -= 0.1 * total / workers
            offset = 0
            for p in model.parameters():
                p.copy_(flat[offset : offset + p.numel()].view_as(p))
                offset += p.numel()
    hist.params = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return hist


def own_step(model: nn.Module, feedback: ErrorFeedback, sel, step: int, density: float = 0.05,
             lr: float = 0.1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One step of docs/recording.md's loop on the tiny model, on the batch of `step`: u = e +
    g, top-k of u, e kept, the sent part applied; returns (g, u, e, idx)."""
    gen = torch.Generator().manual_seed(step)
    x, y = torch.randn(16, 12, generator=gen), torch.randint(0, 3, (16,), generator=gen)
    model.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    g = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    u = feedback.compensate("flat", g)
    idx = sel.select(u, k_from_density(density, u.numel()))
    e = feedback.update("flat", u, idx)
    with torch.no_grad():
        flat = torch.cat([p.reshape(-1) for p in model.parameters()])
        flat[idx] -= lr * u[idx]
        torch.nn.utils.vector_to_parameters(flat, model.parameters())
    return g, u, e, idx
