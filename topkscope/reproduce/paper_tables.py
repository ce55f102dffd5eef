"""Tables for papers: each table as CSV and as a LaTeX (booktabs) table with its caption.

    write_table(frame, out_dir, "contraction", caption)  -> contraction.csv, contraction.tex

The CSV holds the values at full precision; the .tex shows every number with SIGNIFICANT
significant digits (integers whole), missing values as "--", text escaped for LaTeX. Each
caption says what was measured, on what, and under which profile (`caption()`), and the
.tex needs only \\usepackage{booktabs}.

The builders turn what `make reproduce-figures` has (loaded runs, claims.csv, the selection
benchmark) into the tables written to results/tables/ (`write_all`):

    claims        results/claims.csv as it is (every column, read generically)
    contraction   delta_emp of whole-model u against 1 - k/d, (1 - k/d)^2 and the Gaussian
                  value, per model and density (medians over recorded steps and workers)
    normality     normality effect sizes of u snapshots (KS D, Q-Q r, Shapiro W, ...) per model
    selectors     approximate selectors' selected/k, share inside [2k/3, 4k/3], recall
    convergence   final held-out metric per experiment and sparsifier: mean over seeds and a
                  95 % Student-t interval
    speed         selection time relative to torch.topk per method, d and density
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from topkscope.io import atomic_write, write_bytes_atomic

SIGNIFICANT = 4
_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                  "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                  "^": r"\textasciicircum{}"}
GLOBAL = "__global__"


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in str(text))


def format_number(value) -> str:
    """A number as the .tex shows it: integers whole, others with SIGNIFICANT significant
    digits; NaN/None as "--"."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "--"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    x = float(value)
    if math.isinf(x):
        return r"$\infty$" if x > 0 else r"$-\infty$"
    return f"{x:.{SIGNIFICANT}g}"


def caption(measured: str, on: str, profile: str | None) -> str:
    """'<measured> (<on>; profile <profile>).' -- the caption every table carries."""
    return f"{measured} ({on}; profile {profile or 'unknown'})."


def _is_number(series: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)


def to_latex(frame: pd.DataFrame, caption_text: str, label: str) -> str:
    """A booktabs table environment of frame (columns as headers, index dropped)."""
    align = "".join("r" if _is_number(frame[c]) else "l" for c in frame.columns)
    lines = [r"\begin{table}[htbp]", r"\centering", rf"\caption{{{latex_escape(caption_text)}}}",
             rf"\label{{tab:{label}}}", rf"\begin{{tabular}}{{{align}}}", r"\toprule",
             " & ".join(latex_escape(c) for c in frame.columns) + r" \\", r"\midrule"]
    for row in frame.itertuples(index=False):
        cells = [format_number(v) if isinstance(v, (numbers.Number, type(None))) or v is pd.NA
                 else latex_escape(v) for v in row]
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(lines)


def write_table(frame: pd.DataFrame, out_dir: str | Path, name: str, caption_text: str
                ) -> tuple[Path, Path]:
    """out_dir/name.csv and out_dir/name.tex (each written atomically); returns both paths."""
    if not name or not all(ch.isalnum() or ch in "-_" for ch in name):
        raise ValueError(f"table name {name!r} must be letters, digits, '-' or '_'")
    out = Path(out_dir)
    csv = atomic_write(out / f"{name}.csv", lambda tmp: frame.to_csv(tmp, index=False))
    tex = write_bytes_atomic(out / f"{name}.tex", to_latex(frame, caption_text, name).encode())
    return csv, tex


# ---------------------------------------------------------------------------- builders
def _model(run) -> str:
    m = run.manifest
    return str(m.get("model") or m.get("experiment") or run.path.name)


def _global_u(runs: Iterable) -> pd.DataFrame:
    frames = []
    for run in runs:
        s = run.stats
        if s.empty:
            continue
        u = s[(s["layer"] == GLOBAL) & (s["kind"] == "u")]
        frames.append(u.assign(model=_model(run)))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def contraction_table(runs: Sequence) -> pd.DataFrame:
    """Per model and density: medians of delta_emp and the three reference values over the
    recorded (step, worker) rows of whole-model u, and how often delta_emp is below them."""
    u = _global_u(runs)
    cols = ["model", "density", "records", "delta_emp", "classic_bound", "paper_bound",
            "gaussian_ratio", "share_below_classic", "share_at_most_paper"]
    if u.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for (model, rho), g in u.groupby(["model", "density"], sort=True):
        rows.append({"model": model, "density": rho, "records": len(g),
                     "delta_emp": g["topk_ratio"].median(),
                     "classic_bound": g["classic_bound"].median(),
                     "paper_bound": g["paper_bound"].median(),
                     "gaussian_ratio": g["gaussian_ratio"].median(),
                     "share_below_classic": (g["topk_ratio"] < g["classic_bound"]).mean(),
                     "share_at_most_paper": (g["topk_ratio"] <= g["paper_bound"]).mean()})
    return pd.DataFrame(rows, columns=cols)


def normality_table(battery: pd.DataFrame) -> pd.DataFrame:
    """battery: rows (model, step, statistic, value) of the normality battery on u snapshots.
    Per model and statistic: snapshots, median, min and max."""
    cols = ["model", "statistic", "snapshots", "median", "min", "max"]
    if battery.empty:
        return pd.DataFrame(columns=cols)
    g = battery.dropna(subset=["value"]).groupby(["model", "statistic"], sort=True)["value"]
    out = g.agg(snapshots="count", median="median", min="min", max="max").reset_index()
    return out[cols]


