"""Gaussian-k exactly as published (Shi et al., arXiv 1911.08772, and the authors' code).

Rule:
    thr = mean(u) + |Phi^-1(rho / 2)| * std(u)          rho = k / d, std unbiased
    repeat at most 3 times:
        S = {i : |u_i| > thr}
        if |S| < 2k/3:   thr = 0.5 * thr
        elif |S| > 4k/3: thr = 1.5 * thr
        else:            stop
    return S of the last evaluation, as is (no truncation, no padding)

Cost: O(d) — one sum and one dot for the moments, one block-maxima pass, then each
evaluation reads only the blocks that can hold |u_i| > thr (a full comparison pass
when too many do); no sort.
Count guarantee: none. On Gaussian-like u it lands in [2k/3, 4k/3]; on heavy tails
or mixtures the three multiplicative steps can leave it outside that band, down to
nothing at all (e.g. when a few percent of u share one large magnitude, the std puts
the first threshold below it, x1.5 twice lifts the third above it). The last
evaluated set is returned as is, empty included, as the published code does; an empty
set is sent as empty (the authors' code sends it too). `empty_fallback="topk"` is the
named deviation that sends the exact Top-k instead (base.py).
"""

from __future__ import annotations

import torch

from topkscope.sparsify._helpers import Workspace, mean_std
from topkscope.sparsify.base import Sparsifier
from topkscope.sparsify.blockmax import BlockMaxima
from topkscope.sparsify.engine import gaussian_threshold

EVALUATIONS = 3  # the published loop: `while loops < 3`


class GaussianK2019(Sparsifier):
    """The published Gaussian-k rule, warts and all: the reference for reproducing the paper."""

    name = "gaussiank-2019"
    family = "gaussiank"
    plot_order = 21
    checks_finite = True
    may_return_empty = True

    def __init__(self) -> None:
        self._workspace = Workspace()
        self.last_evaluations = 0  # thresholds evaluated by the latest call (1-3; benchmarks)

    def _select(self, u: torch.Tensor, k: int) -> torch.Tensor:
        blocks = BlockMaxima(u, expected_count=k, workspace=self._workspace)  # raises on NaN/Inf
        mean, std = mean_std(blocks.u)
        thr = mean + gaussian_threshold(std, k / u.numel())
        for evaluation in range(EVALUATIONS):
            evaluated = thr
            self.last_evaluations = evaluation + 1
            count = blocks.count(evaluated, strict=True)
            if count < 2 * k / 3:
                thr *= 0.5
            elif count > 4 * k / 3:
                thr *= 1.5
            else:
                break
        return blocks.indices(evaluated, strict=True)
