"""GPU inputs for the step-time model, and its check, from published cluster measurements.

The source is the seed authors' group's public benchmark repository, HKBU-HPML/ddl-benchmarks
(Shi et al., "Communication-Efficient Distributed Deep Learning: Survey, Evaluation, and
Challenges", arXiv 2005.13247): data-parallel training throughput (samples per second over all
GPUs, batch per GPU) of ResNet-50, BERT-Base and BERT-Large on 1, 4, 8, 16 and 32 GPUs (4 per
node) over 10 Gbit/s Ethernet (TCP/IP) and 100 Gbit/s InfiniBand (RDMA), per method. Every
number used is one row of the committed `results/reference/scaling/published_measurements.csv`,
which names the file and commit it was read from; this module derives the rest:

    measurements()          the committed published numbers, checked
    gpu_compute_table()     GPU forward + backward seconds per step for each paper model at its
                            per-worker batch (gpu_compute.csv): ResNet-50 from its 1-GPU
                            throughput, scaled to the paper's batch in proportion to the FLOPs;
                            every other model its own FLOPs (topkscope.perf.workload) divided by
                            the FLOP rate ResNet-50 reached on that GPU (an estimate, and a lower
                            bound for small models, which use a GPU less well)
    gpu_compute(model)      (compute Input, batch) of that table for the step-time model
    fit_factors()           per network, the fraction of the line rate the dense all-reduce
                            reached: least squares on relative error over the fit rows
                            (dense rows of FIT_MODELS); the presets <net> carry it
    validation_table()      every 16- and 32-GPU row: measured seconds per step
                            (GPUs x batch / throughput), the model's prediction on the fitted
                            preset (compute: the model's own 1-GPU time), their ratio, and
                            whether the row was used for the fit (published.csv)
    validated_errors()      max |predicted / measured - 1| over the held-out rows, per family
                            of exchange ("no-overlap": dense and every method without overlap;
                            "wfbp": dense-wfbp): the error a predicted speed-up has to exceed
    write(out_dir)          regenerate gpu_compute.csv and published.csv
    *_markdown(table)       the tables of docs/scaling.md (a test compares them)

Published method names map to the model's: BSP-A2A (Horovod all-reduce of all gradients fused
into one buffer after the backward pass) -> dense; MG-WFBP (merged-gradient wait-free
back-propagation: all-reduces overlap the backward pass) -> dense-wfbp.

    python -m topkscope.perf.published [--out DIR]   # default: results/reference/scaling
"""

from __future__ import annotations

import argparse
import sys
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from topkscope.perf import model as pm
from topkscope.perf.model import Input
from topkscope.perf.networks import LINE_RATES, fitted
from topkscope.perf.workload import WORKLOADS, backward_fraction, flop_counts, model_size

REFERENCE_SCALING = Path(__file__).resolve().parents[2] / "results" / "reference" / "scaling"
MEASUREMENTS_CSV = REFERENCE_SCALING / "published_measurements.csv"
GPU_COMPUTE_CSV = REFERENCE_SCALING / "gpu_compute.csv"
PUBLISHED_CSV = REFERENCE_SCALING / "published.csv"
MEASUREMENT_COLUMNS = {"source", "model", "params", "params_source", "batch_per_gpu", "gpus",
                       "network", "method", "published_method", "samples_per_s"}
# the model whose measured 1-GPU time grounds every paper model's GPU compute
REFERENCE_MODEL = "resnet50"
# the models whose dense rows fit the bandwidth factors; every other row is held out
FIT_MODELS = ("resnet50", "bert-large")
FIT_METHOD = "dense"
GPU_NAME = "not named by the source (ddl-benchmarks cluster, 4 GPUs per node)"
INPUTS_LABEL = "GPU inputs from published measurements"
# which validated error applies to a method's prediction
ERROR_FAMILY = {"dense-wfbp": "wfbp"}
CLUSTER_FAMILIES = ("no-overlap", "wfbp")


def error_family(method: str) -> str:
    """"wfbp" for dense-wfbp, "no-overlap" for every other method (no exchange overlap)."""
    return ERROR_FAMILY.get(method, CLUSTER_FAMILIES[0])


