"""TopK-SGD through the DDP hook in training frameworks that wrap the model in
DistributedDataParallel themselves: PyTorch Lightning (`topkscope.integrations.lightning`:
TopKCallback) and Hugging Face Accelerate (`register_topk` on what `accelerator.prepare`
returns), and any script that holds the DDP wrapper.

    ddp = accelerator.prepare(model)            # or DDP(model) in a plain torchrun script
    state = register_topk(ddp, sparsifier="topk", density=0.01, recorder=rec)

Neither framework can register our hook itself: the hook's state needs the process group,
which the framework creates after the user builds its arguments (Lightning's
`DDPStrategy(ddp_comm_state=TopKHookState(...))` raises for that reason), and Lightning
registers communication hooks on CUDA only. Both therefore hand us the wrapped model once the
group exists, and we register the hook on it, on any device. The frameworks are optional
dependencies (`pip install topkscope[lightning]`, `topkscope[accelerate]`); this module imports
neither.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel


def register_topk(ddp_model: DistributedDataParallel, **state_args: Any):
    """A TopKHookState for the model inside `ddp_model` (keyword arguments: TopKHookState's,
    e.g. sparsifier, density, recorder, optimizer, run_fields), registered as its
    communication hook with topk_hook; returns the state (close it, or use it as a context
    manager, when training ends). ValueError when ddp_model is not DistributedDataParallel
    (e.g. Accelerate in a single process, which does not wrap the model). An optimizer given
    wrapped (Accelerate's AcceleratedOptimizer) is recorded as the optimizer it wraps."""
    from topkscope.comm import TopKHookState, topk_hook

    optimizer = state_args.get("optimizer")
    if isinstance(getattr(optimizer, "optimizer", None), torch.optim.Optimizer):
        state_args["optimizer"] = optimizer.optimizer  # Accelerate's wrapper: record the real one
    if not isinstance(ddp_model, DistributedDataParallel):
        raise ValueError(f"register_topk needs the DistributedDataParallel wrapper of the model, "
                         f"got {type(ddp_model).__name__}: run under torchrun (or `accelerate "
                         f"launch`) with more than one process, so that the model is wrapped")
    state = TopKHookState(ddp_model.module, **state_args)
    ddp_model.register_comm_hook(state, topk_hook)
    return state


__all__ = ["register_topk"]
