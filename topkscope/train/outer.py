"""Outer-loop training (DiLoCo-style): H inner steps per worker, then one compressed exchange
of the pseudo-gradients and an outer step.

Round r, every worker p (config `outer:` block, config.outer_block):

    theta_p  <- theta                                   every worker starts from the global model
    H times:  g_p = grad on worker p's batch t          (clipped at grad_clip: each worker's
              theta_p <- InnerOpt_p(theta_p, g_p, lr_t)  own gradient is what its optimizer sees)
    Delta_p   = theta - theta_p                         the pseudo-gradient
    u_p       = beta e_p + Delta_p                      error feedback, decay beta = error_decay
    I_p = C(u_p, k); q_p = Q(u_p[I_p])                  the config's sparsifier, selection, k rule
                                                        and quantization (comm.compressor)
    e_p       = u_p with u_p[I_p] - q_p at I_p          residual (0 at I_p without quantization)
    s         = (1/P) sum_p scatter(q_p, I_p)           comm.exchange.combine
    theta    <- OuterStep(theta, s)                     step: nesterov (DiLoCo: m <- mu m + s,
                                                        theta <- theta - lr (s + mu m)), or
                                                        average (SparseLoCo: theta <- theta - lr s)

InnerOpt is the config's optimizer (sgd or adamw, train/optimizer.py) with its lr schedule over
the inner steps; each worker keeps its own optimizer state across rounds, as DiLoCo does. With
the `dense` sparsifier every worker sends Delta_p itself (no error feedback: DiLoCo). The
exchange runs after step t when t + 1 is a multiple of H, and after the last step (a shorter
last round). Its train.parquet row carries the exchange's bytes, counts, times and contraction;
every other row sends nothing (bytes_sent 0, selected 0, contraction NaN). outer.parquet holds
one row per exchange (schema.OUTER_COLUMNS), and the recorder sees u_p, e_p and Delta_p (as
g) at the exchange, under the step t that ended the round.

The model's parameters hold theta outside train_step (evaluation and checkpoints see the
global model); each worker's replica theta_p is a flat vector, copied into the parameters for
its forward and backward. A checkpoint holds theta and the outer optimizer's state (shared),
and per worker theta_p, its inner optimizer's state and its residual, so a resume mid-round
continues the round. Random state per (seed, worker, step) and normalisation buffers that
follow rank 0 are as in train/trainer.py, so simulated workers and torchrun processes compute
the same parameters on CPU.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from topkscope.comm.exchange import combine, contribute
from topkscope.manifest import describe_optimizer
from topkscope.sparsify.base import NonFiniteError
from topkscope.train.config import ExperimentConfig
from topkscope.train.optimizer import MomentumSGD, make_optimizer
from topkscope.train.schedules import density_at, lr_at
from topkscope.train.trainer import DivergedError, Trainer, clip_norm_

# The published settings the outer block and the compressor are held against
# (settings_against_papers), each with exactly where it was read: DiLoCo's from its paper;
# SparseLoCo's H, outer lr, beta, k and chunk from the authors' public configuration for H = 15
# (CCLOCO_H15), its 2-bit values from the paper's abstract. Where an outer Nesterov step runs at
# H = 15, DiLoCo's lr 0.7 is its H = 500 setting: the SparseLoCo authors swept DiLoCo's outer lr
# over 0.5, 0.7, 0.9 at H = 15 (CCLOCO_DILOCO_SWEEP), as the plan's outer-lr sweep does.
DILOCO = "DiLoCo (Douillard et al., arXiv 2311.08105)"
SPARSELOCO = "SparseLoCo (Sarfi et al., arXiv 2508.15706)"
CCLOCO_H15 = ("the SparseLoCo authors' public H = 15 configuration, tplr-y/CCLoco@"
              "8cc45c0cb8bf202296cc7cd65c5262408238fd69 hparams/500M/sweeps/ccloco.yaml")
CCLOCO_DILOCO_SWEEP = ("tplr-y/CCLoco@c01a785e203f0c5b57b3c57092102109e0c5cbce "
                       "hparams/1B/sweeps/diloco_baseline.yaml (outer lr 0.9, 0.7, 0.5 at "
                       "H = 15)")
CCLOCO_CHUNKS = ("tplr-y/CCLoco@214aa7dbc41629808b6c8d6e3a2892bc8fd7d9f0 src/tplr/ccloco.py "
                 "(ChunkingTransform)")
PUBLISHED = {
    "nesterov": {"inner_steps": (500, DILOCO), "lr": (0.7, DILOCO + " at H = 500; swept at "
                                                      "H = 15 in " + CCLOCO_DILOCO_SWEEP),
                 "momentum": (0.9, DILOCO), "inner_optimizer": ("adamw", DILOCO)},
    "average": {"inner_steps": (15, CCLOCO_H15), "lr": (1.0, CCLOCO_H15),
                "error_decay": (0.95, CCLOCO_H15), "inner_optimizer": ("adamw", SPARSELOCO),
                "density": (32 / 4096, CCLOCO_H15 + ": top_k 32 of each 64 x 64 chunk"),
                "chunk_size": (4096, CCLOCO_H15 + ": chunk_size 64, square 64 x 64 tiles"),
                "quantize_bits": (2, SPARSELOCO + ", abstract: 2-bit quantization")},
}


def settings_against_papers(cfg: ExperimentConfig) -> list[dict[str, Any]]:
    """Each setting of an outer-loop run beside the published one of its outer step rule
    ({setting, here, published, source, differs}); the rows that differ are its deviations."""
    outer = cfg.outer
    here = {"inner_steps": outer["inner_steps"], "lr": outer["lr"],
            "momentum": outer["momentum"], "error_decay": outer["error_decay"],
            "inner_optimizer": cfg.optimizer, "density": cfg.density,
            "chunk_size": cfg.sparsifier_args.get("chunk_size", 4096)
            if cfg.sparsifier == "chunk-topk" else None,
            "quantize_bits": (cfg.quantize or {}).get("bits")}
    rows = []
    for setting, (value, source) in PUBLISHED[outer["step"]].items():
        mine = here[setting]
        rows.append({"setting": setting, "here": mine, "published": value, "source": source,
                     "differs": mine != value})
    if cfg.sparsifier == "chunk-topk":
        rows.append({"setting": "chunks", "here": "consecutive runs of the flat vector, 1-D "
                                                  "tensors included",
                     "published": "64 x 64 tiles of each weight matrix; each 1-D tensor in runs "
                                  "of a divisor of its length near 64",
                     "source": CCLOCO_CHUNKS, "differs": True})
    if cfg.sparsifier != "dense":
        rows.append({"setting": "aggregation", "here": "(1/P) sum over all P workers",
                     "published": "(1/R) sum over the R replicas in the paper's algorithm; "
                                  "public copies of the authors' code average each position "
                                  "over the replicas that sent it", "source": SPARSELOCO,
                     "differs": True})
    return rows


def describe(cfg: ExperimentConfig, trainer: OuterTrainer) -> dict[str, Any]:
    """The manifest's `outer` field: the block, the inner and outer optimizers, where the
    recorder's rows of an exchange sit, and the settings against the papers."""
    rows = settings_against_papers(cfg)
    return {**cfg.outer, "inner_optimizer": describe_optimizer(trainer.inner[0]),
            "outer_optimizer": {**describe_optimizer(trainer.optimizer), "lr": cfg.outer["lr"]},
            "recorded_at": "each exchange, under the inner step that ended its round",
            "settings_against_papers": rows,
            "deviations": [r["setting"] for r in rows if r["differs"]]}


