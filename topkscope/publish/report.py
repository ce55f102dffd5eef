"""`topkscope report`: one self-contained HTML page for a user's own run, a folder of runs or a
whole profile's results — figures embedded as PNG data, no script, nothing fetched.

The page says, in this order:

* **what ran**: one row per run from its manifest (model and its size, dataset, optimizer,
  workers and launcher, sparsifier, density and its schedule, steps, status, commit, any
  named deviation);
* **the claims** with their verdicts and causes (topkscope.claims.build, the builder
  `topkscope claims` and `topkscope figures` use; for a profile's results root that holds them,
  its claims.csv as `make reproduce-figures` wrote it);
* **the figures** with their captions: a results root's figures/index.md as drawn, else the
  figures the runs allow, drawn now (distribution figures of each experiment's first run with
  snapshots, convergence figures over its runs; one that cannot be drawn is named with why);
* **the predicted scaling** at P = 16 on the networks fitted on published measurements for
  each model's size (topkscope.perf.report.scaling_table), with its inputs; a model of the
  user's own is predicted from its parameter count and the compute time its run measured;
* **where each table lies** (the runs' parquet tables, a results root's CSVs).

Everything is read and drawn before anything is written; the page is written atomically.
"""

from __future__ import annotations

import base64
import html
import math
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from topkscope.manifest import model_of
from topkscope.plots.titles import dataset_name, model_name, sparsifier_name

SCALING_NETWORKS = ("10gbe", "ib100")  # the presets fitted on published measurements
SCALING_WORKERS = 16
VERDICT_CLASS = {"holds": "holds", "fails": "fails", "mixed": "mixed",
                 "inconclusive": "inconclusive", "insufficient-data": "insufficient"}


@dataclass
class Figure:
    name: str
    caption: str
    png: bytes


@dataclass
class Report:
    """Everything the page shows, gathered before it is rendered."""

    sources: list[str]
    runs: pd.DataFrame
    claims: pd.DataFrame
    claims_source: str
    figures: list[Figure] = field(default_factory=list)
    scaling: pd.DataFrame = field(default_factory=pd.DataFrame)
    scaling_inputs: list[str] = field(default_factory=list)
    tables: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # runs under a results root left out for failing at set-up, one line each
    skipped: list[str] = field(default_factory=list)
    # damaged runs under a results root left out (manifest.DamagedRun)
    damaged: list = field(default_factory=list)


# --------------------------------------------------------------------- what ran
def _schedule(manifest: dict) -> str:
    values = manifest.get("density_schedule_values") or manifest.get("density_schedule") or []
    if manifest.get("density_function"):
        return f"function {manifest['density_function']}"
    return " → ".join(f"{v:g}" if isinstance(v, (int, float)) else str(v)
                      for v in values) if values else "none"


def _optimizer(manifest: dict) -> str:
    """'sgd (momentum=0.9; group 1: lr=0.1, weight_decay=0.0001; group 2: lr=0.01, ...)': the
    settings the groups share, then each group's own (manifest.describe_optimizer)."""
    opt = manifest.get("optimizer") or {}
    if not opt:
        return "not recorded"

    def listed(values: dict) -> str:
        return ", ".join(f"{k}={v}" for k, v in values.items() if k not in ("name", "tensors",
                         "elements") and not isinstance(v, (list, dict)))

    parts = [listed(opt)] + [f"group {i}: {listed(g)}" for i, g in
                             enumerate(opt.get("param_groups") or [], 1) if listed(g)]
    settings = "; ".join(p for p in parts if p)
    return f"{opt.get('name', '?')} ({settings})" if settings else str(opt.get("name", "?"))


def shown_path(path) -> str:
    """path relative to the working folder where it lies inside it (as the user typed it),
    else as given."""
    path = Path(path)
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)


