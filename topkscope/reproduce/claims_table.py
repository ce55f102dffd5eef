"""results/claims.csv and claims.md: the paper's claims per model with verdicts.

The table and its verdict rules come from topkscope.analysis.claims (one rule per claim, in code
and in the README); this module only adds the readable names and renders markdown.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from topkscope.plots.titles import dataset_name, model_name, sparsifier_name

VERDICT_MARKS = {"holds": "holds ✅", "fails": "fails ❌", "mixed": "mixed ⚠️",
                 "insufficient-data": "insufficient data"}


def claims_table(runs: Iterable) -> pd.DataFrame:
    """topkscope.analysis.claims.build over the loaded runs, plus what was run: the profile and
    the model arguments (e.g. a narrower width) of the runs behind each row."""
    from topkscope.analysis import claims

    runs = list(runs)
    table = claims.build(runs)
    setting: dict[tuple, tuple[str, str]] = {}
    for run in runs:
        key = claims.model_key(run.manifest)
        args = (run.manifest.get("config") or {}).get("model_args") or {}
        setting.setdefault(key, (str(run.manifest.get("profile") or ""),
                                 ", ".join(f"{k}={v}" for k, v in sorted(args.items()))))
    keys = [claims.model_key(dict(zip(("model", "dataset", "dataset_substitute"), row)))
            for row in table[["model", "dataset", "dataset_substitute"]].itertuples(index=False)]
    keys = [tuple(None if isinstance(v, float) and v != v else v for v in k) for k in keys]
    table["profile"] = [setting.get(k, ("", ""))[0] for k in keys]
    table["model_args"] = [setting.get(k, ("", ""))[1] for k in keys]
    return table


def claims_markdown(table: pd.DataFrame) -> str:
    """A markdown table: model, dataset (+ substitution), claim, sparsifier, verdict, evidence."""
    if len(table) == 0:
        return "_no claims could be evaluated (no runs)_"
    lines = ["| model | dataset | claim | sparsifier | units | fraction | verdict | evidence |",
             "|---|---|---|---|---|---|---|---|"]
    for row in table.itertuples(index=False):
        sub = row.dataset_substitute if isinstance(row.dataset_substitute, str) else None
        frac = "" if pd.isna(row.fraction) else f"{row.fraction:.2f}"
        sparsifiers = ", ".join(sparsifier_name(s) for s in str(row.sparsifier).split(","))
        args = getattr(row, "model_args", "")
        model = model_name(row.model) + (f" ({args})" if isinstance(args, str) and args else "")
        cells = [model, dataset_name(row.dataset, sub),
                 row.statement or row.claim,
                 sparsifiers, str(row.n_units), frac, VERDICT_MARKS.get(row.verdict, row.verdict),
                 str(row.evidence)]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    rules = table.drop_duplicates("claim")[["claim", "rule"]]
    lines += ["", "Verdict rules:", ""]
    lines += [f"- **{r.claim}**: {r.rule}" for r in rules.itertuples(index=False)]
    return "\n".join(lines)
