"""The answers: one quotable sentence per question of the paper, from the claims rows.

    for answer in answers(table):      # a claims table (DataFrame, current schema)
        answer.question, answer.word, answer.text

An answer says yes / no / only in some conditions / partly / not settled / not measured, then
the numbers that carry it (the measured effect with its interval, the traffic it took, the
seeds, runs and units behind it) and, where conditions are not decided, how many and why in a
word (each row's `reason`). Conditions are never pooled: where they behave differently the
sentence names them. The word is read off the rows' verdicts, never re-judged:

    every row holds                    yes
    every row fails                    no
    every decided row holds, others not decided   yes where decided
    every decided row fails, others not decided   no where decided
    some hold, the others do not       only in some conditions (named)
    none holds, some are mixed         partly (the share lies between the cuts)
    no row decided                     not settled (the commonest reason)
    no row                             not measured

A condition's row that pools others (ALL_CONDITIONS) is left out: its parts are there.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from topkscope.analysis.criteria import count_band_text, signed
from topkscope.analysis.units import ALL_CONDITIONS
from topkscope.claims.verdicts import DECIDED, REASONS

WORDS = ("yes", "no", "yes where decided", "no where decided", "only in some conditions",
         "partly", "not settled", "not measured")


@dataclass(frozen=True)
class Question:
    """A question of the paper: the claims rows that answer it (claim names, sparsifiers:
    None for any), its figure in the gallery, its findings section, and how its numbers are
    told."""

    key: str
    text: str
    claims: tuple[str, ...]
    sparsifiers: tuple[str, ...] | None
    figure: str
    section: str
    numbers: Callable[[pd.DataFrame], str]
    outer: bool = False   # a question on pseudo-gradients: the outer runs' rows, else the others


@dataclass(frozen=True)
class Answer:
    question: Question
    word: str
    text: str
    rows: pd.DataFrame


def _num(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _span(values, fmt: str = "{:.0%}") -> str:
    x = [v for v in (_num(v) for v in values) if math.isfinite(v)]
    if not x:
        return ""
    lo, hi = fmt.format(min(x)), fmt.format(max(x))
    return lo if lo == hi else f"{lo}–{hi}"


def _models(rows: pd.DataFrame) -> str:
    from topkscope.plots.titles import model_name

    names = list(dict.fromkeys(model_name(m).split(" (")[0] for m in rows["model"]))
    return ", ".join(names) if len(names) <= 3 else f"{len(names)} models"


def _where(row) -> str:
    """'FNN-3, warmup=paper; ρ=0.001' — a condition as a sentence names it."""
    from topkscope.manifest import condition_name
    from topkscope.plots.titles import model_name

    cond = condition_name(str(row["condition"] or ""))
    return f"{model_name(row['model']).split(' (')[0]} {cond}".strip()


def word_of(verdicts) -> str:
    """The answer's word from the rows' verdicts (module docstring)."""
    verdicts = [str(v) for v in verdicts]
    if not verdicts:
        return "not measured"
    decided = [v for v in verdicts if v in DECIDED]
    if not decided:
        return "not settled"
    some_open = len(decided) < len(verdicts)
    if all(v == "holds" for v in decided):
        return "yes where decided" if some_open else "yes"
    if all(v == "fails" for v in decided):
        return "no where decided" if some_open else "no"
    if "holds" in decided:
        return "only in some conditions"
    return "partly" if "mixed" in decided else "no"


def _undecided(rows: pd.DataFrame) -> str:
    """'3 of 10 conditions not decided: too few steps recorded (2), ...' ('' when all are)."""
    open_ = rows[~rows["verdict"].astype(str).isin(DECIDED)]
    if open_.empty:
        return ""
    counts = open_["reason"].map(lambda r: REASONS.get(str(r), str(r) or "no reason given"))
    told = ", ".join(f"{why} ({n})" if len(counts) > 1 else why
                     for why, n in counts.value_counts().items())
    return f"{len(open_)} of {len(rows)} not decided: {told}"


def _strength(rows: pd.DataFrame) -> str:
    """'FNN-3, VGG-16; 24 runs, 880 units' / '... 5 seeds': the evidence behind the rows."""
    runs = int(pd.to_numeric(rows.groupby("model")["n_runs"].max(), errors="coerce")
               .fillna(0).sum())
    seeds = _span(rows["n_seeds"], "{:.0f}")
    units = int(pd.to_numeric(rows["n_units"], errors="coerce").fillna(0).sum())
    parts = [_models(rows)]
    if runs:
        parts.append(f"{runs} run" + ("s" if runs != 1 else ""))
    if seeds and rows["section"].eq("convergence").any():
        parts.append(f"{seeds} seed" + ("" if seeds == "1" else "s"))
    elif units:
        parts.append(f"{units} units")
    return "; ".join(parts)


# ------------------------------------------------------------------ each question's numbers
def _shares(rows: pd.DataFrame) -> str:
    return f"{_span(rows['fraction'])} of units per condition"


def _gaussian_like(rows: pd.DataFrame) -> str:
    beta = _span(rows["gennorm_beta"], "{:.2f}")
    return (f"u met the Gaussian moment window (|skew| ≤ 0.5, |excess kurtosis| ≤ 1) in "
            f"{_shares(rows)}" + (f"; the fitted generalised-normal shape β was {beta} "
                                  "(2 = Gaussian, 1 = Laplace)" if beta else ""))


def _bound(rows: pd.DataFrame) -> str:
    margin = _span(rows["bound_margin"], "{:.2g}")
    return (f"δ ≤ (1 − k/d)² in {_shares(rows)}" + (
        f", by {margin} times the gap between 1 − k/d and (1 − k/d)² (median per condition)"
        if margin else ""))


def _count(rows: pd.DataFrame) -> str:
    med = _span(rows["count_over_k"], "{:.3g}")
    p5, p95 = _span(rows["count_p5"], "{:.2g}"), _span(rows["count_p95"], "{:.2g}")
    return (f"its count was in {count_band_text()} in {_shares(rows)}"
            + (f"; median count/k {med}" if med else "")
            + (f" (5th–95th percentiles {p5.split('–')[0]} to {p95.split('–')[-1]})"
               if p5 and p95 else ""))


def _accuracy(rows: pd.DataFrame) -> str:
    """Per condition: the paired difference with its interval, seeds, and the traffic."""
    parts = []
    for _, r in rows.iterrows():
        unit = str(r["diff_unit"] or "points")
        diff = (f"{signed(_num(r['diff_mean']))} [{signed(_num(r['ci_low']))}, "
                f"{signed(_num(r['ci_high']))}] {unit}" if math.isfinite(_num(r["ci_low"]))
                else f"{signed(_num(r['diff_mean']))} {unit}, no interval")
        sent = []
        if math.isfinite(_num(r["traffic_target"])):
            sent.append(f"{_num(r['traffic_target']):.3g}× Top-k's elements at the target ρ")
        if math.isfinite(_num(r["traffic_vs_plain_topk"])):
            sent.append(f"{_num(r['traffic_vs_plain_topk']):.3g}× plain Top-k's per run")
        if math.isfinite(_num(r["bytes_ratio"])):
            sent.append(f"{_num(r['bytes_ratio']):.3g}× Top-k's bytes")
        seeds = int(_num(r["n_seeds"])) if math.isfinite(_num(r["n_seeds"])) else 0
        parts.append(f"{_where(r)} {r['verdict']}, {r['metric'] or 'accuracy'} {diff} "
                     f"({seeds} seeds" + (f"; sends {', '.join(sent)})" if sent else ")"))
    return "; ".join(parts)


def _speedup(rows: pd.DataFrame) -> str:
    from topkscope.perf.networks import FIT_FACTORS

    text = [f"{len(rows)} predictions at P = 16"]
    measured = rows[rows["selection_basis"].astype(str) != "break-even"]
    span = _span(pd.concat([measured["speedup_low"], measured["speedup_high"]]), "{:.3g}×")
    if span:
        text.append(f"predicted {span} over the dense baselines")
    judged = rows[(rows["selection_basis"].astype(str) == "break-even")
                  & rows["network"].isin(list(FIT_FACTORS))]
    ms = pd.to_numeric(judged["breakeven_ms"], errors="coerce").dropna()
    if (ms > 0).any():
        text.append(f"with no GPU selection time measured, it must select in under "
                    f"{_span(ms[ms > 0], '{:.3g}')} ms to beat Dense on the fitted clusters")
    if (ms <= 0).any():
        text.append(f"slower than Dense even with free selection in {int((ms <= 0).sum())}")
    errors = pd.to_numeric(rows["model_error"], errors="coerce").dropna()
    if len(errors):
        text.append(f"model error ≤ {errors.max():.1%}")
    return "; ".join(text)


def _bands(rows: pd.DataFrame) -> str:
    """The P = 16 predictions on published GPU input bands (claims.gpu_bands): the speed-up
    band per baseline and the inputs whose band decides."""
    dense = _span(pd.concat([rows["speedup_low"], rows["speedup_high"]]), "{:.3g}×")
    topk = _span(pd.concat([rows["speedup_topk_low"], rows["speedup_topk_high"]]), "{:.3g}×")
    deciding = sorted({n.strip() for names in rows["decided_by"].fillna("")
                       for n in str(names).split(",") if n.strip()})
    return (f"{len(rows)} predictions at P = 16 over whole input bands"
            + (f", {dense} over the dense baselines" if dense else "")
            + (f", {topk} over Top-k" if topk else "")
            + (f"; decided by the band of {', '.join(deciding)}" if deciding else ""))


def _time(rows: pd.DataFrame) -> str:
    mean = _span(rows["diff_mean"], "{:.3g}×")
    never = int(pd.to_numeric(rows["n_never"], errors="coerce").fillna(0).sum())
    return (f"{len(rows)} predictions at P = 16" + (f", speed-up to the target over Top-k "
                                                    f"{mean} (mean over seeds)" if mean else "")
            + (f", {never} seed-predictions never reached the target" if never else ""))


QUESTIONS = (
    Question("gaussian_like", "Is u bell-shaped (Gaussian-like) during training?",
             ("gaussian_like",), None, "fnn3-mnist-normality", "distribution", _gaussian_like),
    Question("below_paper", "Does Top-k's contraction δ stay below the paper's bound "
             "(1 − k/d)²?", ("below_paper",), None, "fnn3-mnist-contraction", "distribution",
             _bound),
    Question("gaussiank_count", "Does the published Gaussian-k select about k on Top-k's u?",
             ("gaussiank_count",), ("gaussiank-2019",), "fnn3-mnist-selectors",
             "distribution", _count),
    Question("gaussiank_count_in_training", "Does the published Gaussian-k select about k in "
             "its own training?", ("gaussiank_count_in_training",), ("gaussiank-2019",),
             "convergence-fnn3-mnist-selected_per_step", "distribution", _count),
    Question("gaussiank_accuracy", "Does Gaussian-k train as well as Top-k?",
             ("gaussiank_accuracy",), None, "convergence-fnn3-mnist-convergence",
             "convergence", _accuracy),
    Question("gaussiank_speedup_p16", "Does Gaussian-k speed up training on 16 GPUs "
             "(predicted)?", ("gaussiank_speedup_p16", "gaussiank_speedup_p16_wfbp",
                              "gaussiank_speedup_p16_fp16"), None, "scaling-breakeven-p16",
             "prediction", _speedup),
    Question("gaussiank_time_to_accuracy", "Does Gaussian-k reach Top-k's accuracy sooner on "
             "16 GPUs (predicted from the measured convergence)?",
             ("gaussiank_time_to_accuracy",), None, "time-to-accuracy-p16", "time", _time),
)


GPU_BANDS = Question(
    "gaussiank_speedup_p16_gpu", "Does Gaussian-k speed up training on 16 GPUs, on the GPU "
    "inputs of published runs (predicted)?", ("gaussiank_speedup_p16_gpu",
                                              "gaussiank_speedup_p16_gpu_wfbp",
                                              "gaussiank_speedup_p16_gpu_fp16",
                                              "gaussiank_speedup_p16_gpu_topk"),
    None, "scaling-breakeven-p16", "prediction", _bands)


def rows_for(table: pd.DataFrame, question: Question) -> pd.DataFrame:
    """The rows that answer `question`: its claims (and sparsifiers), pooled rows left out;
    the rows of outer-loop runs (their condition names `outer=`, or compares trainings of an
    outer experiment) for a question on pseudo-gradients, the others for the paper's."""
    rows = table[table["claim"].isin(question.claims)]
    if question.sparsifiers is not None:
        rows = rows[rows["sparsifier"].isin(question.sparsifiers)]
    condition = rows["condition"].astype(str)
    outer = condition.str.contains("outer=") | rows["claim"].isin(OUTER_CLAIMS)
    rows = rows[outer == question.outer]
    return rows[condition[rows.index] != ALL_CONDITIONS]


