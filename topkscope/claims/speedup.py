"""The P = 16 claims of the predicted scaling (results/claims.csv, section prediction): each
approximate selector's predicted speed-up over Dense and Top-k, over Dense with WFBP and over
Dense in fp16, per model, network and training condition, for every registered selector whose
counts a model's runs recorded (recorded_selectors: the robust and the published Gaussian-k in
the profiles, a plugin's own alike), each judged against
the model's validated error (topkscope.claims.verdicts.speedup_verdict), or on break-even
selection times where a selection time is another device's than the compute's (see _rule).
The scaling table they read is topkscope.perf.report's, for the models of the runs at hand
(the builder's Context.scaling). `speedup_low`/`speedup_high` hold the predicted speed-up over
the row's dense baseline, `speedup_topk_low`/`speedup_topk_high` over Top-k (equal ends: a
point prediction).

Counts: a method's elements sent come from its own training runs (topkscope.perf.inputs.
seed_counts). Where the model has none and the count was measured by the recorder on another
method's u (Top-k's, where the published Gaussian-k over-selects but in its own training it
under-sends), the row says so and its verdict is at most inconclusive: a speed-up predicted from
another training's counts is not the method's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from topkscope.claims import phrases
from topkscope.claims.registry import Claim, Presentation, Question, register_claim
from topkscope.claims.row import ClaimRow, frame
from topkscope.claims.verdicts import free_selection_verdict, speedup_verdict
from topkscope.condition import Condition
from topkscope.perf import model as pm
from topkscope.perf.inputs import SELECTION_BREAKEVEN, SELECTION_MEASURED
from topkscope.perf.published import comparison_error
from topkscope.perf.report import CLAIM_P, breakeven_text
from topkscope.plots.frames import text_column

CLAIM = f"gaussiank_speedup_p{CLAIM_P}"
# claim-name suffix: (the methods the speed-up is over, what the statement says)
CLAIMS = {
    "": (("dense", "topk"), "an end-to-end speed-up over Dense and over Top-k"),
    "_wfbp": (("dense-wfbp",), "a shorter step than Dense with wait-free back-propagation"),
    "_fp16": (("dense-fp16",), "a shorter step than Dense with an fp16 all-reduce"),
}
SPEEDUP_CLAIMS = tuple(CLAIM + suffix for suffix in CLAIMS)


def rule(errors: dict[str, float]) -> str:
    measured = ", ".join(f"{family} {err:.1%}" for family, err in sorted(errors.items()))
    return (f"prediction of the step-time model (topkscope.perf) at P = {CLAIM_P}, density "
            "0.001, published exchange (two all-gathers, padded); with e the model's validated "
            "error (largest |predicted / measured - 1| over the held-out published cluster "
            f"rows, results/reference/scaling/published.csv: {measured}): with selection times "
            "measured on the compute's device, holds if every predicted speed-up exceeds 1 + e, "
            "fails if one falls below 1 - e, else inconclusive; with selection times of another "
            "device only (break-even), fails if the method is slower than a dense baseline by "
            "more than e even with free selection, else inconclusive, the break-even selection "
            "times saying what its selection must cost")


BREAKEVEN_EVIDENCE = "break-even selection"  # how a claim's break-even part begins


def approximate(method: str) -> bool:
    """A registered sparsifier that selects (not Dense, not exact Top-k): a method whose
    predicted speed-up is a claim."""
    from topkscope.analysis.selection import NOT_SELECTORS
    from topkscope.sparsify import available

    return method in available() and method not in NOT_SELECTORS


def recorded_selectors(runs) -> dict[str, list[str]]:
    """{model: the registered approximate selectors whose counts its `runs` recorded}: the one
    a run trained with (train.parquet's counts) and each whose `<S>_count` the recorder filled
    on a run's u (topkscope.claims.distribution.compared_selectors), in plot order."""
    from topkscope.claims.distribution import compared_selectors
    from topkscope.sparsify import in_plot_order

    found: dict[str, set[str]] = {}
    for run in runs:
        model = str(run.manifest.get("model"))
        stats = run.stats if run.stats is not None else pd.DataFrame()
        found.setdefault(model, set()).update(
            s for s in [run.manifest.get("sparsifier"), *compared_selectors(stats)]
            if s is not None and approximate(s))
    return {model: in_plot_order(names) for model, names in found.items()}


def _parts(m: str, row, with_select: bool) -> str:
    if with_select:
        return (f"{m} {row['t_step'] * 1e3:.3g} ms (compute {row['t_compute'] * 1e3:.3g}, "
                f"select {row['t_select'] * 1e3:.3g}, comm {row['t_comm'] * 1e3:.3g})")
    return (f"{m} {(row['t_step'] - row['t_select']) * 1e3:.3g} ms without selection (compute "
            f"{row['t_compute'] * 1e3:.3g}, comm {row['t_comm'] * 1e3:.3g})")


def _speedup_cause(names: Sequence[str], speedups: Sequence[float], errors: Sequence[float],
                   network: str) -> str:
    """'predicted 1.49× over Dense, 1.12× over Top-k at 10gbe-fit (model error ±4.5%)': the
    numbers behind a verdict on measured selection times (the verdict's lead says what they
    mean)."""
    return ("predicted " + ", ".join(f"{s:.3g}× over {n}" for n, s in zip(names, speedups))
            + f" at {network} (model error ±{max(errors):.1%})")


def _claim_row(refs: pd.DataFrame, g: pd.Series, model: str, network: str, suffix: str,
               errors: dict[str, float]) -> ClaimRow | None:
    """One claims row of the sparsifier row `g` against the baselines of CLAIMS[suffix]
    (`refs`: the table's rows at this model, network and P that depend on no training
    condition, indexed by method); None when a baseline is missing."""
    from topkscope.models import DATASET
    from topkscope.sparsify import family_of, label_of

    references, what = CLAIMS[suffix]
    if not set(references) <= set(refs.index):
        return None
    sparsifier = str(g["method"])
    training = g.get("condition") if isinstance(g.get("condition"), str) else ""
    names = [label_of(r) for r in references]
    speedups = [float(g[pm.speedup_column(r)]) for r in references]
    errs = [comparison_error(sparsifier, r, errors) for r in references]
    breakeven = "; ".join(breakeven_text(r, float(g[pm.breakeven_column(r)]))
                          for r in references)
    limits = "validated model error " + ", ".join(f"±{e:.1%}" for e in errs)
    measured = {g["selection_basis"], *refs.loc[list(references), "selection_basis"]} == {
        SELECTION_MEASURED}
    parts = "; ".join(_parts(m, refs.loc[m], measured) for m in references) + "; " + _parts(
        sparsifier, g, measured)
    warning = g.get("inputs_warning") or ""
    own_counts = counts_in_own_training(sparsifier, str(g.get("count_source", "")))
    if measured:
        verdict, faster = speedup_verdict(speedups, errs)
        fraction = faster / len(references)
        evidence = ("predicted speed-up " + ", ".join(
            f"over {n} {s:.3f}x" for n, s in zip(names, speedups))
            + f" ({limits}); {BREAKEVEN_EVIDENCE}: {breakeven}; {parts}")
        cause = _speedup_cause(names, speedups, errs, network)
        selection = f"selection {g['select_source']}"
        reason = "within-model-error"
    else:
        free = [(refs.loc[r, "t_step"] - refs.loc[r, "t_select"])
                / (g["t_step"] - g["t_select"]) for r in references]
        slower = [(n, f) for r, n, f, e in zip(references, names, free, errs)
                  if r in pm.DENSE_METHODS and f < 1 - e]
        verdict, fraction = free_selection_verdict(slower), np.nan
        evidence = (f"{BREAKEVEN_EVIDENCE} (no selection time measured on the compute's "
                    f"device): {breakeven}; with free selection the speed-up would be "
                    + ", ".join(f"over {n} {f:.3f}x" for n, f in zip(names, free))
                    + f" ({limits}); {parts}")
        cause = (f"slower than {slower[0][0]} even with free selection: {slower[0][1]:.3f}x at "
                 f"{network}" if slower else
                 f"decided by its selection time on the compute's device at {network}: "
                 f"{breakeven}")
        selection = f"not counted: {BREAKEVEN_EVIDENCE} times (warning: {warning})"
        reason = "not-measured-on-device"
    if not own_counts:
        verdict, reason = "inconclusive", "counts-not-own-training"
        cause = (f"counts not from {label_of(sparsifier)}'s own training (measured on "
                 f"another method's u; its own runs would say what it sends); {cause}")
    condition = (f"prediction, not a measurement: {g['inputs']}; "
                 + (f"training condition {training}; " if training else "")
                 + f"network {network} ({g['comm_source']}); compute {g['compute_source']}; "
                 f"{selection}; {label_of(sparsifier)} counts {g['count_source']}; "
                 f"{g['options']}"
                 + "".join(f"; {r} overlap {refs.loc[r, 'overlap_source']}" for r in references
                           if refs.loc[r, "overlap"])
                 + (f"; warning: {warning}" if warning and measured else ""))
    over = dict(zip(references, speedups))
    dense = next((over[r] for r in references if r in pm.DENSE_METHODS), np.nan)
    row = ClaimRow(
        model=model, dataset=DATASET.get(model), dataset_substitute=None,
        claim=f"{family_of(sparsifier)}_speedup_p{CLAIM_P}{suffix}", sparsifier=sparsifier,
        statement=f"{label_of(sparsifier)} gives {what} at P = {CLAIM_P} ({network})",
        n_units=len(references), fraction=fraction, evidence=evidence, verdict=verdict,
        reason="" if verdict in ("holds", "fails") else reason, rule=rule(errors),
        condition=condition, n_seeds=float(g.get("count_seeds", np.nan)),
        traffic_ratio=float(g["count_ratio"]), section="prediction", cause=cause,
        network=network, inputs=str(g["inputs"]), baselines=", ".join(names),
        training_condition=(f"{training}; rho={float(g['density']):g}" if training else ""),
        selection_basis=SELECTION_MEASURED if measured else SELECTION_BREAKEVEN,
        model_error=max(errs), diff_unit="speed-up ×",
        speedup_low=dense, speedup_high=dense,
        speedup_topk_low=over.get("topk", np.nan), speedup_topk_high=over.get("topk", np.nan),
        claim_key=f"speedup_p{CLAIM_P}{suffix}", claim_family="prediction",
        **_breakeven_ms(g, references))
    row.set_condition(Condition(training_density=float(g["density"]),
                                reference=", ".join(references)))
    return row


def counts_in_own_training(method: str, count_source: str) -> bool:
    """Whether a row's count ratio is the method's own (its own training runs, its k by
    construction, or the nominal k, which the source names), not the recorder's count of it
    on another method's u (topkscope.perf.inputs.seed_counts's fallback)."""
    return f"not {method}'s own training" not in count_source


def _breakeven_ms(g: pd.Series, references: Sequence[str]) -> dict[str, float]:
    """breakeven_ms: the break-even selection time against the row's dense baseline (ms; <= 0:
    slower even with free selection); breakeven_topk_ms: the most the selection may exceed
    Top-k's (ms; negative: it must select faster), where Top-k is a baseline."""
    out = {}
    for r in references:
        column = "breakeven_ms" if r in pm.DENSE_METHODS else "breakeven_topk_ms"
        out[column] = float(g[pm.breakeven_column(r)]) * 1e3
    return out


def training_conditions(runs) -> dict[str, Condition]:
    """The training conditions of `runs` by the key the scaling table names them with
    (topkscope.manifest.condition_of): a prediction row's typed condition is looked up, never
    parsed."""
    from topkscope.condition import run_condition

    found = {}
    for run in runs:
        cond = run_condition(run.manifest, experiment="", world_size=None,
                             training_density=None)
        found.setdefault(cond.training_key(), cond)
    return found


def claim_rows(table: pd.DataFrame, workers: int = CLAIM_P,
               sparsifiers: str | Sequence[str] | Mapping[str, Sequence[str]] | None = None,
               errors: dict[str, float] | None = None,
               suffixes: Sequence[str] = tuple(CLAIMS),
               conditions: Mapping[str, Condition] | None = None) -> list[ClaimRow]:
    """The rows per (model, network, sparsifier, training condition, baseline set) at P: the
    sparsifier's predicted speed-up over Dense and Top-k, over Dense with WFBP, and over Dense
    in fp16 (the CLAIMS `suffixes` asked). `sparsifiers`: the methods given, or per model
    ({model: methods}, recorded_selectors), or None: every approximate selector the table
    holds. Each verdict is judged against the model's validated error (default:
    topkscope.perf.published.validated_errors); where a selection time is another device's
    than the compute's (column selection_basis "break-even"), on the break-even selection
    times instead (see rule). conditions: the training conditions behind the table's
    `condition` keys (training_conditions), typed into each row."""
    if errors is None:
        from topkscope.perf.published import validated_errors

        errors = validated_errors()
    if table.empty:
        return []
    if sparsifiers is None:
        sparsifiers = [m for m in dict.fromkeys(table["method"]) if approximate(m)]
    per_model = sparsifiers if isinstance(sparsifiers, Mapping) else {
        model: (sparsifiers,) if isinstance(sparsifiers, str) else tuple(sparsifiers)
        for model in table["model"]}
    rows = []
    at = table[table["workers"] == workers]
    for (model, network), sub in at.groupby(["model", "network"], sort=False):
        condition = text_column(sub, "condition")
        refs = sub[condition == ""].set_index("method")
        for sparsifier in per_model.get(model, ()):
            for _, g in sub[sub["method"] == sparsifier].iterrows():
                for suffix in suffixes:
                    row = _claim_row(refs, g, model, network, suffix, errors)
                    if row is not None:
                        typed = (conditions or {}).get(str(g.get("condition") or ""))
                        if typed is not None:
                            row.set_condition(replace(typed, training_density=float(
                                g["density"]), reference=row.reference))
                        rows.append(row)
    return rows


def claims_rows(table: pd.DataFrame, **options) -> pd.DataFrame:
    """claim_rows as a claims table (topkscope.claims.row.COLUMNS)."""
    return frame(claim_rows(table, **options))


def _rule_now(options=None) -> str:
    from topkscope.perf.published import validated_errors

    return rule(validated_errors())


GAUSSIAN_K = ("gaussiank", "gaussiank-2019")  # the paper's question: its selector's rows
SPEEDUP_QUESTIONS = (
    Question(f"gaussiank_speedup_p{CLAIM_P}", f"Does Gaussian-k speed up training on {CLAIM_P} "
             "GPUs (predicted)?", sparsifiers=GAUSSIAN_K,
             also=tuple(f"speedup_p{CLAIM_P}{s}" for s in CLAIMS if s), summary=5, order=60,
             short=f"Is it faster on {CLAIM_P} GPUs?"),
    Question(f"other_speedup_p{CLAIM_P}", f"Do the other approximate selectors speed up "
             f"training on {CLAIM_P} GPUs (predicted)?",
             also=tuple(f"speedup_p{CLAIM_P}{s}" for s in CLAIMS if s), order=65))
for _suffix, (_baselines, _what) in CLAIMS.items():
    register_claim(Claim(
        f"speedup_p{CLAIM_P}{_suffix}",
        f"Does each approximate selector (Gaussian-k, ...) give {_what} on {CLAIM_P} workers "
        "(predicted)?",
        "{method} gives " + _what + f" at P = {CLAIM_P}", _rule_now, "prediction", "table",
        lambda context, suffix=_suffix: claim_rows(
            context.scaling, sparsifiers=recorded_selectors(context.own_runs),
            suffixes=(suffix,), conditions=training_conditions(context.own_runs)),
        "scaling-breakeven-p16", per_method=True,
        questions=SPEEDUP_QUESTIONS if not _suffix else (),
        show=Presentation("prediction", ", ".join(_baselines), phrases.speedup,
                          phrases.speedup_lead)))
