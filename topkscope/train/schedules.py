"""Learning-rate and density schedules as pure functions of the step.

epoch(t) = t / steps_per_epoch (fractional).

Learning rate (Goyal et al. warm-up, then step decay, as in the paper's configs):

    lr_t = lr * gamma^m(t) * w(t)
    m(t) = number of milestones <= epoch(t)
    w(t) = s + (1 - s) * min(1, (t + 1) / (warmup_epochs * steps_per_epoch))    (1 if no warm-up)

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


def lr_at(cfg: ExperimentConfig, step: int, steps_per_epoch: int) -> float:
    epoch = step / steps_per_epoch
    decays = bisect.bisect_right(cfg.lr_milestones, epoch)
    lr = cfg.lr * cfg.lr_gamma**decays
    warm_steps = cfg.lr_warmup_epochs * steps_per_epoch
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
