"""The step-time model extended to outer-loop training: one exchange every H inner steps.

Per inner step (so that per-step training and outer-loop training are compared on the same
work: one forward and backward pass per worker per step),

    DDP (dense per step)   t = t_compute + T_allreduce(d b_v)
    outer loop, H          t = t_compute + (t_select + T_exchange) / H

where t_compute is one forward + backward + inner optimizer step of one worker (measured or
given), t_select the compressor's selection time at the exchange (0 for dense DiLoCo) and
T_exchange the exchange of topkscope.perf.patterns on a network of topkscope.perf.networks:

    dense DiLoCo          ring all-reduce of the pseudo-gradient, d float32 values
    sparse (SparseLoCo)   ring all-gather of every worker's encoded message (comm.sparse):
                          ceil(k b_v / 8) + ceil(k b_i / 8) + side + 8 bytes each, b_v bits per
                          value (2 for SparseLoCo's quantization), b_i bits per index (12 for
                          chunk-local indices in chunks of 4096), side the quantizer's tables

The outer optimizer's step (an O(d) update once per round) is not counted. Every term is linear
in the network's beta, so the bandwidth below which a method's step is shorter than DDP's
(`crossover_gbit`) is solved exactly, alpha fixed, as topkscope.perf.model does for TopK-SGD:
inf when the method is faster at every bandwidth, 0 at none.

`run_inputs(run_dir)` reads these inputs from an outer-loop run folder (train.parquet,
outer.parquet, manifest.json), each with its source.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from topkscope.perf import patterns
from topkscope.perf.model import Input
from topkscope.perf.networks import Network


@dataclass(frozen=True)
class OuterMethod:
    """One way to exchange: `dense` (every worker all-reduces d float32 values) or a sparse
    message of `count` values of value_bits and index_bits each plus side_bytes, every
    inner_steps steps (1: per step). name labels the row."""

    name: str
    inner_steps: int
    dense: bool
    count: int = 0
    value_bits: int = 32
    index_bits: int = 32
    side_bytes: int = 0

    def __post_init__(self) -> None:
        if int(self.inner_steps) != self.inner_steps or self.inner_steps < 1:
            raise ValueError(f"inner_steps = {self.inner_steps!r} must be an integer >= 1")
        if self.count < 0:
            raise ValueError(f"count = {self.count!r} must be >= 0")

    def message_bytes(self) -> int:
        """Bytes one worker sends at an exchange (sparse: comm.sparse's encoded message)."""
        if self.dense:
            raise ValueError(f"{self.name}: a dense exchange is an all-reduce, not a message")
        return (math.ceil(self.count * self.value_bits / 8)
                + math.ceil(self.count * self.index_bits / 8) + self.side_bytes
                + patterns.COUNT_BYTES)


def exchange_time(method: OuterMethod, P: int, d: int, net: Network) -> float:
    """Seconds of one exchange of `method` among P workers."""
    if P == 1:
        return 0.0
    if method.dense:
        alpha, beta = net.constants("allreduce")
        return patterns.ring_allreduce(P, patterns.dense_bytes(d), alpha, beta)
    alpha, beta = net.constants("allgather")
    return patterns.allgather(P, method.message_bytes(), alpha, beta)


def step_time(method: OuterMethod, P: int, d: int, net: Network, compute: Input,
              select: Input) -> dict:
    """One row: the per-inner-step time of `method` and its parts (seconds), with sources."""
    comm = exchange_time(method, P, d, net)
    H = method.inner_steps
    return {"method": method.name, "inner_steps": H, "workers": int(P), "d": int(d),
            "bytes_per_exchange": P * patterns.dense_bytes(d) if method.dense
            else P * method.message_bytes(),
            "t_compute": compute.value, "t_select": select.value / H, "t_comm": comm / H,
            "t_exchange": comm, "t_step": compute.value + (select.value + comm) / H,
            "network": net.name, "bandwidth_gbit": net.bandwidth_gbit,
            "compute_source": compute.source, "select_source": select.source}


def _scaled(net: Network, factor: float) -> Network:
    return replace(net, beta=net.beta * factor,
                   allreduce_beta=None if net.allreduce_beta is None
                   else net.allreduce_beta * factor)


def crossover_gbit(method: OuterMethod, ddp: OuterMethod, P: int, d: int, net: Network,
                   compute: Input, select: Input, ddp_select: Input) -> float:
    """Bandwidth (Gbit/s) below which `method`'s step is shorter than `ddp`'s (NaN for one
    worker); t = a + b f in the factor f on every beta, solved exactly."""
    if P == 1:
        return math.nan

    def line(m: OuterMethod, sel: Input) -> tuple[float, float]:
        a = step_time(m, P, d, _scaled(net, 0.0), compute, sel)["t_step"]
        return a, step_time(m, P, d, net, compute, sel)["t_step"] - a

    (am, bm), (ad, bd) = line(method, select), line(ddp, ddp_select)
    if bd <= bm:
        return math.inf if bd == bm and am < ad else 0.0
    factor = (am - ad) / (bd - bm)
    return math.inf if factor <= 0 else net.bandwidth_gbit / factor


def network_at(net: Network, gbit: float) -> Network:
    """net with its bandwidth set to `gbit` Gbit/s (alpha kept), named by the rate."""
    if not gbit > 0:
        raise ValueError(f"bandwidth must be > 0 Gbit/s, got {gbit!r}")
    factor = net.bandwidth_gbit / gbit
    return replace(_scaled(net, factor), name=f"{net.name}@{gbit:g}Gbit/s",
                   beta_source=f"{net.beta_source}, bandwidth set to {gbit:g} Gbit/s")


@dataclass(frozen=True)
class RunInputs:
    """What one outer-loop run gives the model: its method, P, d, and measured times."""

    method: OuterMethod
    workers: int
    d: int
    compute: Input
    select: Input


def run_inputs(run_dir: str | Path) -> RunInputs:
    """The inputs of an outer-loop (or per-step) run folder: H, the exchange's encoding and
    count (outer.parquet's bytes and counts, or train.parquet's for a per-step run), the mean
    time_compute of its steps and time_select of its exchanges (CPU seconds measured in the
    run, source named)."""
    import pandas as pd

    from topkscope.manifest import Manifest
    from topkscope.schema import OUTER_FILE

    run_dir = Path(run_dir)
    manifest = Manifest.load(run_dir)
    train = pd.read_parquet(run_dir / "train.parquet")
    outer = manifest.get("outer")
    exchanges = pd.read_parquet(run_dir / OUTER_FILE) if outer else train
    P, d = int(manifest["world_size"]), int(manifest["num_parameters"])
    source = f"measured here (run {run_dir.name}, {manifest.get('device', 'cpu')})"
    compute = Input(float(train["time_compute"].mean()), source, "cpu")
    select = Input(float(exchanges["time_select"].mean()), source, "cpu")
    H = int(outer["inner_steps"]) if outer else 1
    name = manifest.get("sparsifier", "?")
    if name == "dense":
        method = OuterMethod(name, H, dense=True)
    else:
        from topkscope.comm.sparse import COUNT_BYTES

        count = int(exchanges["selected_max"].max())
        per_worker = exchanges["bytes_sent"].max() / P - COUNT_BYTES
        values = exchanges["bytes_values"].max() / P if "bytes_values" in exchanges else None
        if values is None:  # a per-step run: float32 values and int32 indices
            method = OuterMethod(name, H, False, count)
        else:
            quantize = manifest.get("quantize") or {}
            bits = int(quantize.get("bits", 32))
            index_bytes = exchanges["bytes_indices"].max() / P
            side = int(exchanges["bytes_quantization"].max() / P)
            index_bits = round(8 * index_bytes / count) if count else 32
            method = OuterMethod(name, H, False, count, bits, index_bits, side)
            if method.message_bytes() - COUNT_BYTES != int(per_worker):
                raise ValueError(f"{run_dir}: its bytes per worker ({int(per_worker)}) are not "
                                 f"those of {count} values of {bits} and indices of "
                                 f"{index_bits} bits")
    return RunInputs(method, P, d, compute, select)
