"""Outer-loop (DiLoCo-style) runs beside per-step runs: the tables the pseudo-gradient
questions read (issue 37), one row per run or per evaluation, computed from result folders.

    metric_by_bytes(runs)   eval rows with `training` (label(manifest); by default the
                            sparsifier and the condition, e.g. "chunk-topk; warmup=none;
                            outer=average(H=15, lr=1, beta=0.95); quantize=2bit"), `seed`,
                            `condition` and `bytes`: the bytes sent by all workers through the
                            evaluated step (train.parquet's bytes_sent summed), so that per-step
                            and outer-loop training compare at equal traffic
    run_summary(runs)       one row per run: how it trained (outer rule, H, beta, bits, chunk,
                            density), its traffic (total bytes, bytes per inner step), its last
                            and best held-out metric, and the medians over its recorded steps
                            of the whole model's u (worker median first) at `u_density` (the
                            run's own density, or the one given, e.g. 1/64 to hold a per-step
                            run's u against the outer run's at one rho): excess kurtosis,
                            skew, delta of global and chunk-wise Top-k with and without
                            quantization, the three reference curves, and the approximate
                            selectors' count / k and recall (`<S>_count_over_k`, `<S>_recall`)

Medians are over recorded steps after the per-step median over workers; a column the run did
not record is NaN. Nothing here judges a claim: the rows are the evidence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from topkscope.manifest import condition_of
from topkscope.schema import GLOBAL
from topkscope.sparsify import get_sparsifier

U_COLUMNS = ("excess_kurtosis", "skew", "topk_ratio", "topk_quantized_ratio",
             "chunk_topk_ratio", "chunk_topk_quantized_ratio", "classic_bound", "paper_bound",
             "gaussian_ratio")


def training_key(manifest: dict) -> str:
    """How a run trained, as text: its sparsifier and its condition (manifest.condition_of)."""
    return f"{manifest.get('sparsifier')}; {condition_of(manifest)}"


def metric_by_bytes(runs: Sequence, label: Callable[[dict], str] = training_key
                    ) -> pd.DataFrame:
    """Every run's eval rows with training (label of its manifest), seed, condition and the
    cumulative bytes."""
    frames = []
    for run in runs:
        ev, train = run.eval, run.train
        if not len(ev) or not len(train):
            continue
        sent = train.sort_values("step").set_index("step")["bytes_sent"].cumsum()
        frames.append(ev.assign(training=label(run.manifest), seed=run.manifest.get("seed"),
                                condition=condition_of(run.manifest),
                                bytes=sent.reindex(ev["step"]).to_numpy()))
    if not frames:
        return pd.DataFrame(columns=["training", "seed", "condition", "step", "split", "metric",
                                     "metric_name", "bytes"])
    return pd.concat(frames, ignore_index=True)


MOMENTS = ("excess_kurtosis", "skew")  # one value per (step, rank, layer, kind): any density


def _u_medians(stats: pd.DataFrame, density: float | None) -> dict[str, float]:
    u = stats[(stats["layer"] == GLOBAL) & (stats["kind"] == "u")]
    out = {f"u_{c}": np.nan for c in U_COLUMNS}
    out["u_recorded_steps"] = int(u["step"].nunique()) if len(u) else 0
    if not len(u):
        return out
    moments = u[u["density"] == u["density"].min()].groupby("step")[list(MOMENTS)].median()
    for c in MOMENTS:
        out[f"u_{c}"] = float(moments[c].median())
    at = u[np.isclose(u["density"], density)] if density is not None else u.iloc[:0]
    if not len(at):
        return out
    cols = [c for c in at.columns if c in U_COLUMNS and c not in MOMENTS
            or c.endswith(("_count", "_recall"))]
    per_step = at[["step", "k", *cols]].astype("float64").groupby("step").median()
    for c in cols:
        if c.endswith("_count"):
            out[f"u_{c}_over_k"] = float((per_step[c] / per_step["k"]).median())
        else:
            out[f"u_{c}"] = float(per_step[c].median())
    return out


def _chunk_size(sparsifier: str | None, args: dict | None) -> int | None:
    """The chunk of a chunk-wise sparsifier as it ran (its default when not given)."""
    if sparsifier is None:
        return None
    return getattr(get_sparsifier(sparsifier, **(args or {})), "chunk_size", None)


def run_summary(runs: Sequence, density: float | None = None) -> pd.DataFrame:
    """One row per run (see the module docstring); the u medians at `density` (None: each
    run's own; NaN where the recorder did not evaluate it)."""
    rows = []
    for run in runs:
        m = run.manifest
        config = m.get("config") or {}
        outer = m.get("outer") or {}
        quantize = m.get("quantize") or {}
        train, ev = run.train, run.eval
        steps = int(len(train))
        total = int(train["bytes_sent"].sum()) if steps else 0
        metric_name = str(ev["metric_name"].iloc[0]) if len(ev) else None
        best = (ev["metric"].min() if metric_name == "perplexity" else ev["metric"].max()) \
            if len(ev) else np.nan
        at = m.get("density") if density is None else density
        rows.append({
            "path": str(run.path), "experiment": m.get("experiment"), "model": m.get("model"),
            "seed": m.get("seed"), "training": training_key(m), "condition": condition_of(m),
            "sparsifier": m.get("sparsifier"), "density": m.get("density"),
            "chunk_size": _chunk_size(m.get("sparsifier"), config.get("sparsifier_args")),
            "quantize_bits": quantize.get("bits"), "outer_step": outer.get("step"),
            "inner_steps": outer.get("inner_steps", 1), "outer_lr": outer.get("lr"),
            "outer_momentum": outer.get("momentum"), "error_decay": outer.get("error_decay"),
            "error_feedback": config.get("error_feedback", True), "workers": m.get("world_size"),
            "steps": steps, "status": m.get("status"), "bytes_total": total,
            "bytes_per_step": total / steps if steps else np.nan,
            "metric_name": metric_name,
            "final_metric": float(ev.sort_values("step")["metric"].iloc[-1]) if len(ev)
            else np.nan, "best_metric": float(best),
            "u_density": at, **_u_medians(run.stats, at),
        })
    return pd.DataFrame(rows)
