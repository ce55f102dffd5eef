"""TopK-SGD as a DistributedDataParallel communication hook, for users' own torchrun scripts.

    state = TopKHookState(model, sparsifier="topk", density=0.001)
    ddp.register_comm_hook(state, topk_hook)

DDP hands the hook its gradient buckets one at a time (in bucket order; `is_last()` marks the
final one). The hook holds every bucket until the last arrives, reassembles the whole-model
gradient in the model's parameter order, runs the same `exchange` as the training loop
(error feedback + sparsifier + variable-count all-gather, mean over P), and completes every
bucket's future with its slice of the mean. Consequences:

* global selection really is global (one k over all d elements, as in the paper), and
  per-tensor ("layerwise") selection sees whole tensors;
* error feedback is one flat residual in parameter order, so DDP's bucket rebuild after the
  first iteration (which reorders and regroups parameters) cannot mix residuals up;
* like PyTorch's PowerSGD hook, the first `dense_steps` iterations run a plain all-reduce.

With a recorder (or run_dir) the state also describes the run as `topkscope run` does: rank 0
adds the run's fields to manifest.json and writes train.parquet from the hook's own
bookkeeping (comm.run_log), so analyze, the claims, the figures and the notebooks read a
user's run like ours; `state.note(loss=..., lr=..., metric=...)` adds what only the loop knows.

A script that resumes (loads `state.load_state_dict` from its checkpoint and appends to its
run folder) continues the run: at the hook's first step rank 0 sets aside what the folder
holds for that step and later (run_log.HookRunLog.begin), so every step is there once. A state
that closes before its hook ever ran ends the run failed (NeverRan); arguments it refuses
leave no run folder behind (Recorder.discard_unused).

`with TopKHookState(...) as state:` closes its recorder on leaving (marked failed on an
exception). A script that ends without closing still exits cleanly: at interpreter exit the
state closes its recorder and, when the process ends normally with its default process group
still up, destroys that group while Python is fully alive. Left to interpreter finalization,
gloo's worker threads can still hold work objects with Python references (the async dense
all-reduce of the first steps, its callback), and tearing those down after the interpreter
has gone aborts the process (`terminate called without an active exception`).
"""

# No `from __future__ import annotations`: DDP checks the hook's annotations at runtime.
import atexit
import functools
import math
import sys
import time
import warnings
import weakref
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from topkscope import validate
from topkscope.comm.compressor import WorkerCompressor
from topkscope.comm.distributed import DistributedTransport
from topkscope.comm.exchange import ExchangeResult, exchange
from topkscope.comm.layout import Layout
from topkscope.comm.run_log import HookRunLog, manifest_fields
from topkscope.comm.sparse import dense_payload_bytes
from topkscope.hooks.lifecycle import CLOSED_AT_EXIT
from topkscope.hooks.settings import check_quantize
from topkscope.manifest import describe_optimizer
from topkscope.sparsify import check_density
from topkscope.sparsify.quantize import quantizer_from
from topkscope.sparsify.source import SparsifierSource


class NeverRan(RuntimeError):
    """A hook state closed before its hook ran even once: nothing was sparsified."""


