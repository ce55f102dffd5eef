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
from topkscope.condition import describe, describe_parts, from_record


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


def _pieces(row) -> list[tuple[str, str]]:
    """A row's condition as (kind, phrase) parts (condition.describe_parts), each phrase led by
    its preposition ('at ρ = 0.001', 'after the paper's warm-up (1/64 → 0.004)', 'with
    H = 15'), so two conditions compare part by part."""
    cond = from_record(row)
    out = []
    for kind, text in describe_parts(cond):
        if kind == "density":
            out.append((kind, f"at {text}"))
        elif kind == "warmup":
            out.append((kind, f"after {text}"))
        elif kind == "phase" and cond.phase in ("warm-up", "later-exchanges"):
            out.append((kind, text))
        elif kind == "phase" and cond.phase == "first-exchanges":
            out.append((kind, f"in the {text}"))
        else:
            out.append((kind, f"with {text}"))
    return out


def apart(first, second, methods: bool = False) -> tuple[str, str]:
    """The two rows' names, as short as tells them apart: their models where those differ
    ('FNN-3', 'LSTM-PTB'), else the model with the parts of its condition the other lacks
    ('FNN-3 after the paper's warm-up (1/64 → 0.004)', 'FNN-3 without a warm-up'; 'FNN-3 at
    ρ = 0.005', 'FNN-3 at ρ = 0.001'); methods: each led by its method where the two differ
    ('DGC on FNN-3')."""
    a, b = model(first["model"]), model(second["model"])
    if a == b:
        pieces = [_pieces(r) for r in (first, second)]
        own = [[p for p in mine if p not in other] for mine, other in (pieces, pieces[::-1])]
        warmed = [any(k == "warmup" for k, _ in p) for p in pieces]
        for mine, mine_warm, other_warm in ((own[0], *warmed), (own[1], *warmed[::-1])):
            if other_warm and not mine_warm:
                mine.append(("warmup", "without a warm-up"))
        a, b = (" ".join([name, *(text for _, text in mine)])
                for name, mine in zip((a, b), own))
    if methods and first["sparsifier"] != second["sparsifier"]:
        a, b = f"{method(first['sparsifier'])} on {a}", f"{method(second['sparsifier'])} on {b}"
    return a, b


def several_methods(rows: pd.DataFrame) -> bool:
    """Rows of more than one method (an answer then names each row's)."""
    return "sparsifier" in rows and rows["sparsifier"].nunique() > 1


def extremes(rows: pd.DataFrame, column: str) -> tuple[pd.Series, pd.Series]:
    """(the row with the largest finite `column`, the row with the smallest)."""
    values = pd.to_numeric(rows[column], errors="coerce")
    return rows.loc[values.idxmax()], rows.loc[values.idxmin()]


# ------------------------------------------------------------------ the distribution claims
def gaussian_like(rows: pd.DataFrame) -> str:
    """'a Gaussian's skew and kurtosis window held in 98% of recorded steps for FNN-3, 0% for
    LSTM-PTB; fitted shape β 0.47–2.92 (Gaussian 2)' (two rows of one model told apart by
    their conditions: apart)."""
    text = _share_extremes(rows, "a Gaussian's skew and kurtosis window held in",
                           "of recorded steps")
    beta = span(rows["gennorm_beta"], 2)
    return text + (f"; fitted shape β {beta} (Gaussian 2)" if beta else "")


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
    first, second = apart(best, worst, methods=several_methods(rows))
    return f"{lead} {pct(best['fraction'])} {of} for {first}, {pct(worst['fraction'])} for {second}"


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
    med = span(rows["diff_mean"], 3) if min(finite(rows["diff_mean"]) or [0.0]) >= 0 else \
        signed_span(rows["diff_mean"], 3)
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


def _gain(row) -> float:
    """A comparison's difference as a gain over its reference: points of accuracy as they
    are, % of perplexity negated (lower is better)."""
    x = num(row["diff_mean"])
    return x if str(row.get("diff_unit") or "points") == "points" else -x


def _sent(row) -> str:
    sent = num(row.get("traffic_target"))
    return f", at {number(sent, 2)}× Top-k's traffic" if math.isfinite(sent) else ""


def accuracy(rows: pd.DataFrame) -> str:
    """The difference to Top-k with its interval and seeds, and what it sent, named by method
    (where several) and condition: one row's, else how many match Top-k and the best and the
    worst — '10 of 12 match Top-k; best RedSync (2019) on FNN-3: +0.47 points (95% CI +0.15 to
    +0.79, 5 seeds), at 2.3× Top-k's traffic; worst Rand-k on FNN-3: …'."""
    many = several_methods(rows)
    if len(rows) == 1:
        row = rows.iloc[0]
        name = f"{method(row['sparsifier'])} on {where(row)}" if many else where(row)
        return f"{name}: {_difference(row)}{_sent(row)}"
    better = rows.apply(_gain, axis=1)
    if better.isna().all():
        return ""
    best, worst = rows.loc[better.idxmax()], rows.loc[better.idxmin()]
    a, b = apart(best, worst, methods=many)
    held = int((rows["verdict"] == "holds").sum())
    return (f"{held} of {len(rows)} match Top-k; best {a}: {_difference(best, 2)}"
            f"{_sent(best)}; worst {b}: {_difference(worst, 2)}{_sent(worst)}")


