"""DGC's selection (Lin et al., "Deep Gradient Compression", arXiv 1712.01887), in two versions.

`dgc` — the selection as the DGC authors published it: the paper's sampled threshold with
hierarchical re-selection ("if the number of gradients exceeding the threshold is far more than
expected, a precise threshold is calculated from the already-selected gradients", Sec. 5), with
every constant and branch as their code has it (synxlin/deep-gradient-compression,
`dgc/compression.py`, `DGCCompressor` with its defaults). With rho = k / d:

    sample plan (`sampling_plan`; sample_ratio is at least 0.01, their floor):
        want = max(ceil(sample_ratio d), ceil(2 / rho))
        d <= ceil(2 / rho): the sample is all of u (stride 1)
        otherwise stride = 32 ceil(d / want / 32) + 1, lowered by 8 until d // stride >= want
        m = d // stride samples, k_s = ceil(m rho)
    sample = |u|[s::stride] with s uniform in [0, stride - 1]   (their default strided sample)
    thr = the k_s-th largest sampled |u|                      (min of torch.topk(sample, k_s))
    S = {i : |u_i| >= thr}
    only when the sample is not all of u, at most 10 times (max_adaptation_iters):
        |S| > 1.3 k (compress_upper_bound): S = the k largest |u| of S, stop  (resample=True)
        k < |S| <= 1.3 k:                    stop
        |S| < 0.8 k (compress_lower_bound):  thr = 0.8 thr (in u's dtype), S = {|u| >= thr}
        0.8 k <= |S| <= k:                   stop
    send the first k of S in index order (`indices[:num_selects]`)

So at most k are sent, and at least one (the sampled maximum is in S). The last line also
cuts a set of (k, 1.3 k] elements, or one that the tenth 0.8 step made larger than k, to its k
lowest *positions*, not its k largest magnitudes; with a full sample (d <= 2 / rho) it is
exact Top-k except that ties at the k-th magnitude go to the lowest positions, also ahead of
larger values. After ten 0.8 steps (thr x 0.107) a count still below 0.8 k is sent as is.
Ours differs from their code only where theirs is unspecified or global: ties among the k
largest of S go to the lowest index (theirs: torch.topk's order), the sample offset is drawn
from the instance's generator (theirs: Python's global `random`), and rho is k / d (theirs:
the configured ratio, whose k is ceil(rho d)); a sample_ratio below 0.01 is refused (theirs
raises it to 0.01), and their non-default options (a uniform sample with replacement; x1.3
instead of the re-selection) are not offered.

`dgc-sampled` — the sampled threshold alone (this project's earlier reading of the paper, not
the authors' rule): m = max(min_sample, ceil(sample_ratio d)) positions drawn uniformly with
replacement (all of u when m >= d), k_s = ceil(k m / d), thr = the k_s-th largest sampled
|u|, S = {|u| >= thr}; trim=True keeps the k largest of S when |S| > k. Count: >= 1; k up to
sampling noise (relative spread about 1 / sqrt(k_s)); with trim at most k.

Cost: a gather of m samples and a selection over them, then one block-maxima pass over u and
the hit blocks per threshold evaluated; the re-selection is a selection over |S|. No sort of u.
"""

from __future__ import annotations

import math

import torch

from topkscope.sparsify._helpers import Workspace, seeded_generator
from topkscope.sparsify.base import Sparsifier, check_param
from topkscope.sparsify.blockmax import BlockMaxima
from topkscope.sparsify.engine import top_k_indices

# The DGC authors' defaults (DGCCompressor.__init__)
MIN_SAMPLE_RATIO = 0.01     # sample_ratio = min(max(sample_ratio, 0.01), 1.0)
UPPER_BOUND = 1.3           # compress_upper_bound: more than 1.3 k -> exact top-k of S
LOWER_BOUND = 0.8           # compress_lower_bound: fewer than 0.8 k -> thr x 0.8
MAX_ADAPTATIONS = 10        # max_adaptation_iters
_STRIDE_ALIGN, _STRIDE_STEP = 32, 8  # the stride is 32 c + 1, lowered in steps of 8


