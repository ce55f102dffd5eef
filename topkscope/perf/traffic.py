"""The GPU time of a threshold selector from the memory traffic of its published code, as a band.

    t = (fixed_bytes + evaluation_bytes x E) x d / (achieved x bandwidth)
        + (fixed_kernels + evaluation_kernels x E) x t_kernel

per call on u of d float32 elements (the O(count) gathers are left out: count ~ k = 0.001 d).

- bytes per element of u and kernels per call (COUNTS): counted from the compress() of each
  rule in the Gaussian-k authors' code (AUTHORS_COMPRESSION), line by line, the error-feedback
  add and the residual update included, because the logged COMP that Top-k's selection input
  comes from times the whole compress() too;
- E, the thresholds one call evaluates: the rule's own recorded evaluations
  (`last_evaluations`, results/reference/bench-cpu/selector_counts.csv of
  benchmarks/selector_counts.py: every call in its own FNN-3 training and on the probe
  vectors; the band is their min ... max), else its loop's bounds;
- bandwidth: the GPU's published specification where the source names the GPU (GPU_SPECS),
  else UNNAMED_BANDWIDTH (an assumption, said so) up to the fastest named one; `achieved`
  ACHIEVED of it (an assumption: elementwise kernels reach part of the specification). The
  band is graded `modelled` on named GPUs and `assumed` where its slow end rests on the floor
  for a GPU no source names;
- t_kernel: LAUNCH_S (a launch, order of magnitude) up to the logged host-side COMP of the
  authors' Rand-k over its fewest possible kernels (randperm, a gather, an add, a scatter: 4),
  an upper bound of what one kernel and its Python call cost in that code on that node.

The band's low end takes every term at its fast end (fewest evaluations, fastest bandwidth,
all of it, cheapest kernel), the high end every term at its slow end; t is monotone in each.

Its table per model with published GPU inputs, results/reference/published/gpu_traffic.csv, is
written by `python -m topkscope.perf.gpu_bands` (which knows the models and their GPUs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from topkscope.importers.gaussiank_sgd import AUTHORS_CODE
from topkscope.perf.model import Band

REPOSITORY = Path(__file__).resolve().parents[2]
PUBLISHED_DIR = REPOSITORY / "results" / "reference" / "published"
TRAFFIC_CSV = PUBLISHED_DIR / "gpu_traffic.csv"
SELECTION_CSV = PUBLISHED_DIR / "gpu_selection.csv"
EVALUATIONS_CSV = REPOSITORY / "results" / "reference" / "bench-cpu" / "selector_counts.csv"
AUTHORS_COMPRESSION = f"{AUTHORS_CODE} compression.py"
FLOAT_BYTES = 4
LAUNCH_S = 5e-6            # one CUDA kernel launch, order of magnitude
ACHIEVED = (0.5, 1.0)      # fraction of the specified bandwidth elementwise kernels reach
ACHIEVED_SOURCE = ("an assumption, not measured here: elementwise kernels reach 50-100% of "
                   "the specified bandwidth")
# fewest kernels the authors' RandomKCompressor.compress launches: torch.randperm (>= 1), the
# values' gather, `tensor.data + 0.0`, the residual's scatter
RANDK_KERNELS = 4
UNNAMED = "not named"


@dataclass(frozen=True)
class GPUSpec:
    """A GPU's specified memory bandwidth (B/s) over its variants, with the source."""

    low: float
    high: float
    source: str


GPU_SPECS = {
    "A100": GPUSpec(1555e9, 2039e9, "NVIDIA A100 Tensor Core GPU datasheet: 1,555 GB/s (40 GB, "
                                    "PCIe and SXM4) to 2,039 GB/s (80 GB SXM4; 80 GB PCIe "
                                    "1,935 GB/s); the source does not give the memory size"),
}
# a GPU the source does not name: no specification to read, so an assumed floor (well below the
# specification of every GPU named in these sources) up to the fastest named one
UNNAMED_BANDWIDTH = 300e9
UNNAMED_SOURCE = (f"GPU not named by the source: {UNNAMED_BANDWIDTH / 1e9:.0f} GB/s (an "
                  "assumption, not a published number) up to the fastest specification named "
                  "in these sources")


@dataclass(frozen=True)
class Counts:
    """Per call: bytes per element of u and kernels, fixed and per threshold evaluation, the
    loop's bounds on the evaluations, and the lines they are counted from."""

    fixed_bytes: int
    evaluation_bytes: int
    fixed_kernels: int
    evaluation_kernels: int
    evaluations: tuple[int, int]
    counted: str