def _compared(rows: pd.DataFrame) -> str:
    """The trainings compared, per outer experiment: the effect with its interval and seeds."""
    parts = []
    for _, r in rows.iterrows():
        low = _num(r["ci_low"])
        diff = (f"{signed(_num(r['diff_mean']))} [{signed(low)}, {signed(_num(r['ci_high']))}]"
                if math.isfinite(low) else f"{signed(_num(r['diff_mean']))}, no interval")
        seeds = int(_num(r["n_seeds"])) if math.isfinite(_num(r["n_seeds"])) else 0
        wire = _num(r["bytes_ratio"])
        parts.append(f"{r['condition']} {r['verdict']}, {r['metric'] or 'accuracy'} {diff} "
                     f"{r['diff_unit'] or 'points'} ({seeds} seed{'s' if seeds != 1 else ''}"
                     + (f"; {wire:.3g}× the bytes" if math.isfinite(wire) else "") + ")")
    return "; ".join(parts)


def _effect(rows: pd.DataFrame) -> str:
    effect = _span(rows["diff_mean"], "{:.3g}")
    unit = next((u for u in rows["diff_unit"] if isinstance(u, str) and u), "")
    return f"in {_shares(rows)}" + (f"; median {effect} {unit}" if effect else "")


OUTER_CLAIMS = ("sparseloco_accuracy", "sparseloco_accuracy_per_step", "outer_momentum_accuracy")
OUTER_QUESTIONS = (
    Question("outer_gaussian_like", "Is the accumulated pseudo-gradient bell-shaped?",
             ("gaussian_like",), None, "pseudo-gradient-distribution", "distribution",
             _gaussian_like, outer=True),
    Question("outer_below_paper", "Does Top-k's δ on it stay below (1 − k/d)²?",
             ("below_paper",), None, "pseudo-gradient-contraction", "distribution", _bound,
             outer=True),
    Question("outer_chunk", "Does chunk-wise Top-k contract it like global Top-k (keeping 90% "
             "of global Top-k's energy)?", ("chunk_contraction",), None,
             "pseudo-gradient-contraction", "distribution", _effect, outer=True),
    Question("outer_quantization", "Does 2-bit quantization lose at most 10% of the energy "
             "Top-k keeps?", ("quantization_error",), None, "pseudo-gradient-contraction",
             "distribution", _effect, outer=True),
    Question("outer_counts", "Does the published Gaussian-k select about k on it?",
             ("gaussiank_count",), ("gaussiank-2019",), "pseudo-gradient-contraction",
             "distribution", _count, outer=True),
    Question("outer_accuracy", "Does SparseLoCo-style Top-k train as well as dense DiLoCo, as "
             "per-step TopK-SGD at equal bytes, and without outer momentum?", OUTER_CLAIMS,
             None, "pseudo-gradient-convergence", "convergence", _compared, outer=True),
)


