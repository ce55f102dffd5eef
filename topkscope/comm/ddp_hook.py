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
* like PyTorch's PowerSGD hook, the first `dense_steps` iterations run a plain all-reduce;
* a parameter no rank used in a step (DDP with find_unused_parameters=True, or static_graph)
  is left untouched by DDP, whatever the hook hands it: its part of u is then not selected
  from and stays in the residual (one small all-reduce of per-tensor "got a gradient" flags
  per step, only under such a DDP), so what is sent is what is applied, and the sent values
  plus the residual add up to u for every parameter.

With a recorder (or run_dir) the state also describes the run as `topkscope run` does: rank 0
adds the run's fields to manifest.json and writes train.parquet from the hook's own
bookkeeping (comm.run_log), so analyze, the claims, the figures and the notebooks read a
user's run like ours; `state.note(loss=..., lr=..., metric=...)` adds what only the loop knows.

A script that resumes (loads `state.load_state_dict` from its checkpoint and appends to its
run folder) continues the run: at the hook's first step the ranks agree on one superseded/
folder and each sets aside its own files of that step and later (`TopKHookState.begin`), so
every step is there once and no rank moves a file another rank is writing. A state
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
import os
import signal
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from topkscope import validate
from topkscope.comm.compressor import WorkerCompressor
from topkscope.comm.distributed import DistributedTransport
from topkscope.comm.elastic import restarts_left
from topkscope.comm.exchange import ExchangeResult, exchange
from topkscope.comm.layout import Layout
from topkscope.comm.peers import Peers
from topkscope.comm.run_log import HookRunLog, manifest_fields
from topkscope.comm.sparse import dense_payload_bytes
from topkscope.hooks.lifecycle import (
    CLOSED_AT_EXIT,
    SUPERSEDED,
    aside_name,
    end_quietly,
    script_checkpoint_step,
    script_resume_fields,
    supersede_from,
)
from topkscope.hooks.settings import check_quantize
from topkscope.interrupts import RunInterrupted, WorkerFailed, interruption_signal
from topkscope.manifest import Manifest, describe_optimizer, interruption_message
from topkscope.sparsify import check_density
from topkscope.sparsify.quantize import quantizer_from
from topkscope.sparsify.source import SparsifierSource

# how long a rank whose own step failed looks for a peer that died first (comm.peers)
PEER_WAIT_S = 3.0


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
        self._params = [p for _, p in trainable]
        self._used: list[bool] | None = None  # per tensor, this step: set once DDP may skip some
        folder = run_dir if run_dir is not None else getattr(recorder, "out_dir", None)
        self.folder = None if folder is None else Path(folder)
        self.peers = Peers(self.folder, self.transport.rank, self.transport.world_size) \
            if self.transport.world_size > 1 else None
        self._stop: BaseException | None = None  # how a SIGTERM ended this process
        self._closing = False  # closing: a SIGTERM now changes nothing
        self._caused: tuple[BaseException, BaseException] | None = None  # cause() of an error
        self._sigterm = _take_sigterm(self) if self.peers is not None else None
        if self.transport.rank == 0:
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
        self.closed = self._closing = True
        if error is None and self.step == 0 and (self.log or self.recorder) is not None:
            error = NeverRan("the communication hook never ran: no step went through "
                             "topk_hook (was it registered with ddp.register_comm_hook on "
                             "the DDP model that trains?)")
            warnings.warn(f"TopKHookState: {error}; the run is marked failed", stacklevel=2)
        error = self.cause(error)
        try:
            if self.log is not None:
                self.log.close(error)
            if self.recorder is not None:
                if error is None:
                    self.recorder.close(closed_by=closed_by)
                else:
                    self.recorder.fail(error, closed_by=closed_by)
            if isinstance(error, WorkerFailed) and self.log is None and error.code != 1:
                _fail_for_rank_0(self.folder, error)  # rank 0 died: its manifest says so here
        finally:
            sig = interruption_signal(error)
            if self.peers is not None:
                self.peers.ended(str(error) if error is not None else "",
                                 "complete" if error is None else
                                 "interrupted" if sig is not None else "failed")
            _give_back_sigterm(self)
            if sig is not None:  # one line from the rank that owns the manifest, no traceback
                log = self.log if self.log is not None and self.log.owns_manifest else None
                end_quietly(error, None if log is None else "topkscope: run " +
                            interruption_message(log.run_dir, log.manifest.data))

    def cause(self, error: BaseException | None) -> BaseException | None:
        """What ended this rank: the stop a SIGTERM decided, else `error`, except that a
        failure of its own (a collective that lost its peer) caused by a peer that died or
        failed first is that peer's failure (WorkerFailed)."""
        if self._stop is not None:
            return self._stop
        if error is None or self.peers is None or interruption_signal(error) is not None \
                or isinstance(error, (WorkerFailed, NeverRan)):
            return error
        if self._caused is None or self._caused[0] is not error:
            self._closing = True  # a SIGTERM from here on finds the state closing
            self._caused = (error, _peer_failure(self, wait=PEER_WAIT_S) or error)
        return self._caused[1]

    def __enter__(self) -> "TopKHookState":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._closing = True
        cause = self.cause(exc)
        self.close(cause)
        if exc is not None and cause is not exc:
            raise cause from exc  # e.g. a collective's error when a peer died: say which

    def begin(self) -> None:
        """The hook's first call in this process (every rank at the same step, `self.step`):
        the ranks agree on one superseded/ folder (one small all-gather), then each sets aside
        its own files of the steps it redoes (a resumed script: steps >= the checkpoint's) —
        its recorder parts and snapshots, on rank 0 also train.parquet's rows — so no rank
        moves a file another rank is writing, and the run ends with every step once."""
        rank = self.transport.rank
        folders = {Path(f) for f in (getattr(self.recorder, "out_dir", None),
                                     self.log.run_dir if self.log is not None else None)
                   if f is not None}
        proposal = aside_name(next(iter(sorted(folders)))) if rank == 0 and folders else None
        agreed = proposal
        if self.peers is not None:  # one all-gather: the folder's name and who the peers are
            members = self.transport.gather_objects({"aside": proposal, **Peers.me()})
            agreed = members[0]["aside"]
            self.peers.meet(members)
        own = None if self.transport.world_size == 1 else rank
        for folder in sorted(folders):
            supersede_from(folder, self.step, rank=own, dest=agreed)
        if self.log is not None:
            self.log.begin(self.step, None if agreed is None
                           else self.log.run_dir / SUPERSEDED / agreed)

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


