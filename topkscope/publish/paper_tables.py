"""Tables for papers: each table as CSV (every value at full precision, columns named as in the
results, counts as whole numbers) and as a LaTeX table a paper can \\input: readable headers
with their units, a fixed number of decimals per column, conditions, methods and networks in
the words people write them (topkscope.condition.describe, names.sparsifier_name,
perf.networks.display_name), every table on its pages in a one-column and in a two-column
class. One public function builds each table's frame and one writes each .tex; `write_all`
writes them all, `write_for_paths` (behind `topkscope tables`) for any runs or a committed
claims table.

    write_all(out_dir, profile, distribution_runs, convergence_runs, claims, bench)

Per question, from the runs (one row per experiment: two experiments of one model are never
pooled, and the heading names each with its workers and training condition):

    contraction  δ = ‖u − TopK(u)‖²/‖u‖² of whole-model u against 1 − k/d, (1 − k/d)² and the
                 Gaussian value, per experiment, condition and the density the recorder
                 evaluated at: medians over the recorded (step, worker) rows and the share of
                 rows meeting each claim's criterion
    normality    per experiment, method and condition: median skew, excess kurtosis,
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

and from the claims table (a DataFrame with the columns of results/claims.csv, of any schema:
topkscope.claims.migrate), one view per table the registry presents claims in
(Presentation.table; a row's claim is its claim_key, never read from the claim's name):

    claims-distribution  model × condition: each claim of the distribution table (its
                         Presentation.column): the verdict and the share of units meeting it
    claims-counts        model × condition × selector: each claim of the counts table
    claims-convergence   model × method × condition: the difference to Top-k with its 95 %
                         interval, seeds, traffic relative to Top-k, each claim's verdict
    claims-outer         the outer-loop trainings each against its reference (DiLoCo, per-step
                         Top-k, the Nesterov outer step): difference, seeds, bytes, verdict
    claims-outer-shares  the pseudo-gradient's own claims per model and condition
    claims-predictions   the predicted speed-ups at P = 16: per model, method, training
                         condition and network, each baseline's verdict and break-even time
    claims               every row but the speed-ups in one line (appendix), with
                         claims-evidence (each row's cause and evidence, numbered alike) and
                         claims-rules

Every table is one or more `table*` floats of the full text width (no longtable: it fails in
a two-column class): a table longer than a page (its rows as they wrap, estimated) continues
in further floats under the caption's number, the head and the model heading repeated, each
on a page of its own. Text columns wrap (tabularx X columns share what the number columns
leave), number columns are as wide as their widest cell. Labels carry the profile
(`tab:claims-distribution-quick`), so two profiles' tables can be \\input in one paper. The
.tex files need \\usepackage{booktabs,tabularx} (PACKAGES; texlive-latex-base and
-recommended) and compile with pdflatex in \\documentclass{article} and
\\documentclass[twocolumn]{article}.
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
PACKAGES = ("booktabs", "tabularx")
# what one float may hold, in footnote-size lines (rows as they wrap, headings, the caption):
# the page holds about 57 (\textheight 550pt at a 9.5pt baseline); the rest is kept for rules,
# the spaces between groups and the estimate's error
PAGE_LINES = 48
# a footnote-size character's width (cmr8), a little more than measured: a digit 4.25pt (a
# number column's width), a character of text 3.82pt on average (a text column's lines)
CHAR_PT = 4.4
TEXT_CHAR_PT = 3.9
CAPTION_CHAR_PT = 5.0  # a caption's character (cmr10, 12pt lines), a little more than measured
LINE_WIDTH_PT = 345.0  # \linewidth of a one-column article (10pt); a two-column one's is wider
TABCOLSEP_PT = 3.0
CAPTION_SKIP_PT = 6   # between a caption and the table's top rule
_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                  "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                  "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}",
                  "|": r"\textbar{}",
                  # the signs the claims' and the conditions' words use, as math
                  "−": "$-$", "×": r"$\times$", "ρ": r"$\rho$", "δ": r"$\delta$",
                  "β": r"$\beta$", "φ": r"$\phi$", "μ": r"$\mu$", "σ": r"$\sigma$",
                  "α": r"$\alpha$", "η": r"$\eta$", "≠": r"$\ne$", "√": r"$\surd$",
                  "≤": r"$\le$", "≥": r"$\ge$",
                  "²": r"$^2$", "±": r"$\pm$", "∞": r"$\infty$", "·": r"$\cdot$",
                  "→": r"$\to$", "≈": r"$\approx$", "–": r"\textendash{}",
                  "—": r"\textemdash{}", "‖": r"$\|$", "∩": r"$\cap$", "…": r"\dots{}"}
GLOBAL = "__global__"
VERDICT_SHORT = {"holds": "holds", "fails": "fails", "mixed": "mixed",
                 "inconclusive": "incon.", "insufficient-data": "too few"}
VERDICT_NOTE = ("incon.: inconclusive, too few: insufficient data, by the rules of the claims "
                "table")


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


def label(name: str, profile: str | None) -> str:
    """The \\label of a table (after 'tab:'): its name and the profile, so two profiles'
    tables can be \\input in one paper ('claims-distribution-quick'; 'quick/standard' ->
    'quick-standard'); without a profile the name alone."""
    if not profile:
        return name
    return f"{name}-{re.sub(r'[^A-Za-z0-9]+', '-', str(profile)).strip('-')}"


def _counted(n, word: str) -> str:
    """'1 run', '5 runs' (a count as a whole number)."""
    n = int(n)
    return f"{n} {word}" + ("" if n == 1 else "s")


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
    """Text that may break after '=', ',', '[' and '_' (an identifier is one long word)."""
    return text(value).replace("=", r"=\allowbreak{}").replace("[", r"[\allowbreak{}").replace(
        ",", r",\allowbreak{}").replace(r"\_", r"\_\allowbreak{}")


def words(value) -> str:
    """Text in words (a condition said by topkscope.condition.describe), escaped; a word too
    long for a narrow column (an older table's condition key as written, "warmup=none;")
    may break after '=', ',', '[' and '_'."""
    if _missing(value) or value == "":
        return "--"
    return " ".join(breakable(w) if len(w) > 8 else latex_escape(w)
                    for w in str(value).split(" "))


def _shown_length(cell: str) -> int:
    """How many characters a LaTeX cell shows, roughly (a command or a math sign as one)."""
    shown = re.sub(r"\\[a-zA-Z]+\*?(\{\})?|\\.", "x", cell)
    return len(re.sub(r"[{}$]", "", shown))


@dataclass(frozen=True)
class Column:
    """One column of a .tex table: the frame's `key`, its LaTeX `header` (units included; in a
    number column '\\n' separates the lines of a stacked header), how a value shows (`cell`:
    value -> LaTeX; `row`: the whole row -> LaTeX, for cells made of several columns) and its
    kind: `width` (a weight) makes a wrapping text column, which shares what the others leave
    of the line by weight; else it is as wide as its widest cell (a number column),
    right-aligned when `right`."""

    key: str
    header: str
    cell: Callable = text
    right: bool = False
    width: float | None = None
    row: Callable | None = None

    def show(self, row) -> str:
        return self.row(row) if self.row is not None else self.cell(row[self.key])

    @property
    def wraps(self) -> bool:
        return self.width is not None

    def head(self) -> str:
        """The header cell: a stacked header of a number column as a one-column tabular."""
        lines = self.header.split("\n")
        if self.wraps or len(lines) == 1:
            return " ".join(lines)
        side = "r" if self.right else "l"
        stacked = r" \\ \relax ".join(lines)  # \relax: a line may open with "["
        return rf"\begin{{tabular}}[b]{{@{{}}{side}@{{}}}}{stacked}\end{{tabular}}"

    def natural_pt(self, cells: Iterable[str]) -> float:
        """The width of a number column, roughly: its widest cell or header line."""
        widest = max([_shown_length(c) for c in cells] + [_shown_length(h) for h in
                                                          self.header.split("\n")])
        return widest * CHAR_PT + 2 * TABCOLSEP_PT


def _lines(cell: str, width_pt: float) -> int:
    """How many lines `cell` takes in a text column `width_pt` wide, roughly (words wrap: a
    tenth more than the characters alone)."""
    per_line = max(1, int((width_pt - 2 * TABCOLSEP_PT) / TEXT_CHAR_PT))
    return max(1, math.ceil(1.1 * _shown_length(cell) / per_line))


def _longest_word(cell: str) -> int:
    """The characters of the longest piece of a cell a line cannot break (between spaces,
    allowed breaks and after hyphens)."""
    pieces = re.split(r"\s+|\\allowbreak\{\}|(?<=-)", cell)
    return max((_shown_length(p) for p in pieces), default=0)


def _widths(columns: Sequence[Column], rows: Sequence[list[str]]) -> list[float]:
    """Each column's width in points, roughly: a number column its widest cell; the text
    columns share what the number columns leave of LINE_WIDTH_PT by weight, each at least as
    wide as its longest word (the others give way)."""
    shown = [[r[i] for r in rows] for i in range(len(columns))]
    natural = {i: c.natural_pt(shown[i]) for i, c in enumerate(columns) if not c.wraps}
    need = {i: max(_longest_word(x) for x in [*shown[i], c.header]) * CHAR_PT
            + 2 * TABCOLSEP_PT for i, c in enumerate(columns) if c.wraps}
    left = LINE_WIDTH_PT - sum(natural.values())
    floor: dict[int, float] = {}
    while len(floor) < len(need):
        free = [i for i in need if i not in floor]
        room = max(left - sum(floor.values()), 0.0)
        weights = sum(columns[i].width for i in free)
        share = {i: room * columns[i].width / weights for i in free}
        short = [i for i in free if share[i] < need[i]]
        if not short:
            floor.update(share)
            break
        floor.update({i: need[i] for i in short})
    return [natural[i] if i in natural else floor[i] for i in range(len(columns))]


def _spec(columns: Sequence[Column], widths: Sequence[float]) -> str:
    """tabularx's column spec: number columns r/l, text columns X with \\hsize in proportion
    to their `widths` (the factors add up to the number of X columns, as tabularx needs)."""
    wrapping = [w for c, w in zip(columns, widths) if c.wraps]
    total = sum(wrapping) or 1.0
    # rounded, the last one takes the rest (TeX's products of factor and \\hsize may still
    # leave the rows a few sp short of the line: \\extracolsep{\\fill} takes them up, else
    # "Underfull \\hbox in alignment")
    factors = [round(w * len(wrapping) / total, 3) for w in wrapping]
    if factors:
        factors[-1] = round(len(wrapping) - sum(factors[:-1]), 3)
    parts, i = [], 0
    for c in columns:
        if not c.wraps:
            parts.append("r" if c.right else "l")
            continue
        side = r"\raggedleft" if c.right else r"\raggedright"
        parts.append(rf">{{{side}\arraybackslash\hsize={factors[i]:.3f}\hsize}}X")
        i += 1
    return r"@{\extracolsep{\fill}}" + "".join(parts) + "@{}"


def _needs() -> str:
    return f"% needs \\usepackage{{{','.join(PACKAGES)}}}"


def _heading(n: int, words: str) -> str:
    """A row spanning the table (the model and what its rows share), wrapping at the width."""
    return (rf"\multicolumn{{{n}}}{{@{{}}>{{\raggedright\arraybackslash}}p{{\linewidth}}@{{}}}}"
            rf"{{\emph{{{words}}}}} \\")


def _float(spec: str, head: str, caption_line: str, body: list[str], size: str) -> list[str]:
    return [r"\begin{table*}[tbp]", r"\centering", size,
            rf"\setlength{{\abovecaptionskip}}{{0pt}}"
            rf"\setlength{{\belowcaptionskip}}{{{CAPTION_SKIP_PT}pt}}",
            caption_line, rf"\begin{{tabularx}}{{\linewidth}}{{{spec}}}", r"\toprule", head,
            r"\midrule", *body, r"\bottomrule", r"\end{tabularx}", r"\end{table*}"]


def to_latex(frame: pd.DataFrame, columns: Sequence[Column], caption_text: str, name: str,
             profile: str | None = None, group: Callable | None = None, notes: str = "",
             size: str = r"\footnotesize\setlength{\tabcolsep}{3pt}") -> str:
    """The table of frame's rows with these columns as `table*` floats of the full width: one
    float, or, when its rows (as they wrap, estimated) would not fit a page, as many as they
    need, each continuing under the caption's number ("(continued)") with the head and, when a
    group goes on, its heading repeated, each after a \\clearpage. group(row) -> LaTeX: a row
    spanning the table before each run of rows with the same group (the model, say), instead of
    repeating it on every row. Labelled tab:<name>-<profile> (label())."""
    cells = [[c.show(row) for c in columns] for _, row in frame.iterrows()]
    groups = [group(row) for _, row in frame.iterrows()] if group is not None else \
        [None] * len(cells)
    widths = _widths(columns, cells)
    heads = [c.head() for c in columns]
    head = " & ".join(heads) + r" \\"
    head_lines = max(1 + c.header.count("\n") if not c.wraps else _lines(c.header, w)
                     for c, w in zip(columns, widths))
    cap = (rf"\caption{{{caption_text}{(' ' + notes) if notes else ''}}}"
           rf"\label{{tab:{label(name, profile)}}}")
    line_chars = LINE_WIDTH_PT / TEXT_CHAR_PT
    chunks: list[list[str]] = [[]]
    # the caption is set in the text's size (LaTeX's \caption says \normalsize): its lines
    # in footnote-size lines
    caption_lines = math.ceil(_shown_length(cap) * CAPTION_CHAR_PT / LINE_WIDTH_PT) * 12 / 9.5
    used = head_lines + caption_lines + 1
    last = object()
    for row_cells, grp in zip(cells, groups):
        height = max(_lines(cell, w) if c.wraps else 1
                     for c, cell, w in zip(columns, row_cells, widths))
        starts = grp is not None and grp != last
        heading = math.ceil(_shown_length(grp) / line_chars) + 0.5 if grp is not None else 0
        if used + height + (heading if starts else 0) > PAGE_LINES and chunks[-1]:
            chunks.append([])
            used = head_lines + 2
            if grp is not None and not starts:  # the group goes on: say so
                chunks[-1].append(_heading(len(columns), f"{grp} (continued)"))
                used += heading
        if starts:
            if chunks[-1]:
                chunks[-1].append(r"\addlinespace")
            chunks[-1].append(_heading(len(columns), grp))
            used += heading
            last = grp
        chunks[-1].append(" & ".join(row_cells) + r" \\")
        used += height
    spec = _spec(columns, widths)
    lines = [_needs()]
    for i, body in enumerate(chunks):
        if i == 0:
            lines += _float(spec, head, cap, body, size)
        else:
            lines += [r"\clearpage", *_float(spec, head, r"\addtocounter{table}{-1}"
                                             r"\caption[]{(continued)}", body, size)]
    return "\n".join(lines + [""])


def compact(frame: pd.DataFrame, columns: Sequence[Column], caption_text: str, name: str,
            notes: str, profile: str | None = None, group: Callable | None = None) -> str:
    """to_latex of a view: the model (`group`, default: the row's model) as a row spanning the
    table."""
    return to_latex(frame, columns, caption_text, name, profile, notes=notes,
                    group=group or (lambda r: _shown_model(r["model"])))


def write_table(frame: pd.DataFrame, out_dir: str | Path, name: str, tex: str
                ) -> tuple[Path, Path]:
    """out_dir/name.csv (frame, its counts as whole numbers) and out_dir/name.tex (tex), each
    written atomically; returns both paths."""
    from topkscope.claims.row import with_count_types

    if not name or not all(ch.isalnum() or ch in "-_" for ch in name):
        raise ValueError(f"table name {name!r} must be letters, digits, '-' or '_'")
    out = Path(out_dir)
    shown = with_count_types(frame.copy())
    csv = atomic_write(out / f"{name}.csv", lambda tmp: shown.to_csv(tmp, index=False))
    return csv, write_bytes_atomic(out / f"{name}.tex", tex.encode())


# ---------------------------------------------------------------------------- names
def _model(run) -> str:
    m = run.manifest
    return str(m.get("model") or m.get("experiment") or run.path.name)


def _experiment(run) -> str:
    return str(run.manifest.get("experiment") or run.path.parent.name)


def _world_size(run):
    size = run.manifest.get("world_size")
    return int(size) if isinstance(size, (int, float)) and not _missing(size) else math.nan


def _shown_model(name) -> str:
    from topkscope.plots.titles import model_name

    return text(model_name(name))


def _shown_method(name) -> str:
    """A method's display name (several: comma-separated)."""
    from topkscope.plots.titles import sparsifier_name

    return text(", ".join(sparsifier_name(x) for x in str(name).split(",")))


def _where(model, experiment, world_size) -> str:
    """'FNN-3, fnn3-mnist (P = 2)': a model and the experiment and workers of its runs."""
    where = _shown_model(model)
    if isinstance(experiment, str) and experiment:
        where += f", {text(experiment)}"
        if not _missing(world_size):
            where += f" ($P = {int(world_size)}$)"
    return where


def _trained(row) -> str:
    """A run table's heading: the model, its experiment and workers, the training condition
    in words (its `condition_text`)."""
    said = row["condition_text"]
    return _where(row["model"], row["experiment"], row["world_size"]) + (
        f"; training: {latex_escape(said)}" if isinstance(said, str) and said else "")


def _rho(value) -> str:
    from topkscope.condition import density_text

    return "--" if _missing(value) else latex_escape(density_text(value))


# ---------------------------------------------------------------- contraction
RUN_KEYS = ["experiment", "world_size", "model", "condition", "condition_text"]


def _global_u(runs: Iterable) -> pd.DataFrame:
    """Whole-model u rows of every run with its experiment, workers, model and each step's
    condition (the claims' unit_conditions: warm-up steps are a condition of their own) as
    its key and in words (without the experiment and workers, which have their columns)."""
    from topkscope.analysis.units import unit_conditions
    from topkscope.condition import describe

    frames = []
    for run in runs:
        s = run.stats
        if s.empty:
            continue
        u = s[(s["layer"] == GLOBAL) & (s["kind"] == "u")]
        steps = sorted({int(v) for v in u["step"]})
        found = dict(zip(steps, unit_conditions(run, steps)))
        conds = [found[int(v)] for v in u["step"]]
        frames.append(u.assign(experiment=_experiment(run), world_size=_world_size(run),
                               model=_model(run), condition=[c.key() for c in conds],
                               condition_text=[describe(c) for c in conds]))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def contraction_table(runs: Sequence) -> pd.DataFrame:
    """Per experiment (its workers), model, condition and recorder density: medians of
    delta_emp and the three reference values over the recorded (step, worker) rows of
    whole-model u, and the share of rows meeting each claim's criterion
    (topkscope.analysis.criteria.contraction_shares). Two experiments are never pooled."""
    from topkscope.analysis.criteria import contraction_shares

    u = _global_u(runs)
    by = [*RUN_KEYS, "density"]
    cols = [*by, "records", "delta_emp", "classic_bound", "paper_bound", "gaussian_ratio",
            "share_below_classic", "share_at_most_paper", "share_at_most_gaussian"]
    if u.empty:
        return pd.DataFrame(columns=cols)
    u = u.assign(world_size=u["world_size"].fillna(-1))  # groupby keeps a missing size
    medians = (u.groupby(by, sort=True)[["topk_ratio", "classic_bound", "paper_bound",
                                         "gaussian_ratio"]].median()
               .rename(columns={"topk_ratio": "delta_emp"}).reset_index())
    out = contraction_shares(u, by).merge(medians, on=by)[cols]
    return out.assign(world_size=out["world_size"].where(out["world_size"] >= 0))


def contraction_latex(frame: pd.DataFrame, caption_text: str, profile: str | None = None
                      ) -> str:
    delta = fixed(4)
    share = fixed(0, 100)
    columns = [
        Column("density", "Recorder\n$\\rho$", _rho, right=True),
        Column("records", "Rows", whole, right=True),
        Column("delta_emp", r"$\delta$", delta, right=True),
        Column("classic_bound", r"$1-\frac{k}{d}$", delta, right=True),
        Column("paper_bound", r"$(1-\frac{k}{d})^2$", delta, right=True),
        Column("gaussian_ratio", "Gauss.", delta, right=True),
        Column("share_at_most_paper", "\\%\n$\\le$ paper", share, right=True),
        Column("share_at_most_gaussian", "\\%\n$\\le$ Gauss.", share, right=True),
    ]
    return compact(frame, columns, caption_text, "contraction", profile=profile,
                   group=_trained, notes=(
                       r"Recorder $\rho$: the density the recorder evaluated Top-$k$ at (the "
                       r"training's is in the heading). $\delta$ and the references: medians "
                       r"over the recorded (step, worker) rows of whole-model $u$; the last two "
                       r"columns: \% of those rows at most $(1-k/d)^2$ and at most the Gaussian "
                       r"value $1-\rho-2t\phi(t)$, $t = \Phi^{-1}(1-\rho/2)$."))


# ---------------------------------------------------------------- normality
def normality_table(runs: Sequence) -> pd.DataFrame:
    """Per experiment, model, method and condition: over the snapshots of u (rank 0) of the
    runs, the median skew, excess kurtosis, KS D and Q-Q r of the normality battery, the
    median shape β of the generalised normal fitted to u, and the family fitted best by BIC
    (on u, x) at the most snapshots, with that share (topkscope.analysis.snapshots.analyze_run:
    a run the figures driver analysed is not analysed again)."""
    from topkscope.analysis.fits import best
    from topkscope.analysis.snapshots import analyze_run
    from topkscope.condition import describe, run_condition

    cols = [*RUN_KEYS, "sparsifier", "snapshots", "skew", "excess_kurtosis", "ks_D", "qq_r",
            "gennorm_beta", "best_family", "best_family_share"]
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
        cond = run_condition(m)
        rows.append({"experiment": _experiment(run), "world_size": _world_size(run),
                     "model": _model(run), "condition": cond.training_key(),
                     "condition_text": describe(cond), "sparsifier": m.get("sparsifier"),
                     "snapshots": len(battery),
                     **{k: float(battery[k].median()) if k in battery else math.nan
                        for k in ("skew", "excess_kurtosis", "ks_D", "qq_r")},
                     "gennorm_beta": float(beta.median()) if len(beta) else math.nan,
                     "best_family": top.index[0] if len(top) else None,
                     "best_family_share": float(top.iloc[0] / len(winners)) if len(top)
                     else math.nan})
    if not rows:
        return pd.DataFrame(columns=cols)
    frame = pd.DataFrame(rows, columns=cols)
    return frame.sort_values(["experiment", "model", "sparsifier", "condition"]
                             ).reset_index(drop=True)


FAMILY_NAMES = {"normal": "normal", "laplace": "Laplace", "t": "Student-t",
                "gennorm": "gen. normal"}


def normality_latex(frame: pd.DataFrame, caption_text: str, profile: str | None = None) -> str:
    def family(row) -> str:
        name = row["best_family"]
        if _missing(name):
            return "--"
        return (f"{text(FAMILY_NAMES.get(str(name), str(name)))} "
                f"({fixed(0, 100)(row['best_family_share'])}\\%)")

    def where(row) -> str:
        return _where(row["model"], row.get("experiment"), row.get("world_size", math.nan))

    columns = [
        Column("sparsifier", "Method", _shown_method, width=1.0),
        Column("condition_text", "Condition", width=1.4),
        Column("snapshots", "Snap.", whole, right=True),
        Column("skew", "Skew", fixed(3), right=True),
        Column("excess_kurtosis", "Ex.\\\nkurt.", fixed(2), right=True),
        Column("ks_D", "KS $D$", fixed(3), right=True),
        Column("qq_r", "Q-Q $r$", fixed(4), right=True),
        Column("gennorm_beta", r"$\beta$", fixed(2), right=True),
        Column("best_family", "Best fit (BIC)", row=family, width=1.0),
    ]
    return compact(frame, columns, caption_text, "normality", profile=profile, group=where,
                   notes=(
        r"Medians over the snapshots of whole-model $u$ (worker 0): skew and excess kurtosis "
        r"(0 for a normal), the Kolmogorov-Smirnov distance $D$ to the fitted normal and the "
        r"normal Q-Q correlation $r$ (effect sizes: $D = 0$, $r = 1$ for a normal), the shape "
        r"$\beta$ of the fitted generalised normal (2: normal, 1: Laplace), and the family "
        r"with the lowest BIC at most snapshots (in \% of them)."))


# ---------------------------------------------------------------- selectors
def _selector_names(runs: Sequence) -> dict[str, str]:
    """Column prefix -> registered name of the selectors the runs' recorders evaluated
    (gaussiank_2019 -> gaussiank-2019), and of every registered sparsifier."""
    from topkscope.schema import column_prefix
    from topkscope.sparsify import available

    names = list(available())
    for run in runs:
        names += list((run.manifest.get("recorder") or {}).get("sparsifiers") or [])
    return {column_prefix(n): n for n in names}


def selectors_table(runs: Sequence) -> pd.DataFrame:
    """Per experiment, model, condition, approximate selector (its registered name) and
    recorder density: median selected/k, share of records inside the band [2k/3, 4k/3] (the
    claims' criteria.in_count_band), median recall of the exact top-k set."""
    from topkscope.analysis.criteria import in_count_band

    u = _global_u(runs)
    cols = [*RUN_KEYS, "selector", "density", "records", "median_selected_over_k",
            "inside_band", "median_recall"]
    if u.empty:
        return pd.DataFrame(columns=cols)
    registered = _selector_names(runs)
    prefixes = sorted(c[: -len("_count")] for c in u.columns
                      if c.endswith("_count") and f"{c[:-len('_count')]}_recall" in u.columns)
    u = u.assign(world_size=u["world_size"].fillna(-1))
    rows = []
    for s in prefixes:
        have = u.dropna(subset=[f"{s}_count"])
        for key, g in have.groupby([*RUN_KEYS, "density"], sort=True):
            ratio = g[f"{s}_count"].astype(float) / g["k"]
            rows.append({**dict(zip([*RUN_KEYS, "density"], key)),
                         "selector": registered.get(s, s), "records": len(g),
                         "median_selected_over_k": ratio.median(),
                         "inside_band": in_count_band(g[f"{s}_count"], g["k"]).mean(),
                         "median_recall": g[f"{s}_recall"].median()})
    frame = pd.DataFrame(rows, columns=cols)
    frame = frame.assign(world_size=frame["world_size"].where(frame["world_size"] >= 0))
    return frame.sort_values([*RUN_KEYS, "density", "selector"]).reset_index(drop=True)


def selectors_latex(frame: pd.DataFrame, caption_text: str, profile: str | None = None) -> str:
    columns = [
        Column("density", "Recorder\n$\\rho$", _rho, right=True),
        Column("selector", "Selector", _shown_method, width=1.0),
        Column("records", "Rows", whole, right=True),
        Column("median_selected_over_k", "Selected$/k$", fixed(3), right=True),
        Column("inside_band", "\\% in\n$[\\frac{2k}{3}, \\frac{4k}{3}]$", fixed(0, 100),
               right=True),
        Column("median_recall", "Recall", fixed(3), right=True),
    ]
    return compact(frame, columns, caption_text, "selectors", profile=profile, group=_trained,
                   notes=(
                       r"Each selector run by the recorder on the same $u$ as training "
                       r"(whole model) at the density in the first column (the training's is "
                       r"in the heading): the median of its count over $k$ and of the share of "
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
    """Per experiment (its workers), sparsifier, condition (density warm-up, outer loop,
    deviations) and density: the final held-out metric of each seed's run, its mean and a
    95 % Student-t interval (criteria.t_interval; no interval from one seed), the final
    training loss, and the traffic of a run (run_traffic), means over the seeds."""
    from topkscope.analysis.criteria import t_interval
    from topkscope.analysis.seeds import final_metric
    from topkscope.condition import describe, run_condition

    keys = ["experiment", "world_size", "model", "dataset", "sparsifier", "condition",
            "condition_text", "density", "metric_name"]
    cols = [*keys, "n_seeds", "mean", "ci_low", "ci_high", "final_train_loss", "elements",
            "wire_bytes", "payload_bytes"]
    rows = []
    for run in runs:
        final = final_metric(run)
        if final is None:
            continue
        m = run.manifest
        cond = run_condition(m)
        train_loss = run.train["loss"].iloc[-1] if not run.train.empty else float("nan")
        rows.append({"experiment": _experiment(run), "world_size": _world_size(run),
                     "model": m.get("model"), "dataset": m.get("dataset"),
                     "sparsifier": m.get("sparsifier"), "condition": cond.training_key(),
                     "condition_text": describe(cond, density=False) or "--",
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


def convergence_latex(frame: pd.DataFrame, caption_text: str, profile: str | None = None
                      ) -> str:
    def percent(row) -> bool:
        return row["metric_name"] == "accuracy"

    def final(row) -> str:
        return (fixed(2, 100) if percent(row) else fixed(1))(row["mean"])

    def interval(row) -> str:
        show = fixed(2, 100) if percent(row) else fixed(1)
        if _missing(row["ci_low"]):
            return "--"
        return f"[{show(row['ci_low'])}, {show(row['ci_high'])}]"

    def group(row) -> str:
        from topkscope.plots.titles import dataset_name

        name = "accuracy, \\%" if percent(row) else text(row["metric_name"])
        return (f"{_where(row['model'], row['experiment'], row.get('world_size', math.nan))} "
                f"on {text(dataset_name(row['dataset']))}; final {name}")

    elements, bytes_ = (_thousands(frame[c]) for c in ("elements", "wire_bytes"))
    columns = [
        Column("sparsifier", "Method", _shown_method, width=1.0),
        Column("condition_text", "Condition", width=1.3),
        Column("density", r"$\rho$", _rho, right=True),
        Column("n_seeds", "Seeds", whole, right=True),
        Column("mean", "Final", row=final, right=True),
        Column("ci_low", "95\\% CI", row=interval, right=True),
        Column("final_train_loss", "Loss", fixed(3), right=True),
        Column("elements", f"Elem.\n($10^{{{elements}}}$)", fixed(2, 10.0 ** -elements),
               right=True),
        Column("wire_bytes", f"Wire\n({BYTE_UNITS[bytes_]})", fixed(2, 10.0 ** -bytes_),
               right=True),
        Column("payload_bytes", f"Pairs\n({BYTE_UNITS[bytes_]})", fixed(2, 10.0 ** -bytes_),
               right=True),
    ]
    return compact(frame, columns, caption_text, "convergence", profile=profile, group=group,
                   notes=(
        r"Mean over seeds of the final held-out metric with its 95\% Student-$t$ interval "
        r"(none from one seed), the final training loss, and what one run sent over all its "
        r"steps and workers: elements, wire bytes (each worker's 8-byte count and its pairs "
        r"padded to the largest count of the step) and the selected (value, index) pairs' "
        r"bytes; 1 MB = $10^6$ bytes, 1 GB = $10^9$, 1 TB = $10^{12}$. Dense sends every "
        r"element."))


BYTE_UNITS = {6: "MB", 9: "GB", 12: "TB"}


def _thousands(values: pd.Series) -> int:
    """The power of ten (6, 9 or 12) a column of counts is shown in: the smallest that keeps
    its largest value under 10 000 units, so the column stays narrow ('1115.68' in $10^6$,
    a dense run's '7056.00' in $10^9$)."""
    largest = pd.to_numeric(values, errors="coerce").abs().max()
    for power in (6, 9):
        if not largest >= 1e4 * 10.0 ** power:
            return power
    return 12


# ---------------------------------------------------------------- selection speed
def speed_table(bench: pd.DataFrame, distribution: str = "normal") -> pd.DataFrame:
    """Median selection time and its ratio to torch.topk (measured in the same run) per
    method, d and density, on `distribution` vectors."""
    cols = ["method", "d", "density", "median_ms", "ratio_to_topk"]
    if bench.empty:
        return pd.DataFrame(columns=cols)
    b = bench[bench["distribution"] == distribution] if "distribution" in bench else bench
    return b[cols].sort_values(["density", "method", "d"]).reset_index(drop=True)


def speed_latex(frame: pd.DataFrame, caption_text: str, profile: str | None = None) -> str:
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

    columns = [Column("method", "Method", _shown_method, width=1.0)]
    columns += [Column(f"median_ms_{d}", f"$d={power(d)[1:-1]}$", row=at(d), right=True)
                for d in sizes]
    return compact(rows, columns, caption_text, "speed", profile=profile,
                   group=lambda r: f"$\\rho = {float(r['density']):g}$", notes=(
                        r"Median time of one selection in ms, and in parentheses its ratio "
                        r"to torch.topk measured in the same run (below 1: faster)."))


# ------------------------------------------------------------------ the claims' views
CURRENT = "topkscope_current_schema"  # a frame's attrs flag: _current made it


def _current(claims: pd.DataFrame) -> pd.DataFrame:
    """The claims table in the current schema (topkscope.claims.migrate.current: an older
    table's rows get their claim_key from their exact claim names), once."""
    from topkscope.claims.migrate import current

    if claims.attrs.get(CURRENT):
        return claims
    table = current(claims)[0]
    table.attrs[CURRENT] = True
    return table


def _rows_in(table: pd.DataFrame, key: str) -> pd.DataFrame:
    """The rows of a current-schema claims table that the registry presents in the findings /
    LaTeX table `key` (publish.findings.split_tables: the rows' registered claims'
    Presentation.table; a check row's is "check")."""
    from topkscope.publish.findings import split_tables

    return split_tables(table).get(key, table.iloc[0:0])


def _presented(rows: pd.DataFrame, key: str, section: str | None = None) -> list:
    """The registered claims of table `key` (and `section`) that have rows, in registry
    order."""
    from topkscope.claims.registry import registered

    keys = set(rows["claim_key"].astype(str))
    return [c for c in registered(section=section) if c.show.table == key and c.name in keys]


def _str(value) -> str:
    return value if isinstance(value, str) else ""


def _condition_words(row) -> str:
    """A claims row's condition in words with its experiment and workers
    (publish.findings.condition_text; an older row's as written)."""
    from topkscope.publish.findings import condition_text

    return condition_text(row, experiment=True)


def _group_key(row, *extra: str) -> tuple:
    """The rows one line of a view shows: the same model, experiment, workers and condition
    (and the `extra` fields): two experiments are never pooled."""
    size = getattr(row, "world_size", math.nan)
    return (str(row.model), _str(getattr(row, "experiment", "")),
            "" if _missing(size) else int(size), str(row.condition),
            *(str(getattr(row, e)) for e in extra))


def _identity(row) -> dict:
    size = getattr(row, "world_size", math.nan)
    return {"model": row.model, "experiment": _str(getattr(row, "experiment", "")),
            "world_size": math.nan if _missing(size) else int(size),
            "condition": row.condition, "condition_text": _condition_words(row)}


def _runs_behind(rows: list) -> int:
    """The distinct runs behind rows (their run_ids), else the largest n_runs."""
    ids = {i for r in rows for i in _str(getattr(r, "run_ids", "")).split(",") if i}
    if ids:
        return len(ids)
    counts = [float(r.n_runs) for r in rows if not _missing(r.n_runs)]
    return int(max(counts, default=0))


def _share_fields(prefix: str, row) -> dict:
    if row is None:
        return {f"{prefix}_{f}": math.nan for f in ("fraction", "fraction_low",
                                                    "fraction_high")} | {
            f"{prefix}_verdict": None}
    return {f"{prefix}_fraction": row.fraction, f"{prefix}_fraction_low": row.fraction_low,
            f"{prefix}_fraction_high": row.fraction_high, f"{prefix}_verdict": row.verdict}


def _share_view(rows: pd.DataFrame, claims: list, *extra: str) -> pd.DataFrame:
    """One line per (model, experiment, workers, condition, *extra) of `rows`, per claim the
    share of units meeting it with its interval and the verdict."""
    groups: dict[tuple, list] = {}
    for row in rows.itertuples(index=False):
        groups.setdefault(_group_key(row, *extra), []).append(row)
    out = []
    for found in groups.values():
        by = {r.claim_key: r for r in found}
        line = {**_identity(found[0]), **{e: getattr(found[0], e) for e in extra},
                "runs": _runs_behind(found)}
        for c in claims:
            line.update(_share_fields(c.name, by.get(c.name)))
        gains = [r.energy_gain for r in found if not _missing(r.energy_gain)]
        line["energy_gain"] = gains[0] if gains else math.nan
        out.append(line)
    return pd.DataFrame(out)


def _percent(x) -> str:
    x = 100 * float(x)
    return (f"{x:.1f}" if 0 < x < 1 else f"{x:.0f}") + r"\%"


def _share_cell(prefix: str) -> Callable:
    """'holds (100\\%)': the verdict and the share of units meeting the claim."""
    def cell(row) -> str:
        verdict = row[f"{prefix}_verdict"]
        if _missing(verdict):
            return "--"
        share = row[f"{prefix}_fraction"]
        return _verdict(verdict) + ("" if _missing(share) else f" ({_percent(share)})")
    return cell


def _verdict(value) -> str:
    return "--" if _missing(value) else VERDICT_SHORT.get(str(value), text(value))


def _model_and_condition(row) -> str:
    """A view's heading: the model and the condition its rows share, in words (an older
    table's condition as written)."""
    return f"{_shown_model(row['model'])}: {words(row['condition_text'])}"


def _gain(value) -> str:
    return "--" if _missing(value) else f"{float(value):.3g}" + r"$\cdot k/d$"


def _claim_columns(claims: list, width: float = 1.0) -> list[Column]:
    return [Column(f"{c.name}_verdict", latex_escape(c.show.column or c.name),
                   row=_share_cell(c.name), width=width) for c in claims]


SHARE_NOTE = (r"Each cell: the verdict and the \% of units (recorded steps, or snapshots of "
              r"whole-model $u$) meeting the claim's criterion (" + VERDICT_NOTE + ").")


def claims_distribution_table(claims: pd.DataFrame) -> pd.DataFrame:
    """One line per model, experiment and condition: per claim the registry presents in the
    distribution table (in its order) the share of units meeting it (`<claim>_fraction`, with
    `_fraction_low`, `_fraction_high`) and the verdict (`<claim>_verdict`); the runs behind
    the line, Top-k's kept energy over a random k-subset's (energy_gain)."""
    table = _current(claims)
    rows = _rows_in(table, "distribution")
    if rows.empty:
        return pd.DataFrame(columns=[*RUN_KEYS, "runs"])
    return _share_view(rows, _presented(rows, "distribution"))


def _with_gain(frame: pd.DataFrame, columns: list[Column]) -> list[Column]:
    if "energy_gain" in frame and frame["energy_gain"].notna().any():
        columns.append(Column("energy_gain", "Top-$k$\nkeeps", _gain, right=True))
    return columns


def claims_distribution_latex(frame: pd.DataFrame, caption_text: str,
                              profile: str | None = None) -> str:
    from topkscope.claims.registry import get_claim

    claims = [get_claim(c[: -len("_verdict")]) for c in frame if c.endswith("_verdict")]
    columns = [Column("condition_text", "Condition", words, width=2.2),
               *_claim_columns([c for c in claims if c is not None])]
    return compact(frame, _with_gain(frame, columns), caption_text, "claims-distribution",
                   profile=profile, notes=SHARE_NOTE + (
                       r" Top-$k$ keeps: $(1-\delta)/(k/d)$, how many times the share of "
                       r"$\|u\|^2$ a random $k$-subset keeps." if "energy_gain" in frame
                       and frame["energy_gain"].notna().any() else ""))


def claims_counts_table(claims: pd.DataFrame) -> pd.DataFrame:
    """One line per model, experiment, condition and selector: per claim of the counts table
    named per method (the selector's count on Top-k's u, in its own training) the share in
    [2k/3, 4k/3], the verdict and the median count over k (`<claim>_median_over_k`); the
    claims of one condition (the tail at Gaussian-k's first threshold) beside each selector."""
    table = _current(claims)
    rows = _rows_in(table, "counts")
    if rows.empty:
        return pd.DataFrame(columns=[*RUN_KEYS, "sparsifier"])
    claims_ = _presented(rows, "counts")
    own = [c for c in claims_ if c.per_method]
    shared = {c.name for c in claims_ if not c.per_method}
    per_condition = {(_group_key(r), r.claim_key): r for r in rows.itertuples(index=False)
                     if r.claim_key in shared}
    groups: dict[tuple, list] = {}
    for row in rows[rows["claim_key"].isin([c.name for c in own])].itertuples(index=False):
        groups.setdefault(_group_key(row, "sparsifier"), []).append(row)
    out = []
    for key, found in groups.items():
        by = {r.claim_key: r for r in found}
        line = {**_identity(found[0]), "sparsifier": found[0].sparsifier,
                "runs": _runs_behind(found)}
        for c in own:
            line.update(_share_fields(c.name, by.get(c.name)))
            line[f"{c.name}_median_over_k"] = by[c.name].count_over_k if c.name in by \
                else math.nan
        for c in [c for c in claims_ if c.name in shared]:
            line.update(_share_fields(c.name, per_condition.get((key[:4], c.name))))
        out.append(line)
    return pd.DataFrame(out)


def claims_counts_latex(frame: pd.DataFrame, caption_text: str,
                        profile: str | None = None) -> str:
    from topkscope.claims.registry import get_claim

    def with_median(name: str) -> Callable:
        share = _share_cell(name)

        def cell(row) -> str:
            median = row.get(f"{name}_median_over_k", math.nan)
            return share(row) + ("" if _missing(median) else
                                 f", median {float(median):.3g}$k$")
        return cell

    claims = [get_claim(c[: -len("_verdict")]) for c in frame if c.endswith("_verdict")]
    columns = [Column("sparsifier", "Selector", _shown_method, width=0.8)]
    columns += [Column(f"{c.name}_verdict", latex_escape(c.show.column or c.name),
                       row=with_median(c.name), width=1.2) for c in claims if c is not None]
    return compact(frame, columns, caption_text, "claims-counts", profile=profile,
                   group=_model_and_condition, notes=(
        r"Each cell: the verdict, the \% of units whose count lies in $[2k/3, 4k/3]$ and the "
        r"median count over $k$ (" + VERDICT_NOTE + r"). On Top-$k$'s $u$: the recorder runs "
        r"the selector on the $u$ Top-$k$ trains on; in its own training: on its own $u$."))


def _difference(row) -> str:
    """'$-$0.52 [$-$1.20, 0.16]': a paired difference and its 95 % interval."""
    show = fixed(2)
    if _missing(row["ci_low"]):
        return show(row["diff_mean"])
    return f"{show(row['diff_mean'])} [{show(row['ci_low'])}, {show(row['ci_high'])}]"


def _seeds(row) -> str:
    failed = row.get("n_failed_seeds", math.nan)
    return whole(row["n_seeds"]) + (f" ({int(failed)} failed)" if not _missing(failed)
                                    and failed > 0 else "")


def _unit(row, against: str) -> str:
    from topkscope.analysis.criteria import diff_unit

    metric = _str(row["metric"]) or "accuracy"
    return ("in points of accuracy" if diff_unit(metric).strip() == "points"
            else f"in \\% of {against}'s {text(metric)}")


PAIRED = ("metric", "diff_unit", "diff_mean", "ci_low", "ci_high", "n_seeds", "n_failed_seeds")


def claims_convergence_table(claims: pd.DataFrame) -> pd.DataFrame:
    """One line per model, experiment, method and condition of the claims the registry
    presents in the convergence table: the paired difference to Top-k (diff_mean, ci_low,
    ci_high in diff_unit), seeds and failed seeds, the elements of the target phase relative
    to Top-k's (traffic_target) and each claim's verdict (`<claim>_verdict`: accuracy,
    traffic)."""
    table = _current(claims)
    rows = _rows_in(table, "convergence")
    if rows.empty:
        return pd.DataFrame(columns=[*RUN_KEYS, "sparsifier", *PAIRED])
    claims_ = _presented(rows, "convergence")
    order = {c.name: i for i, c in enumerate(claims_)}
    groups: dict[tuple, list] = {}
    for row in rows.itertuples(index=False):
        groups.setdefault(_group_key(row, "sparsifier"), []).append(row)
    out = []
    for found in groups.values():
        first = min(found, key=lambda r: order.get(r.claim_key, len(order)))
        line = {**_identity(first), "sparsifier": first.sparsifier,
                **{f: getattr(first, f) for f in PAIRED},
                "traffic_target": first.traffic_target}
        by = {r.claim_key: r for r in found}
        line.update({f"{c.name}_verdict": by[c.name].verdict if c.name in by else None
                     for c in claims_})
        out.append(line)
    return pd.DataFrame(out)


def claims_convergence_latex(frame: pd.DataFrame, caption_text: str,
                             profile: str | None = None) -> str:
    from topkscope.claims.registry import get_claim

    claims = [get_claim(c[: -len("_verdict")]) for c in frame if c.endswith("_verdict")]
    columns = [
        Column("sparsifier", "Method", _shown_method, width=1.0),
        Column("diff_mean", "$\\Delta$ vs Top-$k$\n[95\\% CI]", row=_difference, right=True),
        Column("n_seeds", "Seeds", row=_seeds, right=True),
        Column("traffic_target", "Sent\n($\\times$ Top-$k$)", fixed(2), right=True),
        *[Column(f"{c.name}_verdict", latex_escape(c.show.column or c.name), _verdict,
                 width=0.75) for c in claims if c is not None],
    ]
    return compact(frame, columns, caption_text, "claims-convergence", profile=profile,
                   group=lambda r: f"{_model_and_condition(r)}; $\\Delta$ "
                                   f"{_unit(r, 'Top-$k$')}", notes=(
        r"$\Delta$: the method's final held-out metric minus Top-$k$'s, paired by seed, with its "
        r"95\% interval (accuracy in points, perplexity in \% of Top-$k$'s); sent: the elements "
        r"of the target-density phase relative to Top-$k$'s; verdicts (" + VERDICT_NOTE + "): "
        r"trains as well as Top-$k$ within the margin, and does so at no more traffic."))


def _reference(row) -> str:
    """The training an outer-loop comparison is against: the row's `reference`, or, for a row
    of an older table without it, its registered claim's (topkscope.claims.outer.PAIRS)."""
    from topkscope.claims.outer import PAIRS

    return _str(row.reference) or PAIRS.get(str(row.claim_key), ("", ""))[1]


def claims_outer_table(claims: pd.DataFrame) -> pd.DataFrame:
    """One line per comparison of outer-loop trainings (the registry's outer table, section
    convergence): the training, the reference it is compared with, the paired difference in
    diff_unit with its interval, the seeds, the wire bytes relative to the reference's
    (bytes_ratio) and the verdict."""
    table = _current(claims)
    rows = _rows_in(table, "outer")
    rows = rows[rows["section"] == "convergence"]
    cols = [*RUN_KEYS, "claim", "sparsifier", "reference", *PAIRED, "bytes_ratio", "verdict"]
    out = [{**_identity(r), "claim": r.claim_key, "sparsifier": r.sparsifier,
            "reference": _reference(r), **{f: getattr(r, f) for f in PAIRED},
            "bytes_ratio": r.bytes_ratio, "verdict": r.verdict}
           for r in rows.itertuples(index=False)]
    return pd.DataFrame(out, columns=cols)


def claims_outer_latex(frame: pd.DataFrame, caption_text: str, profile: str | None = None
                       ) -> str:
    columns = [
        Column("sparsifier", "Training", width=0.9),
        Column("reference", "Against", width=1.0),
        Column("diff_mean", "$\\Delta$ vs reference\n[95\\% CI]", row=_difference,
               right=True),
        Column("n_seeds", "Seeds", row=_seeds, right=True),
        Column("bytes_ratio", "Bytes ($\\times$\nreference)", fixed(3), right=True),
        Column("verdict", "Verdict", _verdict, right=False),
    ]
    return compact(frame, columns, caption_text, "claims-outer", profile=profile,
                   group=lambda r: f"{_model_and_condition(r)}; $\\Delta$ "
                                   f"{_unit(r, 'the reference')}", notes=(
        r"Each DiLoCo-style training against its reference on the same seeds: $\Delta$, the "
        r"training's final held-out metric minus the reference's, with its 95\% interval; "
        r"bytes: the wire bytes it sent relative to the reference's; the verdict: trains as "
        r"well as the reference within the margin (" + VERDICT_NOTE + ")."))


def claims_outer_shares_table(claims: pd.DataFrame) -> pd.DataFrame:
    """One line per model, experiment and condition of the pseudo-gradients' own claims (the
    registry's outer table, but its comparisons): per claim the share of recorded exchanges
    meeting it and the verdict."""
    table = _current(claims)
    rows = _rows_in(table, "outer")
    rows = rows[rows["section"] != "convergence"]
    if rows.empty:
        return pd.DataFrame(columns=[*RUN_KEYS, "runs"])
    claims_ = [c for c in _presented(rows, "outer") if c.section != "convergence"]
    return _share_view(rows, claims_).drop(columns="energy_gain")


def claims_outer_shares_latex(frame: pd.DataFrame, caption_text: str,
                              profile: str | None = None) -> str:
    from topkscope.claims.registry import get_claim

    claims = [get_claim(c[: -len("_verdict")]) for c in frame if c.endswith("_verdict")]
    columns = [Column("condition_text", "Condition", words, width=2.2),
               *_claim_columns([c for c in claims if c is not None])]
    return compact(frame, columns, caption_text, "claims-outer-shares", profile=profile,
                   notes=SHARE_NOTE.replace("recorded steps", "recorded exchanges"))


def _baseline_id(name: str) -> str:
    """A baseline's column prefix from its name in the rows ('Dense + WFBP' -> dense_wfbp)."""
    from topkscope.names import spelling
    from topkscope.schema import column_prefix

    return column_prefix(str(spelling("sparsifier", name))).replace(".", "_").replace(" ", "_")


def _counts_from(row) -> str:
    """Where a prediction's selected counts came from, in words: a training condition
    (publish.findings.condition_text; an older row's as written), or '' for k exactly."""
    from topkscope.publish.findings import condition_text

    if not _str(row.training_condition):
        return ""
    typed = _str(row.warmup) or not _missing(row.training_density)
    return condition_text(row) if typed else row.training_condition


def claims_predictions_table(claims: pd.DataFrame) -> pd.DataFrame:
    """The predicted speed-ups (the registry's prediction table) per model, method, training
    condition and network, one group of columns per baseline the rows name (their
    `baselines`): `<baseline>_verdict`, `<baseline>_breakeven_ms` (against Top-k: the most
    its selection may exceed Top-k's; against a dense baseline: the longest selection that
    still beats it, at most 0: never), `<baseline>_speedup_low` / `_high`, and the
    selection_basis."""
    table = _current(claims)
    rows = _rows_in(table, "prediction")
    keys = ["model", "sparsifier", "training_condition", "counts_from", "network"]
    if rows.empty:
        return pd.DataFrame(columns=keys)
    groups: dict[tuple, dict] = {}
    for row in rows.itertuples(index=False):
        line = groups.setdefault((row.model, row.sparsifier, row.training_condition,
                                  row.network), {
            "model": row.model, "sparsifier": row.sparsifier,
            "training_condition": row.training_condition, "counts_from": _counts_from(row),
            "network": row.network, "selection_basis": row.selection_basis})
        for name in _str(row.baselines).split(", "):
            if not name:
                continue
            b = _baseline_id(name)
            topk = b == "topk"
            line[f"{b}_verdict"] = row.verdict
            line[f"{b}_breakeven_ms"] = row.breakeven_topk_ms if topk else row.breakeven_ms
            line[f"{b}_speedup_low"] = row.speedup_topk_low if topk else row.speedup_low
            line[f"{b}_speedup_high"] = row.speedup_topk_high if topk else row.speedup_high
    frame = pd.DataFrame(list(groups.values()))
    # the networks of one model, method and training condition together (the rows come
    # network by network), each group where it first appears
    setting = frame[["model", "sparsifier", "training_condition"]].astype(str).agg("|".join,
                                                                                 axis=1)
    first = {k: i for i, k in reversed(list(enumerate(setting)))}
    return frame.iloc[sorted(range(len(frame)), key=lambda i: (first[setting[i]], i))
                      ].reset_index(drop=True)


def _versus(b: str) -> Callable:
    """A prediction's cell against baseline `b`: the verdict and one number, as
    docs/findings.md says it: judged on break-even, the longest selection that still beats a
    dense baseline ('< 11.8 ms'; 'never': slower even with free selection) or the most it may
    exceed Top-k's ('+0.18 ms'); else the predicted speed-up ('1.49×')."""
    from topkscope.analysis.criteria import signed
    from topkscope.publish.findings import BREAKEVEN

    def cell(row) -> str:
        verdict = row.get(f"{b}_verdict")
        if _missing(verdict):
            return "--"
        if row.get("selection_basis") == BREAKEVEN:
            ms = row.get(f"{b}_breakeven_ms", math.nan)
            number = ("" if _missing(ms) else f"{signed(ms)} ms" if b == "topk"
                      else f"< {ms:.3g} ms" if ms > 0 else "never")
        else:
            low = row.get(f"{b}_speedup_low", math.nan)
            high = row.get(f"{b}_speedup_high", math.nan)
            number = ("" if _missing(low) else f"{low:.3g}×" if f"{low:.3g}" == f"{high:.3g}"
                      else f"{low:.3g}–{high:.3g}×")
        return _verdict(verdict) + (f", {latex_escape(number)}" if number else "")
    return cell


def claims_predictions_latex(frame: pd.DataFrame, caption_text: str,
                             profile: str | None = None) -> str:
    from topkscope.perf.networks import display_name
    from topkscope.plots.titles import sparsifier_name

    baselines = [c[: -len("_verdict")] for c in frame if c.endswith("_verdict")]
    shown = {b: sparsifier_name(b.replace("_", "-")) for b in baselines}
    def group(row) -> str:
        counts = (f"counts from {words(row['counts_from'])}" if _str(row["counts_from"])
                  else "$k$ selected exactly")
        return f"{_shown_model(row['model'])}, {_shown_method(row['sparsifier'])}: {counts}"

    columns = [
        Column("network", "Network", lambda n: text(display_name(n)), width=1.0),
        *[Column(f"{b}_verdict", f"vs {text(shown[b])}", row=_versus(b), width=0.9)
          for b in baselines],
    ]
    return compact(frame, columns, caption_text, "claims-predictions", profile=profile,
                   group=group, notes=(
        r"Predicted, not measured: the step time at $P = 16$ from the step-time model. Each "
        r"cell: the verdict that the method is faster than the baseline (" + VERDICT_NOTE +
        r") and one number: judged on break-even selection times, the longest selection "
        r"that still beats a dense baseline (never: slower even with free selection) or how "
        r"much longer than Top-$k$'s its selection may take; else the predicted speed-up. "
        r"Counts from: the training condition whose selected counts the prediction used."))


# ------------------------------------------------------------------ the claims appendix
CLAIM_LABELS = {  # the appendix's names of claims whose column (Presentation.column) is
    # empty or needs its context there, by claim_key
    "time_to_accuracy": "time to accuracy: sooner than Top-k",
    "below_classic": r"$\delta < 1-k/d$",
    "fitted_value": r"fitted $\delta$ closer than Gaussian",
    "contraction_explains_convergence": r"$(1-q)/q^2$ orders the gap to Dense",
}
CLAIMS_HEADER = ("no.", "model", "claim", "method", "condition", "result", "sent", "verdict")
# each text column's weight in what the others leave (None: as wide as its widest cell)
CLAIMS_WEIGHTS = (None, 0.8, 1.1, 0.9, 1.3, 1.3, None, None)


def _claim_label(row) -> str:
    """How the appendix names a row's claim: CLAIM_LABELS, else its registered claim's column
    (Presentation), else the claim's name (a claim of one's own), broken where it may."""
    from topkscope.claims.registry import get_claim

    key = _str(row.claim_key)
    claim = get_claim(key)
    if key in CLAIM_LABELS:
        return CLAIM_LABELS[key]
    if claim is not None and claim.show.column:
        return latex_escape(claim.show.column)
    return breakable(row.claim)


def _num(row, name: str) -> float:
    value = getattr(row, name, math.nan)
    return math.nan if _missing(value) else float(value)


def _claims_cells(row) -> tuple[list[str], str]:
    """(the seven cells after "no.", the cause) of one claims row, formatted from its
    columns."""
    from topkscope.analysis.criteria import diff_unit, interval_text, signed
    from topkscope.perf.networks import display_name
    from topkscope.plots.titles import model_name

    def num(name: str) -> float:
        return _num(row, name)

    section = str(row.section)
    metric = _str(row.metric) or "accuracy"
    result = sent = "--"
    if section == "convergence":
        low, failed = num("ci_low"), num("n_failed_seeds")
        result = (signed(num("diff_mean"))
                  + (f" {interval_text(low, num('ci_high'), metric)}" if not math.isnan(low)
                     else diff_unit(metric))
                  + (f"; {_counted(num('n_seeds'), 'seed')}" if not math.isnan(num("n_seeds"))
                     else "")
                  + (f" ({int(failed)} failed)" if failed > 0 else ""))
        # two digits fit the column ("0.021×"); the CSV keeps every digit
        ratio = num("traffic_target") if math.isnan(num("bytes_ratio")) else num("bytes_ratio")
        sent = "--" if math.isnan(ratio) else f"{ratio:.2g}×"
    elif section != "prediction" and not math.isnan(num("fraction")):
        low = num("fraction_low")
        result = (f"{num('fraction'):.0%}"
                  + ("" if math.isnan(low) else f" [{low:.0%}, {num('fraction_high'):.0%}]")
                  + f" of {_counted(num('n_units'), 'unit')}"
                  + ("" if math.isnan(num("n_runs")) else f", {_counted(num('n_runs'), 'run')}"))
    elif section != "prediction":
        result = _counted(0 if math.isnan(num("n_units")) else num("n_units"), "unit")
    if section == "prediction":
        network = _str(row.network)
        condition = "predicted" + (f"; counts from {_counts_from(row)}"
                                   if _counts_from(row) else "") + (
            f"; network {display_name(network)}" if network else "")
    else:
        condition = _condition_words(row)
        if _str(row.reference):
            condition += f"; against {row.reference}"
    cells = [latex_escape(model_name(row.model)), _claim_label(row), _shown_method(
        row.sparsifier), words(condition), latex_escape(result),
             latex_escape(sent), latex_escape(row.verdict)]
    return cells, latex_escape(_str(row.cause))


def _appendix_rows(table: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """(every row of a current-schema claims table but the registry's predicted speed-ups,
    which claims-predictions shows; how many those are)."""
    from topkscope.publish.findings import row_table

    speedups = [row_table(r) == "prediction" for r in table.itertuples(index=False)]
    return table[[not s for s in speedups]], int(sum(speedups))


def claims_latex(table: pd.DataFrame, caption_text: str, profile: str | None = None
                 ) -> dict[str, str]:
    """{"claims": ..., "claims-evidence": ..., "claims-rules": ...}: tables that fit the line
    width and continue over pages, each complete without the others: every claims row but the
    predicted speed-ups at P = 16 (one line each in claims-predictions) in eight columns; each
    row's cause and evidence, numbered alike; each rule."""
    rows, left_out = _appendix_rows(_current(table))
    lines, evidence = [], []
    for i, row in enumerate(rows.itertuples(index=False), 1):
        cells, cause = _claims_cells(row)
        lines.append([str(i), *cells])
        said = _str(row.evidence)
        if str(row.section) == "prediction":
            said = f"{_condition_words(row)}; {said}"
        evidence.append([str(i), f"\\emph{{{cause}}} {latex_escape(said)}"])
    main = pd.DataFrame(lines, columns=list(CLAIMS_HEADER))
    columns = [Column(name, name, lambda v: v, right=name in ("no.", "sent"), width=weight)
               for name, weight in zip(CLAIMS_HEADER, CLAIMS_WEIGHTS)]
    out = {"claims": to_latex(main, columns, latex_escape(caption_text) + (
        " Each row's cause and evidence are in the table of the claims' evidence under the "
        "same number; each verdict rule in the table of the claims' rules." + (
            f" The {left_out} predicted speed-ups at P = 16 are in the table of predictions "
            "(their evidence in claims.csv)." if left_out else "")), "claims", profile)}
    out["claims-evidence"] = to_latex(
        pd.DataFrame(evidence, columns=["no.", "cause and evidence"]),
        [Column("no.", "no.", lambda v: v, right=True),
         Column("cause and evidence", "cause and evidence", lambda v: v, width=1.0)],
        "Cause and evidence of each claims row (numbered as in the claims table).",
        "claims-evidence", profile)
    rules = [[latex_escape(", ".join(dict.fromkeys(str(c) for c in g["claim"]))).replace(
        r"\_", r"\_\allowbreak{}"), latex_escape(rule)]
        for rule, g in rows.groupby("rule", sort=False)]
    out["claims-rules"] = to_latex(
        pd.DataFrame(rules, columns=["claims", "rule"]),
        [Column("claims", "claims", lambda v: v, width=0.33),
         Column("rule", "rule", lambda v: v, width=1.0)],
        "The verdict rule of each claim.", "claims-rules", profile)
    return out


def write_claims_tables(table: pd.DataFrame, out_dir: str | Path, caption_text: str,
                        profile: str | None = None) -> list[Path]:
    """claims.csv (the table as it is, its counts as whole numbers) and the three .tex files
    of claims_latex."""
    from topkscope.claims.row import to_csv

    out = Path(out_dir)
    written = [atomic_write(out / "claims.csv", lambda tmp: to_csv(table, tmp))]
    for name, tex in claims_latex(table, caption_text, profile).items():
        written.append(write_bytes_atomic(out / f"{name}.tex", tex.encode()))
    return written


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
    "claims-counts": (claims_counts_table, claims_counts_latex,
                      r"Approximate selectors' counts against $k$: the claims per model, "
                      r"condition and selector"),
    "claims-convergence": (claims_convergence_table, claims_convergence_latex,
                           r"Approximate selectors against Top-$k$ in training: the paper's "
                           r"claims per method and condition"),
    "claims-outer": (claims_outer_table, claims_outer_latex,
                     r"Top-$k$ on DiLoCo-style pseudo-gradients: each training against its "
                     r"reference"),
    "claims-outer-shares": (claims_outer_shares_table, claims_outer_shares_latex,
                            r"Top-$k$ on DiLoCo-style pseudo-gradients: the claims on the "
                            r"accumulated pseudo-gradient"),
    "claims-predictions": (claims_predictions_table, claims_predictions_latex,
                           r"Predicted speed-up of Gaussian-$k$ at $P = 16$ against dense "
                           r"training and Top-$k$"),
}


def write_all(out_dir: str | Path, profile: str | None, distribution_runs: Sequence = (),
              convergence_runs: Sequence = (), claims: pd.DataFrame | None = None,
              bench: pd.DataFrame | None = None) -> list[Path]:
    """Every table whose inputs are there, as CSV + .tex under out_dir, labelled with the
    profile (label()); returns the files."""
    written: list[Path] = []

    def put(frame: pd.DataFrame, name: str, latex: Callable, measured: str, on: str) -> None:
        if not frame.empty:
            written.extend(write_table(frame, out_dir, name,
                                       latex(frame, caption(measured, on, profile), profile)))

    if claims is not None and not claims.empty:
        written.extend(write_claims_tables(
            claims, out_dir, f"Claims of Shi et al. (arXiv 1911.08772) and their verdicts "
                             f"(every claims row; profile {profile or 'unknown'}).", profile))
        current = _current(claims)  # once for every view
        for name, (build, latex, measured) in CLAIMS_VIEWS.items():
            put(build(current), name, latex, measured, "the claims table")
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
            by.setdefault(_experiment(run), []).append(
                (count, str(run.manifest.get("start_time") or ""), run))
    return [max(group, key=lambda t: t[:2])[2] for _, group in sorted(by.items())]


def profile_of(claims: pd.DataFrame) -> str | None:
    """The profile a claims table's rows name (their `profile` column; several joined with
    '/'), None if none."""
    if "profile" not in claims:
        return None
    names = sorted({p for p in claims["profile"] if isinstance(p, str) and p})
    return "/".join(names) or None


def write_for_paths(runs: Sequence, paths: Sequence[Path], out_dir: Path,
                    claims: pd.DataFrame | None = None, **claims_options) -> list[Path]:
    """`topkscope tables`: the tables of loaded runs (those under the command's paths, as
    `topkscope claims` reads them) into out_dir. The claims are `claims` when given (a
    committed claims.csv: `--claims FILE`), else read from a profile's claims.csv when the
    paths are one results root that `topkscope figures` wrote, else tabulated from the runs as
    `topkscope claims` tabulates them; the selection times come from the bench/selection.csv
    of a results root given. The run tables use the complete and failed runs (an unfinished
    one counts in the claims alone, as an unfinished seed). The labels carry the runs'
    profile, else the claims'."""
    from topkscope.claims import build
    from topkscope.publish.report import profile_root

    paths = [Path(p) for p in paths]
    root = profile_root(paths) if paths else None
    if claims is None and paths:
        claims = pd.read_csv(root / "claims.csv") if root is not None else \
            build(runs, roots=paths, **claims_options)
    benches = [pd.read_csv(p / "bench" / "selection.csv") for p in paths
               if (p / "bench" / "selection.csv").is_file()]
    done = [r for r in runs if r.manifest.get("status") in ("complete", "failed")]
    profiles = sorted({str(r.manifest.get("profile")) for r in done
                       if r.manifest.get("profile")})
    profile = "/".join(profiles) or (profile_of(claims) if claims is not None else None)
    convergence = [r for r in done if not r.eval.empty]
    return write_all(out_dir, profile, distribution_runs_of(done), convergence, claims,
                     pd.concat(benches, ignore_index=True) if benches else None)
