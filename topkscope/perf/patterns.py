"""Communication time of one TopK-SGD exchange under the alpha-beta (latency-bandwidth) model.

A message of n bytes between two workers costs alpha + n * beta (alpha: seconds per message,
beta: seconds per byte). With P workers (Thakur, Rabenseifner and Gropp, "Optimization of
Collective Communication Operations in MPICH", IJHPCA 19(1), 2005; Patarasuk and Yuan,
"Bandwidth optimal all-reduce algorithms for clusters of workstations", JPDC 69(2), 2009):

    ring all-reduce of D bytes            2 (P-1) alpha + 2 (P-1)/P * D * beta
    ring all-gather, n bytes per worker   (P-1) alpha + (P-1) * n * beta
    recursive-doubling all-gather         log2(P) alpha + (P-1) * n * beta      (P a power of 2)

Dense SGD all-reduces D = d * b_v bytes (b_v = 4 for float32).

Sparse exchange (TopK-SGD, Shi et al. arXiv 1911.08772): worker p sends c_p (value, index)
pairs, c_p = k for exact Top-k, varying for approximate selectors (Gaussian-k, DGC, RedSync).
n_p = c_p * (b_v + b_i) bytes, b_i = 4 (int32 indices). Variants, each a named option:

    layout "two"    : two all-gathers, values then indices (the authors' published code)
    layout "packed" : one all-gather of values and indices back to back (this repository's
                      topkscope.comm.distributed), preceded by an all-gather of the counts
                      (one int64 per worker): (P-1) alpha + (P-1) * 8 * beta for the ring
    padded = True   : an equal-size collective (NCCL, gloo's all_gather) pads every worker
                      to m = max_p c_p, so the bandwidth term uses (P-1) * m * b
    padded = False  : an all-gatherv (MPI) moves the real counts; in a ring every worker
                      receives every other worker's block, the slowest the most:
                      (sum_p n_p - min_p n_p) * beta

Over the internet (SparseLoCo-style training between peers behind asymmetric links, e.g.
Covenant-72B: topkscope.perf.covenant) a peer puts its message once into shared storage and
fetches every other peer's: with an uplink of beta_up and a downlink of beta_down seconds per
byte, one message of n bytes each,

    relay all-gather, serial           alpha + n beta_up + (P-1) (alpha + n beta_down)
    relay all-gather, concurrent       max(alpha + n beta_up, (P-1) (alpha + n beta_down))

(concurrent: the upload and the downloads share no link, full duplex). No topology sends
less than the peer's own message once up: n beta_up bounds every all-gather from below.

gTop-k (Shi et al., "A Distributed Synchronous SGD Algorithm with Global Top-k Sparsification
for Low Bandwidth Networks", arXiv 1901.04359, ICDCS 2019): a tree reduction of the workers'
k pairs to a global top-k and its broadcast, log2(P) rounds each of one message of k pairs:

    gtopk tree                            2 log2(P) (alpha + k (b_v + b_i) beta)

Every function returns seconds; counts may be any non-negative integers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

VALUE_BYTES = 4   # float32 gradient values
INDEX_BYTES = 4   # int32 indices (d < 2^31), as the authors' code and topkscope.comm.sparse
COUNT_BYTES = 8   # the packed layout announces each worker's count as one int64
LAYOUTS = ("two", "packed")
ALGORITHMS = ("ring", "recursive-doubling")


def _check_workers(P: int) -> None:
    if int(P) != P or P < 1:
        raise ValueError(f"workers must be a positive integer, got {P!r}")


def ring_allreduce(P: int, nbytes: float, alpha: float, beta: float) -> float:
    """2 (P-1) alpha + 2 (P-1)/P * nbytes * beta (0 for one worker)."""
    _check_workers(P)
    return 2 * (P - 1) * alpha + 2 * (P - 1) / P * nbytes * beta


def allgather(P: int, nbytes_each: float, alpha: float, beta: float,
              algorithm: str = "ring") -> float:
    """All-gather of nbytes_each from every worker: (P-1) alpha (ring) or log2(P) alpha
    (recursive doubling), plus (P-1) * nbytes_each * beta in both."""
    _check_workers(P)
    if algorithm == "ring":
        latency = (P - 1) * alpha
    elif algorithm == "recursive-doubling":
        latency = math.ceil(math.log2(P)) * alpha if P > 1 else 0.0
    else:
        raise ValueError(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    return latency + (P - 1) * nbytes_each * beta


def allgatherv_bytes(nbytes: Sequence[float]) -> float:
    """Bytes the slowest worker receives in an all-gatherv: all blocks but its own (the
    smallest block's owner receives the most)."""
    return float(sum(nbytes) - min(nbytes)) if len(nbytes) else 0.0


def sparse_allgather(counts: Sequence[int], alpha: float, beta: float, *, layout: str = "two",
                     padded: bool = True, algorithm: str = "ring",
                     value_bytes: int = VALUE_BYTES, index_bytes: int = INDEX_BYTES) -> float:
    """Seconds to all-gather every worker's (value, index) pairs; counts[p] = c_p, len = P.

    See the module docstring for the layouts and padding; padded uses max(counts) for all.
    """
    P = len(counts)
    _check_workers(P)
    if min(counts) < 0:
        raise ValueError(f"counts must be >= 0, got {min(counts)}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    parts = [value_bytes, index_bytes] if layout == "two" else [value_bytes + index_bytes]
    m = max(counts)
    total = 0.0
    if layout == "packed":  # the counts first, so every worker knows m
        total += allgather(P, COUNT_BYTES, alpha, beta, algorithm)
        if m == 0:
            return total  # every worker skips the payload collective
    for b in parts:
        if padded:
            total += allgather(P, m * b, alpha, beta, algorithm)
        else:
            lat = allgather(P, 0.0, alpha, beta, algorithm)
            total += lat + allgatherv_bytes([c * b for c in counts]) * beta
    return total


def relay_allgather(P: int, nbytes_each: float, alpha: float, beta_up: float,
                    beta_down: float, concurrent: bool = False) -> float:
    """Every peer uploads its nbytes_each once and downloads the P-1 others' (module
    docstring): serial, the upload then the downloads; concurrent, the longer of the two."""
    _check_workers(P)
    if P == 1:
        return 0.0
    up = alpha + nbytes_each * beta_up
    down = (P - 1) * (alpha + nbytes_each * beta_down)
    return max(up, down) if concurrent else up + down


def gtopk_tree(P: int, k: int, alpha: float, beta: float, *, value_bytes: int = VALUE_BYTES,
               index_bytes: int = INDEX_BYTES) -> float:
    """gTop-k: 2 log2(P) (alpha + k (b_v + b_i) beta), P a power of two (rounded up if not)."""
    _check_workers(P)
    rounds = math.ceil(math.log2(P)) if P > 1 else 0
    return 2 * rounds * (alpha + k * (value_bytes + index_bytes) * beta)


def dense_bytes(d: int, value_bytes: int = VALUE_BYTES) -> int:
    """Bytes of the dense gradient a worker all-reduces."""
    return int(d) * value_bytes
