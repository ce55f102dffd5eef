"""Dense: send everything (the uncompressed baseline). Cost O(d); count = d."""

import torch

from topkscope.sparsify.base import Sparsifier


class Dense(Sparsifier):
    """All indices 0..d-1, whatever k is. With error feedback the residual stays zero."""

    name = "dense"
    family = "dense"
    plot_order = 0
    sends_everything = True
    # ignores k: exact only when k = d

    def _select(self, u: torch.Tensor, k: int) -> torch.Tensor:
        return torch.arange(u.numel(), device=u.device, dtype=torch.int64)
