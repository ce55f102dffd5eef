"""Learning-rate and density schedules as pure functions of the step.

epoch(t) = t / steps_per_epoch (fractional).

Learning rate: a linear warm-up w(t) over W steps (Goyal et al.), times a decay c(t):

    lr_t = lr * c(t) * w(t)
    w(t) = s + (1 - s) * min(1, (t + 1) / W)         (1 if no warm-up)
    W    = lr_warmup_steps, or lr_warmup_epochs * steps_per_epoch

    lr_schedule milestones (step decay, as in the paper's configs):
        c(t) = gamma^m(t),  m(t) = number of milestones <= epoch(t)
    lr_schedule cosine (Loshchilov & Hutter, SGDR; the GPT recipes), from the end of the
    warm-up to the last step T - 1, ending at lr * f (f = lr_final_factor):
        c(t) = f + (1 - f) * (1 + cos(pi * p(t))) / 2,   p(t) = clamp((t - W) / (T - 1 - W), 0, 1)
        (p = 0 throughout the warm-up, also when the run is shorter than it)

Density warm-up: one density per epoch, then the target density:

    rho_t = S[floor(epoch(t))]  while the list S lasts, else density

S = density_schedule, or the named schedule it stands for (config.DENSITY_SCHEDULES;
`paper` = the Gaussian-k authors' 1/64 in epoch 0, 0.004 in epoch 1).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

from topkscope.train.config import ExperimentConfig, density_schedule_values


def warmup_steps(cfg: ExperimentConfig, steps_per_epoch: int) -> float:
    """W: lr_warmup_steps, or lr_warmup_epochs in steps (may be fractional)."""
    return cfg.lr_warmup_steps or cfg.lr_warmup_epochs * steps_per_epoch


def lr_at(cfg: ExperimentConfig, step: int, steps_per_epoch: int) -> float:
    warm_steps = warmup_steps(cfg, steps_per_epoch)
    if cfg.lr_schedule == "cosine":
        span = total_steps(cfg, steps_per_epoch) - 1 - warm_steps
        if span > 0:
            progress = min(1.0, max(0.0, (step - warm_steps) / span))
        else:  # the run ends before (or as) the warm-up does: no decay while warming up
            progress = 0.0 if step < warm_steps else 1.0
        f = cfg.lr_final_factor
        lr = cfg.lr * (f + (1.0 - f) * 0.5 * (1.0 + math.cos(math.pi * progress)))
    else:
        decays = bisect.bisect_right(cfg.lr_milestones, step / steps_per_epoch)
        lr = cfg.lr * cfg.lr_gamma**decays
    if warm_steps > 0:
        ramp = min(1.0, (step + 1) / warm_steps)
        lr *= cfg.lr_warmup_start + (1.0 - cfg.lr_warmup_start) * ramp
    return lr


def density_at(cfg: ExperimentConfig, step: int, steps_per_epoch: int) -> float:
    return scheduled_density(density_schedule_values(cfg), cfg.density,
                             math.floor(step / steps_per_epoch))


def scheduled_density(schedule: Sequence[float], density: float, epoch: int) -> float:
    """rho in `epoch`: schedule[epoch] while the list lasts (the warm-up), else `density`."""
    return float(schedule[epoch]) if 0 <= epoch < len(schedule) else float(density)


def total_steps(cfg: ExperimentConfig, steps_per_epoch: int) -> int:
    """steps if set, else ceil(epochs * steps_per_epoch)."""
    if cfg.steps is not None:
        return cfg.steps
    return max(1, math.ceil(cfg.epochs * steps_per_epoch))
