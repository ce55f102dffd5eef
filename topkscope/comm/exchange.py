"""One TopK-SGD communication step, split into the worker's half and the collective half.

    contribute (each worker p):  (values_p, I_p) = compress_p(g_p)        feedback + sparsify
    combine    (all workers):    mean = (1/P) * sum_p scatter(values_p, I_p)

With the `dense` sparsifier a worker contributes g itself and `combine` is an ordinary
all-reduce (no indices, e = 0). The training loop (simulated or torchrun workers) and the
DDP communication hook both run these two functions, so all three share the same math.
The loop calls `contribute` right after each worker's backward pass, so a worker's random
state (e.g. Rand-k) is the same whether its neighbours run in this process or elsewhere.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import torch

from topkscope.comm.compressor import WorkerCompressor
from topkscope.comm.sparse import (
    Payload,
    SparseUpdate,
    WireFormat,
    dense_payload,
    scatter_sum,
    sparse_payload,
)
from topkscope.comm.transport import Transport


@dataclass
class Contribution:
    """What one worker hands to the collective: a sparse update, or (dense) its gradient."""

    sparse: SparseUpdate | None
    dense: torch.Tensor | None
    time_select: float
    contraction: float = 0.0   # ||u - C(u)||^2 / ||u||^2 of this worker (dense: 0)
    contraction_selection: float = 0.0  # the same for the selection before quantization
    wire: WireFormat = field(default_factory=WireFormat)  # how the message is encoded


@dataclass
class ExchangeResult:
    mean: torch.Tensor                               # (1/P) sum of every worker's sent vector
    counts: list[int] = field(default_factory=list)  # elements sent per worker, all workers
    bytes_sent: int = 0                              # on the wire, all workers: counts,
    #                                                  pairs padded to the largest count
    time_select: float = 0.0                         # mean over local workers, seconds
    time_communicate: float = 0.0                    # gather + aggregate, seconds
    contraction: float = 0.0                         # mean over local workers (dense: 0)
    payload: Payload = field(default_factory=Payload)  # bytes_sent by part (comm.sparse)
    contraction_selection: float = 0.0               # mean over local workers, unquantized

    @property
    def payload_bytes(self) -> int:
        """The selected (value, index) pairs alone, all workers: no counts, no padding."""
        return self.payload.selected

    @staticmethod
    def count_columns(counts: list[int]) -> dict[str, float | int]:
        """train.parquet's count columns: mean, min, median and max elements per worker."""
        return {"selected": sum(counts) / len(counts), "selected_min": min(counts),
                "selected_median": float(statistics.median(counts)),
                "selected_max": max(counts)}


def contribute(compressor: WorkerCompressor, g: torch.Tensor, density: float, *, rank: int,
               recorder=None, step: int | None = None, held: tuple[int, ...] = ()
               ) -> Contribution:
    """The worker's half: u = e + g, select, keep the residual; tell the recorder if it asks.
    held: tensors not sent this step (WorkerCompressor.compress)."""
    record = recorder is not None and step is not None and recorder.wants(step)
    entries = compressor.layout.entries()
    if compressor.is_dense:
        if record:
            everything = torch.arange(g.numel(), device=g.device)
            recorder.record(step, rank, u=g, e=torch.zeros_like(g), g=g, layout=entries,
                            selected=everything)
        return Contribution(None, g, 0.0)
    t0 = time.perf_counter()
    out = compressor.compress(g, density, keep=record, held=held)
    elapsed = time.perf_counter() - t0
    if record:
        recorder.record(step, rank, u=out.u, e=out.e, g=g, layout=entries,
                        selected=out.update.indices.to(torch.int64))
    return Contribution(out.update, None, elapsed, out.contraction, out.contraction_selection,
                        compressor.wire_format(8 * g.element_size()))


def combine(transport: Transport, local: list[Contribution], d: int,
            out: torch.Tensor | None = None) -> ExchangeResult:
    """The collective half: every worker's contribution summed (rank order), divided by P.

    out: a d-vector the sparse mean is written into (reused across steps it saves a large
    allocation per step). The dense mean reuses the first contribution's storage instead.
    """
    if len(local) != len(transport.local_ranks):
        raise ValueError(f"need one contribution per local worker ({len(transport.local_ranks)}), "
                         f"got {len(local)}")
    P = transport.world_size
    t_select = sum(c.time_select for c in local) / len(local)
    contraction = sum(c.contraction for c in local) / len(local)
    selection = sum(c.contraction_selection for c in local) / len(local)
    t0 = time.perf_counter()
    if local[0].sparse is None:
        dense = [c.dense for c in local]
        mean = transport.sum_dense(dense).div_(P)
        payload = dense_payload(P, d, dense[0].element_size())
        return ExchangeResult(mean, [d] * P, payload.total, t_select,
                              time.perf_counter() - t0, 0.0, payload, 0.0)
    updates = [c.sparse for c in local]
    everyone = transport.gather_sparse(updates)
    ref = updates[0].values
    mean = scatter_sum(everyone, d, ref.dtype, ref.device, out, scale=1.0 / P)
    counts = [u.count for u in everyone]
    payload = sparse_payload(counts, local[0].wire)
    return ExchangeResult(mean, counts, payload.total, t_select, time.perf_counter() - t0,
                          contraction, payload, selection)


def exchange(transport: Transport, compressors: list[WorkerCompressor],
             grads: list[torch.Tensor], density: float, *, recorder=None,
             step: int | None = None, out: torch.Tensor | None = None,
             held: tuple[int, ...] = ()) -> ExchangeResult:
    """contribute for every local worker, then combine. compressors[i], grads[i] belong to
    worker transport.local_ranks[i]. With the dense sparsifier grads[0] holds the result.
    held: tensors no worker sends this step (the same on every worker)."""
    if len(compressors) != len(grads):
        raise ValueError(f"{len(compressors)} compressors but {len(grads)} gradients")
    local = [
        contribute(c, g, density, rank=r, recorder=recorder, step=step, held=held)
        for r, c, g in zip(transport.local_ranks, compressors, grads)
    ]
    return combine(transport, local, compressors[0].layout.d, out)
