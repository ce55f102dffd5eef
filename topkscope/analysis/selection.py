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
