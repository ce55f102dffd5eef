"""How fast is each sparsifier? Every method against torch.topk, side by side in one run.

    .venv/bin/python benchmarks/selection.py [--quick] [--threads N] [--device cpu|cuda]
                                             [--sizes 1e5,1e6] [--densities 0.001] [--repeats R]
                                             [--max-call-s S]
    # on a GPU, for the step-time model's predictions (docs/scaling.md):
    .venv/bin/python benchmarks/selection.py --device cuda --out results/reference/bench-gpu/selection.csv

For each distribution (N(0,1), Laplace, Student-t(3), the 90/10 two-scale mixture), size d
and density rho (k = round(rho d)), every registered method and the baseline
`torch.topk(u.abs(), k, sorted=False)` are timed in interleaved rounds (one call of each
per round, after warm-up calls that also fill each sparsifier's scratch buffers), so a busy
shared CPU slows them alike. Reported: the median time, the ratio to torch.topk from the
same rounds, and the selected count / k. `threshold` gets lambda = the k-th largest |u|
(an oracle value, so it is timed at the density it would be tuned for). A stateful method
(`sidco`, whose stage count adapts every 5 calls) first gets 20 untimed calls on the same
vector, so what is timed and counted is its adapted rule.

Defaults: d in {1e5, 1e6, 1e7, 2.5e7} (CPU; on CUDA also 1e8 and 5e8), rho in {0.001,
0.01}, 5 rounds, 1 thread: torch.topk on one 1-D tensor runs on one thread whatever the
setting, so one thread compares like with like and is steady on a shared machine (--threads 2
gives the sparsifiers the second core). --quick: d in {1e5, 1e6}, 3 rounds. On a GPU the
vectors are drawn on the GPU (its own seeded generator: same distributions, other values than
the CPU's), so d = 5e8 (2 GB per vector) needs no host copy.

A method whose first (warm-up) call takes longer than --max-call-s (default 60 s), or that runs
out of device memory, is not timed at that size and at larger ones: its row says why (column
`note`, times empty), so nothing is silently missing and a 5e8 run on a GPU finishes.

Writes results/bench/selection.csv (one row per distribution, d, density, method:
median_ms, min_ms, ratio_to_topk = ms / torch.topk ms, speedup_vs_topk = its inverse,
selected_over_k, note, plus device (`cpu`, `cuda:0`), device_name (the GPU's), threads, torch
version) and results/bench/selection.png (N(0,1), lowest density; selection_rho<x>.png for the
others).
"""

from __future__ import annotations

import argparse
import io
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import torch
from _options import benchmark_parser
from matplotlib.backends.backend_agg import FigureCanvasAgg

from topkscope.io import write_bytes_atomic
from topkscope.sparsify import available, get_sparsifier

BASELINE = "torch.topk"
CPU_SIZES = (100_000, 1_000_000, 10_000_000, 25_000_000)
GPU_SIZES = (*CPU_SIZES, 100_000_000, 500_000_000)
QUICK_SIZES = (100_000, 1_000_000)
SETTLE_CALLS = 20  # untimed calls of a stateful method (sidco) first: 4 adaptations


def make_vector(dist: str, d: int, seed: int, device: torch.device) -> torch.Tensor:
    """A float32 test vector of one of the four distributions, drawn on `device` by a
    generator seeded with `seed` (CPU vectors as always; a GPU draws other values)."""
    gen = torch.Generator(device=device).manual_seed(seed)

    def randn() -> torch.Tensor:
        return torch.randn(d, generator=gen, device=device)

    def rand() -> torch.Tensor:
        return torch.rand(d, generator=gen, device=device)

    if dist == "normal":
        u = randn()
    elif dist == "laplace":
        v = rand() - 0.5  # inverse CDF; |v| = 0.5 would give -inf
        u = -torch.sign(v) * torch.log1p(-(2.0 * v.abs()).clamp_(max=1.0 - 2.0**-24))
    elif dist == "student_t3":
        chi2 = randn().pow_(2)
        for _ in range(2):  # in place: one extra vector, not three
            chi2.add_(randn().pow_(2))
        u = randn().div_(chi2.div_(3.0).sqrt_())
    elif dist == "mixture":  # 90% N(0, 0.1^2), 10% N(0, 1)
        u = randn()
        narrow = rand() >= 0.1
        u[narrow] *= 0.1
    else:
        raise ValueError(f"unknown distribution {dist!r}")
    return u


DISTRIBUTIONS = ("normal", "laplace", "student_t3", "mixture")


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in str(exc)


