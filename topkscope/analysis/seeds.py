"""Seeds of the convergence runs: the run standing for each seed of a method under a condition,
its final held-out metric, and the elements it sent per step and phase against another run.

A unit of the convergence claims (topkscope.claims.convergence) is a seed with a run of both a
method and Top-k under the same condition (Top-k's condition is the method's density warm-up,
without the method's own deviations: topk_condition), each run complete, failed or unfinished:
a failed run (manifest status `failed`, e.g. "training diverged at step N") or an unfinished one
(status `interrupted` or `running`) counts with its last evaluated metric, or the metric's worst
value when it never evaluated (seed_value); a seed with a complete run never uses a failed or
unfinished attempt of it (seed_cells).

Elements sent: train.parquet `selected` (mean per worker) summed over the steps both runs of a
seed logged, per phase of the density warm-up (topkscope.analysis.phases): phase_ratio,
traffic_ratios. Seeds that disagree in kind (some above 4/3, some below 2/3 of Top-k's) are
told by disagree_in_kind: the mean of such an outcome describes no seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from topkscope.analysis import criteria, phases
from topkscope.condition import Condition, run_condition
from topkscope.manifest import is_published

USED_STATUSES = ("complete", "failed")
UNFINISHED_STATUSES = ("interrupted", "running")  # counted, as unfinished seeds
CLAIMED_STATUSES = (*USED_STATUSES, *UNFINISHED_STATUSES)
PLAIN = Condition()  # the condition of Top-k without a density warm-up


@dataclass
class SeedRun:
    """What one run of one seed contributes: its final metric, whether it failed, and the
    elements it sent per step with the step's phase."""

    metric: float
    name: str | None          # accuracy | perplexity; None: never evaluated
    failed: bool
    error: str
    sent: pd.Series           # selected per step (index: step)
    warmup: pd.Series         # per step (index: step): 1.0 warm-up, 0.0 target, NaN unknown
    run: object = None        # the loaded run it stands for
    unfinished: bool = False  # interrupted or running: it never reached its last step
    wire_bytes: pd.Series | None = None  # train bytes_sent per step (index: step), if logged


EVAL_SPLITS = ("test", "valid", "val")  # the held-out splits the final metric prefers, in order


def evaluated(run) -> tuple[pd.DataFrame, str] | None:
    """(rows, metric_name): the run's evaluation rows with a finite metric of the split the
    final metric reads (test, else valid/val, else any), sorted by step (stable), and the
    metric's name at the last of them; None without an evaluation."""
    ev = run.eval
    if ev is None or ev.empty or "metric" not in ev:
        return None
    for split in (*EVAL_SPLITS, None):
        rows = ev if split is None else ev[ev["split"] == split]
        rows = rows[np.isfinite(rows["metric"].astype("float64").to_numpy())]
        if not rows.empty:
            rows = rows.sort_values("step", kind="stable").reset_index(drop=True)
            return rows, str(rows.iloc[-1].get("metric_name", "accuracy"))
    return None


def final_metric(run) -> tuple[float, str] | None:
    """(metric, metric_name) at the last evaluated step of the split `evaluated` reads."""
    found = evaluated(run)
    if found is None:
        return None
    rows, name = found
    return float(rows["metric"].iloc[-1]), name


def training_condition(manifest: dict) -> Condition:
    """The training condition a run's seed cell is keyed by: its warm-up, k rule, outer loop,
    quantization and deviations (the experiment and density are the cell's other keys)."""
    return run_condition(manifest, experiment="", world_size=None, training_density=None)


def topk_condition(condition: Condition) -> Condition:
    """The condition of the Top-k runs a method's runs under `condition` are paired with: the
    method's density warm-up alone, without its own k rule, outer loop or deviations
    ("warmup=paper; empty_fallback=topk" -> "warmup=paper")."""
    return Condition(warmup=condition.warmup, warmup_schedule=condition.warmup_schedule)


def seed_run(run) -> SeedRun:
    m = run.manifest
    final = final_metric(run)
    tr = getattr(run, "train", None)
    if tr is None or tr.empty or "selected" not in tr or "step" not in tr:
        sent = pd.Series(dtype="float64")
        warm = pd.Series(dtype="float64")
    else:
        tr = tr.drop_duplicates("step", keep="last").sort_values("step")
        sent = pd.Series(tr["selected"].astype("float64").to_numpy(), index=tr["step"].to_numpy())
        try:
            epochs = tr["epoch"].to_numpy() if "epoch" in tr else None
            in_warmup, _ = phases.step_phases(m, tr["step"].to_numpy(), epochs)
        except ValueError:
            in_warmup = np.full(len(tr), np.nan)
        warm = pd.Series(np.asarray(in_warmup, dtype=np.float64), index=tr["step"].to_numpy())
    wire = None
    if tr is not None and not tr.empty and {"bytes_sent", "step"} <= set(tr.columns):
        tr = tr.drop_duplicates("step", keep="last")
        wire = pd.Series(tr["bytes_sent"].astype("float64").to_numpy(), index=tr["step"].to_numpy())
    return SeedRun(wire_bytes=wire, metric=final[0] if final else math.nan, name=final[1] if final else None,
                   failed=m.get("status") == "failed", error=str(m.get("error") or ""),
                   unfinished=m.get("status") in UNFINISHED_STATUSES,
                   sent=sent, warmup=warm, run=run)


