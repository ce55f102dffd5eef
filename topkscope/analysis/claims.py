"""The paper's claims, per model, with the measured evidence and a verdict: `claims.csv`.

Input: loaded runs (`topkscope.analysis.runs.load`), i.e. objects with `.manifest` (dict),
`.eval`, `.stats`, `.snapshots` (DataFrames) and `.snapshot(step, rank)`. Output: one row per
(model, dataset, claim[, sparsifier]) with columns COLUMNS. Verdicts are holds | fails | mixed |
insufficient-data, decided by the rules below (the `rule` column repeats the one applied).

Claims 1-4 look at the whole-model error-compensated gradient u (stats rows kind "u", layer
"__global__"; raw snapshots where the statistic needs every value) of runs trained with the
sparsifiers in `sparsifiers` (default: exact Top-k, the paper's TopK-SGD). A *unit* is one
observation; a fraction rule counts the units that satisfy the claim's criterion:

    fraction >= 0.9 -> holds,  fraction <= 0.1 -> fails,  otherwise mixed,
    fewer than 3 units -> insufficient-data.

1. gaussian_like      unit: one recorded u (step, rank); criterion |skew| <= 0.5 and
                      |excess kurtosis| <= 1 (effect sizes: tests reject at any real n).
2. below_classic      unit: (step, rank, density); criterion delta_emp < 1 - k/d.
3. below_paper        unit: (step, rank, density); criterion delta_emp <= (1 - k/d)^2.
3b. convexity_condition  unit: one snapshot of u; criterion contraction.convexity holds
                      (gap <= tol + 30/d); evidence says how often the bound held where it failed.
4. gaussiank_count    unit: (step, rank, density); criterion 2/3 <= count/k <= 4/3 (the band
                      Gaussian-k's threshold correction aims for), per Gaussian-k variant.
5. gaussiank_accuracy unit: (experiment, density) with complete runs of both Top-k and the
                      Gaussian-k variant; final eval metric averaged over seeds (the evidence
                      also states the elements sent relative to Top-k). accuracy: holds if
                      GK >= TopK - 0.01, fails if GK < TopK - 0.03; perplexity: holds if
                      GK <= 1.03 TopK, fails if GK > 1.10 TopK; mixed in between. Overall: all
                      units hold -> holds, all fail -> fails, else mixed; no unit -> insufficient-data.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from topkscope import validate
from topkscope.analysis import contraction, fits, normality
from topkscope.io import atomic_write

COLUMNS = [
    "model", "dataset", "dataset_substitute", "claim", "sparsifier", "statement", "n_runs",
    "n_units", "fraction", "evidence", "verdict", "rule",
]  # fmt: skip
VERDICTS = ("holds", "fails", "mixed", "insufficient-data")

HOLDS_FRACTION = 0.9
FAILS_FRACTION = 0.1
MIN_UNITS = 3
MAX_ABS_SKEW = 0.5
MAX_ABS_EXCESS_KURTOSIS = 1.0
COUNT_BAND = (2.0 / 3.0, 4.0 / 3.0)
ACCURACY_HOLDS_DROP = 0.01
ACCURACY_FAILS_DROP = 0.03
PERPLEXITY_HOLDS_RATIO = 1.03
PERPLEXITY_FAILS_RATIO = 1.10
GAUSSIANK_VARIANTS = ("gaussiank-2019", "gaussiank")
GLOBAL = "__global__"

_FRACTION_RULE = (
    f"holds if >= {HOLDS_FRACTION:.0%} of units satisfy the criterion, fails if <= "
    f"{FAILS_FRACTION:.0%}, else mixed; insufficient-data with fewer than {MIN_UNITS} units"
)
STATEMENTS = {
    "gaussian_like": "u is bell-shaped / Gaussian-like during training",
    "below_classic": "delta_emp = ||u - TopK(u)||^2/||u||^2 is below 1 - k/d",
    "below_paper": "delta_emp is below the paper's bound (1 - k/d)^2",
    "convexity_condition": "the sorted squared magnitudes of u are convex, decreasing to 0",
    "gaussiank_count": "Gaussian-k selects about k elements",
    "gaussiank_accuracy": "Gaussian-k trains as well as exact Top-k",
}
RULES = {
    "gaussian_like": f"unit = one recorded u (step, rank); criterion |skew| <= {MAX_ABS_SKEW} "
    f"and |excess kurtosis| <= {MAX_ABS_EXCESS_KURTOSIS}; {_FRACTION_RULE}",
    "below_classic": f"unit = (step, rank, density); criterion delta_emp < 1 - k/d; {_FRACTION_RULE}",
    "below_paper": f"unit = (step, rank, density); criterion delta_emp <= (1 - k/d)^2; "
    f"{_FRACTION_RULE}",
    "convexity_condition": "unit = one snapshot of u; criterion convexity_gap <= tol + 30/d "
    f"(tol = {contraction.DEFAULT_TOL}); {_FRACTION_RULE}",
    "gaussiank_count": f"unit = (step, rank, density); criterion {COUNT_BAND[0]:.3f} <= count/k "
    f"<= {COUNT_BAND[1]:.3f}; {_FRACTION_RULE}",
    "gaussiank_accuracy": "unit = (experiment, density) with complete Top-k and Gaussian-k runs, "
    f"final eval metric averaged over seeds; accuracy: holds if GK >= TopK - "
    f"{ACCURACY_HOLDS_DROP}, fails if GK < TopK - {ACCURACY_FAILS_DROP}; perplexity: holds if "
    f"GK <= {PERPLEXITY_HOLDS_RATIO} TopK, fails if GK > {PERPLEXITY_FAILS_RATIO} TopK; else "
    "mixed. All units hold -> holds, all fail -> fails, else mixed; none -> insufficient-data",
}


def build(
    runs: Iterable,
    sparsifiers: Sequence[str] = ("topk",),
    max_snapshots: int = 8,
    max_n: int = normality.DEFAULT_MAX_N,
) -> pd.DataFrame:
    """The claims table (COLUMNS) for every (model, dataset, substitute) among `runs`.

    sparsifiers: training sparsifiers whose runs feed claims 1-4. max_snapshots: at most this
    many snapshots per model (evenly spaced in step) get the full normality / fit / curve
    analysis; max_n: the subsample size for their sort-based statistics.
    """
    runs = list(runs)
    sparsifiers = (sparsifiers,) if isinstance(sparsifiers, str) else tuple(sparsifiers)
    validate.integer("max_snapshots", max_snapshots, 0, whole_floats=True)
    groups: dict[tuple, list] = {}
    for run in runs:
        groups.setdefault(model_key(run.manifest), []).append(run)
    rows: list[dict] = []
    for key in sorted(groups, key=lambda k: tuple("" if v is None else str(v) for v in k)):
        model_runs = groups[key]
        trained = [r for r in model_runs if r.manifest.get("sparsifier") in sparsifiers]
        snaps = _snapshot_analyses(trained, int(max_snapshots), max_n)
        u = _u_rows(trained)
        base = {"model": key[0], "dataset": key[1], "dataset_substitute": key[2]}
        per_claim = {
            "gaussian_like": _gaussian_like(u, snaps),
            "below_classic": _below(u, "below_classic"),
            "below_paper": _below(u, "below_paper"),
            "convexity_condition": _convexity(snaps),
        }
        for claim, found in per_claim.items():
            rows.append({**base, "claim": claim, "sparsifier": ",".join(sparsifiers),
                         "n_runs": len(trained), **found})  # fmt: skip
        for variant in GAUSSIANK_VARIANTS:
            row = _gaussiank_count(u, variant)
            if row is not None:
                rows.append({**base, "claim": "gaussiank_count", "sparsifier": variant,
                             "n_runs": len(trained), **row})  # fmt: skip
        for variant in GAUSSIANK_VARIANTS:
            row = _gaussiank_accuracy(model_runs, variant)
            if row is not None:
                rows.append({**base, "claim": "gaussiank_accuracy", "sparsifier": variant, **row})
    table = pd.DataFrame(rows, columns=COLUMNS)
    table["statement"] = table["claim"].map(STATEMENTS)
    table["rule"] = table["claim"].map(RULES)
    return table


def write(runs: Iterable, path: str | Path, **options) -> pd.DataFrame:
    """build(runs, **options), written atomically as CSV to path; returns the table."""
    table = build(runs, **options)
    atomic_write(path, lambda tmp: table.to_csv(tmp, index=False))
    return table


def model_key(manifest: dict) -> tuple:
    """(model, dataset, dataset_substitute) from a manifest; missing entries become None."""
    return manifest.get("model"), manifest.get("dataset"), manifest.get("dataset_substitute")


def fraction_verdict(n_pass: int, n_units: int) -> str:
    """The fraction rule: >= 90% holds, <= 10% fails, else mixed; < 3 units insufficient-data."""
    if n_units < MIN_UNITS:
        return "insufficient-data"
    frac = n_pass / n_units
    if frac >= HOLDS_FRACTION:
        return "holds"
    if frac <= FAILS_FRACTION:
        return "fails"
    return "mixed"


def metric_verdict(metric_name: str, topk: float, gaussiank: float) -> str:
    """holds | fails | mixed for one final-metric comparison (rule of claim 5)."""
    if metric_name == "perplexity":
        ratio = gaussiank / topk
        if ratio <= PERPLEXITY_HOLDS_RATIO:
            return "holds"
        return "fails" if ratio > PERPLEXITY_FAILS_RATIO else "mixed"
    scale = 100.0 if max(topk, gaussiank) > 1.0 else 1.0  # accuracy given in percent
    drop = (topk - gaussiank) / scale
    if drop <= ACCURACY_HOLDS_DROP:
        return "holds"
    return "fails" if drop > ACCURACY_FAILS_DROP else "mixed"


# --- claims 1-4 ----------------------------------------------------------------------------


def _floats(column: pd.Series) -> np.ndarray:
    """A column as float64, nullable NA (e.g. Int64 counts with gaps) as NaN."""
    return column.astype("float64").to_numpy()


def _u_rows(runs: list) -> pd.DataFrame:
    frames = []
    for i, run in enumerate(runs):
        st = run.stats
        if st is None or st.empty or "kind" not in st or "layer" not in st:
            continue
        rows = st[(st["kind"] == "u") & (st["layer"] == GLOBAL)]
        if not rows.empty:
            frames.append(rows.assign(_run=i))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _fraction_row(passed: np.ndarray, evidence: str) -> dict:
    n, k = int(passed.size), int(np.count_nonzero(passed))
    return {"n_units": n, "fraction": k / n if n else math.nan,
            "evidence": f"{k} of {n} units; {evidence}" if n else evidence,
            "verdict": fraction_verdict(k, n)}  # fmt: skip


def _gaussian_like(u: pd.DataFrame, snaps: list[dict]) -> dict:
    units = pd.DataFrame(columns=["_run", "step", "rank", "skew", "excess_kurtosis"])
    if not u.empty and {"skew", "excess_kurtosis"} <= set(u.columns):
        units = u.drop_duplicates(["_run", "step", "rank"])[list(units.columns)]
    seen = set(zip(units["_run"], units["step"], units["rank"]))
    extra = [s for s in snaps if (s["_run"], s["step"], s["rank"]) not in seen]
    if extra:
        units = pd.concat([units, pd.DataFrame([
            {c: s[c] for c in ("_run", "step", "rank")}
            | {"skew": s["battery"]["skew"], "excess_kurtosis": s["battery"]["excess_kurtosis"]}
            for s in extra
        ])], ignore_index=True)  # fmt: skip
    skew, kurt = _floats(units["skew"]), _floats(units["excess_kurtosis"])
    defined = np.isfinite(skew) & np.isfinite(kurt)
    passed = (np.abs(skew[defined]) <= MAX_ABS_SKEW) & (np.abs(kurt[defined]) <= MAX_ABS_EXCESS_KURTOSIS)
    parts = []
    if defined.any():
        parts.append(f"median skew {np.median(skew[defined]):.3g}, median excess kurtosis "
                     f"{np.median(kurt[defined]):.3g}")  # fmt: skip
    if (~defined).any():
        parts.append(f"{int((~defined).sum())} constant/empty vectors skipped")
    if snaps:
        ks = [s["battery"]["ks_D"] for s in snaps]
        qq = [s["battery"]["qq_r"] for s in snaps]
        best = pd.Series([s["best_family"] for s in snaps]).value_counts()
        parts.append(f"snapshots: median KS D {np.nanmedian(ks):.3g}, median Q-Q r "
                     f"{np.nanmedian(qq):.4g}, best fit by BIC "
                     + ", ".join(f"{fam} {cnt}/{len(snaps)}" for fam, cnt in best.items()))
    if units.empty:
        parts.append("no recorded u (stats kind u, layer __global__) and no snapshots")
    return _fraction_row(passed, "; ".join(parts))


def _below(u: pd.DataFrame, claim: str) -> dict:
    if u.empty or "topk_ratio" not in u:
        return _fraction_row(np.zeros(0, bool), "no recorded topk_ratio for u")
    ratio = _floats(u["topk_ratio"])
    rho = _floats(u["k"]) / _floats(u["numel"])
    ok = np.isfinite(ratio) & (rho > 0)
    ratio, rho, dens = ratio[ok], rho[ok], _floats(u["density"])[ok]
    if claim == "below_classic":
        bound = 1.0 - rho
        passed = contraction.is_below_classic(ratio, bound)
    else:
        bound = (1.0 - rho) ** 2
        passed = contraction.is_below_paper(ratio, bound)
    if not passed.size:
        return _fraction_row(passed, "no finite topk_ratio for u")
    per = []
    for density in np.unique(dens):
        sel = dens == density
        gain = np.median((1.0 - ratio[sel]) / rho[sel])
        per.append(f"density {density:g}: median delta {np.median(ratio[sel]):.4g} vs bound "
                   f"{np.median(bound[sel]):.4g}, Top-k keeps {gain:.3g}x the energy share k/d")
    return _fraction_row(passed, "; ".join(per))


def _convexity(snaps: list[dict]) -> dict:
    if not snaps:
        return _fraction_row(np.zeros(0, bool), "no snapshots of u (the curve needs every value)")
    held = np.array([s["convexity"]["condition_holds"] for s in snaps], dtype=bool)
    gaps = [s["convexity"]["convexity_gap"] for s in snaps]
    failed = [s for s in snaps if not s["convexity"]["condition_holds"]]
    checks = [bool(b) for s in failed for b in s["ratios"]["below_paper"]]
    evidence = f"median convexity gap {np.nanmedian(gaps):.3g}"
    if failed:
        evidence += (f"; where the condition failed the bound (1-k/d)^2 still held in "
                     f"{sum(checks)} of {len(checks)} (snapshot, density) checks")
    return _fraction_row(held, evidence)


def _gaussiank_count(u: pd.DataFrame, variant: str) -> dict | None:
    col = variant.replace("-", "_") + "_count"
    if u.empty or col not in u:
        return None
    ratio = _floats(u[col]) / _floats(u["k"])
    ratio = ratio[np.isfinite(ratio)]  # NaN / NA: the sparsifier was not evaluated there
    passed = (ratio >= COUNT_BAND[0]) & (ratio <= COUNT_BAND[1])
    if not ratio.size:
        return _fraction_row(passed, f"no finite {col}")
    lo, med, hi = np.percentile(ratio, [5, 50, 95])
    evidence = f"count/k median {med:.3g}, 5th-95th percentile {lo:.3g}-{hi:.3g}"
    return _fraction_row(passed, evidence)


def _snapshot_analyses(runs: list, max_snapshots: int, max_n: int) -> list[dict]:
    """normality.battery, fits.compare and contraction.analyze on evenly spaced snapshots."""
    listed = []
    for i, run in enumerate(runs):
        snaps = getattr(run, "snapshots", None)
        if snaps is None or snaps.empty:
            continue
        if "kind" in snaps.columns:
            snaps = snaps[snaps["kind"] == "u"]
        for step, rank in zip(snaps["step"], snaps["rank"]):
            listed.append((i, int(step), int(rank)))
    if not listed or max_snapshots == 0:
        return []
    listed.sort(key=lambda t: (t[1], t[0], t[2]))
    pick = np.unique(np.linspace(0, len(listed) - 1, min(max_snapshots, len(listed))).round())
    out = []
    for j in pick.astype(int):
        i, step, rank = listed[j]
        run = runs[i]
        u = np.asarray(run.snapshot(step, rank))
        report = contraction.analyze(u, _densities_at(run, step, rank))
        table = fits.compare(u, seed=step)
        out.append({
            "_run": i, "step": step, "rank": rank,
            "battery": normality.battery(u, max_n=max_n, seed=step),
            "best_family": fits.best(table, "x") if not table.empty else "none",
            "ratios": report.ratios, "convexity": report.convexity,
        })  # fmt: skip
    return out


def _densities_at(run, step: int, rank: int) -> list[float]:
    st = run.stats
    if st is not None and not st.empty and {"step", "rank", "density"} <= set(st.columns):
        rows = st[(st["step"] == step) & (st["rank"] == rank)]
        dens = sorted({float(v) for v in rows["density"] if 0.0 < float(v) <= 1.0})
        if dens:
            return dens
    rho = run.manifest.get("density")
    return [float(rho)] if rho is not None and 0.0 < float(rho) <= 1.0 else [0.001]


# --- claim 5 -------------------------------------------------------------------------------


def final_metric(run) -> tuple[float, str] | None:
    """(metric, metric_name) at the last evaluated step: split test, else valid/val, else any."""
    ev = run.eval
    if ev is None or ev.empty or "metric" not in ev:
        return None
    for split in ("test", "valid", "val", None):
        rows = ev if split is None else ev[ev["split"] == split]
        rows = rows[np.isfinite(_floats(rows["metric"]))]
        if not rows.empty:
            last = rows[rows["step"] == rows["step"].max()].iloc[-1]
            return float(last["metric"]), str(last.get("metric_name", "accuracy"))
    return None


def _finite_mean(values) -> float:
    vals = np.asarray(values, dtype=np.float64)
    vals = vals[np.isfinite(vals)]
    return float(vals.mean()) if vals.size else math.nan


def _mean_selected(run) -> float:
    """Mean elements sent per worker and step (train table's `selected`), NaN if unknown."""
    tr = getattr(run, "train", None)
    if tr is None or tr.empty or "selected" not in tr:
        return math.nan
    return _finite_mean(_floats(tr["selected"]))


def _gaussiank_accuracy(runs: list, variant: str) -> dict | None:
    complete = [r for r in runs if r.manifest.get("status") == "complete"]
    cells: dict[tuple, dict[str, list]] = {}
    sent: dict[tuple, dict[str, list]] = {}  # mean elements sent per worker and step
    for run in complete:
        sp = run.manifest.get("sparsifier")
        if sp not in ("topk", variant):
            continue
        final = final_metric(run)
        if final is None:
            continue
        key = (run.manifest.get("experiment"), run.manifest.get("density"))
        cells.setdefault(key, {}).setdefault(sp, []).append(final)
        sent.setdefault(key, {}).setdefault(sp, []).append(_mean_selected(run))
    if not any(variant in c for c in cells.values()):
        return None  # no run of this variant for the model: no row
    units, parts = [], []
    n_runs = 0
    for (experiment, density), by_sp in sorted(cells.items(), key=lambda kv: str(kv[0])):
        if "topk" not in by_sp or variant not in by_sp:
            continue
        name = by_sp["topk"][0][1]
        topk = float(np.mean([m for m, _ in by_sp["topk"]]))
        gk = float(np.mean([m for m, _ in by_sp[variant]]))
        n_runs += len(by_sp["topk"]) + len(by_sp[variant])
        state = metric_verdict(name, topk, gk)
        units.append(state)
        # an approximate selector that sends more than k buys its accuracy with bandwidth: say so
        volume = _finite_mean(sent[(experiment, density)][variant]) / _finite_mean(
            sent[(experiment, density)]["topk"])
        parts.append(f"{experiment} density {density}: {name} Top-k {topk:.4g} "
                     f"({len(by_sp['topk'])} runs) vs {variant} {gk:.4g} "
                     f"({len(by_sp[variant])} runs) -> {state}"
                     + (f", sending {volume:.3g}x Top-k's elements" if math.isfinite(volume)
                        else ""))  # fmt: skip
    if not units:
        verdict = "insufficient-data"
        parts.append(f"no experiment has complete runs of both topk and {variant}")
    elif all(s == "holds" for s in units):
        verdict = "holds"
    elif all(s == "fails" for s in units):
        verdict = "fails"
    else:
        verdict = "mixed"
    held = sum(s == "holds" for s in units)
    return {"n_runs": n_runs, "n_units": len(units),
            "fraction": held / len(units) if units else math.nan,
            "evidence": "; ".join(parts), "verdict": verdict}  # fmt: skip
