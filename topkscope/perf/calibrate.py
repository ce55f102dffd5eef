"""Fit alpha (s per message) and beta (s per byte) to measured collective times.

The model of each collective is linear in (alpha, beta) (topkscope.perf.patterns):

    allreduce of n bytes          t = 2 (P-1) alpha + 2 (P-1)/P n beta
    allgather of n bytes each     t = (P-1) alpha + (P-1) n beta

so one least-squares problem over every (P, n) measured gives both. Sizes span bytes to tens
of megabytes, so the fit weighs each point by 1 / t (it minimises relative errors; otherwise
the largest messages would decide alpha too), and alpha, beta are kept >= 0 (scipy nnls).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

COLLECTIVES = ("allreduce", "allgather")


def features(collective: str, P: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    """(n, 2) coefficients of (alpha, beta) in the collective's time."""
    P = np.asarray(P, dtype=np.float64)
    n = np.asarray(nbytes, dtype=np.float64)
    if collective == "allreduce":
        return np.column_stack([2 * (P - 1), 2 * (P - 1) / P * n])
    if collective == "allgather":
        return np.column_stack([P - 1, (P - 1) * n])
    raise ValueError(f"collective must be one of {', '.join(COLLECTIVES)}, got {collective!r}")


def fit_alpha_beta(collective: str, P, nbytes, seconds) -> dict:
    """{alpha, beta, n_points, median_rel_error, max_rel_error} of the weighted fit."""
    from scipy.optimize import nnls

    t = np.asarray(seconds, dtype=np.float64)
    if t.size < 2:
        raise ValueError(f"need at least 2 timings to fit alpha and beta, got {t.size}")
    if not np.all(np.isfinite(t)) or np.any(t <= 0):
        raise ValueError("timings must be finite and > 0")
    X = features(collective, P, nbytes)
    if np.any(X[:, 0] == 0):
        raise ValueError("every timing needs P >= 2 (one worker communicates nothing)")
    w = 1.0 / t
    (alpha, beta), _ = nnls(X * w[:, None], t * w)
    rel = np.abs(X @ np.array([alpha, beta]) - t) / t
    return {"alpha": float(alpha), "beta": float(beta), "n_points": int(t.size),
            "median_rel_error": float(np.median(rel)), "max_rel_error": float(np.max(rel))}


def fit_table(timings: pd.DataFrame) -> pd.DataFrame:
    """One fit per collective and per process count, and one over all counts ("all").

    timings: columns collective, workers, nbytes, seconds (one row per measured median).
    """
    need = {"collective", "workers", "nbytes", "seconds"}
    if need - set(timings.columns):
        raise ValueError(f"timings lack columns {sorted(need - set(timings.columns))}")
    rows = []
    for coll, grp in timings.groupby("collective", sort=True):
        groups = [(str(int(p)), g) for p, g in grp.groupby("workers")] + [("all", grp)]
        for label, g in groups:
            fit = fit_alpha_beta(str(coll), g["workers"], g["nbytes"], g["seconds"])
            rows.append({"collective": coll, "workers": label, **fit,
                         "bandwidth_gbit": 8.0 / fit["beta"] / 1e9 if fit["beta"] > 0
                         else float("inf")})
    return pd.DataFrame(rows)
