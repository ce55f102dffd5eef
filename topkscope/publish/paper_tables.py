"""Tables for papers: each table as CSV and as a LaTeX (booktabs) table with its caption.

    write_table(frame, out_dir, "contraction", caption)  -> contraction.csv, contraction.tex

The CSV holds the values at full precision; the .tex shows every number with SIGNIFICANT
significant digits (integers whole), missing values as "--", text escaped for LaTeX (math
signs as $...$, never a raw <, > or |, which pdflatex's default font encoding prints as other
glyphs). Each caption says what was measured, on what, and under which profile (`caption()`).
A table wider than the text is shrunk to \\linewidth, never widened. The .tex files need
\\usepackage{booktabs,graphicx,tabularx,longtable} (texlive-latex-base and -recommended;
PACKAGES), and compile with pdflatex.

The builders turn what `make reproduce-figures` has (loaded runs, claims.csv, the selection
benchmark) into the tables written to results/tables/ (`write_all`):

    claims        results/claims.csv as it is (every column) in claims.csv; claims.tex: one
                  row per claim in ten columns formatted from the claims' columns (verdict and
                  cause included) that fit the text width; claims-evidence.tex and
                  claims-rules.tex: the evidence of each row and each rule, as long tables
    contraction   delta_emp of whole-model u against 1 - k/d, (1 - k/d)^2 and the Gaussian
                  value, per model, condition and density (medians over recorded steps and
                  workers; the shares by the claims' criteria)
    normality     normality effect sizes of u snapshots (KS D, Q-Q r, Shapiro W, ...) per model
    selectors     approximate selectors' selected/k, share inside [2k/3, 4k/3], recall
    convergence   final held-out metric per experiment, sparsifier, condition and density:
                  mean over seeds and a 95 % Student-t interval
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
PACKAGES = ("booktabs", "graphicx", "tabularx", "longtable")
_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                  "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                  "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}",
                  "|": r"\textbar{}",
                  # the signs the claims' words use, as math
                  "−": "$-$", "×": r"$\times$", "ρ": r"$\rho$", "δ": r"$\delta$",
                  "β": r"$\beta$", "φ": r"$\phi$", "≤": r"$\le$", "≥": r"$\ge$", "²": r"$^2$",
                  "±": r"$\pm$", "∞": r"$\infty$", "·": r"$\cdot$", "–": r"\textendash{}",
                  "—": r"\textemdash{}"}
GLOBAL = "__global__"
SHRINK = r"\resizebox{\ifdim\width>\linewidth\linewidth\else\width\fi}{!}{%"


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


def _cells(values) -> list[str]:
    return [format_number(v) if isinstance(v, (numbers.Number, type(None))) or v is pd.NA
            else latex_escape(v) for v in values]


def _needs() -> str:
    return f"% needs \\usepackage{{{','.join(PACKAGES)}}}"


def to_latex(frame: pd.DataFrame, caption_text: str, label: str) -> str:
    """A booktabs table environment of frame (columns as headers, index dropped), shrunk to
    the line width when it is wider."""
    align = "".join("r" if _is_number(frame[c]) else "l" for c in frame.columns)
    lines = [_needs(), r"\begin{table}[htbp]", r"\centering",
             rf"\caption{{{latex_escape(caption_text)}}}", rf"\label{{tab:{label}}}", SHRINK,
             rf"\begin{{tabular}}{{{align}}}", r"\toprule",
             " & ".join(latex_escape(c) for c in frame.columns) + r" \\", r"\midrule"]
    for row in frame.itertuples(index=False):
        lines.append(" & ".join(_cells(row)) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}}", r"\end{table}", ""]
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
    """Whole-model u rows of every run with its model and each step's condition (the
    claims' unit_conditions: warm-up steps are a condition of their own)."""
    from topkscope.analysis.units import unit_conditions

    frames = []
    for run in runs:
        s = run.stats
        if s.empty:
            continue
        u = s[(s["layer"] == GLOBAL) & (s["kind"] == "u")]
        steps = sorted({int(v) for v in u["step"]})
        label = dict(zip(steps, unit_conditions(run, steps)))
        frames.append(u.assign(model=_model(run),
                               condition=[label[int(v)] for v in u["step"]]))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def contraction_table(runs: Sequence) -> pd.DataFrame:
    """Per model, condition and density: medians of delta_emp and the three reference values
    over the recorded (step, worker) rows of whole-model u, and the share of rows meeting each
    claim's criterion (topkscope.analysis.criteria.contraction_shares)."""
    from topkscope.analysis.criteria import contraction_shares

    u = _global_u(runs)
    by = ["model", "condition", "density"]
    cols = [*by, "records", "delta_emp", "classic_bound", "paper_bound", "gaussian_ratio",
            "share_below_classic", "share_at_most_paper", "share_at_most_gaussian"]
    if u.empty:
        return pd.DataFrame(columns=cols)
    medians = (u.groupby(by, sort=True)[["topk_ratio", "classic_bound", "paper_bound",
                                         "gaussian_ratio"]].median()
               .rename(columns={"topk_ratio": "delta_emp"}).reset_index())
    return contraction_shares(u, by).merge(medians, on=by)[cols]


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
    """Per model, condition, approximate selector and density: median selected/k, share of
    records inside the band [2k/3, 4k/3] (the claims' verdicts.in_count_band), median recall of
    the exact top-k set."""
    from topkscope.analysis.criteria import in_count_band

    u = _global_u(runs)
    cols = ["model", "condition", "selector", "density", "records", "median_selected_over_k",
            "inside_band", "median_recall"]
    if u.empty:
        return pd.DataFrame(columns=cols)
    names = sorted(c[: -len("_count")] for c in u.columns
                   if c.endswith("_count") and f"{c[:-len('_count')]}_recall" in u.columns)
    rows = []
    for s in names:
        have = u.dropna(subset=[f"{s}_count"])
        for (model, cond, rho), g in have.groupby(["model", "condition", "density"],
                                                   sort=True):
            ratio = g[f"{s}_count"].astype(float) / g["k"]
            rows.append({"model": model, "condition": cond, "selector": s, "density": rho,
                         "records": len(g), "median_selected_over_k": ratio.median(),
                         "inside_band": in_count_band(g[f"{s}_count"], g["k"]).mean(),
                         "median_recall": g[f"{s}_recall"].median()})
    return pd.DataFrame(rows, columns=cols)


