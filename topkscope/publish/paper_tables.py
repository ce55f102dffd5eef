"""Tables for papers: each table as CSV (every value at full precision, columns named as in the
results) and as a LaTeX table a paper can \\input: readable headers with their units, a fixed
number of decimals per column, math in the captions, and every table on its page. One public
function builds each table's frame and one writes each .tex; `write_all` writes them all,
`write_for_paths` (behind `topkscope tables`) for any runs.

    write_all(out_dir, profile, distribution_runs, convergence_runs, claims, bench)

Per question, from the runs:

    contraction  δ = ‖u − TopK(u)‖²/‖u‖² of whole-model u against 1 − k/d, (1 − k/d)² and the
                 Gaussian value, per model, condition and density: medians over the recorded
                 (step, worker) rows and the share of rows meeting each claim's criterion
    normality    per model, method and condition: median skew, excess kurtosis,
                 Kolmogorov-Smirnov D against the fitted normal (an effect size), Q-Q r,
                 the fitted generalised normal's shape β and the family that fits best by BIC
                 (most often over the snapshots of u)
    selectors    approximate selectors on the recorded u: median selected/k, share of records
                 in [2k/3, 4k/3], median recall of the exact top-k set
    convergence  final held-out metric per experiment, method, condition and density (mean
                 over seeds, 95 % Student-t interval), the final training loss, and what was
                 sent: elements, wire bytes (counts and padding included) and the selected
                 pairs' bytes, means over seeds of the whole run (train.parquet)
    speed        selection time per method and d, and its ratio to torch.topk in the same run

and from the claims table (a DataFrame with the columns of results/claims.csv), one paper view
per claim of the paper, formatting its columns (the verdict rules are topkscope.analysis's):

    claims-distribution  per model and condition: u Gaussian-like, δ ≤ (1 − k/d)², δ at most
                         the Gaussian value, the convexity condition, the fitted value, the
                         published Gaussian-k's count in [2k/3, 4k/3]: share of units, verdict
    claims-convergence   per model, method and condition: the difference to Top-k with its
                         95 % interval, seeds, traffic relative to Top-k, both verdicts
    claims-predictions   the predicted speed-ups at P = 16: per model, method, training
                         condition and network, each baseline's verdict and break-even time
    claims               every row in one line (appendix), with claims-evidence (each row's
                         cause and evidence, numbered alike) and claims-rules

A table of more than FLOAT_LINES lines (its rows as they wrap, roughly) is a longtable (it
breaks across pages, its head repeats); a shorter one is a table float. Nothing is shrunk:
the columns are chosen to fit \\linewidth, text columns wrap. The .tex files need \\usepackage{booktabs,graphicx,tabularx,
longtable} (PACKAGES; texlive-latex-base and -recommended) and compile with pdflatex.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from topkscope.io import atomic_write, write_bytes_atomic

SIGNIFICANT = 4
PACKAGES = ("booktabs", "graphicx", "tabularx", "longtable")
FLOAT_LINES = 46  # a table of more lines than this (rows as they wrap, caption): a longtable
POINTS_PER_CHAR = {r"\small": 4.6, r"\footnotesize": 4.2}  # a character's width, roughly
LINE_WIDTH_PT = 345.0  # \linewidth of a one-column article (10pt)
_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                  "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                  "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}",
                  "|": r"\textbar{}",
                  # the signs the claims' words use, as math
                  "−": "$-$", "×": r"$\times$", "ρ": r"$\rho$", "δ": r"$\delta$",
                  "β": r"$\beta$", "φ": r"$\phi$", "≤": r"$\le$", "≥": r"$\ge$", "²": r"$^2$",
                  "±": r"$\pm$", "∞": r"$\infty$", "·": r"$\cdot$", "–": r"\textendash{}",
                  "—": r"\textemdash{}", "‖": r"$\|$", "∩": r"$\cap$"}
GLOBAL = "__global__"
VERDICT_SHORT = {"holds": "holds", "fails": "fails", "mixed": "mixed",
                 "inconclusive": "incon.", "insufficient-data": "too few"}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in str(text))


def _missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def format_number(value) -> str:
    """A number as a generic cell shows it: integers whole, others with SIGNIFICANT
    significant digits; NaN/None as "--"."""
    if _missing(value):
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
    """'<measured> (<on>; profile <profile>).': measured is LaTeX (math allowed), `on` and the
    profile are plain text, escaped here."""
    return f"{measured} ({latex_escape(on)}; profile {latex_escape(profile or 'unknown')})."


# ------------------------------------------------------------------ cells and columns
def fixed(decimals: int, scale: float = 1.0) -> Callable:
    """A cell with `decimals` decimals of value * scale; "--" when missing; a minus as math."""
    def cell(value) -> str:
        if _missing(value):
            return "--"
        x = float(value) * scale
        if math.isinf(x):
            return r"$\infty$" if x > 0 else r"$-\infty$"
        text = f"{x:.{decimals}f}"
        return f"${text}$" if text.startswith("-") else text
    return cell


def whole(value) -> str:
    """An integer with thin spaces between thousands."""
    return "--" if _missing(value) else f"{int(value):,}".replace(",", r"\,")


def text(value) -> str:
    return "--" if _missing(value) or value == "" else latex_escape(value)


def breakable(value) -> str:
    """Text that may break after '=', ',', '[' and '_' (a condition is one long word)."""
    return text(value).replace("=", r"=\allowbreak{}").replace("[", r"[\allowbreak{}").replace(
        ",", r",\allowbreak{}").replace(r"\_", r"\_\allowbreak{}")


@dataclass(frozen=True)
class Column:
    """One column of a .tex table: the frame's `key`, its LaTeX `header` (units included),
    how a value shows (`cell`: value -> LaTeX; `row`: the whole row -> LaTeX, for cells made
    of several columns) and its width: `width` (share of the line) makes a wrapping text
    column, else it is as wide as its widest cell, right-aligned when `right`."""

    key: str
    header: str
    cell: Callable = text
    right: bool = False
    width: float | None = None
    row: Callable | None = None

    def show(self, row) -> str:
        return self.row(row) if self.row is not None else self.cell(row[self.key])

    def lines(self, cell: str, size: str) -> int:
        """How many lines `cell` takes in this column (1 unless it wraps), roughly."""
        if self.width is None:
            return 1
        shown = re.sub(r"\\[a-zA-Z]+(\{\})?|[{}$]", "", cell)
        per_line = max(1, int((self.width * LINE_WIDTH_PT - 12) / POINTS_PER_CHAR.get(
            size.split("\\setlength")[0], 4.6)))
        return max(1, math.ceil(len(shown) / per_line))

    @property
    def spec(self) -> str:
        if self.width is not None:
            side = r"\raggedleft" if self.right else r"\raggedright"
            return (f">{{{side}\\arraybackslash}}p{{\\dimexpr {self.width:g}"
                    r"\linewidth-2\tabcolsep}")
        return "r" if self.right else "l"


def _needs() -> str:
    return f"% needs \\usepackage{{{','.join(PACKAGES)}}}"


def to_latex(frame: pd.DataFrame, columns: Sequence[Column], caption_text: str, label: str,
             group: Callable | None = None, size: str = r"\small",
             notes: str = "", tight: bool = False) -> str:
    """The table of frame's rows with these columns: a table float, or a longtable when it has
    more than FLOAT_ROWS rows. group(row) -> LaTeX: a row spanning the table before each run of
    rows with the same group (the model, say), instead of repeating it on every row. tight:
    3pt between columns instead of 6pt (many narrow columns)."""
    if tight:
        size += r"\setlength{\tabcolsep}{3pt}"
    head = " & ".join(c.header for c in columns) + r" \\"
    spec = "@{}" + "".join(c.spec for c in columns) + "@{}"
    body, last = [], object()
    lines = 1 + max(c.lines(c.header, size) for c in columns)  # the head
    for _, row in frame.iterrows():
        if group is not None and group(row) != last:
            last = group(row)
            if body:
                body.append(r"\addlinespace")
            # a long group (a model and a condition) wraps at the line width
            span = "@{}l" if len(re.sub(r"\\[a-zA-Z]+(\{\})?|[{}$]", "", last)) <= 50 \
                else r"@{}>{\raggedright\arraybackslash}p{\linewidth}@{}"
            body.append(rf"\multicolumn{{{len(columns)}}}{{{span}}}{{\emph{{{last}}}}} \\")
            lines += 2
        cells = [c.show(row) for c in columns]
        lines += max(c.lines(cell, size) for c, cell in zip(columns, cells))
        body.append(" & ".join(cells) + r" \\")
    cap = rf"\caption{{{caption_text}{(' ' + notes) if notes else ''}}}\label{{tab:{label}}}"
    lines += math.ceil(1.3 * len(cap) / 80)  # the caption, in the text's larger size
    if lines <= FLOAT_LINES:
        lines = [_needs(), r"\begin{table}[tbp]", r"\centering", size, cap,
                 rf"\begin{{tabular}}{{{spec}}}", r"\toprule", head, r"\midrule", *body,
                 r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    else:
        lines = [_needs(), r"\begingroup", size, rf"\begin{{longtable}}{{{spec}}}",
                 cap + r" \\", r"\toprule", head, r"\midrule", r"\endfirsthead",
                 r"\multicolumn{" + str(len(columns)) + r"}{@{}l}{\emph{(continued)}} \\",
                 r"\toprule", head, r"\midrule", r"\endhead",
                 r"\bottomrule", r"\endfoot", *body, r"\end{longtable}", r"\endgroup", ""]
    return "\n".join(lines)


def compact(frame: pd.DataFrame, columns: Sequence[Column], caption_text: str, label: str,
            notes: str, group: Callable | None = None) -> str:
    """to_latex of a paper view: footnote size, 3pt between columns, the model (`group`,
    default: the row's model) as a row spanning the table."""
    return to_latex(frame, columns, caption_text, label, size=r"\footnotesize", tight=True,
                    group=group or (lambda r: _shown_model(r["model"])), notes=notes)


def write_table(frame: pd.DataFrame, out_dir: str | Path, name: str, tex: str
                ) -> tuple[Path, Path]:
    """out_dir/name.csv (frame as it is) and out_dir/name.tex (tex), each written atomically;
    returns both paths."""
    if not name or not all(ch.isalnum() or ch in "-_" for ch in name):
        raise ValueError(f"table name {name!r} must be letters, digits, '-' or '_'")
    out = Path(out_dir)
    csv = atomic_write(out / f"{name}.csv", lambda tmp: frame.to_csv(tmp, index=False))
    return csv, write_bytes_atomic(out / f"{name}.tex", tex.encode())


# ---------------------------------------------------------------------------- names
def _model(run) -> str:
    m = run.manifest
    return str(m.get("model") or m.get("experiment") or run.path.name)


def _shown_model(name) -> str:
    from topkscope.plots.titles import model_name

    return text(model_name(name))


def _shown_method(name) -> str:
    """A method's display name; a stats column prefix (tail_k) is read as its registry name."""
    from topkscope.plots.titles import sparsifier_name

    return text(", ".join(sparsifier_name(x.replace("_", "-")) for x in str(name).split(",")))


def _model_and_condition(row) -> str:
    return f"{_shown_model(row['model'])}; {breakable(row['condition'])}"


def _rho(value) -> str:
    return "--" if _missing(value) else f"{float(value):g}"


# ---------------------------------------------------------------- contraction
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


def contraction_latex(frame: pd.DataFrame, caption_text: str) -> str:
    delta = fixed(4)
    share = fixed(0, 100)
    columns = [
        Column("density", r"$\rho$", _rho, right=True),
        Column("records", "Rows", whole, right=True),
        Column("delta_emp", r"$\delta$", delta, right=True),
        Column("classic_bound", r"$1-\frac{k}{d}$", delta, right=True),
        Column("paper_bound", r"$(1-\frac{k}{d})^2$", delta, right=True),
        Column("gaussian_ratio", "Gauss.", delta, right=True),
        Column("share_at_most_paper", r"\% $\le$ paper", share, right=True, width=0.09),
        Column("share_at_most_gaussian", r"\% $\le$ Gauss.", share, right=True, width=0.09),
    ]
    return compact(frame, columns, caption_text, "contraction", group=_model_and_condition, notes=(
                        r"$\delta$ and the references: medians over the recorded (step, "
                        r"worker) rows of whole-model $u$; the last two columns: \% of those "
                        r"rows at most $(1-k/d)^2$ and at most the Gaussian value "
                        r"$1-\rho-2t\phi(t)$, $t = \Phi^{-1}(1-\rho/2)$."))


# ---------------------------------------------------------------- normality
def normality_table(runs: Sequence) -> pd.DataFrame:
    """Per model, method and condition: over the snapshots of u (rank 0) of the runs, the
    median skew, excess kurtosis, KS D and Q-Q r of the normality battery, the median shape β
    of the generalised normal fitted to u, and the family fitted best by BIC (on u, x) at the
    most snapshots, with that share (topkscope.analysis.snapshots.analyze_run: a run the
    figures driver analysed is not analysed again)."""
    from topkscope.analysis.fits import best
    from topkscope.analysis.snapshots import analyze_run
    from topkscope.manifest import condition_of

    cols = ["model", "sparsifier", "condition", "snapshots", "skew", "excess_kurtosis", "ks_D",
            "qq_r", "gennorm_beta", "best_family", "best_family_share"]
    rows = []
    for run in runs:
        if run.snapshots.empty or not (run.snapshots["kind"] == "u").any():
            continue
        analysis = analyze_run(run)
        battery = analysis.battery.pivot_table(index="step", columns="statistic",
                                               values="value", aggfunc="median")
        fits = analysis.fits
        beta = fits[(fits["family"] == "gennorm") & (fits["on"] == "x")]["shape"] \
            if len(fits) else pd.Series(dtype=float)
        winners = pd.Series([best(g, on="x") for _, g in fits.groupby("step")], dtype=object) \
            if len(fits) else pd.Series(dtype=object)
        winners = winners.dropna()
        top = winners.value_counts()
        m = run.manifest
        rows.append({"model": _model(run), "sparsifier": m.get("sparsifier"),
                     "condition": condition_of(m), "snapshots": len(battery),
                     **{k: float(battery[k].median()) if k in battery else math.nan
                        for k in ("skew", "excess_kurtosis", "ks_D", "qq_r")},
                     "gennorm_beta": float(beta.median()) if len(beta) else math.nan,
                     "best_family": top.index[0] if len(top) else None,
                     "best_family_share": float(top.iloc[0] / len(winners)) if len(top)
                     else math.nan})
    if not rows:
        return pd.DataFrame(columns=cols)
    frame = pd.DataFrame(rows, columns=cols)
    return frame.sort_values(["model", "sparsifier", "condition"]).reset_index(drop=True)


FAMILY_NAMES = {"normal": "normal", "laplace": "Laplace", "t": "Student-t",
                "gennorm": "gen. normal"}


def normality_latex(frame: pd.DataFrame, caption_text: str) -> str:
    def family(row) -> str:
        name = row["best_family"]
        if _missing(name):
            return "--"
        return (f"{text(FAMILY_NAMES.get(str(name), str(name)))} "
                f"({fixed(0, 100)(row['best_family_share'])}\\%)")

    columns = [
        Column("sparsifier", "Method", _shown_method, width=0.14),
        Column("condition", "Condition", breakable, width=0.16),
        Column("snapshots", "Snap.", whole, right=True),
        Column("skew", "Skew", fixed(3), right=True),
        Column("excess_kurtosis", "Ex.\\ kurt.", fixed(2), right=True),
        Column("ks_D", "KS $D$", fixed(3), right=True),
        Column("qq_r", "Q-Q $r$", fixed(4), right=True),
        Column("gennorm_beta", r"$\beta$", fixed(2), right=True),
        Column("best_family", "Best fit (BIC)", row=family, width=0.13),
    ]
    return compact(frame, columns, caption_text, "normality", notes=(
        r"Medians over the snapshots of whole-model $u$ (worker 0): skew and excess kurtosis "
        r"(0 for a normal), the Kolmogorov-Smirnov distance $D$ to the fitted normal and the "
        r"normal Q-Q correlation $r$ (effect sizes: $D = 0$, $r = 1$ for a normal), the shape "
        r"$\beta$ of the fitted generalised normal (2: normal, 1: Laplace), and the family "
        r"with the lowest BIC at most snapshots (in \% of them)."))


# ---------------------------------------------------------------- selectors
def selectors_table(runs: Sequence) -> pd.DataFrame:
    """Per model, condition, approximate selector and density: median selected/k, share of
    records inside the band [2k/3, 4k/3] (the claims' criteria.in_count_band), median recall of
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
    frame = pd.DataFrame(rows, columns=cols)
    return frame.sort_values(["model", "condition", "density", "selector"]).reset_index(
        drop=True)


def selectors_latex(frame: pd.DataFrame, caption_text: str) -> str:
    columns = [
        Column("density", r"$\rho$", _rho, right=True),
        Column("selector", "Selector", _shown_method, width=0.2),
        Column("records", "Rows", whole, right=True),
        Column("median_selected_over_k", "Selected$/k$", fixed(3), right=True),
        Column("inside_band", r"\% in $[\frac{2k}{3}, \frac{4k}{3}]$", fixed(0, 100),
               right=True, width=0.12),
        Column("median_recall", "Recall", fixed(3), right=True),
    ]
    return compact(frame, columns, caption_text, "selectors", group=_model_and_condition, notes=(
                        r"Each selector run by the recorder on the same $u$ as training "
                        r"(whole model): the median of its count over $k$ and of the share of "
                        r"the exact top-$k$ set it selects (recall), over the recorded "
                        r"(step, worker) rows, and the \% of rows whose count lies in "
                        r"$[2k/3, 4k/3]$."))


# ---------------------------------------------------------------- convergence
def run_traffic(run) -> dict[str, float]:
    """What a run sent over all its steps and workers (train.parquet): elements (selected
    per worker × P), wire bytes (bytes_sent: counts and padding included) and the selected
    (value, index) pairs' bytes (payload_bytes; NaN for runs written before it existed)."""
    train = run.train
    if train.empty:
        return {"elements": math.nan, "wire_bytes": math.nan, "payload_bytes": math.nan}
    workers = int(run.manifest.get("world_size") or 1)
    payload = train["payload_bytes"] if "payload_bytes" in train else pd.Series(dtype=float)
    return {"elements": float(train["selected"].sum() * workers),
            "wire_bytes": float(train["bytes_sent"].sum()) if train["bytes_sent"].notna().all()
            else math.nan,
            "payload_bytes": float(payload.sum()) if len(payload) and payload.notna().all()
            else math.nan}


def convergence_table(runs: Sequence) -> pd.DataFrame:
    """Per experiment, sparsifier, condition (density warm-up, deviations) and density: the
    final held-out metric of each seed's run, its mean and a 95 % Student-t interval
    (criteria.t_interval; no interval from one seed), the final training loss, and the
    traffic of a run (run_traffic), means over the seeds."""
    from topkscope.analysis.criteria import t_interval
    from topkscope.analysis.seeds import final_metric
    from topkscope.manifest import condition_of

    keys = ["experiment", "model", "dataset", "sparsifier", "condition", "density",
            "metric_name"]
    cols = [*keys, "n_seeds", "mean", "ci_low", "ci_high", "final_train_loss", "elements",
            "wire_bytes", "payload_bytes"]
    rows = []
    for run in runs:
        final = final_metric(run)
        if final is None:
            continue
        m = run.manifest
        train_loss = run.train["loss"].iloc[-1] if not run.train.empty else float("nan")
        rows.append({"experiment": m.get("experiment") or run.path.parent.name,
                     "model": m.get("model"), "dataset": m.get("dataset"),
                     "sparsifier": m.get("sparsifier"), "condition": condition_of(m),
                     "density": math.nan if m.get("sparsifier") == "dense" else m.get("density"),
                     "metric_name": final[1], "metric": final[0], "train_loss": train_loss,
                     **run_traffic(run)})
    if not rows:
        return pd.DataFrame(columns=cols)
    per_run = pd.DataFrame(rows)
    out = []
    for key, g in per_run.groupby(keys, sort=True, dropna=False):
        mean, lo, hi = t_interval(g["metric"].to_numpy(float))
        out.append({**dict(zip(keys, key)), "n_seeds": len(g), "mean": mean, "ci_low": lo,
                    "ci_high": hi, "final_train_loss": float(g["train_loss"].mean()),
                    **{c: float(g[c].mean()) for c in ("elements", "wire_bytes",
                                                       "payload_bytes")}})
    frame = pd.DataFrame(out, columns=cols)
    # Dense first, then Top-k, then the others by name: the order a reader compares in
    order = {"dense": 0, "topk": 1}
    frame["_order"] = frame["sparsifier"].map(lambda s: order.get(s, 2))
    return frame.sort_values(["experiment", "_order", "sparsifier", "condition", "density"]
                             ).drop(columns="_order").reset_index(drop=True)


def convergence_latex(frame: pd.DataFrame, caption_text: str) -> str:
    def metric(row) -> str:
        percent = row["metric_name"] == "accuracy"
        show = fixed(2, 100) if percent else fixed(1)
        if _missing(row["ci_low"]):
            return show(row["mean"])
        return f"{show(row['mean'])} [{show(row['ci_low'])}, {show(row['ci_high'])}]"

    def group(row) -> str:
        from topkscope.plots.titles import dataset_name

        name = "accuracy, \\%" if row["metric_name"] == "accuracy" else str(row["metric_name"])
        return (f"{_shown_model(row['model'])} on {text(dataset_name(row['dataset']))} "
                f"({text(row['experiment'])}); final {name}")

    columns = [
        Column("sparsifier", "Method", _shown_method, width=0.13),
        Column("condition", "Condition", breakable, width=0.15),
        Column("density", r"$\rho$", _rho, right=True),
        Column("n_seeds", "Seeds", whole, right=True),
        Column("mean", "Final [95\\% CI]", row=metric, right=True, width=0.17),
        Column("final_train_loss", "Loss", fixed(3), right=True),
        Column("elements", "Elem.\\ ($10^6$)", fixed(2, 1e-6), right=True, width=0.08),
        Column("wire_bytes", "Wire (MB)", fixed(2, 1e-6), right=True, width=0.08),
        Column("payload_bytes", "Pairs (MB)", fixed(2, 1e-6), right=True, width=0.08),
    ]
    return compact(frame, columns, caption_text, "convergence", group=group, notes=(
        r"Mean over seeds of the final held-out metric with its 95\% Student-$t$ interval "
        r"(none from one seed), the final training loss, and what one run sent over all its "
        r"steps and workers: elements, wire bytes (each worker's 8-byte count and its pairs "
        r"padded to the largest count of the step) and the selected (value, index) pairs' "
        r"bytes; 1 MB = $10^6$ bytes. Dense sends every element."))


# ---------------------------------------------------------------- selection speed
def speed_table(bench: pd.DataFrame, distribution: str = "normal") -> pd.DataFrame:
    """Median selection time and its ratio to torch.topk (measured in the same run) per
    method, d and density, on `distribution` vectors."""
    cols = ["method", "d", "density", "median_ms", "ratio_to_topk"]
    if bench.empty:
        return pd.DataFrame(columns=cols)
    b = bench[bench["distribution"] == distribution] if "distribution" in bench else bench
    return b[cols].sort_values(["density", "method", "d"]).reset_index(drop=True)


def speed_latex(frame: pd.DataFrame, caption_text: str) -> str:
    sizes = sorted(frame["d"].unique())
    wide = frame.pivot_table(index=["density", "method"], columns="d",
                             values=["median_ms", "ratio_to_topk"], aggfunc="median")
    rows = wide.reset_index()
    rows.columns = ["density", "method", *[f"{v}_{d}" for v, d in wide.columns]]

    def at(d) -> Callable:
        def cell(row) -> str:
            ms, ratio = row.get(f"median_ms_{d}"), row.get(f"ratio_to_topk_{d}")
            if _missing(ms):
                return "--"
            return f"{fixed(2)(ms)} ({fixed(2)(ratio)})"
        return cell

    def power(d) -> str:
        exponent = math.log10(d)
        return (f"$10^{{{exponent:.0f}}}$" if exponent.is_integer()
                else f"${d / 10 ** math.floor(exponent):g}\\cdot 10^{{{math.floor(exponent)}}}$")

    columns = [Column("method", "Method", _shown_method, width=0.2)]
    columns += [Column(f"median_ms_{d}", f"$d={power(d)[1:-1]}$", row=at(d), right=True,
                       width=0.8 / len(sizes)) for d in sizes]
    return compact(rows, columns, caption_text, "speed",
                   group=lambda r: f"$\\rho = {float(r['density']):g}$", notes=(
                        r"Median time of one selection in ms, and in parentheses its ratio "
                        r"to torch.topk measured in the same run (below 1: faster)."))


# ------------------------------------------------------------------ the claims in LaTeX
CLAIM_LABELS = {  # how the claims tables name each claim (formatting only: claims.verdicts)
    "gaussian_like": "Gaussian-like $u$",
    "below_classic": r"$\delta < 1-k/d$",
    "below_paper": r"$\delta \le (1-k/d)^2$",
    "gaussian_value": r"$\delta \le$ Gaussian value",
    "convexity_condition": "convex sorted $u^2$",
    "gaussiank_count": r"count in $[2k/3, 4k/3]$ on Top-k's $u$",
    "gaussian_tail": r"tail count in $[2k/3, 4k/3]$",
    "fitted_value": r"fitted $\delta$ closer than Gaussian",
    "contraction_explains_convergence": r"$(1-q)/q^2$ orders the gap to Dense",
    "chunk_contraction": r"chunk-wise $\delta$ like global",
    "quantization_error": r"quantized $\delta$ within 10\%",
    "sparseloco_accuracy": "trains as dense DiLoCo",
    "sparseloco_accuracy_per_step": "trains as per-step Top-k, same bytes",
    "outer_momentum_accuracy": "no outer momentum needed",
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
    return breakable(claim)  # a claim of one's own: its name, broken where it may


def _num(row, name: str) -> float:
    value = row.get(name, math.nan) if isinstance(row, pd.Series) else getattr(row, name,
                                                                                 math.nan)
    return math.nan if _missing(value) else float(value)


def _claims_cells(row) -> tuple[list[str], str]:
    """(the seven cells after "no.", the cause) of one claims row, formatted from its
    columns."""
    from topkscope.analysis.criteria import diff_unit, interval_text, signed
    from topkscope.plots.titles import model_name, sparsifier_name

    def num(name: str) -> float:
        return _num(row, name)

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
             breakable(condition) if condition != "--" else "--", latex_escape(result),
             latex_escape(sent), latex_escape(row.verdict)]
    return cells, latex_escape(row.cause if isinstance(row.cause, str) else "")


def claims_latex(table: pd.DataFrame, caption_text: str) -> dict[str, str]:
    """{"claims": ..., "claims-evidence": ..., "claims-rules": ...}: long tables (they break
    across pages) that fit the line width, each one complete without the others: every claims
    row but the predicted speed-ups at P = 16 (one line each in claims-predictions) in eight
    columns; each row's cause and evidence, numbered alike; each rule."""
    from topkscope.publish.findings import with_derived_columns

    table, _ = with_derived_columns(table)
    speedups = table["claim"].astype(str).str.contains("speedup_p16")
    left_out = int(speedups.sum())
    table = table[~speedups]
    main = _long_table(CLAIMS_WIDTHS, CLAIMS_HEADER, latex_escape(caption_text) + (
        " Each row's cause and evidence are in the table of the claims' evidence under the "
        "same number; each verdict rule in the table of the claims' rules." + (
            f" The {left_out} predicted speed-ups at P = 16 are in the table of predictions "
            "(their evidence in claims.csv)." if left_out else "")), "claims")
    evidence = _long_table((0.06, 0.94), ("no.", "cause and evidence"),
                           "Cause and evidence of each claims row (numbered as in the claims "
                           "table).", "claims-evidence")
    for i, row in enumerate(table.itertuples(index=False), 1):
        cells, cause = _claims_cells(row)
        main.append(" & ".join([str(i), *cells]) + r" \\")
        text_ = str(row.evidence) if isinstance(row.evidence, str) else ""
        if str(row.section) == "prediction" and isinstance(row.condition, str):
            text_ = f"{row.condition}; {text_}"
        evidence.append(f"{i} & \\emph{{{cause}}} {latex_escape(text_)}" + r" \\")
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


# the distribution claims of the paper, in the order of its sections
DISTRIBUTION_VIEW = ("gaussian_like", "below_paper", "gaussian_value", "convexity_condition",
                     "fitted_value", "gaussiank_count")
DISTRIBUTION_HEADERS = {
    "gaussian_like": "Gaussian-like $u$", "below_paper": r"$\delta\le(1-\frac{k}{d})^2$",
    "gaussian_value": r"$\delta\le$ Gauss.", "convexity_condition": "Convex",
    "fitted_value": "Fitted value", "gaussiank_count": r"Gaussian-$k$ count",
}


def _verdict(value) -> str:
    return "--" if _missing(value) else VERDICT_SHORT.get(str(value), text(value))


def claims_distribution_table(claims: pd.DataFrame) -> pd.DataFrame:
    """The paper's distribution claims per model and condition, one column pair per claim
    (DISTRIBUTION_VIEW): the share of units meeting its criterion (`<claim>_fraction`) and
    the verdict (`<claim>_verdict`), from the distribution rows of the claims table."""
    cols = ["model", "condition"] + [f"{c}_{v}" for c in DISTRIBUTION_VIEW
                                     for v in ("fraction", "verdict")]
    rows = claims[(claims["section"] == "distribution")
                  & claims["claim"].isin(DISTRIBUTION_VIEW)]
    if rows.empty:
        return pd.DataFrame(columns=cols)
    out = []
    for (model, cond), g in rows.groupby(["model", "condition"], sort=False):
        row = {"model": model, "condition": cond}
        for claim in DISTRIBUTION_VIEW:
            hit = g[g["claim"] == claim]
            row[f"{claim}_fraction"] = float(hit["fraction"].iloc[0]) if len(hit) else math.nan
            row[f"{claim}_verdict"] = hit["verdict"].iloc[0] if len(hit) else None
        out.append(row)
    return pd.DataFrame(out, columns=cols)


def claims_distribution_latex(frame: pd.DataFrame, caption_text: str) -> str:
    def pair(claim: str) -> Callable:
        return lambda row: (f"{fixed(0, 100)(row[claim + '_fraction'])} "
                            f"{_verdict(row[claim + '_verdict'])}")

    columns = [Column("condition", "Condition", breakable, width=0.22)]
    columns += [Column(f"{c}_fraction", DISTRIBUTION_HEADERS[c], row=pair(c), right=True,
                       width=0.13) for c in DISTRIBUTION_VIEW]
    return compact(frame, columns, caption_text, "claims-distribution", notes=(
                        r"Each cell: the \% of units (recorded steps or snapshots of "
                        r"whole-model $u$) meeting the claim's criterion, and the verdict "
                        r"(holds, fails, mixed, incon.: inconclusive, too few: insufficient "
                        r"data) by the rules of the claims table. Gaussian-$k$ is the "
                        r"published rule (2019), run by the recorder on Top-$k$'s $u$."))


def claims_convergence_table(claims: pd.DataFrame) -> pd.DataFrame:
    """Per model, method and condition: the `<family>_accuracy` row's difference to Top-k
    (diff_mean, ci_low, ci_high in the unit of `metric`), seeds and failed seeds, the traffic
    of the target phase relative to Top-k (traffic_target) and the verdicts of both the
    accuracy and the traffic-matched claim."""
    cols = ["model", "sparsifier", "condition", "metric", "diff_mean", "ci_low", "ci_high",
            "n_seeds", "n_failed_seeds", "traffic_target", "accuracy_verdict",
            "traffic_verdict"]
    rows = claims[claims["section"] == "convergence"]
    accuracy = rows[rows["claim"].str.endswith("_accuracy")]
    if accuracy.empty:
        return pd.DataFrame(columns=cols)
    traffic = rows[rows["claim"].str.endswith("_traffic")].set_index(
        ["model", "sparsifier", "condition"])["verdict"]
    traffic = traffic[~traffic.index.duplicated()]
    out = accuracy.assign(
        accuracy_verdict=accuracy["verdict"],
        traffic_verdict=[traffic.get(k) for k in zip(accuracy["model"], accuracy["sparsifier"],
                                                     accuracy["condition"])])
    return out.reindex(columns=cols).reset_index(drop=True)


def claims_convergence_latex(frame: pd.DataFrame, caption_text: str) -> str:
    from topkscope.analysis.criteria import diff_unit

    def difference(row) -> str:
        show = fixed(2)
        if _missing(row["ci_low"]):
            return show(row["diff_mean"])
        return f"{show(row['diff_mean'])} [{show(row['ci_low'])}, {show(row['ci_high'])}]"

    def group(row) -> str:
        metric = row["metric"] if isinstance(row["metric"], str) else "accuracy"
        unit = ("in points of accuracy" if diff_unit(metric).strip() == "points"
                else f"in \\% of Top-$k$'s {text(metric)}")
        return f"{_shown_model(row['model'])}; $\\Delta$ {unit}"

    def seeds(row) -> str:
        failed = _num(row, "n_failed_seeds")
        return whole(row["n_seeds"]) + (f" ({int(failed)} failed)" if failed > 0 else "")

    columns = [
        Column("sparsifier", "Method", _shown_method, width=0.14),
        Column("condition", "Condition", breakable, width=0.19),
        Column("diff_mean", r"$\Delta$ vs Top-$k$ [95\% CI]", row=difference, right=True,
               width=0.25),
        Column("n_seeds", "Seeds", row=seeds, right=True, width=0.1),
        Column("traffic_target", r"Sent ($\times$ Top-$k$)", fixed(2), right=True, width=0.1),
        Column("accuracy_verdict", "As Top-$k$", _verdict, width=0.1),
        Column("traffic_verdict", "Traffic-matched", _verdict, width=0.12),
    ]
    return compact(frame, columns, caption_text, "claims-convergence", group=group, notes=(
                        r"$\Delta$: the method's final held-out metric minus Top-$k$'s, "
                        r"paired by seed, with its 95\% interval (accuracy in points, "
                        r"perplexity in \% of Top-$k$'s); sent: the elements of the "
                        r"target-density phase relative to Top-$k$'s; verdicts: trains as "
                        r"Top-$k$ within the margin, and does so at no more traffic."))


SPEEDUP_BASELINES = {"": "Dense", "_wfbp": "Dense + WFBP", "_fp16": "Dense fp16"}


def claims_predictions_table(claims: pd.DataFrame) -> pd.DataFrame:
    """The predicted speed-up claims at P = 16 (claims named *speedup_p16*) per model, method,
    training condition and network, one column pair per baseline (SPEEDUP_BASELINES): the
    verdict (`<baseline>_verdict`) and the selection time below which the method beats that
    baseline (`<baseline>_breakeven_ms`)."""
    suffixes = {f"speedup_p16{s}": name for s, name in SPEEDUP_BASELINES.items()}
    keys = ["model", "sparsifier", "training_condition", "network"]
    cols = keys + [f"{n}_{v}" for n in SPEEDUP_BASELINES.values()
                   for v in ("verdict", "breakeven_ms")]
    rows = claims[claims["claim"].astype(str).str.contains("speedup_p16")]
    if rows.empty:
        return pd.DataFrame(columns=cols)
    rows = rows.assign(baseline=[next((n for s, n in suffixes.items()
                                       if str(c).endswith(s)), None) for c in rows["claim"]],
                       training_condition=rows.get("training_condition", pd.Series(
                           index=rows.index, dtype=object)).fillna("--"))
    out = []
    for key, g in rows.groupby(keys, sort=False, dropna=False):
        row = dict(zip(keys, key))
        for name in SPEEDUP_BASELINES.values():
            hit = g[g["baseline"] == name]
            row[f"{name}_verdict"] = hit["verdict"].iloc[0] if len(hit) else None
            row[f"{name}_breakeven_ms"] = (float(hit["breakeven_ms"].iloc[0])
                                           if len(hit) and "breakeven_ms" in hit else math.nan)
        out.append(row)
    return pd.DataFrame(out, columns=cols)


def claims_predictions_latex(frame: pd.DataFrame, caption_text: str) -> str:
    def against(name: str) -> Callable:
        def cell(row) -> str:
            ms = row[f"{name}_breakeven_ms"]
            return (f"{_verdict(row[f'{name}_verdict'])}"
                    + ("" if _missing(ms) else f", {fixed(2)(ms)}"))
        return cell

    columns = [
        Column("sparsifier", "Method", _shown_method, width=0.16),
        Column("training_condition", "Counts from", breakable, width=0.18),
        Column("network", "Network", breakable, width=0.12),
    ]
    columns += [Column(f"{n}_verdict", f"vs {text(n)}", row=against(n), right=True,
                       width=0.18) for n in SPEEDUP_BASELINES.values()]
    return compact(frame, columns, caption_text, "claims-predictions", notes=(
                        r"Predicted, not measured: the step time at $P = 16$ from the "
                        r"step-time model. Each cell: the verdict that the method is faster "
                        r"than the baseline, and the selection time in ms below which it is "
                        r"(break-even); counts from: the training condition whose selected "
                        r"counts the prediction used (-- : $k$ exactly)."))


def _on(runs: Sequence) -> str:
    """'<models> on <datasets>, <P> workers' for a caption (display names)."""
    from topkscope.plots.titles import dataset_name, model_name

    models = sorted({model_name(_model(r)) for r in runs})
    data = sorted({dataset_name(r.manifest.get("dataset_substitute") or r.manifest.get(
        "dataset")) for r in runs})
    workers = sorted({str(r.manifest.get("world_size")) for r in runs})
    return f"{', '.join(models)} on {', '.join(data)}, {'/'.join(workers)} workers"


CLAIMS_VIEWS = {  # name -> (frame builder, LaTeX writer, what the caption says)
    "claims-distribution": (claims_distribution_table, claims_distribution_latex,
                            r"The distribution of $u$ and the contraction: the paper's claims "
                            r"per model and condition"),
    "claims-convergence": (claims_convergence_table, claims_convergence_latex,
                           r"Approximate selectors against Top-$k$ in training: the paper's "
                           r"claims per method and condition"),
    "claims-predictions": (claims_predictions_table, claims_predictions_latex,
                           r"Predicted speed-up of Gaussian-$k$ at $P = 16$ against dense "
                           r"training"),
}


def write_all(out_dir: str | Path, profile: str | None, distribution_runs: Sequence = (),
              convergence_runs: Sequence = (), claims: pd.DataFrame | None = None,
              bench: pd.DataFrame | None = None) -> list[Path]:
    """Every table whose inputs are there, as CSV + .tex under out_dir; returns the files."""
    written: list[Path] = []

    def put(frame: pd.DataFrame, name: str, latex: Callable, measured: str, on: str) -> None:
        if not frame.empty:
            written.extend(write_table(frame, out_dir, name,
                                       latex(frame, caption(measured, on, profile))))

    if claims is not None and not claims.empty:
        written.extend(write_claims_tables(
            claims, out_dir, f"Claims of Shi et al. (arXiv 1911.08772) and their verdicts "
                             f"(every claims row; profile {profile or 'unknown'})."))
        for name, (build, latex, measured) in CLAIMS_VIEWS.items():
            put(build(claims), name, latex, measured, "the claims table")
    if distribution_runs:
        on = _on(distribution_runs)
        put(contraction_table(distribution_runs), "contraction", contraction_latex,
            r"Top-$k$ contraction $\delta = \|u - \mathrm{TopK}(u)\|^2 / \|u\|^2$ against "
            r"$1 - k/d$, $(1 - k/d)^2$ and the Gaussian value", on)
        put(normality_table(distribution_runs), "normality", normality_latex,
            r"How Gaussian is $u$: moments, effect sizes and fitted families", on)
        put(selectors_table(distribution_runs), "selectors", selectors_latex,
            r"Approximate selectors on the recorded $u$: count over $k$ and recall", on)
    if convergence_runs:
        put(convergence_table(convergence_runs), "convergence", convergence_latex,
            r"Final held-out metric and traffic per method", _on(convergence_runs))
    if bench is not None and not bench.empty:
        put(speed_table(bench), "speed", speed_latex,
            r"Selection time per method and vector size $d$ (normal vectors)",
            "device " + ", ".join(map(str, bench["device"].unique()))
            if "device" in bench else "the selection benchmark")
    return written


# ------------------------------------------------------------ the tables of any runs
def distribution_runs_of(runs: Sequence) -> list:
    """One run per experiment whose recorder saved snapshots of u: the one with the most
    such snapshots, the newest of equals (as the figures driver draws one run per
    distribution experiment)."""
    by: dict[str, list] = {}
    for run in runs:
        snaps = run.snapshots
        count = int((snaps["kind"] == "u").sum()) if not snaps.empty else 0
        if count and not run.stats.empty:
            by.setdefault(str(run.manifest.get("experiment") or run.path.parent.name),
                          []).append((count, str(run.manifest.get("start_time") or ""), run))
    return [max(group, key=lambda t: t[:2])[2] for _, group in sorted(by.items())]


def write_for_paths(runs: Sequence, paths: Sequence[Path], out_dir: Path,
                    **claims_options) -> list[Path]:
    """`topkscope tables`: the tables of loaded runs (those under the command's paths, as
    `topkscope claims` reads them) into out_dir. The claims are tabulated from the runs as
    `topkscope claims` tabulates them, or read from a profile's claims.csv when the paths are
    one results root that `topkscope figures` wrote; the selection times come from the
    bench/selection.csv of a results root given. The run tables use the complete and failed
    runs (an unfinished one counts in the claims alone, as an unfinished seed)."""
    from topkscope.claims import build
    from topkscope.publish.report import profile_root

    paths = [Path(p) for p in paths]
    root = profile_root(paths)
    claims = pd.read_csv(root / "claims.csv") if root is not None else \
        build(runs, roots=paths, **claims_options)
    benches = [pd.read_csv(p / "bench" / "selection.csv") for p in paths
               if (p / "bench" / "selection.csv").is_file()]
    done = [r for r in runs if r.manifest.get("status") in ("complete", "failed")]
    profiles = sorted({str(r.manifest.get("profile")) for r in done
                       if r.manifest.get("profile")})
    convergence = [r for r in done if not r.eval.empty]
    return write_all(out_dir, "/".join(profiles) or None, distribution_runs_of(done),
                     convergence, claims, pd.concat(benches, ignore_index=True)
                     if benches else None)
