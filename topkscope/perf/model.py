"""The step-time model of TopK-SGD and the predictions built on it.

    t_step = t_compute + t_select + t_communicate

t_compute: forward + backward per worker (measured, or given); t_select: the selector's time
at this d (selection benchmark, or given); t_communicate: the exchange of
topkscope.perf.patterns on a network of topkscope.perf.networks:

    dense             ring all-reduce of d float32 values after the backward pass (the
                      published setting: no overlap)
    dense-wfbp        dense with wait-free back-propagation: the all-reduce overlaps the
                      backward pass, t_step = t_forward + max(t_backward, t_comm), i.e. an
                      overlap of the backward share of t_compute (MethodInputs.overlap, from
                      the model's FLOPs; topkscope.perf.workload). One fused all-reduce (one
                      alpha), started with the first gradient: a bound no real WFBP beats
    dense-fp16        dense with 2-byte (fp16) values in the all-reduce, compute unchanged
                      (Horovod's fp16 compression of the all-reduce)
    topk, gaussiank,  sparse all-gather of the (value, index) pairs, counts = ratio * k with
    dgc, redsync, ...   ratio the mean over steps of the largest count over workers / k, per
                        training condition (topkscope.perf.inputs)
    gtopk             Top-k selection, gTop-k's tree exchange of k pairs

Every input is an `Input(value, source, device, grade)`, defined here (the model's input type;
an input known only within a range is a `Band(low, high, source, grade)`);
topkscope.perf.inputs finds each one and names its source. The grade says how far the number
can be trusted (GRADES, strongest first): `measured` (by this project: a run or a benchmark
here), `published` (a measurement elsewhere, its source owner/repo@commit path or a paper's
table), `modelled` (computed by a model of ours from such numbers, with its validated error or
band), `assumed` (a stated value nobody measured: a nominal count, a bandwidth for a GPU no
source names). A claim is no stronger than the weakest grade among the inputs its verdict
depends on (`weakest`).

dense-wfbp and dense-fp16 are the baselines reviewers of gradient compression ask for
(Agarwal et al., "On the Utility of Gradient Compression in Distributed Training Systems",
arXiv 2103.00543; arXiv 2407.01378): a compressor has to beat a well-built dense exchange,
not only the plain one.

Options that deviate from the published setting, each off by default and written into every
row: `overlap` (fraction of t_compute the exchange may hide behind; the authors' code does not
overlap the sparse exchange, so 0), `layout` ("two" all-gathers as published, or "packed" as
this repository's distributed transport), `padded` (equal-size collectives pad to the largest
count: True, as NCCL and gloo require), `algorithm` ("ring" or "recursive-doubling").

Derived quantities per (model, network, method, P):
    throughput        P * batch / t_step samples per second (batch per worker)
    efficiency        t_compute / t_step: throughput over P times one worker's dense SGD
                      (which neither selects nor communicates)
    speedup_vs_dense  t_step(dense) / t_step(method); speedup_vs_topk, speedup_vs_dense_wfbp,
                      speedup_vs_dense_fp16 likewise (NaN when that method is not predicted)
    break-even        the largest selection time at which the method's step is still shorter
                      than a baseline's: t_step is linear in t_select (slope 1), so it is
                      (t_step(ref) - t_select(ref)) - (t_step - t_select), solved exactly. Against
                      a dense method (which selects nothing) that is the method's whole
                      selection time; against Top-k it is the largest excess of the method's
                      selection time over Top-k's (negative: it must select faster than Top-k
                      by that much). It needs no selection time of either method, so it stands
                      where no selection time was measured on the compute's device
    crossover         the bandwidth (Gbit/s) below which the method's step is faster than dense
                      SGD's: t is linear in beta, so t_m(beta) = t_dense(beta) is solved
                      exactly, every collective's beta scaled by the same factor and alpha
                      fixed. inf: faster at every bandwidth; 0: at no bandwidth below the
                      network's (its exchange moves more bytes than the all-reduce's).
                      NaN for the dense methods themselves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from topkscope.perf import patterns
from topkscope.perf.networks import Network

DEFAULT_METHODS = ("dense", "dense-wfbp", "dense-fp16", "topk", "gaussiank", "gaussiank-2019")
# dense SGD and its two stronger baselines: they send every gradient and select nothing
DENSE_METHODS = ("dense", "dense-wfbp", "dense-fp16")
# methods of this model that are not sparsifiers of topkscope.sparsify
MODEL_METHODS = ("gtopk", "dense-wfbp", "dense-fp16")
# the step times every method's speed-up is given against: column speedup_vs_<name, _ for ->
SPEEDUP_REFERENCES = ("dense", "topk", "dense-wfbp", "dense-fp16")
FP16_BYTES = 2
PAPER_MODELS = ("fnn3", "resnet20", "vgg16", "resnet50", "lstm-ptb", "alexnet")
PAPER_DENSITY = 0.001
PAPER_WORKERS = tuple(2**i for i in range(1, 11))  # 2, 4, ..., 1024
# the selector whose time the gTop-k exchange pays (it selects exactly, then merges in a tree)
SELECTOR_OF = {"gtopk": "topk"}


# how far an input can be trusted, strongest first (module docstring)
GRADES = ("measured", "published", "modelled", "assumed")


def check_grade(grade: str | None) -> str | None:
    """`grade` when it is one of GRADES (or None: not graded); ValueError naming it otherwise."""
    if grade is not None and grade not in GRADES:
        raise ValueError(f"grade must be one of {', '.join(GRADES)}, got {grade!r}")
    return grade


def weakest(grades) -> str:
    """The weakest of `grades` (GRADES order); ValueError when one is not graded or none is
    given."""
    grades = list(grades)
    if not grades or any(g not in GRADES for g in grades):
        raise ValueError(f"grades must be non-empty and each one of {', '.join(GRADES)}, got "
                         f"{grades!r}")
    return max(grades, key=GRADES.index)


@dataclass(frozen=True)
class Input:
    """A model input, where it came from (measured here, published, preset, user, nominal),
    the device it was measured on ("cpu", "gpu"; None: not a device's time, or not known) and
    its grade (GRADES; None: not graded)."""

    value: float
    source: str
    device: str | None = None
    grade: str | None = field(default=None, kw_only=True)  # keyword: subclasses add fields

    def __post_init__(self) -> None:
        check_grade(self.grade)


def read_csv_with(path, columns: set[str], what: str):
    """A CSV that must exist and hold `columns` (a DataFrame); a one-line ValueError naming
    the file and what it lacks otherwise."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{what} CSV {str(path)!r} does not exist")
    table = pd.read_csv(path)
    missing = set(columns) - set(table.columns)
    if missing:
        raise ValueError(f"{str(path)!r} is not a {what} CSV: it lacks {sorted(missing)}")
    return table


