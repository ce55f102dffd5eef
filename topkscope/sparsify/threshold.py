"""Hard threshold: send every element whose magnitude exceeds a fixed lambda.

Rule: S = {i : |u_i| > lambda}; k is ignored (it only sizes the scan's blocks).
Cost: O(d) — one block-maxima pass, then only the blocks that can hold |u_i| > lambda.
Count guarantee: none; the count is whatever lambda gives and may be 0 or d. Reported
as is.
"""

from __future__ import annotations

import torch

from topkscope.sparsify._helpers import Workspace
from topkscope.sparsify.base import Sparsifier, check_param
from topkscope.sparsify.blockmax import BlockMaxima


class Threshold(Sparsifier):
    """{i : |u_i| > threshold} for a fixed threshold >= 0 (default 1e-3: set it for your scale)."""

    name = "threshold"
    family = "threshold"
    plot_order = 80
    may_return_empty = True
    checks_finite = True

    def __init__(self, threshold: float = 1e-3) -> None:
        self.threshold = check_param("threshold", threshold, 0.0, float("inf"), high_open=True)
        self._workspace = Workspace()

    def _select(self, u: torch.Tensor, k: int) -> torch.Tensor:
        blocks = BlockMaxima(u, expected_count=k, workspace=self._workspace)  # raises on NaN/Inf
        return blocks.indices(self.threshold, strict=True)

    def __repr__(self) -> str:
        return f"Threshold(threshold={self.threshold})"
