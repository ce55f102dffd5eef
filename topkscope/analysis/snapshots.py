"""The one snapshot-analysis pipeline: `topkscope analyze`, the figures and the claims use it.

`analyze_snapshot` measures one raw snapshot of u; `analyze_loaded` measures a snapshot of a
loaded run once and keeps the result on the run (Run.analyses), so the figures and the claims
of one `topkscope figures` share it; `analyze_run` gathers every snapshot of one rank of a run
into the frames the figures and notebooks draw (`SnapshotAnalysis`).

One rule for every snapshot statistic (`SEED`, `snapshot_densities`): subsamples are drawn with
seed 0, the same for every snapshot and every caller, and the contraction of a loaded run's
snapshot is measured at the densities the recorder measured at that step (else the
configured ones, else the run's density, else 0.001). `topkscope analyze` takes its densities and seed from the command line
(seed default 0).

For a whole-model vector u saved at (step, rank):

    normality    one row:    normality.battery(u, max_n, seed)              (keys: normality.KEYS)
    fits         one row per family: fits.compare(u, max_n, seed), its `rank` (1 = best BIC)
                 renamed `family_rank`
    contraction  one row per density rho, k = max(1, round(rho d)):
                 delta_emp = ||u - TopK(u)||^2 / ||u||^2 against 1 - k/d, (1 - k/d)^2 and the
                 Gaussian value 1 - rho - 2 t phi(t); the convexity gap of the sorted squared
                 magnitudes and whether (1 - k/d)^2 held (`below_paper`)
                 = contraction.analyze(u, densities, max_n=max_n, seed=seed).ratios

    curve        the sorted-magnitude curve (rank = order rank, fraction, magnitude, exact)
                 and its convexity dict (contraction.convexity), from the same report
    qq           normal Q-Q points: normality.qq(u, max_n, seed)
    tails        one row:    tails.across_coordinates(u)      (keys: tails.KEYS) the Hill index
                 at m = ceil(sqrt(n)) and the CSN power-law fit with its likelihood ratios
                 against lognormal and exponential tails, on every value (no subsample, so
                 no seed or max_n columns)

Every row of the three tables starts with step, rank and ends with the seed and the max_n the
statistic used (each module's own default when max_n is None), so a table says how it was
computed. `merge` replaces the rows of re-analyzed snapshots in an existing table.

For any saved vector (u, g or e; `analyze_delta`, keys step, rank, layer, kind; layer is
GLOBAL: a snapshot is the whole model):

    delta_curve     one row per density of delta_curve.grid() and family: the measured
                    delta(k) (whole vector, never subsampled) and each fitted family's
                    prediction = delta_curve.compare(u, fits_table=the fits above).curve
    delta_families  one row per family: its fit, its errors over the grid, `best`
                    (both with the seed and max_n of the fits)
    sidco_thresholds  u only, at the densities: fitted_thresholds.sidco_thresholds
    sent_range      u only, at the densities: sent_range.sent_range (Top-k and chunk-wise
                    Top-k; the range the quantizer holds, one group: the whole vector)

`analyze_delta_loaded` keeps them on a loaded run like `analyze_loaded`; `delta_run` gathers a
rank's; `atlas` picks one snapshot per model and vector across runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from topkscope.analysis import contraction, delta_curve, fits, fitted_thresholds, normality, tails
from topkscope.analysis import sent_range as sent_values
from topkscope.schema import GLOBAL

KEY_COLUMNS = ["step", "rank"]
FAMILY_RANK = "family_rank"
PARAM_COLUMNS = ["seed", "max_n"]
NORMALITY_COLUMNS = [*KEY_COLUMNS, *normality.KEYS, *PARAM_COLUMNS]
# fits.compare's own `rank` (1 = lowest BIC) is renamed: here rank is the worker's rank
FITS_COLUMNS = [*KEY_COLUMNS, *(FAMILY_RANK if c == "rank" else c for c in fits.COLUMNS),
                *PARAM_COLUMNS]  # fmt: skip
CONTRACTION_COLUMNS = [*KEY_COLUMNS, *contraction.RATIO_COLUMNS, *PARAM_COLUMNS]
TAILS_COLUMNS = [*KEY_COLUMNS, *tails.KEYS]
SEED = 0  # the subsampling seed of every snapshot statistic, for every caller
DEFAULT_DENSITY = contraction.DEFAULT_DENSITY  # the contraction density of a run naming none
CURVE_COLUMNS = ["step", "rank", "fraction", "magnitude", "exact"]  # rank: order rank
QQ_COLUMNS = ["step", "p", "theoretical", "sample"]
CONVEXITY_KEYS = ["convexity_gap", "magnitude_convexity_gap", "condition_holds"]


def used_max_n(table: str, max_n: int | None) -> int:
    """The subsample size the rows of `table` (normality, fits, contraction, delta_curve,
    delta_families) record for the requested max_n: max_n itself, or for None the default of
    that table's statistic."""
    defaults = {"normality": normality.DEFAULT_MAX_N, "fits": fits.DEFAULT_MAX_N,
                "contraction": contraction.DEFAULT_MAX_N,
                # the delta rows record the subsample of the fits they predict from
                "delta_curve": fits.DEFAULT_MAX_N, "delta_families": fits.DEFAULT_MAX_N}
    if table not in defaults:
        raise ValueError(f"table = {table!r}; allowed: {', '.join(defaults)}")
    return defaults[table] if max_n is None else int(max_n)


