"""How close is an approximate selection (Gaussian-k, DGC, ...) to the exact Top-k?

For a vector u of d elements, a target k and a selected index set S (|S| = count):

    count_ratio    = count / k
    recall         = |S ∩ T| / k, T an exact top-k set; with ties at the k-th magnitude tau
                     the best T is taken: (|S ∩ {|u| > tau}| + min(|S ∩ {|u| = tau}|, k - #{|u| > tau})) / k
    ratio          = ||u - u_S||^2 / ||u||^2    (the selection's contraction, float64)
    topk_ratio     = ||u - TopK(u)||^2 / ||u||^2
    ratio_to_topk  = ratio / topk_ratio          (1 = as good as Top-k; < 1 when S sends more)

recall, ratio and topk_ratio are the kernel's (`topkscope.kernel`), the formulas the recorder's
S_recall, S_ratio and topk_ratio columns use too.

Two claims read counts (topkscope.claims: criteria.in_count_band, the fraction rule):

    <family>_count_in_training  each approximate method in its OWN training runs: unit = one
                       step of one run, count = train.parquet `selected_median` (the median over
                       workers of what each sent; `selected`, the mean, where the median is not
                       logged) over that step's `k`; per condition the share of steps in
                       [2k/3, 4k/3], each seed's median count/k and the share of seeds whose
                       median is in the band (step_counts; topkscope.claims.in_training).
    gaussian_tail      the tail Gaussian-k's first threshold relies on: unit = (snapshot of u,
                       density); count = #{|u_i| > mean + |Phi^-1(rho/2)| std} (std unbiased:
                       the published rule's first threshold, before its x0.5 / x1.5 steps)
                       over k (gaussian_tail_count). It needs every value, so it is measured on
                       the snapshots of u; the moment window (|skew|, |excess kurtosis|) can
                       admit a u whose tail count is far out of band (docs/statistics.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from topkscope import kernel

COLUMNS = ["name", "d", "k", "count", "count_ratio", "recall", "ratio", "topk_ratio",
           "ratio_to_topk", "note"]  # fmt: skip


def quality(u, selected, k: int) -> dict:
    """The COLUMNS (without name) of one selection `selected` (indices into u) for target k.

    u must be finite (a NaN would make every number here meaningless: ValueError);
    selected must hold unique integers in [0, d). A zero vector has undefined ratios (NaN).
    """
    x = kernel.as_float_array(u).ravel().astype(np.float64, copy=False)
    d = x.size
    if d == 0:
        raise ValueError("u is empty (d = 0); nothing was selected from")
    x = kernel.finite_float64(x)
    if isinstance(k, bool) or int(k) != k or not 1 <= int(k) <= d:
        raise ValueError(f"k = {k!r} is outside the allowed range [1, d = {d}]")
    k = int(k)
    idx = _check_indices(selected, d)

    out = {"d": d, "k": k, "count": int(idx.size), "count_ratio": idx.size / k,
           "recall": kernel.recall(np.abs(x), idx, k), "ratio": math.nan,
           "topk_ratio": math.nan, "ratio_to_topk": math.nan, "note": ""}  # fmt: skip
    topk_ratio = kernel.topk_ratio(x, k)
    if math.isnan(topk_ratio):  # ||u|| = 0
        out["note"] = "zero vector: ratios undefined"
        return out
    out["ratio"], out["topk_ratio"] = kernel.selection_ratio(x, idx), topk_ratio
    if topk_ratio > 0.0:
        out["ratio_to_topk"] = out["ratio"] / out["topk_ratio"]
    else:
        out["note"] = "Top-k leaves nothing behind (topk_ratio = 0): ratio_to_topk undefined"
    return out


def compare(u, selections: Mapping[str, object], k: int) -> pd.DataFrame:
    """One row of `quality` per named selection, e.g. {"gaussiank": idx1, "dgc": idx2}."""
    rows = [{"name": str(name), **quality(u, idx, k)} for name, idx in selections.items()]
    return pd.DataFrame(rows, columns=COLUMNS)


def _check_indices(selected, d: int) -> np.ndarray:
    idx = kernel.to_numpy(selected).ravel()
    if idx.dtype.kind not in "iuf" and idx.size:
        raise ValueError(f"selected must hold integer indices, got dtype {idx.dtype}")
    if idx.size and idx.dtype.kind == "f":
        if not np.all(np.isfinite(idx)) or np.any(idx != np.round(idx)):
            raise ValueError("selected must hold integer indices")
    idx = idx.astype(np.int64, copy=False)
    if idx.size == 0:
        return idx
    lo, hi = int(idx.min()), int(idx.max())
    if lo < 0 or hi >= d:
        bad = lo if lo < 0 else hi
        raise ValueError(f"selected index {bad} is outside the allowed range [0, {d - 1}]")
    if np.unique(idx).size != idx.size:
        raise ValueError(f"selected has {idx.size - np.unique(idx).size} duplicate indices")
    return idx


# --- the counts the published rules reach -------------------------------------------------
NOT_SELECTORS = ("dense", "dense-wfbp", "dense-fp16", "topk")  # no approximate selection


def gaussian_tail_count(u, k: int) -> int:
    """#{|u_i| > mean(u) + |Phi^-1(rho/2)| std(u)}, rho = k/d, std unbiased, in float64: the
    count at the published Gaussian-k's first threshold (GaussianK2019 before its x0.5 / x1.5
    steps)."""
    from topkscope.sparsify.engine import gaussian_threshold

    x = kernel.finite_float64(kernel.as_float_array(u).ravel().astype(np.float64, copy=False))
    d = x.size
    if isinstance(k, bool) or int(k) != k or not 1 <= int(k) <= d:
        raise ValueError(f"k = {k!r} is outside the allowed range [1, d = {d}]")
    std = float(x.std(ddof=1)) if d > 1 else 0.0
    threshold = float(x.mean()) + gaussian_threshold(std, int(k) / d)
    return int(np.count_nonzero(np.abs(x) > threshold))


def by_construction(method: str) -> bool:
    """True for a method that sends exactly k by construction (registry `exact` or
    `fixed_count`, e.g. the robust gaussiank, randk): its count claim is a check."""
    from topkscope.sparsify import available, get_sparsifier

    if method not in available():
        return False
    try:
        sparsifier = get_sparsifier(method)
    except ValueError:  # needs parameters (threshold): not fixed by its name
        return False
    return bool(sparsifier.exact or sparsifier.fixed_count)


def step_counts(run) -> pd.DataFrame:
    """step, count, k of one run's own training (train.parquet `selected_median`, else
    `selected`; steps with k > 0 and a finite count, the last row of a repeated step)."""
    tr = getattr(run, "train", None)
    empty = pd.DataFrame({"step": pd.Series(dtype="int64"), "count": pd.Series(dtype="float64"),
                          "k": pd.Series(dtype="float64")})
    if tr is None or tr.empty or not {"step", "k"} <= set(tr.columns):
        return empty
    column = next((c for c in ("selected_median", "selected")
                   if c in tr.columns and tr[c].notna().any()), None)
    if column is None:
        return empty
    tr = tr.drop_duplicates("step", keep="last").sort_values("step")
    out = pd.DataFrame({"step": tr["step"].astype("int64").to_numpy(),
                        "count": tr[column].astype("float64").to_numpy(),
                        "k": tr["k"].astype("float64").to_numpy()})
    return out[np.isfinite(out["count"]) & (out["k"] > 0)].reset_index(drop=True)
