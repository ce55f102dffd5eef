"""A claim of one's own, in one file (docs/development.md, "A claim"): is u free of spikes —
does its largest magnitude stay within 10 standard deviations? Unit: one recorded u (the
recorder's max_abs and std columns); the fraction rule decides, as for the built-in claims.
The one registration names its question, its family, the table and column that show it, how
its answer tells the numbers, and its figure: the README's answers, docs/findings.md, the
LaTeX tables and the report then show it like a built-in claim. Importing this file registers
it; `unregister()` takes it out again."""

import numpy as np

from topkscope import claims
from topkscope.claims import phrases

NAME = "no_spikes"


def evaluate(units) -> list[dict]:
    """The claim on one condition's units (topkscope.analysis.units.ConditionUnits)."""
    u = units.u
    if u.empty or not {"max_abs", "std"} <= set(u.columns):
        return [claims.fraction_row(np.zeros(0, bool), "no recorded u")]
    u = u.drop_duplicates(["_run", "step", "rank"])  # one unit per recorded u, any density
    ratio = (u["max_abs"] / u["std"]).to_numpy(float)
    return [claims.fraction_row(ratio <= 10.0, f"median max|u|/std {np.median(ratio):.3g}",
                                u["_run"].to_numpy(), u["step"].to_numpy())]


def numbers(rows) -> str:
    """How the answer tells its numbers: the share of recorded steps without a spike."""
    return f"the largest |u| stayed within 10σ in {phrases.pct_span(rows['fraction'])} of " \
           "recorded steps"


CLAIM = claims.register_claim(claims.Claim(
    NAME, "Is u free of spikes?", "the largest |u| stays within 10 standard deviations of u",
    f"unit = one recorded u; criterion max|u| <= 10 std; {claims.FRACTION_RULE}",
    "distribution", "condition", evaluate, figure="histogram",
    questions=(claims.Question(NAME, "Is u free of spikes (max |u| within 10σ)?", order=90),),
    show=claims.Presentation("distribution", "no spike (max |u| ≤ 10σ)", numbers)))


def unregister() -> None:
    claims.unregister_claim(NAME)
