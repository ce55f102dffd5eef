"""Input handling shared by the statistics: NaN/Inf removal, subsampling, the max_n check.

Every statistic accepts a numpy array or a torch tensor of any shape (flattened; converted by
`topkscope.kernel.as_float_array`). Non-finite values are removed and counted here, once, so no
statistic silently propagates a NaN. The moments themselves are the kernel's
(`topkscope.kernel.central_sums`, `skew_kurtosis`).
"""

from __future__ import annotations

import math

import numpy as np

from topkscope import kernel, validate

MIN_VALUES = 8  # fewer finite values than this: statistics are reported as undefined


def finite_values(x) -> tuple[np.ndarray, int]:
    """(the finite values of x as a flat array, the number of NaN/Inf removed).

    One float64-accumulated sum proves every element finite; only otherwise is the mask built.
    """
    arr = kernel.as_float_array(x).ravel()
    if arr.size == 0 or math.isfinite(float(np.sum(arr, dtype=np.float64))):
        return arr, 0
    mask = np.isfinite(arr)
    kept = arr[mask]
    return kept, int(arr.size - kept.size)


def subsample(x: np.ndarray, max_n: int, rng: np.random.Generator) -> np.ndarray:
    """x itself when x.size <= max_n, else max_n values drawn without replacement by rng.

    The subset is uniformly random; its order is not (sort it, or draw again, when order matters).
    """
    max_n = check_max_n(max_n)
    if x.size <= max_n:
        return x
    return x[rng.choice(x.size, size=max_n, replace=False, shuffle=False)]


def check_max_n(max_n: int, minimum: int = MIN_VALUES) -> int:
    """max_n must be an integer >= minimum."""
    return validate.integer("max_n", max_n, minimum, whole_floats=True)
