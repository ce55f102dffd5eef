"""The step-time model checked on published GPU training runs, and GPU selection inputs with
their sources; from runs imported by `topkscope import gaussiank-sgd` (launcher `published`).

    summary(runs)            one row per imported run (topkscope.importers.gaussiank_sgd.
                             run_summary): settings, status, final accuracy, median times
    validation_rows(runs)    predicted against measured seconds per iteration for every run
                             whose log has the time per iteration, the compute and (sparse
                             runs) the selection: the published.csv columns plus node, job,
                             select_s, family
    selection_inputs(runs)   per method and d, a GPU selection time labelled "measured on a
                             GPU (source)" or "fitted by the authors (source)"
    write(roots, out_dir)    results/reference/published/{runs,validation,gpu_selection}.csv
                             (gpu_selection.csv also holds the Top-k compression times of the
                             seed authors' 32-GPU cluster, topkscope.perf.gtopkssgd), and
                             published.csv (the ddl-benchmarks rows and these)

The check. measured = the median of the logged "time per iteration including communication"
net of the validation waits (train.parquet `time_iteration_net`: the iteration after each
validation waits out rank 0's evaluation, 1.1-1.4 s in the VGG-16 jobs) over the windows at
the target density (after the warm-up). Inputs, each logged: t_compute = median forward +
backward less the selection (the authors' selection runs inside the backward hooks, so the
logged backward holds it), t_select = the median over iterations of the workers' mean COMP (0
for dense), the count ratio 1 (exact Top-k and Rand-k send exactly k). Every median over
iterations leaves out the iterations after a validation (iterations.parquet `after_eval`). The network: one node, NCCL over P2P/IPC (the log's
own word; the link behind it, PCIe or NVLink, is not logged), so no preset is the link: the
NVLink preset's latency with an effective bandwidth fitted per node on that node's dense rows
per node, model and P on the dense rows of that node, model and P (use = fit: least squares
on relative error, as topkscope.perf.published fits the cluster presets; a group of one row
fits it exactly, so only groups of several rows test the model); every sparse row is held
out (use = held-out) and is predicted with the fit of its node, model and P, or where its node
ran no such dense job with the fit of every dense row of its model and P (named in
`network`). The logged forward and backward times are host-side (CUDA runs asynchronously),
so where the GPU's work outlasts them (ResNet-20 at large batches) the dense rows miss by what
the logs do not time; the report keeps that miss, it is not fitted away. The errors of the dense and the sparse rows are reported apart (family
"one-node dense" / "one-node sparse"), never mixed into the cluster families that the P = 16
claims use. The exchange alone is checked too: `communicate_s` (the median logged COMM_TOTAL /
COMM: the sparse all-gather with its wait for the slowest worker, or the dense all-reduce)
against `predicted_communicate_s` (the model's exchange on the fitted network).

The authors' exchange waits for the slowest worker's selection (the selection runs in the
backward hooks, the all-gather starts when the last worker has selected): per iteration the
workers' mean COMM is the slowest worker's COMP less the mean worker's (`wait_s`, the median
over iterations) plus the exchange itself (`exchange_s`: COMM less that wait, the median over
iterations), which is what the model's all-gather predicts (`predicted_communicate_s`). On
VGG-16 Top-k the wait is 14.6-15.7 ms of a 15.9-16.4 ms COMM, the exchange 1.0-1.5 ms.
`predicted_slowest_s` models the wait: the median over iterations of the slowest worker's COMP
(iterations.parquet `time_select_max`) as the selection time.

Selection inputs. Top-k: the logged COMP per density phase (warm-up 1/64 and 0.004, target;
the median over that phase's iterations with the 5th-95th percentiles as low / high),
"measured on a GPU (source)"; the authors' fitted cost of torch.topk on their P102-100,
t = s d log2 d, s = AUTHORS_TOPK_S (hclhkbu/GaussianK-SGD@0de3eeb utils.py), "fitted by the
authors (source)". Rand-k: its logged COMP. COMP is timed on the host around compress() with
no synchronize (the authors' distributed_optimizer.py `_sparse_allreduce_async`), so Rand-k's
0.18 ms is what launching its kernels costs, not one GPU pass over d; the threshold methods'
GPU times are topkscope.perf.traffic's memory-traffic model (results/reference/published/
gpu_traffic.csv), not an anchor on Rand-k's.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from topkscope.importers.gaussiank_sgd import (
    ITERATIONS,
    LAUNCHER,
    column_median,
    run_summary,
)
from topkscope.perf import gtopkssgd
from topkscope.perf import model as pm
from topkscope.perf.gtopkssgd import AUTHORS_FIT_SOURCE, AUTHORS_TOPK_S
from topkscope.perf.model import Input
from topkscope.perf.networks import PRESETS

REFERENCE = Path(__file__).resolve().parents[2] / "results" / "reference"
PUBLISHED_DIR = REFERENCE / "published"
ONE_NODE = "one-node"
TARGET = "target"


def published_runs(roots) -> list:
    """The loaded imported runs (launcher `published`, any status) under roots."""
    from topkscope.analysis.runs import load
    from topkscope.manifest import find_runs

    return [load(r.path) for r in find_runs(roots, status=None)
            if r.manifest.get("launcher") == LAUNCHER]


def summary(runs: list) -> pd.DataFrame:
    return pd.DataFrame([run_summary(r) for r in runs])


def _target(run) -> pd.DataFrame:
    tr = run.train
    trained = run.manifest.get("density_trained")
    if tr is None or tr.empty or trained is None:
        return pd.DataFrame()
    return tr[np.isclose(tr["density"].astype("float64"), float(trained))]


def _iterations(run) -> pd.DataFrame:
    """The run's iterations.parquet (per-iteration times of the .o log), empty without one."""
    path = Path(run.path) / ITERATIONS
    return pd.read_parquet(path) if path.is_file() else pd.DataFrame()


