"""Input handling shared by the statistics: array conversion, NaN/Inf removal, subsampling, moments.

Every statistic accepts a numpy array or a torch tensor of any shape (flattened). Non-finite
values are removed and counted here, once, so no statistic silently propagates a NaN.
Moments of very long float32 vectors are accumulated in float64 over fixed-size chunks, so no
float64 copy of the whole vector is ever made.
"""

from __future__ import annotations

import math

import numpy as np

from topkscope import validate

MIN_VALUES = 8  # fewer finite values than this: statistics are reported as undefined
CHUNK = 1 << 20  # elements per float64 chunk (8 MiB)


def as_numpy(x) -> np.ndarray:
    """A flat float numpy view/copy of x (numpy array, torch tensor, or sequence).

    float32 and float64 keep their dtype; half precision and integers become float32/float64.
    """
    if type(x).__module__.startswith("torch"):
        import torch  # only reached when x already is a tensor

        t = x.detach()
        if t.dtype in (torch.float16, torch.bfloat16):
            t = t.float()  # numpy has no bfloat16
        x = t.cpu().numpy()
    arr = np.asarray(x)
    if arr.dtype.kind == "c":
        raise ValueError(f"x has complex dtype {arr.dtype}; only real values are allowed")
    if arr.dtype == np.float16 or arr.dtype.kind in "biu":
        arr = arr.astype(np.float32 if arr.dtype.itemsize <= 2 else np.float64)
    elif arr.dtype.kind != "f":
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"x must hold real numbers, got dtype {arr.dtype}") from None
    return arr.ravel()


def finite_values(x) -> tuple[np.ndarray, int]:
    """(the finite values of x as a flat array, the number of NaN/Inf removed).

    One float64-accumulated sum proves every element finite; only otherwise is the mask built.
    """
    arr = as_numpy(x)
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


def central_moments(x: np.ndarray) -> dict[str, float]:
    """n, mean and the central power sums m2, m3, m4 (divided by n), in float64.

        mean = sum(x)/n,  m_p = sum((x - mean)^p)/n   (two passes, chunked)
    """
    n = int(x.size)
    if n == 0:
        return {"n": 0, "mean": math.nan, "m2": math.nan, "m3": math.nan, "m4": math.nan}
    mean = float(np.sum(x, dtype=np.float64)) / n
    s2 = s3 = s4 = 0.0
    for start in range(0, n, CHUNK):
        c = x[start : start + CHUNK].astype(np.float64)
        c -= mean
        c2 = c * c
        s2 += float(c2.sum())
        s3 += float(np.dot(c2, c))
        s4 += float(np.dot(c2, c2))
    return {"n": n, "mean": mean, "m2": s2 / n, "m3": s3 / n, "m4": s4 / n}


def shape_from_moments(m2: float, m3: float, m4: float) -> tuple[float, float]:
    """(skew g1, excess kurtosis g2), the biased moment estimators:

        g1 = m3 / m2^(3/2),   g2 = m4 / m2^2 - 3      (NaN when m2 = 0: a constant vector)
    """
    if not m2 > 0.0:
        return math.nan, math.nan
    return m3 / m2**1.5, m4 / m2**2 - 3.0
