"""How an answer tells its numbers: the phrases the registered claims name in their
`Presentation` (numbers: one profile's rows -> the words after the answer's word; lead: every
profile's rows -> the one number of the README's summary line). Each reads a claims row's
fields only (never its evidence or cause texts), says a condition as people do
(topkscope.condition.describe), and keeps to plain words: a share "of recorded steps", an
interval "95% CI", a margin as "Top-k keeps about N·k/d of ‖u‖² where a random k-subset keeps
k/d".

    numbers(rows: DataFrame) -> str     rows: one profile's rows of one question
    lead(rows: DataFrame) -> str        rows: every profile's, with `_profile` naming it
"""

from __future__ import annotations

import math

import pandas as pd

from topkscope.analysis.criteria import count_band_text
from topkscope.condition import describe, from_record


# ------------------------------------------------------------------ numbers as people say them
def num(value) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return math.nan
    return x


def finite(values) -> list[float]:
    return [x for x in (num(v) for v in values) if math.isfinite(x)]


def pct(x) -> str:
    """'98%', '0.4%', '100%'."""
    x = num(x)
    if not math.isfinite(x):
        return "?"
    return f"{x:.1%}" if 0 < x < 0.01 else f"{x:.0%}"


def pct_span(values) -> str:
    """'12%–46%' / '100%' over the finite values."""
    x = finite(values)
    if not x:
        return ""
    lo, hi = pct(min(x)), pct(max(x))
    return lo if lo == hi else f"{lo}–{hi}"


def number(x, digits: int = 3) -> str:
    """A number without exponent notation: '0.848', '25.5', '550', '0.00012'."""
    x = num(x)
    if not math.isfinite(x):
        return "?"
    if x == 0:
        return "0"
    if abs(x) >= 10 ** digits:
        return f"{x:,.0f}"
    text = f"{x:.{digits}g}"
    if "e" in text:
        text = f"{x:.{max(digits, 1) + int(-math.floor(math.log10(abs(x))))}f}".rstrip("0")
    return text


def signed(x, digits: int = 3) -> str:
    """'+0.75', '−30.3' (a true minus sign)."""
    x = num(x)
    if not math.isfinite(x):
        return "?"
    text = number(abs(x), digits)
    return ("−" if x < 0 else "+") + text


def span(values, digits: int = 3, unit: str = "") -> str:
    """'0.47–2.92' / '1.35' (with a unit after each end: '1.9×–3.6×')."""
    x = finite(values)
    if not x:
        return ""
    lo, hi = number(min(x), digits) + unit, number(max(x), digits) + unit
    return lo if lo == hi else f"{lo}–{hi}"


def signed_span(values, digits: int = 3) -> str:
    """'−6.45 to +0.16' / '−20.2': the range of signed differences, true minus signs."""
    x = finite(values)
    if not x:
        return ""
    lo, hi = signed(min(x), digits), signed(max(x), digits)
    return lo if lo == hi else f"{lo} to {hi}"


def ci(row, unit: str = "", digits: int = 3) -> str:
    """'95% CI −35.7 to −24.9' for a row's diff interval ('' without one)."""
    low, high = num(row["ci_low"]), num(row["ci_high"])
    if not (math.isfinite(low) and math.isfinite(high)):
        return ""
    return f"95% CI {signed(low, digits)} to {signed(high, digits)}{unit}"


def share_ci(row) -> str:
    """'95% CI 93–100%' of a row's share ('' without an interval)."""
    low, high = num(row.get("fraction_low")), num(row.get("fraction_high"))
    if not (math.isfinite(low) and math.isfinite(high)):
        return ""
    return f"95% CI {pct(low).rstrip('%')}–{pct(high)}"


def seeds(row) -> str:
    n = num(row.get("n_seeds"))
    if not math.isfinite(n):
        return ""
    return f"{int(n)} seed" + ("" if int(n) == 1 else "s")