def selectors_table(runs: Sequence) -> pd.DataFrame:
    """Per model, approximate selector and density: median selected/k, share of records inside
    the band [2k/3, 4k/3], median recall of the exact top-k set."""
    u = _global_u(runs)
    cols = ["model", "selector", "density", "records", "median_selected_over_k", "inside_band",
            "median_recall"]
    if u.empty:
        return pd.DataFrame(columns=cols)
    names = sorted(c[: -len("_count")] for c in u.columns
                   if c.endswith("_count") and f"{c[:-len('_count')]}_recall" in u.columns)
    rows = []
    for s in names:
        have = u.dropna(subset=[f"{s}_count"])
        for (model, rho), g in have.groupby(["model", "density"], sort=True):
            ratio = g[f"{s}_count"].astype(float) / g["k"]
            rows.append({"model": model, "selector": s, "density": rho, "records": len(g),
                         "median_selected_over_k": ratio.median(),
                         "inside_band": ratio.between(2 / 3, 4 / 3).mean(),
                         "median_recall": g[f"{s}_recall"].median()})
    return pd.DataFrame(rows, columns=cols)


def convergence_table(runs: Sequence) -> pd.DataFrame:
    """Per experiment and sparsifier: the final held-out metric of each seed's run, its mean
    and a 95 % Student-t interval over seeds (no interval from one seed)."""
    from scipy import stats

    cols = ["experiment", "sparsifier", "metric_name", "n_seeds", "mean", "ci_low", "ci_high",
            "final_train_loss"]
    rows = []
    for run in runs:
        ev = run.eval
        if ev.empty:
            continue
        last = ev.sort_values("step").groupby("split").last()
        split = "test" if "test" in last.index else last.index[-1]
        train_loss = run.train["loss"].iloc[-1] if not run.train.empty else float("nan")
        rows.append({"experiment": run.manifest.get("experiment") or run.path.parent.name,
                     "sparsifier": run.manifest.get("sparsifier"),
                     "metric_name": last.loc[split, "metric_name"],
                     "seed": run.manifest.get("seed"), "metric": last.loc[split, "metric"],
                     "train_loss": train_loss})
    if not rows:
        return pd.DataFrame(columns=cols)
    per_run = pd.DataFrame(rows)
    out = []
    for (exp, sp, metric), g in per_run.groupby(["experiment", "sparsifier", "metric_name"],
                                                sort=True):
        x = g["metric"].to_numpy(float)
        n, mean = len(x), float(np.mean(x))
        if n > 1:
            half = stats.t.ppf(0.975, n - 1) * np.std(x, ddof=1) / math.sqrt(n)
            lo, hi = mean - half, mean + half
        else:
            lo = hi = float("nan")
        out.append({"experiment": exp, "sparsifier": sp, "metric_name": metric, "n_seeds": n,
                    "mean": mean, "ci_low": lo, "ci_high": hi,
                    "final_train_loss": float(g["train_loss"].mean())})
    return pd.DataFrame(out, columns=cols)


def speed_table(bench: pd.DataFrame, distribution: str = "normal") -> pd.DataFrame:
    """Median selection time and its ratio to torch.topk (measured in the same run) per
    method, d and density, on `distribution` vectors."""
    cols = ["method", "d", "density", "median_ms", "ratio_to_topk"]
    if bench.empty:
        return pd.DataFrame(columns=cols)
    b = bench[bench["distribution"] == distribution] if "distribution" in bench else bench
    return b[cols].sort_values(["method", "d", "density"]).reset_index(drop=True)


def _on(runs: Sequence) -> str:
    """'<models> on <datasets>, <P> workers' for a caption."""
    models = sorted({_model(r) for r in runs})
    data = sorted({str(r.manifest.get("dataset_substitute") or r.manifest.get("dataset"))
                   for r in runs})
    workers = sorted({str(r.manifest.get("world_size")) for r in runs})
    return f"{', '.join(models)} on {', '.join(data)}, {'/'.join(workers)} workers"


def write_all(out_dir: str | Path, profile: str, distribution_runs: Sequence = (),
              convergence_runs: Sequence = (), claims: pd.DataFrame | None = None,
              battery: pd.DataFrame | None = None, bench: pd.DataFrame | None = None
              ) -> list[Path]:
    """Every table whose inputs are there, as CSV + .tex under out_dir; returns the files."""
    written: list[Path] = []

    def put(frame: pd.DataFrame, name: str, measured: str, on: str) -> None:
        if not frame.empty:
            written.extend(write_table(frame, out_dir, name, caption(measured, on, profile)))

    if claims is not None:
        put(claims, "claims", "Claims of Shi et al. (arXiv 1911.08772) and their verdicts",
            "every run of the plan")
    if distribution_runs:
        on = _on(distribution_runs)
        put(contraction_table(distribution_runs), "contraction",
            "Top-k contraction delta_emp of whole-model u against 1 - k/d, (1 - k/d)^2 and the "
            "Gaussian value (medians over recorded steps and workers)", on)
        put(selectors_table(distribution_runs), "selectors",
            "Approximate selectors on the recorded u: median selected/k, share inside "
            "[2k/3, 4k/3], median recall of the exact top-k set", on)
    if battery is not None:
        put(normality_table(battery), "normality",
            "Normality effect sizes of u snapshots (median, min, max over snapshots)",
            _on(distribution_runs) if distribution_runs else "the recorded snapshots")
    if convergence_runs:
        put(convergence_table(convergence_runs), "convergence",
            "Final held-out metric per sparsifier: mean over seeds with a 95% Student-t "
            "interval", _on(convergence_runs))
    if bench is not None:
        put(speed_table(bench), "speed",
            "Selection time per method relative to torch.topk in the same run (normal vectors)",
            "device " + ", ".join(map(str, bench["device"].unique()))
            if "device" in bench else "the selection benchmark")
    return written
