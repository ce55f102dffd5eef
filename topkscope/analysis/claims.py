"""The paper's claims, per model, with the measured evidence and a verdict: `claims.csv`.

Input: loaded runs (`topkscope.analysis.runs.load`), i.e. objects with `.manifest` (dict),
`.eval`, `.stats`, `.snapshots` (DataFrames) and `.snapshot(step, rank)`. Output: one row per
(model, dataset, claim[, sparsifier, condition]) with columns COLUMNS. Verdicts are holds |
fails | mixed | inconclusive | insufficient-data, decided by the rules below (the `rule`
column repeats the one applied).

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
5. <family>_accuracy (gaussiank_accuracy, randk_accuracy, redsync_accuracy, ...), one row per
                      (experiment, density, condition, approximate sparsifier). A unit is a seed
                      with complete runs of both the method and Top-k under the same condition
                      (density warm-up); the paired difference method - Top-k of the final eval
                      metric (accuracy in points; perplexity in % of Top-k's) gives a mean and a
                      95% Student-t interval (ci_low, ci_high). Accuracy: holds if the whole
                      interval is above -1 point, fails if it is all below, inconclusive if it
                      straddles; perplexity: the same against +3%. Fewer than 3 seeds:
                      insufficient-data.
6. <family>_traffic   "reaches Top-k's accuracy while sending at most 4/3 of Top-k's elements":
                      traffic_ratio = elements sent over the whole run (sum of train `selected`)
                      relative to Top-k's, mean over seeds (spread in the evidence). holds if
                      claim 5 holds and every seed's ratio <= 4/3; fails if claim 5 fails or
                      every seed's ratio > 4/3; inconclusive otherwise; < 3 seeds: insufficient-data.

`condition` names the density warm-up ("warmup=paper", "warmup=none", ...), a non-default
k rule and every named deviation of the run (e.g. "empty_fallback=topk"), so a row never
hides what it measured; in an experiment run at several densities (a density sensitivity)
claims 5 and 6 also name the density ("warmup=none; rho=0.005").
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from topkscope import validate
from topkscope.analysis import contraction, fits, snapshots
from topkscope.io import atomic_write
from topkscope.manifest import condition_of  # noqa: F401  (part of this module's API)
from topkscope.schema import GLOBAL

COLUMNS = [
    "model", "dataset", "dataset_substitute", "claim", "sparsifier", "statement", "n_runs",
    "n_units", "fraction", "evidence", "verdict", "rule",
    "condition", "n_seeds", "ci_low", "ci_high", "traffic_ratio",
]  # fmt: skip
VERDICTS = ("holds", "fails", "mixed", "inconclusive", "insufficient-data")

HOLDS_FRACTION = 0.9
FAILS_FRACTION = 0.1
MIN_UNITS = 3
MAX_ABS_SKEW = 0.5
MAX_ABS_EXCESS_KURTOSIS = 1.0
COUNT_BAND = (2.0 / 3.0, 4.0 / 3.0)
MIN_SEEDS = 3
ACCURACY_LIMIT_POINTS = 1.0   # accuracy: the interval of (method - Top-k) against -1 point
PERPLEXITY_LIMIT_PCT = 3.0    # perplexity: against +3% of Top-k's
TRAFFIC_LIMIT = 4.0 / 3.0     # the band Gaussian-k's threshold correction aims for
GAUSSIANK_VARIANTS = ("gaussiank-2019", "gaussiank")

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
}
ACCURACY_STATEMENT = "{method} trains as well as exact Top-k"
TRAFFIC_STATEMENT = "{method} reaches Top-k's accuracy while sending at most 4/3 of Top-k's elements"
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
}
ACCURACY_RULE = (
    "unit = one seed with complete runs of the method and Top-k under the same condition; "
    "paired difference of the final eval metric (accuracy in points, perplexity in % of "
    f"Top-k's), mean and 95% t-interval; accuracy: holds if the interval is above "
    f"-{ACCURACY_LIMIT_POINTS:g} point, fails if below, inconclusive if it straddles; "
    f"perplexity: the same against +{PERPLEXITY_LIMIT_PCT:g}%; fewer than {MIN_SEEDS} seeds: "
    "insufficient-data"
)
TRAFFIC_RULE = (
    "traffic_ratio = elements sent over the run relative to Top-k's (same seed), mean over "
    "seeds; holds if the accuracy claim holds and every seed's ratio <= 4/3; fails if the "
    "accuracy claim fails or every seed's ratio > 4/3; else inconclusive; fewer than "
    f"{MIN_SEEDS} seeds: insufficient-data"
)


def build(
    runs: Iterable,
    sparsifiers: Sequence[str] = ("topk",),
    max_snapshots: int = 8,
    max_n: int | None = None,
) -> pd.DataFrame:
    """The claims table (COLUMNS) for every (model, dataset, substitute) among `runs`.

    sparsifiers: training sparsifiers whose runs feed claims 1-4. max_snapshots: at most this
    many snapshots per model (evenly spaced in step) get the full normality / fit / curve
    analysis (topkscope.analysis.snapshots.analyze_loaded, seed SEED, each snapshot analysed
    once per loaded run); max_n: the subsample size for their sort-based statistics (None:
    each statistic's own default).
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
        for row in _accuracy_rows(model_runs):
            traffic = row["claim"].endswith("_traffic")
            statement = TRAFFIC_STATEMENT if traffic else ACCURACY_STATEMENT
            rows.append({**base, **row, "statement": statement.format(method=row["sparsifier"]),
                         "rule": TRAFFIC_RULE if traffic else ACCURACY_RULE})
    for row in rows:
        if row["claim"] in STATEMENTS:
            row.update(statement=STATEMENTS[row["claim"]], rule=RULES[row["claim"]])
    return pd.DataFrame(rows, columns=COLUMNS)


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


def _snapshot_analyses(runs: list, max_snapshots: int, max_n: int | None) -> list[dict]:
    """The snapshot pipeline (analysis.snapshots.analyze_loaded: battery, fits, contraction at
    the recorder's densities, seed SEED) on evenly spaced snapshots of u of the runs."""
    listed = [(i, step, rank) for i, run in enumerate(runs)
              for step, rank in snapshots.snapshot_keys(run)]
    if not listed or max_snapshots == 0:
        return []
    listed.sort(key=lambda t: (t[1], t[0], t[2]))
    pick = np.unique(np.linspace(0, len(listed) - 1, min(max_snapshots, len(listed))).round())
    out = []
    for j in pick.astype(int):
        i, step, rank = listed[j]
        tables = snapshots.analyze_loaded(runs[i], step, rank, max_n=max_n)
        battery = tables.normality.iloc[0].to_dict()
        out.append({
            "_run": i, "step": step, "rank": rank, "battery": battery,
            "best_family": fits.best(tables.fits, "x") if not tables.fits.empty else "none",
            "ratios": tables.contraction, "convexity": tables.convexity,
        })  # fmt: skip
    return out


# --- claims 5 and 6 helpers ------------------------------------------------------------


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



# --- claims 5 and 6: accuracy and traffic, per (method, condition), paired over seeds -------


def claim_family(sparsifier: str) -> str:
    """gaussiank-2019 -> gaussiank, redsync-2019 -> redsync: the family a claim is named after."""
    return str(sparsifier).split("-")[0]


def paired_interval(diffs: Sequence[float]) -> tuple[float, float, float]:
    """(mean, low, high): the two-sided 95% Student-t interval of the mean paired difference."""
    from scipy import stats

    x = np.asarray(diffs, dtype=np.float64)
    mean = float(x.mean())
    if x.size < 2:
        return mean, math.nan, math.nan
    half = float(stats.t.ppf(0.975, x.size - 1)) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return mean, mean - half, mean + half


def interval_verdict(low: float, high: float, n_seeds: int, threshold: float,
                     higher_is_better: bool = True) -> str:
    """holds / fails / inconclusive from a 95% interval against a threshold; < 3 seeds:
    insufficient-data. higher_is_better: holds when the whole interval is above it."""
    if n_seeds < MIN_SEEDS or not (math.isfinite(low) and math.isfinite(high)):
        return "insufficient-data"
    above, below = low > threshold, high < threshold
    if higher_is_better:
        return "holds" if above else "fails" if below else "inconclusive"
    return "holds" if below else "fails" if above else "inconclusive"


def paired_difference(metric_name: str, topk: float, method: float) -> float:
    """Accuracy: method - Top-k in points (percent); perplexity: method / Top-k - 1 in %."""
    if metric_name == "perplexity":
        return 100.0 * (method / topk - 1.0)
    scale = 1.0 if max(topk, method) > 1.0 else 100.0  # fractions -> points
    return (method - topk) * scale


def _sent_total(run) -> float:
    """Elements sent per worker over the whole run (sum of train `selected`), NaN if unknown."""
    tr = getattr(run, "train", None)
    if tr is None or tr.empty or "selected" not in tr:
        return math.nan
    vals = _floats(tr["selected"])
    return float(vals[np.isfinite(vals)].sum()) if np.isfinite(vals).any() else math.nan


def _comparisons(runs: list) -> dict[tuple, dict]:
    """(experiment, density, condition, method) -> {seed: (metric, name, sent)} of complete runs;
    Top-k runs sit under method "topk" of their own condition."""
    cells: dict[tuple, dict] = {}
    for run in runs:
        m = run.manifest
        if m.get("status") != "complete" or m.get("sparsifier") == "dense":
            continue
        final = final_metric(run)
        if final is None:
            continue
        key = (m.get("experiment"), m.get("density"), condition_of(m), m.get("sparsifier"))
        cells.setdefault(key, {})[m.get("seed", 0)] = (*final, _sent_total(run))
    return cells


def _accuracy_rows(runs: list) -> list[dict]:
    cells = _comparisons(runs)
    densities: dict = {}
    for experiment, density, _, _ in cells:
        densities.setdefault(experiment, set()).add(density)
    rows = []
    for (experiment, density, condition, method), by_seed in sorted(
            cells.items(), key=lambda kv: tuple(str(v) for v in kv[0])):
        if method == "topk":
            continue
        # Top-k of the same condition without the method's own deviations: the warm-up part
        warmup = condition.split("; ")[0]
        topk = cells.get((experiment, density, warmup, "topk"), {})
        seeds = sorted(set(by_seed) & set(topk))
        named = (f"{condition}; rho={float(density):g}" if len(densities[experiment]) > 1
                 else condition)  # a density sensitivity: one row per density, named
        rows += _method_rows(experiment, density, named, method, by_seed, topk, seeds)
    return rows


def _method_rows(experiment, density, condition, method, mine, topk, seeds) -> list[dict]:
    family = claim_family(method)
    base = {"claim": f"{family}_accuracy", "sparsifier": method, "condition": condition,
            "n_runs": len(mine) + len(topk), "n_units": len(seeds), "n_seeds": len(seeds)}
    where = f"{experiment} density {density} ({condition})"
    if not seeds:
        evidence = f"{where}: no seed has complete runs of both topk and {method}"
        acc = {**base, "evidence": evidence, "verdict": "insufficient-data"}
        return [acc, {**acc, "claim": f"{family}_traffic"}]
    name = topk[seeds[0]][1]
    diffs = [paired_difference(name, topk[s][0], mine[s][0]) for s in seeds]
    mean, low, high = paired_interval(diffs)
    perplexity = name == "perplexity"
    unit = "%" if perplexity else " points"
    limit = PERPLEXITY_LIMIT_PCT if perplexity else -ACCURACY_LIMIT_POINTS
    verdict = interval_verdict(low, high, len(seeds), limit, higher_is_better=not perplexity)
    ratios = np.array([mine[s][2] / topk[s][2] for s in seeds], dtype=np.float64)
    traffic = float(np.mean(ratios)) if np.isfinite(ratios).all() else math.nan
    finals = (f"{name} Top-k {np.mean([topk[s][0] for s in seeds]):.4g} vs {method} "
              f"{np.mean([mine[s][0] for s in seeds]):.4g} (means over {len(seeds)} seeds)")
    ci = (f"paired difference {mean:+.3g}{unit}, 95% interval [{low:+.3g}, {high:+.3g}]{unit}"
          if math.isfinite(low) else f"paired difference {mean:+.3g}{unit}, no interval")
    sent = (f"elements sent {traffic:.3g}x Top-k's (seeds {ratios.min():.3g}-{ratios.max():.3g})"
            if math.isfinite(traffic) else "elements sent unknown")
    acc = {**base, "fraction": math.nan, "ci_low": low, "ci_high": high,
           "traffic_ratio": traffic, "evidence": f"{where}: {finals}; {ci}; {sent}",
           "verdict": verdict}
    if verdict == "insufficient-data" or not math.isfinite(traffic):
        tv = "insufficient-data"
    elif verdict == "fails" or bool((ratios > TRAFFIC_LIMIT).all()):
        tv = "fails"
    elif verdict == "holds" and bool((ratios <= TRAFFIC_LIMIT).all()):
        tv = "holds"
    else:
        tv = "inconclusive"
    return [acc, {**acc, "claim": f"{family}_traffic", "verdict": tv}]
