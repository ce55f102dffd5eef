"""What a worker computes on its data: batches, loss, metric, evaluation.

Classification: worker r at step t takes the (t mod S)-th batch of its shard of epoch
floor(t / S) (topkscope.data.shard_indices), loss = mean cross-entropy, metric = accuracy.
Language model: the training tokens are cut into P contiguous pieces, worker r batchifies
piece r into B columns and walks it in bptt windows (window t mod S); a recurrent model (one
with `init_hidden`, the LSTM) carries its hidden state across windows (detached; reset at each
epoch start), a stateless one (the GPT) sees each window alone; metric = perplexity
exp(mean token cross-entropy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from topkscope.sparsify.source import step_seed
from topkscope.train.config import ExperimentConfig


@dataclass
class StepStats:
    """Sums over one worker's batch: loss * n, correct predictions, n."""

    loss_sum: float
    correct: float
    count: float

    def as_list(self) -> list[float]:
        return [self.loss_sum, self.correct, self.count]


@dataclass
class WorkerData:
    """A worker's data-dependent state carried between steps (LM hidden state)."""

    rank: int
    hidden: Any = None
    cache: dict = field(default_factory=dict)


def augment_generator(seed: int, rank: int, step: int) -> torch.Generator:
    """A generator that depends only on (seed, rank, step): resumable without saved state."""
    g = torch.Generator()
    g.manual_seed(step_seed(seed, rank, step) ^ 0x5DEECE66D)  # not the global RNG's stream
    return g


class ClassificationTask:
    metric_name = "accuracy"
    eval_split = "test"

    def __init__(self, cfg: ExperimentConfig, train, evaluation, world_size: int,
                 device: torch.device, augment: bool = False) -> None:
        self.cfg = cfg
        self.train = train
        self.evaluation = evaluation
        self.world_size = world_size
        self.device = device
        self.augment = augment
        self.n_train = min(len(train), cfg.train_subset or len(train))
        self.n_eval = min(len(evaluation), cfg.eval_subset or len(evaluation))
        per_rank = self.n_train // world_size
        self.steps_per_epoch = per_rank // cfg.batch_size
        if self.steps_per_epoch < 1:
            raise ValueError(
                f"batch_size = {cfg.batch_size} exceeds the {per_rank} training examples per "
                f"worker ({self.n_train} over {world_size} workers); allowed [1, {per_rank}]"
            )

    def new_worker(self, rank: int) -> WorkerData:
        return WorkerData(rank)

    def _shard(self, worker: WorkerData, epoch: int) -> torch.Tensor:
        from topkscope.data import shard_indices

        if worker.cache.get("epoch") != epoch:
            worker.cache = {"epoch": epoch, "shard": shard_indices(
                self.n_train, worker.rank, self.world_size, epoch, self.cfg.seed)}
        return worker.cache["shard"]

    def loss(self, model: nn.Module, worker: WorkerData, step: int) -> tuple[torch.Tensor, StepStats]:
        epoch, b = divmod(step, self.steps_per_epoch)
        bs = self.cfg.batch_size
        idx = self._shard(worker, epoch)[b * bs : (b + 1) * bs]
        if self.augment:
            x, y = self.train.batch(idx, augment=True,
                                    generator=augment_generator(self.cfg.seed, worker.rank, step))
        else:
            x, y = self.train.batch(idx)
        x, y = x.to(self.device), y.to(self.device)
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        correct = float((logits.argmax(1) == y).sum())
        return loss, StepStats(float(loss.detach()) * len(y), correct, float(len(y)))

    def metric(self, loss_sum: float, correct: float, count: float) -> float:
        return correct / count

    @torch.no_grad()
    def evaluate(self, model: nn.Module) -> tuple[float, float]:
        """(mean loss, accuracy) over the evaluation split (or its first eval_subset)."""
        was_training = model.training
        model.eval()
        loss_sum, correct, count = 0.0, 0.0, 0
        bs = self.cfg.eval_batch_size
        for i, start in enumerate(range(0, self.n_eval, bs)):
            if self.cfg.eval_max_batches is not None and i >= self.cfg.eval_max_batches:
                break
            idx = torch.arange(start, min(start + bs, self.n_eval))
            x, y = self.evaluation.batch(idx)
            logits = model(x.to(self.device))
            y = y.to(self.device)
            loss_sum += float(F.cross_entropy(logits, y, reduction="sum"))
            correct += float((logits.argmax(1) == y).sum())
            count += len(y)
        model.train(was_training)
        return loss_sum / count, correct / count


