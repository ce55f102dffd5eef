"""The units the distribution claims judge, per (model, training sparsifier, condition): the
recorded whole-model u rows and the analysed snapshots of u, each labelled with its condition.

A condition is a topkscope.condition.Condition: the run's training condition and its target
density (key "warmup=paper; rho=0.001"). A unit recorded while a density warm-up trained at
another density is not pooled with them: it belongs to the same condition in phase "warm-up"
with the density trained then (key "...; during warm-up at rho=0.015625"). When a model has
several conditions, each is its own (POOLED, the key ALL_CONDITIONS, names the summary rows of
older tables, which pooled the target-density ones).

    for units in condition_units(runs, sparsifiers, max_snapshots, max_n):
        units.sparsifier, units.condition, units.u (stats rows), units.snaps, units.n_runs

Snapshots: at most `max_snapshots` per (training sparsifier, condition) get the full normality,
fit and curve analysis (analysis.snapshots.analyze_loaded), chosen by pick_snapshots.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from topkscope.analysis import contraction, fits, fitted_value, phases, selection, snapshots
from topkscope.condition import (
    ALL_CONDITIONS,
    DURING_WARMUP,
    EARLY_EXCHANGES,
    Condition,
    run_condition,
)
from topkscope.manifest import condition_of  # noqa: F401  (this API)
from topkscope.schema import GLOBAL

NO_UNITS = "no units recorded"
POOLED = Condition(phase="pooled")
__all__ = ["ALL_CONDITIONS", "DURING_WARMUP", "NO_UNITS", "POOLED", "ConditionUnits",
           "condition_units", "floats", "model_key", "pick_snapshots", "snapshot_analyses",
           "u_rows", "unit_conditions", "with_runs"]


def model_key(manifest: dict) -> tuple:
    """(model, dataset, dataset_substitute) from a manifest; missing entries become None."""
    return manifest.get("model"), manifest.get("dataset"), manifest.get("dataset_substitute")


def floats(column: pd.Series) -> np.ndarray:
    """A column as float64, nullable NA (e.g. Int64 counts with gaps) as NaN."""
    return column.astype("float64").to_numpy()


def unit_conditions(run, steps: Sequence[int]) -> list[Condition]:
    """The condition of each recorded step of a run: its training condition and target
    density, in phase "warm-up" with the density trained at when the step lies in the density
    warm-up (key "warmup=paper; rho=0.001; during warm-up at rho=0.015625"), phase "unknown"
    when the steps cannot be placed."""
    base = grouping(run_condition(run.manifest))
    if base.is_outer:  # recorded at exchanges: the first ones are a phase of their own
        h = base.outer_inner_steps or 1
        return [replace(base, phase="first-exchanges" if (int(s) + 1) // h <= EARLY_EXCHANGES
                        else "later-exchanges") for s in steps]
    tr = getattr(run, "train", None)
    epochs = None
    if tr is not None and not tr.empty and {"step", "epoch"} <= set(tr.columns):
        noted = tr[tr["epoch"].notna()]  # a hook run's epoch is null unless the script notes it
        by_step = dict(zip(noted["step"].astype(int), noted["epoch"].astype(int)))
        if all(int(s) in by_step for s in steps):
            epochs = [by_step[int(s)] for s in steps]
    try:
        warm, trained = phases.step_phases(run.manifest, steps, epochs)
    except ValueError:
        return [replace(base, phase="unknown")] * len(steps)
    return [replace(base, phase="warm-up", phase_density=float(t)) if w else base
            for w, t in zip(warm, trained)]


def grouping(cond: Condition) -> Condition:
    """The part of a run's condition its units are grouped by: every field — the experiment
    and the world size too: runs of two experiments or world sizes are never pooled."""
    return cond


def u_rows(runs: list) -> pd.DataFrame:
    """The whole-model u rows (stats kind u, layer __global__) of `runs`, with `_run` (the
    run's index), `_sparsifier` (its training sparsifier) and `_condition` (unit_conditions)."""
    frames = []
    for i, run in enumerate(runs):
        st = run.stats
        if st is None or st.empty or "kind" not in st or "layer" not in st:
            continue
        rows = st[(st["kind"] == "u") & (st["layer"] == GLOBAL)]
        if not rows.empty:
            steps = rows["step"].astype(int).to_numpy()
            unique = sorted(set(steps.tolist()))
            label = dict(zip(unique, unit_conditions(run, unique)))
            frames.append(rows.assign(_run=i, _sparsifier=run.manifest.get("sparsifier"),
                                      _condition=[label[s] for s in steps]))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def pick_snapshots(found: list[tuple[int, int, int]], most: int) -> list[tuple[int, int, int]]:
    """At most `most` of the (run, step, rank) snapshots `found`, as many distinct (run, step)
    blocks as possible (the ranks of one step are one block of criteria.share_interval, so a
    second rank adds less than another step): blocks evenly spaced over (step, run), one rank
    each (cycling over the ranks); then, while room is left, more ranks of those blocks."""
    by_step = sorted(found, key=lambda t: (t[1], t[0], t[2]))
    blocks: dict[tuple[int, int], list[int]] = {}
    for i, step, rank in by_step:
        blocks.setdefault((i, step), []).append(rank)
    order = list(blocks)
    chosen = np.unique(np.linspace(0, len(order) - 1, min(most, len(order))).round()).astype(int)
    picked = [(order[j][0], order[j][1], blocks[order[j]][n % len(blocks[order[j]])])
              for n, j in enumerate(chosen)]
    taken = set(picked)
    rest = [t for t in by_step if t not in taken]
    room = max(0, min(most, len(found)) - len(picked))
    if room and rest:
        extra = np.unique(np.linspace(0, len(rest) - 1, room).round()).astype(int)
        picked += [rest[j] for j in extra]
    return sorted(picked, key=lambda t: (t[1], t[0], t[2]))


def snapshot_analyses(runs: list, max_snapshots: int, max_n: int | None) -> list[dict]:
    """The snapshot pipeline (analysis.snapshots.analyze_loaded: battery, fits, contraction at
    the recorder's densities, seed SEED) on at most max_snapshots snapshots of u per (training
    sparsifier, condition), chosen by pick_snapshots. Each analysis: _run, step, rank,
    sparsifier, condition, battery (normality row), best_family, beta (gennorm shape),
    ratios (contraction table), tail ((density, count above Gaussian-k's first threshold, k)
    per density), tails (the row of tails.across_coordinates: Hill index, power-law fit),
    fitted (fitted_value.snapshot_units)."""
    listed: dict[tuple, list[tuple[int, int, int]]] = {}
    for i, run in enumerate(runs):
        keys = snapshots.snapshot_keys(run)
        if not keys:
            continue
        steps = sorted({s for s, _ in keys})
        label = dict(zip(steps, unit_conditions(run, steps)))
        for step, rank in keys:
            where = (run.manifest.get("sparsifier"), label[step])
            listed.setdefault(where, []).append((i, step, rank))
    if max_snapshots == 0:
        return []
    out = []
    for (sparsifier, condition), found in sorted(listed.items()):
        for i, step, rank in pick_snapshots(found, max_snapshots):
            tables = snapshots.analyze_loaded(runs[i], step, rank, max_n=max_n)
            vector = runs[i].snapshot(step, rank)
            tail = [(rho, selection.gaussian_tail_count(vector, k), k)
                    for rho in snapshots.snapshot_densities(runs[i], step, rank)
                    if 1 <= (k := contraction.k_from_density(rho, vector.size)) <= vector.size]
            gennorm = tables.fits[(tables.fits["family"] == "gennorm")
                                  & (tables.fits["on"] == "x")]["shape"]
            out.append({
                "_run": i, "step": step, "rank": rank, "sparsifier": sparsifier,
                # the δ(k) atlas of the snapshot, measured only when a claim asks for it
                "delta": (lambda run=runs[i], step=step, rank=rank:
                          snapshots.analyze_delta_loaded(run, step, rank, "u")),
                "condition": condition, "battery": tables.normality.iloc[0].to_dict(),
                "best_family": fits.best(tables.fits, "x") if not tables.fits.empty else "none",
                "beta": float(gennorm.iloc[0]) if len(gennorm) else math.nan,
                "ratios": tables.contraction, "tail": tail,
                "tails": tables.tails.iloc[0].to_dict() if len(tables.tails) else {},
                "fitted": fitted_value.snapshot_units(tables.contraction, tables.fits),
            })  # fmt: skip
    return out


def with_runs(cond: Condition, runs: Sequence) -> Condition:
    """cond with the experiment and world size of `runs` where they all share one (a row
    names them; units are grouped without them)."""
    experiments = {str(r.manifest.get("experiment") or "") for r in runs}
    sizes = {r.manifest.get("world_size") for r in runs}
    size = next(iter(sizes)) if len(sizes) == 1 else None
    return replace(cond, experiment=next(iter(experiments)) if len(experiments) == 1 else "",
                   world_size=int(size) if isinstance(size, (int, float)) else None)


@dataclass
class ConditionUnits:
    """The units of one (training sparsifier, condition) of one model: its recorded u rows
    (u_rows' columns) and snapshot analyses (snapshot_analyses'), and the runs behind them."""

    sparsifier: str
    condition: Condition | None  # None: no unit recorded (the row says NO_UNITS)
    u: pd.DataFrame = field(default_factory=pd.DataFrame)
    snaps: list = field(default_factory=list)
    n_runs: int = 0
    runs: list = field(default_factory=list)

    def row_condition(self) -> Condition:
        """The condition a row of these units carries: the grouping condition with the
        experiment and world size of its runs where they all share one."""
        return with_runs(self.condition, self.runs)

    @property
    def densities(self) -> list[float]:
        """The densities the recorder evaluated Top-k at on these units (its u rows' and the
        snapshots' contraction tables'), sorted."""
        found = set()
        if not self.u.empty and "density" in self.u:
            found |= set(floats(self.u["density"])[np.isfinite(floats(self.u["density"]))])
        for s in self.snaps:
            if len(s["ratios"]) and "density" in s["ratios"]:
                found |= set(floats(s["ratios"]["density"]))
        return sorted(float(d) for d in found)

    def at_density(self, density: float) -> ConditionUnits:
        """The same units restricted to one recorder density: u rows at it, each snapshot's
        contraction rows, tail counts and fitted units at it (its normality and fits, which
        do not depend on a density, kept)."""
        def near(values) -> np.ndarray:
            return np.isclose(floats(pd.Series(values, dtype="float64")), density,
                              rtol=1e-9, atol=0.0)

        u = self.u[near(self.u["density"])] if not self.u.empty and "density" in self.u \
            else self.u
        snaps = []
        for s in self.snaps:
            ratios = s["ratios"][near(s["ratios"]["density"])] if len(s["ratios"]) else \
                s["ratios"]
            fitted = s["fitted"][near(s["fitted"]["density"])] if len(s["fitted"]) and \
                "density" in s["fitted"] else s["fitted"]
            tail = [t for t in s["tail"] if np.isclose(t[0], density, rtol=1e-9, atol=0.0)]
            snaps.append({**s, "ratios": ratios, "fitted": fitted, "tail": tail,
                          "density": density})
        return ConditionUnits(self.sparsifier, self.condition, u, snaps, self.n_runs, self.runs)


def condition_units(runs: list, sparsifiers: Sequence[str], max_snapshots: int,
                    max_n: int | None) -> Iterator[ConditionUnits]:
    """Every (training sparsifier, condition) of `runs` (one model's) with units, in the
    claims table's order: per sparsifier of `sparsifiers`, its target-density conditions
    sorted by key, then the warm-up conditions, then POOLED where there are several target
    ones. Runs without any unit give one ConditionUnits of an empty condition for the first
    of `sparsifiers` (NO_UNITS). Conditions are never pooled (no summary over them)."""
    u = u_rows(runs)
    snaps = snapshot_analyses(runs, max_snapshots, max_n)
    found = set()
    if not u.empty:
        found |= set(zip(u["_sparsifier"], u["_condition"]))
    found |= {(s["sparsifier"], s["condition"]) for s in snaps}
    if not found:
        yield ConditionUnits(sparsifiers[0], None, runs=list(runs))
        return
    for sparsifier in [s for s in sparsifiers if any(f[0] == s for f in found)]:
        conditions = sorted((c for s, c in found if s == sparsifier), key=Condition.key)
        target = [c for c in conditions if c.main_phase]
        ordered = target + [c for c in conditions if c not in target]
        for cond in ordered:
            wanted = {cond}
            sub = (u[(u["_sparsifier"] == sparsifier) & u["_condition"].isin(wanted)]
                   if not u.empty else u)
            picked = [s for s in snaps if s["sparsifier"] == sparsifier
                      and s["condition"] in wanted]
            used = (set(sub["_run"]) if not sub.empty else set()) | {s["_run"] for s in picked}
            yield ConditionUnits(sparsifier, cond, sub, picked, len(used),
                                 [runs[i] for i in sorted(used)])
