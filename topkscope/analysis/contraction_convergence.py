"""Claim `contraction_explains_convergence`: does a method's contraction order its convergence?

The bound. For error-feedback SGD with a delta-contraction C, ||x - C(x)||^2 <= delta ||x||^2,
i.e. the "k-contraction" of Stich, Cordonnier & Jaggi (NeurIPS 2018) with q = 1 - delta,
Karimireddy, Rebjock, Stich & Jaggi, "Error Feedback Fixes SignSGD and other Gradient
Compression Schemes" (ICML 2019, arXiv 1901.09847), Theorem II (smooth non-convex f, bounded
gradient variance sigma^2, step size gamma = 1/sqrt(T + 1)), bounds min_t E||grad f(x_t)||^2 by
SGD's O(1/sqrt(T)) terms, which do not depend on the compressor, plus one term that does,

    proportional to  L^2 sigma^2 (1 - q) / (q^2 (T + 1))

(their delta is our q). The compression thus enters only through

    term(q) = (1 - q) / q^2,   q = 1 - delta   (0 for dense SGD, growing without bound as q -> 0);

the constant in front is the same for every method of one model and is irrelevant to the rank
ordering tested here. Stich & Karimireddy ("The Error-Feedback Framework", arXiv 1909.05350)
analyse the same delayed-update view of error feedback.

The contractions compared, each giving q = 1 - delta:
    measured   delta_C, the method's own ||u - C(u)||^2 / ||u||^2 in training, mean over the
               recorded steps of the target-density phase (see `measured_delta`)
    classic    delta = 1 - k/d          paper      delta = (1 - k/d)^2
    gaussian   delta = 1 - rho - 2 t phi(t)
    fitted     delta = the fitted generalised normal's value (topkscope.analysis.fitted_value) on
               the snapshots of the same condition's Top-k runs, median over snapshots

The measured gap, per seed against the same seed's Dense run: `final`, how far the final held-out
metric falls behind Dense's (points of accuracy; % of Dense's perplexity), and `steps`, the steps
to reach Dense's final metric within the non-inferiority margin relative to Dense's own (a run
that never reaches it counts as infinitely slow). One point per (experiment, density, condition,
method), Dense excluded; Spearman's rank correlation between term and gap over the points of one
model, with a 95% percentile bootstrap over seeds (the same resampled seeds for every point: the
design pairs them), and a one-sided permutation p-value over the points (the seeds' interval alone
says nothing about how likely the ordering is by chance with few points). Verdict per (model,
gap): the contraction whose interval lies above 0 and above every other's, with p < MAX_P,
explains the ordering best (holds, naming it); "inconclusive" when the intervals overlap or p is
larger; "insufficient-data" with fewer than MIN_POINTS points or 3 seeds.

What training records: train.parquet has no per-step contraction of the method's own selection
(TRAIN_COLUMNS); the recorder runs in the Top-k runs of the convergence experiments only. So
delta_C comes from, in order: a train column `contraction` when a run has one (what training
would need to record: ||u - C(u)||^2 / ||u||^2 per step, mean over workers); Top-k's own stats
`topk_ratio`; Rand-k's expectation 1 - k/d (exact in expectation); else the recorder's
`S_ratio` of the method's selector evaluated on the same seed's and condition's Top-k u (the
method's selection rule on Top-k's trajectory, not its own); else the method has no point.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

from topkscope import bounds
from topkscope.analysis import criteria, fitted_value, phases, snapshots
from topkscope.analysis.seeds import evaluated, seed_cells, seed_value, topk_condition
from topkscope.schema import GLOBAL, column_prefix

CONTRACTIONS = ("measured", "classic", "paper", "gaussian", "fitted")
GAPS = ("final", "steps")
TRAIN_CONTRACTION = "contraction"   # the train.parquet column training would need
MIN_POINTS = 4
MAX_P = 0.05   # the ordering must also be unlikely under a random ordering of the points
N_BOOT = 2000
BOOT_SEED = 0
POINT_COLUMNS = ["experiment", "density", "condition", "method", "source", "n_seeds", "k", "d",
                 *(f"delta_{c}" for c in CONTRACTIONS), *(f"term_{c}" for c in CONTRACTIONS),
                 *(f"gap_{g}" for g in GAPS), "metric"]

def compression_term(q) -> np.ndarray:
    """(1 - q) / q^2 (the compression term of the EF-SGD bound); q in (0, 1], NaN outside."""
    q = np.asarray(q, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (1.0 - q) / (q * q)
    return np.where((q > 0) & (q <= 1), out, np.nan)


def reaches(metric_name: str, reference: float, value: float, margin: float) -> bool:
    """`value` is within the non-inferiority margin of `reference`: the claims' paired
    difference (criteria.paired_difference) on the good side of criteria.limit_of."""
    diff = criteria.paired_difference(metric_name, reference, value)
    limit = criteria.limit_of(metric_name, margin)
    return diff >= limit if criteria.higher_is_better(metric_name) else diff <= limit


def steps_to_target(curve: pd.DataFrame, metric_name: str, reference: float,
                    margin: float) -> int | None:
    """Training steps done at the first evaluated step (rows sorted by step) whose metric
    reaches the target (eval row at step t: t + 1 steps; not interpolated); None when none
    does."""
    for step, value in zip(curve["step"], curve["metric"]):
        if reaches(metric_name, reference, float(value), margin):
            return int(step) + 1
    return None


# ------------------------------------------------------------------ the measured contraction
def _target_steps(run, steps: np.ndarray) -> np.ndarray:
    """The steps among `steps` that lie in the run's target-density phase (all of them when
    the phases are unknown: the run is then taken as trained at its density throughout)."""
    tr = getattr(run, "train", None)
    epochs = None
    if tr is not None and not tr.empty and {"step", "epoch"} <= set(tr.columns):
        by = dict(zip(tr["step"].astype(int), tr["epoch"]))
        if all(int(s) in by and not pd.isna(by[int(s)]) for s in steps):
            epochs = [int(by[int(s)]) for s in steps]
    try:
        warm, _ = phases.step_phases(run.manifest, steps, epochs)
    except ValueError:
        return steps
    return steps[~np.asarray(warm, bool)]


def _stats_delta(run, column: str) -> float:
    """Mean over the target phase's recorded steps of the median over workers of `column` in
    the run's whole-model u rows at its density."""
    st = getattr(run, "stats", None)
    if st is None or st.empty or column not in st:
        return math.nan
    rows = st[(st["kind"] == "u") & (st["layer"] == GLOBAL)]
    density = run.manifest.get("density")
    if density is not None and "density" in rows:
        rows = rows[np.isclose(rows["density"].astype(float), float(density))]
    rows = rows[np.isfinite(rows[column].astype(float))]
    if rows.empty:
        return math.nan
    per_step = rows.groupby("step")[column].median()
    keep = _target_steps(run, per_step.index.to_numpy(np.int64))
    per_step = per_step[per_step.index.isin(keep)]
    return float(per_step.mean()) if len(per_step) else math.nan


