"""Moments of every row (whole model + layers) of several same-length vectors at once.

For a vector x of n elements (population moments, as numpy/scipy compute them by default):

    mean = sum(x) / n                 M_p = sum((x - mean)^p)
    std  = sqrt(M_2 / n)              skew = (M_3 / n) / std^3
    excess_kurtosis = (M_4 / n) / std^4 - 3        norm = sqrt(sum(x^2))
    max_abs = max |x|     zero_frac = #(x == 0) / n     nonfinite = #(x is NaN or +-Inf)

How: one float64 pass writes y = x - c (c = the vector's mean, any shift works), y^2, y^3,
y^4; per-segment sums of those four rows give shifted power sums s_p, and

    m = s_1/n,  M_2 = s_2 - n m^2,  M_3 = s_3 - 3 m s_2 + 2 n m^3,
    M_4 = s_4 - 4 m s_3 + 6 m^2 s_2 - 3 n m^4.

The whole-model row adds the segment sums (same shift). A row whose own mean sits far from
c (n m^2 > 100 M_2, where the expansion would lose digits) is recomputed exactly with a
two-pass float64 computation. Rows with non-finite values get NaN moments. Everything stays
on the vectors' device.

The residual e = u with u[I] = 0 needs no pass of its own: its shifted sums are u's minus
the selected entries' terms, sum_{i in I} ((u_i - c)^p - (0 - c)^p) (`residual_sums`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from topkscope.hooks.segments import RowPlan

_F64 = torch.float64
_REFINE_RATIO = 100.0  # recompute a row exactly when n m^2 > this * M_2
_CANCEL_RATIO = 1e6    # ... or when a subtraction removed more than this share of its mass
_EXACT_F32_COUNT = 1 << 24  # float32 sums of 0/1 values are exact below this many terms


@dataclass
class PowerSums:
    """Per-segment sums of K vectors: shift c (K,), sums (4, K, S), and (K, S) counts/maxima."""

    shift: torch.Tensor
    sums: torch.Tensor
    max_abs: torch.Tensor
    nonzero: torch.Tensor
    nonfinite: torch.Tensor
    # (2, K, S) the even sums these were obtained from by subtraction (None: direct sums);
    # where almost all of that mass was removed, the row is recomputed exactly
    subtracted_from: torch.Tensor | None = None

    def pick(self, i: int) -> PowerSums:
        """The sums of vector i alone (K = 1)."""
        sub = None if self.subtracted_from is None else self.subtracted_from[:, i : i + 1]
        return PowerSums(self.shift[i : i + 1], self.sums[:, i : i + 1], self.max_abs[i : i + 1],
                         self.nonzero[i : i + 1], self.nonfinite[i : i + 1], sub)

    @staticmethod
    def cat(parts: list[PowerSums]) -> PowerSums:
        if len(parts) == 1:
            return parts[0]
        subs = [p.sums[1::2] if p.subtracted_from is None else p.subtracted_from for p in parts]
        derived = any(p.subtracted_from is not None for p in parts)
        return PowerSums(torch.cat([p.shift for p in parts]),
                         torch.cat([p.sums for p in parts], dim=1),
                         torch.cat([p.max_abs for p in parts]),
                         torch.cat([p.nonzero for p in parts]),
                         torch.cat([p.nonfinite for p in parts]),
                         torch.cat(subs, dim=1) if derived else None)


@dataclass
class Moments:
    """(K, R) float64 tensors: one row per vector, one column per plan row."""

    mean: torch.Tensor
    std: torch.Tensor
    skew: torch.Tensor
    excess_kurtosis: torch.Tensor
    sumsq: torch.Tensor
    max_abs: torch.Tensor
    zero_frac: torch.Tensor
    nonfinite: torch.Tensor

    @property
    def norm(self) -> torch.Tensor:
        return self.sumsq.sqrt()


def _starts_of(lengths: tuple[int, ...]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths[:-1], dtype=np.int64)])


def segment_sum(x: torch.Tensor, lengths: tuple[int, ...],
                fused: bool | None = None) -> torch.Tensor:
    """Sums over consecutive segments of the last dimension: (..., d) -> (..., S).

    On the CPU one numpy reduceat over a zero-copy view (fused=False: one torch sum per
    segment); elsewhere torch.segment_reduce.
    """
    if len(lengths) == 1:
        return x.sum(-1, keepdim=True)
    if fused if fused is not None else x.device.type != "cpu":
        lens = torch.tensor(lengths, device=x.device).expand(*x.shape[:-1], len(lengths))
        return torch.segment_reduce(x, "sum", lengths=lens.contiguous(), axis=x.dim() - 1)
    if fused is None and x.is_contiguous():
        out = np.add.reduceat(x.numpy(), _starts_of(lengths), axis=-1)
        return torch.from_numpy(out)
    return torch.stack([part.sum(-1) for part in x.split(lengths, -1)], -1)


def segment_max(x: torch.Tensor, lengths: tuple[int, ...],
                fused: bool | None = None) -> torch.Tensor:
    """Maxima over consecutive segments of the last dimension (NaN propagates)."""
    if len(lengths) == 1:
        return x.amax(-1, keepdim=True)
    if fused if fused is not None else x.device.type != "cpu":
        lens = torch.tensor(lengths, device=x.device).expand(*x.shape[:-1], len(lengths))
        return torch.segment_reduce(x, "max", lengths=lens.contiguous(), axis=x.dim() - 1)
    if fused is None and x.is_contiguous():
        out = np.maximum.reduceat(x.numpy(), _starts_of(lengths), axis=-1)
        return torch.from_numpy(out)
    return torch.stack([part.amax(-1) for part in x.split(lengths, -1)], -1)


def power_sums(x: torch.Tensor, absx: torch.Tensor, lengths: tuple[int, ...]) -> PowerSums:
    """Shifted power sums per segment of each of the K vectors in x (K, d); absx = x.abs()."""
    k_vecs, d = x.shape
    dev = x.device
    c = x.sum(1).to(_F64) / d  # an approximate mean is enough: it is only a shift
    finite = bool(torch.isfinite(c).all())
    if not finite:
        c = torch.where(torch.isfinite(c), c, torch.zeros_like(c))
    powers = torch.empty((4, k_vecs, d), dtype=_F64, device=dev)
    y = powers[0]
    torch.sub(x, c[:, None], out=y)
    torch.mul(y, y, out=powers[1])
    torch.mul(powers[1], y, out=powers[2])
    torch.mul(powers[1], powers[1], out=powers[3])
    sums = segment_sum(powers, lengths)  # (4, K, S)
    del powers, y
    seg_max = segment_max(absx, lengths).to(_F64)
    if not finite:
        bad = segment_sum((~torch.isfinite(x)).to(_F64), lengths)
        nonzero = segment_sum((x != 0).to(_F64), lengths)
    else:
        bad = torch.zeros((k_vecs, len(lengths)), dtype=_F64, device=dev)
        if absx.dtype == torch.float32 and max(lengths) < _EXACT_F32_COUNT:
            nonzero = segment_sum(absx.sign(), lengths).to(_F64)
        else:
            nonzero = segment_sum(absx.sign().to(_F64), lengths)
    return PowerSums(c, sums, seg_max, nonzero, bad)


def residual_sums(u_sums: PowerSums, u: torch.Tensor, selected: torch.Tensor,
                  e_abs: torch.Tensor, starts: torch.Tensor,
                  lengths: tuple[int, ...]) -> PowerSums:
    """Power sums of e = u with u[selected] = 0, from u's (one vector) and the selected terms.

    selected must hold unique indices; e_abs (1, d) = |e| gives the per-segment maxima.
    """
    c = u_sums.shift  # (1,)
    seg = torch.bucketize(selected, starts, right=True) - 1
    y = u[selected].to(_F64) - c
    y0 = -c
    terms = torch.stack([y - y0, y * y - y0 * y0, y**3 - y0**3, y**4 - y0**4])  # (4, m)
    delta = torch.zeros((4, len(lengths)), dtype=_F64, device=u.device).index_add_(1, seg, terms)
    lost = torch.zeros(len(lengths), dtype=_F64, device=u.device).index_add_(
        0, seg, (u[selected] != 0).to(_F64))
    return PowerSums(c, u_sums.sums - delta[:, None, :], segment_max(e_abs, lengths).to(_F64),
                     u_sums.nonzero - lost[None, :], u_sums.nonfinite, u_sums.sums[1::2])


def _central(n: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """(m, M2, M3, M4) from shifted power sums s = (s1, s2, s3, s4) over n elements."""
    s1, s2, s3, s4 = s
    m = s1 / n
    m2 = s2 - s1 * m
    m3 = s3 - 3 * m * s2 + 2 * n * m**3
    m4 = s4 - 4 * m * s3 + 6 * m * m * s2 - 3 * n * m**4
    return m, m2, m3, m4


def _exact(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Two-pass float64 (mean, M2, M3, M4) of one 1-D slice."""
    x = x.to(_F64)
    mu = x.sum() / x.numel()
    y = x - mu
    y2 = y * y
    return mu, y2.sum(), (y2 * y).sum(), (y2 * y2).sum()