COUNTS = {
    # GaussianCompressor.compress
    "gaussiank-2019": Counts(
        36, 7, 9, 4, (1, 3),
        "tensor.add_(residuals) 12 B; torch.std, torch.mean 4 B each and two float() reads; "
        "torch.abs 8 B; per evaluation `abs_tensor > thr` 5 B and nonzero() 2 B (a count, a "
        "read of it, the indices: 4 kernels); the values' gather; residuals = tensor + 0.0 "
        "8 B; the residual's scatter"),
    # RedSyncCompressor.compress
    "redsync-2019": Counts(
        36, 7, 7, 7, (1, 3),
        "tensor.add_(residuals) 12 B; torch.abs 8 B; torch.mean and torch.max of |u| 4 B "
        "each; per evaluation three scalar kernels for the threshold, `abs_tensor > thr` 5 B "
        "and nonzero() 2 B; the values' gather; residuals = tensor + 0.0 8 B; the residual's "
        "scatter"),
}


def evaluation_band(method: str, path: str | Path = EVALUATIONS_CSV) -> tuple[int, int, str]:
    """(fewest, most, source) thresholds one call of `method` evaluated in its recorded calls
    (selector_counts.csv, column `evaluations`), clipped to its loop's bounds; without a
    recording the loop's bounds, said so."""
    counts = COUNTS[method]
    lo, hi = counts.evaluations
    path = Path(path)
    if path.is_file():
        table = pd.read_csv(path)
        rows = table[(table["method"] == method)] if "evaluations" in table else table.iloc[:0]
        found = rows["evaluations"].dropna()
        if len(found):
            own = rows[rows["source"].astype(str).str.endswith("-training")]["evaluations"]
            own = own.dropna()
            mean = f"; mean {own.mean():.2f} in its own training" if len(own) else ""
            return (max(lo, int(found.min())), min(hi, int(found.max())),
                    f"recorded {int(found.min())}-{int(found.max())} over {len(found)} calls "
                    f"({path.name}{mean})")
    return lo, hi, f"its loop's bounds {lo}-{hi} (no recorded evaluations)"


def kernel_band(selection: pd.DataFrame | None = None) -> tuple[float, float, str]:
    """(fast, slow, source) seconds per kernel: LAUNCH_S, and the logged host-side COMP of the
    authors' Rand-k (95th percentile, target density) over RANDK_KERNELS when gpu_selection.csv
    has it (else LAUNCH_S)."""
    if selection is None:
        selection = pd.read_csv(SELECTION_CSV) if SELECTION_CSV.is_file() else pd.DataFrame()
    rows = selection[(selection["method"] == "randk") & (selection["phase"] == "target")] \
        if len(selection) else selection
    if rows.empty:
        return LAUNCH_S, LAUNCH_S, f"{LAUNCH_S * 1e6:g} us per kernel (a launch)"
    row = rows.iloc[0]
    slow = max(LAUNCH_S, float(row["high_s"]) / RANDK_KERNELS)
    return LAUNCH_S, slow, (f"{LAUNCH_S * 1e6:g} us (a launch) to {slow * 1e6:.3g} us (the "
                            f"authors' Rand-k COMP, 95th percentile {float(row['high_s']) * 1e3:.3g}"
                            f" ms host-side, job {int(row['job'])}, over its >= {RANDK_KERNELS} "
                            "kernels)")


def bandwidth_band(gpus) -> tuple[float, float, str]:
    """(slowest, fastest, source) specified bandwidth over the GPUs a model's inputs ran on
    (their names as the source gives them; UNNAMED or an unknown name: UNNAMED_BANDWIDTH up to
    the fastest named specification)."""
    named = [GPU_SPECS[g] for g in gpus if g in GPU_SPECS]
    fastest = max(s.high for s in GPU_SPECS.values())
    unnamed = [g for g in gpus if g not in GPU_SPECS] or ([] if named else [UNNAMED])
    low = min([s.low for s in named] + ([UNNAMED_BANDWIDTH] if unnamed else []))
    high = max([s.high for s in named] + ([fastest] if unnamed else []))
    parts = [f"{g}: {GPU_SPECS[g].source}" for g in sorted(set(gpus)) if g in GPU_SPECS]
    if unnamed:
        parts.append(UNNAMED_SOURCE)
    return low, high, "; ".join(parts)


def seconds(method: str, d: int, evaluations: float, bandwidth: float, achieved: float,
            kernel_s: float) -> float:
    """The model's time of one call (module docstring)."""
    c = COUNTS[method]
    traffic = (c.fixed_bytes + c.evaluation_bytes * evaluations) * d
    kernels = c.fixed_kernels + c.evaluation_kernels * evaluations
    return traffic / (achieved * bandwidth) + kernels * kernel_s