@dataclass(frozen=True)
class SnapshotTables:
    """The rows measured on one snapshot; any of them may be empty when not asked for."""

    normality: pd.DataFrame  # NORMALITY_COLUMNS, one row
    fits: pd.DataFrame  # FITS_COLUMNS, one row per family (none for degenerate vectors)
    contraction: pd.DataFrame  # CONTRACTION_COLUMNS, one row per density
    curve: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=CURVE_COLUMNS))
    qq: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=QQ_COLUMNS))
    convexity: dict = field(default_factory=dict)  # contraction.convexity of the curve
    tails: pd.DataFrame = field(default_factory=lambda: _typed(None, TAILS_COLUMNS))  # one row


def analyze_snapshot(
    u,
    step: int,
    rank: int,
    densities: Sequence[float],
    *,
    max_n: int | None = None,
    seed: int = SEED,
    distribution: bool = True,
    with_fits: bool = True,
    with_qq: bool = False,
    with_tails: bool | None = None,
) -> SnapshotTables:
    """Normality battery, family fits and contraction at `densities` of the vector u.

    distribution=False skips the battery and the fits (only contraction rows are computed,
    e.g. for densities added after a snapshot was analyzed); with_fits=False skips only the
    fits; with_qq adds the normal Q-Q points; with_tails (default: as distribution) the tail
    row; an empty `densities` skips contraction (and the curve). ValueError for a bad density
    or max_n (the analysis modules' messages).
    """
    keys = {"step": int(step), "rank": int(rank)}
    norm_rows = fit_rows = contr_rows = None
    extra: dict = {}
    if distribution:
        n_max = used_max_n("normality", max_n)
        battery = normality.battery(u, max_n=n_max, seed=seed)
        norm_rows = pd.DataFrame([{**keys, **battery, "seed": seed, "max_n": n_max}])
        if with_fits:
            f_max = used_max_n("fits", max_n)
            table = fits.compare(u, max_n=f_max, seed=seed).rename(columns={"rank": FAMILY_RANK})
            fit_rows = _with_keys(table, keys, seed, f_max)
    if distribution if with_tails is None else with_tails:
        extra["tails"] = _typed(pd.DataFrame([{**keys, **tails.across_coordinates(u)}]),
                                TAILS_COLUMNS)
    if with_qq:
        q_max = used_max_n("normality", max_n)
        extra["qq"] = normality.qq(u, max_n=q_max, seed=seed).assign(step=int(step))
    if len(densities):
        c_max = used_max_n("contraction", max_n)
        report = contraction.analyze(u, list(densities), max_n=c_max, seed=seed)
        contr_rows = _with_keys(report.ratios, keys, seed, c_max)
        extra["curve"] = report.curve.assign(step=int(step))
        extra["convexity"] = report.convexity
    return SnapshotTables(
        normality=_typed(norm_rows, NORMALITY_COLUMNS),
        fits=_typed(fit_rows, FITS_COLUMNS),
        contraction=_typed(contr_rows, CONTRACTION_COLUMNS),
        **extra,
    )