def measured_delta(run, method: str, topk_run) -> tuple[float, str]:
    """(delta_C, source) of one seed's run (see the module docstring for the order)."""
    tr = getattr(run, "train", None)
    if tr is not None and not tr.empty and TRAIN_CONTRACTION in tr:
        values = tr[np.isfinite(tr[TRAIN_CONTRACTION].astype(float))]
        keep = _target_steps(run, values["step"].to_numpy(np.int64))
        values = values[values["step"].isin(keep)][TRAIN_CONTRACTION]
        if len(values):
            return float(values.mean()), "own (train contraction)"
    if method == "topk":
        return _stats_delta(run, "topk_ratio"), "own (recorder topk_ratio)"
    if method == "randk":
        k, d = _kd(run)
        if k and d:
            return bounds.classic_bound(k, d), "expectation 1 - k/d"
    if topk_run is not None:
        value = _stats_delta(topk_run, f"{column_prefix(method)}_ratio")
        if math.isfinite(value):
            return value, "on Top-k's u (recorder S_ratio, same seed and condition)"
    return math.nan, "not recorded"


def _kd(run) -> tuple[int | None, int | None]:
    """(k, d) at the run's target density: d from the recorder's whole-model numel, k from the
    k rule; without a recorder, train.parquet's k at the target density and d = k / density
    (the bounds depend on k/d only, which that recovers up to the rounding of k)."""
    density = run.manifest.get("density")
    if not density:
        return None, None
    st = getattr(run, "stats", None)
    if st is not None and not st.empty and "numel" in st:
        g = st[(st["layer"] == GLOBAL) & (st["kind"] == "u")]
        if len(g):
            d = int(g["numel"].iloc[0])
            return bounds.k_from_density(float(density), d), d
    tr = getattr(run, "train", None)
    if tr is not None and not tr.empty and {"k", "density"} <= set(tr.columns):
        at = tr[np.isclose(tr["density"].astype(float), float(density)) & (tr["k"] > 0)]
        if len(at):
            k = int(at["k"].iloc[-1])
            return k, max(k, int(round(k / float(density))))
    return None, None