def time_interleaved(
    calls: dict[str, Callable[[], torch.Tensor]], rounds: int, warmup: int, device: torch.device,
    max_call_s: float | None = None,
) -> tuple[dict[str, list[float]], dict[str, list[int]], dict[str, str]]:
    """Seconds per call and selected counts, one call of each method per round; and the
    methods dropped, with why: the first warm-up call took over max_call_s, or a call ran out
    of device memory (its calls stop there, the others go on)."""
    seconds: dict[str, list[float]] = {name: [] for name in calls}
    counts: dict[str, list[int]] = {name: [] for name in calls}
    dropped: dict[str, str] = {}
    live = dict(calls)

    def call(name: str) -> tuple[float, int] | None:
        _synchronize(device)
        start = time.perf_counter()
        try:
            out = live[name]()
            _synchronize(device)
        except RuntimeError as exc:
            if not _out_of_memory(exc):
                raise
            dropped[name] = "out of device memory"
            del live[name]
            if device.type == "cuda":
                torch.cuda.empty_cache()
            return None
        return time.perf_counter() - start, out.numel()

    for i in range(warmup):
        for name in list(live):
            took = call(name)
            if i == 0 and took and max_call_s is not None and took[0] > max_call_s:
                dropped[name] = f"one call took {took[0]:.3g} s > --max-call-s {max_call_s:g}"
                del live[name]
    for _ in range(rounds):
        for name in list(live):
            took = call(name)
            if took is not None:
                seconds[name].append(took[0])
                counts[name].append(took[1])
    return seconds, counts, dropped


def bench_one(u: torch.Tensor, k: int, methods: list[str], rounds: int, warmup: int,
              max_call_s: float | None = None) -> list[dict]:
    """Rows for one (vector, k): every method and the torch.topk baseline (a dropped method:
    a row with empty times and the reason in `note`)."""
    kth = float(torch.topk(u.abs(), k, sorted=False).values.min())
    calls: dict[str, Callable[[], torch.Tensor]] = {
        BASELINE: lambda: torch.topk(u.abs(), k, sorted=False).indices
    }
    params: dict[str, str] = {BASELINE: ""}
    for name in methods:
        kwargs = {"threshold": kth} if name == "threshold" else {}
        if get_sparsifier(name).randomised:
            kwargs["seed"] = 0
        sparsifier = get_sparsifier(name, **kwargs)
        if getattr(sparsifier, "stateful", False):  # let its adaptation settle on this vector
            for _ in range(SETTLE_CALLS):
                sparsifier.select(u, k)
        calls[name] = lambda s=sparsifier: s.select(u, k)
        params[name] = ",".join(f"{key}={val:.6g}" if isinstance(val, float) else f"{key}={val}"
                                for key, val in kwargs.items())
    # a cap needs a first (warm-up) call to measure
    warmup = max(warmup, 1) if max_call_s is not None else warmup
    seconds, counts, dropped = time_interleaved(calls, rounds, warmup, u.device, max_call_s)
    if BASELINE in dropped:
        raise RuntimeError(f"torch.topk itself was dropped at d = {u.numel()}: "
                           f"{dropped[BASELINE]}")
    base = _median(seconds[BASELINE])
    rows = []
    for name in calls:
        exact = name == BASELINE or bool(getattr(get_sparsifier(name), "exact", False))
        if name in dropped:
            rows.append({"method": name, "params": params[name], "median_ms": float("nan"),
                         "min_ms": float("nan"), "ratio_to_topk": float("nan"),
                         "speedup_vs_topk": float("nan"), "selected_over_k": float("nan"),
                         "exact": exact, "note": f"not timed: {dropped[name]}"})
            continue
        med = _median(seconds[name])
        rows.append({
            "method": name,
            "params": params[name],
            "median_ms": med * 1e3,
            "min_ms": min(seconds[name]) * 1e3,
            "ratio_to_topk": med / base,
            "speedup_vs_topk": base / med,
            "selected_over_k": sum(counts[name]) / len(counts[name]) / k,
            "exact": exact,
            "note": "",
        })
    return rows


def parse_list(text: str, kind: Callable) -> list:
    try:
        return [kind(float(x)) if kind is int else kind(x) for x in text.split(",") if x]
    except ValueError:
        raise SystemExit(f"error: cannot read {text!r} as comma-separated numbers") from None