def answer(table: pd.DataFrame, question: Question) -> Answer:
    """The question's answer from `table` (module docstring)."""
    rows = rows_for(table, question)
    word = word_of(rows["verdict"])
    if rows.empty:
        return Answer(question, word, "Not measured: these runs hold no row of it.", rows)
    held = rows[rows["verdict"] == "holds"]
    lead = word.capitalize()
    if word == "only in some conditions" and question.section != "convergence":
        lead += f" (holds in {', '.join(_where(r) for _, r in held.iterrows())})"
    reasons = rows["reason"].map(lambda r: REASONS.get(str(r), "")).value_counts()
    told = [question.numbers(rows)]
    if word == "not settled" and len(reasons) == 1 and reasons.index[0]:
        lead += f" — {reasons.index[0]}"  # every row, one reason: said once
    elif undecided := _undecided(rows):
        told.append(undecided)
    text = f"{lead}: {'; '.join(t for t in told if t)} ({_strength(rows)})."
    return Answer(question, word, text, rows)


def answers(table: pd.DataFrame) -> list[Answer]:
    """Every question's answer from a claims table of the current schema."""
    return [answer(table, q) for q in QUESTIONS]


# ------------------------------------------------------------------ a user's run, four questions
PAYS = Question(
    "pays", "Would sparsification pay on a cluster at the run's own density (predicted)?", (),
    None, "scaling-breakeven-p16", "prediction", lambda rows: "")