def loglog(sizes, times, size: float) -> tuple[float, str]:
    """(time at `size`, how) from measured (size, time) points: linear in log size - log time
    between the two nearest sizes, extrapolated from the nearest two outside them (said so);
    one point: scaled linearly in size."""
    import numpy as np

    xs, ts = np.asarray(sizes, dtype=float), np.asarray(times, dtype=float)
    order = np.argsort(xs)
    xs, ts = xs[order], ts[order]
    if len(xs) == 1:
        return float(ts[0]) * size / xs[0], "scaled linearly from one size"
    x, y, lx = np.log(xs), np.log(ts), math.log(size)
    i = int(np.clip(np.searchsorted(x, lx) - 1, 0, len(x) - 2))
    slope = (y[i + 1] - y[i]) / (x[i + 1] - x[i])
    how = "interpolated in d" if xs[0] <= size <= xs[-1] else (
        f"extrapolated in d beyond {xs[0]:.3g}-{xs[-1]:.3g}")
    return float(math.exp(y[i] + slope * (lx - x[i]))), how


@dataclass(frozen=True)
class Band:
    """An input known only within [low, high], where both ends come from and its grade
    (GRADES: the weakest of what its ends rest on; None: not graded). The P = 16 predictions
    on published GPU inputs evaluate the model at every corner of such bands."""

    low: float
    high: float
    source: str
    grade: str | None = None

    def __post_init__(self) -> None:
        if not self.low <= self.high:
            raise ValueError(f"a band needs low <= high, got {self.low!r} ... {self.high!r}")
        check_grade(self.grade)

    @property
    def mid(self) -> float:
        return 0.5 * (self.low + self.high)


@dataclass(frozen=True)
class Options:
    """How the exchange is modelled; the defaults are the published setting."""

    layout: str = "two"
    padded: bool = True
    algorithm: str = "ring"
    overlap: float = 0.0

    def __post_init__(self) -> None:
        if self.layout not in patterns.LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(patterns.LAYOUTS)}, "
                             f"got {self.layout!r}")
        if self.algorithm not in patterns.ALGORITHMS:
            raise ValueError(f"algorithm must be one of {', '.join(patterns.ALGORITHMS)}, "
                             f"got {self.algorithm!r}")
        if not 0.0 <= self.overlap <= 1.0:
            raise ValueError(f"overlap must be in [0, 1], got {self.overlap!r}")

    def label(self) -> str:
        parts = [f"layout={self.layout}", f"padded={self.padded}", f"algorithm={self.algorithm}"]
        if self.overlap:
            parts.append(f"overlap={self.overlap:g} (deviation: the published code does not "
                         "overlap)")
        return ", ".join(parts)