def run_rows(found: Sequence) -> pd.DataFrame:
    """One row per found run (topkscope.manifest.FoundRun): what its manifest says ran."""
    rows = []
    for run in found:
        m = run.manifest
        d = m.get("num_parameters")
        rows.append({
            "run": shown_path(run.path), "status": m.get("status", ""),
            "model": model_name(str(m["model"])) + (f" (d = {int(d):,})" if d else "")
            if m.get("model") else model_of(m) or "unnamed",
            "dataset": dataset_name(m.get("dataset"), m.get("dataset_substitute"))
            if m.get("dataset") else "not recorded",
            "optimizer": _optimizer(m),
            "workers": f"{m.get('world_size', '?')} ({m.get('launcher', '?')})",
            "sparsifier": sparsifier_name(str(m.get("sparsifier") or "unnamed")),
            "density": f"{m['density']:g}" if isinstance(m.get("density"), (int, float))
            else str(m.get("density")),
            "density schedule": _schedule(m),
            "steps": str(m.get("steps_done", m.get("total_steps", ""))),
            "commit": str(m.get("git_commit") or "not recorded")[:12],
            "deviations": ", ".join(str(v) for v in m.get("deviations") or []) or "none",
        })
    return pd.DataFrame(rows)


# --------------------------------------------------------------------- figures
def profile_root(paths: Sequence[Path]) -> Path | None:
    """The one path given when it is a profile's results root (figures/index.md and
    claims.csv written by `make reproduce-figures`), else None."""
    if len(paths) == 1:
        root = Path(paths[0])
        if (root / "figures" / "index.md").is_file() and (root / "claims.csv").is_file():
            return root
    return None


def drawn_figures(root: Path) -> list[Figure]:
    """The figures of a results root, in figures/index.md's order with its captions."""
    from topkscope.publish.figures import read_index

    figures = root / "figures"
    captions = read_index(figures)
    names = list(captions) + sorted(p.stem for p in figures.glob("*.png")
                                    if p.stem not in captions)
    return [Figure(n, captions.get(n, ""), (figures / f"{n}.png").read_bytes())
            for n in names if (figures / f"{n}.png").is_file()]


def draw_runs(runs: Sequence, tick: Callable[[], None] = lambda: None
              ) -> tuple[list[Figure], list[str]]:
    """(figures, notes): per experiment, the distribution figures of its first run with
    snapshots and the convergence figures over its runs, drawn into a scratch folder; a
    figure that cannot be drawn from these runs becomes a note naming why."""
    from topkscope.analysis.snapshots import analyze_run, snapshot_densities, snapshot_steps
    from topkscope.publish.figures import CONVERGENCE_DRAWERS, DISTRIBUTION_DRAWERS

    by_experiment: dict[str, list] = {}
    for run in runs:
        by_experiment.setdefault(str(run.manifest.get("experiment") or Path(run.path).parent
                                     .name), []).append(run)
    from topkscope.plots.style import saving

    figures, notes = [], []
    with tempfile.TemporaryDirectory(prefix="topkscope-report-") as scratch, saving(("png",)):
        out = Path(scratch)
        for experiment, group in by_experiment.items():
            recorded = next((r for r in group if len(snapshot_steps(r, 0))), None)
            if recorded is not None:
                analysis = analyze_run(recorded)
                densities = (sorted(set(analysis.ratios["density"]))
                             or snapshot_densities(recorded))
                for name, drawer in DISTRIBUTION_DRAWERS.items():
                    _draw(drawer, (recorded, analysis, densities, out, experiment),
                          f"{experiment}-{name}", figures, notes)
                    tick()
            else:
                notes.append(f"{experiment}: no run recorded snapshots of u, so no "
                             "distribution figure")
            for name, drawer in CONVERGENCE_DRAWERS.items():
                _draw(drawer, (group, out, experiment), f"{experiment}-{name}", figures, notes)
                tick()
    return figures, notes


def _draw(drawer: Callable, args: tuple, name: str, figures: list[Figure],
          notes: list[str]) -> None:
    try:
        entry = drawer(*args)
    except (ValueError, KeyError, IndexError, RuntimeError) as exc:
        notes.append(f"{name} not drawn: {' '.join(str(exc).split()) or type(exc).__name__}")
        return
    if entry is not None and entry.png is not None:
        figures.append(Figure(entry.name, entry.caption, entry.png.read_bytes()))