class OuterTrainer(Trainer):
    """Outer-loop training for one process; `train_step()` runs inner step `self.step` on every
    local worker (and the exchange when the round ends) and returns its train.parquet row;
    `outer_row` is the exchange's outer.parquet row, None after a step without one."""

    def __init__(self, cfg: ExperimentConfig, model, task, transport,
                 device: torch.device | str = "cpu", recorder=None) -> None:
        super().__init__(cfg, model, task, transport, device, recorder)
        self.inner_steps = cfg.outer["inner_steps"]
        self.outer_lr = cfg.outer["lr"]
        with torch.no_grad():
            self.theta = self.layout.flatten([p.detach() for p in self.params]).clone()
        self.locals = [self.theta.clone() for _ in self.workers]
        self.inner = [make_optimizer(cfg, self.layout.views(x)) for x in self.locals]
        self.optimizer = MomentumSGD(self.params, momentum=cfg.outer["momentum"],
                                     nesterov=cfg.outer["step"] == "nesterov")
        self.outer_step = 0
        self.round_start = 0   # the first inner step of the current round
        self.outer_row: dict[str, Any] | None = None

    # ------------------------------------------------------------------ parameters
    @torch.no_grad()
    def _show(self, flat: torch.Tensor) -> None:
        """Copy a flat d-vector into the model's parameters."""
        for p, v in zip(self.params, self.layout.views(flat)):
            p.copy_(v)

    def _round_ends(self, step: int) -> bool:
        return (step + 1) % self.inner_steps == 0 or step + 1 == self.total_steps

    # ------------------------------------------------------------------ one step
    def train_step(self) -> dict[str, Any]:
        """Inner step self.step on every local worker; the exchange when the round ends."""
        if self.step >= self.total_steps:
            raise ValueError(f"step {self.step} is past the last step ({self.total_steps - 1})")
        step, spe, cfg = self.step, self.steps_per_epoch, self.cfg
        lr = lr_at(cfg, step, spe)
        self.model.train()
        stats, t_compute, kept_buffers = [], 0.0, None
        for i, worker in enumerate(self.workers):
            self._show(self.locals[i])
            t0 = time.perf_counter()
            g, row = self._worker_gradient(worker, lr)
            loss = row[0] / row[2]
            if not math.isfinite(loss):
                raise DivergedError(step, loss, worker.rank)
            if cfg.grad_clip is not None and cfg.clip_at == "aggregate":
                clip_norm_(g, cfg.grad_clip)  # the worker's own update is its aggregate
            self.inner[i].step(self.layout.views(g), lr)
            t_compute += time.perf_counter() - t0
            if i == 0 and len(self.workers) > 1:
                kept_buffers = [b.detach().clone() for b in self.model.buffers()]
            stats.append(row)
        if kept_buffers:  # running statistics follow rank 0 (train/trainer.py)
            for b, kept in zip(self.model.buffers(), kept_buffers):
                b.copy_(kept)
        self._show(self.theta)
        rho = density_at(cfg, step, spe)
        exchange = self._exchange(step, rho, loss) if self._round_ends(step) else None
        if exchange is not None:
            result, extra = exchange
            stats = [r + x for r, x in zip(stats, extra)]
        sums = self.transport.sum_scalars(stats)
        loss_sum, correct, count = sums[:3]
        self.step += 1
        k = self.layout.d if self.compressors[0].is_dense else self.compressors[0].target_k(rho)
        row = {"step": step, "epoch": step // spe, "loss": loss_sum / count, "lr": lr,
               "metric": self.task.metric(loss_sum, correct, count),
               "metric_name": self.task.metric_name, "density": rho, "k": k,
               "time_compute": t_compute / len(self.workers)}
        if exchange is None:
            self.outer_row = None
            return {**row, "selected": 0.0, "selected_min": 0, "selected_median": 0.0,
                    "selected_max": 0, "time_select": 0.0, "time_communicate": 0.0,
                    "bytes_sent": 0, "payload_bytes": 0, "contraction": math.nan}
        P = self.transport.world_size
        contraction, selection, delta_norm = (x / P for x in sums[3:6])
        sent = {**result.count_columns(result.counts), "time_select": result.time_select,
                "time_communicate": result.time_communicate, "bytes_sent": result.bytes_sent,
                "payload_bytes": result.payload_bytes}
        self.outer_row = {"outer_step": self.outer_step, "step": step,
                          "inner_steps": step + 1 - self.round_start, "density": rho,
                          "k": k, **sent, **result.payload.columns(),
                          "contraction": contraction, "contraction_selection": selection,
                          "pseudo_gradient_norm": delta_norm,
                          "update_norm": float(torch.linalg.vector_norm(
                              result.mean, dtype=torch.float64)), "outer_lr": self.outer_lr}
        self.outer_step += 1
        self.round_start = step + 1
        return {**row, **sent, "contraction": contraction}

    def _exchange(self, step: int, rho: float, loss: float):
        """Compress every local worker's pseudo-gradient, combine, take the outer step, reset
        the replicas. Returns (ExchangeResult, per-worker [contraction, contraction of the
        selection, ||Delta||] to be summed with the losses)."""
        contributions, extra = [], []
        for i, (worker, comp, src) in enumerate(zip(self.workers, self.compressors,
                                                    self.sources)):
            comp.sparsifier = src.at(step)
            delta = self.theta - self.locals[i]
            norm = float(torch.linalg.vector_norm(delta, dtype=torch.float64))
            try:
                c = contribute(comp, delta, rho, rank=worker.rank, recorder=self.recorder,
                               step=step)
            except NonFiniteError:
                raise DivergedError(step, loss, worker.rank, gradient=True) from None
            contributions.append(c)
            dense = c.sparse is None
            extra.append([0.0 if dense else c.contraction,
                          0.0 if dense else c.contraction_selection, norm])
        result = combine(self.transport, contributions, self.layout.d, self._mean)
        self.optimizer.step(self.layout.views(result.mean), self.outer_lr)
        with torch.no_grad():
            self.theta.copy_(self.layout.flatten([p.detach() for p in self.params]))
        for x in self.locals:
            x.copy_(self.theta)
        return result, extra

    # ------------------------------------------------------------------ state
    def worker_state(self, i: int) -> dict[str, Any]:
        """Trainer.worker_state plus the worker's replica and its inner optimizer's state."""
        return {**super().worker_state(i), "local": self.locals[i].detach().cpu().clone(),
                "inner_optimizer": self.inner[i].state_dict()}

    def shared_state(self) -> dict[str, Any]:
        return {**super().shared_state(), "outer_step": self.outer_step,
                "round_start": self.round_start}

    def load_shared_state(self, state: dict[str, Any]) -> None:
        super().load_shared_state(state)
        with torch.no_grad():
            self.theta.copy_(self.layout.flatten([p.detach() for p in self.params]))
        self.outer_step = int(state["outer_step"])
        self.round_start = int(state["round_start"])

    def load_worker_state(self, i: int, state: dict[str, Any]) -> None:
        super().load_worker_state(i, state)
        local = state["local"]
        if local.numel() != self.layout.d:
            raise ValueError(f"worker replica in the checkpoint has {local.numel()} elements, "
                             f"the model has d = {self.layout.d}")
        self.locals[i].copy_(local.to(self.locals[i].device))
        self.inner[i].load_state_dict(state["inner_optimizer"])
