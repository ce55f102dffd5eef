"""Every claim is one `Claim` object in one registry: its name, the question it answers, its
statement, its rule, its section, the figure that shows it, and how it evaluates.

A claim evaluates at one of three scopes (`scope`), and the builder (topkscope.claims.build)
hands it what that scope needs:

    "condition"  evaluate(units) per (model, training sparsifier, condition) of recorded u:
                 units is a topkscope.analysis.units.ConditionUnits (its u rows, its snapshot
                 analyses, its runs); returns a list of row fields (dicts)
    "model"      evaluate(model) per model: a ModelRuns (the model's runs, the options);
                 returns a list of row fields (dicts)
    "table"      evaluate(context) once: a topkscope.claims.build.Context (every run, the
                 options, the roots they were found under); returns ClaimRow objects

Row fields are the ClaimRow fields a claim measured; the builder adds the model, dataset and
substitute, and, unless the fields give their own, the claim's name, the sparsifier, the
condition (condition scope), the statement (with {method} and {metric} filled in), the rule and
the section. A user adds a claim with register_claim (docs/development.md); it then appears in
`topkscope claims`, `figures`, `report` and the findings like the built-in ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from topkscope.claims.row import SECTIONS

SCOPES = ("condition", "model", "table")


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

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").isalnum():
            raise ValueError(f"claim name = {self.name!r}; allowed: letters, digits and '_'")
        if self.section not in SECTIONS:
            raise ValueError(f"claim {self.name!r}: section = {self.section!r}; allowed: "
                             f"{', '.join(SECTIONS)}")
        if self.scope not in SCOPES:
            raise ValueError(f"claim {self.name!r}: scope = {self.scope!r}; allowed: "
                             f"{', '.join(SCOPES)}")

    def rule_text(self, options=None) -> str:
        return self.rule(options) if callable(self.rule) else self.rule

    def statement_for(self, method: str, metric: str = "") -> str:
        """The statement with {method} (the sparsifier's label) and {metric} filled in."""
        from topkscope.sparsify import label_of

        return self.statement.format(method=label_of(method) if method else "",
                                     metric=metric or "accuracy")


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


def registered(scope: str | None = None, section: str | None = None) -> tuple[Claim, ...]:
    """The registered claims in registration order, of one scope and section if given."""
    return tuple(c for c in _REGISTRY.values()
                 if (scope is None or c.scope == scope)
                 and (section is None or c.section == section))


def claim_of(name: str, section: str | None = None) -> Claim | None:
    """The claim that makes rows named `name` (of `section` if given: the published runs'
    topk_accuracy is another claim than the convergence family's): the claim of that name,
    else the one whose name is the row name's suffix after a method family ("dgc_accuracy" ->
    the claim "accuracy", "tail_count_in_training" -> "count_in_training"); None if none."""
    claims = [c for c in _REGISTRY.values() if section is None or c.section == section]
    exact = [c for c in claims if c.name == name]
    if exact:
        return exact[0]
    found = [c for c in claims if str(name).endswith("_" + c.name)]
    return max(found, key=lambda c: len(c.name)) if found else None