def measurements(path: str | Path = MEASUREMENTS_CSV) -> pd.DataFrame:
    """The committed published measurements (one row per published number), checked."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"published measurements {str(path)!r} do not exist")
    table = pd.read_csv(path, keep_default_na=False, na_values=[""])
    missing = MEASUREMENT_COLUMNS - set(table.columns)
    if missing:
        raise ValueError(f"{str(path)!r} lacks the columns {sorted(missing)}")
    if not (table["samples_per_s"] > 0).all() or not (table["batch_per_gpu"] > 0).all():
        raise ValueError(f"{str(path)!r} has a throughput or batch that is not > 0")
    return table


def _single_gpu(table: pd.DataFrame, model: str) -> pd.Series:
    rows = table[(table["model"] == model) & (table["gpus"] == 1)]
    if len(rows) != 1:
        raise ValueError(f"the published measurements need one 1-GPU row of {model!r}, "
                         f"found {len(rows)}")
    return rows.iloc[0]


def seconds_per_step(row) -> float:
    """GPUs x batch per GPU / samples per second (the throughput is summed over the GPUs)."""
    return float(row["gpus"]) * float(row["batch_per_gpu"]) / float(row["samples_per_s"])


# ------------------------------------------------------------------ GPU compute per paper model
def gpu_compute_table(table: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per paper model: GPU compute seconds per step at its per-worker batch, with the
    GPU, precision, FLOPs, backward share, source and how the number was derived."""
    table = measurements() if table is None else table
    ref = _single_gpu(table, REFERENCE_MODEL)
    ref_batch, ref_s = int(ref["batch_per_gpu"]), seconds_per_step(ref)
    rate = flop_counts(REFERENCE_MODEL, ref_batch).total / ref_s  # FLOP/s reached on that GPU
    rows = []
    for name, (batch, _, batch_source) in WORKLOADS.items():
        flops = flop_counts(name, batch)
        if name == REFERENCE_MODEL:
            how = (f"measured: {ref['samples_per_s']:g} samples/s at batch {ref_batch} on one "
                   f"GPU, scaled to batch {batch} in proportion to the FLOPs (linearly)")
        else:
            how = (f"estimate: {flops.total / 1e9:.4g} GFLOP per step / the "
                   f"{rate / 1e12:.3g} TFLOP/s {REFERENCE_MODEL} reached on that GPU (FLOPs "
                   "counted by topkscope.perf.workload; a lower bound where the model is too "
                   "small to keep a GPU busy)")
        rows.append({"model": name, "gpu": GPU_NAME, "batch_per_worker": batch,
                     "batch_source": batch_source, "compute_s": flops.total / rate,
                     "precision": "fp32", "flops_per_step": flops.total,
                     "backward_fraction": flops.backward_fraction,
                     "source": f"{ref['source']} ({ref['published_model']}, 1 GPU column)",
                     "derivation": how})
    return pd.DataFrame(rows)


@cache
def _committed_gpu_compute() -> pd.DataFrame:
    if not GPU_COMPUTE_CSV.is_file():
        raise ValueError(f"no published GPU compute table at {GPU_COMPUTE_CSV}; run "
                         "python -m topkscope.perf.published")
    return pd.read_csv(GPU_COMPUTE_CSV)


def gpu_compute(model: str, table: pd.DataFrame | None = None) -> tuple[Input, int] | None:
    """(compute Input on a GPU, per-worker batch) of `model` from the published GPU compute
    table (default: the committed gpu_compute.csv); None when the model has no row."""
    table = _committed_gpu_compute() if table is None else table
    rows = table[table["model"] == model]
    if rows.empty:
        return None
    row = rows.iloc[0]
    return Input(float(row["compute_s"]),
                 f"published, GPU ({row['derivation']}; {row['source']})", "gpu"), \
        int(row["batch_per_worker"])


# ------------------------------------------------------------------ the model against the clusters
def _params(row) -> int:
    return int(row["params"]) if pd.notna(row["params"]) else model_size(str(row["model"]))


def _predict(row, compute_s: float, net) -> tuple[float, dict]:
    """The step-time model's seconds per step for one published multi-GPU row on `net`."""
    method = str(row["method"])
    fraction, source = backward_fraction(str(row["model"]))
    overlap = Input(fraction, f"backward share of compute: {source}") \
        if method == "dense-wfbp" else None
    inputs = pm.MethodInputs(Input(0.0, "none"), Input(1.0, "exact"), overlap)
    out = pm.step(method, int(row["gpus"]), _params(row), pm.PAPER_DENSITY, net,
                  Input(compute_s, "published 1-GPU time"), inputs)
    return out["t_step"], out


