"""Does compression pay? The GRACE data release's own measurements, and our step-time model
judged on them.

Input: the tidy table of topkscope.importers.grace (committed under
results/reference/published/grace/, source sands-lab/grace-data@41915bb
GRACE_data_release.pickle): 1,836 runs on V100 GPUs, one per node, 1-8 workers at 1, 10 and
25 Gbit/s. Every number here is published (the release) unless its column says modelled.

1. Pays (`pairs`, `pays_summary`). A compressor's `throughput`-mode run against the dense
   (`none`) throughput-mode run of the same task, model, workers, bandwidth, backend and cluster:
   speed-up = its throughput / dense's, pays when > 1. One unit per run (a compressor setting:
   ratio, levels or threshold, error feedback on or off). The dense run is unique per such key
   in the release; a run without one is left out and counted (`unpaired`).
2. Accuracy cost (`accuracy_pairs`): an `accuracy`-mode run against the dense accuracy run(s)
   of the same task, model, workers, cluster, bandwidth, backend and RDMA: the difference of
   the task's quality metric (QUALITY: top-1 accuracy in points, NCF's best hit rate in points,
   PTB's test perplexity; DAGM2007 has no accuracy-mode IoU that separates the runs, below).
   One run per setting: no seeds (run_no 0 in every accuracy run), so no interval.
3. Top-k against Random-k (`topk_vs_randk`): throughput-mode runs of both at the same task,
   model, workers, bandwidth, backend, ratio and error feedback: Top-k's throughput over
   Random-k's. Random-k is the O(d) selector of the same sparsity; GRACE sends it with an
   all-reduce of k values (shared random indices), Top-k with all-gathers of k values and k
   indices, so the comparison holds both the selection's and the exchange's cost.
4. The model judged (`model_rows`, `confusion`). Per throughput row of Top-k, Random-k and DGC
   (per sample per worker, tau = P / throughput, seconds):

       tau_predicted = tau_1 + tau_compress + (tau_dense - tau_1) x R

   tau_1 = 1 / the dense 1-worker throughput of the task and model (compute without
   communication: one worker exchanges nothing; published); tau_dense = P / the dense
   throughput at the row's P and bandwidth (published); R = t_comm(method) / t_comm(dense) of
   topkscope.perf.model.communicate_time at the bandwidth's line rate (modelled: Top-k and DGC
   two padded ring all-gathers of the count, Random-k a ring all-reduce of k values,
   topkscope.perf.patterns; dense the ring all-reduce of d float32): the dense row's measured
   exchange time scaled by the model's ratio, so neither the per-worker batch (the release
   gives none) nor the network's efficiency is assumed. d = the dense data-volume run's bytes
   / 4 (published; VGG-19, which has none: VGG19_PARAMETERS). The count: the release's
   data-volume run of the same setting (bytes / (8 k), DGC's sampled threshold sends fewer:
   published), else k = ratio x d (nominal).
   tau_compress = the compression and decompression cost on the V100: tau(throughput) -
   tau(upper-bound) of the same compressor setting and P at the *other* bandwidths measured
   (the median over them; published, held out: never the row's own bandwidth). The release's
   upper-bound mode keeps the exchange and drops the compression (its dense rows equal dense
   throughput: topkscope.importers.grace), so that difference is the cost at that bandwidth.
   A row without such a pair at another bandwidth is not predicted (`reason`).
   The upper-bound rows themselves are predicted with tau_compress = 0 (the exchange model
   alone). predicted / measured - 1 is the error; `confusion` counts model against
   measurement on pays / does not pay.

   python -m topkscope.perf.grace     # pays.csv and model.csv beside the measurements; prints
                                      # the headline numbers
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from topkscope.bounds import k_from_density
from topkscope.importers import grace as imp
from topkscope.perf import model as pm
from topkscope.perf import patterns
from topkscope.perf.networks import LINE_RATES

PAYS_CSV = imp.COMMITTED / "pays.csv"
MODEL_CSV = imp.COMMITTED / "model.csv"
DENSE = "none"
SPARSIFIERS = ("topk", "randomk", "dgc")
# the release's method -> topkscope.perf.model's
MODEL_METHOD = {"topk": "topk", "dgc": "dgc", "randomk": "randk", DENSE: "dense"}
NETWORKS = {1.0: "1gbe", 10.0: "10gbe", 25.0: "25gbe"}
# the keys a compressor run and its dense run must share
SAME = ("task", "model", "workers", "bandwidth_gbps", "backend", "cluster")
SETTING = ("compressor", "setting", "error_feedback")
# the quality metric of each task's accuracy runs: (metric, higher is better, scale to the unit)
QUALITY = {
    "cifar10-classification": ("top_1_accuracy", True, 100.0, "points"),
    "imagenet-classification": ("top_1_accuracy", True, 100.0, "points"),
    "cifar10-classification-pytorch": ("top_1_accuracy", True, 100.0, "points"),
    "ml-20m-recommendation": ("best_hit_rate", True, 100.0, "points"),
    "PTB-language_modeling": ("test_perplexity", False, 1.0, "perplexity"),
}
# VGG-19 (Simonyan and Zisserman, arXiv 1409.1556, configuration E) with 1000 classes: 16 3x3
# convolutions and 3 fully connected layers with biases (a test counts them); the release has
# no dense data-volume run of it
VGG19_PARAMETERS = 143_667_240
VGG19_SOURCE = "VGG-19, configuration E of arXiv 1409.1556, 1000 classes (counted)"
SOURCE = imp.short_source()


# ------------------------------------------------------------------ runs
def runs(table: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per run: its settings and one column per metric (NaN where it has none), plus
    `rate` (the task's throughput metric)."""
    table = imp.read_measurements() if table is None else table
    settings = [c for c in imp.COLUMNS if c not in ("metric", "value", "unit", "note")]
    first = table.drop_duplicates("run_id")[settings].set_index("run_id")
    values = table.pivot(index="run_id", columns="metric", values="value")
    out = first.join(values).reset_index()
    out["rate"] = [row[imp.throughput_metric(row["task"])] for _, row in out.iterrows()]
    return out