def row_moments(ps: PowerSums, plan: RowPlan, vectors: list[torch.Tensor]) -> Moments:
    """Moments of every plan row from power sums; vectors[k] is vector k (for exact reruns)."""
    lengths = plan.segments.lengths
    dev = ps.sums.device
    cols = list(plan.segments.named) if plan.per_layer else []
    seg_n = torch.tensor(lengths, dtype=_F64, device=dev)
    n = torch.cat([seg_n.sum().reshape(1), seg_n[cols]])  # (R,)

    def rows(t: torch.Tensor, reduce) -> torch.Tensor:  # whole model, then named segments
        return torch.cat([reduce(t), t[..., cols]], -1)

    s = rows(ps.sums, lambda t: t.sum(-1, keepdim=True))  # (4, K, R)
    m, m2, m3, m4 = _central(n, s)
    mean = ps.shift[:, None] + m
    max_abs = rows(ps.max_abs, lambda t: t.amax(-1, keepdim=True))
    zeros = n - rows(ps.nonzero, lambda t: t.sum(-1, keepdim=True))
    nonfinite = rows(ps.nonfinite, lambda t: t.sum(-1, keepdim=True))

    # rows where the shifted expansion or a subtraction would cancel digits: recompute exactly
    risky = (n * m * m > _REFINE_RATIO * m2) | (m2 <= 0)
    if ps.subtracted_from is not None:
        before = rows(ps.subtracted_from, lambda t: t.sum(-1, keepdim=True))  # (2, K, R)
        risky |= (before > _CANCEL_RATIO * s[1::2]).any(0)
    risky &= nonfinite == 0
    if bool(risky.any()):
        for kv, r in risky.nonzero().tolist():
            a = int(plan.starts[r])
            mu, e2, e3, e4 = _exact(vectors[kv][a : a + int(plan.numel[r])])
            mean[kv, r], m2[kv, r], m3[kv, r], m4[kv, r] = mu, e2, e3, e4

    var = m2 / n
    flat = var <= 0
    safe = torch.where(flat, torch.ones_like(var), var)
    nan = torch.full_like(var, float("nan"))
    skew = torch.where(flat, nan, (m3 / n) / safe**1.5)
    kurt = torch.where(flat, nan, (m4 / n) / (safe * safe) - 3.0)
    sumsq = m2 + n * mean * mean
    std = var.clamp_min(0).sqrt()
    broken = nonfinite > 0
    if bool(broken.any()):
        mean, std, skew, kurt, sumsq = (
            torch.where(broken, nan, t) for t in (mean, std, skew, kurt, sumsq)
        )
    return Moments(mean, std, skew, kurt, sumsq, max_abs, zeros / n, nonfinite)