def _at_density(frame: pd.DataFrame, density) -> pd.DataFrame:
    if frame.empty or density is None or "density" not in frame:
        return frame.iloc[0:0]
    return frame[np.isclose(frame["density"].astype("float64"), float(density), rtol=1e-3)]


def without_after_eval(its: pd.DataFrame) -> pd.DataFrame:
    """The iterations that do not follow a validation (column `after_eval` of
    iterations.parquet; an older import without it: all)."""
    if its.empty or "after_eval" not in its:
        return its
    return its[~its["after_eval"].astype(bool)]


def straggler_wait(its: pd.DataFrame) -> pd.Series:
    """Per iteration, the slowest worker's selection less the workers' mean: what the mean
    worker waits in the exchange for the last worker's selection."""
    return its["time_select_max"].astype("float64") - its["time_select"].astype("float64")


def _measured(run) -> dict | None:
    """The logged inputs and the measured time per iteration of one run, or None when its log
    lacks one of them. Medians over iterations (iterations.parquet) where the .o log times
    them, the iterations after a validation left out; the time per iteration net of the
    validation waits (train.parquet `time_iteration_net`)."""
    m = run.manifest
    tr = _target(run)
    if tr.empty:
        return None
    dense = m.get("sparsifier") == "dense"
    measured = column_median(tr, "time_iteration_net")
    its = without_after_eval(_at_density(_iterations(run), m.get("density_trained")))
    per_iteration = not its.empty and its["time_communicate"].notna().any()
    select = 0.0 if dense else column_median(its if per_iteration else tr, "time_select")
    both = tr["time_compute"].astype("float64") - (0.0 if dense else tr["time_select"])
    compute = float(np.median(both.dropna())) if both.notna().any() else math.nan
    if not all(math.isfinite(v) for v in (measured, select, compute)):
        return None
    communicate = column_median(its if per_iteration else tr, "time_communicate")
    slowest = 0.0 if dense else column_median(its, "time_select_max")
    wait = exchange = math.nan
    if per_iteration:
        wait = 0.0 if dense else float(straggler_wait(its).median())
        exchange = communicate if dense else float(
            (its["time_communicate"].astype("float64") - straggler_wait(its)).median())
    files = (m.get("source") or {}).get("files") or []
    return {"job": m.get("run_id"), "node": m.get("node"), "model": m.get("model"),
            "method": m.get("sparsifier"), "gpus": int(m.get("workers") or 0),
            "params": int((m.get("config") or {}).get("params") or 0),
            "density": 1.0 if dense else float(m.get("density_trained")),
            "batch_per_gpu": int(m.get("batch_per_worker") or 0), "measured_s": measured,
            "compute_s": compute, "select_s": select, "select_slowest_s": slowest,
            "communicate_s": communicate, "wait_s": wait, "exchange_s": exchange,
            "gpu": m.get("gpu"), "source": "; ".join(files)}