def _detach(hidden: Any) -> Any:
    if isinstance(hidden, torch.Tensor):
        return hidden.detach()
    return type(hidden)(_detach(h) for h in hidden)


def _to(hidden: Any, device: torch.device) -> Any:
    if isinstance(hidden, torch.Tensor):
        return hidden.to(device)
    return type(hidden)(_to(h, device) for h in hidden)


def carries_state(model: nn.Module) -> bool:
    """A recurrent language model (init_hidden) carries a hidden state between windows."""
    return hasattr(model, "init_hidden")


def _window_loss(logits: torch.Tensor, y: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1),
                           reduction=reduction)


class LanguageModelTask:
    metric_name = "perplexity"
    eval_split = "valid"

    def __init__(self, cfg: ExperimentConfig, train, evaluation, world_size: int,
                 device: torch.device) -> None:
        from topkscope.data import batchify, num_windows

        if cfg.bptt is None:
            raise ValueError("bptt is required for a language model (e.g. bptt: 35)")
        self.cfg = cfg
        self.device = device
        self.world_size = world_size
        tokens = train.tokens[: cfg.train_subset] if cfg.train_subset else train.tokens
        piece = tokens.numel() // world_size
        self.streams = [batchify(tokens[r * piece : (r + 1) * piece], cfg.batch_size).to(device)
                        for r in range(world_size)]
        self.steps_per_epoch = num_windows(self.streams[0], cfg.bptt)
        ev = evaluation.tokens[: cfg.eval_subset] if cfg.eval_subset else evaluation.tokens
        self.eval_source = batchify(ev, cfg.eval_batch_size).to(device)

    def new_worker(self, rank: int) -> WorkerData:
        return WorkerData(rank)

    def loss(self, model: nn.Module, worker: WorkerData, step: int) -> tuple[torch.Tensor, StepStats]:
        from topkscope.data import bptt_batch

        window = step % self.steps_per_epoch
        x, y = bptt_batch(self.streams[worker.rank], window * self.cfg.bptt, self.cfg.bptt)
        if carries_state(model):
            if window == 0 or worker.hidden is None:
                worker.hidden = _to(model.init_hidden(self.cfg.batch_size), self.device)
            logits, hidden = model(x, _detach(worker.hidden))
            worker.hidden = _detach(hidden)
        else:
            logits = model(x)
        loss = _window_loss(logits, y)
        n = float(y.numel())
        return loss, StepStats(float(loss.detach()) * n, 0.0, n)

    def metric(self, loss_sum: float, correct: float, count: float) -> float:
        return math.exp(min(loss_sum / count, 700.0))

    @torch.no_grad()
    def evaluate(self, model: nn.Module) -> tuple[float, float]:
        """(mean token loss, perplexity) over the evaluation stream in bptt windows, the
        hidden state carried for a recurrent model."""
        from topkscope.data import bptt_batch, num_windows

        was_training = model.training
        model.eval()
        stateful = carries_state(model)
        hidden = _to(model.init_hidden(self.cfg.eval_batch_size), self.device) if stateful else None
        loss_sum, count = 0.0, 0
        for w in range(num_windows(self.eval_source, self.cfg.bptt)):
            if self.cfg.eval_max_batches is not None and w >= self.cfg.eval_max_batches:
                break
            x, y = bptt_batch(self.eval_source, w * self.cfg.bptt, self.cfg.bptt)
            if stateful:
                logits, hidden = model(x, hidden)
            else:
                logits = model(x)
            loss_sum += float(_window_loss(logits, y, reduction="sum"))
            count += y.numel()
        model.train(was_training)
        mean = loss_sum / count
        return mean, math.exp(min(mean, 700.0))
