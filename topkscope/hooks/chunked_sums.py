"""Per-segment shifted power sums of a CPU vector, in cache-sized chunks with reused buffers.

For x split into consecutive segments and a shift c, one pass computes per segment

    s_p = sum (x_i - c)^p  for p = 1..4   (float64)

How: the vector is walked in chunks of `chunk` elements; each chunk's y = x - c, y^2, y^3
and y^4 go into one (4, chunk) float64 buffer that is reused for every chunk and every call
(a fresh multi-megabyte temporary per call costs more than the arithmetic, and a chunk-sized
one stays in cache), and one numpy reduceat per chunk sums the pieces of the segments inside
it; pieces of a segment that spans chunks are added afterwards. Memory is 32 * chunk bytes
whatever the model size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_F64 = np.float64


@dataclass(frozen=True)
class _ChunkPlan:
    """Where segment pieces start inside each chunk, and which pieces make each segment."""

    bounds: tuple[tuple[int, int, np.ndarray, int, int], ...]  # (c0, c1, local starts, p0, p1)
    pieces: int
    first_piece: np.ndarray  # (S,) index of each segment's first piece


def _chunk_plan(lengths: tuple[int, ...], chunk: int) -> _ChunkPlan:
    d = int(sum(lengths))
    seg_starts = np.concatenate([[0], np.cumsum(lengths[:-1], dtype=np.int64)])
    cuts = np.union1d(seg_starts, np.arange(0, d, chunk, dtype=np.int64))  # piece starts
    first_piece = np.searchsorted(cuts, seg_starts)
    bounds, p0 = [], 0
    for c0 in range(0, d, chunk):
        c1 = min(d, c0 + chunk)
        p1 = int(np.searchsorted(cuts, c1))
        bounds.append((c0, c1, cuts[p0:p1] - c0, p0, p1))
        p0 = p1
    return _ChunkPlan(tuple(bounds), len(cuts), first_piece)


class ChunkedSums:
    """Reusable work space: `sums(a, c, lengths)` -> (4, S) float64 rows s1, s2, s3, s4.

    One instance per Recorder (not shared between threads); plans are cached per layout.
    """

    def __init__(self, chunk: int = 1 << 16) -> None:
        if chunk < 1:
            raise ValueError(f"chunk = {chunk} is outside the allowed range [1, inf)")
        self.chunk = int(chunk)
        self._buf: np.ndarray | None = None
        self._plans: dict[tuple[int, ...], _ChunkPlan] = {}

    def _plan(self, lengths: tuple[int, ...]) -> _ChunkPlan:
        plan = self._plans.get(lengths)
        if plan is None:
            if len(self._plans) > 8:  # a few layouts at most
                self._plans.clear()
            plan = self._plans[lengths] = _chunk_plan(lengths, self.chunk)
        return plan

    def sums(self, a: np.ndarray, shift: float, lengths: tuple[int, ...]) -> np.ndarray:
        """(4, S): sums of y, y^2, y^3, y^4 per segment, y = a - shift in float64."""
        if a.ndim != 1 or a.size != sum(lengths):
            raise ValueError(f"need a 1-D array of {sum(lengths)} elements, got {a.shape}")
        plan = self._plan(tuple(int(n) for n in lengths))
        if self._buf is None:
            self._buf = np.empty((4, self.chunk), dtype=_F64)
        piece_sums = np.empty((4, plan.pieces), dtype=_F64)
        for c0, c1, local, p0, p1 in plan.bounds:
            n = c1 - c0
            buf = self._buf[:, :n]
            y, y2 = buf[0], buf[1]
            np.copyto(y, a[c0:c1])  # to float64, then shift in place: cheaper than a mixed op
            np.subtract(y, shift, out=y)
            np.multiply(y, y, out=y2)
            np.multiply(y2, y, out=buf[2])
            np.multiply(y2, y2, out=buf[3])
            piece_sums[:, p0:p1] = np.add.reduceat(buf, local, axis=1)
        if plan.pieces == len(lengths):
            return piece_sums
        return np.add.reduceat(piece_sums, plan.first_piece, axis=1)