def _take_sigterm(state: TopKHookState):
    """Install the state's SIGTERM handler (_on_sigterm) where the script left the default
    (a process killed without cleanup) and this is the main thread; the previous handler,
    or None when none was installed."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return None
    return signal.signal(signal.SIGTERM, functools.partial(_on_sigterm, weakref.ref(state)))


def _give_back_sigterm(state: TopKHookState) -> None:
    if state._sigterm is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, state._sigterm)
        state._sigterm = None


def _on_sigterm(ref: "weakref.ref[TopKHookState]", signum: int, frame) -> None:
    """SIGTERM: torchrun stopping the group because a peer died, or a stop of the whole job.
    A peer that died or failed makes it a failure naming that rank (WorkerFailed: one line on
    the terminal from the rank that reports it, exit 1); else an interruption
    (interrupts.RunInterrupted). Once the state is closing, later signals are ignored."""
    state = ref()
    if state is None:  # gone without closing: the default action, as if never installed
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    if state._closing or state._stop is not None:
        return
    state._stop = _peer_failure(state) or RunInterrupted(signum)
    raise state._stop


def _peer_failure(state: TopKHookState, wait: float = 0.0) -> WorkerFailed | None:
    """A WorkerFailed naming the first peer that died or failed (comm.peers), None if none.
    wait: how long to keep looking (a collective fails as soon as the peer's sockets close,
    a moment before the dying process can be seen to have ended)."""
    if state.peers is None:
        return None
    deadline = time.monotonic() + wait
    found = state.peers.failure()
    while found is None and time.monotonic() < deadline:
        time.sleep(0.05)
        found = state.peers.failure()
    if found is None:
        return None
    rank, how, entry, said = found
    message = f"worker rank {rank} {how}"
    line = None
    if state.peers.reporter(rank) and not said:  # a rank that failed itself said so already
        where = f" {str(state.folder)!r}" if state.folder is not None else ""
        line = f"topkscope: {message}; run{where} failed at step {state.step}; {_next(state)}"
    return WorkerFailed(message, {"worker_failures": [entry]}, line)


def _next(state: TopKHookState) -> str:
    """What continues a run whose worker died: torchrun itself while --max-restarts allows
    another start of the group, else the user running the same command again; from the last
    checkpoint, or from step 0 when there is none yet."""
    try:
        step = None if state.folder is None else script_checkpoint_step(state.folder)
    except ValueError:
        step = None
    start = "from step 0 (it has no checkpoint yet)" if step is None else \
        f"from its checkpoint at step {step}"
    left = restarts_left()
    if left:
        return (f"torchrun starts the workers again ({left} of --max-restarts left) and "
                f"they continue it {start}")
    return f"run the same command again to resume it {start}"


def _fail_for_rank_0(folder: Path | None, error: WorkerFailed) -> None:
    """Rank 0 died: the reporting rank ends the run's manifest failed (if still running)."""
    if folder is None or not (folder / "manifest.json").is_file():
        return
    manifest = Manifest.reopen(folder)
    if manifest.data.get("status") == "running":
        manifest.fail(error, **script_resume_fields(folder))


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
        if (error is None and state._stop is None and state.transport.group is None
                and dist.is_available() and dist.is_initialized()):
            dist.destroy_process_group()