# --- loaded runs: each snapshot analysed once, shared by the figures and the claims ----------


def snapshot_densities(run, step: int | None = None, rank: int = 0) -> list[float]:
    """The densities a run's snapshot (step, rank) is measured at, the first rule that gives
    any value in (0, 1]: the densities the recorder measured at that step and rank (the stats
    rows), the recorder's configured densities, the run's training density, DEFAULT_DENSITY.
    step None: the run-wide rules only (from the second on)."""
    st = getattr(run, "stats", None)
    if step is not None and st is not None and not st.empty and \
            {"step", "rank", "density"} <= set(st.columns):
        at = st[(st["step"] == step) & (st["rank"] == rank)]
        dens = sorted({float(v) for v in at["density"] if 0.0 < float(v) <= 1.0})
        if dens:
            return dens
    manifest = run.manifest
    # the recorder block: a `topkscope run` config's, else what a user's own recorder noted
    rec = (manifest.get("config") or {}).get("recorder") or manifest.get("recorder") or {}
    for listed in (rec.get("densities"), [manifest.get("density")]):
        dens = [float(d) for d in (listed or []) if d is not None and 0.0 < float(d) <= 1.0]
        if dens:
            return dens
    return [DEFAULT_DENSITY]


def snapshot_keys(run) -> list[tuple[int, int]]:
    """(step, rank) of every snapshot of u in a loaded run, sorted."""
    snaps = getattr(run, "snapshots", None)
    if snaps is None or len(snaps) == 0:
        return []
    if "kind" in snaps.columns:
        snaps = snaps[snaps["kind"] == "u"]
    return sorted({(int(s), int(r)) for s, r in zip(snaps["step"], snaps["rank"])})


def snapshot_steps(run, rank: int = 0) -> list[int]:
    """Steps with a snapshot of u from worker `rank`, ascending."""
    return [s for s, r in snapshot_keys(run) if r == rank]


def analyze_loaded(run, step: int, rank: int, *, max_n: int | None = None,
                   with_fits: bool = True) -> SnapshotTables:
    """analyze_snapshot of the run's snapshot (step, rank) at snapshot_densities, seed SEED,
    with the Q-Q points; measured once per loaded run and kept in run.analyses (a request
    without fits is answered by a kept analysis with them)."""
    memo = getattr(run, "analyses", None)
    if memo is None:  # a run-like object without the field: keep the memo on it all the same
        memo = {}
        run.analyses = memo
    for fitted in (True, False) if not with_fits else (True,):
        found = memo.get((int(step), int(rank), max_n, fitted))
        if found is not None:
            return found
    tables = analyze_snapshot(run.snapshot(step, rank), step, rank,
                              snapshot_densities(run, step, rank), max_n=max_n, seed=SEED,
                              with_fits=with_fits, with_qq=True)
    memo[(int(step), int(rank), max_n, with_fits)] = tables
    return tables


@dataclass
class SnapshotAnalysis:
    """Every snapshot of one rank of a run, analysed: the frames the figures draw."""

    curves: pd.DataFrame      # CURVE_COLUMNS
    convexity: pd.DataFrame   # step, convexity_gap, magnitude_convexity_gap, condition_holds
    ratios: pd.DataFrame      # step, rank, density, topk_ratio, bounds, below_classic, ...
    battery: pd.DataFrame     # step, statistic, value (tidy)
    qq: pd.DataFrame          # QQ_COLUMNS
    fits: pd.DataFrame        # step + fits.compare columns (rank = the family's BIC rank)
    tails: pd.DataFrame = field(default_factory=lambda: _typed(None, TAILS_COLUMNS))


