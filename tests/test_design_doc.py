"""docs/design.md describes the code as it is: its package map names every package and
top-level module of topkscope/ (and nothing else), its command table every `topkscope`
subcommand (cli.COMMANDS), and its "Claims table" contract every column the claims table has.
The layer order is checked by tests/test_architecture.py.
"""

from __future__ import annotations

import re

import pytest

from tests.conftest import REPO
from tests.test_architecture import units_in
from topkscope import cli

DESIGN = REPO / "docs" / "design.md"


def section(text: str, heading: str) -> str:
    """The text under a markdown heading, up to the next heading of any level."""
    match = re.search(rf"^#+ {re.escape(heading)}\n(.*?)(?=^#+ |\Z)", text, re.S | re.M)
    if match is None:
        raise ValueError(f"docs/design.md has no heading {heading!r}")
    return match.group(1)


def paragraph(text: str, lead: str) -> str:
    """The paragraph (up to the next blank line) that starts with `lead`."""
    match = re.search(rf"^{re.escape(lead)}(.*?)(?=\n\n|\Z)", text, re.S | re.M)
    if match is None:
        raise ValueError(f"docs/design.md has no paragraph starting {lead!r}")
    return match.group(1)


def table_first_cells(text: str) -> list[str]:
    """The first cell of every row of the markdown tables in text (header rows included)."""
    return [line.split("|")[1] for line in text.splitlines()
            if line.startswith("|") and not re.match(r"^\|[-| ]+\|$", line)]


def mapped_units(text: str) -> set[str]:
    """The units the package map names: `topkscope/<package>/` and `topkscope/<module>.py`."""
    cells = table_first_cells(section(text, "Package map").split("### ")[0])
    return {m.group(1) for cell in cells
            for m in re.finditer(r"`topkscope/(\w+)(?:/|\.py)`", cell)}


def documented_commands(text: str) -> set[str]:
    """The subcommands of the first table after the **Command line.** paragraph."""
    contracts = section(text, "Public contracts")
    if "**Command line.**" not in contracts:
        raise ValueError("docs/design.md's Public contracts have no **Command line.** paragraph")
    lines = contracts.split("**Command line.**", 1)[1].splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("|")), len(lines))
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append(line)
    return {m.group(1) for cell in table_first_cells("\n".join(table))
            for m in re.finditer(r"`topkscope (\w+)", cell)}


def documented_claims_columns(text: str) -> list[str]:
    """The columns the "Claims table" contract lists (the backticked list after 'columns')."""
    contract = paragraph(section(text, "Public contracts"), "**Claims table.**")
    match = re.search(r"has the columns `([^`]+)`", contract)
    if match is None:
        raise ValueError("the Claims table contract lists no columns (`a, b, ...`)")
    return [c.strip() for c in match.group(1).split(",")]


@pytest.fixture(scope="module")
def design() -> str:
    return DESIGN.read_text(encoding="utf-8")


def test_the_package_map_names_every_package_and_module(design):
    mapped, present = mapped_units(design), units_in()
    assert mapped == present, (
        f"in topkscope/ but not in docs/design.md's package map: {sorted(present - mapped)}; "
        f"in the map but not in topkscope/: {sorted(mapped - present)}")


def test_the_command_table_names_every_subcommand(design):
    documented = documented_commands(design)
    assert documented == set(cli.COMMANDS), (
        f"subcommands missing from docs/design.md: {sorted(set(cli.COMMANDS) - documented)}; "
        f"named there but not in cli.COMMANDS: {sorted(documented - set(cli.COMMANDS))}")


def test_one_subcommand_per_command_module():
    modules = {p.stem for p in (REPO / "topkscope" / "commands").glob("*.py")
               if p.stem != "__init__"}
    assert modules == set(cli.COMMANDS)
    assert all(cli.COMMANDS[name] == f"topkscope.commands.{name}" for name in cli.COMMANDS)


def test_the_claims_contract_lists_every_column(design):
    """The columns of `topkscope claims` / results/claims.csv: the claims' own
    (analysis.claims.COLUMNS) and those the figures driver adds (reproduce.claims_table)."""
    from topkscope import claims
    from topkscope.claims import build as claims_table

    produced = list(claims_table([]).columns)
    assert set(claims.COLUMNS) <= set(produced)
    documented = documented_claims_columns(design)
    assert len(documented) == len(set(documented)), f"listed twice: {documented}"
    assert set(documented) == set(produced), (
        f"claims columns missing from docs/design.md: {sorted(set(produced) - set(documented))};"
        f" listed there but not produced: {sorted(set(documented) - set(produced))}")


# ---- the readers, on synthetic text --------------------------------------------------------

ELSEWHERE = "topkscope" + "/elsewhere/"  # split: the path checker would look for it
SAMPLE = f"""# Design

## Package map

| package | responsibility |
|---|---|
| `topkscope/sparsify/` | selection |
| `topkscope/kernel.py`, `topkscope/io.py` | formulas; files |

### Layer order

| `{ELSEWHERE}` | a table of another section |

## Public contracts

**Command line.** One subcommand per module:

| subcommand | does |
|---|---|
| `topkscope run CONFIG` | train |
| `topkscope claims PATH... [--out FILE]` | claims |

**Claims table.** `results/claims.csv` has the columns `model,
dataset, verdict` (the last: a verdict).

## Results-folder layout
"""


def test_the_readers_on_a_sample():
    assert mapped_units(SAMPLE) == {"sparsify", "kernel", "io"}
    assert documented_commands(SAMPLE) == {"run", "claims"}
    assert documented_claims_columns(SAMPLE) == ["model", "dataset", "verdict"]
    with pytest.raises(ValueError, match="Package map"):
        mapped_units("# Design\n")
    with pytest.raises(ValueError, match="no columns"):
        documented_claims_columns(SAMPLE.replace("has the columns", "has"))