class TopKHookState:
    """Everything the hook keeps between calls; one per process.

    density: a number in (0, 1] or a function step -> density (a density warm-up).
    recorder: an optional hooks.Recorder; it sees (u, e, g, selected) of this rank.
    seed: randomised sparsifiers (randk, dgc) draw from (seed, rank, step).
    k_rule: "round" (default) or "floor" (the Gaussian-k authors' k = max(int(rho d), 1)).
    A rank whose sparsifier selects nothing sends nothing (the all-gather takes a count of 0);
    `last.counts` holds every rank's count.
    run_dir: where rank 0 writes train.parquet and the run's manifest fields (default: the
    recorder's folder; None without a recorder: nothing is written). run_fields: manifest
    fields to add or override (e.g. model="resnet20", dataset="cifar10").
    optimizer: the script's optimizer (e.g. torch.optim.AdamW); its name and hyper-parameters
    go into the manifest (`optimizer`; manifest.describe_optimizer). The hook does not use it:
    it hands DDP the mean of the sparsified u, which the optimizer then takes as the gradient.
    quantize: {bits, range} (sparsify.quantize) sends b-bit values, the quantization error
    kept in the residual, as `quantize:` does in `topkscope run`; None sends u's own values.
    """

    def __init__(self, model: nn.Module, sparsifier: str = "topk", density: float |
                 Callable[[int], float] = 0.001, selection: str = "global",
                 error_feedback: bool = True, dense_steps: int = 2, recorder=None,
                 process_group: dist.ProcessGroup | None = None,
                 sparsifier_args: dict | None = None, seed: int = 0,
                 k_rule: str = "round", run_dir=None, run_fields: dict | None = None,
                 optimizer=None, quantize: dict | None = None) -> None:
        try:  # bad arguments: the recorder's folder, unused, is removed (a rerun can start)
            validate.integer("dense_steps", dense_steps, 0)
            described = None if optimizer is None else describe_optimizer(optimizer)
            if not callable(density):
                check_density(density)
            trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
            if not trainable:
                raise ValueError("the model has no trainable parameters for the hook to send")
            self.layout = Layout.of(trainable)
            self._slot = {id(p): i for i, (_, p) in enumerate(trainable)}  # param -> position
            self.device = trainable[0][1].device
            self.transport = DistributedTransport(process_group)
            self.source = SparsifierSource(sparsifier, sparsifier_args, seed,
                                           self.transport.rank)
            quantize = check_quantize("quantize", quantize)
            self.compressor = WorkerCompressor(self.source.at(0), self.layout, selection,
                                               error_feedback, k_rule,
                                               quantizer=quantizer_from(quantize))
        except Exception as exc:
            if recorder is not None:
                recorder.discard_unused(exc)
            raise
        self.density = density
        self.dense_steps = dense_steps
        self.recorder = recorder
        self.step = 0
        self.last: ExchangeResult | None = None  # the latest step's counts, bytes and times
        self._mean: torch.Tensor | None = None     # receive buffer, reused every step
        self._pending: list[tuple[dist.GradBucket, torch.futures.Future]] = []
        self.closed = False
        self.log = None
        self._begun = False  # the hook's first call in this process (HookRunLog.begin)
        self._forward_start: float | None = None  # first training forward since the last step
        model.register_forward_pre_hook(functools.partial(_forward_started, weakref.ref(self)))
        if self.transport.rank == 0:
            folder = run_dir if run_dir is not None else getattr(recorder, "out_dir", None)
            if folder is not None:
                fields = manifest_fields(self, model, Path(folder), sparsifier, sparsifier_args,
                                         density, selection, error_feedback, seed, k_rule,
                                         {"quantize": quantize, **(run_fields or {})},
                                         optimizer=described)
                self.log = HookRunLog.start(folder, recorder, fields)
        atexit.register(_release_at_exit, weakref.ref(self))

    def note(self, **values) -> None:
        """Add what only the training loop knows (loss, lr, metric, metric_name, epoch,
        time_compute) to the latest step's train.parquet row (rank 0; others ignore it)."""
        if self.log is not None:
            self.log.note(**values)

    def close(self, error: BaseException | None = None, closed_by: str | None = None) -> None:
        """Close the recorder (marked failed when error is given); the hook stays usable.
        A state whose hook never ran (no step at all: e.g. a framework that did not register
        it, or registered it on another model) closes its run `failed` with NeverRan."""
        if self.closed:
            return
        self.closed = True
        if error is None and self.step == 0 and (self.log or self.recorder) is not None:
            error = NeverRan("the communication hook never ran: no step went through "
                             "topk_hook (was it registered with ddp.register_comm_hook on "
                             "the DDP model that trains?)")
            warnings.warn(f"TopKHookState: {error}; the run is marked failed", stacklevel=2)
        if self.log is not None:
            self.log.close(error)
        if self.recorder is not None:
            if error is None:
                self.recorder.close(closed_by=closed_by)
            else:
                self.recorder.fail(error, closed_by=closed_by)

    def __enter__(self) -> "TopKHookState":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(exc)

    def density_at(self, step: int) -> float:
        return check_density(self.density(step) if callable(self.density) else self.density)

    def state_dict(self) -> dict:
        """Step, this rank's residual and its sparsifier's state (None unless the method
        adapts between steps, e.g. sidco), for the user's checkpoint (torch.save-able).
        It is taken for a checkpoint, so what the recorder and train.parquet hold of the
        steps before it is written first: a run resumed from the checkpoint loses none."""
        if self.recorder is not None and not self.recorder.closed:
            self.recorder.flush()
        if self.log is not None:
            self.log.flush()
        return {"step": self.step, "residual": self.compressor.state_dict(),
                "sparsifier": self.source.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore what state_dict() returned (the residual goes to the model's device)."""
        self.step = int(state["step"])
        self.compressor.load_state_dict(state["residual"], self.device)
        self.source.load_state_dict(state.get("sparsifier"))


def _release_at_exit(ref: "weakref.ref[TopKHookState]") -> None:
    """atexit: close a state the script left open, then (on a normal exit) destroy the
    default process group the hook used, before interpreter finalization (see the module
    docstring). After an uncaught exception the group is left alone: other ranks may be
    inside a collective, and destroying it could hang."""
    state = ref()
    if state is None:
        return
    error = getattr(sys, "last_value", None)  # set by the interpreter for an uncaught error
    try:
        state.close(error, closed_by=CLOSED_AT_EXIT)
    finally:
        state._mean, state._pending, state.last = None, [], None
        if (error is None and state.transport.group is None and dist.is_available()
                and dist.is_initialized()):
            dist.destroy_process_group()


def _forward_started(ref: "weakref.ref[TopKHookState]", module: nn.Module, args) -> None:
    """Forward pre-hook: the first training forward since the last step starts its compute
    time (a gradient accumulation's forwards all count; evaluation forwards do not)."""
    state = ref()
    if (state is not None and state._forward_start is None and module.training
            and torch.is_grad_enabled()):
        state._forward_start = time.perf_counter()


def _compute_seconds(state: TopKHookState) -> float:
    """Forward + backward of this step: from its first forward to DDP's last bucket."""
    start, state._forward_start = state._forward_start, None
    return math.nan if start is None else time.perf_counter() - start


def _dense_allreduce(state: TopKHookState, bucket: dist.GradBucket
                     ) -> torch.futures.Future[torch.Tensor]:
    buf = bucket.buffer().div_(state.transport.world_size)
    work = dist.all_reduce(buf, group=state.transport.group, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])


def topk_hook(state: TopKHookState, bucket: dist.GradBucket
              ) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: register with `ddp.register_comm_hook(state, topk_hook)`."""
    if not state._begun:
        state._begun = True
        if state.log is not None:
            state.log.begin(state.step)
    if state.step < state.dense_steps:
        fut = _dense_allreduce(state, bucket)
        if bucket.is_last():
            compute = _compute_seconds(state)
            if state.log is not None:
                d, P = state.layout.d, state.transport.world_size
                state.log.add({"step": state.step, "density": 1.0, "k": d,
                               "time_compute": compute,
                               **ExchangeResult.count_columns([d] * P),
                               "time_select": math.nan, "time_communicate": math.nan,
                               "contraction": 0.0,
                               "bytes_sent": dense_payload_bytes(P, d, bucket.buffer()
                                                                 .element_size())})
            state.step += 1
        return fut
    pending = torch.futures.Future()
    state._pending.append((bucket, pending))
    if not bucket.is_last():
        return pending  # completed when the last bucket arrives
    try:
        _exchange_pending(state)
    except BaseException as exc:  # fail every waiting bucket rather than hang DDP
        # a future takes an Exception only; a Ctrl-C (KeyboardInterrupt) still propagates
        failure = exc if isinstance(exc, Exception) else RuntimeError(
            f"the exchange was interrupted ({type(exc).__name__})")
        for _, fut in state._pending:
            if not fut.done():
                fut.set_exception(failure)
        raise
    finally:
        state._pending = []
        state.step += 1
    return pending


def _exchange_pending(state: TopKHookState) -> None:
    compute = _compute_seconds(state)
    layout = state.layout
    grads: list[torch.Tensor | None] = [None] * len(layout.names)
    for bucket, _ in state._pending:
        for p, g in zip(bucket.parameters(), bucket.gradients()):
            grads[state._slot[id(p)]] = g
    flat = layout.flatten(grads)
    state.compressor.sparsifier = state.source.at(state.step)
    if state._mean is None or state._mean.device != flat.device:
        state._mean = torch.empty_like(flat)
    result = exchange(state.transport, [state.compressor], [flat],
                      state.density_at(state.step), recorder=state.recorder, step=state.step,
                      out=state._mean)
    state.last = result
    if state.log is not None:
        rho = state.density_at(state.step)
        state.log.add({"step": state.step, "density": rho,
                       "k": state.compressor.target_k(rho), "time_compute": compute,
                       **ExchangeResult.count_columns(result.counts),
                       "time_select": result.time_select,
                       "time_communicate": result.time_communicate,
                       "bytes_sent": result.bytes_sent,
                       "contraction": result.contraction})
    views = layout.views(result.mean)
    for bucket, fut in state._pending:
        parts = [views[state._slot[id(p)]].reshape(-1) for p in bucket.parameters()]
        out = torch.cat(parts).to(bucket.buffer().dtype)
        fut.set_result(out.view_as(bucket.buffer()))