def _step(row: dict, net) -> dict:
    compute = Input(row["compute_s"], "logged forward + backward less the selection", "gpu")
    inputs = pm.MethodInputs(Input(row["select_s"], "logged COMP", "gpu"),
                             Input(1.0, "exact k (logged counts)"))
    return pm.step(row["method"], row["gpus"], row["params"], row["density"], net, compute,
                   inputs)


def _predict(row: dict, net) -> float:
    return _step(row, net)["t_step"]


def _fit(rows: list[dict], base) -> float | None:
    """The bandwidth factor f (beta = base beta / f) minimising the squared relative error of
    the rows' predictions: t = a + b / f, closed form."""
    num = den = 0.0
    for row in rows:
        t_line = _predict(row, base)
        t_zero = _predict(row, replace(base, beta=0.0))
        b = t_line - t_zero
        num += (row["measured_s"] - t_zero) * b / row["measured_s"] ** 2
        den += b * b / row["measured_s"] ** 2
    return den / num if num > 0 and den > 0 else None


def _network(factor: float, label: str):
    base = PRESETS["nvlink"]
    return replace(base, name=f"{ONE_NODE}-fit ({label})", beta=base.beta / factor,
                   beta_source=f"effective intra-node bandwidth fitted on the dense rows of "
                               f"{label} (NCCL P2P/IPC; the link is not logged)",
                   bandwidth_factor=factor)


def validation_rows(runs: list) -> pd.DataFrame:
    """Predicted against measured seconds per iteration (see the module docstring)."""
    measured = [r for r in (_measured(run) for run in runs) if r is not None]
    dense = [r for r in measured if r["method"] == "dense"]
    base = PRESETS["nvlink"]
    def group(r: dict) -> tuple:
        return str(r["node"]), r["model"], r["gpus"]

    fits = {}
    for key in sorted({group(r) for r in dense}):
        factor = _fit([r for r in dense if group(r) == key], base)
        if factor is not None:
            fits[key] = (factor, f"node {key[0]}, {key[1]} P={key[2]}")
    out = []
    for row in sorted(measured, key=lambda r: (r["model"], r["gpus"], r["method"], r["job"])):
        fit = fits.get(group(row))
        if fit is None:  # no dense job of its model and P on this node: every node's
            same = [r for r in dense if r["model"] == row["model"] and r["gpus"] == row["gpus"]]
            factor = _fit(same, base) if same else None
            if factor is None:
                continue
            fit = (factor, "every node's dense " + row["model"] + f" P={row['gpus']} rows "
                   "(none on node " + str(row["node"]) + ")")
        net = _network(*fit)
        parts = _step(row, net)
        predicted = parts["t_step"]
        slowest = (_predict({**row, "select_s": row["select_slowest_s"]}, net)
                   if math.isfinite(row["select_slowest_s"]) else math.nan)
        is_dense = row["method"] == "dense"
        out.append({**row, "published_model": row["model"], "network": net.name,
                    "connection": "one node, NCCL P2P/IPC", "published_method":
                    "none (density 1)" if is_dense else row["method"],
                    "samples_per_s": row["gpus"] * row["batch_per_gpu"] / row["measured_s"],
                    "predicted_s": predicted, "ratio": predicted / row["measured_s"],
                    "use": "fit" if is_dense else "held-out", "bandwidth_factor": fit[0],
                    "predicted_communicate_s": parts["t_comm_total"],
                    "predicted_slowest_s": slowest,
                    "ratio_slowest": slowest / row["measured_s"],
                    "family": f"{ONE_NODE} {'dense' if is_dense else 'sparse'}"})
    return pd.DataFrame(out)