def seed_cells(runs: list, dense: bool = False) -> dict[tuple, dict[int, SeedRun]]:
    """(experiment, density, condition, method) -> {seed: SeedRun} (condition: a Condition,
    training_condition): the run standing for each
    seed, complete, failed or unfinished (a complete run of a seed wins over a failed or
    unfinished one, a failed one over an unfinished one; a complete run without an evaluation
    stands for nothing). Top-k runs sit under method "topk" of their own
    condition; dense runs are left out unless `dense`; imported published runs (no seed) are
    left out: their claims are topkscope.claims.published's."""
    cells: dict[tuple, dict[int, SeedRun]] = {}
    for run in runs:
        m = run.manifest
        if m.get("status") not in CLAIMED_STATUSES or (m.get("sparsifier") == "dense"
                                                       and not dense):
            continue
        if is_published(m):  # no seed was published: never a seed cell (claims.published)
            continue
        standing = seed_run(run)
        if standing.name is None and not (standing.failed or standing.unfinished):
            continue  # a complete run without an evaluation: nothing to compare
        key = (m.get("experiment"), m.get("density"), training_condition(m),
               m.get("sparsifier"))
        seeds = cells.setdefault(key, {})
        seed = m.get("seed", 0)
        if seed not in seeds or _standing(standing) < _standing(seeds[seed]):
            seeds[seed] = standing
    return cells


def _standing(seed_run: SeedRun) -> int:
    """Which run of a seed stands for it: complete (0) before failed (1) before unfinished."""
    return 2 if seed_run.unfinished else 1 if seed_run.failed else 0


def phase_ratio(mine: SeedRun, topk: SeedRun, phase: str | None) -> float:
    """The method's elements over Top-k's on the steps both logged (phase: warm-up, target or
    None for every step); NaN when Top-k sent nothing there or the phases are unknown."""
    steps = mine.sent.index.intersection(topk.sent.index)
    if phase is not None:
        warm = mine.warmup.reindex(steps)
        if warm.isna().any():
            return math.nan
        steps = steps[(warm.to_numpy() == 1.0) == (phase == phases.WARMUP)]
    ref = float(topk.sent.reindex(steps).sum())
    return float(mine.sent.reindex(steps).sum()) / ref if ref > 0 else math.nan


def bytes_ratio(mine: SeedRun, topk: SeedRun) -> float:
    """The method's wire bytes (train bytes_sent) over Top-k's on the steps both logged, the
    whole run; NaN where either run logged none."""
    if mine.wire_bytes is None or topk.wire_bytes is None:
        return math.nan
    steps = mine.wire_bytes.index.intersection(topk.wire_bytes.index)
    ref = float(topk.wire_bytes.reindex(steps).sum())
    return float(mine.wire_bytes.reindex(steps).sum()) / ref if ref > 0 else math.nan


def traffic_ratios(method_run, topk_run) -> dict[str, float]:
    """The elements a method's run sent over those of Top-k's run of the same seed, on the
    steps both logged, per phase: {"warm-up": ..., "target": ..., "whole run": ...} (NaN where
    a phase is empty or unknown)."""
    mine, topk = seed_run(method_run), seed_run(topk_run)
    return {phases.WARMUP: phase_ratio(mine, topk, phases.WARMUP),
            phases.TARGET: phase_ratio(mine, topk, phases.TARGET),
            WHOLE_RUN: phase_ratio(mine, topk, None)}


WHOLE_RUN = "whole run"


def seed_value(seed_run: SeedRun, name: str) -> tuple[float, str]:
    """(metric, note) a seed's run counts with: its final metric; a failed or unfinished run
    its last evaluated metric, or the metric's worst value (criteria.WORST) when it never
    evaluated."""
    if not (seed_run.failed or seed_run.unfinished):
        return seed_run.metric, ""
    why = (f"unfinished, {seed_run.run.manifest.get('status')}" if seed_run.unfinished
           else seed_run.error or "run failed")
    if seed_run.unfinished:
        if seed_run.name is None or not math.isfinite(seed_run.metric):
            worst = criteria.WORST.get(name, math.nan)
            return worst, f"is {why} before any evaluation: counted as {name} {worst:g}"
        return seed_run.metric, f"is {why}: counted with its last evaluated {name}"
    if seed_run.name is None or not math.isfinite(seed_run.metric):
        worst = criteria.WORST.get(name, math.nan)
        return worst, f"failed ({why}) before any evaluation: counted as {name} {worst:g}"
    return seed_run.metric, f"failed ({why}): counted with its last evaluated {name}"


def disagree_in_kind(ratios) -> bool:
    """Some seeds sent more than 4/3 of the reference's elements and some less than 2/3: a
    bimodal outcome whose mean describes no seed."""
    x = np.asarray(list(ratios), dtype=np.float64)
    x = x[np.isfinite(x)]
    return bool((x > criteria.TRAFFIC_LIMIT).any() and (x < 2.0 / 3.0).any())


