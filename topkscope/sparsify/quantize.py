"""b-bit quantization of the values a sparsifier selected: SparseLoCo's statistical rule.

SparseLoCo (Sarfi et al., arXiv 2508.15706) sends each selected value as a b-bit code (2 bits
in the paper) with, per parameter tensor, a shift and a table of 2^b values; its compressor
follows the statistical 8-bit quantization of the hivemind library (range 6 standard
deviations). The rule, per group of m values v (one parameter tensor's selected values):

    n      = 2^b bins, offset = n / 2
    shift  = mean(v);   c = v - shift
    s      = sqrt(sum c^2 / (m - 1))            (0 when m <= 1)
    scale  = R s / n                            R = range in standard deviations (6)
             (1 when that is 0 or not finite)
    q_i    = clamp(round(c_i / scale + offset), 0, n - 1)      the code sent for v_i
    T[j]   = the mean of c_i over the values with code j       (0 for a code no value has)
    Q(v_i) = T[q_i] + shift                     what the receiver reconstructs

round is round-half-to-even (torch.round), as in that code. A value is *held* by the range
when its code needed no clamp (0 <= round(c_i / scale + offset) <= n - 1), i.e. (up to the
rounding of the edges) -(R s / 2)(1 + 1/n) <= c_i <= (R s / 2)(1 - 1/n): the range is R = 6
standard deviations wide, not +-6 s but about +-3 s about the mean (at 2 bits -3.75 s to
2.25 s, at 8 bits -3.01 s to 2.99 s; hivemind's Uniform8BitQuantization,
learning-at-home/hivemind@fc657d5 hivemind/compression/quantization.py: RANGE_IN_SIGMAS = 6,
scale = 6 std / 256, zero point 128). `Quantized.clamped` marks the values it does not hold.
Every quantity is computed in float64 and Q(v) returned in v's dtype (SparseLoCo computes in float32: the codes can differ
only where c_i / scale + offset lies within float32 rounding of a half-integer).

The message per group: m codes of b bits, and the shift and the n table entries (float32);
`table_bytes` is the latter. The error-feedback residual keeps v - Q(v) at the selected
positions (comm.compressor), so nothing quantization drops is lost.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from topkscope import validate

DEFAULT_RANGE = 6.0       # standard deviations (hivemind's and SparseLoCo's RANGE_IN_SIGMAS)
TABLE_VALUE_BYTES = 4     # shift and table entries travel as float32
_F64 = torch.float64


@dataclass(frozen=True)
class Quantized:
    """One quantization: the codes (int64, one per value), per group its shift and table
    (float64, shape (G,) and (G, 2^b)), the reconstructed values Q(v) in v's dtype, and
    whether each value's code was clamped to [0, 2^b - 1] (the value lies outside the range)."""

    codes: torch.Tensor
    shift: torch.Tensor
    table: torch.Tensor
    values: torch.Tensor
    clamped: torch.Tensor | None = None


class Quantizer:
    """b-bit statistical quantization (the module doc's rule); `quantize(v, groups)`."""

    def __init__(self, bits: int = 2, range_sigmas: float = DEFAULT_RANGE) -> None:
        self.bits = validate.integer("quantize.bits", bits, 1, 16)
        self.range_sigmas = validate.number("quantize.range", range_sigmas, 0, None,
                                            lo_open=True)
        self.bins = 2**self.bits

    def table_bytes(self, groups: int) -> int:
        """Bytes of the per-group side information: a shift and 2^b table entries each."""
        return groups * (1 + self.bins) * TABLE_VALUE_BYTES

    def quantize(self, values: torch.Tensor, groups: torch.Tensor | None = None,
                 n_groups: int | None = None) -> Quantized:
        """Q of every value, each group on its own statistics. groups: an int64 group id per
        value in [0, n_groups) (None: one group); n_groups defaults to max(groups) + 1."""
        if values.dim() != 1 or not values.is_floating_point():
            raise ValueError(f"values must be a 1-D float tensor, got {values.dtype} "
                             f"{tuple(values.shape)}")
        device = values.device
        if groups is None:
            groups = torch.zeros(values.numel(), dtype=torch.int64, device=device)
            n_groups = 1
        elif groups.shape != values.shape:
            raise ValueError(f"groups has shape {tuple(groups.shape)}, values "
                             f"{tuple(values.shape)}: one group id per value")
        if n_groups is None:
            n_groups = int(groups.max()) + 1 if groups.numel() else 1
        n, offset = self.bins, self.bins // 2
        shift, c, std = group_moments(values, groups, n_groups)
        scale = self.range_sigmas * std / n
        scale = torch.where((scale == 0) | ~torch.isfinite(scale), 1.0, scale)
        raw = torch.round(c / scale[groups] + offset)
        clamped = (raw < 0) | (raw > n - 1)
        codes = raw.clamp_(0, n - 1).to(torch.int64)
        key = groups * n + codes
        sums = torch.zeros(n_groups * n, dtype=_F64, device=device).index_add_(0, key, c)
        hits = torch.bincount(key, minlength=n_groups * n).to(_F64)
        table = torch.where(hits > 0, sums / hits.clamp(min=1), 0.0)
        restored = (table[key] + shift[groups]).to(values.dtype)
        return Quantized(codes, shift, table.view(n_groups, n), restored, clamped)

    def describe(self) -> dict:
        """The settings, as a manifest stores them."""
        return {"bits": self.bits, "range": self.range_sigmas}

    def __repr__(self) -> str:
        return f"Quantizer(bits={self.bits}, range_sigmas={self.range_sigmas:g})"


def group_moments(values: torch.Tensor, groups: torch.Tensor, n_groups: int
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(shift, c, s) of the rule, float64: per group the mean of its values (0 for an empty
    group) and the unbiased standard deviation about it (0 for fewer than two values); per
    value c = v - shift of its group. groups: an int64 group id per value in [0, n_groups)."""
    device = values.device
    v = values.to(_F64)
    count = torch.bincount(groups, minlength=n_groups).to(_F64)
    shift = torch.zeros(n_groups, dtype=_F64, device=device).index_add_(0, groups, v)
    shift = torch.where(count > 0, shift / count.clamp(min=1), 0.0)
    c = v - shift[groups]
    sq = torch.zeros(n_groups, dtype=_F64, device=device).index_add_(0, groups, c * c)
    std = torch.where(count > 1, (sq / (count - 1).clamp(min=1)).sqrt(), 0.0)
    return shift, c, std


def quantizer_from(block: dict | None) -> Quantizer | None:
    """A Quantizer from a config's `quantize:` block ({bits, range}) or None."""
    if block is None:
        return None
    validate.known_keys("quantize key", block, ("bits", "range"))
    return Quantizer(block.get("bits", 2), block.get("range", DEFAULT_RANGE))

