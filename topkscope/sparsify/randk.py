"""Rand-k: k indices drawn uniformly without replacement, independent of u.

Rule: a uniformly random k-subset of {0, ..., d-1}. Drawn by rejection when k <= d/4
(iid positions, deduplicated, topped up until k distinct, then a random k of them —
uniform because the procedure treats every position alike), else from randperm(d).
Seedable: workers that share a seed select the same positions at every step; workers
with different seeds select independently. Each instance owns its generator.

Cost: O(k log k) for k <= d/4, else O(d); u is only validated, never read.
Count guarantee: exactly k. E||u - RandK(u)||^2 = (1 - k/d) ||u||^2 (the classic bound).
"""

from __future__ import annotations

import torch

from topkscope.sparsify._helpers import seeded_generator
from topkscope.sparsify.base import Sparsifier


class RandK(Sparsifier):
    """Uniform random k-subset; `seed` makes the sequence of subsets reproducible."""

    name = "randk"
    family = "randk"
    plot_order = 70
    randomised = True
    fixed_count = True

    def __init__(self, seed: int | None = None) -> None:
        self._generator = seeded_generator(seed)

    def _select(self, u: torch.Tensor, k: int) -> torch.Tensor:
        d = u.numel()
        if 4 * k > d:
            chosen = torch.randperm(d, generator=self._generator)[:k]
        else:
            chosen = torch.empty(0, dtype=torch.int64)
            while chosen.numel() < k:
                extra = k - chosen.numel()
                draws = torch.randint(d, (extra + extra // 8 + 16,), generator=self._generator)
                chosen = torch.unique(torch.cat([chosen, draws]))
            pick = torch.randperm(chosen.numel(), generator=self._generator)[:k]
            chosen = chosen[pick]
        return chosen.to(u.device)
