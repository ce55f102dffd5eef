"""Contraction of the Top-k operator against the bounds of Shi et al. (arXiv 1911.08772).

    delta_emp(u, k) = ||u - TopK(u)||^2 / ||u||^2     measured, float64 (topkscope.kernel)
    classic_bound   = 1 - k/d                          (= E over Rand-k)
    paper_bound     = (1 - k/d)^2                      holds if sorted u^2 is convex, decreasing to 0
    gaussian_ratio  = 1 - rho - 2 t phi(t),  t = Phi^{-1}(1 - rho/2)   exact for u ~ N(0, s^2)

`analyze(u, densities)` measures delta_emp at many densities from one selection, the sorted-
magnitude curve on a log-spaced rank grid, and how far that curve is from the convex decreasing
shape under which the paper's bound holds (`convexity`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from topkscope import kernel
from topkscope.analysis.criteria import (  # noqa: F401  (public here too: the criteria)
    REL_TOL,
    is_at_most,
    is_below_classic,
    is_below_paper,
)
from topkscope.analysis.vectors import check_max_n, finite_values, subsample
from topkscope.bounds import (  # noqa: F401  (public here too)
    classic_bound,
    gaussian_ratio,
    k_from_density,
    paper_bound,
)
from topkscope.kernel import topk_ratio  # noqa: F401  (public here too: the measured delta)
from topkscope.sparsify.engine import sample_threshold

# --- many densities at once, the sorted-magnitude curve and the convexity condition ---------

DEFAULT_MAX_N = 250_000  # subsample for the bulk of the sorted-magnitude curve
DEFAULT_POINTS = 128  # log-spaced ranks on the curve
# The convexity tolerance on the scale of the gap between the two bounds. A convexity gap g
# allows delta at most g (1 - (1 - k/d)^2) above (1 - k/d)^2 (see `convexity`); the condition
# asks that this be at most CONVEXITY_SHARE of the bounds' gap (k/d)(1 - k/d), plus a sample-
# noise allowance SAMPLE_NOISE/d on g. At rho = 0.001 that is g <= 0.009995 + 30/d: the
# earlier criterion g <= 0.01 + 30/d, restated on this scale.
CONVEXITY_SHARE = 0.02
SAMPLE_NOISE = 30.0  # the spacing of a finite sample's largest order statistics (~10/d Gaussian)
DEFAULT_DENSITY = 0.001  # the paper's density: where `convexity` judges a curve given none
_EXACT_FULL_SORT = 2_000_000  # below this d everything is sorted exactly

RATIO_COLUMNS = [
    "density", "d", "k", "nonfinite", "topk_ratio", "classic_bound", "paper_bound",
    "gaussian_ratio", "below_classic", "below_paper", "convexity_gap",
    "magnitude_convexity_gap", "condition_holds", "note", "convexity_tol",
]  # fmt: skip


@dataclass(frozen=True)
class ContractionReport:
    """Everything `analyze` measured on one vector.

    ratios: one row per density (RATIO_COLUMNS); curve: the sorted-magnitude curve
    (rank, fraction, magnitude, exact); convexity: the dict of `convexity(curve)`.
    """

    ratios: pd.DataFrame
    curve: pd.DataFrame
    convexity: dict


def analyze(
    u,
    densities,
    points: int = DEFAULT_POINTS,
    max_n: int = DEFAULT_MAX_N,
    seed: int = 0,
    share: float = CONVEXITY_SHARE,
) -> ContractionReport:
    """delta_emp at every density, the bounds, the sorted-magnitude curve and its convexity.

    NaN/Inf are removed first (counted in `nonfinite`; d counts finite values). The top
    max(k) magnitudes come from one exact selection and one sort of a candidate set, so all
    densities share it: delta(k) = sum_{i>k} |u|_(i)^2 / sum_i |u|_(i)^2, accumulated in float64.
    below_classic: delta < (1 - k/d)(1 - 1e-9); below_paper: delta <= (1 - k/d)^2 (1 + 1e-9)
    (`is_below_classic`, `is_below_paper`: decided beyond float rounding). condition_holds at
    each density: convexity_gap <= convexity_tol = share (k/d)(1 - k/d) (see `convexity`); the
    report's `convexity` dict is judged at the smallest density (the strictest tolerance). A
    zero vector has undefined ratios (NaN + note).
    """
    raw = list(np.atleast_1d(np.asarray(densities, dtype=object)))
    if not raw:
        raise ValueError("densities is empty; give at least one density in (0, 1]")
    for r in raw:
        k_from_density(r, 1)  # validates
    rhos = [float(r) for r in raw]
    points = _check_points(points)
    check_max_n(max_n)
    share = _check_share(share)
    values, nonfinite = finite_values(u)
    d = int(values.size)
    if d == 0:
        rows = [_ratio_row(r, 0, 0, nonfinite, math.nan, "no finite values") for r in rhos]
        return ContractionReport(_frame(rows), _curve_frame([], [], [], 0),
                                 convexity(None, min(rhos), share))
    ks = [k_from_density(r, d) for r in rhos]
    mags = _Magnitudes(values, max(ks), max_n, seed)
    curve = mags.curve(points)
    rows = []
    for r, k, tail in zip(rhos, ks, mags.tails(ks)):
        if mags.total == 0.0:
            rows.append(_ratio_row(r, d, k, nonfinite, math.nan, "zero vector: ratio undefined"))
            continue
        row = _ratio_row(r, d, k, nonfinite, kernel.delta_from_rest(tail, mags.total), "")
        conv = convexity(curve, r, share)
        row.update({key: conv[key] for key in ("convexity_gap", "magnitude_convexity_gap",
                                                "condition_holds")},
                   convexity_tol=conv["tol_effective"])
        rows.append(row)
    return ContractionReport(_frame(rows), curve, convexity(curve, min(rhos), share))


def topk_ratios(u, densities) -> pd.DataFrame:
    """`analyze(u, densities).ratios`: delta_emp and the bounds for each density, one sort."""
    return analyze(u, densities).ratios


def sorted_magnitudes(
    u, points: int = DEFAULT_POINTS, max_n: int = DEFAULT_MAX_N, seed: int = 0
) -> pd.DataFrame:
    """The sorted-magnitude curve |u|_(r) (largest first) at ~`points` log-spaced ranks r.

    Columns: rank (1..d), fraction (= rank/d), magnitude, exact. When d <= max(2e6, max_n)
    every point is an exact order statistic; otherwise the top max(k, 100 d / max_n) ranks are
    exact and the rest are the matching quantiles of a seeded subsample of max_n values
    (exact = False).
    """
    points = _check_points(points)
    values, _ = finite_values(u)
    if values.size == 0:
        return _curve_frame([], [], [], 0)
    return _Magnitudes(values, 1, max_n, seed).curve(points)


def convexity_tolerance(k: int, d: int, share: float = CONVEXITY_SHARE) -> float:
    """The largest convexity gap g for which the excess over the paper's bound that g allows,
    g (1 - (1 - k/d)^2), is at most `share` of the gap between the bounds, (k/d)(1 - k/d); plus
    SAMPLE_NOISE/d:  share (1 - k/d) / (2 - k/d) + 30/d."""
    bounds_gap = classic_bound(k, d) - paper_bound(k, d)
    return float(share) * bounds_gap / (1.0 - paper_bound(k, d)) + SAMPLE_NOISE / d


def convexity(curve: pd.DataFrame | None, density: float = DEFAULT_DENSITY,
              share: float = CONVEXITY_SHARE) -> dict:
    """Is the sorted squared-magnitude curve convex and decreasing to zero? A scale-free gap.

    With a(t) = |u|_(r)^2 at t = (r - 1/2)/d, extended by a(1) = 0, and h the greatest convex
    minorant (lower convex hull) of those points,

        convexity_gap = (integral of a - integral of h) / integral of a      (trapezoids)

    is 0 for a convex curve that falls to zero and 1/2 for a flat vector. The paper's bound
    delta <= (1-k/d)^2 holds for every k when a is convex decreasing to zero. In general, with
    a = h + r (r >= 0, integral R = g A, A the integral of a), the hull part obeys the bound:
    delta <= ((1-k/d)^2 (A - R) + R) / A, i.e.

        delta <= (1-k/d)^2 + g (1 - (1-k/d)^2)

    magnitude_convexity_gap is the same measure on |u|_(r) itself (the paper's wording; a
    convex |u| curve implies a convex squared one).

    condition_holds at `density` (k = k_from_density(density, d)): g <= tol_effective =
    convexity_tolerance(k, d, share), i.e. the excess that g allows is at most `share` of the
    gap (k/d)(1 - k/d) between 1 - k/d and (1 - k/d)^2 (plus 30/d on g for the random
    spacing of a finite sample's largest order statistics; a Gaussian sample has g ~ 10/d).
    A curve whose delta lies between the bounds, above the paper's by more than that share,
    therefore never meets the condition.
    """
    density = float(density)
    k_from_density(density, 1)  # validates
    share = _check_share(share)
    out = {"convexity_gap": math.nan, "magnitude_convexity_gap": math.nan,
           "condition_holds": False, "density": density, "share": share,
           "tol_effective": math.nan, "note": ""}
    if curve is None or len(curve) == 0:
        out["note"] = "no finite values"
        return out
    d = int(curve.attrs.get("d", curve["rank"].max()))
    out["tol_effective"] = convexity_tolerance(k_from_density(density, d), d, share)
    t = (curve["rank"].to_numpy(np.float64) - 0.5) / d
    mag = curve["magnitude"].to_numpy(np.float64)
    if not np.any(mag > 0):
        out["note"] = "zero vector: curve is identically 0"
        return out
    out["convexity_gap"] = _hull_gap(t, (mag / mag[0]) ** 2)
    out["magnitude_convexity_gap"] = _hull_gap(t, mag / mag[0])
    out["condition_holds"] = bool(out["convexity_gap"] <= out["tol_effective"])
    return out


def _hull_gap(t: np.ndarray, a: np.ndarray) -> float:
    """Relative area between the points (t, a) + (1, 0) and their lower convex hull."""
    tt = np.append(t, 1.0)
    aa = np.append(a, 0.0)
    hull = _lower_hull(tt, aa)
    h = np.interp(tt, tt[hull], aa[hull])
    area = float(np.trapezoid(aa, tt))
    return max(0.0, float(np.trapezoid(aa - h, tt)) / area) if area > 0 else math.nan


def _lower_hull(t: np.ndarray, a: np.ndarray) -> list[int]:
    """Indices of the lower convex hull of points sorted by t (Andrew's monotone chain)."""
    hull: list[int] = []
    for i in range(t.size):
        while len(hull) >= 2:
            o, p = hull[-2], hull[-1]
            cross = (t[p] - t[o]) * (a[i] - a[o]) - (a[p] - a[o]) * (t[i] - t[o])
            if cross > 0:
                break
            hull.pop()
        hull.append(i)
    return hull


class _Magnitudes:
    """The exact top magnitudes of a vector, its tail energies, and a subsample for the bulk.

    Small vectors (d <= 2e6) or large k: one full float64 sort. Otherwise threshold-then-verify:
    `sample_threshold` (topkscope.sparsify.engine) of a seeded subsample picks a candidate set
    (the kernel's chunked candidate pass `verified_candidates`), accepted when it numbers at least K (then it holds the top K),
    else everything is sorted; only the candidates are sorted. The elements below the threshold
    contribute their exact float64 sum of squares to every tail. Kept here rather than in the
    kernel: one selection serves every density and the curve, over chunked float64 sums.
    """

    def __init__(self, values: np.ndarray, kmax: int, max_n: int, seed: int) -> None:
        self.d = int(values.size)
        self.sub: np.ndarray | None = None
        small = self.d <= max(_EXACT_FULL_SORT, max_n) or kmax > self.d // 4
        if small or not self._candidates(values, kmax, max_n, seed):
            self.top = np.sort(np.abs(values.astype(np.float64)))[::-1]
            self.below = 0.0
        self.total = float(kernel.tail_sums(self.top, [0], self.below)[0])

    def _candidates(self, values: np.ndarray, kmax: int, max_n: int, seed: int) -> bool:
        d = self.d
        sub = np.sort(np.abs(subsample(values, max_n, np.random.default_rng(seed)).astype(np.float64)))
        need = max(kmax, math.ceil(100.0 * d / sub.size))  # exact ranks; beyond, >= 100 points
        thr = sample_threshold(sub, need, d)
        if not thr > 0.0:
            return False
        found = kernel.verified_candidates(values, need, thr, below=True)
        if found is None:
            return False  # the subsample misled the threshold; caller sorts everything
        cand, below = found
        cand = cand.astype(np.float64)
        self.top = np.sort(cand)[::-1]
        self.below = below
        self.sub = sub
        return True

    def tails(self, ks: list[int]) -> np.ndarray:
        """sum_{i > k} |u|_(i)^2 (float64) for each k <= number of exact top magnitudes."""
        return kernel.tail_sums(self.top, ks, self.below)

    def curve(self, points: int) -> pd.DataFrame:
        d = self.d
        ranks = np.unique(np.rint(np.geomspace(1, d, num=points)).astype(np.int64))
        n_top = self.top.size
        exact = ranks <= n_top
        mag = np.empty(ranks.size, dtype=np.float64)
        mag[exact] = self.top[ranks[exact] - 1]
        if not np.all(exact):
            m = self.sub.size
            # rank r from the top sits at ascending position m - (r - 1/2) m / d in the subsample
            pos = m - (ranks[~exact] - 0.5) * m / d
            mag[~exact] = np.interp(pos, np.arange(m, dtype=np.float64) + 0.5, self.sub)
        return _curve_frame(ranks, ranks / d, mag, d, exact)


def _curve_frame(ranks, fraction, mag, d: int, exact=None) -> pd.DataFrame:
    frame = pd.DataFrame({
        "rank": np.asarray(ranks, dtype=np.int64),
        "fraction": np.asarray(fraction, dtype=np.float64),
        "magnitude": np.asarray(mag, dtype=np.float64),
        "exact": np.ones(len(ranks), dtype=bool) if exact is None else np.asarray(exact, bool),
    })  # fmt: skip
    frame.attrs["d"] = int(d)
    return frame


def _ratio_row(rho: float, d: int, k: int, nonfinite: int, ratio: float, note: str) -> dict:
    row = dict.fromkeys(RATIO_COLUMNS, math.nan)
    row.update(density=rho, d=d, k=k, nonfinite=nonfinite, topk_ratio=ratio, note=note,
               condition_holds=False)  # fmt: skip
    if d > 0:
        row.update(classic_bound=classic_bound(k, d), paper_bound=paper_bound(k, d),
                   gaussian_ratio=gaussian_ratio(k, d))  # fmt: skip
    defined = not math.isnan(ratio)
    row["below_classic"] = bool(defined and is_below_classic(ratio, row["classic_bound"]))
    row["below_paper"] = bool(defined and is_below_paper(ratio, row["paper_bound"]))
    return row


def _check_share(share: float) -> float:
    share = float(share)
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share = {share!r} is outside the allowed range [0, 1]")
    return share


def _frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=RATIO_COLUMNS)


def _check_points(points: int) -> int:
    if isinstance(points, bool) or int(points) != points or int(points) < 3:
        raise ValueError(f"points = {points!r} must be an integer >= 3")
    return int(points)
