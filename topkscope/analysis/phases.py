"""The density warm-up phases of a run, from its manifest: which steps trained at a warm-up
density and which at the target density.

    rho_t = S[floor(t / steps_per_epoch)] while the list S lasts (the warm-up), else density

(topkscope.train.schedules.scheduled_density), with S the manifest's
`density_schedule_values` (or the schedule its `density_schedule` names) and steps_per_epoch
its own. A run without a schedule trains every step at the target density. The claims keep
the phases apart: recorder units of a warm-up step are a condition of their own, and the
elements sent are counted per phase.

The training phase of a step (`training_phases`), for statistics that change as training goes
on (the tails of g, u and e): "warm-up" while the density warm-up lasts, then "early" for the
first half of the remaining steps [w, T) of the run (T = the manifest's total_steps, w the
first step past the warm-up; w = 0 without one) and "late" for the second half:

    phase(t) = warm-up (t in the warm-up), early (w <= t < w + (T - w) / 2), late (otherwise)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from topkscope.train.config import DENSITY_SCHEDULES
from topkscope.train.schedules import scheduled_density

WARMUP, TARGET = "warm-up", "target"
EARLY, LATE = "early", "late"


def schedule_values(manifest: dict) -> list[float]:
    """The per-epoch warm-up densities S of a run: the manifest's density_schedule_values,
    else the schedule its density_schedule (or its config's) names; [] without one."""
    values = manifest.get("density_schedule_values")
    if values is not None:
        return [float(v) for v in values]
    sched = manifest.get("density_schedule")
    if sched is None:
        sched = (manifest.get("config") or {}).get("density_schedule")
    if isinstance(sched, str):
        return list(DENSITY_SCHEDULES.get(sched, ()))
    return [float(v) for v in sched or ()]


def step_phases(manifest: dict, steps: Sequence[int],
                epochs: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(in_warmup, trained_density) of each step: the epoch from `epochs` (the train rows'
    own, used when none is null: a hook run's epoch is null unless its script notes it), else
    step // steps_per_epoch of the manifest. ValueError when the run has a warm-up and neither
    says where its epochs begin."""
    steps = np.asarray(steps, dtype=np.int64)
    schedule = schedule_values(manifest)
    target = float(manifest.get("density") or np.nan)
    if not schedule:
        return np.zeros(steps.size, bool), np.full(steps.size, target)
    if epochs is not None and not pd.isna(pd.Series(epochs, dtype="object")).any():
        epoch = np.asarray(epochs, dtype=np.int64)
    elif manifest.get("steps_per_epoch"):
        epoch = steps // int(manifest["steps_per_epoch"])
    else:
        raise ValueError("the run has a density warm-up but its manifest has no steps_per_epoch "
                         "and no train rows give the epochs: its phases are unknown")
    trained = np.array([scheduled_density(schedule, target, int(e)) for e in epoch], float)
    return epoch < len(schedule), trained


def training_phases(manifest: dict, steps: Sequence[int],
                    epochs: Sequence[int] | None = None) -> np.ndarray:
    """The phase of each step (module formula): "warm-up", "early" or "late", as an object
    array. T is the manifest's total_steps, else one past the largest step given; the warm-up
    as `step_phases` finds it (ValueError where it cannot tell)."""
    steps = np.asarray(steps, dtype=np.int64)
    warm, _ = step_phases(manifest, steps, epochs)
    total = manifest.get("total_steps")
    total = int(total) if total else int(steps.max(initial=-1)) + 1
    first = int(steps[warm].max()) + 1 if warm.any() else 0
    if schedule_values(manifest) and manifest.get("steps_per_epoch"):
        first = len(schedule_values(manifest)) * int(manifest["steps_per_epoch"])
    middle = first + (total - first) / 2.0
    out = np.where(steps < middle, EARLY, LATE).astype(object)
    out[warm] = WARMUP
    return out
