"""Every repository path that the code, configs, docs, notebooks and README name exists.

A path is a token that starts with one of the repository's top-level folders (`topkscope/`,
`docs/`, `tests/`, ...), written anywhere in a scanned file (backticked, in a code block, in a
docstring or a string literal), or the target of a relative markdown link (resolved from the
file that holds it). Placeholders (`<run_id>`, `{t}`, `*`, `...`) stand for names made at run
time: only the part before the first placeholder has to exist. Output that commands write and
git ignores is allowed by the explicit list `GENERATED`, and nothing else is.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import REPO

# Top-level folders whose paths are checked, and top-level files that may be named bare.
TOP_FOLDERS = ("topkscope", "docs", "experiments", "benchmarks", "results", "notebooks", "tests",
               ".ci")
TOP_FILES = ("README.md", "Makefile", "pyproject.toml", "environment.yml", "LICENSE")

# Written by commands, ignored by git (see .gitignore): may be named without existing.
GENERATED = (
    "results/figures",       # make reproduce-figures: figures, index.md, timing.csv
    "results/bench",         # make bench / topkscope bench: one CSV per benchmark
    "results/claims.csv",    # make reproduce-figures
    "results/scaling.csv",   # make reproduce-figures (predicted scaling)
    "results/time_to_accuracy.csv",  # make reproduce-figures (predicted time to accuracy)
    # benchmarks/selection.py --device cuda writes it; committed once a GPU has run it
    "results/reference/bench-gpu",
    "results/claims.md",     # make reproduce-figures
    "results/report.html",   # make reproduce-figures: topkscope report of the whole profile
    "results/notebooks",     # make reproduce-figures: executed notebooks + HTML
    "results/tables",        # make reproduce-figures: CSV + LaTeX tables
    "results/standard",      # make reproduce-figures PROFILE=standard: its whole results root
    "results/full",          # make reproduce-figures PROFILE=full: its whole results root
    "results/my-exp",        # the example run folder of the Recorder docs
    "results/demo",          # the example run of the report's screenshot (docs/figures.md)
    "results/extending",     # the example runs of docs/development.md (extending topkscope)
    *(f"results/{p.stem}" for p in (REPO / "experiments").glob("*.yaml")),  # run folders
)

# Files scanned: code, configs, docs, notebooks, the README.
SCANNED_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".ipynb", ".cfg", ".txt"}
SCANNED_ROOTS = ("topkscope", "tests", "benchmarks", "experiments", "notebooks", "docs",
                 "results/reference", ".ci")
SCANNED_TOP = ("README.md", "Makefile", "pyproject.toml", "environment.yml")

_PATH = re.compile(
    r"(?<![\w./~$-])((?:" + "|".join(re.escape(f) for f in TOP_FOLDERS) + r")/[\w./*<>{}…-]*)")
_TOP_FILE = re.compile(r"(?<![\w./-])([A-Z][A-Z_]+\.md)\b")
_MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
_OTHER_REPOSITORY = re.compile(r"[\w.-]+/[\w.-]+@[0-9a-f]{7,40}\s$")
_PLACEHOLDER = re.compile(r"<|\{|\*|\[|…|\.\.\.")


def scanned_files() -> list[Path]:
    files = [REPO / name for name in SCANNED_TOP if (REPO / name).exists()]
    for root in SCANNED_ROOTS:
        for path in sorted((REPO / root).rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts or ".ipynb_checkpoints" in path.parts:
                continue
            if path.suffix in SCANNED_SUFFIXES or path.parent.name == ".ci":
                files.append(path)
    return files


def text_of(path: Path) -> str:
    """A file's text; for a notebook, the source of its cells (not the JSON escaping)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".ipynb":
        cells = json.loads(text)["cells"]
        return "\n".join("".join(cell["source"]) for cell in cells)
    return text


def concrete_part(token: str) -> str:
    """The part of a path that must exist: everything before the first placeholder's folder."""
    token = token.rstrip(".,:;'")
    token = re.sub(r"'s$", "", token)
    match = _PLACEHOLDER.search(token)
    if match:
        token = token[: token.rfind("/", 0, match.start()) + 1]
    return token.rstrip("/")


def is_generated(rel: str) -> bool:
    return any(rel == g or rel.startswith(g + "/") for g in GENERATED)


def named_paths(path: Path) -> list[tuple[str, str]]:
    """(as written, repository-relative path) for every path the file names."""
    text = text_of(path)
    found = []
    for match in _PATH.finditer(text):
        if _OTHER_REPOSITORY.search(text[max(0, match.start() - 100): match.start()]):
            continue  # "owner/name@commit path": a file of the cited repository, not ours
        rel = concrete_part(match.group(1))
        if rel and rel not in TOP_FOLDERS:
            found.append((match.group(1), rel))
    for match in _TOP_FILE.finditer(text):
        found.append((match.group(1), match.group(1)))
    if path.suffix in (".md", ".ipynb"):
        for match in _MD_LINK.finditer(text):
            target = match.group(1).split("#")[0]
            if not target or re.match(r"[a-z]+:", target):  # anchors, http:, mailto:
                continue
            resolved = (path.parent / target).resolve()
            try:
                rel = resolved.relative_to(REPO).as_posix()
            except ValueError:
                found.append((target, "../" + target))  # points outside the repository
                continue
            found.append((target, concrete_part(rel)))
    return found


def heading_anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a markdown file."""
    anchors = set()
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def broken_anchors(path: Path) -> list[str]:
    """Links `file.md#anchor` (or `#anchor`) whose anchor is no heading of the target file."""
    broken = []
    for match in _MD_LINK.finditer(text_of(path)):
        target, _, anchor = match.group(1).partition("#")
        if not anchor or re.match(r"[a-z]+:", target):
            continue
        md = (path.parent / target).resolve() if target else path
        if md.suffix == ".md" and md.exists() and anchor not in heading_anchors(md):
            broken.append(match.group(1))
    return broken


def test_scan_finds_the_paths_it_should():
    """The scanner itself: it must see the paths these documents are known to name."""
    readme = {rel for _, rel in named_paths(REPO / "README.md")}
    assert "docs/design.md" in readme
    assert concrete_part("results/<experiment>/<run_id>/") == "results"
    assert concrete_part("experiments/<name>.yaml") == "experiments"
    assert concrete_part("benchmarks/selection.py's") == "benchmarks/selection.py"
    assert concrete_part("docs/gallery/*.png") == "docs/gallery"
    assert is_generated("results/fnn3-mnist/quick-topk-0123")
    results = "results/"  # split, so that this file does not itself name a missing path
    assert not is_generated(results + "reference/nothing-here.csv")
    assert not is_generated(results + "figure")
    assert "package-map" in heading_anchors(REPO / "docs" / "design.md")


@pytest.mark.parametrize("path", scanned_files(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_named_paths_exist(path: Path):
    missing = sorted({
        f"{written} -> {rel}" for written, rel in named_paths(path)
        if not is_generated(rel) and not (REPO / rel).exists()
    })
    assert not missing, (
        f"{path.relative_to(REPO)} names paths that are not in the repository: "
        + "; ".join(missing))


@pytest.mark.parametrize("path", [p for p in scanned_files() if p.suffix == ".md"],
                         ids=lambda p: p.relative_to(REPO).as_posix())
def test_markdown_anchors_exist(path: Path):
    broken = broken_anchors(path)
    assert not broken, f"{path.relative_to(REPO)} links to headings that do not exist: {broken}"