# ------------------------------------------------------------------ names
def model(name) -> str:
    """'FNN-3', 'VGG-16-BN' (the display name without its size)."""
    from topkscope.plots.titles import model_name

    return model_name(str(name)).split(" (")[0]


def method(name) -> str:
    from topkscope.plots.titles import sparsifier_name

    return sparsifier_name(str(name))


def models(rows: pd.DataFrame) -> str:
    names = list(dict.fromkeys(model(m) for m in rows["model"]))
    return ", ".join(names) if len(names) <= 3 else f"{len(names)} models"


def where(row, *, with_model: bool = True, **options) -> str:
    """'FNN-3 at ρ = 0.001 after the paper's warm-up (1/64 → 0.004)': a row's model and
    condition in words (options: topkscope.condition.describe's)."""
    text = describe(from_record(row), **options)
    if not with_model:
        return text
    return f"{model(row['model'])} at {text}" if text else model(row["model"])


def apart(first, second) -> tuple[str, str]:
    """The two rows' names, as short as tells them apart: their models where those differ
    ('FNN-3', 'LSTM-PTB'), else the model with the parts of its condition the other lacks
    ('FNN-3 during the warm-up, at ρ = 1/64', 'FNN-3 at ρ = 0.001')."""
    a, b = model(first["model"]), model(second["model"])
    if a != b:
        return a, b
    parts = [describe(from_record(r)).split(", ") for r in (first, second)]
    own = [[p for p in mine if p not in other] for mine, other in (parts, parts[::-1])]
    named = []
    for name, mine in zip((a, b), own):
        text = ", ".join(mine)
        named.append(f"{name} {text}" if text.startswith("during") else
                     f"{name} at {text}" if text else name)
    return named[0], named[1]


def extremes(rows: pd.DataFrame, column: str) -> tuple[pd.Series, pd.Series]:
    """(the row with the largest finite `column`, the row with the smallest)."""
    values = pd.to_numeric(rows[column], errors="coerce")
    return rows.loc[values.idxmax()], rows.loc[values.idxmin()]


# ------------------------------------------------------------------ the distribution claims
def gaussian_like(rows: pd.DataFrame) -> str:
    """'u met a Gaussian's skew and kurtosis window in 98% of recorded steps for FNN-3 at
    ρ = 0.001 after …, in 0% for LSTM-PTB at ρ = 0.001; fitted shape β 0.47–2.92 (Gaussian 2,
    Laplace 1)'."""
    text = _share_extremes(rows, "u met a Gaussian's skew and kurtosis window in",
                           "of recorded steps")
    beta = span(rows["gennorm_beta"], 2)
    return text + (f"; fitted shape β {beta} (Gaussian 2, Laplace 1)" if beta else "")


def gaussian_like_lead(rows: pd.DataFrame) -> str:
    best, worst = extremes(rows, "fraction")
    if best is worst or num(best["fraction"]) == num(worst["fraction"]):
        return f"u met a Gaussian's skew and kurtosis window in {pct(best['fraction'])} of " \
               "recorded steps"
    first, second = apart(best, worst)
    return (f"{pct(best['fraction'])} of recorded steps met a Gaussian's skew and kurtosis "
            f"window for {first}, {pct(worst['fraction'])} for {second}; fitted β "
            f"{span(rows['gennorm_beta'], 2)} (Gaussian 2)")


def _share_extremes(rows: pd.DataFrame, lead: str, of: str) -> str:
    if len(rows) == 1:
        row = rows.iloc[0]
        interval = share_ci(row)
        return (f"{lead} {pct(row['fraction'])} {of}" + (f" ({interval})" if interval else "")
                + f" for {where(row)}")
    best, worst = extremes(rows, "fraction")
    if num(best["fraction"]) == num(worst["fraction"]):
        return f"{lead} {pct(best['fraction'])} {of} in each of {len(rows)} conditions"
    return (f"{lead} {pct(best['fraction'])} {of} for {where(best)}, "
            f"{pct(worst['fraction'])} for {where(worst)}")


