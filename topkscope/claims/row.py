"""One row of the claims table as a typed record, and the table's schema.

A `ClaimRow` holds what a claim measured as data — shares and their intervals, counts, paired
differences, margins, traffic ratios, speed-up bands, seeds, runs, and the reason a row is not
decided — beside the two texts rendered from those numbers when the row is made (`evidence`,
`cause`). Code that needs a number reads its field; nothing reads a number back out of the
texts. `claims.csv` is `ClaimTable.frame()` written with its `schema_version` column;
`topkscope.claims.migrate` reads older tables.

Schema versions: 1 (no column; up to the fourth wave), 2 (schema_version, reason, diff_unit,
count_p5, count_p95, speedup_low, speedup_high, speedup_topk_low, speedup_topk_high, n_never,
bytes_ratio, decided_by) and 3 (this module: the condition as typed columns,
topkscope.condition.CONDITION_COLUMNS — `condition` is generated from them and nothing parses
it —; `claim_key`, the registered claim that made the row, and `claim_family`; the evidence
grade: `evidence_grade`, the weakest grade among the inputs the verdict depends on, and
`weakest_inputs`, those inputs by name).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import pandas as pd

from topkscope.claims.verdicts import check_reason
from topkscope.condition import CONDITION_COLUMNS, Condition

SCHEMA_VERSION = 3
SECTIONS = ("distribution", "convergence", "prediction", "check", "published", "explanation")
NAN = math.nan


def _nan() -> float:
    return field(default=NAN)


@dataclass
class ClaimRow:
    """One (model, dataset, claim, sparsifier, condition) row (docs/results.md, claims.csv).

    Identity: model, dataset, dataset_substitute, claim, sparsifier, condition, section.
    Verdict: verdict, reason (a key of topkscope.claims.verdicts.REASONS when the row is
    inconclusive or insufficient-data, else ""), cause (why, in words), evidence (the numbers
    in words), statement and rule (the claim's). Evidence fields: see each field's comment and
    the table's schema in docs/results.md.
    """

    model: str | None
    dataset: str | None
    dataset_substitute: str | None
    claim: str
    sparsifier: str
    statement: str = ""
    n_runs: float = _nan()
    n_units: float = _nan()
    fraction: float = _nan()              # share of units meeting the criterion
    evidence: str = ""
    verdict: str = "insufficient-data"
    rule: str = ""
    condition: str = ""
    n_seeds: float = _nan()
    ci_low: float = _nan()                # interval of diff_mean (convergence, explanation,
    ci_high: float = _nan()               # fitted value, time to accuracy)
    traffic_ratio: float = _nan()         # elements sent over Top-k's, whole run
    section: str = "distribution"
    cause: str = ""
    metric: str = ""
    margin: float = _nan()                # non-inferiority margin, in diff_unit
    diff_mean: float = _nan()             # the row's effect, in diff_unit
    n_failed_seeds: float = _nan()
    traffic_warmup: float = _nan()        # elements over Top-k's, density warm-up phase
    traffic_target: float = _nan()        # elements over Top-k's, target-density phase
    gennorm_beta: float = _nan()          # median fitted generalised-normal shape
    traffic_vs_plain_topk: float = _nan()  # whole run against Top-k without warm-up
    count_over_k: float = _nan()          # median count / k
    n_unfinished_seeds: float = _nan()
    bound_margin: float = _nan()
    delta_uniform: float = _nan()
    delta_gaussian: float = _nan()
    fraction_low: float = _nan()          # 95% block-bootstrap interval of fraction
    fraction_high: float = _nan()
    profile: str = ""                     # the profile and model arguments of the runs,
    model_args: str = ""                  # and what differs from the figures driver's plan
    differs_from_plan: str = ""
    # prediction rows
    network: str = ""
    inputs: str = ""
    baselines: str = ""
    training_condition: str = ""
    selection_basis: str = ""
    breakeven_ms: float = _nan()
    breakeven_topk_ms: float = _nan()
    model_error: float = _nan()
    # schema 2
    reason: str = ""                      # why not decided (REASONS)
    diff_unit: str = ""                   # unit of diff_mean, margin, ci_low and ci_high
    count_p5: float = _nan()              # count / k, 5th and 95th percentile over units
    count_p95: float = _nan()
    speedup_low: float = _nan()           # speed-up over the row's dense baseline (its band;
    speedup_high: float = _nan()          # time to accuracy: over Top-k, the seeds' range)
    speedup_topk_low: float = _nan()      # speed-up over Top-k (its band)
    speedup_topk_high: float = _nan()
    n_never: float = _nan()               # seeds that never reached the target
    bytes_ratio: float = _nan()           # wire bytes sent over Top-k's, whole run
    decided_by: str = ""                  # inputs whose band alone decides (comma-separated)
    # schema 3: Top-k's kept energy over a random k-subset's, median over units:
    # (1 - delta) / (k/d), "Top-k keeps about N k/d of ||u||^2"
    energy_gain: float = _nan()
    # the runs behind the row, "<experiment>/<run id>" comma-separated (topkscope.claims.
    # build.run_ids): answers count runs over rows by them, never by summing n_runs
    run_ids: str = ""
    # which registered claim made the row, and its family
    claim_key: str = ""
    claim_family: str = ""
    # the grade of the weakest input the verdict rests on (GRADES), and those inputs by name
    evidence_grade: str = "measured"
    weakest_inputs: str = ""
    # the condition as typed fields (topkscope.condition.Condition; `condition` is its key)
    experiment: str = ""
    world_size: float = _nan()
    training_density: float = _nan()
    recorder_density: float = _nan()
    warmup: str = ""
    warmup_schedule: str = ""
    phase: str = ""
    phase_density: float = _nan()
    k_rule: str = ""
    outer_step: str = ""
    outer_inner_steps: float = _nan()
    outer_lr: float = _nan()
    outer_momentum: float = _nan()
    outer_error_decay: float = _nan()
    quantize_bits: float = _nan()
    deviations: str = ""
    reference: str = ""

    def __post_init__(self) -> None:
        if self.section not in SECTIONS:
            raise ValueError(f"section = {self.section!r}; allowed: {', '.join(SECTIONS)}")
        if self.evidence_grade not in GRADES:
            raise ValueError(f"evidence_grade = {self.evidence_grade!r}; allowed: "
                             f"{', '.join(GRADES)}")
        self.reason = check_reason(self.verdict, self.reason)

    def set_condition(self, cond: Condition) -> None:
        """Fill the typed condition columns from `cond` (the key too, unless the row's
        condition was given in words of its own: a prediction's, a published run's)."""
        for name, value in cond.record().items():
            setattr(self, name, value)
        if not self.condition:
            self.condition = cond.key()

    def record(self) -> dict[str, Any]:
        """The row as a plain dict of COLUMNS (schema_version last)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["schema_version"] = SCHEMA_VERSION
        return out

    @property
    def decided(self) -> bool:
        return not self.reason


# evidence grades, strongest first: measured here; published (with its source); modelled (our
# model, with its validated error); assumed (a stated value nobody measured)
GRADES = ("measured", "published", "modelled", "assumed")
COLUMNS = [f.name for f in fields(ClaimRow)] + ["schema_version"]
assert set(CONDITION_COLUMNS) <= set(COLUMNS)
# the columns every table had before the prediction and schema-2 columns (docs/design.md)
BASE_COLUMNS = COLUMNS[: COLUMNS.index("profile")]
PREDICTION_COLUMNS = COLUMNS[COLUMNS.index("network"): COLUMNS.index("reason")]
RUN_COLUMNS = ("profile", "model_args", "differs_from_plan")
NUMERIC_COLUMNS = tuple(f.name for f in fields(ClaimRow) if f.type == "float")


# counts: written as whole numbers (empty where missing), never as 5.0
COUNT_COLUMNS = ("n_runs", "n_units", "n_seeds", "n_failed_seeds", "n_unfinished_seeds",
                 "n_never", "world_size", "outer_inner_steps", "quantize_bits")


def frame(rows) -> pd.DataFrame:
    """The claims table of `rows` (ClaimRow), columns COLUMNS in order."""
    return pd.DataFrame([r.record() for r in rows], columns=COLUMNS)


def to_csv(table: pd.DataFrame, path) -> None:
    """Write a claims table as CSV with its counts as whole numbers (with_count_types)."""
    with_count_types(table.copy()).to_csv(path, index=False)


def with_count_types(table: pd.DataFrame) -> pd.DataFrame:
    """table with its COUNT_COLUMNS as nullable integers, so a CSV says 5, never 5.0 (a
    column with a fractional value is kept as it is)."""
    for name in COUNT_COLUMNS:
        if name in table:
            values = pd.to_numeric(table[name], errors="coerce")
            if ((values.dropna() % 1) == 0).all():
                table[name] = values.round().astype("Int64")
    return table


def row_from(record: dict) -> ClaimRow:
    """A ClaimRow from a current-schema record (a claims.csv row as a dict: NaN text cells
    read as empty); ValueError naming an unknown column."""
    names = {f.name: f for f in fields(ClaimRow)}
    unknown = set(record) - set(names) - {"schema_version"}
    if unknown:
        raise ValueError(f"not claims columns: {sorted(unknown)}")
    values = {}
    for name, f in names.items():
        value = record.get(name, NAN if f.type == "float" else "")
        if value is pd.NA or value is None:
            value = NAN if f.type == "float" else ""
        if f.type == "float":
            value = float(value) if value != "" else NAN
        if f.type != "float" and isinstance(value, float) and math.isnan(value):
            value = None if name in ("model", "dataset", "dataset_substitute") else ""
        values[name] = value
    return ClaimRow(**values)
