"""Claims from published runs (manifest launcher `published`, e.g. `topkscope import
gaussiank-sgd`): the same questions as our convergence claims, on runs whose seeds were not
published, and the time split of an iteration on the GPU they ran on. Section `published`.

    topk_accuracy         exact Top-k trains as well as Dense
    randk_accuracy        Rand-k trains as well as exact Top-k
    topk_selection_share  exact Top-k's selection takes longer than the forward and backward
                          computation on that GPU

Grouping: a run's settings are every logged setting (manifest `config`) but the compressor and
the density; runs are compared only where their settings agree (ResNet-20's Top-k runs at
rho = 0.001 under five batch sizes and three learning rates are ten rows, never one pool).
Units: our rule pairs a method's run with Top-k's of the same seed; a published log names no
seed, so runs with the same logged settings may be seeds of one setting or differ in what the
log does not record: their grouping is unknown, and they are listed, never pooled into an
interval. Each row is therefore insufficient-data (fewer than MIN_SEEDS paired seeds)
and its evidence gives every run's final validation accuracy, the differences between them,
and "seeds not published".

The time split is a fraction rule over units (verdicts.fraction_verdict): a unit is one logged
interval (all workers' rows of one iteration) at the target density with a logged selection
time; the criterion is time_select > time_compute - time_select (the authors' selection runs
inside the backward pass, so the logged backward includes it). Runs are grouped by settings and
node (the GPU matters); the evidence gives the medians and the selection's share of the logged
time per iteration.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from topkscope.analysis.criteria import ACCURACY_MARGIN_POINTS, MIN_SEEDS, signed
from topkscope.claims import verdicts
from topkscope.claims.build import run_ids
from topkscope.claims.inputs import ModelRuns
from topkscope.claims.registry import Claim, Presentation, Question, register_claim
from topkscope.condition import Condition
from topkscope.manifest import PUBLISHED, is_published  # noqa: F401  (part of this API)

SECTION = "published"
SEEDS = "seeds not published"
STATEMENTS = {
    "topk_accuracy": "exact Top-k trains as well as Dense (published GPU runs)",
    "randk_accuracy": "Rand-k trains as well as exact Top-k (published GPU runs)",
    "topk_selection_share": "exact Top-k's selection takes longer than the forward and "
                            "backward computation on the GPU (published GPU runs)",
}
PAIRS = {"topk_accuracy": ("topk", "dense"), "randk_accuracy": ("randk", "topk")}
ACCURACY_RULE = (
    "unit = one seed with runs of the method and its baseline under the same logged settings "
    "(every logged setting but compressor and density); a published log names no seed, so "
    "runs with the same settings are listed, not paired or pooled (grouping unknown): "
    f"fewer than {MIN_SEEDS} paired seeds: insufficient-data; evidence: each run's "
    "final validation top-1 accuracy and the differences between them")
SHARE_RULE = (
    "unit = one logged interval at the target density with a logged selection time (all "
    "workers' rows of that iteration, averaged); criterion time_select > time_compute - "
    "time_select (forward + backward without the selection, which the authors' code runs in "
    f"the backward hooks); runs grouped by logged settings and node; {verdicts.FRACTION_RULE}")
NOT_SETTINGS = ("compressor", "density")


def settings(manifest: dict) -> tuple:
    """The logged settings a comparison must agree on: the manifest's config but the
    compressor and the density, as a sorted tuple of (name, value)."""
    config = manifest.get("config") or {}
    return tuple(sorted((k, repr(v)) for k, v in config.items() if k not in NOT_SETTINGS))


def condition(manifest: dict) -> str:
    """A row's condition in words: workers, batch per worker, learning rate, density."""
    cfg = manifest.get("config") or {}
    parts = [f"P={cfg.get('nworkers')}", f"batch {cfg.get('batch_size')}", f"lr {cfg.get('lr')}"]
    density = manifest.get("density")
    if density is not None and float(density) < 1.0:
        parts.append(f"rho={float(density):g}")
        trained = manifest.get("density_trained")
        if trained is not None and not math.isclose(float(trained), float(density),
                                                    rel_tol=0.01):
            parts.append(f"trained at rho={float(trained):.3g}")
    return "published: " + ", ".join(parts)


def _final(run) -> float:
    ev = run.eval
    if ev is None or ev.empty:
        return math.nan
    ev = ev.sort_values("step", kind="stable")
    return float(ev["metric"].iloc[-1]) * 100.0


def _label(run) -> str:
    m = run.manifest
    return f"job {m.get('run_id')} ({m.get('node') or 'node not logged'}) {_final(run):.2f}%"


