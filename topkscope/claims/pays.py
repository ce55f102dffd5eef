"""Would sparsification pay? One answer for a step-time prediction, the same in `topkscope
scale` and `topkscope report` (topkscope.claims.answers.pays_answer): it reads the table of
topkscope.perf.pays.run_prediction (or of topkscope.perf.report.scaling_table) and decides
nothing the rules of topkscope.claims.verdicts do not.

Per network at P workers: the fastest sparse method against the fastest baseline that sends
everything (Dense, Dense + WFBP, Dense fp16; for an outer-loop run DDP and dense DiLoCo every H
steps: topkscope.perf.pays.BASELINES), s = t_step(baseline) / t_step(method), e the model's
validated error for that comparison (topkscope.perf.published.comparison_error):

    speedup_verdict([s], [e])        holds (yes) if s > 1 + e, fails (no) if s < 1 - e, else
                                     inconclusive (not settled: within the model's error)
    free_selection_verdict           where the method's selection time is another device's
                                     than the compute's (selection_basis break-even): no if
                                     the method is slower beyond e even with free selection,
                                     else not settled

with the table's break-even selection (the longest that still beats every baseline:
topkscope.perf.model.breakeven_select), where the compute came from, and the nearest
published measurements (topkscope.perf.evidence.nearest). The word over networks is
topkscope.claims.answers.word_of's.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from topkscope.claims.verdicts import free_selection_verdict, speedup_verdict
from topkscope.perf.pays import BASELINES, OUTER_DENSE, breakeven_vs_baselines

WORD = {"holds": "yes", "fails": "no", "inconclusive": "not settled"}
NEAREST = 2  # published settings cited per network


def method_name(method: str) -> str:
    """A method's display name; the outer-loop prediction's dense exchange every H steps is
    "dense DiLoCo"."""
    from topkscope.sparsify import label_of

    return "dense DiLoCo" if method == OUTER_DENSE else label_of(method)


@dataclass(frozen=True)
class Paid:
    """The answer at one network and P: the rule's verdict, its word and the sentence."""

    network: str
    workers: int
    verdict: str
    text: str

    @property
    def word(self) -> str:
        return WORD[self.verdict]


def _errors() -> dict[str, float]:
    from topkscope.perf.published import validated_errors

    return validated_errors()


def _nearest(row: pd.Series) -> str:
    from topkscope.perf import evidence

    try:
        near = evidence.nearest(int(row["d"]), int(row["workers"]), str(row["network"]),
                                float(row["density"]), n=NEAREST)
    except (OSError, ValueError) as exc:
        return f"no published measurement read ({' '.join(str(exc).split())})"
    return "; ".join(evidence.describe(r) for r in near.to_dict("records"))


def paid(rows: pd.DataFrame, errors: dict[str, float] | None = None) -> Paid | None:
    """The answer for the rows of one network at one P (None without a Dense and a sparse
    row)."""
    from topkscope.perf.published import comparison_error

    rows = rows.drop_duplicates("method")
    by = rows.set_index("method")
    if "dense" not in by.index:
        return None
    base = by[by.index.isin(BASELINES)]
    sparse = by[~by.index.isin(BASELINES)]
    if sparse.empty:
        return None
    errors = _errors() if errors is None else errors
    ref_name = base["t_step"].astype(float).idxmin()
    best_name = sparse["t_step"].astype(float).idxmin()
    ref, best = base.loc[ref_name], sparse.loc[best_name]
    error = comparison_error(best_name, ref_name, errors)
    speedup = float(ref["t_step"]) / float(best["t_step"])
    breakeven = float(breakeven_vs_baselines(rows)[rows["method"] == best_name].iloc[0])
    measured = str(best.get("selection_basis", "measured")) != "break-even"
    if measured:
        verdict, _ = speedup_verdict([speedup], [error])
        judged = (f"{speedup:.3g}x {method_name(ref_name)}'s speed, model error +-{error:.1%}")
    else:
        free = ((float(ref["t_step"]) - float(ref["t_select"]))
                / (float(best["t_step"]) - float(best["t_select"])))
        verdict = free_selection_verdict([ref_name] if free < 1 - error else [])
        judged = (f"its selection time was not measured on the compute's device, so judged "
                  f"with free selection: "
                  f"{free:.3g}x {method_name(ref_name)}'s speed, model error +-{error:.1%}")
    if breakeven > 0:
        select = (f"it stays ahead of every baseline while its selection "
                  f"({float(best['t_select']) * 1e3:.3g} ms) takes below "
                  f"{breakeven * 1e3:.3g} ms")
    else:
        select = "no selection time can make it beat every baseline"
    every = (f", exchanging every {int(best['inner_steps'])} steps"
             if "inner_steps" in best and pd.notna(best["inner_steps"])
             and int(best["inner_steps"]) > 1 else "")
    text = (f"{best['network']}, P = {int(best['workers'])}: {WORD[verdict]} — "
            f"{method_name(best_name)}{every} {float(best['t_step']) * 1e3:.3g} ms per step against "
            f"{method_name(ref_name)}'s {float(ref['t_step']) * 1e3:.3g} ms ({judged}); {select}; "
            f"compute: {best['compute_source']}; nearest published: {_nearest(best)}")
    return Paid(str(best["network"]), int(best["workers"]), verdict, text)


def pays(scaling: pd.DataFrame, workers: int) -> list[Paid]:
    """The answer per network of `scaling` at P = `workers` (module docstring)."""
    if scaling is None or scaling.empty:
        return []
    at = scaling[scaling["workers"] == workers]
    errors = _errors()
    found = [paid(rows, errors) for _, rows in at.groupby("network", sort=False)]
    return [p for p in found if p is not None]