def errors(table: pd.DataFrame) -> dict[str, float]:
    """max |ratio - 1| per family of rows (the fit rows included for the dense family: every
    dense row is a fit row)."""
    return {fam: float(np.max(np.abs(rows["ratio"].to_numpy(float) - 1.0)))
            for fam, rows in table.groupby("family")}


# ------------------------------------------------------------------ GPU selection inputs
def _phase_selects(run) -> list[dict]:
    m = run.manifest
    its = _iterations(run)
    d = int((m.get("config") or {}).get("params") or 0)
    if its.empty or its["time_select"].isna().all() or not d:
        return []
    rows = []
    trained = m.get("density_trained")
    phases = [(float(v), "warm-up") for v in m.get("density_schedule_values") or []]
    phases.append((float(trained), TARGET))
    files = "; ".join((m.get("source") or {}).get("files") or [])
    for density, phase in phases:
        sel = without_after_eval(_at_density(its, density))
        t = column_median(sel, "time_select")
        if not math.isfinite(t):
            continue
        lo, hi = (float(np.percentile(sel["time_select"].dropna(), q)) for q in (5, 95))
        worst = sel["time_select_max"].dropna()
        rows.append({"method": m.get("sparsifier"), "model": m.get("model"), "d": d,
                     "job": m.get("run_id"), "node": m.get("node"), "gpu": m.get("gpu"),
                     "workers": int(m.get("workers") or 0),
                     "density": density, "phase": phase, "select_s": t, "low_s": lo,
                     "high_s": hi, "slowest_s": float(worst.median()),
                     "slowest_low_s": float(np.percentile(worst, 5)),
                     "slowest_high_s": float(np.percentile(worst, 95)),
                     "label": f"measured on a GPU ({files}; node {m.get('node')}, "
                              f"GPU {m.get('gpu')}; median (5th-95th percentile) "
                              f"over {len(sel)} iterations, mean of the workers; slowest_*: "
                              "the slowest worker's; the iterations after a validation left "
                              "out)"})
    return rows


def selection_inputs(runs: list, models: dict[str, int] | None = None) -> pd.DataFrame:
    """Per method and d, a GPU selection time with its label (module docstring). `models`:
    name -> d for the authors' fit (default: the imported runs' models and their logged d)."""
    measured = [row for run in runs for row in _phase_selects(run)]
    if models is None:
        models = {r["model"]: r["d"] for r in measured}
        for run in runs:
            cfg = run.manifest.get("config") or {}
            if run.manifest.get("model") and cfg.get("params"):
                models.setdefault(run.manifest["model"], int(cfg["params"]))
    rows = list(measured)
    for model, d in sorted(models.items()):
        t = AUTHORS_TOPK_S * d * math.log2(d)
        rows.append({"method": "topk", "model": model, "d": d, "density": math.nan,
                     "phase": "any k", "select_s": t, "low_s": t, "high_s": t,
                     "label": f"fitted by the authors ({AUTHORS_FIT_SOURCE})"})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ docs/scaling.md
