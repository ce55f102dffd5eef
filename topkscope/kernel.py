"""The statistics kernel: each formula the recorder, the statistics and the sparsifiers share,
written once. A neutral module: neither `hooks` nor `analysis` owns it, and it imports nothing of
the project but the neutral facts (`bounds`). numpy throughout; torch only when given a tensor.

Contraction of a vector x (d values) by a selection I, accumulated in float64:

    delta(x, I) = ||x - x_I||^2 / ||x||^2 = rest / total = (total - kept) / total
                  rest = sum_{i not in I} x_i^2,  kept = sum_{i in I} x_i^2,  total = sum_i x_i^2
    topk_ratio(x, k) = delta(x, TopK(x)) = sum_{i > k} |x|_(i)^2 / sum_i |x|_(i)^2

(`delta_from_rest`, `delta_from_kept`, `selection_ratio`, `topk_ratio`; the tail of Top-k from
the sorted top magnitudes: `tail_sums`). NaN where total = 0:
nothing to contract.

Recall of a selection I against the exact top-k set T_k (`recall`, `recall_given_kth`). With
tau the k-th largest |x|, T_k is not unique when magnitudes tie at tau; the most favourable T_k
is taken:

    recall = (#{i in I : |x_i| > tau} + min(#{i in I : |x_i| = tau}, k - #{i : |x_i| > tau})) / k

Moments (`central_sums`, `central_from_power_sums`, `skew_kurtosis`). With central sums
M_p = sum (x_i - mean)^p and m_p = M_p / n:

    skew g1 = m3 / m2^(3/2),   excess kurtosis g2 = m4 / m2^2 - 3     (NaN where m2 <= 0)

and from shifted power sums s_p = sum (x_i - c)^p (any shift c), with m = s1 / n:

    M2 = s2 - s1 m,  M3 = s3 - 3 m s2 + 2 n m^3,  M4 = s4 - 4 m s3 + 6 m^2 s2 - 3 n m^4

Tail index (`hill`, `hill_interval`), Hill (1975, Ann. Statist. 3, 1163), on the k largest
magnitudes |x|_(1) >= ... >= |x|_(k) (sorted descending), the k-th as the threshold:

    m = k - 1,   alpha = m / sum_{i=1..m} ln(|x|_(i) / |x|_(k))       (P(|X| > t) ~ t^-alpha)
    interval: alpha (1 -+ z / sqrt(m)), z = Phi^-1((1 + level) / 2)    (asymptotic normal,
              Hall 1982: sqrt(m) (alpha^ - alpha) -> N(0, alpha^2); it covers the sampling
              error only, not the bias of a tail that is not Pareto above |x|_(k))

NaN where m < HILL_MIN_ORDER (too few order statistics to say anything), where |x|_(k) = 0
(no finite logarithm) or where every one of the m equals |x|_(k).

The accept step of threshold-then-verify (`verified`, `verified_candidates`): a guessed
threshold t is accepted when the candidates {i : |x_i| >= t} number at least k (or a lower
bound on their number does): then t is at most the k-th largest |x|, so the candidates hold the
whole top-k set and anything computed from them is exact. A guess only decides the cost.

Arrays from anywhere (`to_numpy`, `as_float_array`): numpy arrays, sequences and torch tensors on
any device become host numpy arrays of the same shape.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from topkscope.bounds import check_kd

CHUNK = 1 << 20  # elements per float64 chunk of a host pass (8 MiB)


# --- arrays from anywhere ----------------------------------------------------------------------

def _is_tensor(x) -> bool:
    return type(x).__module__.startswith("torch")


def to_numpy(x) -> np.ndarray:
    """x as a host numpy array of the same shape and dtype (a view where possible).

    A torch tensor is detached and brought to the host; bfloat16 and float16 tensors become
    float32 (numpy has no bfloat16). Anything else goes through np.asarray.
    """
    if _is_tensor(x):
        import torch  # only reached when x already is a tensor

        t = x.detach()
        if t.dtype in (torch.float16, torch.bfloat16):
            t = t.float()
        return t.cpu().numpy()
    return np.asarray(x)


def as_float_array(x) -> np.ndarray:
    """`to_numpy(x)` as real floats: float32 and float64 kept (no copy); float16, bool and
    integers of at most 2 bytes become float32, wider integers and other real types float64.
    Raises ValueError for complex or non-numeric values."""
    arr = to_numpy(x)
    if arr.dtype.kind == "c":
        raise ValueError(f"x has complex dtype {arr.dtype}; only real values are allowed")
    if arr.dtype == np.float16 or arr.dtype.kind in "biu":
        return arr.astype(np.float32 if arr.dtype.itemsize <= 2 else np.float64)
    if arr.dtype.kind != "f":
        try:
            return arr.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"x must hold real numbers, got dtype {arr.dtype}") from None
    return arr


def finite_float64(x, name: str = "u") -> np.ndarray:
    """x flattened to float64; ValueError naming how many values are NaN/Inf if any are."""
    arr = as_float_array(x).ravel().astype(np.float64, copy=False)
    if not np.all(np.isfinite(arr)):
        bad = int(np.count_nonzero(~np.isfinite(arr)))
        raise ValueError(f"{name} has {bad} non-finite values (NaN/Inf) of {arr.size}; "
                         "remove them first")
    return arr


# --- contraction -------------------------------------------------------------------------------

def delta_from_rest(rest, total):
    """delta = rest / total from float64 sums of squares (rest: what the selection leaves);
    NaN where total = 0. Scalars or arrays."""
    rest, total = np.asarray(rest, dtype=np.float64), np.asarray(total, dtype=np.float64)
    with np.errstate(all="ignore"):
        out = np.where(total == 0, np.nan, rest / total)
    return out[()]


def delta_from_kept(kept, total, complete=False):
    """delta = (total - kept) / total from float64 sums of squares (kept: what the selection
    sends), clipped at 0 (rounding when nearly all is kept); exactly 0 where `complete` (the
    selection is the whole vector); NaN where total = 0. Scalars or broadcasting arrays."""
    kept, total = np.asarray(kept, dtype=np.float64), np.asarray(total, dtype=np.float64)
    with np.errstate(all="ignore"):
        ratio = np.maximum((total - kept) / total, 0.0)
    ratio = np.where(complete, 0.0, ratio)
    return np.where(total == 0, np.nan, ratio)[()]


def _blocks(size: int, ks, starts) -> tuple:
    """(single, starts, ends, ks (R, m)) of top magnitudes laid out as blocks (`tail_sums`,
    `hill`); ValueError for a k outside [0, its block's length]."""
    single = starts is None
    starts = np.zeros(1, dtype=np.int64) if single else np.asarray(starts, dtype=np.int64)
    ks = np.atleast_2d(np.asarray(ks, dtype=np.int64))
    ends = np.append(starts[1:], size)
    if ks.size and not (np.all(ks >= 0) and np.all(ks <= (ends - starts)[:, None])):
        raise ValueError(f"k from {ks.min()} to {ks.max()}; allowed: 0 ... the number of top "
                         "magnitudes in its block")
    return single, starts, ends, ks


def tail_sums(top, ks, below=0.0, starts=None) -> np.ndarray:
    """sum_{i > k} |x|_(i)^2 for each k in ks (float64): what Top-k leaves of x's energy.

    top: the exact largest magnitudes of x sorted descending (at least max(ks) of them); below:
    the float64 sum of squares of every other element. With starts (R,), top is R such blocks
    laid end to end (block r from starts[r] to the next start), ks is (R, m) and the result
    (R, m), each tail within its own block. The squares are summed between consecutive asked
    k (one reduceat pass), then those few sums are added from the smallest upwards within the
    block, so a small tail is neither the difference of two large sums nor touched by another
    block. The one top-k tail engine: `topk_ratio`, the recorder's row sums and the
    statistics' float64 tails use it.
    """
    sq = np.square(np.asarray(top, dtype=np.float64))
    single, starts, ends, ks = _blocks(sq.size, ks, starts)
    order = np.argsort(ks, axis=1, kind="stable")
    bounds = np.concatenate([starts[:, None] + np.take_along_axis(ks, order, 1), ends[:, None]],
                            axis=1)  # (R, m + 1), non-decreasing when flattened
    flat = bounds.ravel()
    padded = np.append(sq, 0.0)  # a bound may be sq.size (k = the block's length, at the end)
    pieces = np.add.reduceat(padded, flat).reshape(bounds.shape)[:, :-1]
    pieces[np.diff(bounds, axis=1) == 0] = 0.0  # reduceat gives sq[i] for an empty piece
    tails = np.cumsum(pieces[:, ::-1], axis=1)[:, ::-1]  # sorted-k tails, smallest first
    out = np.empty_like(tails)
    np.put_along_axis(out, order, tails, 1)
    out += np.asarray(below, dtype=np.float64).reshape(-1, 1)
    return out[0] if single else out


def topk_ratio(u, k: int) -> float:
    """||u - TopK(u)||^2 / ||u||^2 in float64 (u finite: ValueError otherwise; k in [0, d]).

    One partition of the squares at d - k: the d - k smallest are `below`, the k largest the
    top of `tail_sums`. 1 for k = 0, 0 for k = d; NaN (with no division) when u is all zeros.
    """
    x = finite_float64(u)
    k, d = check_kd(k, x.size)
    sq = x * x
    total = float(sq.sum())
    if total == 0.0:
        return math.nan  # undefined: nothing to contract
    if k == 0:
        return 1.0
    if k == d:
        return 0.0
    parted = np.partition(sq, d - k - 1)
    top = np.sqrt(np.sort(parted[d - k :])[::-1])
    rest = tail_sums(top, [k], below=float(parted[: d - k].sum()))[0]
    return float(delta_from_rest(rest, total))


def selection_ratio(x: np.ndarray, selected: np.ndarray) -> float:
    """||x - x_I||^2 / ||x||^2 for float64 x and unique indices I, summing what I leaves."""
    sq = x * x
    keep = np.ones(x.size, dtype=bool)
    keep[selected] = False
    return float(delta_from_rest(float(np.sum(sq, where=keep)), float(sq.sum())))


# --- tail index ----------------------------------------------------------------------------------

HILL_MIN_ORDER = 10  # fewer order statistics above the threshold: the Hill index is NaN


def hill(top, ks, starts=None) -> np.ndarray:
    """The Hill tail index alpha on the k largest magnitudes, for each k in ks (module formula):
    m = k - 1 order statistics over the k-th, float64.

    top: the exact largest magnitudes sorted descending (at least max(ks) of them). With starts
    (R,), top is R such blocks laid end to end (as in `tail_sums`), ks is (R, m) and the
    result (R, m). NaN where k - 1 < HILL_MIN_ORDER, the k-th magnitude is 0 or non-finite, or
    the sum of logarithms is 0 (all m tie with the k-th).
    """
    with np.errstate(divide="ignore", invalid="ignore"):  # log 0: a threshold of 0, NaN below
        logs = np.log(np.asarray(top, dtype=np.float64))
    single, starts, _, ks = _blocks(logs.size, ks, starts)
    m = ks - 1
    ok = m >= HILL_MIN_ORDER
    at = np.where(ok, starts[:, None] + ks - 1, 0)  # the k-th of each block
    cum = np.concatenate([[0.0], np.cumsum(logs)])
    with np.errstate(all="ignore"):
        threshold = logs[at] if logs.size else np.full(ks.shape, np.nan)
        spread = cum[np.where(ok, at, 0)] - cum[starts][:, None] - m * threshold
        alpha = m / spread
    good = ok & np.isfinite(threshold) & (spread > 0)
    out = np.where(good, alpha, np.nan)
    return out[0] if single else out


def hill_interval(alpha, k, level: float = 0.95) -> tuple:
    """(low, high) of the asymptotic normal interval of `hill`'s alpha on the k largest (module
    formula, m = k - 1); NaN where alpha is."""
    from statistics import NormalDist

    if not 0.0 < level < 1.0:
        raise ValueError(f"level = {level} is outside the allowed range (0, 1)")
    z = NormalDist().inv_cdf((1.0 + level) / 2.0)
    alpha = np.asarray(alpha, dtype=np.float64)
    m = np.maximum(np.asarray(k, dtype=np.float64) - 1.0, 1.0)
    half = alpha * z / np.sqrt(m)
    return (alpha - half)[()], (alpha + half)[()]


# --- recall with ties ----------------------------------------------------------------------------

def kth_largest(mag: np.ndarray, k: int) -> tuple[float, int]:
    """(tau, #{|x| > tau}): the k-th largest of the magnitudes mag (1 <= k <= mag.size) and the
    number of magnitudes strictly above it."""
    tau = float(np.partition(mag, mag.size - k)[mag.size - k])
    return tau, int(np.count_nonzero(mag > tau))


def recall_given_kth(selected_mag, kth: float, n_above: int, k: int) -> float:
    """|I intersect T_k| / k, ties at the k-th magnitude counted as favourably as T_k allows.

    selected_mag: |x_i| for i in I (numpy array or torch tensor, on any device); kth: the k-th
    largest |x|; n_above: #{i : |x_i| > kth}.
    """
    strictly = int((selected_mag > kth).sum())
    tied = int((selected_mag == kth).sum())
    return (strictly + min(tied, k - n_above)) / k


def recall(mag: np.ndarray, selected: np.ndarray, k: int) -> float:
    """Recall of the selection `selected` (unique indices) against the exact top-k of the
    magnitudes mag, with ties (`recall_given_kth`)."""
    kth, n_above = kth_largest(mag, k)
    return recall_given_kth(mag[selected], kth, n_above, k)


# --- moments -----------------------------------------------------------------------------------

class CentralSums(NamedTuple):
    """n, the mean, and the central sums M_p = sum (x - mean)^p for p = 2, 3, 4 (float64)."""

    n: int
    mean: float
    m2: float
    m3: float
    m4: float


def central_sums(x, starts=None) -> CentralSums:
    """Two-pass float64 central sums of a 1-D numpy array or torch tensor.

    numpy: the mean from one float64-accumulated sum, then chunks of CHUNK elements (so a
    float32 vector is never copied whole). torch: on the tensor's own device (a GPU vector
    is not copied to the host); one float64 copy of x.

    With starts (R,) (numpy only), x is R non-empty blocks laid end to end (as in
    `tail_sums`) and every field is an (R,) array: each block's mean, then its central sums
    about that mean, by the same two passes with one reduceat per sum for all the blocks (many
    short blocks cost no call each). Equal to the block-by-block sums to float64 rounding.
    """
    if starts is not None:
        x = np.asarray(x, dtype=np.float64)
        starts = np.asarray(starts, dtype=np.int64)
        lengths = np.diff(starts, append=x.size)
        mean = np.add.reduceat(x, starts) / lengths
        y = x - np.repeat(mean, lengths)
        y2 = y * y
        m2, m3, m4 = np.add.reduceat(np.stack([y2, y2 * y, y2 * y2]), starts, axis=1)
        return CentralSums(lengths, mean, m2, m3, m4)
    if _is_tensor(x):
        import torch  # only reached when x already is a tensor

        x64 = x.to(torch.float64)
        n = x64.numel()
        if n == 0:
            return CentralSums(0, math.nan, math.nan, math.nan, math.nan)
        mu = x64.sum() / n
        y = x64 - mu
        y2 = y * y
        mean, s2, s3, s4 = torch.stack([mu, y2.sum(), (y2 * y).sum(), (y2 * y2).sum()]).tolist()
        return CentralSums(n, mean, s2, s3, s4)
    n = int(x.size)
    if n == 0:
        return CentralSums(0, math.nan, math.nan, math.nan, math.nan)
    mean = float(np.sum(x, dtype=np.float64)) / n
    s2 = s3 = s4 = 0.0
    for start in range(0, n, CHUNK):
        c = x[start : start + CHUNK].astype(np.float64)
        c -= mean
        c2 = c * c
        s2 += float(c2.sum())
        s3 += float(np.dot(c2, c))
        s4 += float(np.dot(c2, c2))
    return CentralSums(n, mean, s2, s3, s4)


def central_from_power_sums(n, s) -> tuple:
    """(m, M2, M3, M4) from shifted power sums s = (s1, s2, s3, s4) over n elements: m is the
    mean minus the shift, M_p the central sums (module formulas). Scalars or arrays."""
    s1, s2, s3, s4 = s
    m = s1 / n
    m2 = s2 - s1 * m
    m3 = s3 - 3 * m * s2 + 2 * n * m**3
    m4 = s4 - 4 * m * s3 + 6 * m * m * s2 - 3 * n * m**4
    return m, m2, m3, m4


def skewness(m2, m3):
    """g1 = m3 / m2^(3/2) from central moments m_p = M_p / n; NaN where m2 is not > 0."""
    m2, m3 = np.asarray(m2, dtype=np.float64), np.asarray(m3, dtype=np.float64)
    spread = m2 > 0
    safe = np.where(spread, m2, 1.0)
    with np.errstate(all="ignore"):
        return np.where(spread, m3 / safe**1.5, np.nan)[()]


def excess_kurtosis(m2, m4):
    """g2 = m4 / m2^2 - 3 from moments m_p (about the mean, or any centre the caller chose);
    NaN where m2 is not > 0."""
    m2, m4 = np.asarray(m2, dtype=np.float64), np.asarray(m4, dtype=np.float64)
    spread = m2 > 0
    safe = np.where(spread, m2, 1.0)
    with np.errstate(all="ignore"):
        return np.where(spread, m4 / (safe * safe) - 3.0, np.nan)[()]


def skew_kurtosis(m2, m3, m4) -> tuple:
    """(g1, g2): `skewness` and `excess_kurtosis` of central moments m_p = M_p / n."""
    return skewness(m2, m3), excess_kurtosis(m2, m4)


# --- the accept step of threshold-then-verify -----------------------------------------------------

def verified(count, k):
    """Is a threshold t safe for the top k? count = #{i : |x_i| >= t}, or any lower bound on it
    (e.g. the number of blocks whose maximum reaches t): count >= k means t <= the k-th largest
    |x|, so {i : |x_i| >= t} holds the whole top-k set. Scalars (a bool) or arrays."""
    return count >= k


class SegmentCandidates(NamedTuple):
    """The candidates of a segmented pass (`verified_candidates` with segments): values and
    segment are the magnitudes |x_i| >= threshold[segment_i] in input order and their segments;
    counts[s] their number in segment s; verified[s] = `verified`(counts[s], k[s]) (then
    segment s's candidates hold its k[s] largest)."""

    values: np.ndarray
    segment: np.ndarray
    counts: np.ndarray
    verified: np.ndarray


def verified_candidates(mag, k, threshold, *, below: bool = False, segments=None,
                        counted: bool = False):
    """The magnitudes |x_i| >= threshold of the 1-D x = mag (numpy: signed values are taken as
    |x|; torch: magnitudes) when they are `verified` (then they hold the k largest, and anything
    computed from them is exact). None when there are fewer than k (the guess was too high: the
    caller falls back).

    The one candidate pass of threshold-then-verify: the recorder's row tops (per segment), the
    torch engine `top_values`, Gaussian-k's block counts and the statistics' float64 tails call
    it. A numpy x is walked in chunks of CHUNK (no whole-vector temporary). Options:
    below=True (numpy only) returns (candidates, the float64 sum of squares of every other
    element) instead, or None; counted=True returns (candidates or None, their number), for a
    caller that steers its next guess by the count; segments (numpy only: the segment of each
    element, non-negative ints) makes k and threshold per-segment arrays and returns
    `SegmentCandidates` (every segment at once; never None).
    """
    if _is_tensor(mag):
        if below or segments is not None:
            raise ValueError("below=True and segments need a numpy array")
        cand = mag[mag >= threshold]  # torch: given as magnitudes (the engine's |u|)
        found = cand if verified(cand.numel(), k) else None
        return (found, cand.numel()) if counted else found
    if segments is not None:
        threshold = np.asarray(threshold)
    parts, labels, rest = [np.abs(mag[:0])], [], 0.0
    for start in range(0, mag.size, CHUNK):
        c = np.abs(mag[start : start + CHUNK])
        if segments is None:
            keep = c >= threshold
        else:
            seg = segments[start : start + CHUNK]
            keep = c >= threshold[seg]
            labels.append(seg[keep])
        parts.append(c[keep])
        if below:
            left = c[~keep].astype(np.float64)
            rest += float(np.dot(left, left))
    cand = np.concatenate(parts) if len(parts) > 2 else parts[-1]
    if segments is not None:
        seg = np.concatenate(labels) if labels else np.zeros(0, dtype=np.int64)
        counts = np.bincount(seg, minlength=threshold.size)
        return SegmentCandidates(cand, seg, counts, verified(counts, np.asarray(k)))
    found = cand if verified(cand.size, k) else None
    if found is not None and below:
        found = (cand, rest)
    return (found, cand.size) if counted else found
