"""The TopK-SGD loop over the workers a transport hosts (all P simulated, or one per process).

Step t, every worker p (Shi et al., arXiv 1911.08772, Alg. 1; docs/training.md):

    g_p   = grad of the loss on worker p's batch t          (clipped here if clip_at = worker)
    g_p  <- lr_t * g_p                                      only if lr_in_residual
    u_p   = e_p + g_p ; I_p = C(u_p, k_t) ; e_p = u_p - u_p[I_p]    (comm.exchange.contribute)
    s     = (1/P) sum_p scatter(u_p[I_p], I_p)               (comm.exchange.combine)
    s    <- s * min(1, grad_clip / (||s|| + 1e-6))          if grad_clip, clip_at = aggregate
                                                             (published: the authors clip the
                                                             aggregated sparse update with
                                                             clip_grad_norm_ over all
                                                             parameters; e_p keeps unclipped u)
    x    <- Optimizer(x, s, lr_t)                           momentum SGD or AdamW (optimizer
                                                             key), applied after aggregation:
                                                             s is its gradient, no correction;
                                                             weight decay never enters u
    (lr_in_residual: the step runs with lr = 1 and weight decay lr_t * wd, since s holds lr)

One model replica per process: every worker applies the same s, so replicas never differ.
Random state of worker p at step t (global RNG for dropout; the sparsifier's own generator for
randomised selection) is reseeded from (seed, p, t), and normalisation buffers
(BatchNorm running statistics) follow rank 0, as DDP's broadcast_buffers does; both make a
simulated worker compute exactly what the same worker computes in its own process.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch
from torch import nn

from topkscope.comm.compressor import WorkerCompressor
from topkscope.comm.exchange import combine, contribute
from topkscope.comm.layout import Layout
from topkscope.comm.transport import Transport
from topkscope.sparsify.base import NonFiniteError
from topkscope.sparsify.quantize import quantizer_from
from topkscope.sparsify.source import SparsifierSource, step_seed
from topkscope.train.config import ExperimentConfig
from topkscope.train.optimizer import make_optimizer
from topkscope.train.schedules import density_at, lr_at, total_steps


def make_compressor(cfg: ExperimentConfig, source: SparsifierSource,
                    layout: Layout) -> WorkerCompressor:
    """One worker's compressor: the config's sparsifier, selection, error feedback (decayed by
    outer.error_decay in outer-loop training), k rule and quantization."""
    decay = cfg.outer["error_decay"] if cfg.outer is not None else 1.0
    return WorkerCompressor(source.at(0), layout, cfg.selection, cfg.error_feedback,
                            cfg.k_rule, error_decay=decay, quantizer=quantizer_from(cfg.quantize))


def clip_norm_(v: torch.Tensor, max_norm: float) -> float:
    """v *= min(1, max_norm / (||v|| + 1e-6)) in place, like clip_grad_norm_; returns ||v||."""
    norm = torch.linalg.vector_norm(v)
    v.mul_(torch.clamp(max_norm / (norm + 1e-6), max=1.0))
    return float(norm)


class DivergedError(RuntimeError):
    """Training produced a non-finite loss (or gradient): the run cannot go on."""

    def __init__(self, step: int, loss: float, rank: int, gradient: bool = False) -> None:
        where = " (its gradient holds NaN/Inf)" if gradient else ""
        super().__init__(f"training diverged at step {step}: loss = {loss:g} on worker {rank}"
                         f"{where}; lower lr or set grad_clip")
        self.step, self.loss, self.rank = step, loss, rank


class Trainer:
    """TopK-SGD for one process. `train_step()` runs step `self.step` and returns its log row."""

    def __init__(self, cfg: ExperimentConfig, model: nn.Module, task: Any, transport: Transport,
                 device: torch.device | str = "cpu", recorder=None) -> None:
        self.cfg = cfg
        self.model = model
        self.task = task
        self.transport = transport
        self.device = torch.device(device)
        self.recorder = recorder
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self.layout = Layout.of(named)
        self.params = [p for _, p in named]
        self.sources = [SparsifierSource(cfg.sparsifier, cfg.sparsifier_args, cfg.seed, r)
                        for r in transport.local_ranks]
        self.compressors = [make_compressor(cfg, src, self.layout) for src in self.sources]
        self.workers = [task.new_worker(r) for r in transport.local_ranks]
        self.optimizer = make_optimizer(cfg, self.params)
        self._mean = torch.empty(self.layout.d, device=self.device)  # reused by every step
        self.steps_per_epoch = task.steps_per_epoch
        self.total_steps = total_steps(cfg, self.steps_per_epoch)
        self.step = 0

    # ------------------------------------------------------------------ one step
    def _seed_step(self, seed: int) -> None:
        """Seed what the step draws from: the CPU generator, and on another device every
        generator (torch.manual_seed). On the CPU torch.manual_seed would also queue a seed
        for CUDA, formatting a traceback each time (about 1 ms, a tenth of a small model's
        step); the CPU stream it seeds is the same."""
        if self.device.type == "cpu":
            torch.random.default_generator.manual_seed(seed)
        else:
            torch.manual_seed(seed)

    def _worker_gradient(self, worker, lr: float) -> tuple[torch.Tensor, list[float]]:
        self._seed_step(step_seed(self.cfg.seed, worker.rank, self.step))
        for p in self.params:
            p.grad = None
        loss, stats = self.task.loss(self.model, worker, self.step)
        loss.backward()
        g = self.layout.flatten([p.grad for p in self.params])
        for p in self.params:
            p.grad = None  # g holds a copy; the next worker starts from nothing
        if self.cfg.grad_clip is not None and self.cfg.clip_at == "worker":
            clip_norm_(g, self.cfg.grad_clip)
        if self.cfg.lr_in_residual:
            g.mul_(lr)
        return g, stats.as_list()

    def _apply(self, mean: torch.Tensor, lr: float) -> None:
        if self.cfg.grad_clip is not None and self.cfg.clip_at == "aggregate":
            clip_norm_(mean, self.cfg.grad_clip)
        if self.cfg.lr_in_residual:  # mean already holds lr: step 1, weight decay scaled by lr
            self.optimizer.step(self.layout.views(mean), 1.0, decay_scale=lr)
        else:
            self.optimizer.step(self.layout.views(mean), lr)

    def train_step(self) -> dict[str, Any]:
        """Run step self.step on every local worker, apply the update, return the log row."""
        if self.step >= self.total_steps:
            raise ValueError(f"step {self.step} is past the last step ({self.total_steps - 1})")
        step, spe = self.step, self.steps_per_epoch
        lr, rho = lr_at(self.cfg, step, spe), density_at(self.cfg, step, spe)
        self.model.train()
        contributions, stats, t_compute, kept_buffers = [], [], 0.0, None
        for i, (worker, comp, src) in enumerate(zip(self.workers, self.compressors, self.sources)):
            comp.sparsifier = src.at(step)
            t0 = time.perf_counter()
            g, row = self._worker_gradient(worker, lr)
            t_compute += time.perf_counter() - t0
            loss = row[0] / row[2]  # a float already: checking it costs nothing
            if not math.isfinite(loss):
                raise DivergedError(step, loss, worker.rank)
            if i == 0 and len(self.workers) > 1:
                kept_buffers = [b.detach().clone() for b in self.model.buffers()]
            try:
                contributions.append(contribute(comp, g, rho, rank=worker.rank,
                                                recorder=self.recorder, step=step))
            except NonFiniteError:  # the sparsifier found NaN/Inf in u = e + g
                raise DivergedError(step, loss, worker.rank, gradient=True) from None
            stats.append([*row, contributions[-1].contraction])
        if kept_buffers:  # running statistics follow rank 0 (see module docstring)
            for b, kept in zip(self.model.buffers(), kept_buffers):
                b.copy_(kept)
        result = combine(self.transport, contributions, self.layout.d, self._mean)
        self._apply(result.mean, lr)
        # the contraction rides with the loss sums: one collective gives its mean over all P
        loss_sum, correct, count, contraction_sum = self.transport.sum_scalars(stats)
        self.step += 1
        counts = result.counts
        k = self.layout.d if self.compressors[0].is_dense else self.compressors[0].target_k(rho)
        return {
            "step": step,
            "epoch": step // spe,
            "loss": loss_sum / count,
            "lr": lr,
            "metric": self.task.metric(loss_sum, correct, count),
            "metric_name": self.task.metric_name,
            "density": rho,
            "k": k,
            **result.count_columns(counts),
            "time_compute": t_compute / len(self.workers),
            "time_select": result.time_select,
            "time_communicate": result.time_communicate,
            "bytes_sent": result.bytes_sent,
            "payload_bytes": result.payload_bytes,
            "contraction": contraction_sum / self.transport.world_size,
        }

    def evaluate(self) -> dict[str, Any]:
        """Evaluation row at the current step (the parameters after step self.step - 1)."""
        loss, metric = self.task.evaluate(self.model)
        return {"step": self.step - 1, "epoch": max(self.step - 1, 0) // self.steps_per_epoch,
                "split": self.task.eval_split, "loss": loss, "metric": metric,
                "metric_name": self.task.metric_name}

    # ------------------------------------------------------------------ state
    def worker_state(self, i: int) -> dict[str, Any]:
        """What worker i needs to continue: its residual, its data-carried state and its
        sparsifier's state (None unless the method adapts between steps, e.g. sidco)."""
        hidden = self.workers[i].hidden
        if hidden is not None and not isinstance(hidden, torch.Tensor):
            hidden = list(hidden)
        return {"rank": self.workers[i].rank, "residual": self.compressors[i].state_dict(),
                "hidden": hidden, "sparsifier": self.sources[i].state_dict()}

    def shared_state(self) -> dict[str, Any]:
        """What all workers share: step, model, optimizer, random state (from rank 0's process)."""
        state = {"step": self.step, "model": self.model.state_dict(),
                 "optimizer": self.optimizer.state_dict(), "rng_cpu": torch.get_rng_state()}
        if torch.cuda.is_available():
            state["rng_cuda"] = torch.cuda.get_rng_state_all()
        return state

    def load_shared_state(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng_cpu"])
        if "rng_cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["rng_cuda"])
        self.step = int(state["step"])

    def load_worker_state(self, i: int, state: dict[str, Any]) -> None:
        if int(state["rank"]) != self.workers[i].rank:
            raise ValueError(f"worker state of rank {state['rank']} given to rank "
                             f"{self.workers[i].rank}")
        self.compressors[i].load_state_dict(state["residual"], self.device)
        self.sources[i].load_state_dict(state.get("sparsifier"))
        hidden = state.get("hidden")
        if isinstance(hidden, list):
            hidden = tuple(h.to(self.device) for h in hidden)
        elif isinstance(hidden, torch.Tensor):
            hidden = hidden.to(self.device)
        self.workers[i].hidden = hidden