def _multi_gpu(table: pd.DataFrame) -> pd.DataFrame:
    rows = table[table["gpus"] > 1]
    unknown = set(rows["network"]) - set(LINE_RATES)
    if unknown:
        raise ValueError(f"published rows name unknown networks {sorted(unknown)}")
    bad = set(rows["method"]) - set(pm.DENSE_METHODS)
    if bad:
        raise ValueError(f"published rows name methods the model has no dense form of: "
                         f"{sorted(bad)}; allowed: {', '.join(pm.DENSE_METHODS)}")
    return rows


def is_fit_row(row) -> bool:
    return row["model"] in FIT_MODELS and row["method"] == FIT_METHOD


def fit_factors(table: pd.DataFrame | None = None) -> dict[str, float]:
    """Per network, the bandwidth factor f (beta = line-rate beta / f) minimising the squared
    relative error of the predicted step over the fit rows; t = a + b / f is linear in 1 / f,
    so the least-squares solution is closed-form. Rounded to 3 digits (as the presets)."""
    table = measurements() if table is None else table
    factors = {}
    for network, rows in _multi_gpu(table).groupby("network", sort=True):
        num = den = 0.0
        for _, row in rows.iterrows():
            if not is_fit_row(row):
                continue
            compute = seconds_per_step(_single_gpu(table, row["model"]))
            line = LINE_RATES[network]
            t_line, _ = _predict(row, compute, line)
            t_zero, _ = _predict(row, compute, _no_bandwidth_cost(line))
            measured, b = seconds_per_step(row), t_line - t_zero
            num += (measured - t_zero) * b / measured**2
            den += b * b / measured**2
        if den > 0:
            factors[network] = round(den / num, 3)
    return factors


def _no_bandwidth_cost(net):
    from dataclasses import replace

    return replace(net, beta=0.0, allreduce_beta=None if net.allreduce_beta is None else 0.0)


def validation_table(table: pd.DataFrame | None = None,
                     factors: dict[str, float] | None = None) -> pd.DataFrame:
    """One row per published multi-GPU measurement: measured and predicted seconds per step,
    their ratio on the fitted preset and on the line-rate preset, and fit / held-out."""
    table = measurements() if table is None else table
    factors = fit_factors(table) if factors is None else factors
    out = []
    for _, row in _multi_gpu(table).iterrows():
        network = str(row["network"])
        if network not in factors:
            raise ValueError(f"no fitted bandwidth factor for network {network!r}")
        compute = seconds_per_step(_single_gpu(table, row["model"]))
        measured = seconds_per_step(row)
        net = fitted(LINE_RATES[network], factors[network])
        predicted, parts = _predict(row, compute, net)
        line, _ = _predict(row, compute, LINE_RATES[network])
        out.append({
            "source": row["source"], "model": row["model"],
            "published_model": row.get("published_model", row["model"]),
            "params": _params(row), "gpus": int(row["gpus"]), "network": network,
            "connection": row.get("connection", ""), "method": row["method"],
            "published_method": row["published_method"],
            "batch_per_gpu": int(row["batch_per_gpu"]), "samples_per_s": row["samples_per_s"],
            "measured_s": measured, "compute_s": compute, "predicted_s": predicted,
            "ratio": predicted / measured, "use": "fit" if is_fit_row(row) else "held-out",
            "bandwidth_factor": factors[network], "predicted_line_rate_s": line,
            "ratio_line_rate": line / measured, "overlap": parts["overlap"],
            "overlap_source": parts["overlap_source"],
        })
    return pd.DataFrame(out)


def comparison_error(method: str, reference: str, errors: dict[str, float]) -> float:
    """The validated error of the speed-up of `method` over `reference`: the larger of the two
    predictions' (topkscope.perf.published.error_family)."""
    missing = {error_family(method), error_family(reference)} - set(errors)
    if missing:
        raise ValueError(f"no validated error for {sorted(missing)}; errors: {errors}")
    return max(errors[error_family(method)], errors[error_family(reference)])


