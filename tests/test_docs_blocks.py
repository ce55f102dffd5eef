"""Every shell and Python block of README.md and docs/ runs as written (`make test-docs`).

A page's blocks are the fenced code blocks of its markdown. Each has a language: `bash` and
`python` blocks are what a reader copies, and the tier runs them; `text` is output, a diagram
or a formula; `yaml` is a config fragment (it must parse); `diff` is a change to a reader's
own script. A block that cannot run here (GPUs, several nodes, the network, the full profile,
the whole quick profile) is preceded by an HTML comment that says why,

    <!-- not run: needs 16 GPUs -->

and is listed in NOT_RUN below, with the same reason; every other bash and python block runs.
Indented code blocks are not allowed (a reader cannot tell their language, and the tier
would miss them).

How a page runs: in a fresh folder laid out as a checkout — copies of `experiments/`,
`benchmarks/` and `notebooks/`, links to `.venv` (this interpreter's environment), `tests/`,
the Makefile, `pyproject.toml`, `results/reference/`, and `data` (the datasets,
$TOPKSCOPE_DATA) — with the environment's `bin/` first on PATH, as after
`source .venv/bin/activate`. The page's blocks run in order in that one folder, so a block may
use what an earlier block of the same page made (a page says so in its prose); nothing is
shared between pages. A bash block runs with `bash -e -o pipefail`; a python block in a
fresh interpreter. A block passes when it exits 0.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
RUN = ("bash", "python")                  # the languages the tier runs
LANGUAGES = (*RUN, "text", "yaml", "diff")

# (page, first line of the block) -> why it does not run here; the page says the same in its
# `<!-- not run: ... -->` comment
NOT_RUN: dict[tuple[str, str], str] = {}

# copied into a page's folder (blocks may write beside them, e.g. results/bench/); linked
COPIED = ("experiments", "benchmarks", "notebooks")
LINKED = ("tests", "Makefile", "pyproject.toml")
BLOCK_TIMEOUT_S = 900

_FENCE = re.compile(r"^(`{3,})\s*([\w+-]*)\s*$")
_NOT_RUN = re.compile(r"^<!--\s*not run:\s*(.+?)\s*-->\s*$")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: str          # repository-relative path of the markdown file
    line: int          # 1-based line of the opening fence
    language: str      # the fence's info string ("" when there is none)
    text: str
    not_run: str | None  # the reason of a `<!-- not run: ... -->` comment just before it

    @property
    def first_line(self) -> str:
        return next((line.strip() for line in self.text.splitlines() if line.strip()), "")

    @property
    def key(self) -> tuple[str, str]:
        return (self.page, self.first_line)

    def __str__(self) -> str:
        return f"{self.page}:{self.line} ({self.language or 'no language'}: {self.first_line})"


def blocks_of(path: Path) -> list[Block]:
    """The fenced code blocks of a markdown file, with any not-run comment before each (on the
    line before the fence, blank lines between allowed)."""
    page = path.relative_to(REPO).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, language = opening.groups()
        end = next((j for j in range(i + 1, len(lines))
                    if lines[j].startswith(fence) and not lines[j].strip("`").strip()), None)
        if end is None:
            raise ValueError(f"{page}:{i + 1}: a code block that is never closed")
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        reason = _NOT_RUN.match(before.strip())
        blocks.append(Block(page, i + 1, language, "\n".join(lines[i + 1:end]) + "\n",
                            reason.group(1) if reason else None))
        i = end + 1
    return blocks


def indented_code_lines(path: Path) -> list[int]:
    """The first line of every indented code block outside the fenced blocks: a line indented
    by four or more spaces after a blank line, unless it continues a list item."""
    found, in_fence, fence = [], False, ""
    previous_blank, in_list = True, False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        opening = _FENCE.match(line)
        if in_fence:
            if line.startswith(fence) and not line.strip("`").strip():
                in_fence = False
            continue
        if opening:
            in_fence, fence = True, opening.group(1)
            previous_blank = in_list = False
            continue
        if not line.strip():
            previous_blank = True
            continue
        indented = line.startswith("    ")
        if indented and previous_blank and not in_list:
            found.append(number)
        if _LIST_ITEM.match(line):
            in_list = True
        elif not line.startswith(" ") and not indented:
            in_list = False
        previous_blank = False
    return found


def all_blocks() -> list[Block]:
    return [block for page in PAGES for block in blocks_of(page)]


def runnable(blocks: list[Block]) -> list[Block]:
    return [b for b in blocks if b.language in RUN and b.not_run is None]


# ---- the page's folder ---------------------------------------------------------------------

def make_checkout(folder: Path, data_root: Path) -> Path:
    """A folder laid out as a checkout of the repository (see the module docstring)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        shutil.copytree(REPO / name, folder / name,
                        ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    for name in LINKED:
        (folder / name).symlink_to(REPO / name)
    (folder / ".venv").symlink_to(Path(sys.prefix))
    (folder / "data").symlink_to(data_root.resolve())
    (folder / "results").mkdir()
    (folder / "results" / "reference").symlink_to(REPO / "results" / "reference")
    return folder


def block_environment(folder: Path, data_root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.prefix) / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(Path(sys.prefix))
    env["TOPKSCOPE_DATA"] = str(data_root.resolve())
    env["TOPKSCOPE_BENCHMARKS"] = str(folder / "benchmarks")  # the copy, not the repository's
    env["TOPKSCOPE_RESULTS"] = str(folder / "results")
    env["MPLBACKEND"] = "Agg"
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


def run_block(block: Block, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    if block.language == "bash":
        argv = ["bash", "-e", "-o", "pipefail", "-c", block.text]
    else:
        argv = [sys.executable, "-c", block.text]
    return subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True,
                          timeout=BLOCK_TIMEOUT_S)
