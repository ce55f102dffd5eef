"""Claim `contraction_explains_convergence`: does a method's contraction order its convergence
gap to Dense? The points, the error-feedback bound's term (1 - q)/q^2 and the rank correlations
are topkscope.analysis.contraction_convergence's; this is the verdict on them, per model and
gap (condition `gap=final` or `gap=steps`; `diff_mean` = Spearman's rho of the best contraction
with its bootstrap interval in `ci_low`/`ci_high`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from topkscope.analysis.contraction_convergence import (
    CONTRACTIONS,
    GAPS,
    MAX_P,
    MIN_POINTS,
    N_BOOT,
    correlations,
    points,
)
from topkscope.analysis.criteria import MIN_SEEDS
from topkscope.claims.inputs import ModelRuns
from topkscope.claims.registry import Claim, Presentation, Question, register_claim

CLAIM = "contraction_explains_convergence"
SECTION = "explanation"
STATEMENT = ("the error-feedback bound's compression term (1 - q)/q^2, q = 1 - delta, orders the "
             "methods' convergence gap to Dense")

RULE = ("point = (experiment, density, condition, method), Dense excluded; term = (1 - q)/q^2 "
        "with q = 1 - delta (Karimireddy et al. 2019, Theorem II); gap = final metric behind "
        "the same seed's Dense (points; perplexity in %), or steps to Dense's final within the "
        "margin relative to Dense's; Spearman rho over the points of the model, 95% bootstrap "
        f"over seeds ({N_BOOT} resamples); per gap the best contraction holds when its interval "
        f"lies above 0 and above every other's and its one-sided permutation p over the points "
        f"is below {MAX_P:g}, else inconclusive; insufficient-data with fewer "
        f"than {MIN_POINTS} points or {MIN_SEEDS} seeds")

def verdict(table: pd.DataFrame) -> tuple[str, str, str]:
    """(verdict, best contraction or '', cause) for one gap's rows of `correlations`."""
    defined = table[np.isfinite(table["ci_low"]) & np.isfinite(table["ci_high"])]
    if defined.empty:
        n = int(table["n_points"].max()) if len(table) else 0
        seeds = int(table["n_seeds"].max()) if len(table) else 0
        return ("insufficient-data", "", f"{n} point(s) and {seeds} seed(s); {MIN_POINTS} points "
                f"with distinct terms and {MIN_SEEDS} seeds needed")
    best = defined.sort_values("rho", ascending=False).iloc[0]
    others = defined[defined["contraction"] != best["contraction"]]
    text = "; ".join(f"{r.contraction} rho {r.rho:.2f} [{r.ci_low:.2f}, {r.ci_high:.2f}] "
                     f"(ordering p {r.p:.3g})" for r in defined.itertuples())
    tied = [c for c in CONTRACTIONS if c not in set(defined["contraction"])]
    if tied:
        text += f"; undefined (terms tie or too few points): {', '.join(tied)}"
    if (best["ci_low"] > 0 and best["p"] < MAX_P
            and (others.empty or best["ci_low"] > others["ci_high"].max())):
        return "holds", str(best["contraction"]), text
    return "inconclusive", str(best["contraction"]), text


def rows(model: ModelRuns, n_boot: int = N_BOOT) -> list[dict]:
    """The claims rows of one model's runs: per gap one row (sparsifier: the best contraction
    when it holds, else 'all'); none without convergence points."""
    frame, seeded = points(model.runs, model.options.margin, model.options.perplexity_margin)
    if frame.empty:
        return []
    table = correlations(frame, seeded, n_boot)
    out = []
    for gap in GAPS:
        part = table[table["gap"] == gap]
        v, best, cause = verdict(part)
        top = part[part["contraction"] == best] if best else part.iloc[0:0]
        evidence = ("points: " + ", ".join(
            f"{r.method} ({r.condition}, rho={r.density:g}) delta_C {r.delta_measured:.4g} "
            f"[{r.source}] gap {getattr(r, 'gap_' + gap):.3g}" for r in frame.itertuples()))
        out.append({"claim": CLAIM, "sparsifier": best if v == "holds" else "all",
                    "statement": STATEMENT, "rule": RULE, "section": SECTION,
                    "condition": f"gap={gap}", "n_runs": int(sum(len(p.final) for p in
                                                                  seeded.values())),
                    "n_units": int(len(frame)), "n_seeds": int(part["n_seeds"].max()),
                    "verdict": v, "cause": (f"best: {best}; " if best else "") + cause,
                    "reason": "" if v == "holds" else "too-few-seeds" if v ==
                    "insufficient-data" else "not-significant", "diff_unit": "Spearman rho",
                    "evidence": evidence, "metric": frame["metric"].iloc[0],
                    "diff_mean": float(top["rho"].iloc[0]) if len(top) else math.nan,
                    "ci_low": float(top["ci_low"].iloc[0]) if len(top) else math.nan,
                    "ci_high": float(top["ci_high"].iloc[0]) if len(top) else math.nan})
    return out


register_claim(Claim(
    CLAIM, "Does the error-feedback bound's compression term, with a contraction, order the "
    "methods' convergence gap to Dense?", STATEMENT, RULE, SECTION, "model", rows,
    "contraction_gap",
    questions=(Question("contraction_explains_convergence", "Does (1 − q)/q², q = 1 − δ, order "
                        "the methods' gap to Dense?", order=58),),
    show=Presentation("other")))
