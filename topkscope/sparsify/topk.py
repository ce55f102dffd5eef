"""Exact Top-k: the k elements of largest magnitude.

    TopK(u) = { i : |u_i| > v_(k) }  plus the lowest-index i with |u_i| = v_(k)
              until k are chosen, where v_(k) is the k-th largest |u_i|.

Cost: one selection kernel over |u| (torch.topk for k + 1), O(d log k) on CPU; two
more comparison passes only when a tie straddles the cut. Count: exactly k. Ties at
the k-th magnitude are broken deterministically towards lower indices, so the set is
a function of u alone.
"""

from __future__ import annotations

import torch

from topkscope.sparsify._helpers import Workspace, flat_nonzero, select_where
from topkscope.sparsify.base import Sparsifier


def top_k_indices(
    mag: torch.Tensor, k: int, index: torch.Tensor | None = None
) -> torch.Tensor:
    """The k largest of mag (1-D, >= 0), lowest index first among ties at the cut.

    `index` gives the position in the full vector of each entry of mag (default
    0..n-1); the result is drawn from it. It need not be sorted. One torch.topk for
    k + 1 values tells whether a tie straddles the cut (the (k+1)-th largest equals
    the k-th); only then is mag scanned again to pick the lowest-index ties.
    """
    n = mag.numel()
    if k >= n:
        return torch.arange(n, device=mag.device) if index is None else index
    values, pos = torch.topk(mag, k + 1, sorted=False)
    after, kth = torch.topk(values, 2, largest=False, sorted=True).values.tolist()
    if after < kth:  # the (k+1)-th largest is strictly smaller: the top-k set is unique
        chosen = select_where(pos, values > after)
        return chosen if index is None else index[chosen]
    above = flat_nonzero(mag > kth)
    tied = flat_nonzero(mag == kth)
    if index is None:  # positions are already ascending: the first ties are the lowest
        return torch.cat([above, tied[: k - above.numel()]])
    tied_index = torch.sort(index[tied]).values[: k - above.numel()]
    return torch.cat([index[above], tied_index])


class TopK(Sparsifier):
    """Exact Top-k by torch.topk on |u|: the reference every approximation is measured against."""

    name = "topk"
    exact = True

    def __init__(self) -> None:
        self._workspace = Workspace()

    def _select(self, u: torch.Tensor, k: int) -> torch.Tensor:
        mag = self._workspace.take("abs", u.numel(), u.dtype, u.device)
        return top_k_indices(torch.abs(u, out=mag), k)
