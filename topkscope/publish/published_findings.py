"""The README's answers on published measurements, generated from the committed reference
tables under results/reference/published/ (the authors' GPU runs: claims.csv, written by
`topkscope claims` on the imported runs; their P = 16 inputs: p16-gpu.csv,
`python -m topkscope.claims.gpu_bands`; the GRACE release: grace/claims.csv,
`python -m topkscope.claims.grace`; Covenant-72B: covenant-claims.csv,
`python -m topkscope.claims.covenant`), between the markers `<!-- published-runs:start -->`
and `<!-- published-runs:end -->`: each registered question those tables answer, in one
sentence; `topkscope gallery` rewrites the block, no number typed. Also the imported runs'
figures for the figures driver.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

REFERENCE = Path(__file__).resolve().parents[2] / "results" / "reference" / "published"
CLAIMS_CSV = REFERENCE / "claims.csv"
VALIDATION_CSV = REFERENCE / "validation.csv"
P16_CSV = REFERENCE / "p16-gpu.csv"
START, END = "<!-- published-runs:start -->", "<!-- published-runs:end -->"
SOURCE = "kljp/topk_results@4d5937cd6c81f7a3869de9d1355bbc520d72ee27"


# the committed reference tables of published measurements, as the README names each: the
# authors' GPU runs (imported logs), the P = 16 predictions on their GPU inputs, the GRACE
# release, the production point
GRACE_CSV = REFERENCE / "grace" / "claims.csv"
COVENANT_CSV = REFERENCE / "covenant-claims.csv"
REFERENCE_TABLES = {"published GPU runs": CLAIMS_CSV, "their GPU inputs at P = 16": P16_CSV,
                    "GRACE release": GRACE_CSV, "Covenant-72B": COVENANT_CSV}


def reference_tables(paths: dict | None = None) -> dict[str, pd.DataFrame]:
    """name -> the committed reference table (current schema), those that exist."""
    from topkscope.claims.migrate import read

    paths = REFERENCE_TABLES if paths is None else paths
    return {name: read(p) for name, p in paths.items() if Path(p).is_file()}


def published_markdown(tables: dict[str, pd.DataFrame]) -> str:
    """Each question the reference tables answer (the registry's questions of published
    families), one sentence each with where its numbers come from."""
    from topkscope.claims.answers import answer
    from topkscope.claims.registry import questions
    from topkscope.publish.findings import wrapped

    lines = []
    for question, claim in questions():
        for name, table in tables.items():
            told = answer(table, question, claim)
            if len(told.rows):
                lines += wrapped(f"- **{question.text}** ({name}) {told.text}", "  ")
    return "\n".join(lines) if lines else "_no published reference tables_"


def with_published(text: str, paths: dict | None = None) -> str:
    """text with its published-runs block regenerated from the reference tables; unchanged
    without the markers."""
    if START not in text or END not in text:
        return text
    from topkscope.publish.findings import replace_block

    return replace_block(text, START, END, published_markdown(reference_tables(paths)))


def published_gpu_bands(p16_csv: Path = P16_CSV) -> pd.DataFrame | None:
    """The committed P = 16 claims on the published runs' GPU input bands (None: not there)."""
    from topkscope.claims.migrate import read

    return read(p16_csv) if Path(p16_csv).is_file() else None


# ---------------------------------------------------------------- the figures driver
def imported_runs(results_root: Path, skipped: list | None = None) -> list:
    """The imported published runs (launcher `published`, complete or failed) under the
    results root, loaded: the figures driver draws them and hands them to the claims. A job
    that failed at set-up is left out, one line naming it appended to `skipped`
    (topkscope.analysis.runs.skip_setup_failures)."""
    from topkscope.analysis.runs import load, skip_setup_failures
    from topkscope.manifest import PUBLISHED, find_runs

    runs, notes = skip_setup_failures(
        [load(r.path) for r in find_runs(results_root, status=("complete", "failed"))
         if r.manifest.get("launcher") == PUBLISHED])
    if skipped is not None:
        skipped.extend(notes)
    return runs


def draw(runs: list, figures_dir: Path) -> list:
    """One figure per group of imported runs with the same logged settings (but compressor
    and density) holding more than one method: accuracy per epoch and the split of an
    iteration (topkscope.plots.published_runs); FigureEntry each, experiment "published"."""
    from topkscope import plots
    from topkscope.claims.published import condition, settings
    from topkscope.perf.gpu_runs import validation_rows
    from topkscope.publish.figures import _save
    from topkscope.publish.findings import model_name, sparsifier_name

    groups: dict[tuple, list] = {}
    for run in runs:
        groups.setdefault((run.manifest.get("model"), settings(run.manifest)), []).append(run)
    timed = validation_rows(runs)
    entries = []
    for (model, _), group in sorted(groups.items(), key=lambda kv: str(kv[0])):
        if len({r.manifest.get("sparsifier") for r in group}) < 2:
            continue
        group = sorted(group, key=lambda r: (str(r.manifest.get("sparsifier")),
                                             str(r.manifest.get("run_id"))))

        def label(run) -> str:
            m = run.manifest
            rho = "" if m.get("sparsifier") == "dense" else f" ρ={float(m['density']):g}"
            return f"{sparsifier_name(m.get('sparsifier'))}{rho} (job {m.get('run_id')})"

        evals = pd.concat([r.eval.assign(run=label(r)) for r in group if len(r.eval)],
                          ignore_index=True)
        jobs = {str(r.manifest.get("run_id")): f"{sparsifier_name(r.manifest.get('sparsifier'))}"
                f"\n{r.manifest.get('run_id')}" for r in group}
        split = timed[timed["job"].astype(str).isin(jobs)].dropna(subset=["communicate_s"]) \
            if len(timed) else timed
        splits = pd.DataFrame({
            "run": [jobs[str(j)] for j in split["job"]] if len(split) else [],
            "compute": split.get("compute_s", []), "selection": split.get("select_s", []),
            "exchange": split.get("communicate_s", []),
            "other": (split["measured_s"] - split["compute_s"] - split["select_s"]
                      - split["communicate_s"]).clip(lower=0) if len(split) else []})
        cond = condition(group[0].manifest).replace(", rho=", "; first run rho=")
        title = f"{model_name(model)} on CIFAR-10, published GPU runs ({cond.split(': ', 1)[1]})"
        fig = plots.published_runs(evals, splits.reset_index(drop=True), title)
        cfg = group[0].manifest.get("config") or {}
        name = f"{model}-p{cfg.get('nworkers')}-b{cfg.get('batch_size')}-lr{cfg.get('lr')}"
        caption = (f"{model_name(model)}, the Gaussian-k authors' code on one GPU node "
                   f"({SOURCE}; seeds not published, GPU not named): validation top-1 accuracy "
                   "per epoch of each run (left) and, where the log times every iteration, the "
                   "median split of an iteration (compute = forward + backward less the "
                   "selection; exchange = the logged COMM_TOTAL / COMM; other = the rest of "
                   "the logged time per iteration).")
        entries.append(_save(fig, figures_dir, "published", name, caption))
    return entries