def convergence_table(runs: Sequence) -> pd.DataFrame:
    """Per experiment, sparsifier, condition (density warm-up, deviations) and density: the
    final held-out metric of each seed's run, its mean and a 95 % Student-t interval
    (verdicts.t_interval; no interval from one seed)."""
    from topkscope.analysis.criteria import t_interval
    from topkscope.analysis.seeds import final_metric
    from topkscope.manifest import condition_of

    cols = ["experiment", "sparsifier", "condition", "density", "metric_name", "n_seeds",
            "mean", "ci_low", "ci_high", "final_train_loss"]
    rows = []
    for run in runs:
        final = final_metric(run)
        if final is None:
            continue
        m = run.manifest
        train_loss = run.train["loss"].iloc[-1] if not run.train.empty else float("nan")
        rows.append({"experiment": m.get("experiment") or run.path.parent.name,
                     "sparsifier": m.get("sparsifier"), "condition": condition_of(m),
                     "density": m.get("density"), "metric_name": final[1],
                     "seed": m.get("seed"), "metric": final[0], "train_loss": train_loss})
    if not rows:
        return pd.DataFrame(columns=cols)
    per_run = pd.DataFrame(rows)
    out = []
    keys = ["experiment", "sparsifier", "condition", "density", "metric_name"]
    for key, g in per_run.groupby(keys, sort=True, dropna=False):
        mean, lo, hi = t_interval(g["metric"].to_numpy(float))
        out.append({**dict(zip(keys, key)), "n_seeds": len(g), "mean": mean, "ci_low": lo,
                    "ci_high": hi, "final_train_loss": float(g["train_loss"].mean())})
    return pd.DataFrame(out, columns=cols)


def speed_table(bench: pd.DataFrame, distribution: str = "normal") -> pd.DataFrame:
    """Median selection time and its ratio to torch.topk (measured in the same run) per
    method, d and density, on `distribution` vectors."""
    cols = ["method", "d", "density", "median_ms", "ratio_to_topk"]
    if bench.empty:
        return pd.DataFrame(columns=cols)
    b = bench[bench["distribution"] == distribution] if "distribution" in bench else bench
    return b[cols].sort_values(["method", "d", "density"]).reset_index(drop=True)