def analyze_run(run, rank: int = 0, with_fits: bool = True,
                max_n: int | None = None) -> SnapshotAnalysis:
    """analyze_loaded on every snapshot of `rank` in the run, gathered into tidy frames."""
    curves, conv, ratios, battery, qq, fit_rows, tail_rows = [], [], [], [], [], [], []
    for step in snapshot_steps(run, rank):
        t = analyze_loaded(run, step, rank, max_n=max_n, with_fits=with_fits)
        curves.append(t.curve)
        conv.append({"step": step, **{k: t.convexity[k] for k in CONVEXITY_KEYS}})
        ratios.append(t.contraction)
        row = t.normality.iloc[0]
        battery += [{"step": step, "statistic": k, "value": float(row[k])}
                    for k in normality.KEYS if k != "note"]
        qq.append(t.qq)
        tail_rows.append(t.tails)
        if with_fits:
            fit_rows.append(t.fits.drop(columns=["rank", *PARAM_COLUMNS])
                            .rename(columns={FAMILY_RANK: "rank"}))
    return SnapshotAnalysis(
        curves=_concat(curves, CURVE_COLUMNS),
        convexity=pd.DataFrame(conv, columns=["step", *CONVEXITY_KEYS]),
        ratios=_concat(ratios, CONTRACTION_COLUMNS),
        battery=pd.DataFrame(battery, columns=["step", "statistic", "value"]),
        qq=_concat(qq, QQ_COLUMNS),
        fits=_concat(fit_rows, ["step"]),
        tails=_concat(tail_rows, TAILS_COLUMNS),
    )


# --- delta(k) over the grid, SIDCo's thresholds and the sent values' range ------------------

VECTOR_KEYS = ["step", "rank", "layer", "kind"]
DELTA_CURVE_COLUMNS = [*VECTOR_KEYS, *delta_curve.CURVE_COLUMNS, *PARAM_COLUMNS]
DELTA_FAMILY_COLUMNS = [*VECTOR_KEYS, *delta_curve.FAMILY_COLUMNS, *PARAM_COLUMNS]
SIDCO_COLUMNS = [*VECTOR_KEYS, *fitted_thresholds.COLUMNS]
SENT_RANGE_COLUMNS = [*VECTOR_KEYS, *sent_values.COLUMNS]
DELTA_TABLES = ("delta_curve", "delta_families", "sidco_thresholds", "sent_range")
SELECTED_KIND = "u"  # the vector Top-k selects from: SIDCo's thresholds and the sent values


@dataclass(frozen=True)
class DeltaTables:
    """The rows `analyze_delta` measured on one saved vector (or `delta_run` on many)."""

    delta_curve: pd.DataFrame       # DELTA_CURVE_COLUMNS
    delta_families: pd.DataFrame    # DELTA_FAMILY_COLUMNS
    sidco_thresholds: pd.DataFrame  # SIDCO_COLUMNS (kind u only)
    sent_range: pd.DataFrame        # SENT_RANGE_COLUMNS (kind u only)


def analyze_delta(u, step: int, rank: int, kind: str = "u", densities: Sequence[float] = (),
                  *, fits_table: pd.DataFrame | None = None, max_n: int | None = None,
                  seed: int = SEED, layer: str = GLOBAL) -> DeltaTables:
    """delta(k) of the vector against the families (delta_curve.compare; fits_table: its
    fits.compare rows when already measured with this max_n and seed) and, at `densities`
    (none: skipped), SIDCo's thresholds and the range of the sent values. One sort of |u|
    serves the curve, the power-law tail and the thresholds."""
    mags, _ = delta_curve.ascending_magnitudes(u)
    f_max = used_max_n("fits", max_n)
    result = delta_curve.compare(u, fits_table=fits_table, max_n=f_max, seed=seed, mags=mags)
    keys = {"step": int(step), "rank": int(rank), "layer": str(layer), "kind": str(kind)}
    params = {"seed": int(seed), "max_n": f_max}
    sidco = sent = None
    if len(densities):
        sidco = fitted_thresholds.sidco_thresholds(u, list(densities), mags=mags)
        sent = sent_values.sent_range(u, list(densities))
    return DeltaTables(
        delta_curve=_keyed(result.curve, keys, params, DELTA_CURVE_COLUMNS),
        delta_families=_keyed(result.families, keys, params, DELTA_FAMILY_COLUMNS),
        sidco_thresholds=_keyed(sidco, keys, None, SIDCO_COLUMNS),
        sent_range=_keyed(sent, keys, None, SENT_RANGE_COLUMNS),
    )