# --------------------------------------------------------------------- predicted scaling
def predicted_scaling(runs: Sequence, results_root: Path | None = None
                      ) -> tuple[pd.DataFrame, list[str], list[str]]:
    """(table, inputs, notes): the step-time model at P = 16 on SCALING_NETWORKS for each
    model the runs trained (its first run), from that run's own inputs by the one function
    `topkscope scale --from-run RUN` uses (topkscope.perf.pays.run_prediction): its size, its
    measured compute, its density; a run that timed no step is named in the notes with the
    command that predicts it. results_root: unused (kept for callers)."""
    from topkscope.perf.pays import run_prediction

    frames, notes, seen = [], [], set()
    for run in runs:
        key = (run.manifest.get("model"), run.manifest.get("num_parameters"))
        if key in seen:
            continue
        seen.add(key)
        try:
            table, more, _ = run_prediction(run.path, SCALING_NETWORKS, [SCALING_WORKERS])
        except ValueError as exc:
            notes.append(f"{key[0] or 'unnamed'}: not predicted: {' '.join(str(exc).split())}; "
                         f"`{same_command(run.path)} --compute-s SECONDS` predicts it")
            continue
        notes += more
        frames.append(table)
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    inputs = [f"the same inputs as `{same_command(r.path)}` (one function, "
              "topkscope.perf.pays.run_prediction)" for r in runs[:1]] if len(table) else []
    if len(table):
        for kind in ("compute_source", "select_source", "count_source", "comm_source"):
            inputs += [f"{kind.removesuffix('_source')}: {s}"
                       for s in dict.fromkeys(table[kind].astype(str))]
        inputs += [f"warning: {w}" for w in dict.fromkeys(table["inputs_warning"].astype(str))
                   if w]
    return table, inputs, notes


def same_command(run_dir) -> str:
    """The command that prints the page's prediction of a run (one network at a time)."""
    return (f"topkscope scale --from-run {shown_path(Path(run_dir))} --network "
            f"{SCALING_NETWORKS[0]} --workers {SCALING_WORKERS}")


def profile_scaling(root: Path) -> tuple[pd.DataFrame, list[str]]:
    """A results root's scaling.csv at P = 16 on SCALING_NETWORKS, and its inputs."""
    path = root / "scaling.csv"
    if not path.is_file():
        return pd.DataFrame(), []
    table = pd.read_csv(path)
    from topkscope.perf.networks import current_names

    names = current_names(table["network"].astype(str).unique())
    table = table.assign(network=table["network"].astype(str).map(names))
    table = table[(table["workers"] == SCALING_WORKERS)
                  & table["network"].isin(SCALING_NETWORKS)]
    inputs = [f"{k.removesuffix('_source')}: {s}" for k in
              ("compute_source", "select_source", "count_source", "comm_source")
              if k in table for s in dict.fromkeys(table[k].astype(str))]
    return table, inputs


# --------------------------------------------------------------------- where the tables lie
RUN_TABLES = ("train.parquet", "eval.parquet", "stats", "hist", "snapshots")
ROOT_TABLES = ("claims.csv", "scaling.csv", "time_to_accuracy.csv", "figures/index.md",
               "figures/timing.csv")


def table_locations(found: Sequence, root: Path | None) -> list[tuple[str, str]]:
    """(what, path) of each table the page draws on."""
    out = []
    if root is not None:
        out += [(name, shown_path(root / name)) for name in ROOT_TABLES
                if (root / name).exists()]
        out += [(f"tables/{p.name}", shown_path(p)) for p in sorted((root / "tables")
                                                                    .glob("*.csv"))]
        out += [(f"bench/{p.name}", shown_path(p)) for p in sorted((root / "bench")
                                                                   .glob("*.csv"))]
        return out
    for run in found:
        out += [(f"{Path(run.path).name}/{name}", shown_path(Path(run.path) / name))
                for name in RUN_TABLES if (Path(run.path) / name).exists()]
    return out


