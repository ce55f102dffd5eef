"""torch.distributed transport: one worker per process (gloo on CPU, NCCL on GPU).

Sparse exchange with a different count per worker (the 2019 reference code assumed equal
counts and split the gathered buffer into equal chunks, silently dropping gradients):

    1. all-gather the counts c_0..c_{P-1}        (one int64 each)
    2. pad each worker's (values, indices) to m = max_p c_p and all-gather them as one byte
       buffer per worker (both arrays' bytes back to back: one collective, not two)
    3. drop the padding: keep the first c_p entries of worker p

If every count is zero, step 2 is skipped on every worker (they all know m = 0), so a worker
that selected nothing never hangs the collective.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from topkscope.comm.sparse import SparseUpdate
from topkscope.comm.transport import Transport


class DistributedTransport(Transport):
    """The calling process is one worker of an initialised process group."""

    def __init__(self, group: dist.ProcessGroup | None = None) -> None:
        if not dist.is_available() or not dist.is_initialized():
            raise ValueError("torch.distributed is not initialised: start under torchrun "
                             "or call init_process_group first")
        self.group = group
        self.world_size = dist.get_world_size(group)
        self.rank = dist.get_rank(group)
        self.local_ranks = [self.rank]

    def _device(self, t: torch.Tensor) -> torch.device:
        # NCCL needs CUDA tensors; gloo takes CPU ones.
        if dist.get_backend(self.group) == "nccl" and t.device.type != "cuda":
            return torch.device("cuda", torch.cuda.current_device())
        return t.device

    def gather_sparse(self, local: list[SparseUpdate]) -> list[SparseUpdate]:
        (upd,) = local
        device = self._device(upd.values)
        count = torch.tensor([upd.count], dtype=torch.int64, device=device)
        counts_t = [torch.empty_like(count) for _ in range(self.world_size)]
        dist.all_gather(counts_t, count, group=self.group)
        counts = [int(c) for c in counts_t]
        vdtype, idtype = upd.values.dtype, upd.indices.dtype
        m = max(counts)
        if m == 0:
            empty_v = torch.empty(0, dtype=vdtype, device=device)
            empty_i = torch.empty(0, dtype=idtype, device=device)
            return [SparseUpdate(empty_v, empty_i) for _ in counts]
        values = torch.zeros(m, dtype=vdtype, device=device)
        indices = torch.zeros(m, dtype=idtype, device=device)
        values[: upd.count] = upd.values
        indices[: upd.count] = upd.indices
        # widest element type first, so the second part starts at an aligned byte offset
        parts = sorted([values, indices], key=lambda t: -t.element_size())
        packed = torch.cat([t.view(torch.uint8) for t in parts])
        gathered = [torch.empty_like(packed) for _ in range(self.world_size)]
        dist.all_gather(gathered, packed, group=self.group)
        split = m * parts[0].element_size()
        out = []
        for buf, c in zip(gathered, counts):
            first, second = buf[:split].view(parts[0].dtype), buf[split:].view(parts[1].dtype)
            v, i = (first, second) if parts[0] is values else (second, first)
            out.append(SparseUpdate(v[:c], i[:c]))
        return out

    def sum_dense(self, local: list[torch.Tensor]) -> torch.Tensor:
        (t,) = local
        total = t.to(self._device(t))  # in place when t already lives where the backend needs
        dist.all_reduce(total, op=dist.ReduceOp.SUM, group=self.group)
        return total

    def sum_scalars(self, local: list[list[float]]) -> list[float]:
        (row,) = local
        device = torch.device("cuda", torch.cuda.current_device()) \
            if dist.get_backend(self.group) == "nccl" else torch.device("cpu")
        t = torch.tensor(row, dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.SUM, group=self.group)
        return t.tolist()

    def barrier(self) -> None:
        dist.barrier(group=self.group)

    def gather_objects(self, mine: object) -> list:
        """Every rank's small picklable object, in rank order (one all_gather_object)."""
        out: list = [None] * self.world_size
        dist.all_gather_object(out, mine, group=self.group)
        return out
