"""Which sparsifier instance a worker uses at a step, with randomness fixed by (seed, rank, step).

Deterministic methods: one instance per rank, reused. Randomised ones (class attribute
`randomised`, e.g. randk, dgc): a fresh instance per step seeded with step_seed(seed, rank, step), so each worker
draws independently, draws the same whether it is simulated or its own process, and a resumed
run draws what the uninterrupted run drew. Stateful ones (class attribute `stateful`, e.g.
sidco's adaptive stage count): one instance per rank that keeps its state between steps, so a
simulated worker adapts only on its own vectors, as its own process would; `state_dict()` /
`load_state_dict()` carry the own rank's state through a checkpoint. Training and the Recorder
both use this.
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
        self._other_ranks: dict[int, Sparsifier] = {}
        self.randomised = self._fixed.randomised and "seed" not in self.params
        self.stateful = bool(getattr(self._fixed, "stateful", False))

    def at(self, step: int, rank: int | None = None) -> Sparsifier:
        """The instance for `step` (and `rank`, default the source's own)."""
        r = self.rank if rank is None else rank
        if self.randomised:
            return self._get(self.name, **self.params, seed=step_seed(self.seed, r, step))
        if r == self.rank or not self.stateful:
            return self._fixed
        if r not in self._other_ranks:
            self._other_ranks[r] = self._get(self.name, **self.params)
        return self._other_ranks[r]

    def fresh(self) -> Sparsifier:
        """A new instance with no state (the recorder keeps one per row of a stateful method)."""
        return self._get(self.name, **self.params)

    def state_dict(self) -> dict | None:
        """The own rank's sparsifier state (None for a method that keeps none)."""
        return self._fixed.state_dict() if self.stateful else None

    def load_state_dict(self, state: dict | None) -> None:
        """Restore what state_dict() gave; None (a stateless method's) restores nothing."""
        if self.stateful and state is not None:
            self._fixed.load_state_dict(state)
