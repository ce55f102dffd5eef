"""DGC's sampled threshold (Lin et al., "Deep Gradient Compression", arXiv 1712.01887).

Rule:
    draw m = max(min_sample, ceil(sample_ratio * d)) positions uniformly (with
    replacement; all of u when m >= d), k_s = ceil(k * m / d)
    thr = the k_s-th largest |u| in the sample
    S = {i : |u_i| >= thr}
    trim=True: if |S| > k, keep the k largest of S (exact, lowest index first on ties)

Cost: O(m) gather + a selection over the m samples, then one block-maxima pass over u
and the hit blocks; with trim, a selection over |S|. No sort of u.
Count guarantee: |S| >= 1 always (the sampled maximum is in S); otherwise none — |S|
is k times a sampling ratio whose relative spread is about 1/sqrt(k_s). With trim the
count is min(|S|, k), and when |S| >= k the set is exactly Top-k.
"""

from __future__ import annotations

import math

import torch

from topkscope.sparsify._helpers import Workspace, seeded_generator
from topkscope.sparsify.base import Sparsifier, check_param
from topkscope.sparsify.blockmax import BlockMaxima
from topkscope.sparsify.engine import top_k_indices


class DGC(Sparsifier):
    """Threshold from the exact top-k of a random sample of u."""

    name = "dgc"
    randomised = True
    checks_finite = True

    def __init__(
        self,
        sample_ratio: float = 0.01,
        min_sample: int = 1024,
        trim: bool = False,
        seed: int | None = None,
    ) -> None:
        self.sample_ratio = check_param("sample_ratio", sample_ratio, 0.0, 1.0, low_open=True)
        self.min_sample = check_param("min_sample", min_sample, 1, 1 << 30, integer=True)
        if not isinstance(trim, bool):
            raise ValueError(f"trim must be True or False, got {trim!r}")
        self.trim = trim
        self._generator = seeded_generator(seed)
        self._workspace = Workspace()

    def _select(self, u: torch.Tensor, k: int) -> torch.Tensor:
        blocks = BlockMaxima(u, expected_count=k, workspace=self._workspace)  # raises on NaN/Inf
        d = u.numel()
        m = max(self.min_sample, math.ceil(self.sample_ratio * d))
        if m >= d:
            sample, m = blocks.u.abs(), d
        else:
            where = torch.randint(d, (m,), generator=self._generator).to(u.device)
            sample = blocks.u[where].abs()
        k_sample = min(m, max(1, math.ceil(k * m / d)))
        thr = float(torch.topk(sample, k_sample, sorted=False).values.min())
        selected = blocks.indices(thr)
        if self.trim and selected.numel() > k:
            selected = top_k_indices(blocks.u[selected].abs(), k, selected)
        return selected

    def __repr__(self) -> str:
        return (
            f"DGC(sample_ratio={self.sample_ratio}, min_sample={self.min_sample}, "
            f"trim={self.trim})"
        )