def selection_band(method: str, d: int, gpus, selection: pd.DataFrame | None = None,
                   evaluations_csv: str | Path = EVALUATIONS_CSV) -> Band:
    """The band of `method`'s selection time at d on the GPUs `gpus` (module docstring)."""
    if method not in COUNTS:
        raise ValueError(f"no memory-traffic counts for {method!r}; counted: "
                         f"{', '.join(COUNTS)}")
    gpus = list(gpus)
    e_lo, e_hi, e_src = evaluation_band(method, evaluations_csv)
    b_lo, b_hi, b_src = bandwidth_band(gpus)
    k_lo, k_hi, k_src = kernel_band(selection)
    low = seconds(method, d, e_lo, b_hi, ACHIEVED[1], k_lo)
    high = seconds(method, d, e_hi, b_lo, ACHIEVED[0], k_hi)
    c = COUNTS[method]
    # graded by its weakest part: the specification of a named GPU (modelled), or the assumed
    # floor for a GPU the source does not name
    grade = "modelled" if all(g in GPU_SPECS for g in gpus) else "assumed"
    return Band(low, high, (
        f"modelled: memory traffic of the authors' compress() ({AUTHORS_COMPRESSION}: "
        f"{c.fixed_bytes} + {c.evaluation_bytes} E bytes per element of u and "
        f"{c.fixed_kernels} + {c.evaluation_kernels} E kernels per call: {c.counted}); "
        f"E {e_lo}-{e_hi}"
        f" ({e_src}); bandwidth {b_lo / 1e9:,.0f}-{b_hi / 1e9:,.0f} GB/s ({b_src}) x "
        f"{ACHIEVED[0]:g}-{ACHIEVED[1]:g} ({ACHIEVED_SOURCE}); kernel {k_src}"), grade)


def point(band: Band) -> float:
    """One number for a point prediction (topkscope scale): the band's geometric middle."""
    return math.sqrt(band.low * band.high)


def table(models: dict[str, tuple[int, tuple[str, ...]]],
          selection: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (threshold method, model): the band on the GPUs of that model's inputs.
    models: name -> (d, GPU names)."""
    rows = []
    for method in COUNTS:
        for model, (d, gpus) in sorted(models.items()):
            band = selection_band(method, d, gpus, selection)
            rows.append({"method": method, "model": model, "d": int(d),
                         "gpus": ", ".join(sorted(set(gpus))), "low_s": band.low,
                         "high_s": band.high, "select_s": point(band), "label": band.source})
    return pd.DataFrame(rows)


def markdown(frame: pd.DataFrame) -> str:
    """The modelled selection bands as docs/scaling.md shows them (ms)."""
    lines = ["| method | model | d | GPUs of the inputs | low ms | high ms |",
             "|---|---|---|---|---|---|"]
    for r in frame.itertuples(index=False):
        lines.append(f"| {r.method} | {r.model} | {r.d:,} | {r.gpus} | {r.low_s * 1e3:.3g} | "
                     f"{r.high_s * 1e3:.3g} |")
    return "\n".join(lines)


def model_markdown(selection: pd.DataFrame | None = None,
                   evaluations_csv: str | Path = EVALUATIONS_CSV) -> str:
    """The model's constants as docs/scaling.md states them, from COUNTS, GPU_SPECS,
    UNNAMED_BANDWIDTH, ACHIEVED, the recorded evaluations and kernel_band."""
    from topkscope.sparsify import label_of

    per = "; ".join(f"{label_of(m)} {c.fixed_bytes} + {c.evaluation_bytes} E bytes and "
                    f"{c.fixed_kernels} + {c.evaluation_kernels} E kernels"
                    for m, c in COUNTS.items())
    evaluations = "; ".join(f"{label_of(m)}: E {lo}–{hi}, {src}" for m in COUNTS
                            for lo, hi, src in [evaluation_band(m, evaluations_csv)])
    specs = "; ".join(f"{g}: {s.low / 1e9:,.0f}–{s.high / 1e9:,.0f} GB/s ({s.source})"
                      for g, s in GPU_SPECS.items())
    fast, slow, _ = kernel_band(selection)
    return (f"Per call: {per}. E, the thresholds a call evaluates: {evaluations}. Bandwidth: "
            f"{specs}; a GPU no source names: an **assumed** floor of "
            f"{UNNAMED_BANDWIDTH / 1e9:.0f} GB/s up to the fastest named, so its band is graded "
            f"`assumed`; elementwise kernels reach {ACHIEVED[0]:.0%}–{ACHIEVED[1]:.0%} of it "
            f"(assumed). A kernel costs {fast * 1e6:.3g}–{slow * 1e6:.3g} µs (a launch, up to "
            f"the authors' Rand-k COMP over its fewest {RANDK_KERNELS} kernels).")
