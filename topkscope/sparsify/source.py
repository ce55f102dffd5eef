"""Which sparsifier instance a worker uses at a step, with randomness fixed by (seed, rank, step).

Deterministic methods: one instance, reused. Randomised ones (class attribute
`randomised`, e.g. randk, dgc): a fresh instance per step seeded with step_seed(seed, rank, step), so each worker
draws independently, draws the same whether it is simulated or its own process, and a resumed
run draws what the uninterrupted run drew. Training and the Recorder both use this.
"""

from __future__ import annotations

from topkscope.sparsify.base import Sparsifier


def step_seed(seed: int, rank: int, step: int) -> int:
    """A seed that depends only on (seed, rank, step): worker rank's randomness at step."""
    return (seed * 1_000_003 + rank * 7_919 + step * 104_729 + 1) % (2**63)


class SparsifierSource:
    """The sparsifier worker `rank` uses at each step (see the module docstring)."""

    def __init__(self, name: str, params: dict | None, seed: int, rank: int) -> None:
        from topkscope.sparsify import get_sparsifier  # the registry imports this module

        self.name, self.params = name, dict(params or {})
        self.seed, self.rank = seed, rank
        self._get = get_sparsifier
        self._fixed = get_sparsifier(name, **self.params)
        self.randomised = self._fixed.randomised and "seed" not in self.params

    def at(self, step: int, rank: int | None = None) -> Sparsifier:
        """The instance for `step` (and `rank`, default the source's own)."""
        if not self.randomised:
            return self._fixed
        r = self.rank if rank is None else rank
        return self._get(self.name, **self.params, seed=step_seed(self.seed, r, step))