# ------------------------------------------------------------------ the claims in LaTeX
CLAIM_LABELS = {  # how claims.tex names each claim (formatting only; rules: topkscope.claims.verdicts)
    "gaussian_like": "Gaussian-like $u$",
    "below_classic": r"$\delta < 1-k/d$",
    "below_paper": r"$\delta \le (1-k/d)^2$",
    "gaussian_value": r"$\delta \le$ Gaussian value",
    "convexity_condition": "convex sorted $u^2$",
    "gaussiank_count": r"count in $[2k/3, 4k/3]$ on Top-k's $u$",
    "gaussian_tail": r"tail count in $[2k/3, 4k/3]$",
    "fitted_value": r"fitted $\delta$ closer than Gaussian",
    "contraction_explains_convergence": r"$(1-q)/q^2$ orders the gap to Dense",
}
CLAIMS_HEADER = ("no.", "model", "claim", "method", "condition", "result", "sent", "verdict")
# each column's share of the line width (its padding included); they add up to 1
CLAIMS_WIDTHS = (0.055, 0.11, 0.15, 0.13, 0.145, 0.17, 0.09, 0.15)


def _long_table(widths: Sequence[float], header: Sequence[str], caption_text: str,
                label: str) -> list[str]:
    """The opening of a booktabs longtable whose ragged-right columns take these shares of
    the line width (it breaks across pages; its head repeats)."""
    spec = "".join(rf">{{\raggedright\arraybackslash}}p{{\dimexpr {w:g}\linewidth"
                   r"-2\tabcolsep}" for w in widths)
    return [_needs(), r"\begingroup", r"\footnotesize", r"\setlength{\tabcolsep}{2pt}",
            rf"\begin{{longtable}}{{@{{}}{spec}@{{}}}}",
            rf"\caption{{{caption_text}}}\label{{tab:{label}}} \\",
            r"\toprule", " & ".join(header) + r" \\", r"\midrule", r"\endfirsthead",
            r"\toprule", " & ".join(header) + r" \\", r"\midrule", r"\endhead",
            r"\bottomrule", r"\endfoot"]


_END_LONG = [r"\end{longtable}", r"\endgroup", ""]


def _claim_label(claim: str) -> str:
    claim = str(claim)
    if claim in CLAIM_LABELS:
        return CLAIM_LABELS[claim]
    from topkscope.publish.findings import is_time_to_accuracy

    if is_time_to_accuracy(claim):
        return "time to accuracy"
    if claim.endswith("_count_in_training"):
        return r"count in $[2k/3, 4k/3]$, own training"
    if claim.endswith("_count"):  # another recorded selector on Top-k's u
        return CLAIM_LABELS["gaussiank_count"]
    if claim.endswith("_accuracy"):
        return "trains as Top-k"
    if claim.endswith("_traffic"):
        return "traffic-matched"
    if "speedup" in claim:
        return latex_escape("speed-up " + claim.split("speedup_")[-1].replace("_", " "))
    return latex_escape(claim)


def _claims_cells(row) -> tuple[list[str], str]:
    """(the seven cells after "no.", the cause) of one claims row, formatted from its
    columns."""
    from topkscope.analysis.criteria import diff_unit, interval_text, signed
    from topkscope.plots.titles import model_name, sparsifier_name

    def num(name: str) -> float:
        value = getattr(row, name, math.nan)
        return math.nan if value is None or pd.isna(value) else float(value)

    section = str(row.section)
    metric = row.metric if isinstance(row.metric, str) else "accuracy"
    result = sent = "--"
    if section == "convergence":
        low, failed = num("ci_low"), num("n_failed_seeds")
        result = (signed(num("diff_mean"))
                  + (f" {interval_text(low, num('ci_high'), metric)}" if not math.isnan(low)
                     else diff_unit(metric))
                  + f"; {int(num('n_seeds'))} seeds"
                  + (f" ({int(failed)} failed)" if failed > 0 else ""))
        # two digits fit the column ("0.021×"); the CSV keeps every digit
        sent = "--" if math.isnan(num("traffic_target")) else f"{num('traffic_target'):.2g}×"
    elif section != "prediction" and not math.isnan(num("fraction")):
        low = num("fraction_low")
        result = (f"{num('fraction'):.0%}"
                  + ("" if math.isnan(low) else f" [{low:.0%}, {num('fraction_high'):.0%}]")
                  + f" of {int(num('n_units'))} units"
                  + ("" if math.isnan(num("n_runs")) else f", {int(num('n_runs'))} runs"))
    elif section != "prediction":
        result = f"{0 if math.isnan(num('n_units')) else int(num('n_units'))} units"
    condition = row.condition if isinstance(row.condition, str) and row.condition else "--"
    if section == "prediction":
        network, training = getattr(row, "network", None), getattr(row, "training_condition",
                                                                   None)
        condition = "predicted" + (f"; {training}" if isinstance(training, str) and training
                                   else "") + (f"; network {network}" if isinstance(network, str)
                                               else "")
    methods = ", ".join(sparsifier_name(x) for x in str(row.sparsifier).split(","))
    cells = [latex_escape(model_name(row.model)), _claim_label(row.claim), latex_escape(methods),
             # break after '=', '[' and ',' too: "warmup=custom[0.015625]" is one long word
             latex_escape(condition).replace("=", r"=\allowbreak{}").replace(
                 "[", r"[\allowbreak{}").replace(",", r",\allowbreak{}"), latex_escape(result),
             latex_escape(sent),
             latex_escape(row.verdict)]
    return cells, latex_escape(row.cause if isinstance(row.cause, str) else "")