def build_parser() -> argparse.ArgumentParser:
    ap = benchmark_parser(__file__, __doc__, quick="d in {1e5, 1e6}, 3 rounds")
    ap.add_argument("--sizes", help="comma-separated d values (e.g. 1e5,1e6)")
    ap.add_argument("--densities", default="0.001,0.01", help="comma-separated rho values")
    ap.add_argument("--methods", help="comma-separated names (default: every registered "
                    "sparsifier, a plugin's included)")
    ap.add_argument("--distributions", default=",".join(DISTRIBUTIONS))
    ap.add_argument("--repeats", type=int, help="timed rounds (default 5, --quick 3)")
    ap.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default 1)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--max-call-s", type=float, default=60.0,
                    help="a method whose first call takes longer is not timed at that size or "
                         "larger ones (default 60; its rows say so)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--no-plot", action="store_true", help="skip the PNG")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    if args.threads < 1:
        raise SystemExit(f"error: --threads = {args.threads} must be at least 1")
    try:
        device = torch.device(args.device)
        torch.empty(1, device=device)
    except (RuntimeError, AssertionError) as exc:
        raise SystemExit(f"error: device {args.device!r} is not usable here: {exc}") from None
    default_sizes = QUICK_SIZES if args.quick else GPU_SIZES if device.type == "cuda" else CPU_SIZES
    sizes = parse_list(args.sizes, int) if args.sizes else list(default_sizes)
    densities = parse_list(args.densities, float)
    rounds = args.repeats or (3 if args.quick else 5)
    methods = [m for m in args.methods.split(",") if m] if args.methods else available()
    dists = [x for x in args.distributions.split(",") if x]
    for m in methods:
        if m not in available():
            raise SystemExit(f"error: unknown method {m!r}; available: {', '.join(available())}")
    for x in dists:
        if x not in DISTRIBUTIONS:
            known = ", ".join(DISTRIBUTIONS)
            raise SystemExit(f"error: unknown distribution {x!r}; one of {known}")
    for rho in densities:
        if not 0.0 < rho <= 1.0:
            raise SystemExit(f"error: density {rho} is outside the allowed range (0, 1]")
    if any(d < 1 for d in sizes) or rounds < 1 or args.warmup < 0:
        raise SystemExit("error: sizes and --repeats must be >= 1, --warmup >= 0")
    if not args.max_call_s > 0:
        raise SystemExit(f"error: --max-call-s = {args.max_call_s} must be > 0")
    torch.set_num_threads(args.threads)

    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    context = {
        "device": str(device),
        "device_name": (torch.cuda.get_device_name(device) if device.type == "cuda"
                        else platform.processor() or platform.machine()),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "machine": platform.machine(),
    }
    rows = []
    started = time.perf_counter()
    too_slow: dict[str, int] = {}  # method -> the smallest d it was dropped at
    for dist in dists:
        for d in sorted(sizes):
            u = make_vector(dist, d, seed=d % 1000 + 17, device=device)
            for rho in densities:
                k = max(1, round(rho * d))
                timed = [m for m in methods if d < too_slow.get(m, d + 1)]
                found = bench_one(u, k, timed, rounds, args.warmup, args.max_call_s)
                found += [{"method": m, "median_ms": float("nan"),
                           "note": f"not timed: dropped at d = {too_slow[m]:,}"}
                          for m in methods if m not in timed]
                for row in found:
                    if row["note"].startswith("not timed"):
                        too_slow.setdefault(row["method"], d)
                        print(f"{dist} d={d:,} rho={rho:g}: {row['method']} {row['note']}",
                              file=sys.stderr)
                    rows.append({"distribution": dist, "d": d, "density": rho, "k": k, **row,
                                 "repeats": rounds, **context})
                gk = next(r for r in rows[::-1] if r["method"] == "gaussiank") if (
                    "gaussiank" in methods) else None
                note = f" gaussiank x{gk['speedup_vs_topk']:.1f}" if gk else ""
                print(f"{dist:10s} d={d:>11,d} rho={rho:<6g} done{note}", file=sys.stderr)
            del u
            if device.type == "cuda":
                torch.cuda.empty_cache()
    table = pd.DataFrame(rows)
    write_bytes_atomic(args.out, table.to_csv(index=False, float_format="%.6g").encode())
    print(f"wrote {args.out} ({len(table)} rows, {time.perf_counter() - started:.0f} s, "
          f"{context['threads']} thread(s), {context['device']})")
    if not args.no_plot:
        plot(table, args.out.with_suffix(".png"), context)
    summary = table[(table["distribution"] == dists[0]) & (table["d"] == max(sizes))]
    print(summary[["method", "d", "density", "median_ms", "speedup_vs_topk",
                   "selected_over_k"]].to_string(index=False, float_format="%.3g"))
    return 0


def plot(table: pd.DataFrame, path: Path, context: dict) -> None:
    """Time vs d for the first distribution: `path` at the lowest density, path_rho<x>.png else."""
    from topkscope.plots.selection_speed import selection_time

    dist = table["distribution"].iloc[0]
    where = {"threads": context["threads"], "device": context["device"]}
    for i, rho in enumerate(sorted(table["density"].unique())):
        fig = selection_time(table, distribution=dist, density=rho, context=where)
        target = path if i == 0 else path.with_name(f"{path.stem}_rho{rho:g}.png")
        buf = io.BytesIO()
        FigureCanvasAgg(fig).print_png(buf)
        write_bytes_atomic(target, buf.getvalue())
        print(f"wrote {target}")


if __name__ == "__main__":
    sys.exit(main())