def _kept(rows: pd.DataFrame) -> str:
    gain = finite(rows.get("energy_gain", pd.Series(dtype=float)))
    if not gain:
        return ""
    return (f"Top-k keeps about {span(gain, 2)}·k/d of ‖u‖² where a random k-subset keeps "
            "k/d")


def bound(rows: pd.DataFrame) -> str:
    """'δ ≤ (1 − k/d)² in 100% of recorded steps in each of 11 conditions; Top-k keeps about
    5.8–35·k/d of ‖u‖² where a random k-subset keeps k/d'."""
    shares = pct_span(rows["fraction"])
    text = (f"δ ≤ (1 − k/d)² in {shares} of recorded steps"
            + (f" in each of {len(rows)} conditions" if len(rows) > 1 and "–" not in shares
               else " per condition" if len(rows) > 1 else f" for {where(rows.iloc[0])}"))
    kept = _kept(rows)
    return text + (f"; {kept}" if kept else "")


def bound_lead(rows: pd.DataFrame) -> str:
    kept = _kept(rows)
    return (f"δ ≤ (1 − k/d)² in {pct_span(rows['fraction'])} of recorded steps"
            + (f"; {kept}" if kept else ""))


def count(rows: pd.DataFrame) -> str:
    """'its count was within [2k/3, 4k/3] in 12%–46% of steps; median count 1.3–25.5 k'."""
    text = _share_extremes(rows, f"its count was within {count_band_text()} in", "of steps")
    med = span(rows["count_over_k"], 3)
    return text + (f"; median count {med}·k" if med else "")


def count_lead(rows: pd.DataFrame) -> str:
    best, worst = extremes(rows, "fraction")
    return (f"the published Gaussian-k sent within {count_band_text()} in "
            f"{pct_span(rows['fraction'])} of steps (median {span(rows['count_over_k'], 2)}·k)")


def effect(rows: pd.DataFrame) -> str:
    """'in 61%–100% of recorded steps; median 0.97 of global Top-k's kept energy'."""
    text = f"in {pct_span(rows['fraction'])} of recorded steps"
    unit = next((u for u in rows["diff_unit"] if isinstance(u, str) and u), "")
    med = span(rows["diff_mean"], 3)
    return text + (f"; median {med} {unit}".rstrip() if med else "")


# ------------------------------------------------------------------ convergence
def _difference(row, digits: int = 3) -> str:
    """'−30.3 points (95% CI −35.7 to −24.9, 5 seeds)'."""
    unit = str(row["diff_unit"] or "points")
    unit = {"% of Top-k's": "% perplexity", "% of the reference's": "% perplexity"}.get(unit,
                                                                                      unit)
    parts = [p for p in (ci(row, digits=digits), seeds(row)) if p]
    return f"{signed(row['diff_mean'], digits)} {unit}" + (f" ({', '.join(parts)})"
                                                           if parts else "")


def accuracy(rows: pd.DataFrame) -> str:
    """Per condition, the difference to Top-k with its interval and seeds, and what it sent:
    'FNN-3 at ρ = 0.001 with no warm-up: −30.3 points (95% CI …, 5 seeds); …'."""
    parts = []
    for _, row in rows.iterrows():
        sent = num(row.get("traffic_target"))
        parts.append(f"{where(row)}: {_difference(row)}"
                     + (f", sending {number(sent, 2)}× Top-k's elements"
                        if math.isfinite(sent) else ""))
    return "; ".join(parts)


