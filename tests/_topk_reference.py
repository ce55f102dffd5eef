"""Slow, obvious references shared by the tests (one per algorithm), and a 2-process gloo launcher.

Each reference is written from the definition, in float64, without topkscope code:

    exact_topk            the k largest |u| by a stable sort (ties: lower index first)
    topk_ratio_by_sort    delta = sum of the squares after the k largest / sum of all squares
    recall_by_enumeration |I intersect T| / k, maximised over every exact top-k set T (ties)
    moments_by_scipy      mean, std, skew, excess kurtosis (scipy.stats, population moments)
    published_gaussiank   the published Gaussian-k loop (mean + z std, x0.5 / x1.5, 3 evaluations)
    gaussian_ratio_by_quadrature   E[x^2; |x| < t] / E[x^2] for x ~ N(0, 1), t = Phi^-1(1 - rho/2)

`reference_topk_sgd` recomputes TopK-SGD densely in one process, without any topkscope
communication code: per worker a plain autograd gradient on its MNIST shard, u = e + g,
a dense 0/1 mask of the selected set, s = u * mask, e = u - s, the mean of the dense s,
then momentum SGD written out by hand.
"""

from __future__ import annotations

import functools
import itertools
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from scipy import integrate, stats


def exact_topk(u: torch.Tensor, k: int) -> torch.Tensor:
    """The k largest |u| by a stable float64 sort (ties: lower index first)."""
    return torch.argsort(u.double().abs(), descending=True, stable=True)[:k]


def topk_ratio_by_sort(x, k: int) -> float:
    """||x - TopK(x)||^2 / ||x||^2 from a full descending sort of the float64 squares."""
    sq = np.sort(np.square(np.asarray(x, dtype=np.float64)).ravel())[::-1]
    return float(sq[k:].sum() / sq.sum())


def recall_by_enumeration(x, selected, k: int) -> float:
    """max over every exact top-k set T of |I intersect T| / k, enumerating the choices among
    the magnitudes tied at the k-th largest (small vectors only)."""
    mag = np.abs(np.asarray(x, dtype=np.float64)).ravel()
    tau = np.sort(mag)[::-1][k - 1]
    above = set(np.flatnonzero(mag > tau).tolist())
    tied = np.flatnonzero(mag == tau).tolist()
    chosen = set(np.asarray(selected).ravel().tolist())
    best = 0
    for extra in itertools.combinations(tied, k - len(above)):
        best = max(best, len(chosen & (above | set(extra))))
    return best / k


def moments_by_scipy(x) -> dict:
    """Population moments in float64, as numpy and scipy compute them by default."""
    x = np.asarray(x, dtype=np.float64).ravel()
    return {"mean": x.mean(), "std": x.std(), "skew": stats.skew(x),
            "excess_kurtosis": stats.kurtosis(x)}


def published_gaussiank(u, k: int) -> tuple[np.ndarray, list[float]]:
    """The published Gaussian-k loop (Shi et al., arXiv 1911.08772, and the authors' code) in
    float64: thr = mean + |Phi^-1(rho/2)| std (rho = k/d; std unbiased, as torch.std), then at
    most 3 evaluations of S = {i : |u_i| > thr}, halving thr below 2k/3 and multiplying it by
    1.5 above 4k/3. Returns (the last evaluated S, ascending; the thresholds evaluated)."""
    x = (u.double().numpy() if isinstance(u, torch.Tensor) else np.asarray(u, np.float64)).ravel()
    thr = x.mean() + stats.norm.isf(k / x.size / 2) * x.std(ddof=1)
    evaluated = []
    for _ in range(3):
        evaluated.append(thr)
        chosen = np.flatnonzero(np.abs(x) > thr)
        if chosen.size < 2 * k / 3:
            thr *= 0.5
        elif chosen.size > 4 * k / 3:
            thr *= 1.5
        else:
            break
    return chosen, evaluated


def gaussian_ratio_by_quadrature(rho: float) -> float:
    """delta of Top-k on N(0, 1) as d -> infinity: the energy below the cut t = Phi^-1(1 - rho/2),
    integral_{-t}^{t} x^2 phi(x) dx (E[x^2] = 1), by adaptive quadrature."""
    if rho >= 1.0:
        return 0.0
    t = stats.norm.isf(rho / 2)
    value, _ = integrate.quad(lambda x: x * x * stats.norm.pdf(x), -t, t, epsabs=1e-14,
                              epsrel=1e-12, limit=200)
    return value


