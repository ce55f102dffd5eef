"""Reading a claims table of any schema version into the current one, in one place.

    table, derived = current(pd.read_csv("claims.csv"))    # or read("claims.csv")

Schema 1 (no `schema_version` column, up to the fourth wave) and earlier versions of it lacked
columns the renderers read: `section`, `cause`, `diff_mean`, `n_failed_seeds`,
`traffic_target`, the prediction columns, and everything schema 2 added (`reason`,
`diff_unit`, the count percentiles, the speed-up bands, `n_never`, `bytes_ratio`). `current`
adds each missing column (empty), derives the ones that follow from a row's own columns by the
claims' rules (section from the claim's name, cause and reason from the verdict rule's inputs,
a t-interval's middle as diff_mean), renames the network presets to today's names, and says
whether it derived anything. Numbers that only the evidence text of an old table holds stay
empty: nothing is read back out of prose.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from topkscope.analysis import criteria
from topkscope.claims import verdicts
from topkscope.claims.row import COLUMNS, NUMERIC_COLUMNS, SCHEMA_VERSION


def section_of(claim: str, sparsifier: str, condition=None) -> str:
    """The section a schema-1 row belongs to, from its claim, sparsifier and condition (the
    rule the builder applied before rows carried it)."""
    from topkscope.analysis.selection import by_construction

    claim, condition = str(claim), str(condition or "")
    if "speedup" in claim or condition.startswith("prediction"):
        return "prediction"
    if claim == "below_classic" or (claim.endswith(("_count_in_training", "_count"))
                                     and by_construction(str(sparsifier))):
        return "check"
    if claim == "contraction_explains_convergence":
        return "explanation"
    if condition.startswith("published"):
        return "published"
    if claim.endswith(("_accuracy", "_traffic")):
        return "convergence"
    return "distribution"


def version_of(table: pd.DataFrame) -> int:
    """The table's schema version (1 without the column)."""
    if "schema_version" not in table or table["schema_version"].dropna().empty:
        return 1
    return int(table["schema_version"].dropna().max())


def _text(value) -> str:
    return value if isinstance(value, str) else ""


def current(table: pd.DataFrame) -> tuple[pd.DataFrame, bool]:
    """(table, derived): the table in the current schema (module docstring); derived is True
    when a column was derived from a row's other columns (the renderers say so)."""
    version = version_of(table)
    if version > SCHEMA_VERSION:
        raise ValueError(f"claims table of schema version {version}; this topkscope reads up "
                         f"to {SCHEMA_VERSION}: update topkscope")
    table = table.reset_index(drop=True).copy()
    derived = False
    for col in COLUMNS:
        if col not in table:
            table[col] = (math.nan if col in NUMERIC_COLUMNS
                          else pd.Series([""] * len(table), dtype=object, index=table.index))
            if col == "schema_version":
                table[col] = SCHEMA_VERSION
    for col in COLUMNS:
        if col not in NUMERIC_COLUMNS and col != "schema_version":
            table[col] = table[col].astype(object)
            blank = table[col].isna()
            if col not in ("model", "dataset", "dataset_substitute"):
                table.loc[blank, col] = ""
    for i, row in table.iterrows():
        if not _text(row["section"]):
            table.at[i, "section"] = section_of(row["claim"], row["sparsifier"], row["condition"])
            derived = True
        section = table.at[i, "section"]
        if section == "convergence" and not _text(row["metric"]):
            table.at[i, "metric"] = "accuracy"
        if not _text(row["cause"]) and section in ("distribution", "check", "convergence"):
            table.at[i, "cause"] = _derived_cause(table.loc[i])
            derived = True
        if section == "convergence" and pd.isna(row["diff_mean"]) and not pd.isna(row["ci_low"]):
            table.at[i, "diff_mean"] = (row["ci_low"] + row["ci_high"]) / 2  # a t-interval
            derived = True
        if version < 2 and str(row["verdict"]) not in verdicts.DECIDED and not _text(
                row["reason"]):
            table.at[i, "reason"] = _derived_reason(table.loc[i])
            derived = True
        if version < 2 and section == "convergence" and not _text(row["diff_unit"]):
            table.at[i, "diff_unit"] = ("% of Top-k's" if table.at[i, "metric"] == "perplexity"
                                        else "points")
    table["schema_version"] = SCHEMA_VERSION
    return with_current_networks(table[COLUMNS + [c for c in table if c not in COLUMNS]]), derived