def accuracy_lead(rows: pd.DataFrame) -> str:
    """The largest loss and the best match: 'loses 30.3 points on FNN-3 at ρ = 0.001 with no
    warm-up (95% CI 24.9–35.7, 5 seeds); after the paper's warm-up it matches Top-k sending
    3.6× its elements'."""
    loss = [(-num(r["diff_mean"]) if r["diff_unit"] == "points" else num(r["diff_mean"]), i)
            for i, r in rows.iterrows() if math.isfinite(num(r["diff_mean"]))]
    if not loss:
        return ""
    worst = rows.loc[max(loss)[1]]
    held = rows[rows["verdict"] == "holds"]
    text = f"{_loss(worst)} on {where(worst)}"
    if len(held):
        best = held.loc[pd.to_numeric(held["traffic_target"], errors="coerce").idxmin()] \
            if held["traffic_target"].notna().any() else held.iloc[0]
        sent = num(best.get("traffic_target"))
        text += (f"; {where(best, with_model=False)} it matches Top-k"
                 + (f", sending {number(sent, 2)}× its elements" if math.isfinite(sent) else ""))
    return text


def _loss(row) -> str:
    x = num(row["diff_mean"])
    unit = str(row["diff_unit"] or "points")
    interval = ""
    low, high = num(row["ci_low"]), num(row["ci_high"])
    if unit == "points":
        verb = "loses" if x < 0 else "gains"
        if math.isfinite(low):
            a, b = sorted((abs(low), abs(high))) if x < 0 else (low, high)
            interval = f"95% CI {number(a)}–{number(b)}, "
        return f"{verb} {number(abs(x))} points ({interval}{seeds(row)})"
    verb = "raises perplexity" if x > 0 else "lowers perplexity"
    if math.isfinite(low):
        interval = f"95% CI {signed(low)} to {signed(high)}%, "
    return f"{verb} by {number(abs(x))}% ({interval}{seeds(row)})"


def compared(rows: pd.DataFrame) -> str:
    """The outer-loop comparisons: 'sparseloco against diloco: −0.41 points (95% CI …,
    3 seeds), 0.013× the bytes'."""
    parts = []
    for _, row in rows.iterrows():
        wire = num(row.get("bytes_ratio"))
        parts.append(f"{row['sparsifier']} against {row['reference'] or 'its reference'}: "
                     f"{_difference(row)}"
                     + (f", {number(wire, 2)}× the bytes" if math.isfinite(wire) else ""))
    return "; ".join(parts)


def compared_lead(rows: pd.DataFrame) -> str:
    main = rows[rows["claim_key"] == "sparseloco_accuracy"]
    row = main.iloc[0] if len(main) else rows.iloc[0]
    wire = num(row.get("bytes_ratio"))
    return (f"{row['sparsifier']} against {row['reference']}: {_difference(row)}"
            + (f", sending {number(wire, 2)}× the bytes" if math.isfinite(wire) else ""))


# ------------------------------------------------------------------ predictions
def speedup(rows: pd.DataFrame) -> str:
    """'84 predictions at P = 16; without a GPU selection time it must select in under
    0.12–93 ms to beat Dense; model error ≤ 27.5%'."""
    text = [f"{len(rows)} predictions at P = 16"]
    measured = rows[rows["selection_basis"].astype(str) != "break-even"]
    both = span(pd.concat([measured["speedup_low"], measured["speedup_high"]]), 3, "×")
    if both:
        text.append(f"{both} Dense's speed")
    ms = pd.to_numeric(rows.loc[rows["selection_basis"].astype(str) == "break-even",
                                "breakeven_ms"], errors="coerce").dropna()
    if (ms > 0).any():
        text.append(f"with no GPU selection time measured, it must select in under "
                    f"{span(ms[ms > 0], 2)} ms to beat Dense")
    if (ms <= 0).any():
        text.append(f"slower than Dense even with free selection in {int((ms <= 0).sum())}")
    errors = finite(rows["model_error"])
    if errors:
        text.append(f"model error up to {max(errors):.0%}")
    return "; ".join(text)


def speedup_lead(rows: pd.DataFrame) -> str:
    return speedup(rows)


def time_to_target(rows: pd.DataFrame) -> str:
    mean = span(rows["diff_mean"], 3, "×")
    never = int(sum(finite(rows["n_never"])))
    return (f"{len(rows)} predictions at P = 16" + (f", {mean} Top-k's speed to the target"
                                                    if mean else "")
            + (f"; {never} seed predictions never reached it" if never else ""))
