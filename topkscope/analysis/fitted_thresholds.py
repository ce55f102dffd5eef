"""Do SIDCo's fitted laws predict the k-th largest |u|? Its thresholds against the true one.

SIDCo (Abdelmoniem et al., MLSys 2021, arXiv 2101.10761) sets its threshold from laws fitted to
|u| in stages (exponential, gamma, generalised Pareto; `topkscope.sparsify.sidco`, whose fitting
code is called here, not rewritten). On a vector u of d finite values, at each density rho
(k = max(1, round(rho d))) and for each law:

    threshold   eta of the rule: `SIDCo(dist, stages=M).staged_threshold(|u|, rho)` (the
                authors' rule at a fixed stage count M, each M from 1 up to the adapted one
                below and at least to MIN_STAGES = 3, capped at max_stages(rho); one row at
                rho >= first_ratio, where every M is one stage), and
                `SIDCoFixed(dist).fitted_threshold(sample, rho)` (rule `sidco-fixed`: ours, three
                stages on a strided sample of about 2^18 values)
    kth         the true k-th largest |u| (one sort of the finite |u|)
    threshold_over_kth = eta / kth      (1: the law predicted the k-th largest exactly)
    count       #{i : |u_i| > eta}, what the rule would send;  count_over_k = count / k
    adapted     the row (rule `sidco`) of the stage count the authors' adaptation reaches on a
                stream of this same vector from its start M = 1: the first M with
                count/k >= 1 - ADAPT_BAND (0.8), else max_stages(rho). When that row's count/k
                exceeds 1 + ADAPT_BAND (1.2) the adaptation alternates between M - 1 and M
                (at M = 1 it stays at 1, sending that many).

The fits are SIDCo's moment fits on all of |u| (the adaptive rule) or its sample (the fixed
one), as the sparsifiers run them; nothing here is subsampled.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from topkscope.analysis.delta_curve import ascending_magnitudes
from topkscope.analysis.vectors import finite_values
from topkscope.bounds import k_from_density
from topkscope.sparsify._helpers import mean_std, strided_sample
from topkscope.sparsify.sidco import ADAPT_BAND, DISTRIBUTIONS, SIDCo, SIDCoFixed, max_stages

MIN_STAGES = 3  # stage counts shown at least (when max_stages allows), beyond the adapted one
COLUMNS = ["density", "k", "d", "rule", "dist", "stages", "threshold", "kth",
           "threshold_over_kth", "count", "count_over_k", "adapted"]


def sidco_thresholds(u, densities, *, dists=DISTRIBUTIONS,
                     mags: np.ndarray | None = None) -> pd.DataFrame:
    """One row per (density, rule, dist, stages): COLUMNS (module doc); NaN/Inf in u are left
    out. mags: the ascending finite |u| when already sorted (`delta_curve.ascending_magnitudes`).
    Empty for d = 0 or a zero vector."""
    values = finite_values(u)[0]
    if mags is None:
        mags = ascending_magnitudes(values)[0]
    d = int(mags.size)
    if d == 0 or not mags[-1] > 0:
        return pd.DataFrame({c: [] for c in COLUMNS})
    # in u's own order, as the selectors see it (the strided sample depends on the order)
    mag_t = torch.from_numpy(np.abs(values))
    sample = strided_sample(torch.from_numpy(values), SIDCoFixed().sample_size)
    moments = mean_std(mag_t)  # the first fit's moments: the same for every law and M
    first = {dist: SIDCo(dist=dist).first_stage(mag_t, *moments) for dist in dists}
    rows = []
    for rho in densities:
        k = k_from_density(float(rho), d)
        kth = float(mags[d - k])
        exact_rho = k / d  # the density SIDCo's rule receives (k / d)
        for dist in dists:
            rule_rows = []
            for stages in range(1, max_stages(exact_rho) + 1):
                selector = SIDCo(dist=dist, stages=stages)
                eta = selector.staged_threshold(mag_t, exact_rho, moments, first[dist])
                rule_rows.append(_row(rho, k, d, "sidco", dist, stages, eta, kth, mags))
                if exact_rho >= selector.first_ratio:
                    break  # every stage count is one stage here
                if stages >= MIN_STAGES and _reached(rule_rows) is not None:
                    break
            (_reached(rule_rows) or rule_rows[-1])["adapted"] = True
            fixed = SIDCoFixed(dist=dist)
            eta = fixed.fitted_threshold(sample, exact_rho)
            rows += [*rule_rows, _row(rho, k, d, "sidco-fixed", dist, fixed.stages, eta, kth,
                                      mags)]
    return pd.DataFrame(rows, columns=COLUMNS)


def _reached(rule_rows: list[dict]) -> dict | None:
    """The first row (stage counts ascending from 1) where the adaptation stops adding stages."""
    return next((r for r in rule_rows if r["count_over_k"] >= 1.0 - ADAPT_BAND), None)


def _row(rho, k, d, rule, dist, stages, eta, kth, mags) -> dict:
    count = d - int(np.searchsorted(mags, eta, side="right"))  # strictly above eta, as SIDCo
    return {"density": float(rho), "k": k, "d": d, "rule": rule, "dist": dist,
            "stages": int(stages), "threshold": float(eta), "kth": kth,
            "threshold_over_kth": float(eta) / kth if kth > 0 else math.nan,
            "count": count, "count_over_k": count / k, "adapted": False}