def read(path: str | Path) -> pd.DataFrame:
    """A claims CSV of any schema version, in the current one."""
    return current(pd.read_csv(path))[0]


def with_current_networks(table: pd.DataFrame) -> pd.DataFrame:
    """table with its `network` column in today's preset names (a table written before the
    fitted presets took the plain names: topkscope.perf.networks.current_names)."""
    from topkscope.perf.networks import current_names

    if "network" not in table or not table["network"].map(_text).any():
        return table
    names = current_names([n for n in table["network"].map(_text).unique() if n])
    return table.assign(network=table["network"].map(
        lambda n: names.get(str(n), n) if isinstance(n, str) else n))


def _number(row: pd.Series, name: str, default: float = 0.0) -> float:
    value = row.get(name, math.nan)
    return default if pd.isna(value) else float(value)


def _derived_reason(row: pd.Series) -> str:
    """The reason of an undecided schema-1 row from its own columns: the fraction rule's (units,
    and a share interval straddling a cut is taken as on the cut), the paired-seed rule's
    (seeds, failed seeds), a prediction's (its selection basis)."""
    verdict, section = str(row["verdict"]), str(row["section"])
    if section in ("distribution", "check"):
        n = int(_number(row, "n_units"))
        return verdicts.fraction_reason(verdict, n, criteria.ZERO_EVENT_BLOCKS) or "not-measured"
    if section == "convergence":
        return verdicts.convergence_reason(
            verdict, int(_number(row, "n_seeds")), _number(row, "ci_low", math.nan),
            _number(row, "ci_high", math.nan),
            int(_number(row, "n_failed_seeds") + _number(row, "n_unfinished_seeds"))
        ) or "not-measured"
    if section == "prediction":
        return ("not-measured-on-device" if _text(row["selection_basis"]) == "break-even"
                else "within-model-error")
    if section == "published":
        return "seeds-not-published"
    return "not-significant" if verdict == "inconclusive" else "too-few-seeds"


def _derived_cause(row: pd.Series) -> str:
    if row["section"] != "convergence":
        n = int(_number(row, "n_units"))
        passed = round(_number(row, "fraction") * n)
        return verdicts.fraction_cause(passed, n)
    n_seeds = int(_number(row, "n_seeds"))
    failed = int(_number(row, "n_failed_seeds"))
    margin = row["margin"] if not pd.isna(row["margin"]) else criteria.default_margin(
        row["metric"])
    _, cause = verdicts.convergence_verdict(row["ci_low"], row["ci_high"], n_seeds, failed,
                                            row["metric"], margin)
    if str(row["claim"]).endswith("_traffic"):
        return _derived_traffic_cause(row, cause)
    return cause


def _derived_traffic_cause(row: pd.Series, accuracy_cause: str) -> str:
    """The cause of a traffic row written before per-phase traffic: its stored verdict
    explained by the accuracy interval and the whole-run ratio (mean over seeds)."""
    accuracy, _ = verdicts.convergence_verdict(
        row["ci_low"], row["ci_high"], int(_number(row, "n_seeds")), 0, row["metric"],
        criteria.default_margin(row["metric"]))
    sent = (f"sends {row['traffic_ratio']:.3g}× Top-k's elements over the whole run"
            if not pd.isna(row["traffic_ratio"]) else "elements sent unknown")
    verdict = str(row["verdict"])
    if accuracy == "fails" or verdict == "insufficient-data":
        return f"accuracy claim {accuracy}: {accuracy_cause}"
    if verdict == "fails":
        return f"{sent} (above 4/3)"
    if verdict == "holds":
        return f"matches Top-k and {sent}"
    if accuracy != "holds":
        return f"accuracy claim {accuracy}: {accuracy_cause}; {sent}"
    return f"{sent}; some seeds above 4/3"
