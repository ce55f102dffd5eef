"""Exact Top-k: the k elements of largest magnitude.

Cost: one selection kernel over |u| (torch.topk), O(d log k) on CPU. Count: exactly k.
Ties at the k-th magnitude are broken deterministically towards lower indices.
"""

import torch

from topkscope.sparsify.base import Sparsifier


class TopK(Sparsifier):
    name = "topk"
    exact = True

    def _select(self, u: torch.Tensor, k: int) -> torch.Tensor:
        mag = u.abs()
        if k == u.numel():
            return torch.arange(k, device=u.device, dtype=torch.int64)
        values, idx = torch.topk(mag, k, sorted=False)
        kth = values.min()
        n_above = int(torch.count_nonzero(values > kth))
        n_tied_total = int(torch.count_nonzero(mag == kth))
        if n_above + n_tied_total == k:
            return idx  # no tie straddles the cut: the set is unique
        # Ties straddle the cut: keep everything above kth, then the lowest-index ties.
        above = (mag > kth).nonzero().flatten()
        tied = (mag == kth).nonzero().flatten()[: k - above.numel()]
        return torch.cat([above, tied])