@dataclass(frozen=True)
class MethodInputs:
    """What one method's step needs besides the network: its selection time, count ratio, and
    (dense-wfbp) the fraction of t_compute its exchange overlaps (the backward pass's share).

    method: the method, where the key predict() gets it under is a label (one method under
    several training conditions); condition: the training condition whose runs gave the
    counts ("" where they do not depend on one)."""

    select: Input
    count_ratio: Input
    overlap: Input | None = None
    method: str | None = None
    condition: str = ""


def communicate_time(method: str, P: int, d: int, density: float, count_ratio: float,
                     net: Network, opts: Options = Options()) -> tuple[float, int]:
    """(seconds, elements sent by the largest worker) of one exchange."""
    from topkscope.bounds import k_from_density

    if P == 1:
        return 0.0, (d if method in DENSE_METHODS else k_from_density(density, d))
    if method in DENSE_METHODS:
        alpha, beta = net.constants("allreduce")
        value_bytes = FP16_BYTES if method == "dense-fp16" else patterns.VALUE_BYTES
        return patterns.ring_allreduce(P, patterns.dense_bytes(d, value_bytes), alpha, beta), d
    alpha, beta = net.constants("allgather")
    k = k_from_density(density, d)
    if method == "gtopk":
        return patterns.gtopk_tree(P, k, alpha, beta), k
    m = min(d, max(0, math.ceil(count_ratio * k - 1e-9)))
    # every worker at the largest count: exact when padded, an upper bound for allgatherv
    t = patterns.sparse_allgather([m] * P, alpha, beta, layout=opts.layout, padded=opts.padded,
                                  algorithm=opts.algorithm)
    return t, m


def step(method: str, P: int, d: int, density: float, net: Network, compute: Input,
         inputs: MethodInputs, opts: Options = Options()) -> dict:
    """One row: the step-time parts (seconds), the count, and where each input came from.

    The exchange hides behind max(opts.overlap, inputs.overlap) of t_compute: t_comm is the
    exposed part, max(0, t_comm_total - overlap * t_compute)."""
    comm, count = communicate_time(method, P, d, density, inputs.count_ratio.value, net, opts)
    overlap = max(opts.overlap, inputs.overlap.value if inputs.overlap else 0.0)
    exposed = max(0.0, comm - overlap * compute.value)
    t_step = compute.value + inputs.select.value + exposed
    alpha_src, beta_src = net.alpha_source, net.beta_source
    return {
        "method": method, "workers": int(P), "d": int(d), "density": density,
        "count_sent": int(count), "count_ratio": inputs.count_ratio.value,
        "t_compute": compute.value, "t_select": inputs.select.value, "t_comm": exposed,
        "t_comm_total": comm, "t_step": t_step,
        "overlap": overlap, "overlap_source": _overlap_source(opts, inputs),
        "network": net.name, "alpha": net.alpha, "beta": net.beta,
        "bandwidth_factor": net.bandwidth_factor,
        "compute_source": compute.source, "select_source": inputs.select.source,
        "count_source": inputs.count_ratio.source,
        "comm_source": alpha_src if alpha_src == beta_src else f"alpha {alpha_src}; beta {beta_src}",
        "options": opts.label(),
    }


def _overlap_source(opts: Options, inputs: MethodInputs) -> str:
    if inputs.overlap is not None and inputs.overlap.value >= opts.overlap:
        return inputs.overlap.source
    return "option overlap (deviation)" if opts.overlap else "none (published setting)"


def _scaled(net: Network, factor: float) -> Network:
    """net with every beta multiplied by factor (alpha unchanged)."""
    return replace(net, beta=net.beta * factor,
                   allreduce_beta=None if net.allreduce_beta is None
                   else net.allreduce_beta * factor)


def crossover_gbit(method: str, P: int, d: int, density: float, net: Network, compute: Input,
                   inputs: MethodInputs, dense: MethodInputs, opts: Options = Options()) -> float:
    """Bandwidth (Gbit/s, of the all-gather's beta) below which `method` beats dense SGD
    (NaN for the dense methods and for one worker)."""
    if method in DENSE_METHODS or P == 1:
        return float("nan")

    def line(m: str, mi: MethodInputs) -> tuple[float, float]:  # t = a + b * factor
        a = step(m, P, d, density, _scaled(net, 0.0), compute, mi, opts)["t_step"]
        b = step(m, P, d, density, net, compute, mi, opts)["t_step"] - a
        return a, b

    if opts.overlap or inputs.overlap or dense.overlap:  # not linear in beta: bisect
        return _crossover_bisect(method, P, d, density, net, compute, inputs, dense, opts)
    (am, bm), (ad, bd) = line(method, inputs), line("dense", dense)
    # faster where am + bm f < ad + bd f, f = beta / beta(net) (larger f: slower network)
    if bd <= bm:  # the method's step grows at least as fast as dense's as bandwidth drops
        return float("inf") if bd == bm and am < ad else 0.0
    factor = (am - ad) / (bd - bm)
    if factor <= 0:
        return float("inf")
    return net.bandwidth_gbit / factor


