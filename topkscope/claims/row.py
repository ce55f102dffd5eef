"""One row of the claims table as a typed record, and the table's schema.

A `ClaimRow` holds what a claim measured as data — shares and their intervals, counts, paired
differences, margins, traffic ratios, speed-up bands, seeds, runs, and the reason a row is not
decided — beside the two texts rendered from those numbers when the row is made (`evidence`,
`cause`). Code that needs a number reads its field; nothing reads a number back out of the
texts. `claims.csv` is `ClaimTable.frame()` written with its `schema_version` column;
`topkscope.claims.migrate` reads older tables.

Schema versions: 1 (no column; up to the fourth wave) and 2 (this module: schema_version,
reason, diff_unit, count_p5, count_p95, speedup_low, speedup_high, speedup_topk_low,
speedup_topk_high, n_never, bytes_ratio, decided_by).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import pandas as pd

from topkscope.claims.verdicts import check_reason

SCHEMA_VERSION = 2
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

    def __post_init__(self) -> None:
        if self.section not in SECTIONS:
            raise ValueError(f"section = {self.section!r}; allowed: {', '.join(SECTIONS)}")
        self.reason = check_reason(self.verdict, self.reason)

    def record(self) -> dict[str, Any]:
        """The row as a plain dict of COLUMNS (schema_version last)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["schema_version"] = SCHEMA_VERSION
        return out

    @property
    def decided(self) -> bool:
        return not self.reason


COLUMNS = [f.name for f in fields(ClaimRow)] + ["schema_version"]
# the columns every table had before the prediction and schema-2 columns (docs/design.md)
BASE_COLUMNS = COLUMNS[: COLUMNS.index("profile")]
PREDICTION_COLUMNS = COLUMNS[COLUMNS.index("network"): COLUMNS.index("reason")]
RUN_COLUMNS = ("profile", "model_args", "differs_from_plan")
NUMERIC_COLUMNS = tuple(f.name for f in fields(ClaimRow) if f.type == "float")


def frame(rows) -> pd.DataFrame:
    """The claims table of `rows` (ClaimRow), columns COLUMNS in order."""
    return pd.DataFrame([r.record() for r in rows], columns=COLUMNS)


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
        if f.type != "float" and isinstance(value, float) and math.isnan(value):
            value = None if name in ("model", "dataset", "dataset_substitute") else ""
        values[name] = value
    return ClaimRow(**values)
