"""The catalog: every claim is one `Claim` object in one registry, holding everything about it
— its name, the questions it answers, its statement, its rule, its section and family, how it
evaluates, and how it is presented (the figure that shows it, its table and column in
docs/findings.md and the LaTeX tables, how an answer tells its numbers). Renderers select rows
through the registry and the rows' fields (`claim_key`: the registered claim that made a row),
never by the shape of a claim's name.

A claim evaluates at one of three scopes (`scope`), and the builder (topkscope.claims.build)
hands it what that scope needs:

    "condition"  evaluate(units) per (model, training sparsifier, condition) of recorded u:
                 units is a topkscope.analysis.units.ConditionUnits (its u rows, its snapshot
                 analyses, its runs); returns a list of row fields (dicts)
    "model"      evaluate(model) per model: a ModelRuns (the model's runs, the options);
                 returns a list of row fields (dicts)
    "table"      evaluate(context) once: a topkscope.claims.inputs.Context (every run, the
                 options, the roots they were found under); returns ClaimRow objects
    "reference"  evaluate() on published measurements alone (no run of the user's): never in
                 a build; its module writes the committed table under
                 results/reference/published/ (the GRACE release, the published GPU runs'
                 input bands), whose questions the README answers like a profile's

Row fields are the ClaimRow fields a claim measured; a model-scope claim gives its condition as
a topkscope.condition.Condition under "condition" (its typed columns are filled from it). The
builder adds the model, dataset and substitute, and, unless the fields give their own, the
claim's name, the sparsifier, the condition (condition scope), the statement (with {method}
and {metric} filled in), the rule, the section, `claim_key` and `family`. A claim whose rows
are named per method family (`<family>_count`, `<family>_accuracy`: the sparsifier's
family_of) says so with `per_method=True`. A user adds a claim with register_claim
(docs/development.md); it then appears in `topkscope claims`, `figures`, `report`, the README's
answers, the findings and the LaTeX tables like the built-in ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from topkscope.claims.row import SECTIONS

SCOPES = ("condition", "model", "table", "reference")
# what a claim is about: the paper's distribution and contraction questions, convergence,
# Top-k on pseudo-gradients (outer loop), predictions of the step-time model, published
# measurements, and the explanation of convergence by contraction
FAMILIES = ("distribution", "convergence", "outer", "prediction", "published", "explanation")
# which rows answer a question: those of per-step runs, of outer-loop runs, or any
ON = ("per-step", "outer", "any")


@dataclass(frozen=True)
class Question:
    """A question a claim's rows answer, as the README, docs/findings.md and the report ask it.

    key: a stable name ("gaussian_like", "outer_gaussian_like"). text: the question. on: which
    rows answer it (ON: "per-step" leaves the outer-loop runs' rows out, "outer" takes only
    theirs). sparsifiers: the methods whose rows answer it (None: any). also: other claims
    whose rows answer it too (the speed-up question over Dense, WFBP and fp16). summary: the
    question's place in the README's five-line summary (None: not there), where it is asked
    in its `short` form. order: its place among the answers (lower first)."""

    key: str
    text: str
    on: str = "per-step"
    sparsifiers: tuple[str, ...] | None = None
    also: tuple[str, ...] = ()
    summary: int | None = None
    order: int = 100
    short: str = ""

    def __post_init__(self) -> None:
        if not self.short:
            object.__setattr__(self, "short", self.text)
        if self.on not in ON:
            raise ValueError(f"question {self.key!r}: on = {self.on!r}; allowed: "
                             f"{', '.join(ON)}")


@dataclass(frozen=True)
class Presentation:
    """How a claim's rows are shown. table: the findings / LaTeX table that shows them
    (publish.tables' TABLES: "distribution", "counts", "convergence", "outer", "prediction",
    "time", "other", "check"); column: the column's header in it (the distribution table's
    per-claim columns). numbers: rows -> the words an answer tells its numbers in (None: the
    verdict alone). lead: rows -> the one number of the README's summary line (None: numbers).
    figure: the figure kind that shows it (the gallery's <experiment>-<figure>.png).
    says_why: the numbers already say why rows are undecided (the answer adds no reasons)."""

    table: str = "other"
    column: str = ""
    numbers: Callable | None = None
    lead: Callable | None = None
    figure: str = ""
    says_why: bool = False


@dataclass(frozen=True)
class Claim:
    """One claim (see the module docstring). `rule` is the rule's text, or a function of the
    build options returning it (a rule that names the margins)."""

    name: str
    question: str
    statement: str
    rule: str | Callable
    section: str
    scope: str
    evaluate: Callable
    figure: str = ""
    family: str = ""
    questions: tuple[Question, ...] = ()
    show: Presentation = field(default_factory=Presentation)
    per_method: bool = False

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").isalnum():
            raise ValueError(f"claim name = {self.name!r}; allowed: letters, digits and '_'")
        if self.section not in SECTIONS:
            raise ValueError(f"claim {self.name!r}: section = {self.section!r}; allowed: "
                             f"{', '.join(SECTIONS)}")
        if self.scope not in SCOPES:
            raise ValueError(f"claim {self.name!r}: scope = {self.scope!r}; allowed: "
                             f"{', '.join(SCOPES)}")
        if not self.family:
            object.__setattr__(self, "family", {"check": "distribution"}.get(
                self.section, self.section))
        if self.family not in FAMILIES:
            raise ValueError(f"claim {self.name!r}: family = {self.family!r}; allowed: "
                             f"{', '.join(FAMILIES)}")
        if self.figure and not self.show.figure:
            object.__setattr__(self, "show", Presentation(**{**vars(self.show),
                                                             "figure": self.figure}))

    def rule_text(self, options=None) -> str:
        return self.rule(options) if callable(self.rule) else self.rule

    def statement_for(self, method: str, metric: str = "") -> str:
        """The statement with {method} (the sparsifier's label) and {metric} filled in."""
        from topkscope.sparsify import label_of

        return self.statement.format(method=label_of(method) if method else "",
                                     metric=metric or "accuracy")

    def row_name(self, method: str = "") -> str:
        """The claim column of a row of this claim: '<family>_<name>' for a per-method claim
        ('gaussiank_count'), else the name."""
        if not self.per_method:
            return self.name
        from topkscope.sparsify import family_of

        return f"{family_of(method)}_{self.name}"


_REGISTRY: dict[str, Claim] = {}
_BUILT_IN: set[str] = set()


def register_claim(claim: Claim, *, replace: bool = False) -> Claim:
    """Add a claim (evaluated after the registered ones of its scope); returns it. A name that
    is taken is refused unless replace=True (never for a built-in claim)."""
    if not isinstance(claim, Claim):
        raise ValueError(f"{claim!r} is not a topkscope.claims.Claim")
    if claim.name in _BUILT_IN and claim is not _REGISTRY.get(claim.name):
        raise ValueError(f"{claim.name!r} is a built-in claim; choose another name")
    if claim.name in _REGISTRY and not replace:
        raise ValueError(f"claim {claim.name!r} is already registered (replace=True replaces it)")
    _REGISTRY[claim.name] = claim
    return claim


def unregister_claim(name: str) -> None:
    """Remove a claim added with register_claim (built-in ones stay)."""
    if name in _BUILT_IN:
        raise ValueError(f"{name!r} is a built-in claim and cannot be removed")
    _REGISTRY.pop(name, None)


def mark_built_in() -> None:
    """Called once the package's own claims are registered: they can no longer be removed."""
    _BUILT_IN.update(_REGISTRY)


def registered(scope: str | None = None, section: str | None = None,
               family: str | None = None) -> tuple[Claim, ...]:
    """The registered claims in registration order, of one scope, section and family if
    given."""
    return tuple(c for c in _REGISTRY.values()
                 if (scope is None or c.scope == scope)
                 and (section is None or c.section == section)
                 and (family is None or c.family == family))


def get_claim(key: str) -> Claim | None:
    """The registered claim named `key` (a row's claim_key), None if none."""
    return _REGISTRY.get(key)


def questions() -> list[tuple[Question, Claim]]:
    """Every registered claim's questions with their claim, in answer order (then
    registration order)."""
    found = [(q, c) for c in _REGISTRY.values() for q in c.questions]
    return sorted(found, key=lambda qc: qc[0].order)


def key_of(claim: str, sparsifier: str = "", section: str | None = None) -> str:
    """The registered claim that names a row `claim` (an older table's row, which has no
    claim_key): the claim of that name, else the per-method claim whose row name for the
    row's sparsifier is `claim` ('dgc_accuracy' with sparsifier 'dgc' -> 'accuracy'); '' if
    none. Exact names only: a row name is never matched by its ending."""
    claims = [c for c in _REGISTRY.values() if section is None or c.section == section]
    for c in claims:
        if c.name == claim:
            return c.name
    for c in claims:
        if c.per_method and sparsifier and c.row_name(sparsifier) == claim:
            return c.name
    return ""