def _fitted_delta(topk_runs: Sequence, max_snapshots: int = 4) -> float:
    """Median fitted value over (at most max_snapshots evenly spaced) snapshots of u of the
    Top-k runs, at their density."""
    values = []
    for run in topk_runs:
        keys = snapshots.snapshot_keys(run)
        if not keys:
            continue
        pick = np.unique(np.linspace(0, len(keys) - 1, min(max_snapshots, len(keys))).round())
        for j in pick.astype(int):
            step, rank = keys[j]
            t = snapshots.analyze_loaded(run, step, rank)
            units = fitted_value.snapshot_units(t.contraction, t.fits)
            units = units[np.isclose(units["density"], float(run.manifest.get("density")))]
            values += units["fitted_ratio"].tolist()
    return float(np.median(values)) if values else math.nan


# ------------------------------------------------------------------ points and the claim
@dataclass
class Seeded:
    """One point's per-seed values: delta_C and the two gaps, indexed by seed."""

    delta: dict
    final: dict
    steps: dict


def points(runs: Sequence, margin: float = criteria.ACCURACY_MARGIN_POINTS,
           perplexity_margin: float = criteria.PERPLEXITY_MARGIN_PCT
           ) -> tuple[pd.DataFrame, dict]:
    """(POINT_COLUMNS frame, {point index: Seeded}) of one model's convergence runs."""
    cells = seed_cells(list(runs), dense=True)
    dense = {}
    for (exp, _, _, method), seeds in cells.items():
        if method == "dense":
            for seed, sr in seeds.items():
                dense.setdefault((exp, seed), sr)
    sizes: dict = {}   # experiment -> d: one model size, so every method shares its k/d
    for (exp, *_), seeds in cells.items():
        for sr in seeds.values():
            _, d = _kd(sr.run)
            recorded = getattr(sr.run, "stats", None) is not None and len(sr.run.stats) > 0
            if d and (exp not in sizes or (recorded and not sizes[exp][1])):
                sizes[exp] = (d, recorded)
    out, seeded = [], {}
    for (exp, density, cond, method), seeds in sorted(
            cells.items(), key=lambda kv: str((kv[0][0], kv[0][1], kv[0][2].training_key(),
                                               kv[0][3]))):
        if method == "dense" or density is None:
            continue
        topk = cells.get((exp, density, topk_condition(cond), "topk"), {})
        per = Seeded({}, {}, {})
        sources, name = set(), None
        d = sizes.get(exp, (None, False))[0]
        k = bounds.k_from_density(float(density), d) if d else None
        for seed, sr in seeds.items():
            ref = dense.get((exp, seed))
            if ref is None or ref.name is None:
                continue
            name = ref.name
            ref_topk = topk.get(seed)
            delta, source = measured_delta(sr.run, method, ref_topk.run if ref_topk else None)
            sources.add(source)
            value, _ = seed_value(sr, name)
            diff = criteria.paired_difference(name, ref.metric, value)
            per.delta[seed] = delta
            per.final[seed] = -diff if criteria.higher_is_better(name) else diff
            marg = perplexity_margin if name == "perplexity" else margin
            ref_curve, mine = evaluated(ref.run), evaluated(sr.run)
            base = steps_to_target(ref_curve[0], name, ref.metric, marg) if ref_curve else None
            own = steps_to_target(mine[0], name, ref.metric, marg) if mine else None
            per.steps[seed] = (math.inf if own is None else own / base - 1.0) if base else math.nan
        if not per.final:
            continue
        row = {"experiment": exp, "density": float(density), "condition": cond.training_key(),
               "method": method, "source": "; ".join(sorted(sources)),
               "n_seeds": len(per.final), "k": k, "d": d, "metric": name,
               "delta_measured": _mean(per.delta.values()),
               "delta_classic": bounds.classic_bound(k, d) if k else math.nan,
               "delta_paper": bounds.paper_bound(k, d) if k else math.nan,
               "delta_gaussian": bounds.gaussian_ratio(k, d) if k else math.nan,
               "delta_fitted": _fitted_delta([s.run for s in topk.values()]),
               "gap_final": _mean(per.final.values()),
               "gap_steps": float(np.median(list(per.steps.values())))}
        for c in CONTRACTIONS:
            row[f"term_{c}"] = float(compression_term(1.0 - row[f"delta_{c}"]))
        seeded[len(out)] = per
        out.append(row)
    return pd.DataFrame(out, columns=POINT_COLUMNS), seeded


