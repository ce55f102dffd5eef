"""How a model's parameter tensors sit in one flat d-vector (the paper's merged buffer)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Layout:
    """Parameter i occupies flat[offsets[i] : offsets[i] + numels[i]], in model order."""

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    offsets: tuple[int, ...]
    numels: tuple[int, ...]

    @classmethod
    def of(cls, named_parameters: Iterable[tuple[str, torch.Tensor]]) -> Layout:
        """Layout of the trainable parameters (requires_grad) in the order given."""
        names, shapes, offsets, numels = [], [], [], []
        offset = 0
        for name, p in named_parameters:
            if not p.requires_grad:
                continue
            names.append(name)
            shapes.append(tuple(p.shape))
            offsets.append(offset)
            numels.append(p.numel())
            offset += p.numel()
        if not names:
            raise ValueError("the model has no trainable parameters")
        return cls(tuple(names), tuple(shapes), tuple(offsets), tuple(numels))

    @property
    def d(self) -> int:
        return self.offsets[-1] + self.numels[-1]

    def entries(self) -> list[tuple[str, int, int]]:
        """[(name, offset, numel)]: the form the Recorder takes."""
        return list(zip(self.names, self.offsets, self.numels))

    def flatten(self, tensors: Sequence[torch.Tensor | None]) -> torch.Tensor:
        """One d-vector from per-parameter tensors in layout order (None -> zeros)."""
        ref = next(t for t in tensors if t is not None)
        parts = [
            (t.reshape(-1) if t is not None else ref.new_zeros(n))
            for t, n in zip(tensors, self.numels)
        ]
        return torch.cat(parts)

    def views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """Per-parameter views into a flat d-vector, shaped like the parameters."""
        return [flat[o : o + n].view(s) for o, n, s in zip(self.offsets, self.numels, self.shapes)]

    def tensor_of(self, idx: torch.Tensor) -> torch.Tensor:
        """The parameter tensor (its position in the layout) that holds each flat index."""
        starts = torch.tensor(self.offsets, dtype=torch.int64, device=idx.device)
        return torch.bucketize(idx.to(torch.int64), starts, right=True) - 1

    def describe(self) -> list[list]:
        """Plain (name, shape) pairs, for checkpoints and error messages."""
        return [[n, list(s)] for n, s in zip(self.names, self.shapes)]
