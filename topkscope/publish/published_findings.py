"""The README's sentences on the published GPU runs, generated from the committed derived
tables (results/reference/published/claims.csv, validation.csv and p16-gpu.csv, written by
`topkscope claims`, `python -m topkscope.perf.gpu_runs` on the imported runs and
`python -m topkscope.claims.gpu_bands`), between
the markers `<!-- published-runs:start -->` and `<!-- published-runs:end -->`; `topkscope
gallery` rewrites the block, no number typed.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

REFERENCE = Path(__file__).resolve().parents[2] / "results" / "reference" / "published"
CLAIMS_CSV = REFERENCE / "claims.csv"
VALIDATION_CSV = REFERENCE / "validation.csv"
P16_CSV = REFERENCE / "p16-gpu.csv"
START, END = "<!-- published-runs:start -->", "<!-- published-runs:end -->"
SOURCE = "kljp/topk_results@4d5937cd6c81f7a3869de9d1355bbc520d72ee27"


def _range(values, fmt: str = "{:+.3g}") -> str:
    """"lo to hi" (one value when they agree) of the finite values, each formatted by fmt."""
    x = [float(v) for v in values if math.isfinite(float(v))]
    if not x:
        return "not given"
    lo, hi = min(x), max(x)
    return fmt.format(lo) if math.isclose(lo, hi) else f"{fmt.format(lo)} to {fmt.format(hi)}"


def _verdicts(frame: pd.DataFrame) -> str:
    return ", ".join(f"{n} {v}" for v, n in frame["verdict"].value_counts().sort_index().items())


NETWORK_WORDS = {"10gbe": "10 GbE", "ib100": "100 Gb IB"}
REASON_WORDS = {"within-model-error": "within the model's error",
                "input-band-too-wide": "an input's band too wide",
                "assumed-input": "only at an assumed input's value"}


def _where(models: dict, every: tuple[str, ...]) -> str:
    """'VGG-16-BN, LSTM-PTB (both networks), AlexNet (10 GbE)': models grouped by the networks
    they hold at."""
    from topkscope.publish.findings import model_name

    groups: dict[tuple, list[str]] = {}
    for model, networks in models.items():
        groups.setdefault(tuple(sorted(networks)), []).append(model_name(model))
    parts = []
    for networks, names in groups.items():
        at = "both networks" if set(networks) == set(every) else \
            ", ".join(NETWORK_WORDS.get(n, n) for n in networks)
        parts.append(f"{', '.join(names)} ({at})")
    return "; ".join(parts)


def p16_sentence(table: pd.DataFrame) -> str:
    """The P = 16 answer in one sentence with the conditions it holds under, from the p16-gpu
    rows' fields (topkscope.claims.gpu_bands.p16_answer): the comparisons with Top-k's
    selection from torch.topk with pytorch/pytorch#164459 (the default), then the named
    variant with the torch of the published runs."""
    from topkscope.claims.gpu_bands import p16_answer
    from topkscope.publish.findings import model_name

    answer = p16_answer(table)
    every = tuple(sorted(set(table["network"])))
    held, undecided = [], {}
    for comparison, verdicts in answer["comparisons"].items():
        if "holds" in verdicts:
            v = verdicts["holds"]
            held.append(f"{comparison.replace(', ', ' and ')} for "
                        f"{_where(v['models'], every)}, {v['low']:.3g}–{v['high']:.3g}×")
        for verdict, v in verdicts.items():
            if verdict != "holds":
                for model in v["models"]:
                    why = undecided.setdefault(model, set())
                    why.update(REASON_WORDS.get(r, r) for r in v["reasons"][model])
                    why.update(f"decided by {n}" for n in v["decided_by"][model])
    lo, hi = answer["model_error"]
    error = f"±{lo:.1%}" if math.isclose(lo, hi) else f"±{lo:.1%}–{hi:.1%}"
    text = ("At P = 16, predicted by the step-time model from the published GPU runs' inputs "
            "(each over the band the evidence supports, on 10 GbE and 100 Gb IB, a verdict only "
            f"where every corner agrees and no assumed input decides, against the model's "
            f"{error} error), ")
    text += ("the published Gaussian-k gives a shorter step than " + "; than ".join(held)
             if held else "the published Gaussian-k's step is decided against no baseline")
    fully = [m for m in answer["models"] if m in undecided
             and all(m not in v.get("holds", {}).get("models", {})
                     for v in answer["comparisons"].values())]
    if fully:
        text += (f"{', and is not decided' if held else ''} for "
                 f"{', '.join(model_name(m) for m in fully)} ("
                 + "; ".join(f"{model_name(m)}: {', '.join(sorted(undecided[m]))}"
                             for m in fully) + ")")
    counts = ("the rule's counts nominal k (assumed: no run measured them on these models)"
              if answer["counts_nominal"] else
              "the rule's counts as runs here measured them, nominal k (assumed) elsewhere")
    text += (f" — with {counts}, its sparse exchange costing beyond the α–β model what one "
             "node (NCCL) up to 32 machines over 1 GbE (MPI) show, and exact Top-k on "
             "torch.topk with pytorch/pytorch#164459")
    for name, verdicts in answer.get("variants", {}).items():
        counted = ", ".join(f"{verdict} for {len(v['models'])} model(s)"
                            for verdict, v in verdicts.items())
        text += (f"; over {name.replace(' (logged torch.topk)', '')} running the torch.topk "
                 f"the published runs logged, {counted} "
                 f"({min(v['low'] for v in verdicts.values()):.3g}–"
                 f"{max(v['high'] for v in verdicts.values()):.3g}×)")
    return text + "."


def prose(claims: pd.DataFrame, validation: pd.DataFrame,
          p16: pd.DataFrame | None = None) -> str:
    """The sentences: accuracy differences per model and comparison (with the verdicts), the
    selection share, the model's check on the iterations."""
    from topkscope.publish.findings import model_name

    rows = claims[claims["section"] == "published"]
    parts = [f"Published GPU runs of the authors' code ({SOURCE}, one node of 2–8 GPUs, seeds "
             "not published), imported by `topkscope import gaussiank-sgd`:"]
    for claim, what in (("topk_accuracy", "Top-k − Dense"), ("randk_accuracy",
                                                            "Rand-k − Top-k")):
        for model, sub in rows[rows["claim"] == claim].groupby("model", sort=True):
            known = sub.dropna(subset=["diff_mean"])
            if len(known):
                parts.append(f"{model_name(model)}: {what} final validation accuracy "
                             f"{_range(known['diff_mean'])} points over {len(known)} "
                             f"setting(s) ({_verdicts(known)}: no seeds to pair).")
    share = rows[rows["claim"] == "topk_selection_share"]
    if len(share):
        shares = share["diff_mean"].astype(float) * 100.0
        parts.append(f"Top-k's selection took {_range(shares, '{:.0f}')}% of an "
                     f"iteration ({', '.join(sorted(model_name(m) for m in set(share['model'])))}, "
                     f"{len(share)} "
                     f"node(s); longer than forward + backward: {_verdicts(share)}).")
    sparse = validation[validation["family"] == "one-node sparse"]
    if len(sparse):
        ratio = sparse["ratio_slowest"] if "ratio_slowest" in sparse else sparse["ratio"]
        text = (f"The step-time model, with the slowest worker's selection, predicts "
                f"{_range(ratio, '{:.3f}')}× the measured sparse iterations ({len(sparse)} "
                "held-out rows)")
        if "exchange_s" in sparse and sparse["exchange_s"].notna().any():
            text += (f": the logged sparse COMM is mostly the wait for the slowest worker's "
                     f"selection ({_range(sparse['wait_s'] * 1e3, '{:.2f}')} ms), the exchange "
                     f"itself {_range(sparse['exchange_s'] * 1e3, '{:.2f}')} ms against the "
                     f"model's {_range(sparse['predicted_communicate_s'] * 1e3, '{:.2f}')} ms")
        parts.append(text + " (docs/scaling.md).")
    if p16 is not None and len(p16):
        parts.append(p16_sentence(p16))
    return " ".join(parts)


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
    from topkscope.publish.headline import _wrapped

    lines = []
    for question, claim in questions():
        for name, table in tables.items():
            told = answer(table, question, claim)
            if len(told.rows):
                lines += _wrapped(f"- **{question.text}** ({name}) {told.text}", "  ")
    return "\n".join(lines) if lines else "_no published reference tables_"


def with_published(text: str, paths: dict | None = None) -> str:
    """text with its published-runs block regenerated from the reference tables; unchanged
    without the markers."""
    if START not in text or END not in text:
        return text
    from topkscope.publish.headline import replace_block

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
