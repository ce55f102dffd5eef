"""Block maxima of |u|: exact threshold sets {i : |u_i| >= t} without a full mask pass.

u is cut into B blocks of s elements and m_b = max_{i in b} |u_i| is computed in
one reduction pass (amax and amin of u; no |u| temporary). Because

    |u_i| >= t  for some i in block b   <=>   m_b >= t,

the blocks that can hold a selected element are found on the short vector m (B = d/s
entries), and only those nb blocks are read again: nb * s elements instead of d.
It also gives a cheap lower bound: #{i : |u_i| >= t} >= #{b : m_b >= t}.

Layout: for s >= 32 a block is s contiguous elements (a row of u viewed as (B, s));
for smaller s a block is s elements at stride 32 inside a chunk of 32 s elements
(u viewed as (M, s, 32), reduced over the middle axis), which keeps the reduction
vectorised. The < 32 s leftover elements at the end (the tail) are always checked
directly. When the expected selection is too dense for blocks to pay off (s < 4),
or nb * s would exceed d / 4, the plain path is used: |u| into a reused buffer,
one comparison, nonzero.
"""

from __future__ import annotations

import torch

from topkscope.sparsify._helpers import Workspace, flat_nonzero
from topkscope.sparsify.base import raise_if_nonfinite

_MIN_BLOCKED_D = 1 << 15  # below this a plain pass is as cheap as anything else
_MAX_BLOCK = 64
_STRIDE = 32  # inner width of the strided layout for small blocks


def block_size_for(d: int, expected_count: float) -> int:
    """Largest power of two s <= 64 with d / s >= 8 * expected_count; 1 = do not block."""
    if d < _MIN_BLOCKED_D or expected_count <= 0:
        return 1
    s = 1
    while s * 2 <= _MAX_BLOCK and d / (s * 2) >= 8.0 * expected_count:
        s *= 2
    return s if s >= 4 else 1


class BlockMaxima:
    """Block maxima of |u| and exact threshold sets built on them.

    `expected_count` is roughly how many elements the caller will ask for; it sets the
    block size. Raises ValueError if u holds NaN/Inf (the maxima reveal them for free).
    """

    def __init__(self, u: torch.Tensor, expected_count: float, workspace: Workspace) -> None:
        self.u = u if u.is_contiguous() else u.contiguous()
        self.d = self.u.numel()
        self._ws = workspace
        self._mag: torch.Tensor | None = None
        self._last: tuple[float, bool, torch.Tensor] | None = None
        self.s = block_size_for(self.d, expected_count)
        self.w = 1 if self.s >= 32 else _STRIDE
        chunk = self.s * self.w
        self.covered = 0 if self.s == 1 else (self.d // chunk) * chunk
        self.tail = self.u[self.covered :]
        self.maxima: torch.Tensor | None = None
        if self.s > 1:
            self.maxima = self._block_maxima(chunk)
        top = self.max_abs()
        if top != top or top == float("inf"):  # NaN or Inf somewhere in u
            raise_if_nonfinite(self.u)

    # ---- construction -------------------------------------------------------------
    def _block_maxima(self, chunk: int) -> torch.Tensor:
        n_chunks = self.covered // chunk
        n_blocks = n_chunks * self.w
        hi = self._ws.take("block_max", n_blocks, self.u.dtype, self.u.device)
        lo = self._ws.take("block_min", n_blocks, self.u.dtype, self.u.device)
        if self.w == 1:
            view = self.u[: self.covered].view(n_chunks, self.s)
            torch.amax(view, dim=1, out=hi)
            torch.amin(view, dim=1, out=lo)
        else:
            view = self.u[: self.covered].view(n_chunks, self.s, self.w)
            torch.amax(view, dim=1, out=hi.view(n_chunks, self.w))
            torch.amin(view, dim=1, out=lo.view(n_chunks, self.w))
        return torch.maximum(hi, lo.neg_(), out=hi)

    def max_abs(self) -> float:
        """max |u_i| (NaN if u holds a NaN)."""
        if self.maxima is None:
            return float(self.magnitudes().max())
        top = float(self.maxima.max())
        if self.tail.numel():
            tail_top = float(self.tail.abs().max())
            top = tail_top if tail_top != tail_top else max(top, tail_top)
        return top

    def magnitudes(self) -> torch.Tensor:
        """|u| as a full vector (computed once, into a reused buffer)."""
        if self._mag is None:
            mag = self._ws.take("abs", self.d, self.u.dtype, self.u.device)
            self._mag = torch.abs(self.u, out=mag)
        return self._mag

    # ---- queries ------------------------------------------------------------------
    def count(self, t: float, strict: bool = False) -> int:
        """Exact #{i : |u_i| >= t} (> t if strict)."""
        blocks = self._blocks_or_none(t, strict)
        if blocks is None:
            return int(torch.count_nonzero(self._plain_mask(t, strict)))
        found = self._gather(blocks, t, strict)
        self._last = (t, strict, found)  # a following indices(t) is then free
        return found.numel()

    def indices(self, t: float, strict: bool = False) -> torch.Tensor:
        """Exact {i : |u_i| >= t} (> t if strict) as int64 indices (order unspecified)."""
        if self._last is not None and self._last[:2] == (t, strict):
            return self._last[2]
        blocks = self._blocks_or_none(t, strict)
        if blocks is None:
            return flat_nonzero(self._plain_mask(t, strict))
        return self._gather(blocks, t, strict)

    # ---- the two paths ------------------------------------------------------------
    def _blocks_or_none(self, t: float, strict: bool) -> torch.Tensor | None:
        """Blocks that may hold a selected element; None when the plain path is cheaper."""
        if self.maxima is None:
            return None
        hit = self.maxima > t if strict else self.maxima >= t
        blocks = flat_nonzero(hit)
        if blocks.numel() * self.s > self.d // 4:
            return None
        return blocks

    def _gather(self, blocks: torch.Tensor, t: float, strict: bool) -> torch.Tensor:
        """Read only the given blocks (and the tail) and keep |u_i| >= t (> t if strict)."""
        if self.w == 1:
            rows = self.u[: self.covered].view(-1, self.s)
            values = rows.index_select(0, blocks)
            base, step = blocks * self.s, 1
        else:
            cube = self.u[: self.covered].view(-1, self.s, self.w)
            chunk, lane = blocks // self.w, blocks % self.w
            values = cube[chunk, :, lane]  # (nb, s): block b's elements at stride w
            base, step = chunk * (self.s * self.w) + lane, self.w
        mag = values.abs_()
        keep = mag > t if strict else mag >= t
        flat = flat_nonzero(keep)
        found = base[flat // self.s] + (flat % self.s) * step
        if self.tail.numel():
            tail_mag = self.tail.abs()
            tail_keep = tail_mag > t if strict else tail_mag >= t
            found = torch.cat([found, flat_nonzero(tail_keep) + self.covered])
        return found

    def _plain_mask(self, t: float, strict: bool) -> torch.Tensor:
        mask = self._ws.take("mask", self.d, torch.bool, self.u.device)
        cmp = torch.gt if strict else torch.ge
        return cmp(self.magnitudes(), t, out=mask)