def _forward_started(ref: "weakref.ref[TopKHookState]", module: nn.Module, args) -> None:
    """Forward pre-hook: the first training forward since the last step starts its compute
    time (a gradient accumulation's forwards all count; evaluation forwards do not). Inside a
    DistributedDataParallel forward that may leave parameters unused (find_unused_parameters,
    static_graph), it starts watching which tensors get a gradient (_watch_unused)."""
    state = ref()
    if state is None or not (module.training and torch.is_grad_enabled()):
        return
    if state._forward_start is None:
        state._forward_start = time.perf_counter()
    if state._used is None:
        ddp = getattr(DistributedDataParallel, "_active_ddp_module", None)
        if ddp is not None and ddp.module is module and (
                getattr(ddp, "find_unused_parameters", False)
                or getattr(ddp, "static_graph", False)):
            _watch_unused(state)


def _watch_unused(state: TopKHookState) -> None:
    """Note, per trainable tensor, whether this step's backward gave it a gradient (a
    post-accumulate-grad hook; gradient accumulation's backwards all count). DDP leaves a
    tensor that no rank used untouched, so the exchange must not send its part of u (it would
    be lost, and missing from the residual too): see _held."""
    state._used = [False] * len(state._params)
    ref = weakref.ref(state)
    for i, p in enumerate(state._params):
        p.register_post_accumulate_grad_hook(functools.partial(_got_gradient, ref, i))


def _got_gradient(ref: "weakref.ref[TopKHookState]", i: int, param: torch.Tensor) -> None:
    state = ref()
    if state is not None and state._used is not None:
        state._used[i] = True


def _held(state: TopKHookState) -> tuple[int, ...]:
    """The tensors no rank used this step (one small all-reduce of the used flags; only when
    DDP may skip tensors), whose u stays in the residual; the flags start again."""
    if state._used is None:
        return ()
    used = state.transport.sum_scalars([[float(u) for u in state._used]])
    state._used = [False] * len(state._params)
    return tuple(i for i, n in enumerate(used) if n == 0)


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
        state.begin()
    if state.step < state.dense_steps:
        fut = _dense_allreduce(state, bucket)
        if bucket.is_last():
            compute = _compute_seconds(state)
            if state._used is not None:  # nothing is held back from an all-reduce
                state._used = [False] * len(state._params)
            if state.log is not None:
                d, P = state.layout.d, state.transport.world_size
                dense = dense_payload_bytes(P, d, bucket.buffer().element_size())
                state.log.add({"step": state.step, "density": 1.0, "k": d,
                               "time_compute": compute,
                               **ExchangeResult.count_columns([d] * P),
                               "time_select": math.nan, "time_communicate": math.nan,
                               "contraction": 0.0,
                               "bytes_sent": dense, "payload_bytes": dense})
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
        raise  # state.step stays the step that failed: what the run's end names
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
    held = _held(state)
    result = exchange(state.transport, [state.compressor], [flat],
                      state.density_at(state.step), recorder=state.recorder, step=state.step,
                      out=state._mean, held=held)
    state.last = result
    if state.log is not None:
        rho = state.density_at(state.step)
        state.log.add({"step": state.step, "density": rho,
                       "k": state.compressor.target_k(rho, held), "time_compute": compute,
                       **ExchangeResult.count_columns(result.counts),
                       "time_select": result.time_select,
                       "time_communicate": result.time_communicate,
                       "bytes_sent": result.bytes_sent,
                       "payload_bytes": result.payload_bytes,
                       "contraction": result.contraction})
    views = layout.views(result.mean)
    for bucket, fut in state._pending:
        parts = [views[state._slot[id(p)]].reshape(-1) for p in bucket.parameters()]
        out = torch.cat(parts).to(bucket.buffer().dtype)
        fut.set_result(out.view_as(bucket.buffer()))