def max_rel_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    """max |a - b| / max |b| over the whole flattened parameter vector."""
    fa = torch.cat([t.detach().reshape(-1).double() for t in a])
    fb = torch.cat([t.detach().reshape(-1).double() for t in b])
    return float((fa - fb).abs().max() / fb.abs().max())


def worker_batch(ds, rank: int, world: int, step: int, batch_size: int, seed: int):
    from topkscope.data import shard_indices

    per_rank = len(ds) // world
    spe = per_rank // batch_size
    epoch, b = divmod(step, spe)
    idx = shard_indices(len(ds), rank, world, epoch, seed)[b * batch_size:(b + 1) * batch_size]
    return ds.batch(idx)


def masked_send(u: torch.Tensor, k: int, select: Callable[[torch.Tensor, int], torch.Tensor]
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """(sent, residual) of u = e + g: u times a dense 0/1 mask of the selected set, and the rest."""
    mask = torch.zeros_like(u)
    mask[select(u, k)] = 1.0
    return u * mask, u - u * mask


def reference_topk_sgd(model: torch.nn.Module, ds, *, world: int, steps: int, batch_size: int,
                       seed: int, density: float, lr: float, momentum: float,
                       weight_decay: float, select: Callable[[torch.Tensor, int], torch.Tensor],
                       dense_steps: int = 0) -> list[torch.Tensor]:
    """Final parameters of P-worker TopK-SGD (the first dense_steps steps uncompressed)."""
    params = [p for p in model.parameters()]
    d = sum(p.numel() for p in params)
    k = max(1, round(density * d))
    residual = [torch.zeros(d) for _ in range(world)]
    velocity = [torch.zeros_like(p) for p in params]
    for step in range(steps):
        sent = []
        for rank in range(world):
            x, y = worker_batch(ds, rank, world, step, batch_size, seed)
            model.zero_grad()
            F.cross_entropy(model(x), y).backward()
            g = torch.cat([p.grad.reshape(-1) for p in params])
            if step < dense_steps:
                sent.append(g)
                continue
            sent_part, residual[rank] = masked_send(residual[rank] + g, k, select)
            sent.append(sent_part)
        mean = torch.stack(sent).sum(0) / world
        with torch.no_grad():
            offset = 0
            for p, v in zip(params, velocity):
                grad = mean[offset:offset + p.numel()].view_as(p) + weight_decay * p
                offset += p.numel()
                v.copy_(grad if step == 0 else momentum * v + grad)
                p.sub_(lr * v)
    return [p.detach().clone() for p in params]


@functools.lru_cache(maxsize=1)
def mnist() -> tuple:
    """(train, test) MNIST, loaded once per process (every equivalence run uses the same)."""
    from topkscope.data import load

    return load("mnist", "train"), load("mnist", "test")


@functools.lru_cache(maxsize=1)
def ptb() -> tuple:
    """(train, valid) PTB, loaded once per process."""
    from topkscope.data import load

    return load("ptb", "train"), load("ptb", "valid")


def trainer_on(cfg, transport, data: tuple):
    """A fresh Trainer (model seeded from cfg.seed) on already loaded (train, eval) data."""
    from topkscope.train.run import build_model, build_task
    from topkscope.train.trainer import Trainer

    model = build_model(cfg, data[0])
    task = build_task(cfg, model, data[0], data[1], transport.world_size, torch.device("cpu"))
    return Trainer(cfg, model, task, transport)


def _entry(rank: int, world: int, store: str, fn: Callable, out: str, args: tuple) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        torch.save(fn(rank, world, *args), Path(out) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def run_gloo(fn: Callable, *args, world: int = 2) -> list:
    """fn(rank, world, *args) in `world` gloo processes; returns each rank's result.

    fn must be a module-level function; its result is passed back with torch.save.
    """
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        mp.spawn(_entry, args=(world, store, fn, tmp, args), nprocs=world, join=True)
        return [torch.load(Path(tmp) / f"rank{r}.pt", weights_only=False) for r in range(world)]
