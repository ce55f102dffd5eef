"""Moments of every row (whole model + layers) of several same-length vectors at once.

For a vector x of n elements (population moments, as numpy/scipy compute them by default):

    mean = sum(x) / n                 M_p = sum((x - mean)^p)
    std  = sqrt(M_2 / n)              skew = (M_3 / n) / std^3
    excess_kurtosis = (M_4 / n) / std^4 - 3        norm = sqrt(sum(x^2))
    max_abs = max |x|     zero_frac = #(x == 0) / n     nonfinite = #(x is NaN or +-Inf)

How: one float64 pass over y = x - c (c = an estimate of the vector's mean; any shift works)
gives per-segment shifted power sums s_p = sum y^p, p = 1..4; the kernel turns them into central
sums and skew / excess kurtosis (`topkscope.kernel.central_from_power_sums`, `skew_kurtosis`).
The pass itself stays here: it reduces every segment of K vectors at once.

The pass runs where the vector lives: CPU vectors in cache-sized chunks with reused buffers
(`ChunkedSums`), others with torch ops on their device (`device_power_sums`). Only the small
per-segment tables then go to the host, where everything else is float64 numpy. The
whole-model row adds the segment sums (same shift). A row whose own mean sits far from c
(n m^2 > 100 M_2, where the expansion would lose digits) is recomputed exactly with the
kernel's two-pass float64 `central_sums`, on the vector's own device (host rows of up to
4096 elements, such as biases and norms, all at once: its blocks form, `starts`).
Rows with non-finite values get NaN moments.

The residual e = u with u[I] = 0 needs no pass of its own: its shifted sums are u's minus
the selected entries' terms, sum_{i in I} ((u_i - c)^p - (0 - c)^p) (`residual_sums`).

CPU pass (`ChunkedSums`). For x split into consecutive segments and a shift c, one pass computes per segment

    s_p = sum (x_i - c)^p  for p = 1..4   (float64)

How: the vector is walked in chunks of `chunk` elements; each chunk's y = x - c, y^2, y^3
and y^4 go into one (4, chunk) float64 buffer that is reused for every chunk and every call
(a fresh multi-megabyte temporary per call costs more than the arithmetic, and a chunk-sized
one stays in cache), and one numpy reduceat per chunk sums the pieces of the segments inside
it; pieces of a segment that spans chunks are added afterwards. Memory is 32 * chunk bytes
whatever the model size.

Device pass (`device_power_sums`, `segment_sum`, `segment_max`): the same shifted power sums (s_p = sum (x_i - c)^p, p = 1..4, per segment,
float64), computed with torch ops on the vector's own device: one float64 work tensor of
4 x K x d, torch.segment_reduce for the per-segment sums. CPU vectors take the chunked numpy
path instead (`power_sums` chooses); this one is also run on the CPU by the tests.

Is e the error-feedback residual of u for the selection I, i.e. e = u with u[I] = 0
(`residual_selection`)? When it is (the usual case: e is what the worker keeps), e's statistics follow from u's and
the few selected entries (`residual_sums`) instead of a pass of their own. The check
is exact: I holds no repeated index, e[I] == 0, and e == u everywhere outside I.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from topkscope import kernel
from topkscope.hooks.rows import RowPlan

_F64 = np.float64
_REFINE_RATIO = 100.0  # recompute a row exactly when n m^2 > this * M_2
_CANCEL_RATIO = 1e6    # ... or when a subtraction removed more than this share of its mass
_SMALL_ROW = 1 << 12   # host rows redone exactly up to this length: together, in one pass
_SHIFT_SAMPLE = 4096   # elements of a strided sample that estimate the shift
_COUNT_LOOP_SEGMENTS = 256  # up to this many segments, counted one slice at a time


@dataclass
class PowerSums:
    """Per-segment sums of K vectors, as host float64 arrays: shift c (K,), sums (4, K, S),
    and (K, S) maxima of |x|, nonzero and non-finite counts."""

    shift: np.ndarray
    sums: np.ndarray
    max_abs: np.ndarray
    nonzero: np.ndarray
    nonfinite: np.ndarray
    # (2, K, S) the even sums these were obtained from by subtraction (None: direct sums);
    # where almost all of that mass was removed, the row is recomputed exactly
    subtracted_from: np.ndarray | None = None

    # the axis along which each table runs over the K vectors (sums is (4, K, S))
    VECTOR_AXIS = {"shift": 0, "sums": 1, "max_abs": 0, "nonzero": 0, "nonfinite": 0,
                   "subtracted_from": 1}

    def pick(self, i: int) -> PowerSums:
        """The sums of vector i alone (K = 1)."""
        def one(name: str):
            t = getattr(self, name)
            if t is None:
                return None
            return t[i : i + 1] if self.VECTOR_AXIS[name] == 0 else t[:, i : i + 1]

        return PowerSums(**{name: one(name) for name in self.VECTOR_AXIS})

    @staticmethod
    def cat(parts: list[PowerSums]) -> PowerSums:
        if len(parts) == 1:
            return parts[0]
        tables = {name: np.concatenate([getattr(p, name) for p in parts], axis=axis)
                  for name, axis in PowerSums.VECTOR_AXIS.items() if name != "subtracted_from"}
        if any(p.subtracted_from is not None for p in parts):
            tables["subtracted_from"] = np.concatenate(
                [p.sums[1::2] if p.subtracted_from is None else p.subtracted_from
                 for p in parts], axis=1)
        return PowerSums(**tables)


@dataclass
class Moments:
    """(K, R) float64 CPU tensors: one row per vector, one column per plan row."""

    mean: torch.Tensor
    std: torch.Tensor
    skew: torch.Tensor
    excess_kurtosis: torch.Tensor
    sumsq: torch.Tensor
    max_abs: torch.Tensor
    zero_frac: torch.Tensor
    nonfinite: torch.Tensor

    @property
    def norm(self) -> torch.Tensor:
        return self.sumsq.sqrt()


def _segment_max_abs(a: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """max |a| per segment, from the signed extremes (no |a| temporary); NaN propagates."""
    return np.maximum(np.maximum.reduceat(a, starts), -np.minimum.reduceat(a, starts)).astype(_F64)


def _segment_count(mask: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Number of True per segment, as float64 (exact)."""
    total = np.count_nonzero(mask)
    if total * 64 < mask.size:  # few (often none): locate them instead of summing every byte
        found = np.searchsorted(np.flatnonzero(mask), starts)
        return np.diff(found, append=total).astype(_F64)
    if starts.size <= _COUNT_LOOP_SEGMENTS:  # count_nonzero of a bool run is a fast popcount
        ends = np.append(starts[1:], mask.size)
        return np.array([np.count_nonzero(mask[a:b]) for a, b in zip(starts.tolist(),
                                                                      ends.tolist())], _F64)
    acc = np.int32 if mask.size < 2**31 else np.int64  # a byte view sums faster than bool
    return np.add.reduceat(mask.view(np.int8), starts, dtype=acc).astype(_F64)


