"""How workers exchange sparse updates: one `exchange` step, two transports, a DDP hook.

    SimulatedTransport(P)      P workers in one process
    DistributedTransport()     one worker per torch.distributed process (gloo / NCCL)
    exchange(...)              feedback + sparsify + variable-count gather + mean
    TopKHookState, topk_hook   the same step inside DistributedDataParallel
    init_process_group, restart_count   a process group that survives torchrun restarts
"""

from topkscope.comm.compressor import WorkerCompressor
from topkscope.comm.exchange import ExchangeResult, exchange
from topkscope.comm.layout import Layout
from topkscope.comm.simulated import SimulatedTransport
from topkscope.comm.sparse import SparseUpdate, scatter_sum
from topkscope.comm.transport import Transport


def __getattr__(name: str):
    # torch.distributed pieces load on first use (keeps `import topkscope.comm` light).
    if name == "DistributedTransport":
        from topkscope.comm.distributed import DistributedTransport

        return DistributedTransport
    if name in ("init_process_group", "restart_count"):
        from topkscope.comm import elastic

        return getattr(elastic, name)
    if name in ("TopKHookState", "topk_hook"):
        from topkscope.comm import ddp_hook

        return getattr(ddp_hook, name)
    raise AttributeError(name)


__all__ = [
    "DistributedTransport",
    "ExchangeResult",
    "Layout",
    "SimulatedTransport",
    "SparseUpdate",
    "TopKHookState",
    "Transport",
    "WorkerCompressor",
    "exchange",
    "init_process_group",
    "restart_count",
    "scatter_sum",
    "topk_hook",
]
