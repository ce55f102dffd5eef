"""Where each layer sits in the flat whole-model vector, and the fixed per-row table.

A layout is a list of (layer_name, offset, numel): layer i is flat[offset : offset + numel].
Layers may not overlap; uncovered stretches (padding) are kept as unnamed gaps that count
in the whole-model row ("__global__") but get no row of their own.

The recorder's rows are the whole model first, then the named layers in offset order. For
each row and configured density rho the target count is k = max(1, round(rho * numel)) and
the reference contractions 1 - k/n, (1 - k/n)^2 and the Gaussian value are fixed, so they
are computed once per (layout, densities) and cached.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from topkscope import validate
from topkscope.bounds import classic_bound, gaussian_ratio, k_from_density
from topkscope.schema import GLOBAL


@dataclass(frozen=True)
class Segments:
    """A partition of [0, d) into contiguous segments, named (layers) or not (gaps)."""

    d: int
    starts: tuple[int, ...]
    lengths: tuple[int, ...]
    names: tuple[str | None, ...]

    @property
    def named(self) -> tuple[int, ...]:
        """Positions (in segment order) of the named segments."""
        return tuple(i for i, n in enumerate(self.names) if n is not None)


@dataclass(frozen=True)
class RowPlan:
    """The fixed part of every record for one layout and one list of densities.

    Row 0 is the whole model; rows 1.. are the named segments. Arrays have shape (R,) or (R, D).
    """

    segments: Segments
    per_layer: bool
    densities: tuple[float, ...]
    layers: tuple[str, ...]          # (R,)
    starts: np.ndarray               # (R,) int64, row 0 starts at 0
    numel: np.ndarray                # (R,) int64
    k: np.ndarray                    # (R, D) int64
    classic_bound: np.ndarray        # (R, D) float64
    paper_bound: np.ndarray          # (R, D) float64
    gaussian_ratio: np.ndarray       # (R, D) float64
    _device_cache: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def rows(self) -> int:
        return len(self.layers)

    @property
    def kmax(self) -> np.ndarray:
        """(R,) the largest k per row over the densities."""
        return self.k.max(axis=1)


def segments_of(layout: Sequence, d: int) -> Segments:
    """Validate a layout [(name, offset, numel), ...] against a d-vector; gaps become unnamed."""
    if isinstance(layout, (str, bytes)) or not isinstance(layout, Sequence):
        raise ValueError(f"layout must be a list of (layer_name, offset, numel), got {layout!r}")
    entries = []
    seen: set[str] = set()
    for i, item in enumerate(layout):
        try:
            name, offset, numel = item
        except (TypeError, ValueError):
            raise ValueError(
                f"layout[{i}] = {item!r} must be (layer_name, offset, numel)") from None
        if not isinstance(name, str) or not name or name == GLOBAL:
            raise ValueError(f"layout[{i}] has layer name {name!r}; "
                             f"need a non-empty str, not {GLOBAL!r}")
        if name in seen:
            raise ValueError(f"layout has layer {name!r} twice; layer names must be unique")
        seen.add(name)
        offset = validate.integer(f"layout[{i}] offset", offset, whole_floats=True)
        numel = validate.integer(f"layout[{i}] numel", numel, whole_floats=True)
        if numel < 0 or offset < 0 or offset + numel > d:
            raise ValueError(
                f"layout[{i}] ({name!r}) covers [{offset}, {offset + numel}), outside [0, d = {d})"
            )
        if numel:
            entries.append((offset, numel, name))
    entries.sort()
    starts, lengths, names = [], [], []
    pos = 0
    for offset, numel, name in entries:
        if offset < pos:
            raise ValueError(
                f"layout layer {name!r} at offset {offset} overlaps the layer before it")
        if offset > pos:
            starts.append(pos), lengths.append(offset - pos), names.append(None)
        starts.append(offset), lengths.append(numel), names.append(name)
        pos = offset + numel
    if pos < d:
        starts.append(pos), lengths.append(d - pos), names.append(None)
    return Segments(d, tuple(starts), tuple(lengths), tuple(names))


def coordinate_sample(segments: Segments, count: int, seed: int
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(indices, layers): min(count, d) coordinates of the flat d-vector drawn uniformly
    without replacement by numpy's default_rng(seed) (the same on every rank: the recorder's
    seed, not the rank), sorted; each one's layer name (GLOBAL for a gap of no layer)."""
    d = segments.d
    picked = np.sort(np.random.default_rng(seed).choice(d, size=min(count, d), replace=False))
    seg = np.searchsorted(np.asarray(segments.starts), picked, side="right") - 1
    names = np.array([GLOBAL if n is None else n for n in segments.names], dtype=object)
    return picked.astype(np.int64), names[seg]


def whole(d: int) -> Segments:
    """One unnamed segment covering the whole vector (no per-layer rows)."""
    return Segments(d, (0,), (d,), (None,))


def plan_rows(segments: Segments, densities: Sequence[float], per_layer: bool) -> RowPlan:
    """The per-row table: k and the three reference contractions for every (row, density)."""
    named = segments.named if per_layer else ()
    layers = (GLOBAL, *(segments.names[i] for i in named))
    starts = np.array([0, *(segments.starts[i] for i in named)], dtype=np.int64)
    numel = np.array([segments.d, *(segments.lengths[i] for i in named)], dtype=np.int64)
    dens = tuple(float(x) for x in densities)
    k = np.array([[k_from_density(rho, int(n)) for rho in dens] for n in numel], dtype=np.int64)
    classic = np.array([[classic_bound(kk, int(n)) for kk in row]
                        for row, n in zip(k, numel)])
    paper = classic ** 2
    gauss = np.array([[gaussian_ratio(kk, int(n)) for kk in row]
                      for row, n in zip(k, numel)])
    return RowPlan(segments, per_layer, dens, layers, starts, numel, k, classic, paper, gauss)
