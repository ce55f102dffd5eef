"""Exact Top-k: the k elements of largest magnitude.

Rule:
    TopK(u) = { i : |u_i| > v_(k) }  plus the lowest-index i with |u_i| = v_(k)
              until k are chosen, where v_(k) is the k-th largest |u_i|
    (`topkscope.sparsify.engine.top_k_indices`)

Cost: one selection kernel over |u| (torch.topk for k + 1), O(d log k) on CPU; two
more comparison passes only when a tie straddles the cut.
Count guarantee: exactly k. Ties at the k-th magnitude are broken deterministically
towards lower indices, so the set is a function of u alone.
"""

from __future__ import annotations

import torch

from topkscope.sparsify._helpers import Workspace
from topkscope.sparsify.base import Sparsifier
from topkscope.sparsify.engine import top_k_indices


class TopK(Sparsifier):
    """Exact Top-k by torch.topk on |u|: the reference every approximation is measured against."""

    name = "topk"
    family = "topk"
    plot_order = 10
    exact = True

    def __init__(self) -> None:
        self._workspace = Workspace()

    def _select(self, u: torch.Tensor, k: int) -> torch.Tensor:
        mag = self._workspace.take("abs", u.numel(), u.dtype, u.device)
        return top_k_indices(torch.abs(u, out=mag), k)
