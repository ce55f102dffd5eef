"""Test vectors and slow float64 references shared by the sparsifier tests (no tests here)."""

from __future__ import annotations

import torch


def normal(d: int, seed: int) -> torch.Tensor:
    return torch.randn(d, generator=torch.Generator().manual_seed(seed))


def laplace(d: int, seed: int) -> torch.Tensor:
    """Standard Laplace by inverse CDF (seeded, no global RNG)."""
    v = torch.rand(d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) - 0.5
    return (-torch.sign(v) * torch.log1p(-(2.0 * v.abs()).clamp(max=1.0 - 2.0**-53))).float()


def student_t3(d: int, seed: int) -> torch.Tensor:
    """Student-t with 3 degrees of freedom: Z / sqrt(chi2_3 / 3)."""
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(d, generator=gen)
    chi2 = torch.randn(d, 3, generator=gen).pow(2).sum(1)
    return z / torch.sqrt(chi2 / 3.0)


def mixture(d: int, seed: int) -> torch.Tensor:
    """Two scales: 90% N(0, 0.1^2), 10% N(0, 1)."""
    gen = torch.Generator().manual_seed(seed)
    u = torch.randn(d, generator=gen) * 0.1
    wide = torch.rand(d, generator=gen) < 0.1
    u[wide] = torch.randn(int(wide.sum()), generator=gen)
    return u


DISTRIBUTIONS = {"normal": normal, "laplace": laplace, "student_t3": student_t3, "mixture": mixture}


def edge_vectors() -> dict[str, torch.Tensor]:
    """Small vectors that break careless selection code."""
    gen = torch.Generator().manual_seed(7)
    sparse = torch.zeros(200_000)
    nz = torch.randperm(200_000, generator=gen)[:200]  # 99.9% exact zeros
    sparse[nz] = torch.randn(200, generator=gen)
    ties = torch.randint(-3, 4, (50_000,), generator=gen).float()  # 7 values, massive ties
    big = torch.randn(400_000, generator=gen)
    return {
        "normal_small": torch.randn(1000, generator=gen),
        "normal_blocked": torch.randn(300_001, generator=gen),  # blocked path + a tail
        "laplace_blocked": laplace(123_457, 3),
        "mixture_blocked": mixture(250_000, 4),
        "ties": ties,
        "ties_blocked": torch.randint(-2, 3, (200_003,), generator=gen).float(),
        "all_zero": torch.zeros(70_000),
        "embedding_like": sparse,
        "non_contiguous": big[::2],
        "float16": torch.randn(100_000, generator=gen).half(),
        "bfloat16": torch.randn(100_000, generator=gen).bfloat16(),
        "float64": torch.randn(80_000, generator=gen, dtype=torch.float64),
        "single": torch.tensor([-2.5]),
        "constant": torch.full((40_000,), 0.5),
        "outliers": torch.cat([torch.randn(99_990, generator=gen), torch.full((10,), 1e6)]),
    }
