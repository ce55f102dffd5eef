"""A claim of one's own, in one file (docs/development.md, "A claim"): is u free of spikes —
does its largest magnitude stay within 10 standard deviations? Unit: one recorded u (the
recorder's max_abs and std columns); the fraction rule decides, as for the built-in claims.
Importing this file registers it; `unregister()` takes it out again."""

import numpy as np

from topkscope import claims

NAME = "no_spikes"


def evaluate(units) -> list[dict]:
    """The claim on one condition's units (topkscope.analysis.units.ConditionUnits)."""
    u = units.u
    if u.empty or not {"max_abs", "std"} <= set(u.columns):
        return [claims.fraction_row(np.zeros(0, bool), "no recorded u")]
    ratio = (u["max_abs"] / u["std"]).to_numpy(float)
    return [claims.fraction_row(ratio <= 10.0, f"median max|u|/std {np.median(ratio):.3g}",
                                u["_run"].to_numpy(), u["step"].to_numpy())]


CLAIM = claims.register_claim(claims.Claim(
    NAME, "Is u free of spikes?", "the largest |u| stays within 10 standard deviations of u",
    f"unit = one recorded u; criterion max|u| <= 10 std; {claims.FRACTION_RULE}",
    "distribution", "condition", evaluate))


def unregister() -> None:
    claims.unregister_claim(NAME)
