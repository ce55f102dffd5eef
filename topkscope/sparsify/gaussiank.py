"""Robust Gaussian-k: a Gaussian threshold guess, corrected until it is safe, then trimmed.

Rule (after Shi et al., arXiv 1911.08772, made robust):
  1. Block maxima m_b = max |u_i| over blocks of s elements (one reduction pass;
     see blockmax.py). B = d / s >= 8 sqrt(band) k blocks.
  2. Gaussian guess: mean and std from a strided sample of u, and the threshold
     t = |mean| + std * Phi^-1(1 - p/2) whose expected number of blocks with m_b >= t
     is sqrt(band) k under u ~ N(mean, std^2), i.e. p = 1 - (1 - sqrt(band) k / B)^(1/s).
  3. Correct t on the short vector m only: accept when k <= #{b : m_b >= t} <= band k
     (band = 1.5 by default; the lower end is the kernel's candidate pass
     `verified_candidates` over the block maxima); otherwise step (x1.5 up / x0.5 down while one side of
     the bracket is unknown, then secant on log #blocks inside it), at most max_iter
     counts; if that fails (heavy ties), t = the k-th largest m_b, which always
     satisfies the lower end.
  4. Candidates C = {i : |u_i| >= t}, read from the hit blocks only (nb <= band k
     unless the fallback was taken; a full comparison pass if nb s > d / 4).
     #{b : m_b >= t} >= k implies |C| >= k, so C holds the whole Top-k set.
  5. Trim C to its k largest magnitudes (lowest index first among ties).

Cost: O(d) — one amax and one amin pass over u, no sort, no full-length temporaries;
plus O(B) per correction step, O(band k s) for the hit blocks and O(|C| log k) for the
trim. When rho is too large for blocks to pay off (d / (8 sqrt(band) k) < 4) it is
torch.topk on |u|.
Count guarantee: exactly k, on any finite input; the set equals exact Top-k (TopK's
tie rule), so this is an exact method that costs a few passes over u.
"""

from __future__ import annotations

import math

import torch

from topkscope import kernel
from topkscope.sparsify._helpers import Workspace, mean_std, strided_sample
from topkscope.sparsify.base import Sparsifier, check_param
from topkscope.sparsify.blockmax import BlockMaxima
from topkscope.sparsify.engine import gaussian_threshold, top_k_indices


class GaussianK(Sparsifier):
    """Robust Gaussian-k: exactly k indices, the exact Top-k set, at O(d) cost."""

    name = "gaussiank"
    family = "gaussiank"
    plot_order = 20
    exact = True
    fixed_count = True
    checks_finite = True

    def __init__(self, band: float = 1.5, max_iter: int = 12, sample_size: int = 65536) -> None:
        self.band = check_param("band", band, 1.0, 64.0, low_open=True)
        self.max_iter = check_param("max_iter", max_iter, 0, 100, integer=True)
        self.sample_size = check_param("sample_size", sample_size, 16, 1 << 24, integer=True)
        self._workspace = Workspace()

    def _select(self, u: torch.Tensor, k: int) -> torch.Tensor:
        target = math.sqrt(self.band) * k
        blocks = BlockMaxima(u, expected_count=target, workspace=self._workspace)
        if blocks.maxima is None:  # dense regime: nothing to gain from thresholds
            return top_k_indices(blocks.magnitudes(), k)
        t = self._threshold(blocks, k, target)
        candidates = blocks.indices(t)
        if candidates.numel() == k:
            return candidates
        return top_k_indices(blocks.u[candidates].abs(), k, candidates)

    def _gaussian_guess(self, blocks: BlockMaxima, target: float) -> float:
        n_blocks = blocks.maxima.numel()
        mean, std = mean_std(strided_sample(blocks.u, self.sample_size))
        p = 1.0 - (1.0 - min(1.0, target / n_blocks)) ** (1.0 / blocks.s)
        return abs(mean) + gaussian_threshold(std, p)

    def _threshold(self, blocks: BlockMaxima, k: int, target: float) -> float:
        """A t with k <= #{b : m_b >= t}, preferably <= band * k (see the module rule)."""
        maxima = blocks.maxima
        n_blocks = maxima.numel()
        t = self._gaussian_guess(blocks, target)
        if not t > 0.0:  # zero spread in the sample: start from the typical block maximum
            t = float(maxima.float().mean())
        lo, n_lo = 0.0, n_blocks  # every block has m_b >= 0
        hi, n_hi = math.inf, 0
        for _ in range(self.max_iter):
            # the block maxima reaching t: a lower bound on #{i : |u_i| >= t}
            found, n = kernel.verified_candidates(blocks.maxima, k, t, counted=True)
            if found is not None and n <= self.band * k:
                return t
            if n < k:
                hi, n_hi = t, n
            else:
                lo, n_lo = t, n
            t = _next_guess(lo, n_lo, hi, n_hi, target)
            if t is None:
                break
        # k-th largest block maximum: at least k blocks reach it (ties may add more)
        return float(torch.kthvalue(maxima, n_blocks - k + 1).values)


def _next_guess(lo: float, n_lo: int, hi: float, n_hi: int, target: float) -> float | None:
    """Next threshold inside (lo, hi); None when the bracket cannot shrink any more."""
    if math.isinf(hi):
        guess = lo * 1.5
    elif lo == 0.0:
        guess = hi * 0.5
    else:
        # secant on log(count): exact for an exponential tail, close for most others
        y_lo, y_hi = math.log(n_lo), math.log(max(n_hi, 0.5))
        frac = (y_lo - math.log(target)) / (y_lo - y_hi)
        frac = min(0.9, max(0.1, frac))
        guess = lo + frac * (hi - lo)
    if not (lo < guess < hi) or guess <= 0.0:
        return None
    return guess