def _crossover_bisect(method, P, d, density, net, compute, inputs, dense, opts) -> float:
    def gap(log_factor: float) -> float:
        n = _scaled(net, math.exp(log_factor))
        return (step(method, P, d, density, n, compute, inputs, opts)["t_step"]
                - step("dense", P, d, density, n, compute, dense, opts)["t_step"])

    lo, hi = -40.0, 40.0
    if gap(lo) <= 0:
        return float("inf")
    if gap(hi) > 0:
        return 0.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if gap(mid) > 0 else (lo, mid)
    return net.bandwidth_gbit / math.exp(hi)


def predict(model: str, d: int, batch: int | None, density: float, net: Network,
            workers: Sequence[int], compute: Input, methods: dict[str, MethodInputs],
            opts: Options = Options()) -> list[dict]:
    """Rows for every (method, P): parts, throughput, efficiency, speed-ups, break-even
    selection times, crossover. `methods` maps a label to its inputs: the method's name, or any
    label when MethodInputs.method names the method (the baselines of SPEEDUP_REFERENCES are
    found under their own names)."""
    for P in workers:
        if int(P) != P or P < 1:
            raise ValueError(f"workers must be positive integers, got {P!r}")
    rows = []
    for P in workers:
        at_p = {key: step(mi.method or key, P, d, density, net, compute, mi, opts)
                for key, mi in methods.items()}
        for key, row in at_p.items():
            mi = methods[key]
            row = {"model": model, **row, "condition": mi.condition,
                   **count_spread(mi.count_ratio), "batch_per_worker": batch}
            row["iterations_per_s"] = 1.0 / row["t_step"] if row["t_step"] > 0 else float("inf")
            row["throughput"] = (P * batch / row["t_step"]) if batch and row["t_step"] > 0 \
                else float("nan")
            row["efficiency"] = compute.value / row["t_step"] if row["t_step"] > 0 else 1.0
            for ref in SPEEDUP_REFERENCES:
                row[speedup_column(ref)] = (at_p[ref]["t_step"] / row["t_step"]) \
                    if ref in at_p else float("nan")
            for ref in SPEEDUP_REFERENCES:
                row[breakeven_column(ref)] = breakeven_select(row, at_p[ref]) \
                    if ref in at_p else float("nan")
            row["crossover_gbit"] = crossover_gbit(row["method"], P, d, density, net, compute,
                                                   mi, methods["dense"], opts) \
                if "dense" in methods else float("nan")
            rows.append(row)
    return rows


def count_spread(count_ratio: Input) -> dict:
    """The seeds behind a measured count ratio (topkscope.perf.inputs.Counts): how many, and
    the lowest and highest seed's ratio (NaN where the ratio is not measured per seed)."""
    per_seed = getattr(count_ratio, "per_seed", ())
    return {"count_seeds": len(per_seed) if per_seed else float("nan"),
            "count_ratio_low": count_ratio.low if per_seed else float("nan"),
            "count_ratio_high": count_ratio.high if per_seed else float("nan")}


def breakeven_select(row: dict, reference: dict) -> float:
    """The largest selection seconds of row's method at which its step is still shorter than
    the reference row's, over the reference's own selection seconds (0 for a dense reference):
    (t_step(ref) - t_select(ref)) - (t_step - t_select), exact as t_step is t_select plus
    parts that do not depend on it. NaN for the dense methods (they select nothing)."""
    if row["method"] in DENSE_METHODS:
        return float("nan")
    # t_step - t_select = t_compute + t_comm (exposed): summed so equal parts cancel exactly
    return ((reference["t_compute"] + reference["t_comm"])
            - (row["t_compute"] + row["t_comm"]))


def breakeven_column(reference: str) -> str:
    """The table column of the break-even selection time against `reference`:
    breakeven_select_over_topk (an excess over Top-k's selection), breakeven_select_vs_dense,
    breakeven_select_vs_dense_wfbp, breakeven_select_vs_dense_fp16 (a whole selection time)."""
    if reference in DENSE_METHODS:
        return "breakeven_select_vs_" + reference.replace("-", "_")
    return "breakeven_select_over_" + reference.replace("-", "_")


def speedup_column(reference: str) -> str:
    """The table column of the speed-up over `reference`: speedup_vs_dense_wfbp etc."""
    return "speedup_vs_" + reference.replace("-", "_")


def options_dict(opts: Options) -> dict:
    return asdict(opts)
