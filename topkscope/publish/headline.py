"""The README's first screen and the verdict counts of docs/findings.md, formatted from the
claims tables, never typed (`make gallery`, `make findings`):

    <!-- headline:start --> ... <!-- headline:end -->              README: per question of the
        paper its answer in one sentence per profile (topkscope.claims.answers), with the
        numbers and evidence behind it, a figure of the gallery and a table of findings.md
    <!-- verdict-counts:start --> ... <!-- verdict-counts:end -->  docs/findings.md: per
        claim its verdicts counted over conditions ("holds in 14 of 14 conditions", "mixed 9,
        holds 2, fails 3 of 14 conditions"), never pooled into one, and the claims beyond
        the paper's

No line is longer than MAX_LINE; the full tables are docs/findings.md's
(topkscope.publish.findings).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from topkscope.analysis import criteria
from topkscope.analysis.units import ALL_CONDITIONS, DURING_WARMUP
from topkscope.claims import speedup
from topkscope.claims.verdicts import VERDICTS
from topkscope.plots.titles import model_name, sparsifier_name
from topkscope.publish.findings import (
    BREAKEVEN,
    is_time_to_accuracy,
    section_heading,
    slug,
    with_current_networks,
    with_derived_columns,
)

HEADLINE_START, HEADLINE_END = "<!-- headline:start -->", "<!-- headline:end -->"
FINDINGS_DOC = "docs/findings.md"  # the full tables, linked from the README
GALLERY = "docs/gallery"  # the figures, linked from the README
MAX_LINE = 160  # the README's first screen: no line longer
# the published rule's P = 16 claims on the GPU input bands of the imported published runs
GPU_BANDS_ANCHOR = "p16-gpu-bands"
GPU_BANDS_LINK = ("docs/scaling.md#the-p--16-claims-on-gpu-input-bands-resultsreferencepublished"
                  "p16-gpucsv")


@dataclass(frozen=True)
class PaperClaim:
    """A claim of the paper as the README states it, the claims rows that test it (claim
    names; sparsifiers, None: any), its figure in the gallery and its findings section."""

    title: str
    claims: tuple[str, ...]
    sparsifiers: tuple[str, ...] | None
    figure: str
    section: str


PAPER_CLAIMS = (
    PaperClaim("u is bell-shaped (Gaussian-like) during training", ("gaussian_like",), None,
               "fnn3-mnist-normality", "distribution"),
    PaperClaim("Top-k's contraction δ stays below the paper's bound (1 − k/d)²",
               ("below_paper",), None, "fnn3-mnist-contraction", "distribution"),
    PaperClaim(f"The published Gaussian-k selects about k (within {criteria.count_band_text()}) "
               "on Top-k's u", ("gaussiank_count",), ("gaussiank-2019",),
               "fnn3-mnist-selectors", "distribution"),
    PaperClaim("The published Gaussian-k selects about k in its own training",
               ("gaussiank_count_in_training",), ("gaussiank-2019",),
               "convergence-fnn3-mnist-selected_per_step", "distribution"),
    PaperClaim("Gaussian-k trains as well as Top-k", ("gaussiank_accuracy",), None,
               "convergence-fnn3-mnist-convergence", "convergence"),
    PaperClaim("Gaussian-k speeds up training on 16 GPUs (predicted, not measured)",
               ("gaussiank_speedup_p16", "gaussiank_speedup_p16_wfbp",
                "gaussiank_speedup_p16_fp16"), None, "scaling-breakeven-p16", "prediction"),
    PaperClaim("Gaussian-k reaches Top-k's accuracy sooner on 16 GPUs (predicted from the "
               "measured convergence)", ("gaussiank_time_to_accuracy",), None,
               "time-to-accuracy-p16", "time"),
)


def tally(values, unit: str) -> str:
    """'holds in 14 of 14 conditions' / 'mixed 9, holds 2, fails 3 of 14 conditions': each
    verdict counted, the most frequent first, never pooled into one."""
    counts = pd.Series(list(values), dtype=object).astype(str).value_counts()
    n = int(counts.sum())
    if len(counts) == 1:
        return f"{_bold(counts.index[0])} in {n} of {n} {unit}"
    order = sorted(counts.index, key=lambda v: (-counts[v], VERDICTS.index(v)
                                                if v in VERDICTS else 99))
    return ", ".join(f"{_bold(v)} {counts[v]}" for v in order) + f" of {n} {unit}"


def _bold(verdict: str) -> str:
    return f"**{verdict}**" if verdict == "fails" else verdict


def _span(values, fmt: str = "{:.0%}") -> str:
    x = [float(v) for v in values if not pd.isna(v)]
    if not x:
        return ""
    lo, hi = fmt.format(min(x)), fmt.format(max(x))
    return lo if lo == hi else f"{lo}–{hi}"


def _models(rows: pd.DataFrame) -> str:
    """'FNN-3' / 'GPT, LSTM-PTB' (names without their size) / '5 models'."""
    names = list(dict.fromkeys(model_name(m).split(" (")[0] for m in rows["model"]))
    return ", ".join(names) if len(names) <= 3 else f"{len(names)} models"


def _runs_per_model(rows: pd.DataFrame, table: pd.DataFrame) -> int:
    """Runs behind distribution rows: per model the pooled row's count where the table has
    one, else the sum over the target-density conditions (a warm-up phase's units come from
    the same runs as its target density's)."""
    total = 0
    for model in dict.fromkeys(rows["model"]):
        pooled = table[(table["model"] == model) & (table["condition"].astype(str)
                                                   == ALL_CONDITIONS)
                       & (table["claim"] == rows["claim"].iloc[0])]
        mine = rows[rows["model"] == model]
        if len(pooled):
            total += int(pooled["n_runs"].max())
        else:
            target = mine[~mine["condition"].astype(str).str.contains("during warm-up")]
            total += int(pd.to_numeric(target["n_runs"], errors="coerce").fillna(0).sum())
    return total


def _seeds(rows: pd.DataFrame) -> str:
    seeds = _span(rows["n_seeds"], "{:.0f}")
    failed = int(pd.to_numeric(rows["n_failed_seeds"], errors="coerce").fillna(0).sum())
    return f"{seeds} seeds" + (f" ({failed} failed)" if failed else "")


def _distribution(rows: pd.DataFrame, table: pd.DataFrame) -> str:
    rows = rows[rows["condition"].astype(str) != ALL_CONDITIONS]
    return (f"{tally(rows['verdict'], 'conditions')} ({_models(rows)}, "
            f"{_runs_per_model(rows, table)} runs; {_span(rows['fraction'])} of units)")


def _convergence(rows: pd.DataFrame, _table) -> str:
    runs = int(pd.to_numeric(rows["n_runs"], errors="coerce").fillna(0).sum())
    return (f"{tally(rows['verdict'], 'conditions')} ({_models(rows)}; {_seeds(rows)}, "
            f"{runs} runs)")


def _prediction(rows: pd.DataFrame, _table) -> str:
    rows = with_current_networks(rows)
    text = (f"{tally(rows['verdict'], 'predictions')} ({_models(rows)} × "
            f"{rows['network'].nunique()} networks × {rows['claim'].nunique()} baselines")
    errors = pd.to_numeric(rows.get("model_error"), errors="coerce").dropna()
    text += f"; model error ≤ {errors.max():.1%})" if len(errors) else ")"
    judged = rows[(rows["selection_basis"].astype(str) == BREAKEVEN)
                  & (rows["claim"] == speedup.CLAIM)
                  & (rows["sparsifier"] == "gaussiank")]
    if len(judged):
        from topkscope.perf.networks import FIT_FACTORS

        net = next((n for n in FIT_FACTORS if n in set(judged["network"])), None)
        at = judged[judged["network"] == net] if net else judged.iloc[:0]
        ms = pd.to_numeric(at["breakeven_ms"], errors="coerce")
        if ms.notna().any():
            lo, hi = at.loc[ms.idxmin()], at.loc[ms.idxmax()]
            text += (f"\n    — no GPU selection time measured; to beat Dense "
                     f"at {net} it must select in under {lo['breakeven_ms']:.3g} ms "
                     f"({_models(lo.to_frame().T)}) to {hi['breakeven_ms']:.3g} ms "
                     f"({_models(hi.to_frame().T)})")
    return text


def _time(rows: pd.DataFrame, _table) -> str:
    rows = with_current_networks(rows)
    return (f"{tally(rows['verdict'], 'predictions')} ({_models(rows)} × "
            f"{rows['network'].nunique()} networks; {_seeds(rows)})")


def _gpu_bands(rows: pd.DataFrame) -> str:
    """The GPU-band predictions (claims.gpu_bands) counted, the models they hold for, the
    undecided ones, and the comparison with a current torch.topk (claims.gpu_bands.p16_answer:
    fields only)."""
    from topkscope.claims.gpu_bands import p16_answer

    answer = p16_answer(rows)
    text = (f"{tally(rows['verdict'], 'predictions')} ({_models(rows)} × "
            f"{rows['network'].nunique()} networks × {rows['claim'].nunique()} comparisons)")
    current = {k: v for k, v in answer["comparisons"].items() if k.endswith("torch.topk)")}
    logged = {k: v for k, v in answer["comparisons"].items() if k not in current}
    held = [m for m in answer["models"] if any(m in v.get("holds", {}).get("models", {})
                                              for v in logged.values())]
    rest = [m for m in answer["models"] if m not in held]
    name = {m: model_name(m).split(" (")[0] for m in answer["models"]}
    parts = []
    if held:
        parts.append(f"{_bold('holds')} for {', '.join(name[m] for m in held)} over some "
                     "baselines")
    if rest:
        parts.append(f"undecided for {', '.join(name[m] for m in rest)}")
    for verdicts in current.values():
        parts.append("vs Top-k on a current torch.topk: " + ", ".join(
            f"{verdict} {sum(len(n) for n in v['models'].values())}"
            for verdict, v in verdicts.items()))
    return text + ("\n    — " + "; ".join(parts) if parts else "")


SUMMARIES = {"distribution": _distribution, "convergence": _convergence,
             "prediction": _prediction, "time": _time}


def _rows(table: pd.DataFrame, claim: PaperClaim) -> pd.DataFrame:
    rows = table[table["claim"].isin(claim.claims)]
    if claim.section in ("distribution", "convergence"):
        rows = rows[rows["section"] == claim.section]
    elif claim.section == "time":
        rows = rows[rows["claim"].map(is_time_to_accuracy).astype(bool)]
    if claim.sparsifiers is not None:
        rows = rows[rows["sparsifier"].isin(claim.sparsifiers)]
    return rows


@dataclass(frozen=True)
class BeyondClaim:
    """A claim beyond the paper, told as one line under the paper's claim it extends (`under`:
    a claim name of that PaperClaim's claims): its words, its claim name, the key of its
    figure's link in BEYOND_FIGURES (None: the paper claim's figure shows it)."""

    words: str
    claim: str
    under: str
    figure: str | None


OTHER_SELECTORS = "other_selectors_count_in_training"  # every <family>_count_in_training row
# but the published Gaussian-k's (and the checks): how the other selectors size k when trained

BEYOND_CLAIMS = (
    BeyondClaim("beyond: the fitted δ is closer than the Gaussian value",
                "fitted_value", "below_paper", None),
    BeyondClaim("beyond: the other selectors in band in their own training",
                OTHER_SELECTORS, "gaussiank_count_in_training", None),
    BeyondClaim("beyond: (1 − q)/q², q = 1 − δ_C, orders the gap to Dense",
                "contraction_explains_convergence", "gaussiank_accuracy", "contraction-gap"),
)
BEYOND_FIGURES = {"contraction-gap": "convergence-fnn3-mnist-contraction_gap"}


def _other_selectors(table: pd.DataFrame) -> pd.DataFrame:
    """The in-training count rows of every method but the published Gaussian-k, checks (a
    method exact by construction) left out."""
    from topkscope.publish.findings import IN_TRAINING

    claim = table["claim"].astype(str)
    return table[claim.str.endswith(IN_TRAINING) & (table["sparsifier"] != "gaussiank-2019")
                 & (table["section"].astype(str) != "check")]


def _per_selector(rows: pd.DataFrame) -> str:
    """'DGC, tail-k holds 2/2; RedSync mixed 2/2': each method's verdicts over its conditions,
    methods with the same verdicts named together, those holding most often first."""
    told: dict[str, list] = {}
    for method, own in rows.groupby("sparsifier"):
        counts = own["verdict"].astype(str).value_counts()
        text = ", ".join(f"{_bold(v)} {c}/{len(own)}" for v, c in counts.items())
        held = int(counts.get("holds", 0)) / len(own)
        told.setdefault(text, [held, []])[1].append(sparsifier_name(str(method)))
    ordered = sorted(told.items(), key=lambda item: (-item[1][0], item[0]))
    return "; ".join(f"{', '.join(names)} {text}" for text, (_, names) in ordered)


def _beyond_lines(claim: BeyondClaim, tables: dict[str, pd.DataFrame]) -> list[str]:
    """'  - <words> — quick holds 3, **fails** 2 of 5 conditions (FNN-3, 25 runs); standard ...'
    from the claim's rows per profile, as measured; a profile that does not fit on the line
    continues below it ('    — standard: ...'); [] without rows."""
    parts = []
    for name, table in tables.items():
        rows = table[table["claim"] == claim.claim]
        if claim.claim == OTHER_SELECTORS:
            rows = _other_selectors(table)
        if claim.claim == "fitted_value":
            rows = rows[rows["condition"].astype(str) != ALL_CONDITIONS]
        if not len(rows):
            continue
        runs = int(pd.to_numeric(rows.groupby("model")["n_runs"].max(), errors="coerce")
                   .fillna(0).sum())
        if claim.claim == "fitted_value":
            what = tally(rows["verdict"], "conditions") + f" ({_models(rows)}, {runs} runs)"
        elif claim.claim == OTHER_SELECTORS:
            # the runs of each method's training condition (its warm-up phase: the same runs)
            trained = rows["condition"].astype(str).str.split(f"; {DURING_WARMUP}").str[0]
            runs = int(pd.to_numeric(rows.groupby(["model", "sparsifier", trained])["n_runs"]
                                     .max(), errors="coerce").fillna(0).sum())
            what = _per_selector(rows) + f" ({_models(rows)}, {runs} runs)"
        else:
            best = sorted({str(s) for s in rows.loc[rows["verdict"] == "holds", "sparsifier"]})
            what = (tally(rows["verdict"], "pairs") + f" ({_models(rows)}, {runs} runs"
                    + (f"; best {', '.join(best)}" if best else "") + ")")
        parts.append(f"{name.lower()} {what}")
    if not parts:
        return []
    link = f" · [figure][{claim.figure}]" if claim.figure else ""
    one = f"  - {claim.words} — " + "; ".join(parts) + link
    if len(one) <= MAX_LINE:
        return [one]
    return ([f"  - {claim.words} — {parts[0]}{link}"]
            + [f"    — {part.replace(' ', ': ', 1)}" for part in parts[1:]])


def verdict_counts_markdown(profiles: dict[str, pd.DataFrame],
                            gpu_bands: pd.DataFrame | None = None) -> str:
    """One bullet per claim of the paper: its statement and its figure, then one line per
    profile with rows for it: the verdicts, the evidence behind them and its table in
    docs/findings.md (reference links, defined below the bullets, keep the lines short). profiles: {"Quick": claims table, "Standard": ...} in order;
    the keys are the findings' headings (findings.HEADINGS). gpu_bands: the P = 16 claims on
    the published runs' GPU input bands (results/reference/published/p16-gpu.csv), one more
    line under the speed-up claim, linked to their table in docs/scaling.md."""
    tables = {name: with_derived_columns(t)[0] for name, t in profiles.items() if len(t)}
    lines, links = [], {}
    for claim in PAPER_CLAIMS:
        found = {name: _rows(t, claim) for name, t in tables.items()}
        found = {name: rows for name, rows in found.items() if len(rows)}
        if not found:
            continue
        names = sorted({sparsifier_name(s) for rows in found.values()
                        for s in rows["sparsifier"]})
        who = f" — {', '.join(names)}" if claim.section != "distribution" else ""
        links[claim.figure] = f"{GALLERY}/{claim.figure}.png"
        lines.append(f"- **{claim.title}**{who} · [figure][{claim.figure}]")
        for name, rows in found.items():
            anchor = slug(section_heading(name, claim.section))
            links[anchor] = f"{FINDINGS_DOC}#{anchor}"
            first, *more = SUMMARIES[claim.section](rows, tables[name]).split("\n")
            line = f"  - {name.lower()}: {first} · [table][{anchor}]"
            if len(line) > MAX_LINE:  # the link continues the item on its own line
                line = f"  - {name.lower()}: {first}\n    · [table][{anchor}]"
            lines += [*line.split("\n"), *more]
        if claim.section == "prediction" and gpu_bands is not None and len(gpu_bands):
            first, *more = _gpu_bands(gpu_bands).split("\n")
            links[GPU_BANDS_ANCHOR] = GPU_BANDS_LINK
            lines += [f"  - published GPU runs: {first} · [table][{GPU_BANDS_ANCHOR}]", *more]
        for beyond in (b for b in BEYOND_CLAIMS if b.under in claim.claims):
            told = _beyond_lines(beyond, tables)
            if told and beyond.figure:
                links[beyond.figure] = f"{GALLERY}/{BEYOND_FIGURES[beyond.figure]}.png"
            lines += told
    if not lines:
        return "_no claims (no runs)_"
    return "\n".join(lines) + "\n\n" + "\n".join(f"[{k}]: {v}" for k, v in links.items())


def _wrapped(line: str, indent: str = "    ", limit: int | None = None) -> list[str]:
    """line as markdown lines of at most `limit` (MAX_LINE) characters, continuation lines
    indented (one list item); words and links are never split."""
    import textwrap

    return textwrap.wrap(line, width=limit or MAX_LINE, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False)


def answers_markdown(profiles: dict[str, pd.DataFrame],
                     gpu_bands: pd.DataFrame | None = None) -> str:
    """The README's first screen: per question of the paper (topkscope.claims.answers) its
    figure, then per profile with rows for it the answer in one sentence — yes / no / only in
    some conditions (named) / partly / not settled (why), the numbers that carry it and the
    evidence behind them — and its table in docs/findings.md. gpu_bands: the P = 16 rows on the
    published runs' GPU input bands, answered under the speed-up question."""
    from topkscope.claims.answers import GPU_BANDS, QUESTIONS, answer
    from topkscope.claims.migrate import current

    tables = {name: current(t)[0] for name, t in profiles.items() if len(t)}
    lines, links = [], {}
    for question in QUESTIONS:
        found = {name: answer(t, question) for name, t in tables.items()}
        found = {name: a for name, a in found.items() if len(a.rows)}
        if not found:
            continue
        links[question.figure] = f"{GALLERY}/{question.figure}.png"
        lines += _wrapped(f"- **{question.text}** · [figure][{question.figure}]", "  ")
        for name, told in found.items():
            anchor = slug(section_heading(name, question.section))
            links[anchor] = f"{FINDINGS_DOC}#{anchor}"
            lines += _wrapped(f"  - {name.lower()}: {told.text} · [table][{anchor}]")
        if question.section == "prediction" and gpu_bands is not None and len(gpu_bands):
            told = answer(current(gpu_bands)[0], GPU_BANDS)
            links[GPU_BANDS_ANCHOR] = GPU_BANDS_LINK
            lines += _wrapped(f"  - published GPU runs: {told.text} · "
                              f"[table][{GPU_BANDS_ANCHOR}]")
    if not lines:
        return "_no claims (no runs)_"
    return "\n".join(lines) + "\n\n" + "\n".join(f"[{k}]: {v}" for k, v in links.items())


def headline_markdown(profiles: dict[str, pd.DataFrame],
                      gpu_bands: pd.DataFrame | None = None) -> str:
    """The README's headline block: the answers (answers_markdown)."""
    return answers_markdown(profiles, gpu_bands)


def replace_headline(readme: str, profiles: dict[str, pd.DataFrame],
                     gpu_bands: pd.DataFrame | None = None) -> str:
    """readme with the text between its headline markers replaced by headline_markdown."""
    i, j = readme.find(HEADLINE_START), readme.find(HEADLINE_END)
    if i < 0 or j < i:
        raise ValueError(f"the README has no {HEADLINE_START} ... {HEADLINE_END} block")
    return (readme[: i + len(HEADLINE_START)] + "\n" + headline_markdown(profiles, gpu_bands) + "\n"
            + readme[j:])


OUTER_START, OUTER_END = "<!-- pseudo-gradients:start -->", "<!-- pseudo-gradients:end -->"


def outer_answers_markdown(profiles: dict[str, pd.DataFrame]) -> str:
    """The README's answers on pseudo-gradients (topkscope.claims.answers.OUTER_QUESTIONS):
    per question and profile with rows for it, the answer in one sentence."""
    from topkscope.claims.answers import OUTER_QUESTIONS, answer
    from topkscope.claims.migrate import current

    tables = {name: current(t)[0] for name, t in profiles.items() if len(t)}
    lines = []
    for question in OUTER_QUESTIONS:
        found = {name: answer(t, question) for name, t in tables.items()}
        found = {name: a for name, a in found.items() if len(a.rows)}
        if not found:
            continue
        lines += _wrapped(f"- **{question.text}**", "  ")
        for name, told in found.items():
            lines += _wrapped(f"  - {name.lower()}: {told.text}")
    return "\n".join(lines) if lines else ("_no outer-loop runs in these claims: `make "
                                            "reproduce-figures` runs outer-fnn3-mnist_")


def replace_outer_answers(text: str, profiles: dict[str, pd.DataFrame]) -> str:
    """text with the block between its pseudo-gradients markers replaced."""
    i, j = text.find(OUTER_START), text.find(OUTER_END)
    if i < 0 or j < i:
        raise ValueError(f"no {OUTER_START} ... {OUTER_END} block")
    return text[: i + len(OUTER_START)] + "\n" + outer_answers_markdown(profiles) + "\n" + text[j:]


COUNTS_START, COUNTS_END = "<!-- verdict-counts:start -->", "<!-- verdict-counts:end -->"


def replace_verdict_counts(text: str, profiles: dict[str, pd.DataFrame],
                           gpu_bands: pd.DataFrame | None = None) -> str:
    """text with the block between its verdict-counts markers (docs/findings.md) replaced by
    verdict_counts_markdown."""
    i, j = text.find(COUNTS_START), text.find(COUNTS_END)
    if i < 0 or j < i:
        raise ValueError(f"no {COUNTS_START} ... {COUNTS_END} block")
    return (text[: i + len(COUNTS_START)] + "\n" + verdict_counts_markdown(profiles, gpu_bands)
            + "\n" + text[j:])


def long_lines(text: str, limit: int = MAX_LINE) -> list[tuple[int, int]]:
    """(line number, length) of each line of text longer than `limit` characters."""
    return [(i, len(line)) for i, line in enumerate(text.splitlines(), 1) if len(line) > limit]
