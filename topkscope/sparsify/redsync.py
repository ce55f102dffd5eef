"""RedSync's threshold binary search, in two published versions.

Both search r in thr(r) = mu + r (M - mu), mu = mean |u|, M = max |u|, and send
S = {i : |u_i| > thr(r)} of the last evaluation, as is (no padding, no trim; empty
only for a constant |u|, where thr = M for every r).

`redsync` — the search as the RedSync paper describes it (Fang et al., "RedSync",
arXiv 1808.04357), run until it lands in its band:
    l, h = 0, 1; repeat at most max_iter (20) times:
        r = (l + h) / 2;  n = #{i : |u_i| > thr(r)}
        if k <= n <= band * k (band 2): stop
        if n < k: h = r  else: l = r

`redsync-2019` — the version in the Gaussian-k authors' code (Shi et al., arXiv
1911.08772), the RedSync the Gaussian-k paper compared against:
    l, h = 0, 1; while h - l > eps (0.2), i.e. at most three evaluations:
        r = l + (h - l) / 2;  n = #{i : |u_i| > thr(r)}
        if k < n < 2k: stop                   (strict on both ends)
        elif n < k / 2: h = r                 (too few: lower the threshold)
        else: l = r                           (otherwise raise it, also when k/2 <= n <= k)
The search evaluates r = 1/2, then 1/4 or 3/4, then one of 1/8, 3/8, 5/8, 7/8, so the
last count can lie far outside (k, 2k) (a count in [k/2, k] even moves the threshold up);
it is reported as is.

Cost: O(d) — |u| once (for mu), one block-maxima pass, then per step either the hit
blocks or one comparison + count over |u|. No sort.
Count guarantee: `redsync`: in [k, band * k] when the search stops inside the band,
otherwise the last count (e.g. when more than band * k elements share nearly the same
magnitude). `redsync-2019`: none.
"""

from __future__ import annotations

import torch

from topkscope.sparsify._helpers import Workspace
from topkscope.sparsify.base import Sparsifier, check_param
from topkscope.sparsify.blockmax import BlockMaxima

EPS_2019 = 0.2  # the authors' tolerance on h - l: three evaluations


def _magnitude_range(blocks: BlockMaxima) -> tuple[float, float]:
    """(mean |u|, max |u|), the mean accumulated in at least float32."""
    mag = blocks.magnitudes()
    mean_abs = float(mag.sum(dtype=torch.float32) if mag.element_size() < 4 else mag.sum())
    return mean_abs / blocks.d, blocks.max_abs()


class RedSync(Sparsifier):
    """Bisection on r in thr = mean|u| + r (max|u| - mean|u|) until k <= count <= band k."""

    name = "redsync"
    family = "redsync"
    plot_order = 40
    checks_finite = True
    may_return_empty = True  # constant |u|: nothing lies strictly above thr = max |u|

    def __init__(self, band: float = 2.0, max_iter: int = 20) -> None:
        self.band = check_param("band", band, 1.0, 64.0)
        self.max_iter = check_param("max_iter", max_iter, 1, 100, integer=True)
        self._workspace = Workspace()

    def _select(self, u: torch.Tensor, k: int) -> torch.Tensor:
        blocks = BlockMaxima(u, expected_count=k, workspace=self._workspace)  # raises on NaN/Inf
        mean_abs, top = _magnitude_range(blocks)
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


class RedSync2019(Sparsifier):
    """RedSync as in the Gaussian-k authors' code: eps = 0.2 (three evaluations), band (k, 2k)."""

    name = "redsync-2019"
    family = "redsync"
    plot_order = 41
    checks_finite = True
    may_return_empty = True  # constant |u|: nothing lies strictly above thr = max |u|

    def __init__(self) -> None:
        self._workspace = Workspace()
        self.last_evaluations = 0  # thresholds evaluated by the latest call (1-3; benchmarks)

    def _select(self, u: torch.Tensor, k: int) -> torch.Tensor:
        blocks = BlockMaxima(u, expected_count=k, workspace=self._workspace)  # raises on NaN/Inf
        mean_abs, top = _magnitude_range(blocks)
        low, high = 0.0, 1.0
        self.last_evaluations = 0
        while high - low > EPS_2019:
            r = low + (high - low) / 2
            thr = mean_abs + r * (top - mean_abs)
            n = blocks.count(thr, strict=True)
            self.last_evaluations += 1
            if k < n < 2 * k:
                break
            if n < k / 2:
                high = r
            else:
                low = r
        return blocks.indices(thr, strict=True)
