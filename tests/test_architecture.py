"""The package's import edges: each package depends one way, and the shared facts are neutral.

Every `import` / `from ... import` in topkscope/ is read with ast (top level and inside
functions, relative imports resolved), so a lazy import counts like any other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "topkscope"

# (importer, imported): no module under the first may import anything under the second
FORBIDDEN = [
    ("topkscope.hooks", "topkscope.analysis"),
    ("topkscope.analysis", "topkscope.hooks"),
    ("topkscope.reproduce", "topkscope.commands"),
    ("topkscope.commands", "topkscope.reproduce"),
    ("topkscope.reproduce", "topkscope.cli"),  # the cli imports commands: wiring lives there
]
# the shared facts: neutral modules that import nothing of the project but each other
NEUTRAL = ("topkscope.schema", "topkscope.bounds", "topkscope.validate")


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, package: Path = PACKAGE) -> set[str]:
    """Every module path imported by the file (for `from a import b`: a and a.b)."""
    name = module_name(path, package)
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here[: len(here) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return found


def under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def edges() -> list[tuple[str, str]]:
    return [(module_name(p), m) for p in sorted(PACKAGE.rglob("*.py")) for m in imports_of(p)]


def test_the_walker_sees_lazy_and_relative_imports(tmp_path):
    pkg = tmp_path / "topkscope" / "hooks"
    pkg.mkdir(parents=True)
    (pkg / "x.py").write_text("def f():\n    from ..analysis import runs\n    import topkscope.io\n")
    got = imports_of(pkg / "x.py", tmp_path / "topkscope")
    assert {"topkscope.analysis", "topkscope.analysis.runs", "topkscope.io"} <= got


def test_the_walker_finds_real_edges():
    assert ("topkscope.hooks.recorder", "topkscope.schema") in edges()


@pytest.mark.parametrize(("importer", "imported"), FORBIDDEN, ids=lambda x: x)
def test_forbidden_import_edges(importer, imported):
    bad = sorted({(src, dst) for src, dst in edges()
                  if under(src, importer) and under(dst, imported)})
    assert not bad, f"{importer} must not import {imported}: {bad}"


@pytest.mark.parametrize("neutral", NEUTRAL)
def test_shared_facts_import_only_shared_facts(neutral):
    bad = sorted({dst for src, dst in edges() if under(src, neutral)
                  and under(dst, "topkscope") and dst != "topkscope" and dst not in NEUTRAL})
    assert not bad, f"{neutral} must import only {NEUTRAL}: {bad}"
