"""Reading a claims table of any schema version into the current one, in one place.

    table, derived = current(pd.read_csv("claims.csv"))    # or read("claims.csv")

Schema 1 (no `schema_version` column, up to the fourth wave) and 2 lacked columns the renderers
read: schema 1 the section, cause, paired difference, per-phase traffic and prediction columns
and everything schema 2 added (`reason`, `diff_unit`, the count percentiles, the speed-up
bands, `n_never`, `bytes_ratio`); schema 2 the typed condition, `claim_key`, `claim_family`,
`energy_gain` and the evidence grade. `current` adds each missing column (empty), names the
registered claim behind each row (its claim name exactly: `topkscope.claims.registry.key_of`)
and takes its section and family from it, a t-interval's middle as a missing paired difference,
renames the network presets to today's names, names a schema-1/2 `quantization_error` row by the
claim it measured (quantization_error_global: the global Top-k set, not the chunk-wise set
training sends), and says whether it derived anything. It never
re-judges a row: no verdict rule is called, a missing cause or reason stays empty, and numbers
only an old row's evidence text holds stay empty (nothing is read back out of prose). A row of
schema 1 or 2 gets its typed condition from the `condition` key topkscope wrote then
(legacy_condition, the one reader of that text); a key it cannot read is shown as it is.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from topkscope.claims.registry import get_claim, key_of
from topkscope.claims.row import COLUMNS, NUMERIC_COLUMNS, SCHEMA_VERSION
from topkscope.condition import ALL_CONDITIONS, DURING_WARMUP, Condition


def section_of(claim: str, sparsifier: str, condition=None) -> str:
    """The section of a row written before rows carried one: its registered claim's (a count
    of a selector exact by construction: a check), "prediction"/"published" for a row whose
    condition says so, else "distribution"."""
    from topkscope.analysis.selection import by_construction

    condition = str(condition or "")
    if condition.startswith("prediction"):
        return "prediction"
    if condition.startswith("published"):
        return "published"
    owner = get_claim(key_of(str(claim), str(sparsifier)))
    if owner is None:
        return "distribution"
    if owner.name in ("count", "count_in_training") and by_construction(str(sparsifier)):
        return "check"
    return owner.section


def version_of(table: pd.DataFrame) -> int:
    """The table's schema version (1 without the column)."""
    if "schema_version" not in table or table["schema_version"].dropna().empty:
        return 1
    return int(table["schema_version"].dropna().max())


def _text(value) -> str:
    return value if isinstance(value, str) else ""


# the claim a schema-1/2 `quantization_error` row measured: quantizing the global Top-k set
# (topk_quantized_ratio), which training does not send; schema 3's quantization_error is the
# chunk-wise set that training sends
GLOBAL_QUANTIZATION = "quantization_error_global"


_OUTER_KEY = re.compile(r"^(\w+)\((.*)\)$")
_OUTER_FIELDS = {"H": ("outer_inner_steps", int), "lr": ("outer_lr", float),
                 "mu": ("outer_momentum", float), "beta": ("outer_error_decay", float)}


def legacy_condition(key: str) -> Condition | None:
    """The typed condition of a schema-1/2 row, from the `condition` key that topkscope wrote
    then ('warmup=custom[0.015625]; rho=0.001; during warm-up at rho=0.015625', 'warmup=none;
    outer=average(H=15, lr=1, beta=0.95); quantize=2bit; rho=0.015625'): the only reader of
    that text, for tables written before rows carried their condition's fields. The pooled
    summary rows of those tables are phase "pooled"; None for any other text (a prediction's
    or a check's description)."""
    key = str(key or "").strip()
    if key == ALL_CONDITIONS:
        return Condition(phase="pooled")
    parts = [p.strip() for p in key.split(";") if p.strip()]
    if not parts or not parts[0].startswith("warmup="):
        return None
    fields: dict = {"warmup": parts[0][len("warmup="):]}
    if fields["warmup"].startswith("custom[") and fields["warmup"].endswith("]"):
        fields["warmup_schedule"] = tuple(float(v) for v in fields["warmup"][7:-1].split(","))
        fields["warmup"] = "custom"
    deviations = []
    try:
        for part in parts[1:]:
            if part.startswith("rho="):
                fields["training_density"] = float(part[4:])
            elif part.startswith(DURING_WARMUP):
                fields.update(phase="warm-up", phase_density=float(part[len(DURING_WARMUP):]))
            elif part.startswith("recorded at rho="):
                fields["recorder_density"] = float(part[len("recorded at rho="):])
            elif part.startswith("quantize=") and part.endswith("bit"):
                fields["quantize_bits"] = int(part[len("quantize="):-3])
            elif part.startswith("k_rule="):
                fields["k_rule"] = part[len("k_rule="):]
            elif part.startswith("outer=") and (m := _OUTER_KEY.match(part[6:])):
                fields["outer_step"] = m.group(1)
                for item in m.group(2).split(","):
                    name, _, value = item.strip().partition("=")
                    if name in _OUTER_FIELDS:
                        column, kind = _OUTER_FIELDS[name]
                        fields[column] = kind(float(value))
            else:
                deviations.append(part)
    except ValueError:
        return None
    return Condition(**fields, deviations=tuple(deviations))


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
    for col in COLUMNS:
        if col not in NUMERIC_COLUMNS and col != "schema_version":
            table[col] = table[col].astype(object)
            blank = table[col].isna()
            if col not in ("model", "dataset", "dataset_substitute"):
                table.loc[blank, col] = ""
    if version < 3:  # before schema 3, quantization_error measured the global Top-k set
        table.loc[table["claim"] == "quantization_error", "claim"] = GLOBAL_QUANTIZATION
        for i, key in table["condition"].items():  # the typed condition, from its key
            cond = legacy_condition(key)
            if cond is not None:
                for column, value in cond.record().items():
                    if column in table and column not in ("experiment", "world_size"):
                        table.at[i, column] = value
    if (table["evidence_grade"] == "").any():
        table.loc[table["evidence_grade"] == "", "evidence_grade"] = "measured"
    for i, row in table.iterrows():
        if not _text(row["section"]):
            table.at[i, "section"] = section_of(row["claim"], row["sparsifier"], row["condition"])
            derived = True
        section = table.at[i, "section"]
        if not _text(row["claim_key"]):
            table.at[i, "claim_key"] = key_of(str(row["claim"]), str(row["sparsifier"]))
        owner = get_claim(table.at[i, "claim_key"])
        if not _text(row["claim_family"]) and owner is not None:
            table.at[i, "claim_family"] = owner.family
        if section == "convergence" and not _text(row["metric"]):
            table.at[i, "metric"] = "accuracy"
        if section == "convergence" and pd.isna(row["diff_mean"]) and not pd.isna(row["ci_low"]):
            table.at[i, "diff_mean"] = (row["ci_low"] + row["ci_high"]) / 2  # a t-interval
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
