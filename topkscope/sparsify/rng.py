"""Per-instance random generators for the randomised sparsifiers (no global RNG state)."""

from __future__ import annotations

import torch

from topkscope.sparsify.base import check_param


def seeded_generator(seed: int | None) -> torch.Generator:
    """A CPU generator seeded with `seed` (an integer in [0, 2^63 - 1]); None draws a fresh one."""
    generator = torch.Generator()
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(check_param("seed", seed, 0, 2**63 - 1, integer=True))
    return generator
