"""Probe vectors for approximate selectors: families none of them was designed on.

Generalised normals of shape beta 0.3 ... 3, Student-t with 2 ... 5 degrees of freedom, a
Laplace with 30 % exact zeros (as unused embedding rows give) and a two-scale normal mixture
(5 % of the entries 20 times larger). `drifting` makes a slowly changing sequence of one
family, as u is under error feedback: u_t = 0.9 u_(t-1) + 0.1 fresh, so the scale shrinks by
about 10 % a step while the shape stays. `scale_jumps` multiplies such a sequence by 2x to 5x
(and down) between steps, as early training's u grows (FNN-3's largest |u| about ten-fold over
its first 100 steps): the case that stresses a selector carrying a threshold from one call to
the next. Used by the selector tests and by benchmarks/selector_counts.py; float64 numpy arrays.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from topkscope import validate

# scale factors between consecutive steps of `scale_jumps`, cycled
JUMPS = (1.0, 2.0, 5.0, 3.0, 0.2, 4.0, 2.0, 5.0, 1.0, 0.5, 3.0, 0.25, 0.2)
FAMILIES = ("gennorm-0.3", "gennorm-1", "gennorm-2", "gennorm-3", "t2", "t3", "t5",
            "laplace-30%-zeros", "two-scale")


def probe_vector(family: str, d: int, rng: np.random.Generator) -> np.ndarray:
    """d draws of `family` (one of FAMILIES)."""
    validate.choice("family", family, FAMILIES)
    d = validate.integer("d", d, 1)
    if family.startswith("gennorm-"):
        return stats.gennorm.rvs(float(family.split("-")[1]), size=d, random_state=rng)
    if family in ("t2", "t3", "t5"):
        return stats.t.rvs(int(family[1:]), size=d, random_state=rng)
    if family == "laplace-30%-zeros":
        x = rng.laplace(size=d)
        x[rng.random(d) < 0.3] = 0.0
        return x
    x = rng.normal(size=d)  # two-scale
    x[rng.random(d) < 0.05] *= 20.0
    return x


def drifting(family: str, steps: int, d: int, seed: int) -> list[np.ndarray]:
    """`steps` vectors of `family`: u_0 fresh, u_t = 0.9 u_(t-1) + 0.1 fresh."""
    rng = np.random.default_rng(seed)
    out = [probe_vector(family, d, rng)]
    for _ in range(validate.integer("steps", steps, 1) - 1):
        out.append(0.9 * out[-1] + 0.1 * probe_vector(family, d, rng))
    return out


def scale_jumps(family: str, steps: int, d: int, seed: int) -> list[np.ndarray]:
    """`drifting(family, steps, d, seed)` with step t scaled by the product of JUMPS[:t+1]
    (cycled): jumps of 2x to 5x up and down between consecutive vectors."""
    factors = np.resize(np.asarray(JUMPS), validate.integer("steps", steps, 1))
    return [x * s for x, s in zip(drifting(family, steps, d, seed), np.cumprod(factors))]