def key_of(row, cols) -> str:
    """A row's key over `cols`: their values as text (a missing value reads the same in every
    row: 'nan' for a number, '<NA>' for a boolean)."""
    return "|".join(str(row[c]) for c in cols)


def _key(frame: pd.DataFrame, cols) -> pd.Series:
    values = zip(*(frame[c].tolist() for c in cols))
    return pd.Series(["|".join(str(v) for v in row) for row in values], index=frame.index,
                     dtype=object)


def _mode(frame: pd.DataFrame, mode: str) -> pd.DataFrame:
    return frame[frame["mode"] == mode]


# ------------------------------------------------------------------ 1. pays
def pairs(run_table: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every compressor throughput run beside its dense run (module docstring, 1)."""
    r = runs() if run_table is None else run_table
    thr = _mode(r, "throughput")
    dense = thr[thr["compressor"] == DENSE].assign(key=lambda f: _key(f, SAME))
    if dense["key"].duplicated().any():
        raise ValueError("the release has two dense throughput runs of one setting: "
                         f"{sorted(dense.loc[dense['key'].duplicated(), 'key'])}")
    dense = dense.set_index("key")
    out = []
    for _, row in thr[thr["compressor"] != DENSE].iterrows():
        key = key_of(row, SAME)
        paired = key in dense.index
        base = dense.loc[key] if paired else None
        out.append({
            **{c: row[c] for c in (*SAME, *SETTING, "ratio", "collective")},
            "run_id": row["run_id"], "throughput": row["rate"],
            "dense_run_id": base["run_id"] if paired else "",
            "dense_throughput": base["rate"] if paired else math.nan,
            "speedup": row["rate"] / base["rate"] if paired else math.nan,
            "paired": paired})
    frame = pd.DataFrame(out)
    frame["pays"] = frame["speedup"] > 1.0
    return frame


def setting_text(row) -> str:
    """'imagenet-classification resnet50 P=8 10 Gbit/s topk ratio=0.01 EF'."""
    bw = "bandwidth n/a" if pd.isna(row["bandwidth_gbps"]) else \
        f"{row['bandwidth_gbps']:g} Gbit/s"
    ef = {True: " EF", False: " no EF"}.get(None if pd.isna(row["error_feedback"])
                                            else bool(row["error_feedback"]), "")
    setting = f" {row['setting']}" if row["setting"] else ""
    return (f"{row['task']} {row['model']} P={int(row['workers'])} {bw} "
            f"{row['compressor']}{setting}{ef}")


def pays_summary(pair_table: pd.DataFrame) -> pd.DataFrame:
    """Per compressor: paired settings, how many pay, the speed-up's median and range, and the
    settings where it pays (module docstring, 1)."""
    rows = []
    paired = pair_table[pair_table["paired"]]
    for compressor, g in paired.groupby("compressor", sort=True):
        s = g["speedup"].to_numpy(np.float64)
        paying = g[g["pays"]]
        rows.append({"compressor": compressor, "settings": len(g), "pays": len(paying),
                     "share": len(paying) / len(g), "median_speedup": float(np.median(s)),
                     "min_speedup": float(s.min()), "max_speedup": float(s.max()),
                     "where_it_pays": "; ".join(
                         f"{setting_text(r)} {r['speedup']:.2f}x"
                         for _, r in paying.sort_values("speedup", ascending=False).iterrows()),
                     "unpaired": int((~pair_table["paired"]
                                      & (pair_table["compressor"] == compressor)).sum())})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ 2. accuracy cost
def accuracy_pairs(run_table: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every compressor accuracy run against the dense accuracy run(s) of its setting: the
    quality difference in the task's unit (module docstring, 2); positive = better than dense
    (perplexity: the sign flipped, so positive is better there too)."""
    r = runs() if run_table is None else run_table
    acc = _mode(r, "accuracy")
    acc = acc[acc["task"].isin(QUALITY)]
    keys = (*SAME, "rdma")
    out = []
    for _, g in acc.groupby(_key(acc, keys), sort=True):
        task = g["task"].iloc[0]
        metric, higher, scale, unit = QUALITY[task]
        dense = g[(g["compressor"] == DENSE)][metric].dropna().to_numpy(np.float64)
        for _, row in g[g["compressor"] != DENSE].iterrows():
            value = row[metric]
            if pd.isna(value) or not len(dense):
                continue
            diff = (value - dense.mean()) * scale * (1 if higher else -1)
            out.append({**{c: row[c] for c in (*keys, *SETTING, "ratio")},
                        "run_id": row["run_id"], "metric": metric, "value": value,
                        "dense_value": float(dense.mean()), "dense_runs": len(dense),
                        "difference": diff, "unit": unit})
    return pd.DataFrame(out)


# ------------------------------------------------------------------ 3. Top-k against Random-k
def topk_vs_randk(run_table: pd.DataFrame | None = None, mode: str = "throughput"
                  ) -> pd.DataFrame:
    """Top-k's throughput over Random-k's where both ran the same setting (module docstring,
    3); mode "accuracy": the quality difference Top-k - Random-k instead."""
    r = _mode(runs() if run_table is None else run_table, mode)
    keys = (*SAME, "ratio", "error_feedback")
    both = r[r["compressor"].isin(("topk", "randomk"))]
    out = []
    for _, g in both.groupby(_key(both, keys), sort=True):
        top, rand = g[g["compressor"] == "topk"], g[g["compressor"] == "randomk"]
        if len(top) != 1 or len(rand) != 1:
            continue
        t, q = top.iloc[0], rand.iloc[0]
        row = {c: t[c] for c in (*keys, "setting")}
        if mode == "accuracy":
            if t["task"] not in QUALITY:
                continue
            metric, higher, scale, unit = QUALITY[t["task"]]
            row.update(metric=metric, topk=t[metric], randomk=q[metric], unit=unit,
                       difference=(t[metric] - q[metric]) * scale * (1 if higher else -1))
        else:
            row.update(topk=t["rate"], randomk=q["rate"], ratio_topk_randk=t["rate"] / q["rate"])
        out.append(row)
    return pd.DataFrame(out)


# ------------------------------------------------------------------ 4. the model judged
def parameters(run_table: pd.DataFrame) -> dict[tuple[str, str], tuple[int, str]]:
    """d per (task, model) and its source: the dense data-volume run's bytes / 4."""
    dv = _mode(run_table, "data-volume")
    dense = dv[dv["compressor"] == DENSE].dropna(subset=["data_volume"])
    out = {}
    for (task, model), g in dense.groupby(["task", "model"]):
        out[(task, model)] = (int(round(g["data_volume"].iloc[0] / 4)),
                              f"published ({SOURCE}: dense data volume / 4 bytes)")
    out.setdefault(("imagenet-classification", "vgg19"), (VGG19_PARAMETERS, VGG19_SOURCE))
    return out


def _counts(run_table: pd.DataFrame, d: dict) -> dict:
    """count / k per (task, model, compressor, setting, error feedback) from the data-volume
    runs (bytes per worker per iteration / bytes per element sent)."""
    dv = _mode(run_table, "data-volume").dropna(subset=["data_volume"])
    per = {"topk": 8, "dgc": 8, "randomk": 4}  # values + int32 indices; Random-k: values
    out = {}
    for _, r in dv[dv["compressor"].isin(SPARSIFIERS)].iterrows():
        if (r["task"], r["model"]) not in d or pd.isna(r["ratio"]):
            continue
        k = k_from_density(r["ratio"], d[(r["task"], r["model"])][0])
        out[(r["task"], r["model"], r["compressor"], r["setting"],
             str(r["error_feedback"]))] = r["data_volume"] / per[r["compressor"]] / k
    return out


def comm_seconds(method: str, P: int, d: int, ratio: float, count_ratio: float,
                 bandwidth_gbps: float) -> float:
    """One exchange under topkscope.perf.model at the bandwidth's line rate: Top-k and DGC its
    sparse all-gathers, Random-k the ring all-reduce of k values (GRACE's Random-k shares its
    indices), dense the ring all-reduce of d."""
    net = LINE_RATES[NETWORKS[bandwidth_gbps]]
    if method == "randomk":
        alpha, beta = net.constants("allreduce")
        m = math.ceil(count_ratio * k_from_density(ratio, d) - 1e-9)
        return patterns.ring_allreduce(P, patterns.dense_bytes(m, patterns.VALUE_BYTES),
                                       alpha, beta)
    density = 1.0 if method == DENSE else ratio
    return pm.communicate_time(MODEL_METHOD[method], P, d, density, count_ratio, net)[0]


# a compression cost is of one compressor setting and P, at one bandwidth
COST_KEYS = ("task", "model", "compressor", "setting", "error_feedback", "workers", "backend",
             "cluster")


def _compress_costs(run_table: pd.DataFrame) -> dict[str, dict[str, float]]:
    """{setting and P: {bandwidth: tau(throughput) - tau(upper-bound)}} where both ran once."""
    sub = run_table[run_table["compressor"].isin(SPARSIFIERS)]
    taus: dict[str, dict[str, list]] = {}
    for mode in ("throughput", "upper-bound"):
        rows = _mode(sub, mode)
        for key, bw, P, rate in zip(_key(rows, COST_KEYS), rows["bandwidth_gbps"],
                                    rows["workers"], rows["rate"]):
            taus.setdefault(key, {}).setdefault(str(bw), {}).setdefault(mode, []).append(
                P / rate)
    out: dict[str, dict[str, float]] = {}
    for key, by_bw in taus.items():
        for bw, tau in by_bw.items():
            if len(tau.get("throughput", ())) == 1 and len(tau.get("upper-bound", ())) == 1:
                out.setdefault(key, {})[bw] = tau["throughput"][0] - tau["upper-bound"][0]
    return out


def model_rows(run_table: pd.DataFrame | None = None) -> pd.DataFrame:
    """The prediction of every Top-k, Random-k and DGC throughput and upper-bound row that has
    its inputs (module docstring, 4); rows that lack one say which (`reason`)."""
    r = runs() if run_table is None else run_table
    d = parameters(r)
    counts = _counts(r, d)
    costs = _compress_costs(r)
    thr = _mode(r, "throughput")
    dense = thr[thr["compressor"] == DENSE]
    single = {(x["task"], x["model"]): x["rate"] for _, x in dense.iterrows()
              if x["workers"] == 1}
    dense_at = {key_of(x, SAME): x for _, x in dense.iterrows()}
    out = []
    rows = r[r["compressor"].isin(SPARSIFIERS) & r["mode"].isin(("throughput", "upper-bound"))]
    for _, row in rows.sort_values(["task", "model", "compressor", "setting", "workers",
                                    "bandwidth_gbps", "mode"]).iterrows():
        P, bw = int(row["workers"]), row["bandwidth_gbps"]
        base = dense_at.get(key_of(row, SAME))
        rec = {**{c: row[c] for c in (*SAME, *SETTING, "ratio", "mode")},
               "run_id": row["run_id"], "measured": row["rate"], "reason": ""}
        tau_1 = 1.0 / single[(row["task"], row["model"])] \
            if (row["task"], row["model"]) in single else math.nan
        reason = ("no dense run at this P and bandwidth" if base is None else
                  "no dense 1-worker run" if math.isnan(tau_1) else
                  "bandwidth not given" if bw not in NETWORKS else
                  "no d for this model" if (row["task"], row["model"]) not in d else "")
        if not reason:
            tau_dense = P / base["rate"]
            if tau_dense <= tau_1:
                reason = "dense no slower than one worker's compute"
        cost, cost_from = 0.0, "none (upper-bound: compression left out)"
        if not reason and row["mode"] == "throughput":
            held = [cost for at, cost in costs.get(key_of(row, COST_KEYS), {}).items()
                    if at != str(bw)]
            if not held:
                reason = "no compression cost at another bandwidth"
            else:
                cost = float(np.median(held))
                cost_from = (f"published ({SOURCE}: throughput - upper-bound at "
                             f"{len(held)} other bandwidth(s), median)")
        if reason:
            out.append({**rec, "reason": reason})
            continue
        dd, d_source = d[(row["task"], row["model"])]
        ckey = (row["task"], row["model"], row["compressor"], row["setting"],
                str(row["error_feedback"]))
        count = counts.get(ckey, 1.0)
        ratio_comm = comm_seconds(row["compressor"], P, dd, row["ratio"], count, bw) / \
            comm_seconds(DENSE, P, dd, 1.0, 1.0, bw)
        tau_pred = tau_1 + cost + (tau_dense - tau_1) * ratio_comm
        predicted = P / tau_pred
        out.append({
            **rec, "d": dd, "d_source": d_source, "count_ratio": count,
            "count_source": (f"published ({SOURCE}: data-volume run)" if ckey in counts
                             else "nominal k = ratio x d"),
            "dense_throughput": base["rate"], "single_worker_throughput": 1.0 / tau_1,
            "tau_1": tau_1, "tau_dense": tau_dense, "tau_compress": cost,
            "compress_source": cost_from, "comm_ratio": ratio_comm,
            "comm_source": f"modelled (topkscope.perf.model, {NETWORKS[bw]} line rate)",
            "predicted": predicted, "error": predicted / row["rate"] - 1.0,
            "pays_measured": bool(row["rate"] > base["rate"]),
            "pays_predicted": bool(predicted > base["rate"])})
    return pd.DataFrame(out)


def confusion(model_table: pd.DataFrame, mode: str = "throughput") -> pd.DataFrame:
    """Model against measurement on pays / does not pay, over the predicted rows of `mode`:
    rows measured, columns predicted."""
    rows = model_table[(model_table["mode"] == mode) & (model_table["reason"] == "")]
    table = pd.crosstab(rows["pays_measured"].map({True: "pays", False: "does not pay"}),
                        rows["pays_predicted"].map({True: "pays", False: "does not pay"}))
    order = ["pays", "does not pay"]
    return table.reindex(index=order, columns=order, fill_value=0).rename_axis(
        index="measured", columns="predicted")


# ------------------------------------------------------------------ the headline
def headline(pair_table: pd.DataFrame, model_table: pd.DataFrame,
             run_table: pd.DataFrame | None = None) -> list[str]:
    """The headline numbers in words, one line each."""
    lines = []
    for s in pays_summary(pair_table).itertuples(index=False):
        lines.append(f"{s.compressor} beats dense throughput in {s.pays} of {s.settings} "
                     f"settings (median speed-up {s.median_speedup:.2f}x, "
                     f"{s.min_speedup:.2f}-{s.max_speedup:.2f}x)")
    tk = topk_vs_randk(run_table)
    if len(tk):
        faster = int((tk["ratio_topk_randk"] > 1).sum())
        lines.append(f"Top-k's throughput exceeds Random-k's in {faster} of {len(tk)} shared "
                     f"settings (median Top-k / Random-k {tk['ratio_topk_randk'].median():.2f})")
    for mode in ("throughput", "upper-bound"):
        rows = model_table[(model_table["mode"] == mode) & (model_table["reason"] == "")]
        if not len(rows):
            continue
        err = rows["error"].abs()
        agree = int((rows["pays_measured"] == rows["pays_predicted"]).sum())
        lines.append(f"model on {len(rows)} {mode} rows: median |error| {err.median():.1%}, "
                     f"{int((err <= 0.25).sum())} within 25%; pays/does not pay agree in "
                     f"{agree} of {len(rows)}")
    return lines


# ------------------------------------------------------------------ docs/scaling.md
def _ef(value) -> str:
    return "—" if pd.isna(value) else ("on" if bool(value) else "off")


def pays_markdown(summary: pd.DataFrame) -> str:
    """The per-compressor pays table as docs/scaling.md shows it."""
    lines = ["| compressor | settings | faster than dense | share | median speed-up | range |",
             "|---|---|---|---|---|---|"]
    for r in summary.itertuples(index=False):
        lines.append(f"| {r.compressor} | {r.settings} | {r.pays} | {r.share:.0%} | "
                     f"{r.median_speedup:.2f}× | {r.min_speedup:.2f}–{r.max_speedup:.2f}× |")
    return "\n".join(lines)


def confusion_markdown(model_table: pd.DataFrame, mode: str = "throughput") -> str:
    """The confusion table of `mode`'s predicted rows as docs/scaling.md shows it."""
    c = confusion(model_table, mode)
    lines = ["| measured \\ predicted | pays | does not pay |", "|---|---|---|"]
    for label in c.index:
        lines.append(f"| {label} | {c.loc[label, 'pays']} | {c.loc[label, 'does not pay']} |")
    return "\n".join(lines)


def error_markdown(model_table: pd.DataFrame) -> str:
    """Per mode and compressor: rows predicted, the error's median and range, rows within
    25%, and the rows left out with why."""
    lines = ["| mode | compressor | predicted | median error | error range | within 25% | "
             "not predicted |", "|---|---|---|---|---|---|---|"]
    for (mode, compressor), g in model_table.groupby(["mode", "compressor"], sort=True):
        done = g[g["reason"] == ""]
        err = done["error"].to_numpy(np.float64)
        left = g[g["reason"] != ""]["reason"].value_counts()
        why = ", ".join(f"{n} ({reason})" for reason, n in left.items()) or "—"
        lines.append(
            f"| {mode} | {compressor} | {len(done)} | "
            + (f"{np.median(err):+.1%} | {err.min():+.0%} … {err.max():+.0%} | "
               f"{int((np.abs(err) <= 0.25).sum())} | " if len(done) else "— | — | — | ")
            + f"{why} |")
    return "\n".join(lines)


def model_markdown(model_table: pd.DataFrame) -> str:
    """Every predicted throughput row as docs/scaling.md shows it."""
    rows = model_table[(model_table["mode"] == "throughput") & (model_table["reason"] == "")]
    lines = ["| task | model | compressor | setting | EF | P | Gbit/s | measured | predicted | "
             "error | dense | pays (measured / predicted) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    yes = {True: "yes", False: "no"}
    for r in rows.itertuples(index=False):
        lines.append(
            f"| {r.task} | {r.model} | {r.compressor} | {r.setting} | {_ef(r.error_feedback)} "
            f"| {int(r.workers)} | {r.bandwidth_gbps:g} | {r.measured:.4g} | {r.predicted:.4g} "
            f"| {r.error:+.1%} | {r.dense_throughput:.4g} | {yes[bool(r.pays_measured)]} / "
            f"{yes[bool(r.pays_predicted)]} |")
    return "\n".join(lines)


def headline_markdown(pair_table: pd.DataFrame, model_table: pd.DataFrame,
                      run_table: pd.DataFrame | None = None) -> str:
    """The headline lines of Top-k, Random-k and DGC, Top-k against Random-k and the model,
    as docs/scaling.md's bullet list (the other compressors: pays_markdown's table)."""
    keep = pair_table[pair_table["compressor"].isin(SPARSIFIERS)]
    return "\n".join(f"- {line}" for line in headline(keep, model_table, run_table))


def read_committed() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The committed pays.csv and model.csv (empty text cells read as "")."""
    numbers = ("ratio", "bandwidth_gbps", "throughput", "dense_throughput", "speedup",
               "measured", "predicted", "error", "d", "count_ratio", "single_worker_throughput",
               "tau_1", "tau_dense", "tau_compress", "comm_ratio")
    kw = {"keep_default_na": False, "na_values": {c: [""] for c in numbers}}
    pair_table, model_table = pd.read_csv(PAYS_CSV, **kw), pd.read_csv(MODEL_CSV, **kw)
    for frame_ in (pair_table, model_table):
        frame_["error_feedback"] = frame_["error_feedback"].map(
            {"True": True, "False": False, True: True, False: False}).astype("boolean")
        for col in ("pays", "pays_measured", "pays_predicted", "paired"):
            if col in frame_:
                frame_[col] = frame_[col].map({"True": True, "False": False, True: True,
                                               False: False})
    return pair_table, model_table


def write(out_dir: str | Path = imp.COMMITTED) -> tuple[pd.DataFrame, pd.DataFrame]:
    """pays.csv and model.csv into out_dir; returns (pairs, model rows)."""
    from topkscope.io import write_bytes_atomic

    out_dir = Path(out_dir)
    r = runs()
    pair_table, model_table = pairs(r), model_rows(r)
    write_bytes_atomic(out_dir / PAYS_CSV.name, imp.csv_bytes(pair_table))
    write_bytes_atomic(out_dir / MODEL_CSV.name, imp.csv_bytes(model_table))
    return pair_table, model_table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=imp.COMMITTED, help="the folder to write")
    args = parser.parse_args(argv)
    pair_table, model_table = write(args.out)
    print(f"wrote {args.out / PAYS_CSV.name} and {args.out / MODEL_CSV.name}")
    for line in headline(pair_table, model_table):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
