"""The claims: every claim the suite tests, every verdict rule, and the one builder of the
claims table (results/claims.csv, `topkscope claims`, the figures driver and the report).

    from topkscope import claims
    table = claims.build(runs, roots=[results_root])     # DataFrame, claims.COLUMNS
    claims.register_claim(claims.Claim(...))             # a claim of one's own

A row is a typed `ClaimRow` (row.py): the numbers as fields, the evidence and cause rendered
from them. Each claim is one `Claim` in the registry (registry.py): its questions, its family and how it
is presented (table, column, answer phrases: phrases.py) live there too. The verdict rules are
verdicts.py's; the criteria and intervals they judge by are topkscope.analysis.criteria's.
Modules, one per claim family: distribution (u and Top-k's contraction, counts on Top-k's u),
in_training (counts in each method's own training), convergence (accuracy, traffic),
explanation (does the contraction order the gap to Dense), outer (Top-k on the pseudo-gradients
of DiLoCo-style training), published (imported published runs), speedup and time_to_accuracy (the P = 16 predictions), gpu_bands (the published GPU
input bands, written to results/reference/published/p16-gpu.csv). Older tables are read by
migrate.py. Renderers (topkscope.publish) format these rows and decide nothing.
"""

# isort: off
# registering the built-in claims, in the order the table lists their rows
from topkscope.claims import distribution  # noqa: F401
from topkscope.claims import in_training  # noqa: F401
from topkscope.claims import convergence  # noqa: F401
from topkscope.claims import explanation  # noqa: F401
from topkscope.claims import outer  # noqa: F401
from topkscope.claims import published  # noqa: F401
from topkscope.claims import speedup  # noqa: F401
from topkscope.claims import time_to_accuracy  # noqa: F401
from topkscope.claims import atlas  # noqa: F401
from topkscope.claims import grace  # noqa: F401  (reference claims: never in a build)
from topkscope.claims import covenant  # noqa: F401  (reference claims: never in a build)
from topkscope.claims import gpu_bands  # noqa: F401  (reference claims: never in a build)
# isort: on
from topkscope.analysis.units import ALL_CONDITIONS, DURING_WARMUP, NO_UNITS, POOLED
from topkscope.claims import phrases  # noqa: F401  (how answers tell numbers: this API)
from topkscope.claims.build import UNNAMED, build, build_rows, what_is_missing, write
from topkscope.claims.distribution import fraction_row
from topkscope.claims.inputs import Context, ModelRuns, Options
from topkscope.claims.migrate import section_of
from topkscope.claims.registry import (
    FAMILIES,
    Claim,
    Presentation,
    Question,
    get_claim,
    key_of,
    mark_built_in,
    questions,
    register_claim,
    registered,
    unregister_claim,
)
from topkscope.claims.row import (
    COLUMNS,
    GRADES,
    PREDICTION_COLUMNS,
    SCHEMA_VERSION,
    SECTIONS,
    ClaimRow,
    frame,
    to_csv,
)
from topkscope.claims.verdicts import FRACTION_RULE, REASONS, VERDICTS

mark_built_in()

__all__ = [
    "ALL_CONDITIONS", "COLUMNS", "Claim", "ClaimRow", "Context", "DURING_WARMUP", "FAMILIES",
    "FRACTION_RULE", "GRADES", "ModelRuns", "fraction_row", "NO_UNITS", "Options", "POOLED",
    "PREDICTION_COLUMNS", "Presentation", "Question", "REASONS", "SCHEMA_VERSION", "SECTIONS",
    "UNNAMED", "VERDICTS", "build", "build_rows", "frame", "get_claim", "key_of", "phrases",
    "questions",
    "register_claim", "registered", "section_of", "to_csv", "unregister_claim",
    "what_is_missing", "write",
]