def rows(model: ModelRuns) -> list[dict]:
    """The published claims rows (claims COLUMNS, less model/dataset) of one model's runs."""
    runs = [r for r in model.published if is_published(r.manifest)
            and r.manifest.get("status") in ("complete", "failed")]
    by: dict[tuple, dict[str, list]] = {}
    for run in runs:
        by.setdefault(settings(run.manifest), {}).setdefault(
            run.manifest.get("sparsifier"), []).append(run)
    out = []
    for claim, (method, baseline) in PAIRS.items():
        for same in sorted(by, key=str):
            groups = by[same]
            mine_all = groups.get(method, [])
            densities = sorted({r.manifest.get("density") for r in mine_all})
            for density in densities:
                mine = [r for r in mine_all if r.manifest.get("density") == density]
                base = groups.get(baseline, [])
                if baseline != "dense":
                    base = [r for r in base if r.manifest.get("density") == density]
                out.append(_accuracy_row(claim, method, baseline, mine, base))
    for same in sorted(by, key=str):
        topk = by[same].get("topk", [])
        nodes = sorted({str(r.manifest.get("node")) for r in topk})
        for node in nodes:
            for density in sorted({r.manifest.get("density") for r in topk}):
                group = [r for r in topk if str(r.manifest.get("node")) == node
                         and r.manifest.get("density") == density]
                row = _share_row(group)
                if row is not None:
                    out.append(row)
    return out


def _accuracy_row(claim: str, method: str, baseline: str, mine: list, base: list) -> dict:
    m = mine[0].manifest
    cond = condition(m)
    finals = {"m": [_final(r) for r in mine], "b": [_final(r) for r in base]}
    listed = (f"{method}: " + ", ".join(_label(r) for r in mine) + f"; {baseline}: "
              + (", ".join(_label(r) for r in base) or "no run with these settings"))
    diffs = [a - b for a in finals["m"] for b in finals["b"]]
    finite = [d for d in diffs if math.isfinite(d)]
    if finite:
        spread = (f"{method} − {baseline} {signed(min(finite))} … "
                  f"{signed(max(finite))} points over {len(finite)} run pair(s)"
                  if len(finite) > 1 else
                  f"{method} − {baseline} {signed(finite[0])} points (one run each)")
    else:
        spread = "no difference (no run of both)"
    if not base:
        cause = f"no {baseline} run with the same logged settings"
    elif len(mine) > 1 or len(base) > 1:
        cause = (f"grouping unknown: {len(mine)} {method} and {len(base)} {baseline} run(s) "
                 f"with the same logged settings, {SEEDS}, listed not pooled")
    else:
        cause = f"one run each, {SEEDS}; {MIN_SEEDS} paired seeds needed"
    diff_mean = float(np.mean(finite)) if finite else math.nan
    return {"claim_key": claim, "sparsifier": method, "statement": STATEMENTS[claim],
            "condition": cond, "fields": fields_of(m), "run_ids": run_ids([*mine, *base]),
            "section": SECTION, "metric": "accuracy",
            "margin": ACCURACY_MARGIN_POINTS, "n_runs": len(mine) + len(base),
            "n_units": 0, "n_seeds": 0, "n_failed_seeds": sum(
                r.manifest.get("status") == "failed" for r in [*mine, *base]),
            "fraction": math.nan, "ci_low": math.nan, "ci_high": math.nan,
            "diff_mean": diff_mean, "verdict": "insufficient-data", "cause": cause,
            "reason": "seeds-not-published", "diff_unit": "points",
            "evidence": f"{cond}; final validation top-1 accuracy, {listed}; {spread}; {SEEDS}",
            "rule": ACCURACY_RULE}


def _target_rows(run) -> pd.DataFrame:
    tr = run.train
    need = {"time_select", "time_compute", "step", "density"}
    if tr is None or tr.empty or not need <= set(tr.columns):
        return pd.DataFrame()
    trained = run.manifest.get("density_trained")
    if trained is None:
        return pd.DataFrame()
    tr = tr[np.isclose(tr["density"].astype("float64"), float(trained))]
    tr = tr.dropna(subset=["time_select", "time_compute"])
    return tr.groupby("step", as_index=False)[
        [c for c in ("time_select", "time_compute", "time_iteration", "time_iteration_net")
         if c in tr]].mean()