def claims_latex(table: pd.DataFrame, caption_text: str) -> dict[str, str]:
    """{"claims": ..., "claims-evidence": ..., "claims-rules": ...}: long tables (they break
    across pages) that fit the line width: the claims in eight columns, text wrapped, each
    row's cause on a line of its own under it; each row's evidence; each rule. Rows are
    numbered alike."""
    from topkscope.publish.findings import with_derived_columns

    table, _ = with_derived_columns(table)
    cause_width = rf"\dimexpr {1 - CLAIMS_WIDTHS[0]:g}\linewidth-2\tabcolsep"
    main = _long_table(CLAIMS_WIDTHS, CLAIMS_HEADER, latex_escape(caption_text) + (
        r" The cause of each verdict is on the line under its row; evidence: "
        r"Table~\ref{tab:claims-evidence}; rules: Table~\ref{tab:claims-rules}."), "claims")
    evidence = _long_table((0.07, 0.93), ("no.", "evidence"), r"Evidence of each claims row "
                           r"(numbered as in Table~\ref{tab:claims}).", "claims-evidence")
    for i, row in enumerate(table.itertuples(index=False), 1):
        cells, cause = _claims_cells(row)
        main.append(" & ".join([str(i), *cells]) + r" \\*")
        main.append(rf"& \multicolumn{{{len(cells)}}}{{>{{\raggedright\arraybackslash}}"
                    rf"p{{{cause_width}}}}}{{{cause}}} \\[2pt]")
        text = str(row.evidence) if isinstance(row.evidence, str) else ""
        if str(row.section) == "prediction" and isinstance(row.condition, str):
            text = f"{row.condition}; {text}"
        evidence.append(f"{i} & {latex_escape(text)}" + r" \\")
    main += _END_LONG
    evidence += _END_LONG
    rules = _long_table((0.25, 0.75), ("claims", "rule"), "The verdict rule of each claim.",
                        "claims-rules")
    for rule, g in table.groupby("rule", sort=False):
        names = ", ".join(dict.fromkeys(str(c) for c in g["claim"]))
        names = latex_escape(names).replace(r"\_", r"\_\allowbreak{}")
        rules.append(f"{names} & {latex_escape(rule)}" + r" \\")
    rules += _END_LONG
    return {"claims": "\n".join(main), "claims-evidence": "\n".join(evidence),
            "claims-rules": "\n".join(rules)}


def write_claims_tables(table: pd.DataFrame, out_dir: str | Path, caption_text: str
                        ) -> list[Path]:
    """claims.csv (the table as it is) and the three .tex files of claims_latex."""
    out = Path(out_dir)
    written = [atomic_write(out / "claims.csv", lambda tmp: table.to_csv(tmp, index=False))]
    for name, tex in claims_latex(table, caption_text).items():
        written.append(write_bytes_atomic(out / f"{name}.tex", tex.encode()))
    return written


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

    if claims is not None and not claims.empty:
        written.extend(write_claims_tables(
            claims, out_dir, caption("Claims of Shi et al. (arXiv 1911.08772) and their "
                                     "verdicts", "every run of the plan", profile)))
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