def accuracy_lead(rows: pd.DataFrame) -> str:
    """The largest loss and the best match: 'loses 31.5 points (95% CI 27.1–35.9, 5 seeds) on
    FNN-3 without warm-up; with the paper's, it matches Top-k at 3.7× the traffic'."""
    loss = [(-_gain(r), i) for i, r in rows.iterrows() if math.isfinite(_gain(r))]
    if not loss:
        return ""
    worst = rows.loc[max(loss)[1]]
    held = rows[rows["verdict"] == "holds"]
    if held.empty:
        return f"{_loss(worst)} on {where(worst)}"
    # the matching row to set beside it: of the same model and density where one holds (the
    # warm-up the difference), else the one sending least
    same = held[(held["model"] == worst["model"])
                & (pd.to_numeric(held["training_density"], errors="coerce")
                   == num(worst.get("training_density")))]
    pool = same if len(same) else held
    best = pool.loc[pd.to_numeric(pool["traffic_target"], errors="coerce").idxmin()] \
        if pool["traffic_target"].notna().any() else pool.iloc[0]
    warm = from_record(best).warmup
    if len(same) and from_record(worst).warmup == "none" and warm != "none":
        # the warm-up is the difference; its schedule's numbers are in the answer below
        a = f"{model(worst['model'])} without warm-up"
        own = "with the paper's" if warm == "paper" else "with a warm-up"
    else:
        a, b = apart(worst, best)
        own = b[len(model(best["model"])):].strip() if b.startswith(model(best["model"])) \
            else b
    sent = num(best.get("traffic_target"))
    return (f"{_loss(worst)} on {a}; {own or 'elsewhere'}, it matches Top-k"
            + (f" at {number(sent, 2)}× the traffic" if math.isfinite(sent) else ""))


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


EQUAL_BYTES = 0.1   # a bytes ratio within this of 1 is "the same bytes": an answer omits it


def _compared_one(row, seeds_too: bool = True, who: bool = True) -> str:
    wire = num(row.get("bytes_ratio"))
    difference = _difference(row, 2) if seeds_too else _difference(row.drop("n_seeds"), 2)
    shown = math.isfinite(wire) and (who or abs(wire - 1.0) > EQUAL_BYTES)
    return (f"{row['sparsifier'] + ' ' if who else ''}vs {row['reference'] or 'its reference'}: "
            f"{difference}" + (f", {number(wire, 2)}× the bytes" if shown else ""))


def compared(rows: pd.DataFrame) -> str:
    """The outer-loop comparisons: 'sparseloco: vs diloco lr 0.7 (best of 3): −3.1 points (95% CI
    −3.8 to −2.4), 0.0036× the bytes; vs topk-per-step: …; 3 seeds' (a bytes ratio within
    10% of 1 left out: the question says equal bytes)."""
    n = finite(rows["n_seeds"])
    one = rows["sparsifier"].nunique() == 1
    told = "; ".join(_compared_one(row, seeds_too=False, who=not one)
                     for _, row in rows.iterrows())
    return (f"{rows['sparsifier'].iloc[0]}: " if one else "") + told + (
        f"; {int(max(n))} seeds" if n else "")


def compared_lead(rows: pd.DataFrame) -> str:
    main = rows[rows["claim_key"] == "sparseloco_accuracy"]
    return _compared_one(main.iloc[0] if len(main) else rows.iloc[0])


# ------------------------------------------------------------------ predictions
def speedup(rows: pd.DataFrame) -> str:
    """'84 predictions at P = 16; without a GPU selection time it must select in under
    0.12–93 ms to beat Dense; model error ≤ 27.5%'."""
    text = []
    measured = rows[rows["selection_basis"].astype(str) != "break-even"]
    both = span(pd.concat([measured["speedup_low"], measured["speedup_high"]]), 3, "×")
    if both:
        text.append(f"{both} Dense's speed")
    ms = pd.to_numeric(rows.loc[rows["selection_basis"].astype(str) == "break-even",
                                "breakeven_ms"], errors="coerce").dropna()
    if (ms > 0).any():
        text.append(f"to beat Dense at P = 16 it must select in under {span(ms[ms > 0], 2)} "
                    f"ms")
    if (ms <= 0).any():
        text.append(f"slower than Dense even with free selection in {int((ms <= 0).sum())}")
    errors = finite(rows["model_error"])
    if errors:
        text.append(f"model error ≤ {max(errors):.0%}")
    return "; ".join(text)


def speedup_lead(rows: pd.DataFrame) -> str:
    """The summary's number: the selection time a method must beat where none was measured
    on a GPU, or the predicted speed range; the model's error."""
    ms = pd.to_numeric(rows.loc[rows["selection_basis"].astype(str) == "break-even",
                                "breakeven_ms"], errors="coerce").dropna()
    errors = finite(rows["model_error"])
    error = f" (model error ≤ {max(errors):.0%})" if errors else ""
    if (ms > 0).any():
        return (f"no GPU selection time measured: to beat Dense a selector must take under "
                f"{span(ms[ms > 0], 2)} ms{error}")
    return speedup(rows)


def time_to_target(rows: pd.DataFrame) -> str:
    mean = span(rows["diff_mean"], 3, "×")
    never = int(sum(finite(rows["n_never"])))
    return (f"{len(rows)} predictions at P = 16" + (f", {mean} Top-k's speed to the target"
                                                    if mean else "")
            + (f"; {never} seed predictions never reached it" if never else ""))