def _keyed(frame: pd.DataFrame | None, keys: dict, params: dict | None,
           columns: list[str]) -> pd.DataFrame:
    """frame with the key (and parameter) columns, in `columns` order; empty when None."""
    if frame is None:
        frame = pd.DataFrame(columns=[c for c in columns if c not in keys
                                      and c not in (params or {})])
    frame = frame.assign(**keys, **(params or {}))
    for name in (*KEY_COLUMNS, *(params or {})):
        frame[name] = frame[name].astype(np.int64)
    return frame[columns].reset_index(drop=True)


def analyze_delta_loaded(run, step: int, rank: int = 0, kind: str = "u", *,
                         tails: bool = True) -> DeltaTables:
    """analyze_delta of the run's saved vector (step, rank, kind), seed SEED, the default
    max_n; with tails, SIDCo's thresholds and the sent range for u at snapshot_densities
    (without: those two tables empty). Kept in run.analyses (a request without tails is
    answered by a kept analysis with them); the fits of u come from a kept analyze_loaded
    when there is one."""
    memo = getattr(run, "analyses", None)
    if memo is None:
        memo = {}
        run.analyses = memo
    base = ("delta", int(step), int(rank), str(kind))
    for with_tails in (True, False) if not tails else (True,):
        if (*base, with_tails) in memo:
            return memo[(*base, with_tails)]
    kept = memo.get((int(step), int(rank), None, True)) if kind == SELECTED_KIND else None
    densities = snapshot_densities(run, step, rank) if tails and kind == SELECTED_KIND else []
    found = analyze_delta(run.snapshot(step, rank, kind), step, rank, kind, densities,
                          fits_table=None if kept is None else kept.fits, seed=SEED)
    memo[(*base, tails)] = found
    return found


def saved_vectors(run, rank: int | None = None) -> list[tuple[int, int, str]]:
    """(step, rank, kind) of every saved vector of a loaded run (of `rank` when given), sorted."""
    snaps = getattr(run, "snapshots", None)
    if snaps is None or len(snaps) == 0:
        return []
    kinds = snaps["kind"] if "kind" in snaps.columns else pd.Series("u", index=snaps.index)
    found = {(int(s), int(r), str(k)) for s, r, k in zip(snaps["step"], snaps["rank"], kinds)}
    return sorted(v for v in found if rank is None or v[1] == rank)


def delta_run(run, rank: int = 0, kinds: Sequence[str] | None = None, *,
              tails: bool = True) -> DeltaTables:
    """analyze_delta_loaded on every saved vector of `rank` (of `kinds`, default all)."""
    parts = [analyze_delta_loaded(run, step, r, kind, tails=tails)
             for step, r, kind in saved_vectors(run, rank) if kinds is None or kind in kinds]
    return _gathered(parts)


def _gathered(parts: list[DeltaTables]) -> DeltaTables:
    columns = (DELTA_CURVE_COLUMNS, DELTA_FAMILY_COLUMNS, SIDCO_COLUMNS, SENT_RANGE_COLUMNS)
    return DeltaTables(*(_concat([getattr(p, name) for p in parts if len(getattr(p, name))],
                                 cols) for name, cols in zip(DELTA_TABLES, columns)))


ATLAS_KEYS = ["panel", "model", "vector", "experiment", "run_id"]


def vector_name(kind: str, manifest: dict) -> str:
    """What a saved vector is, in words: u, g or e, and for an outer-loop run the outer loop's
    (its u is the pseudo-gradient plus the outer error feedback)."""
    outer = bool(manifest.get("outer"))
    return {"u": "u = βe + Δ (outer)" if outer else "u = g + e",
            "g": "Δ (outer)" if outer else "g", "e": "e (outer)" if outer else "e"}.get(
        kind, kind)