def validation_markdown(table: pd.DataFrame) -> str:
    """The one-node validation table as docs/scaling.md shows it: sparse rows after dense."""
    lines = ["| model | job (node, GPU) | GPUs | batch | method | measured s | predicted s | ratio | "
             "predicted s, slowest worker's selection | ratio | COMM logged ms | of which "
             "wait for the slowest selection ms | exchange ms | exchange predicted ms | use |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    order = table.assign(_sparse=table["method"] != "dense").sort_values(
        ["_sparse", "model", "gpus", "batch_per_gpu", "job"], kind="stable")

    def ms(value) -> str:
        return "—" if pd.isna(value) else f"{value * 1e3:.2f}"

    for r in order.itertuples(index=False):
        gpu = getattr(r, "gpu", None)
        gpu = "" if pd.isna(gpu) or gpu == "not named" else f", {gpu}"
        lines.append(f"| {r.model} | {r.job} ({r.node}{gpu}) | {r.gpus} | {r.batch_per_gpu} | "
                     f"{r.method} | {r.measured_s:.4f} | {r.predicted_s:.4f} | {r.ratio:.3f} | "
                     f"{r.predicted_slowest_s:.4f} | {r.ratio_slowest:.3f} | "
                     f"{ms(r.communicate_s)} | {ms(r.wait_s)} | {ms(r.exchange_s)} | "
                     f"{ms(r.predicted_communicate_s)} | {r.use} |")
    return "\n".join(lines)


def selection_markdown(table: pd.DataFrame) -> str:
    """The GPU selection inputs as docs/scaling.md shows them."""
    lines = ["| method | model | d | job (node) | phase (rho) | selection ms | low ms | "
             "high ms | source |", "|---|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples(index=False):
        phase = r.phase if pd.isna(r.density) else f"{r.phase} ({r.density:.3g})"
        kind = str(r.label).split(" (")[0]
        where = "—" if pd.isna(r.job) else f"{int(r.job)} ({r.node})"
        lines.append(f"| {r.method} | {r.model} | {int(r.d):,} | {where} | {phase} | "
                     f"{r.select_s * 1e3:.3g} | {r.low_s * 1e3:.3g} | {r.high_s * 1e3:.3g} | "
                     f"{kind} |")
    return "\n".join(lines)


# ------------------------------------------------------------------ writing
def write(roots, out_dir: str | Path = PUBLISHED_DIR) -> list[Path]:
    """runs.csv, validation.csv and gpu_selection.csv of the imported runs under roots into
    out_dir, and published.csv (next to the ddl-benchmarks rows) in its scaling folder."""
    from topkscope.io import write_bytes_atomic
    from topkscope.perf import published

    runs = published_runs(roots)
    if not runs:
        raise ValueError(f"no imported runs (launcher {LAUNCHER!r}) under {roots!r}; import "
                         "them first: topkscope import gaussiank-sgd PATH --results RESULTS")
    out_dir = Path(out_dir)
    selection = pd.concat([selection_inputs(runs), gtopkssgd.selection_inputs()],
                          ignore_index=True)
    tables = {"runs.csv": summary(runs), "validation.csv": validation_rows(runs),
              "gpu_selection.csv": selection}
    paths = []
    for name, frame in tables.items():
        paths.append(write_bytes_atomic(out_dir / name, frame.to_csv(index=False).encode()))
    paths += published.write(out_dir.parent / "scaling", gpu_rows=tables["validation.csv"])
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="+", type=Path,
                        help="results roots holding imported runs (topkscope import)")
    parser.add_argument("--out", type=Path, default=PUBLISHED_DIR,
                        help="folder for runs.csv, validation.csv, gpu_selection.csv")
    args = parser.parse_args(argv)
    for path in write(args.roots, args.out):
        print(f"wrote {path}")
    table = pd.read_csv(Path(args.out) / "validation.csv")
    print("errors |predicted/measured - 1|: " + ", ".join(
        f"{k} {v:.3f}" for k, v in errors(table).items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
