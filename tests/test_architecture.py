"""The package's import edges: one written layer order, no circles.

The layer order is written once, in docs/design.md ("Layer order"), and read from there. Every
`import` / `from ... import` in topkscope/ is read with ast (top level and inside functions,
relative imports resolved, `importlib.import_module("literal")` too), so a lazy import counts
like any other. Checked: every package and top-level module is placed in the order; every
import between two of them goes down it; no package and no file imports itself round a circle.
Imports by a computed name (the cli's command table) are not seen: the cli is the top layer.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "topkscope"
DESIGN = REPO / "docs" / "design.md"

# (importer, imported) pairs the order allows but the design forbids: the statistics do not
# import the recorder (the facts both need live in neutral modules: kernel, bounds, schema)
FORBIDDEN = [("analysis", "hooks")]


# ---- reading the code and the doc ----------------------------------------------------------

def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_module(dotted: str, modules: set[str]) -> str | None:
    """The longest prefix of a dotted name that is one of the project's modules, else None."""
    while dotted and dotted not in modules:
        dotted = dotted.rpartition(".")[0]
    return dotted or None


def imports_of(path: Path, modules: set[str], package: Path = PACKAGE) -> set[str]:
    """The project modules a file imports. `from a import b` imports the module a.b when there
    is one, else module a (b is a name defined there); `import a.b` imports a.b."""
    name = module_name(path, package)
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str | None] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(project_module(a.name, modules) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here[: len(here) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for a in node.names:
                full = f"{base}.{a.name}"
                found.add(full if full in modules else project_module(base, modules))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.add(project_module(node.args[0].value, modules))
    return {m for m in found if m is not None and m != name}


def module_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> the project modules it imports (`imports_of`)."""
    files = sorted(package.rglob("*.py"))
    modules = {module_name(p, package) for p in files}
    return {module_name(p, package): imports_of(p, modules, package) for p in files}


def unit_of(module: str) -> str | None:
    """The package or top-level module a module belongs to ('hooks', 'kernel'); None for the
    root package itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def units_in(package: Path = PACKAGE) -> set[str]:
    """The packages and top-level modules of the project, by their files."""
    return {p.stem if p.is_file() else p.name for p in package.iterdir()
            if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").exists()}


def documented_layers(text: str) -> list[tuple[str, ...]]:
    """The fenced block under the heading 'Layer order', as layers from the bottom up (the
    doc lists the top first, one layer per line, units separated by commas)."""
    match = re.search(r"^#+ Layer order\n(?:.*\n)*?```text\n((?:.+\n)+?)```", text, re.MULTILINE)
    if match is None:
        raise ValueError("docs/design.md has no 'Layer order' heading with a ```text block")
    lines = [line.strip() for line in match.group(1).splitlines() if line.strip()]
    return [tuple(u.strip() for u in line.split(",")) for line in reversed(lines)]


# ---- the checks, as functions of a graph (tested on synthetic graphs below) ----------------

def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one node (Tarjan): each is an import circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def unit_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph collapsed to packages / top-level modules (edges between units only)."""
    units: dict[str, set[str]] = {}
    for src, targets in graph.items():
        a = unit_of(src)
        if a is None:
            continue
        units.setdefault(a, set())
        for dst in targets:
            b = unit_of(dst)
            if b is not None and b != a:
                units[a].add(b)
    return units


def against_the_order(graph: dict[str, set[str]], layers: list[tuple[str, ...]]
                      ) -> list[tuple[str, str]]:
    """Module edges between two units that do not go strictly down the layers."""
    level = {unit: i for i, layer in enumerate(layers) for unit in layer}
    bad = []
    for src, targets in graph.items():
        for dst in targets:
            a, b = unit_of(src), unit_of(dst)
            if a is not None and b is not None and a != b and not level[b] < level[a]:
                bad.append((src, dst))
    return sorted(bad)


# ---- the project ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return module_graph()


@pytest.fixture(scope="module")
def layers() -> list[tuple[str, ...]]:
    return documented_layers(DESIGN.read_text())


def test_every_package_and_module_is_placed_once_in_the_order(layers):
    placed = [unit for layer in layers for unit in layer]
    assert len(placed) == len(set(placed)), f"placed twice: {placed}"
    assert set(placed) == units_in(), (
        f"missing from docs/design.md's layer order: {sorted(units_in() - set(placed))}; "
        f"listed but not in topkscope/: {sorted(set(placed) - units_in())}")


def test_every_import_goes_down_the_order(graph, layers):
    bad = against_the_order(graph, layers)
    assert not bad, f"imports against the layer order of docs/design.md: {bad}"


def test_no_package_circle(graph):
    assert not circles(unit_graph(graph))


def test_no_file_circle(graph):
    assert not circles(graph), "modules importing themselves round a circle"


@pytest.mark.parametrize(("importer", "imported"), FORBIDDEN)
def test_forbidden_sideways_edges(graph, importer, imported):
    bad = sorted((s, d) for s, targets in graph.items() for d in targets
                 if unit_of(s) == importer and unit_of(d) == imported)
    assert not bad, f"{importer} must not import {imported}: {bad}"


def test_the_walker_finds_real_edges(graph):
    assert "topkscope.schema" in graph["topkscope.hooks.recorder"]
    assert "topkscope.kernel" in graph["topkscope.hooks.topk_sums"]
    assert "topkscope.sparsify.engine" in graph["topkscope.sparsify.base"]


# ---- the checker itself, on synthetic code and graphs --------------------------------------

def test_the_walker_sees_lazy_relative_and_importlib_imports(tmp_path):
    pkg = tmp_path / "topkscope"
    (pkg / "hooks").mkdir(parents=True)
    (pkg / "analysis").mkdir()
    for p in (pkg, pkg / "hooks", pkg / "analysis"):
        (p / "__init__.py").write_text("")
    (pkg / "io.py").write_text("")
    (pkg / "analysis" / "runs.py").write_text("")
    (pkg / "hooks" / "x.py").write_text(
        "import importlib\n"
        "def f():\n    from ..analysis import runs\n    import topkscope.io\n"
        "def g():\n    return importlib.import_module('topkscope.analysis')\n")
    got = module_graph(pkg)["topkscope.hooks.x"]
    assert got == {"topkscope.analysis.runs", "topkscope.io", "topkscope.analysis"}


def test_the_checker_catches_an_edge_against_the_order_and_circles(graph, layers):
    assert not against_the_order(graph, layers)
    upward = {**graph, "topkscope.sparsify.base": graph["topkscope.sparsify.base"]
              | {"topkscope.hooks.recorder"}}
    assert against_the_order(upward, layers) == [("topkscope.sparsify.base",
                                                  "topkscope.hooks.recorder")]
    sideways = {**graph, "topkscope.plots.style": {"topkscope.analysis.runs"}}
    assert ("topkscope.plots.style", "topkscope.analysis.runs") in \
        against_the_order(sideways, layers)
    assert circles(unit_graph(upward)) and not circles(unit_graph(graph))
    three = {"p.a.x": {"p.a.y"}, "p.a.y": {"p.a.z"}, "p.a.z": {"p.a.x"}, "p.b": {"p.a.x"}}
    assert circles(three) == [["p.a.x", "p.a.y", "p.a.z"]]
    with pytest.raises(ValueError, match="Layer order"):
        documented_layers("# Design\nno order here\n")


def test_the_order_is_read_bottom_up():
    text = "## Layer order\n\nprose\n\n```text\ncli\nhooks, plots\nio\n```\n"
    assert documented_layers(text) == [("io",), ("hooks", "plots"), ("cli",)]