def _mean(values) -> float:
    x = np.array(list(values), dtype=np.float64)
    x = x[~np.isnan(x)]
    return float(x.mean()) if x.size else math.nan


def spearman(term: np.ndarray, gap: np.ndarray) -> float:
    """Spearman's rho over the points where both are defined (infinite gaps rank last); NaN
    with fewer than MIN_POINTS of them or a constant side."""
    term, gap = np.asarray(term, float), np.asarray(gap, float)
    ok = np.isfinite(term) & ~np.isnan(gap)
    if ok.sum() < MIN_POINTS or np.unique(term[ok]).size < 2 or np.unique(gap[ok]).size < 2:
        return math.nan
    a, b = sps.rankdata(term[ok]), sps.rankdata(gap[ok])   # average ranks for ties
    a, b = a - a.mean(), b - b.mean()
    return float((a @ b) / math.sqrt((a @ a) * (b @ b)))


def ordering_p(term: np.ndarray, gap: np.ndarray, draws: int = 2000,
               seed: int = BOOT_SEED) -> float:
    """One-sided permutation p-value of Spearman's rho over the points: the share of
    orderings of the gaps against the terms with a rho at least the observed one (exact over
    every permutation up to 8 points, else `draws` seeded random ones, counted with the
    observed ordering as one of them, (1 + hits) / (1 + draws), so a sampled p is never 0).
    NaN where rho is."""
    import itertools

    term, gap = np.asarray(term, float), np.asarray(gap, float)
    ok = np.isfinite(term) & ~np.isnan(gap)
    rho = spearman(term, gap)
    if not math.isfinite(rho):
        return math.nan
    t, g = term[ok], gap[ok]
    if t.size <= 8:
        perms = (np.array(p) for p in itertools.permutations(range(t.size)))
        values = np.array([spearman(t, g[p]) for p in perms])
        return float(np.mean(values >= rho - 1e-12))
    rng = np.random.default_rng(seed)
    values = np.array([spearman(t, g[rng.permutation(t.size)]) for _ in range(draws)])
    return float((1 + np.count_nonzero(values >= rho - 1e-12)) / (1 + draws))


def correlations(frame: pd.DataFrame, seeded: dict, n_boot: int = N_BOOT,
                 seed: int = BOOT_SEED) -> pd.DataFrame:
    """Spearman rho of term against gap per (contraction, gap), with its 95% bootstrap
    interval over seeds and its permutation p-value over the points (`ordering_p`): columns
    contraction, gap, n_points, n_seeds, rho, ci_low, ci_high, p."""
    all_seeds = sorted({s for per in seeded.values() for s in per.final})
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(all_seeds), size=(n_boot, len(all_seeds))) if all_seeds else []
    rows = []
    for gap in GAPS:
        for c in CONTRACTIONS:
            term = frame[f"term_{c}"].to_numpy(float)
            rho = spearman(term, frame[f"gap_{gap}"].to_numpy(float))
            boot = []
            if math.isfinite(rho) and len(all_seeds) >= criteria.MIN_SEEDS:
                for draw in draws:
                    chosen = [all_seeds[i] for i in draw]
                    t, g = _resampled(frame, seeded, chosen, c, gap, term)
                    boot.append(spearman(t, g))
            boot = np.array([b for b in boot if math.isfinite(b)])
            low, high = (np.percentile(boot, [2.5, 97.5]) if boot.size else (math.nan, math.nan))
            rows.append({"contraction": c, "gap": gap, "n_points": int(len(frame)),
                         "n_seeds": len(all_seeds), "rho": rho, "ci_low": float(low),
                         "ci_high": float(high),
                         "p": ordering_p(term, frame[f"gap_{gap}"].to_numpy(float))})
    return pd.DataFrame(rows)


def _resampled(frame, seeded, chosen, contraction, gap, term):
    """term and gap of every point recomputed from the resampled seeds (a point without any of
    them: NaN); only the measured term depends on the seeds."""
    t, g = term.copy(), np.full(len(frame), np.nan)
    for i, per in seeded.items():
        values = getattr(per, gap)
        got = [values[s] for s in chosen if s in values]
        if not got:
            t[i] = np.nan
            continue
        g[i] = float(np.median(got)) if gap == "steps" else _mean(got)
        if contraction == "measured":
            t[i] = float(compression_term(1.0 - _mean(per.delta[s] for s in chosen
                                                      if s in per.delta)))
    return t, g