def validated_errors(table: pd.DataFrame | None = None) -> dict[str, float]:
    """Per error family, the largest |ratio - 1| over the held-out rows of the validation
    table (default: the committed published.csv)."""
    if table is None:
        if not PUBLISHED_CSV.is_file():
            raise ValueError(f"no validation table at {PUBLISHED_CSV}; run "
                             "python -m topkscope.perf.published")
        table = pd.read_csv(PUBLISHED_CSV)
    held = cluster_rows(table)
    held = held[held["use"] == "held-out"]
    errors = {}
    for method, rows in held.groupby("method"):
        family = error_family(str(method))
        err = float(np.max(np.abs(rows["ratio"].to_numpy(dtype=float) - 1.0)))
        errors[family] = max(errors.get(family, 0.0), err)
    return errors


def cluster_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of the ddl-benchmarks clusters (families no-overlap and wfbp), without the
    one-node rows of published GPU training runs (topkscope.perf.gpu_runs) that published.csv
    also holds; the cluster rows' errors are what the P = 16 predictions carry."""
    if "family" not in table:
        return table
    return table[table["family"].isna() | table["family"].isin(CLUSTER_FAMILIES)]


def validation_markdown(table: pd.DataFrame) -> str:
    """The validation table as docs/scaling.md shows it: one row per published cluster
    measurement (the one-node rows: topkscope.perf.gpu_runs.validation_markdown)."""
    table = cluster_rows(table)
    lines = ["| model | network | GPUs | method (published) | measured s | predicted s | "
             "ratio | line-rate ratio | use |", "|---|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples(index=False):
        lines.append(f"| {r.published_model} | {r.network} | {r.gpus} | {r.method} "
                     f"({r.published_method}) | {r.measured_s:.3f} | {r.predicted_s:.3f} | "
                     f"{r.ratio:.3f} | {r.ratio_line_rate:.3f} | {r.use} |")
    return "\n".join(lines)


def gpu_compute_markdown(table: pd.DataFrame) -> str:
    """The GPU compute table as docs/scaling.md shows it."""
    lines = ["| model | batch | compute ms | GFLOP per step | backward share | how |",
             "|---|---|---|---|---|---|"]
    for r in table.itertuples(index=False):
        how = "measured" if r.model == REFERENCE_MODEL else "FLOPs-scaled estimate"
        lines.append(f"| {r.model} | {r.batch_per_worker} | {r.compute_s * 1e3:.3g} | "
                     f"{r.flops_per_step / 1e9:.4g} | {r.backward_fraction:.3f} | {how} |")
    return "\n".join(lines)


GPU_RUNS_CSV = REFERENCE_SCALING.parent / "published" / "validation.csv"


def write(out_dir: str | Path = REFERENCE_SCALING,
          gpu_rows: pd.DataFrame | None = None) -> list[Path]:
    """gpu_compute.csv and published.csv of the committed measurements into out_dir;
    published.csv also holds the rows of the published GPU training runs (gpu_rows, default:
    the committed results/reference/published/validation.csv of topkscope.perf.gpu_runs),
    each with its `family` ("one-node dense" / "one-node sparse")."""
    from topkscope.io import write_bytes_atomic

    out_dir = Path(out_dir)
    table = measurements()
    if gpu_rows is None and GPU_RUNS_CSV.is_file():
        gpu_rows = pd.read_csv(GPU_RUNS_CSV)
    validation = validation_table(table)
    validation["family"] = [error_family(str(m)) for m in validation["method"]]
    if gpu_rows is not None and len(gpu_rows):
        validation = pd.concat([validation, gpu_rows], ignore_index=True)
    paths = []
    for name, frame in (("gpu_compute.csv", gpu_compute_table(table)),
                        ("published.csv", validation)):
        write_bytes_atomic(out_dir / name, frame.to_csv(index=False).encode())
        paths.append(out_dir / name)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REFERENCE_SCALING,
                        help="folder for gpu_compute.csv and published.csv")
    args = parser.parse_args(argv)
    for path in write(args.out):
        print(f"wrote {path}")
    factors = fit_factors()
    print("fitted bandwidth factors: " + ", ".join(f"{k} {v:.3f}" for k, v in factors.items()))
    print("validated errors (held-out rows): " + ", ".join(
        f"{k} {v:.3f}" for k, v in validated_errors(pd.read_csv(Path(args.out) / "published.csv"))
        .items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
