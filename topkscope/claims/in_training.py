"""Claim `<family>_count_in_training`: does each approximate selector send about k in its OWN
training? Unit: one step of one run of the method (train.parquet `selected_median` / k,
topkscope.analysis.selection.step_counts); per condition (a density warm-up's steps form their
own) the share of steps in [2k/3, 4k/3] by the fraction rule, each seed's median count/k, and
the share of seeds whose median is in the band: a holds needs every seed's median in the band
too (else mixed). A method that sends exactly k by construction is a check.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from topkscope.analysis import criteria, selection
from topkscope.analysis.units import unit_conditions, with_runs
from topkscope.claims import phrases, verdicts
from topkscope.claims.build import run_ids
from topkscope.claims.inputs import ModelRuns
from topkscope.claims.registry import Claim, Presentation, Question, register_claim

RULE = ("unit = one step of the method's own training run; criterion "
        f"{criteria.COUNT_BAND[0]:.3f} <= count/k <= {criteria.COUNT_BAND[1]:.3f}, count = train "
        "selected_median (the median over workers; selected where not logged); steps of a "
        f"density warm-up form their own condition; {verdicts.FRACTION_RULE}; a holds needs "
        "every seed's median count/k in the band too (else mixed)")


def rows(model: ModelRuns) -> list[dict]:
    """One row per (approximate method, condition) of the model's runs, each method judged on
    its own runs."""
    from topkscope.claims.outer import is_outer

    units: dict[tuple, list[pd.DataFrame]] = {}
    for i, run in enumerate(model.runs):
        method = run.manifest.get("sparsifier")
        if method is None or method in selection.NOT_SELECTORS or is_outer(run.manifest):
            continue  # an outer run sends at its exchanges only: its counts are outer.parquet's
        steps = selection.step_counts(run)
        if steps.empty:
            continue
        labels = unit_conditions(run, steps["step"].tolist())
        steps = steps.assign(_run=i, _seed=run.manifest.get("seed", 0), _condition=labels)
        for cond, part in steps.groupby("_condition", sort=True):
            units.setdefault((method, cond), []).append(part)
    out = []
    for (method, cond), parts in sorted(units.items(), key=lambda kv: (kv[0][0],
                                                                      kv[0][1].key())):
        frame = pd.concat(parts, ignore_index=True)
        runs = [model.runs[i] for i in sorted(frame["_run"].unique())]
        out.append({"sparsifier": method, "condition": with_runs(cond, runs),
                    "run_ids": run_ids(runs),
                    "n_runs": int(frame["_run"].nunique()),
                    **_count_row(frame, selection.by_construction(method))})
    return out


def _count_row(frame: pd.DataFrame, exact: bool) -> dict:
    ratio = (frame["count"] / frame["k"]).to_numpy()
    passed = criteria.in_count_band(frame["count"], frame["k"])
    n, inside = int(passed.size), int(np.count_nonzero(passed))
    seeds = frame.assign(_ratio=ratio).groupby("_seed")["_ratio"].median()
    seeds_in = int(np.count_nonzero(criteria.in_count_band(seeds.to_numpy(), 1.0)))
    lo, med, hi = np.percentile(ratio, [5, 50, 95])
    # one block per (run, step): a step's count is one number of one run
    low, high = criteria.share_interval(passed, frame["_run"], frame["step"]) if n else (
        math.nan, math.nan)
    if exact:
        verdict, cause, _ = verdicts.check_verdict(inside, n)
    else:
        verdict, cause = verdicts.count_in_training_verdict(inside, n, low, high, seeds_in,
                                                            len(seeds))
    blocks = len(set(zip(frame["_run"], frame["step"])))
    per_seed = ", ".join(f"seed {s} {r:.3g}" for s, r in seeds.items())
    evidence = (f"{inside} of {n} steps in {criteria.count_band_text()}; {seeds_in} of "
                f"{len(seeds)} seeds' median count/k in the band (per seed: {per_seed}); "
                f"count/k median {med:.3g}, 5th-95th percentile {lo:.3g}-{hi:.3g} (train "
                "selected_median / k, the method's own training)")
    if exact:
        evidence += "; true by construction (the method sends exactly k)"
    return {"n_units": n, "n_seeds": len(seeds), "fraction": inside / n if n else math.nan,
            "fraction_low": low, "fraction_high": high, "count_over_k": float(med),
            "count_p5": float(lo), "count_p95": float(hi), "evidence": evidence,
            "verdict": verdict, "cause": cause,
            "reason": ("not-measured" if verdict == "insufficient-data" and exact else
                       verdicts.fraction_reason(verdict, n, blocks)),
            "section": "check" if exact else "distribution"}


register_claim(Claim(
    "count_in_training", "Does each approximate selector send about k in its own training?",
    "{method} selects about k elements in its own training", RULE, "distribution", "model",
    rows, "selected_per_step", per_method=True,
    questions=(Question("gaussiank_count_in_training", "Does the published Gaussian-k select "
                        "about k in its own training?", sparsifiers=("gaussiank-2019",),
                        summary=3, order=40, short="Does Gaussian-k send about k?"),
               Question("other_count_in_training", "Do the other approximate selectors send "
                        "about k in their own training?", order=45)),
    show=Presentation("counts", "count in its own training", phrases.count,
                      phrases.count_lead)))