# --------------------------------------------------------------------- gathering
def gather(paths: Sequence[Path], progress: bool = False, **claims_options) -> Report:
    """Everything the page of `paths` shows. ValueError (one line naming the path) for a path
    that holds no complete or failed run (topkscope.manifest.runs_at)."""
    from topkscope import progress as bars
    from topkscope.analysis.runs import load_found, skip_setup_failures
    from topkscope.claims import build
    from topkscope.claims.migrate import read
    from topkscope.manifest import runs_at

    paths = [Path(p) for p in paths]
    damaged: list = []
    found = runs_at(paths, status=("complete", "failed"), damaged=damaged)
    root = profile_root(paths)
    report = Report([shown_path(p) for p in paths], run_rows(found), pd.DataFrame(), "",
                    damaged=damaged)
    report.tables = table_locations(found, root)
    if root is not None:  # a whole profile: what `make reproduce-figures` wrote, as written
        report.claims = read(root / "claims.csv")
        report.claims_source = (f"{shown_path(root / 'claims.csv')}, as make "
                                "reproduce-figures wrote it")
        report.figures = drawn_figures(root)
        report.scaling, report.scaling_inputs = profile_scaling(root)
        return report
    with bars.bar(total=len(found), desc="report: read", unit="run",
                  enabled=progress) as bar:
        runs = load_found(found, named=paths, damaged=damaged, progress=bar.update)
    if damaged:  # the run table and the table locations are of the runs the page shows
        found = [f for f in found if f.path not in {d.path for d in damaged}]
        report.runs, report.tables = run_rows(found), table_locations(found, root)
    runs, report.skipped = skip_setup_failures(runs, named=paths)
    report.claims = build(runs, roots=paths, **claims_options)
    report.claims_source = (f"these {len(runs)} run(s), tabulated now as `topkscope claims` "
                            "tabulates them")
    with bars.bar(desc="report: draw", unit="figure", enabled=progress) as bar:
        report.figures, report.notes = draw_runs(runs, bar.update)
    report.scaling, report.scaling_inputs, notes = predicted_scaling(runs)
    report.notes += notes
    return report


# --------------------------------------------------------------------- rendering
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222;
       line-height: 1.4; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
