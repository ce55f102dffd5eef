"""How approximate sparsifiers would do on the recorded u, without touching training.

For an approximate sparsifier S selecting the index set I from a row x at target count k:

    S_count  = |I|
    S_ratio  = ||x - x_I||^2 / ||x||^2        (x_I keeps x on I, zero elsewhere)
    S_recall = |I intersect T_k| / k          T_k = the exact top-k set

When magnitudes tie at the k-th largest value tau, T_k is not unique; recall then counts
every selected element above tau plus selected elements equal to tau up to the number of
places left in T_k: (#{i in I: |x_i| > tau} + min(#{i in I: |x_i| = tau}, k - #{|x| > tau})) / k.

The recorder's own sparsifier instances run under a forked random state (torch, numpy, and
Python's `random` are restored afterwards), so recording never changes what training draws.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import numpy as np
import torch

from topkscope.hooks.segments import RowPlan
from topkscope.sparsify import Sparsifier

_F64 = torch.float64


def column_prefix(name: str) -> str:
    """Column prefix of a sparsifier: its registry name with '-' turned into '_'."""
    return name.replace("-", "_")


@contextmanager
def isolated_rng(device: torch.device) -> Iterator[None]:
    """Run a block without consuming any global random state (torch, numpy, random)."""
    py_state = random.getstate()
    np_state = np.random.get_state()
    devices = [device] if device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)


def selection_rows(
    u: torch.Tensor,
    plan: RowPlan,
    sumsq: torch.Tensor,
    kth: torch.Tensor,
    n_above: torch.Tensor,
    sparsifiers: Mapping[str, Sparsifier],
) -> dict[str, np.ndarray]:
    """Columns {S_count, S_ratio, S_recall} of shape (R, D) for the vector u (d,).

    sumsq (R,), kth (R, D) and n_above (R, D) are u's row sums of squares, k-th largest
    magnitudes and counts strictly above them. A sparsifier that refuses a row (ValueError,
    e.g. an all-zero row) leaves NaN there.
    """
    rows, dens = plan.k.shape
    out: dict[str, np.ndarray] = {}
    for name in sparsifiers:
        p = column_prefix(name)
        out[f"{p}_count"] = np.full((rows, dens), np.nan)
        out[f"{p}_ratio"] = np.full((rows, dens), np.nan)
        out[f"{p}_recall"] = np.full((rows, dens), np.nan)
    total = sumsq.tolist()
    kth_l, above_l = kth.tolist(), n_above.tolist()
    with torch.no_grad(), isolated_rng(u.device):
        for r in range(rows):
            a, n = int(plan.starts[r]), int(plan.numel[r])
            x = u[a : a + n]
            for j in range(dens):
                k = int(plan.k[r, j])
                for name, sparsifier in sparsifiers.items():
                    try:
                        idx = sparsifier.select(x, k)
                    except ValueError:
                        continue
                    vals = x[idx]
                    mag = vals.abs()
                    kept = float(vals.to(_F64).square().sum())
                    strictly = int((mag > kth_l[r][j]).sum())
                    tied = int((mag == kth_l[r][j]).sum())
                    p = column_prefix(name)
                    out[f"{p}_count"][r, j] = idx.numel()
                    if total[r] > 0:
                        out[f"{p}_ratio"][r, j] = max(0.0, (total[r] - kept) / total[r])
                    out[f"{p}_recall"][r, j] = (strictly + min(tied, k - above_l[r][j])) / k
    return out