def pays_answer(scaling: pd.DataFrame, workers: int = 16) -> Answer:
    """Whether a sparse step would be shorter than every baseline's at P = `workers`, per
    network of a step-time table (topkscope.perf.pays.run_prediction for a run), by the rule
    of topkscope.claims.pays (the model's validated error; the same sentence `topkscope
    scale` prints); the word over networks is word_of's."""
    from topkscope.claims.pays import pays

    told = pays(scaling, workers)
    if not told:
        return Answer(PAYS, "not measured", "Not measured: no step-time prediction with a "
                      "Dense and a sparse step for this model (no compute time or parameter "
                      "count).", pd.DataFrame())
    word = word_of([p.verdict for p in told])
    text = (f"{word.capitalize()}: " + "; ".join(p.text for p in told)
            + " (predicted, not measured).")
    return Answer(PAYS, word, text, scaling[scaling["workers"] == workers])


def run_answers(table: pd.DataFrame, scaling: pd.DataFrame | None) -> list[Answer]:
    """The four questions a user asks of their own run, answered: is u Gaussian-like (with
    the fitted shape), how tight is the bound, would the published Gaussian-k select about k,
    would sparsification pay on a cluster at the run's own density."""
    from topkscope.claims.migrate import current

    table = current(table)[0] if len(table) else table
    keys = ("gaussian_like", "below_paper", "gaussiank_count")
    told = [answer(table, q) if len(table) else Answer(q, "not measured",
                                                       "Not measured: no claims rows.",
                                                       pd.DataFrame())
            for q in QUESTIONS if q.key in keys]
    return [*told, pays_answer(scaling if scaling is not None else pd.DataFrame())]