def _share_row(group: list) -> dict | None:
    units = [(_target_rows(r), r) for r in group]
    units = [(u, r) for u, r in units if not u.empty]
    if not units:
        return None
    frame = pd.concat([u for u, _ in units], ignore_index=True)
    select = frame["time_select"].to_numpy(float)
    compute = frame["time_compute"].to_numpy(float) - select
    n_pass, n = int((select > compute).sum()), len(frame)
    verdict = verdicts.fraction_verdict(n_pass, n)
    reason = verdicts.fraction_reason(verdict, n, n)
    # the time per iteration net of the validation waits where the import has it
    col = "time_iteration_net" if "time_iteration_net" in frame else "time_iteration"
    it = frame[col].dropna().to_numpy(float) if col in frame else []
    share = (float(np.median(select)) / float(np.median(it))) if len(it) else math.nan
    m = units[0][1].manifest
    cond = f"{condition(m)}, node {m.get('node')} (GPU {m.get('gpu')})"
    jobs = ", ".join(str(r.manifest.get("run_id")) for _, r in units)
    evidence = (f"{cond}; jobs {jobs}; median selection {np.median(select) * 1e3:.1f} ms, "
                f"forward + backward without it {np.median(compute) * 1e3:.1f} ms, time per "
                f"iteration {np.median(it) * 1e3:.1f} ms" if len(it) else "")
    evidence += f"; selection share of an iteration {share:.0%}" if math.isfinite(share) else ""
    return {"claim_key": "topk_selection_share", "sparsifier": "topk",
            "statement": STATEMENTS["topk_selection_share"], "condition": cond,
            "fields": fields_of(m), "run_ids": run_ids([r for _, r in units]),
            "section": SECTION, "n_runs": len(units), "n_units": n, "fraction": n_pass / n,
            "verdict": verdict, "cause": verdicts.fraction_cause(n_pass, n), "reason": reason,
            "evidence": evidence, "rule": SHARE_RULE, "metric": "seconds",
            "diff_mean": share, "diff_unit": "share of an iteration"}


def _differences(rows) -> str:
    """'Top-k − Dense −6.45 to +0.16 points over 10 settings of the published runs'."""
    from topkscope.claims import phrases

    first = rows.iloc[0]
    method, base = PAIRS.get(str(first["claim"]), ("", ""))
    return (f"{phrases.method(method)} − {phrases.method(base)} "
            f"{phrases.signed_span(rows['diff_mean'])} points of final validation accuracy over "
            f"{len(rows)} setting{'s' if len(rows) != 1 else ''} of the authors' published GPU "
            "runs, one run each")


def _share(rows) -> str:
    from topkscope.claims import phrases

    return (f"the selection took {phrases.pct_span(rows['diff_mean'])} of a logged iteration "
            f"({len(rows)} node{'s' if len(rows) != 1 else ''})")


QUESTIONS = {
    "topk_accuracy": (Question("published_topk_accuracy", "Does exact Top-k train as well as "
                               "Dense in the authors' published GPU runs?", on="any",
                               order=180),),
    "randk_accuracy": (Question("published_randk_accuracy", "Does Rand-k train as well as exact "
                                "Top-k in the authors' published GPU runs?", on="any",
                                order=185),),
    "topk_selection_share": (Question("published_selection_share", "Does exact Top-k's "
                                      "selection take longer than the forward and backward "
                                      "pass on the published runs' GPUs?", on="any",
                                      order=190),),
}


def _claim(name: str, question: str, rule: str) -> Claim:
    # one evaluation makes every published row: the first claim's; the others only describe
    return Claim(name, question, STATEMENTS[name], rule, SECTION, "model",
                 rows if name == "topk_accuracy" else (lambda model: []),
                 questions=QUESTIONS[name],
                 show=Presentation("published", "", _share if name == "topk_selection_share"
                                   else _differences))


def fields_of(manifest: dict) -> Condition:
    """A published run's condition as typed fields: workers and density (the words of
    `condition` say its batch and learning rate)."""
    cfg = manifest.get("config") or {}
    density = manifest.get("density")
    workers = cfg.get("nworkers")
    return Condition(experiment=str(manifest.get("experiment") or ""),
                     world_size=int(workers) if isinstance(workers, (int, float)) else None,
                     training_density=float(density) if density is not None else None)


for _claim_object in (
    _claim("topk_accuracy", "Does exact Top-k train as well as Dense in the published GPU "
           "runs?", ACCURACY_RULE),
    _claim("randk_accuracy", "Does Rand-k train as well as exact Top-k in the published GPU "
           "runs?", ACCURACY_RULE),
    _claim("topk_selection_share", "Does exact Top-k's selection take longer than the forward "
           "and backward computation on the GPUs of the published runs?", SHARE_RULE),
):
    register_claim(_claim_object)
