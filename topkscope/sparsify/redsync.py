"""RedSync's threshold binary search (Fang et al., "RedSync", arXiv 1808.04357).

Rule:
    mu = mean |u|,  M = max |u|,  thr(r) = mu + r (M - mu),  r in [0, 1]
    l, h = 0, 1; repeat at most max_iter times:
        r = (l + h) / 2;  n = #{i : |u_i| > thr(r)}
        if k <= n <= band * k: stop
        if n < k: h = r  else: l = r
    return {i : |u_i| > thr(r)} of the last evaluation

Cost: O(d) — |u| once (for mu), one block-maxima pass, then per step either the hit
blocks or one comparison + count over |u|. No sort.
Count guarantee: in [k, band * k] when the search stops inside the band; otherwise
(the band is not reached in max_iter halvings, e.g. when more than band * k elements
share nearly the same magnitude, or k exceeds #{|u_i| > mu}) the last count, whatever
it is, is reported as is.
"""

from __future__ import annotations

import torch

from topkscope.sparsify._helpers import Workspace
from topkscope.sparsify.base import Sparsifier, check_param
from topkscope.sparsify.blockmax import BlockMaxima


class RedSync(Sparsifier):
    """Bisection on r in thr = mean|u| + r (max|u| - mean|u|) until k <= count <= band k."""

    name = "redsync"
    checks_finite = True

    def __init__(self, band: float = 2.0, max_iter: int = 20) -> None:
        self.band = check_param("band", band, 1.0, 64.0)
        self.max_iter = check_param("max_iter", max_iter, 1, 100, integer=True)
        self._workspace = Workspace()

    def _select(self, u: torch.Tensor, k: int) -> torch.Tensor:
        blocks = BlockMaxima(u, expected_count=k, workspace=self._workspace)  # raises on NaN/Inf
        mag = blocks.magnitudes()
        mean_abs = float(mag.sum(dtype=torch.float32) if mag.element_size() < 4 else mag.sum())
        mean_abs /= u.numel()
        top = blocks.max_abs()
        low, high = 0.0, 1.0
        for _ in range(self.max_iter):
            r = 0.5 * (low + high)
            thr = mean_abs + r * (top - mean_abs)
            n = blocks.count(thr, strict=True)
            if k <= n <= self.band * k:
                break
            if n < k:
                high = r
            else:
                low = r
        return blocks.indices(thr, strict=True)

    def __repr__(self) -> str:
        return f"RedSync(band={self.band}, max_iter={self.max_iter})"