def _cpu_power_sums(a: np.ndarray, lengths: tuple[int, ...], workspace: ChunkedSums,
                    ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    starts = starts_of(lengths)
    with np.errstate(all="ignore"):  # non-finite values are counted, not warned about
        sample = a[:: max(1, a.size // _SHIFT_SAMPLE)]
        c = float(np.add.reduce(sample, dtype=_F64)) / sample.size
        if not np.isfinite(c):
            c = 0.0
        s = workspace.sums(a, c, lengths)  # (4, S)
        bad = np.zeros(len(lengths))
        if not np.isfinite(s).all():
            bad = _segment_count(~np.isfinite(a), starts)
    nonzero = np.asarray(lengths, dtype=_F64) - _segment_count(a == 0, starts)
    return c, s, _segment_max_abs(a, starts), nonzero, bad


def power_sums(x: torch.Tensor | Sequence[torch.Tensor], absx: torch.Tensor | None,
               lengths: tuple[int, ...], *, workspace: ChunkedSums | None = None,
               on_device: bool | None = None) -> PowerSums:
    """Shifted power sums per segment of each of the K vectors x (K, d) or [x_k (d,)].

    absx = |x| (only the device path uses it; None: computed when needed). CPU vectors take
    the chunked numpy path unless on_device=True; `workspace` keeps its buffers across calls.
    """
    vectors = list(x)
    if on_device is None:
        on_device = vectors[0].device.type != "cpu"
    if on_device:
        stacked = torch.stack(vectors) if not isinstance(x, torch.Tensor) else x
        absx = stacked.abs() if absx is None else absx
        c, sums, mx, nz, bad = device_power_sums(stacked, absx, lengths)
        flat = torch.cat([t.reshape(-1).to(torch.float64) for t in (c, sums, mx, nz, bad)])
        host = kernel.to_numpy(flat)  # one transfer for all the small tables
        k, s = len(vectors), len(lengths)
        cuts = np.cumsum([k, 4 * k * s, k * s, k * s])
        c, sums, mx, nz, bad = np.split(host, cuts)
        return PowerSums(shift=c, sums=sums.reshape(4, k, s), max_abs=mx.reshape(k, s),
                         nonzero=nz.reshape(k, s), nonfinite=bad.reshape(k, s))
    workspace = workspace or ChunkedSums()
    parts = [_cpu_power_sums(kernel.as_float_array(v), lengths, workspace) for v in vectors]
    shift, sums, max_abs, nonzero, nonfinite = zip(*parts)
    return PowerSums(shift=np.array(shift), sums=np.stack(sums, axis=1),
                     max_abs=np.stack(max_abs), nonzero=np.stack(nonzero),
                     nonfinite=np.stack(nonfinite))


def residual_sums(u_sums: PowerSums, u: torch.Tensor, selected: torch.Tensor,
                  e_abs: torch.Tensor, starts: torch.Tensor | np.ndarray,
                  lengths: tuple[int, ...]) -> PowerSums:
    """Power sums of e = u with u[selected] = 0, from u's (one vector) and the selected terms.

    selected must hold unique indices; e_abs (1, d) = |e| (or e itself: only the per-segment
    maxima of its magnitude are taken) gives the max_abs column.
    """
    c = u_sums.shift  # (1,)
    seg_starts = kernel.to_numpy(starts)
    sel = kernel.to_numpy(selected)
    seg = np.searchsorted(seg_starts, sel, side="right") - 1
    picked = kernel.as_float_array(u)[sel] if u.device.type == "cpu" else \
        kernel.to_numpy(u[selected])
    vals = picked.astype(_F64)
    y, y0 = vals - c[0], -c[0]
    y2, y02 = y * y, y0 * y0
    terms = (y - y0, y2 - y02, y2 * y - y02 * y0, y2 * y2 - y02 * y02)
    S = len(lengths)
    delta = np.stack([np.bincount(seg, weights=t, minlength=S) for t in terms])  # (4, S)
    lost = np.bincount(seg, weights=(vals != 0).astype(_F64), minlength=S)
    if e_abs.device.type == "cpu":
        e_max = _segment_max_abs(kernel.as_float_array(e_abs.reshape(-1)),
                                 starts_of(lengths))[None]
    else:
        e_max = kernel.to_numpy(segment_max(e_abs.abs(), lengths).to(torch.float64))
    return PowerSums(shift=c, sums=u_sums.sums - delta[:, None, :], max_abs=e_max,
                     nonzero=u_sums.nonzero - lost[None, :], nonfinite=u_sums.nonfinite,
                     subtracted_from=u_sums.sums[1::2])


def row_moments(ps: PowerSums, plan: RowPlan, vectors: list[torch.Tensor]) -> Moments:
    """Moments of every plan row from power sums; vectors[k] is vector k (for exact reruns)."""
    cached = plan._device_cache.get("moment_rows")
    if cached is None:
        cols = list(plan.segments.named) if plan.per_layer else []
        seg_n = np.asarray(plan.segments.lengths, dtype=_F64)
        cached = plan._device_cache["moment_rows"] = (
            cols, np.concatenate([[seg_n.sum()], seg_n[cols]]))  # (R,) elements per row
    cols, n = cached

    def rows(t: np.ndarray, reduce) -> np.ndarray:  # whole model, then named segments
        return np.concatenate([reduce(t, axis=-1, keepdims=True), t[..., cols]], axis=-1)

    with np.errstate(all="ignore"):
        s = rows(ps.sums, np.sum)  # (4, K, R)
        m, m2, m3, m4 = kernel.central_from_power_sums(n, s)
        mean = ps.shift[:, None] + m
        max_abs = rows(ps.max_abs, np.max)
        zeros = n - rows(ps.nonzero, np.sum)
        nonfinite = rows(ps.nonfinite, np.sum)

        # rows where the shifted expansion or a subtraction would cancel digits: redo exactly
        risky = (n * m * m > _REFINE_RATIO * m2) | (m2 <= 0)
        if ps.subtracted_from is not None:
            before = rows(ps.subtracted_from, np.sum)  # (2, K, R)
            risky |= (before > _CANCEL_RATIO * s[1::2]).any(0)
        risky &= nonfinite == 0
        redo = list(zip(*np.nonzero(risky)))
        small = [(kv, r) for kv, r in redo if plan.numel[r] <= _SMALL_ROW
                 and vectors[kv].device.type == "cpu"]
        if small:  # a few short rows (biases, norms): all at once, not a call per row
            blocks = [kernel.as_float_array(vectors[kv])[
                int(plan.starts[r]) : int(plan.starts[r] + plan.numel[r])] for kv, r in small]
            got = kernel.central_sums(np.concatenate(blocks, dtype=_F64), starts=np.cumsum(
                [0] + [b.size for b in blocks[:-1]]))
            at = tuple(np.array(small).T)
            mean[at], m2[at], m3[at], m4[at] = got[1:]
        for kv, r in redo:
            if (kv, r) in small:
                continue
            a = int(plan.starts[r])
            exact = kernel.central_sums(vectors[kv][a : a + int(plan.numel[r])])
            mean[kv, r], m2[kv, r], m3[kv, r], m4[kv, r] = exact[1:]

        var = m2 / n
        skew, kurt = kernel.skew_kurtosis(var, m3 / n, m4 / n)
        sumsq = m2 + n * mean * mean
        std = np.sqrt(np.maximum(var, 0.0))
        broken = nonfinite > 0
        if broken.any():
            mean, std, skew, kurt, sumsq = (np.where(broken, np.nan, t)
                                            for t in (mean, std, skew, kurt, sumsq))
    t = torch.from_numpy
    return Moments(t(mean), t(std), t(skew), t(kurt), t(sumsq), t(max_abs), t(zeros / n),
                   t(nonfinite))




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


_T64 = torch.float64
_EXACT_F32_COUNT = 1 << 24  # float32 sums of 0/1 values are exact below this many terms


def starts_of(lengths: tuple[int, ...]) -> np.ndarray:
    """Start offset of each consecutive segment (read-only; cached for a few layouts)."""
    lengths = tuple(int(n) for n in lengths)
    found = _STARTS.get(lengths)
    if found is None:
        if len(_STARTS) > 16:
            _STARTS.clear()
        found = np.concatenate([[0], np.cumsum(lengths[:-1], dtype=np.int64)]).astype(np.int64)
        found.flags.writeable = False
        _STARTS[lengths] = found
    return found


_STARTS: dict[tuple[int, ...], np.ndarray] = {}


# how to reduce a segment: torch.segment_reduce name, numpy ufunc, per-part torch reduction
_REDUCTIONS = {
    "sum": ("sum", np.add, lambda part: part.sum(-1)),
    "max": ("max", np.maximum, lambda part: part.amax(-1)),
}


def _segment_reduce(x: torch.Tensor, lengths: tuple[int, ...], how: str,
                    fused: bool | None) -> torch.Tensor:
    """Reduce consecutive segments of the last dimension: (..., d) -> (..., S).

    On the CPU one numpy reduceat over a zero-copy view (fused=False: one torch reduction per
    segment); elsewhere torch.segment_reduce.
    """
    name, ufunc, per_part = _REDUCTIONS[how]
    if len(lengths) == 1:
        return per_part(x)[..., None]
    if fused if fused is not None else x.device.type != "cpu":
        lens = torch.tensor(lengths, device=x.device).expand(*x.shape[:-1], len(lengths))
        return torch.segment_reduce(x, name, lengths=lens.contiguous(), axis=x.dim() - 1)
    if fused is None and x.is_contiguous():
        return torch.from_numpy(ufunc.reduceat(x.numpy(), starts_of(lengths), axis=-1))
    return torch.stack([per_part(part) for part in x.split(lengths, -1)], -1)


def segment_sum(x: torch.Tensor, lengths: tuple[int, ...],
                fused: bool | None = None) -> torch.Tensor:
    """Sums over consecutive segments of the last dimension: (..., d) -> (..., S)."""
    return _segment_reduce(x, lengths, "sum", fused)


def segment_max(x: torch.Tensor, lengths: tuple[int, ...],
                fused: bool | None = None) -> torch.Tensor:
    """Maxima over consecutive segments of the last dimension (NaN propagates)."""
    return _segment_reduce(x, lengths, "max", fused)


def device_power_sums(x: torch.Tensor, absx: torch.Tensor, lengths: tuple[int, ...]
                      ) -> tuple[torch.Tensor, ...]:
    """(shift (K,), sums (4, K, S), max_abs, nonzero, nonfinite (K, S)) of x (K, d), on x's
    device; absx = |x|. The shift is each vector's mean (any shift works)."""
    k_vecs, d = x.shape
    dev = x.device
    c = x.sum(1).to(_T64) / d
    finite = bool(torch.isfinite(c).all())
    if not finite:
        c = torch.where(torch.isfinite(c), c, torch.zeros_like(c))
    powers = torch.empty((4, k_vecs, d), dtype=_T64, device=dev)
    y = powers[0]
    torch.sub(x, c[:, None], out=y)
    torch.mul(y, y, out=powers[1])
    torch.mul(powers[1], y, out=powers[2])
    torch.mul(powers[1], powers[1], out=powers[3])
    sums = segment_sum(powers, lengths)  # (4, K, S)
    del powers, y
    seg_max = segment_max(absx, lengths).to(_T64)
    if not finite:
        bad = segment_sum((~torch.isfinite(x)).to(_T64), lengths)
        nonzero = segment_sum((x != 0).to(_T64), lengths)
    else:
        bad = torch.zeros((k_vecs, len(lengths)), dtype=_T64, device=dev)
        if absx.dtype == torch.float32 and max(lengths) < _EXACT_F32_COUNT:
            nonzero = segment_sum(absx.sign(), lengths).to(_T64)
        else:
            nonzero = segment_sum(absx.sign().to(_T64), lengths)
    return c, sums, seg_max, nonzero, bad


_MAX_SHARE = 8  # selections above d / 8 elements: a direct pass over e is as cheap


def residual_selection(u: torch.Tensor, e: torch.Tensor | None, selected: torch.Tensor | None,
                       e_given: bool) -> torch.Tensor | None:
    """selected when e is u with u[selected] = 0 and selected is duplicate-free, else None.

    e_given=False means e was derived from u and selected by the caller (no check of e).
    """
    if selected is None or e is None:
        return None
    d = u.numel()
    if selected.numel() > d // _MAX_SHARE:
        return None
    if u.device.type != "cpu":
        if torch.unique(selected).numel() != selected.numel():
            return None
        if e_given and not torch.equal(e, u.index_fill(0, selected, 0)):
            return None
        return selected
    sel = np.sort(selected.numpy())
    if sel.size > 1 and not (sel[1:] != sel[:-1]).all():
        return None
    if e_given:
        ua, ea = u.numpy(), e.numpy()
        if not (ea[sel] == 0).all():
            return None
        # every difference must be at a selected index: as many differences in all of u as at
        # the selected ones (NaN differs from itself: such e is measured directly)
        if np.count_nonzero(ua != ea) != np.count_nonzero(ua[sel] != ea[sel]):
            return None
    return selected
