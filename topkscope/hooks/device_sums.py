"""Per-segment reductions in torch, for vectors that live on an accelerator.

The same shifted power sums as `chunked_sums` (s_p = sum (x_i - c)^p, p = 1..4, per segment,
float64), computed with torch ops on the vector's own device: one float64 work tensor of
4 x K x d, torch.segment_reduce for the per-segment sums. CPU vectors take the chunked numpy
path instead (`moments.power_sums` chooses); this one is also run on the CPU by the tests.
"""

from __future__ import annotations

import numpy as np
import torch

_F64 = torch.float64
_EXACT_F32_COUNT = 1 << 24  # float32 sums of 0/1 values are exact below this many terms


def starts_of(lengths: tuple[int, ...]) -> np.ndarray:
    """Start offset of each consecutive segment."""
    return np.concatenate([[0], np.cumsum(lengths[:-1], dtype=np.int64)])


# how to reduce a segment: torch.segment_reduce name, numpy ufunc, per-part torch reduction
_REDUCTIONS = {
    "sum": ("sum", np.add, lambda part: part.sum(-1)),
    "max": ("max", np.maximum, lambda part: part.amax(-1)),
}


def _segment_reduce(x: torch.Tensor, lengths: tuple[int, ...], how: str,
                    fused: bool | None) -> torch.Tensor:
    """Reduce consecutive segments of the last dimension: (..., d) -> (..., S).

    On the CPU one numpy reduceat over a zero-copy view (fused=False: one torch reduction per
    segment); elsewhere torch.segment_reduce.
    """
    name, ufunc, per_part = _REDUCTIONS[how]
    if len(lengths) == 1:
        return per_part(x)[..., None]
    if fused if fused is not None else x.device.type != "cpu":
        lens = torch.tensor(lengths, device=x.device).expand(*x.shape[:-1], len(lengths))
        return torch.segment_reduce(x, name, lengths=lens.contiguous(), axis=x.dim() - 1)
    if fused is None and x.is_contiguous():
        return torch.from_numpy(ufunc.reduceat(x.numpy(), starts_of(lengths), axis=-1))
    return torch.stack([per_part(part) for part in x.split(lengths, -1)], -1)


def segment_sum(x: torch.Tensor, lengths: tuple[int, ...],
                fused: bool | None = None) -> torch.Tensor:
    """Sums over consecutive segments of the last dimension: (..., d) -> (..., S)."""
    return _segment_reduce(x, lengths, "sum", fused)


def segment_max(x: torch.Tensor, lengths: tuple[int, ...],
                fused: bool | None = None) -> torch.Tensor:
    """Maxima over consecutive segments of the last dimension (NaN propagates)."""
    return _segment_reduce(x, lengths, "max", fused)


def device_power_sums(x: torch.Tensor, absx: torch.Tensor, lengths: tuple[int, ...]
                      ) -> tuple[torch.Tensor, ...]:
    """(shift (K,), sums (4, K, S), max_abs, nonzero, nonfinite (K, S)) of x (K, d), on x's
    device; absx = |x|. The shift is each vector's mean (any shift works)."""
    k_vecs, d = x.shape
    dev = x.device
    c = x.sum(1).to(_F64) / d
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
    return c, sums, seg_max, nonzero, bad