def atlas(runs, rank: int = 0) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """The atlas page's rows: one panel per model and vector (`vector_name`) across loaded
    runs, from the last saved step of worker `rank` of the newest run (manifest start_time)
    that saved it: (delta_curve rows, delta_families rows, each with ATLAS_KEYS first; one
    line per run that saved nothing, saying so)."""
    from topkscope.names import MODEL_NAMES

    chosen: dict[tuple[str, str], tuple] = {}
    notes = []
    for run in runs:
        m = run.manifest
        name = f"{m.get('experiment') or run.path.parent.name}/{m.get('run_id') or run.path.name}"
        vectors = saved_vectors(run, rank)
        if not vectors:
            notes.append(f"{name} saved no vectors of worker {rank} (no snapshots): a config's "
                         "recorder: snapshot_schedule saves them")
            continue
        model = MODEL_NAMES.get(str(m.get("model")), str(m.get("model") or "own model"))
        last = {}
        for step, _, kind in vectors:
            last[kind] = max(step, last.get(kind, step))
        for kind, step in last.items():
            panel = (model, vector_name(kind, m))
            start = str(m.get("start_time") or "")
            if panel not in chosen or start > chosen[panel][0]:
                chosen[panel] = (start, run, step, kind, name)
    curves, fams = [], []
    order = {"u": 0, "g": 1, "e": 2}  # per model: u first, then its parts g and e
    for (model, vector), (_, run, step, kind, name) in sorted(
            chosen.items(), key=lambda item: (item[0][0], order.get(item[1][3], 3), item[0][1])):
        t = analyze_delta_loaded(run, step, rank, kind, tails=False)
        tags = {"panel": f"{model} · {vector}", "model": model, "vector": vector,
                "experiment": name.split("/")[0], "run_id": name.split("/", 1)[1]}
        curves.append(t.delta_curve.assign(**tags)[[*ATLAS_KEYS, *DELTA_CURVE_COLUMNS]])
        fams.append(t.delta_families.assign(**tags)[[*ATLAS_KEYS, *DELTA_FAMILY_COLUMNS]])
    return (_concat([c for c in curves if len(c)], [*ATLAS_KEYS, *DELTA_CURVE_COLUMNS]),
            _concat([f for f in fams if len(f)], [*ATLAS_KEYS, *DELTA_FAMILY_COLUMNS]), notes)


def _concat(frames: list[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    if not frames:
        return pd.DataFrame(columns=columns)
    return pd.concat(frames, ignore_index=True)


def _with_keys(frame: pd.DataFrame, keys: dict, seed: int, max_n: int) -> pd.DataFrame:
    frame = frame.copy()
    for name, value in reversed(keys.items()):
        frame.insert(0, name, np.full(len(frame), value, dtype=np.int64))
    frame["seed"] = np.full(len(frame), seed, dtype=np.int64)
    frame["max_n"] = np.full(len(frame), max_n, dtype=np.int64)
    return frame


def _typed(frame: pd.DataFrame | None, columns: list[str]) -> pd.DataFrame:
    """frame in the given column order; an empty frame with those columns when None."""
    if frame is None:
        return pd.DataFrame({c: pd.Series(dtype=_empty_dtype(c)) for c in columns})
    frame = frame.reindex(columns=columns)
    for column in (*KEY_COLUMNS, *PARAM_COLUMNS):
        if column in frame.columns:
            frame[column] = frame[column].astype(np.int64)
    return frame


def _empty_dtype(column: str) -> str:
    if column in (*KEY_COLUMNS, *PARAM_COLUMNS):
        return "int64"
    return "object" if column in ("note", "family", "on", "shape_name") else "float64"


def merge(old: pd.DataFrame | None, new: pd.DataFrame, replace: pd.DataFrame) -> pd.DataFrame:
    """old without the rows matching a row of `replace`, then new; sorted by step, rank
    (and layer, kind and density, where the table has them; stable otherwise).

    replace holds key rows: columns step, rank (every row of a re-analyzed snapshot goes, even
    if its new analysis has fewer rows), step, rank, kind (one saved vector's) or step, rank,
    density (only recomputed densities go).
    """
    if old is None or old.empty:
        out = new
    else:
        cols = list(replace.columns)
        stale = pd.MultiIndex.from_frame(old[cols]).isin(pd.MultiIndex.from_frame(replace))
        kept = old[~stale]
        if kept.empty or new.empty:
            out = new if kept.empty else kept
        else:
            out = pd.concat([kept, new], ignore_index=True)
    order = [c for c in (*KEY_COLUMNS, "layer", "kind", "density") if c in out.columns]
    return out.sort_values(order, kind="stable").reset_index(drop=True)
