"""The selection engine every sparsifier, the recorder and the statistics share.

Exact Top-k indices (`top_k_indices`): the rule of the `topk` sparsifier (topk.py), used by
every exact trim and by the `empty_fallback="topk"` deviation (base.py). The k largest |u|,
lowest index first among ties at the k-th magnitude.

Threshold-then-verify, the one engine behind every fast exact Top-k of the project (the
Gaussian-k sparsifier, the recorder's per-row top magnitudes, the statistics' float64
tails): guess a threshold t below the k-th largest magnitude, count the candidates
|x_i| >= t, accept them when they number at least k (the accept step is the kernel's:
`topkscope.kernel.verified`, `verified_candidates`), otherwise fall back to an exact selection.
Two guesses are used:

    sample_threshold     the j-th largest of a sample of m of the d magnitudes, with
                         r = k m / d (the expected number of the top k in the sample) and
                         j = min(m, floor(r + 5 sqrt(r) + 10) + 1)
    gaussian_threshold   scale * Phi^{-1}(1 - tail / 2): the magnitude exceeded by a share
                         `tail` of N(0, scale^2) values (|mean| + std * ... in Gaussian-k)

`top_values` is the whole engine for a 1-D torch vector or numpy array (sorted top-k
values). A guess only
decides the cost, never the result.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from topkscope import kernel
from topkscope.sparsify._helpers import flat_nonzero, select_where, two_sided_normal_quantile


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


def sample_rank(k: int, m: int, d: int) -> int:
    """j of `sample_threshold`: the sample rank (1 = largest) that the top k of d most likely
    all reach, for a sample of m of the d values."""
    r = k * m / d
    return min(m, int(r + 5.0 * math.sqrt(r) + 10.0) + 1)


def sample_threshold(sample, k: int, d: int):
    """The `sample_rank(k, m, d)`-th largest of a 1-D sample (numpy array or torch tensor,
    m >= 1 values) of d magnitudes: a threshold the k largest of the d most likely reach.

    A numpy sample gives a numpy scalar, a torch sample a 0-d tensor on its device (no sync).
    """
    m = sample.numel() if isinstance(sample, torch.Tensor) else sample.size
    j = sample_rank(k, m, d)
    if isinstance(sample, torch.Tensor):
        return torch.topk(sample, j, sorted=False).values.min()
    return np.partition(sample, m - j)[m - j]


def gaussian_threshold(scale, tail):
    """scale * Phi^{-1}(1 - tail / 2): the magnitude exceeded by a share `tail` of N(0, scale^2)
    values (0 for tail >= 1). scale and tail may be floats or equal-length numpy arrays."""
    if np.ndim(tail) == 0:
        return scale * two_sided_normal_quantile(float(tail))
    return np.asarray(scale) * np.array([two_sided_normal_quantile(float(p)) for p in tail])


_CANDIDATE_MIN_N = 1 << 14  # below this a plain torch.topk is as fast
_SAMPLE_TOP = 64            # expected top-k elements in the strided sample


def descending_top(block: np.ndarray, k: int) -> np.ndarray:
    """The k largest of a 1-D numpy block (k <= its size), sorted descending: a partition at
    size - k, then a sort of those k alone."""
    if block.size > k:
        block = np.partition(block, block.size - k)[block.size - k :]
    return np.sort(block)[::-1]


def top_values(mag, k: int):
    """The k largest values of a 1-D tensor or numpy array (magnitudes), sorted descending;
    exact, of the same type as mag.

    For long vectors with k <= n / 8: a threshold from the strided sample mag[::s]
    (s = k // 64, so the sample holds about 64 of the top k; `sample_threshold`), verified
    by counting (the kernel's `verified_candidates`), then the k largest of the candidates
    (torch.topk; a numpy array: `descending_top`, which on the CPU is a few times faster than
    torch's masked select and topk); a plain selection of all of mag when the guess was too
    high, and for short vectors or small k.
    """
    host = isinstance(mag, np.ndarray)
    n = mag.size if host else mag.numel()
    stride = k // _SAMPLE_TOP
    if n >= _CANDIDATE_MIN_N and 8 * k <= n and stride >= 2:
        cand = kernel.verified_candidates(mag, k, sample_threshold(mag[::stride], k, n))
        if cand is not None:
            return descending_top(cand, k) if host else torch.topk(cand, k, sorted=True).values
    if host:
        return torch.topk(torch.from_numpy(mag), k, sorted=True).values.numpy()
    return torch.topk(mag, k, sorted=True).values
