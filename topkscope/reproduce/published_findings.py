"""The README's sentences on the published GPU runs, generated from the committed derived
tables (results/reference/published/claims.csv and validation.csv, written by
`topkscope claims` and `python -m topkscope.perf.gpu_runs` on the imported runs), between
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
START, END = "<!-- published-runs:start -->", "<!-- published-runs:end -->"
SOURCE = "kljp/topk_results@4d5937cd6c81f7a3869de9d1355bbc520d72ee27"


def _range(values, fmt: str = "{:+.3g}") -> str:
    """"lo to hi" (one value when they agree) of the finite values, each formatted by fmt."""
    x = [float(v) for v in values if math.isfinite(float(v))]
    lo, hi = min(x), max(x)
    return fmt.format(lo) if math.isclose(lo, hi) else f"{fmt.format(lo)} to {fmt.format(hi)}"


def _verdicts(frame: pd.DataFrame) -> str:
    return ", ".join(f"{n} {v}" for v, n in frame["verdict"].value_counts().sort_index().items())


def prose(claims: pd.DataFrame, validation: pd.DataFrame) -> str:
    """The sentences: accuracy differences per model and comparison (with the verdicts), the
    selection share, the model's check on the iterations."""
    from topkscope.reproduce.findings import model_name

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
        shares = share["evidence"].str.extract(r"selection share of an iteration (\d+)%")[0]
        parts.append(f"Top-k's selection took {_range(shares.astype(float), '{:.0f}')}% of an "
                     f"iteration ({', '.join(sorted(model_name(m) for m in set(share['model'])))}, "
                     f"{len(share)} "
                     f"node(s); longer than forward + backward: {_verdicts(share)}).")
    sparse = validation[validation["family"] == "one-node sparse"]
    if len(sparse):
        parts.append(f"The step-time model predicts {_range(sparse['ratio'], '{:.3f}')}× the "
                     f"measured sparse iterations ({len(sparse)} held-out rows): the logged "
                     f"sparse exchange took {_range(sparse['communicate_s'] * 1e3, '{:.1f}')} "
                     f"ms, the model's all-gather "
                     f"{_range(sparse['predicted_communicate_s'] * 1e3, '{:.2f}')} ms "
                     "(docs/scaling.md).")
    return " ".join(parts)


def with_published(text: str, claims_csv: Path = CLAIMS_CSV,
                   validation_csv: Path = VALIDATION_CSV) -> str:
    """text with its published-runs block regenerated; unchanged without the markers or the
    committed tables."""
    if START not in text or END not in text or not Path(claims_csv).is_file() \
            or not Path(validation_csv).is_file():
        return text
    block = prose(pd.read_csv(claims_csv), pd.read_csv(validation_csv))
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{block}\n{END}{tail}"
