"""Histograms scaled by each row's own spread, with underflow and overflow bins.

For a row with mean m and std s, B bins over [m - R s, m + R s) of width w = 2 R s / B:

    bin(x) = floor((x - m) * B / (2 R s) + B / 2) + 1, clamped to [0, B + 1]

so bin 0 counts x < m - R s (left = -inf), bins 1..B are [m + s(-R + (b-1) 2R/B),
m + s(-R + b 2R/B)), and bin B + 1 counts x >= m + R s (right = +inf). Bin membership is
this formula in float64 (a value within rounding of an edge may fall on either side). Rows
with std 0 or non-finite values have no histogram.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from topkscope.hooks.power_sums import Moments
from topkscope.hooks.rows import RowPlan

_F64 = torch.float64


def bin_edges(mean: float, std: float, bins: int,
              half_range: float) -> tuple[np.ndarray, np.ndarray]:
    """(left, right) of the B + 2 bins, underflow and overflow included."""
    inner = mean + std * (-half_range + np.arange(bins + 1) * (2.0 * half_range / bins))
    left = np.concatenate([[-np.inf], inner])
    right = np.concatenate([inner, [np.inf]])
    return left, right


def bin_counts(x: torch.Tensor, mean: float, std: float, bins: int,
               half_range: float) -> torch.Tensor:
    """(B + 2,) int64 counts of the 1-D x by the formula in the module docstring."""
    scale = bins / (2.0 * half_range * std)
    t = (x.to(_F64) - mean) * scale + bins / 2
    b = t.floor_().clamp_(-1, bins).to(torch.int64) + 1
    return torch.bincount(b, minlength=bins + 2)


def histogram_rows(x: list[torch.Tensor], mom: Moments, plan: RowPlan, bins: int,
                   half_range: float) -> list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray]]:
    """[(vector index, row, left, right, counts)] for every row of the K vectors x[k] (d,)."""
    mean, std, bad = mom.mean.tolist(), mom.std.tolist(), mom.nonfinite.tolist()
    found = []
    for kv in range(len(x)):
        for r in range(plan.rows):
            m, s = mean[kv][r], std[kv][r]
            if bad[kv][r] or not (s > 0 and math.isfinite(s) and math.isfinite(m)):
                continue
            a, n = int(plan.starts[r]), int(plan.numel[r])
            counts = bin_counts(x[kv][a : a + n], m, s, bins, half_range)
            found.append((kv, r, counts))
    if not found:
        return []
    all_counts = torch.stack([c for _, _, c in found]).cpu().numpy()  # one transfer
    out = []
    for (kv, r, _), counts in zip(found, all_counts):
        left, right = bin_edges(mean[kv][r], std[kv][r], bins, half_range)
        out.append((kv, r, left, right, counts))
    return out
