"""Does the quantizer's range hold the values Top-k sends? The "+-6 sigma" of the quantizers.

SparseLoCo (and hivemind's 8-bit rule it follows) quantizes the sent values over a range of
R = 6 standard deviations (`topkscope.sparsify.quantize`). Read from that code, the range is
6 s *wide*: the codes cover about mean +- 3 s (at b bits exactly -(3 s)(1 + 2^-b) to
(3 s)(1 - 2^-b), so at 2 bits -3.75 s to 2.25 s). Here s is the standard deviation of the
*sent values* of a group about their mean (unbiased), as the quantizer computes it, not that of
u. For each density rho (k = max(1, round(rho d))) and each selector that sends values:

    topk         exact Top-k (`get_sparsifier("topk")`)
    chunk-topk   chunk-wise Top-k over consecutive chunks of 4096 (`get_sparsifier("chunk-topk")`,
                 SparseLoCo's chunk)

of the sent values v (one group: all of them, unless `groups` gives a group per entry of u, as
the compressor's per-tensor layout would), with z = (v - mean_g) / s_g in its group g:

    share_within_3sd   #{|z| <= 3} / n     share_within_6sd   #{|z| <= 6} / n
    share_held_<b>bit  the share whose b-bit code needed no clamp (`Quantized.clamped`, the
                       quantizer's own rule), b in BITS = (2, 8): SparseLoCo's 2 bits, hivemind's 8
    max_abs_z          max |z|

A group of one value has s = 0 (the quantizer then uses scale 1): its z is NaN and it counts as
outside both +-3 and +-6; the held shares still follow the quantizer.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from topkscope.analysis.vectors import finite_values
from topkscope.bounds import k_from_density
from topkscope.sparsify import get_sparsifier
from topkscope.sparsify.chunk_topk import SPARSELOCO_CHUNK
from topkscope.sparsify.quantize import DEFAULT_RANGE, Quantizer, group_moments

BITS = (2, 8)
SELECTORS = ("topk", "chunk-topk")
COLUMNS = ["density", "k", "d", "selector", "n_sent", "groups", "share_within_3sd",
           "share_within_6sd", *(f"share_held_{b}bit" for b in BITS), "max_abs_z"]


def sent_range(u, densities, *, chunk_size: int = SPARSELOCO_CHUNK, groups=None,
               range_sigmas: float = DEFAULT_RANGE) -> pd.DataFrame:
    """One row per (density, selector): COLUMNS (module doc). NaN/Inf in u are left out (and
    with them their group ids); groups: an int group id per entry of u (None: one group)."""
    values, nonfinite = finite_values(u)
    group_ids = None
    if groups is not None:
        group_ids = np.asarray(groups, dtype=np.int64).ravel()
        if group_ids.size != np.asarray(u).size:
            raise ValueError(f"groups has {group_ids.size} entries, u {np.asarray(u).size}: "
                             "one group id per entry")
        if nonfinite:
            group_ids = group_ids[np.isfinite(np.asarray(u, dtype=np.float64).ravel())]
    d = int(values.size)
    if d == 0:
        return pd.DataFrame({c: [] for c in COLUMNS})
    vec = torch.from_numpy(np.ascontiguousarray(values))
    selectors = {"topk": get_sparsifier("topk"),
                 "chunk-topk": get_sparsifier("chunk-topk", chunk_size=chunk_size)}
    quantizers = {b: Quantizer(bits=b, range_sigmas=range_sigmas) for b in BITS}
    rows = []
    for rho in densities:
        k = k_from_density(float(rho), d)
        for name in SELECTORS:
            idx = selectors[name].select(vec, k)
            sent = vec[idx].double()
            g = None if group_ids is None else torch.from_numpy(group_ids[idx.numpy()])
            rows.append({"density": float(rho), "k": k, "d": d, "selector": name,
                         "n_sent": int(sent.numel()),
                         **_shares(sent, g, quantizers)})
    return pd.DataFrame(rows, columns=COLUMNS)


def _shares(sent: torch.Tensor, groups: torch.Tensor | None, quantizers: dict) -> dict:
    """The shares of one selection's values (float64), per group as the quantizer groups."""
    if groups is None:
        groups, n_groups = torch.zeros(sent.numel(), dtype=torch.int64), 1
    else:  # the groups that received values, numbered 0, 1, ...
        labels, groups = torch.unique(groups, return_inverse=True)
        n_groups = int(labels.numel())
    _, c, std = group_moments(sent, groups, n_groups)  # the quantizer's own mean and s
    with np.errstate(all="ignore"):
        z = (c / std[groups]).numpy()
    abs_z = np.abs(np.where(np.isfinite(z), z, np.nan))
    n = max(sent.numel(), 1)
    out = {"groups": n_groups,
           "share_within_3sd": float(np.count_nonzero(abs_z <= 3.0)) / n,
           "share_within_6sd": float(np.count_nonzero(abs_z <= 6.0)) / n}
    for b, quantizer in quantizers.items():
        clamped = quantizer.quantize(sent, groups, n_groups).clamped
        out[f"share_held_{b}bit"] = 1.0 - float(clamped.double().mean())
    finite = abs_z[np.isfinite(abs_z)]
    out["max_abs_z"] = float(finite.max()) if finite.size else math.nan
    return out