.holds { color: #17622a; font-weight: 600; } .fails { color: #a11212; font-weight: 600; }
.mixed { color: #8a5a00; } .inconclusive { color: #555; } .insufficient { color: #888; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.85em; color: #444; }
details { font-size: 0.85em; } .note { color: #555; font-size: 0.9em; }
code { background: #f5f5f5; padding: 0 3px; }
"""


def _e(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return html.escape(str(value))


def _table(frame: pd.DataFrame, columns: Sequence[str]) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_e(row.get(c))}</td>" for c in columns) + "</tr>"
                   for row in frame.to_dict("records"))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _claims_html(claims: pd.DataFrame) -> str:
    from topkscope.publish.findings import verdict_sentence

    if len(claims) == 0:
        return "<p>No claim could be evaluated on these runs.</p>"
    counts = claims["verdict"].astype(str).value_counts()
    lines = [f"<p>{len(claims)} rows: " + ", ".join(
        f'<span class="{VERDICT_CLASS.get(v, "")}">{_e(v)} {n}</span>'
        for v, n in counts.items()) + ".</p>",
        "<table><thead><tr><th>model</th><th>claim</th><th>method</th><th>condition</th>"
        "<th>verdict</th><th>why</th><th>evidence</th></tr></thead><tbody>"]
    for row in claims.itertuples(index=False):
        verdict = str(row.verdict)
        sparsifiers = ", ".join(sparsifier_name(s) for s in str(row.sparsifier).split(","))
        lines.append(
            f"<tr><td>{_e(model_name(str(row.model)))}</td><td>{_e(row.statement or row.claim)}"
            f"</td><td>{_e(sparsifiers)}</td><td>{_e(getattr(row, 'condition', ''))}</td>"
            f'<td class="{VERDICT_CLASS.get(verdict, "")}">{_e(verdict)}</td>'
            f"<td>{_e(verdict_sentence(row))}</td><td><details><summary>evidence</summary>"
            f"{_e(row.evidence)}</details></td></tr>")
    lines.append("</tbody></table>")
    return "\n".join(lines)


SCALING_COLUMNS = ("model", "network", "method", "condition", "t_step ms", "× Dense",
                   "× Top-k", "select ms", "break-even ms")


def _scaling_html(table: pd.DataFrame, inputs: list[str]) -> str:
    if len(table) == 0:
        return "<p>No prediction (see the notes).</p>"
    from topkscope.claims.pays import method_name
    from topkscope.perf.pays import breakeven_vs_baselines

    topk = table["speedup_vs_topk"] if "speedup_vs_topk" in table else \
        pd.Series(float("nan"), index=table.index)
    breakeven = breakeven_vs_baselines(table)
    shown = pd.DataFrame({
        "model": table["model"].astype(str).map(model_name), "network": table["network"],
        "method": table["method"].astype(str).map(method_name),
        "condition": table.get("condition", pd.Series("", index=table.index)).map(
            lambda v: "" if pd.isna(v) else str(v)),  # all null: a float column
        "t_step ms": (table["t_step"] * 1e3).map(lambda v: f"{v:.3g}"),
        "× Dense": table["speedup_vs_dense"].map(lambda v: f"{v:.3g}"),
        "× Top-k": topk.map(lambda v: "" if pd.isna(v) else f"{v:.3g}"),
        "select ms": (table["t_select"] * 1e3).map(lambda v: f"{v:.3g}"),
        "break-even ms": breakeven.map(lambda v: "" if pd.isna(v) else f"{v * 1e3:.3g}")})
    items = "".join(f"<li>{_e(i)}</li>" for i in inputs)
    return (f"<p>Predicted by the step-time model (topkscope.perf), not measured, at P = "
            f"{SCALING_WORKERS} on the networks fitted on published measurements (10gbe, "
            "ib100); break-even: the longest selection that still beats every dense baseline. "
            "Its inputs:</p>" f"<ul>{items}</ul>" + _table(shown, SCALING_COLUMNS))


def _answers_html(claims: pd.DataFrame, scaling: pd.DataFrame) -> str:
    """The run's questions (topkscope.claims.answers.run_answers: every registered question
    its claims hold rows of, then whether sparsification pays), one sentence each, the word
    first; the tables and figures below hold the rest."""
    from topkscope.claims.answers import pays_answer, run_answers

    items = "".join(f"<li><b>{_e(a.question.text)}</b> {_e(a.text)}</li>"
                    for a in run_answers(claims, pays_answer(scaling)))
    return (f"<ol>{items}</ol><p class=\"note\">Each answer is read off the claims rows below "
            "(their verdicts and reasons) and the predicted scaling; nothing here re-judges "
            "them.</p>")


def render(report: Report) -> str:
    """The page's HTML: self-contained (styles inline, figures as PNG data URIs)."""
    title = "topkscope report: " + ", ".join(Path(s).name or s for s in report.sources)
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
             f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>",
             f"<h1>{_e(title)}</h1>",
             f"<p>{len(report.runs)} run(s) from {_e(', '.join(report.sources))}.</p>",
             "<h2 id=\"answers\">Your questions, answered</h2>",
             _answers_html(report.claims, report.scaling),
             "<h2 id=\"what-ran\">What ran</h2>",
             _table(report.runs, list(report.runs.columns)) if len(report.runs) else "",
             "<h2 id=\"claims\">The paper's claims on these runs</h2>",
             f"<p class=\"note\">From {_e(report.claims_source)}; the verdict rules: "
             "docs/statistics.md.</p>", _claims_html(report.claims),
             "<h2 id=\"figures\">Figures</h2>"]
    if not report.figures:
        parts.append("<p>No figure could be drawn from these runs (see the notes).</p>")
    for fig in report.figures:
        data = base64.b64encode(fig.png).decode()
        parts.append(f"<figure id=\"{_e(fig.name)}\"><img alt=\"{_e(fig.name)}\" "
                     f"src=\"data:image/png;base64,{data}\"><figcaption><b>{_e(fig.name)}"
                     f"</b>: {_e(fig.caption)}</figcaption></figure>")
    parts += ["<h2 id=\"scaling\">Predicted scaling</h2>",
              _scaling_html(report.scaling, report.scaling_inputs),
              "<h2 id=\"tables\">Where each table lies</h2>",
              "<ul>" + "".join(f"<li>{_e(what)}: <code>{_e(path)}</code></li>"
                               for what, path in report.tables) + "</ul>"
              + ("<p class=\"note\">The claims table as CSV: <code>topkscope claims "
                 f"{_e(' '.join(report.sources))} --out claims.csv</code>.</p>"
                 if not report.claims_source.endswith("reproduce-figures wrote it") else "")]
    if report.notes:
        parts += ["<h2 id=\"notes\">Notes</h2>",
                  "<ul>" + "".join(f"<li>{_e(n)}</li>" for n in report.notes) + "</ul>"]
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(paths: Sequence[Path], out: Path, progress: bool = False,
                 **claims_options) -> Report:
    """Gather, render and write the page of `paths` to `out` (atomically, last)."""
    from topkscope.io import write_bytes_atomic

    report = gather(paths, progress=progress, **claims_options)
    write_bytes_atomic(Path(out), render(report).encode())
    return report