def sampling_plan(d: int, k: int, sample_ratio: float) -> tuple[int, int, int]:
    """(stride, m, k_s) as DGC's `initialize` sizes the sample of a d-vector at rho = k / d.

    stride 1 means the sample is all of u (m = d); otherwise m = d // stride >= want, with
    want = max(ceil(sample_ratio d), ceil(2 / rho)) (so the sample holds at least two of the
    expected top rho share). k_s = ceil(m rho) is the sample rank that sets the threshold.
    """
    if sample_ratio >= 1.0 or d <= -(-2 * d // k):  # ceil(2 / rho) = ceil(2 d / k)
        stride, m = 1, d
    else:
        want = max(math.ceil(d * sample_ratio), -(-2 * d // k))
        stride = -(-d // (_STRIDE_ALIGN * want)) * _STRIDE_ALIGN + 1
        m = d // stride
        while m < want:
            stride -= _STRIDE_STEP
            m = d // stride
    return stride, m, -(-m * k // d)


class DGC(Sparsifier):
    """DGC as its authors published it: strided-sample threshold, re-selection, at most k."""

    name = "dgc"
    family = "dgc"
    plot_order = 30
    randomised = True
    checks_finite = True
    at_most_k = True  # never sends more than k (the authors' final indices[:k])

    def __init__(self, sample_ratio: float = MIN_SAMPLE_RATIO, seed: int | None = None) -> None:
        self.sample_ratio = check_param("sample_ratio", sample_ratio, MIN_SAMPLE_RATIO, 1.0)
        self._generator = seeded_generator(seed)
        self._workspace = Workspace()

    def _select(self, u: torch.Tensor, k: int) -> torch.Tensor:
        blocks = BlockMaxima(u, expected_count=k, workspace=self._workspace)  # raises on NaN/Inf
        stride, _, k_sample = sampling_plan(blocks.d, k, self.sample_ratio)
        if stride == 1:
            sample = blocks.magnitudes()
        else:
            start = int(torch.randint(stride, (1,), generator=self._generator))
            sample = blocks.u[start::stride].abs()
        thr = torch.topk(sample, k_sample, sorted=False).values.min()  # 0-d, u's dtype
        return adapt_and_cut(blocks, k, thr, adapt=stride > 1)

    def __repr__(self) -> str:
        return f"DGC(sample_ratio={self.sample_ratio})"


def adapt_and_cut(blocks: BlockMaxima, k: int, thr: torch.Tensor, adapt: bool) -> torch.Tensor:
    """DGC's steps after the sampled threshold `thr` (a 0-d tensor in u's dtype): S = {|u| >=
    thr}, the adaptation loop when `adapt` (see the module rule), then the first k of S by
    position. Returns int64 indices (ascending when S was cut)."""
    selected = blocks.indices(float(thr))
    if adapt:
        for _ in range(MAX_ADAPTATIONS):
            n = selected.numel()
            if n > k:
                if n > k * UPPER_BOUND:
                    selected = top_k_indices(blocks.u[selected].abs(), k, selected)
                break
            if n >= LOWER_BOUND * k:
                break
            thr = thr * LOWER_BOUND  # stays in u's dtype, as their tensor threshold does
            selected = blocks.indices(float(thr))
    if selected.numel() > k:
        selected = torch.sort(selected).values[:k]
    return selected


class DGCSampled(Sparsifier):
    """The sampled threshold alone: the k_s-th largest of a uniform sample, optional trim."""

    name = "dgc-sampled"
    family = "dgc_sampled"
    plot_order = 31
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
            f"DGCSampled(sample_ratio={self.sample_ratio}, min_sample={self.min_sample}, "
            f"trim={self.trim})"
        )
