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
`pyproject.toml`, `results/reference/`, and `data` (the datasets, $TOPKSCOPE_DATA); no
Makefile, so no block may run `make` — with the environment's `bin/` first on PATH, as after
`source .venv/bin/activate`, and $TOPKSCOPE_DATA, $TOPKSCOPE_BENCHMARKS (the copy) and
$TOPKSCOPE_RESULTS (the folder's results/) pointing into it, so nothing reads or writes the
repository's own results. The page's blocks run in order in that one folder, so a block may
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
NOT_RUN: dict[tuple[str, str], str] = {
    ('docs/scaling.md', 'python -m topkscope.perf.gtopkssgd'):
        'rewrites the committed gtopkssgd_validation.csv; tests/test_perf_gtopkssgd.py regenerates it and compares',
    ('docs/scaling.md', 'python -m topkscope.claims.gpu_bands'):
        'rewrites the committed p16-gpu.csv; tests/test_perf_p16_gpu.py regenerates it and compares',
    ('docs/scaling.md', 'python -m topkscope.perf.gpu_bands'):
        'rewrites the committed gpu_bands.csv and gpu_traffic.csv; tests/test_perf_gpu_bands.py regenerates them and compares',
    ('docs/scaling.md', 'python -m topkscope.perf.counts results/standard'):
        "needs the standard profile's run folders (not in the repository); rewrites the committed measured_counts.csv",
    ('docs/scaling.md',
     'python -m topkscope.perf.gpu_runs imported   # runs.csv, validation.csv, gpu_selection.csv; published.csv'):
        'needs the imported runs of the published logs (about 53 MB, not in the repository)',
    ('docs/results.md', 'topkscope import gaussiank-sgd job/ --results imported'):
        'needs the published logs (kljp/topk_results, about 53 MB) in job/',
    ('docs/results.md', 'topkscope import grace GRACE_data_release.pickle --out grace'):
        "needs the release's pickle (sands-lab/grace-data), not in the repository",
    ('docs/scaling.md',
     'python -m topkscope.perf.grace     # pays.csv, model.csv; prints the headline numbers'):
        'rewrites the committed pays.csv and model.csv; tests/test_perf_grace.py regenerates them and compares',
    ('README.md',
     'make reproduce-figures    # quick profile: train, record, analyse, every figure, results/claims.csv, results/report.html'):
        'the whole quick profile (about 20 minutes on 2 cores) and the test suite itself',
    ('README.md',
     'topkscope report results/my-exp/run1 --out my-run.html   # one run of yours'):
        'needs run folders of yours (tests/test_report.py runs it on a DDP-hook run)',
    ('docs/figures.md',
     'topkscope report results/my-exp/run1 --out my-run.html   # one run of yours (DDP hook, Recorder, topkscope run)'):
        'needs run folders of yours; tests/test_report.py runs it on a DDP-hook run and on a profile\'s results root, in a headless browser',
    ('docs/benchmarks.md',
     'topkscope bench --quick                       # every benchmark, each well under a minute'):
        'every benchmark (minutes even with --quick), and full sizes',
    ('docs/benchmarks.md',
     '.venv/bin/python benchmarks/selection.py --device cuda --out results/reference/bench-gpu/selection.csv'):
        'needs a CUDA GPU',
    ('docs/data.md',
     'topkscope fetch --data DIR                 # MNIST + PTB into DIR (idempotent: a rerun only verifies)'):
        'downloads (MNIST, PTB and CIFAR-10 from the network)',
    ('docs/figures.md',
     'make reproduce-figures                  # quick profile, on a 2-core CPU (at most 20 minutes)'):
        'the whole quick profile (about 20 minutes on 2 cores) and the full profile (GPUs); the blocks below run its parts',
    ('docs/figures.md',
     'topkscope figures --profile full --dry-run        # run folders and their `topkscope run` commands'):
        'the full profile on two nodes with 8 GPUs each',
    ('docs/recording.md',
     'import torch.distributed as dist'):
        'a change to your own torchrun script (NCCL, GPUs); tests/test_hooks_distributed.py runs it on two gloo processes',
    ('docs/scaling.md',
     'python -m topkscope.perf.published      # regenerates gpu_compute.csv and published.csv'):
        'it rewrites the committed files; tests/test_perf_published.py regenerates them into a temporary folder and compares',
    ('docs/scaling.md',
     'python benchmarks/selection.py --device cuda --out results/reference/bench-gpu/selection.csv'):
        'needs a CUDA GPU',
    ('docs/development.md',
     '+[project.entry-points."topkscope.plugins"]'):
        "a change to your own package's pyproject.toml; tests/test_plugins.py declares the entry point in an installed distribution's metadata and runs a command with it",
    ('docs/training.md',
     'topkscope run experiments/fnn3-mnist.yaml --profile full --workers 16 --sparsifier gaussiank'):
        'the full profile (30 epochs on 16 workers: hours on a CPU)',
    ('docs/training.md',
     '# two nodes x 8 GPUs (run on each node; node-rank 0 and 1)'):
        'needs two nodes with 8 GPUs each',
    ('docs/training.md',
     '# train_gpt.py: a small GPT on PTB with AdamW, TopK-SGD through the DDP hook, recorded.'):
        'a script for torchrun (two ranks); tests/test_recipes.py runs it under torchrun with two gloo processes',
    ('docs/training.md',
     '# train_lightning.py: a small CNN on MNIST in Lightning, TopK-SGD through the DDP hook, recorded.'):
        'a script for torchrun (two ranks); tests/test_recipes.py runs it under torchrun with two gloo processes',
    ('docs/training.md',
     '# train_accelerate.py: the same CNN with Hugging Face Accelerate, TopK-SGD through the DDP hook.'):
        'a script for torchrun (two ranks); tests/test_recipes.py runs it under torchrun with two gloo processes',
    ('docs/training.md',
     '# diloco_torchrun.py: DiLoCo-style training of FNN-3 on MNIST, one worker per torchrun process.'):
        'a script for torchrun (two ranks); tests/test_recipes.py runs it under torchrun with two gloo processes',
    ('docs/training.md',
     'from topkscope import checkpoint'):
        'lines of a torchrun script; tests/test_hook_runs.py runs tests/fixtures/user_cnn_ddp.py, which holds every line of this block',
    ('docs/training.md',
     'torchrun --standalone --nproc-per-node 2 --max-restarts 3 -m topkscope.cli run experiments/fnn3-mnist.yaml --run-id r1'):
        'a restart shows only when a worker dies; tests/test_run_failures.py kills one under --max-restarts 1',
    ('docs/training.md',
     'import torch.distributed as dist'):
        'a change to your own torchrun script (NCCL, GPUs); tests/test_hooks_distributed.py runs the hook on two gloo processes',
}

# copied into a page's folder (blocks may write beside them, e.g. results/bench/); linked
COPIED = ("experiments", "benchmarks", "notebooks")
# no Makefile: a make target may run `make setup`, and pip in this folder would point the
# environment's editable install at it
LINKED = ("tests", "pyproject.toml")
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


# ---- what the pages hold -------------------------------------------------------------------

_COMMAND = re.compile(r"^\s*(?:\$ )?(?:topkscope \w+\b(?!:)|make\b|python\b|\.venv/bin/|"
                      r"torchrun\b|papermill\b|pip\b)")


def test_every_block_has_a_language_and_no_code_block_is_indented():
    unlabelled = [str(b) for b in all_blocks() if b.language not in LANGUAGES]
    assert not unlabelled, f"code blocks without one of the languages {LANGUAGES}: {unlabelled}"
    indented = [f"{page.relative_to(REPO)}:{line}" for page in PAGES
                for line in indented_code_lines(page)]
    assert not indented, f"indented code blocks (fence them with a language): {indented}"


def test_text_blocks_hold_no_commands():
    """A command in a `text` block would escape the tier: fence it as bash, marked if need be."""
    commands = [f"{b}: {line.strip()}" for b in all_blocks() if b.language == "text"
                for line in b.text.splitlines() if _COMMAND.match(line)]
    assert not commands, commands


def test_the_blocks_not_run_are_the_listed_ones():
    keys = [b.key for b in all_blocks() if b.not_run is not None]
    assert len(keys) == len(set(keys)), "two blocks not run begin alike on one page"
    marked = {b.key: b.not_run for b in all_blocks() if b.not_run is not None}
    assert marked == NOT_RUN, (
        f"marked in the pages but not listed: {sorted(set(marked) - set(NOT_RUN))}; "
        f"listed but not marked: {sorted(set(NOT_RUN) - set(marked))}; "
        f"reasons that differ: {[k for k in marked.keys() & NOT_RUN.keys() if marked[k] != NOT_RUN[k]]}")


def test_every_diff_block_is_marked_not_run():
    """A diff changes a reader's own script: the tier cannot run it, and the page says so."""
    assert [str(b) for b in all_blocks() if b.language == "diff" and b.not_run is None] == []


@pytest.mark.parametrize("block", [b for b in all_blocks() if b.language == "yaml"], ids=str)
def test_yaml_blocks_are_config_fragments_the_validator_accepts(block):
    """A yaml block is part of an experiment config: merged into experiments/fnn3-mnist.yaml
    (quick profile), the config validator accepts it."""
    from topkscope.train import load_config

    fragment = yaml.safe_load(block.text)
    assert isinstance(fragment, dict) and fragment
    cfg, _ = load_config(REPO / "experiments" / "fnn3-mnist.yaml", "quick", fragment)
    for key, value in fragment.items():  # what the fragment says is what the run gets
        got = getattr(cfg, key)
        assert ({k: got[k] for k in value} if isinstance(value, dict) else got) == value, key


# ---- the reader itself, on synthetic pages ---------------------------------------------------

def test_the_reader_finds_blocks_markers_and_indented_code(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\n"
        "```bash\necho one\n```\n\n"
        "<!-- not run: needs 16 GPUs -->\n\n"
        "````python\nprint('```')\n````\n"
        "Some prose.\n\n"
        "    indented code\n\n"
        "- a list item\n\n"
        "    its second paragraph\n\n"
        "```\nbare\n```\n")
    blocks = blocks_of(page)
    assert [(b.line, b.language, b.not_run) for b in blocks] == [
        (3, "bash", None), (9, "python", "needs 16 GPUs"), (20, "", None)]
    assert blocks[1].text == "print('```')\n" and blocks[1].first_line == "print('```')"
    assert indented_code_lines(page) == [14]
    assert [b.key for b in runnable(blocks)] == [("page.md", "echo one")]
    page.write_text("```bash\nnever closed\n")
    with pytest.raises(ValueError, match="never closed"):
        blocks_of(page)


def test_the_command_pattern():
    assert _COMMAND.match("topkscope run experiments/fnn3-mnist.yaml")
    assert _COMMAND.match(".venv/bin/python benchmarks/selection.py")
    assert not _COMMAND.match("topkscope run: interrupted by SIGTERM at step 43")
    assert not _COMMAND.match("cli")


# ---- running them --------------------------------------------------------------------------

PAGES_THAT_RUN = [p for p in PAGES if runnable(blocks_of(p))]
# the pages whose blocks take minutes (the slowest tests of the default suite in `pytest
# --durations`: figures.md and benchmarks.md about 9 and 5 minutes of a worker under load,
# scaling.md and training.md about 2 each on idle cores): they run in `make test-docs` and
# `make test-slow`, not in `make test`, which keeps to about 15 minutes on 2 cores
SLOW_PAGES = {"docs/figures.md": "draws a profile's figures, tables and notebooks from runs",
              "docs/benchmarks.md": "runs the benchmarks' quick versions one after another",
              "docs/scaling.md": "fits and validates the step-time model on its tables",
              "docs/training.md": "trains each of its examples"}


def _page_param(page: Path):
    name = page.relative_to(REPO).as_posix()
    return pytest.param(page, id=name, marks=[pytest.mark.slow] if name in SLOW_PAGES else [])


@pytest.mark.docs
@pytest.mark.train
@pytest.mark.parametrize("page", [_page_param(p) for p in PAGES_THAT_RUN])
def test_the_page_runs_as_written(page, tmp_path, data_root):
    folder = make_checkout(tmp_path / "checkout", data_root)
    env = block_environment(folder, data_root)
    for block in runnable(blocks_of(page)):
        try:
            done = run_block(block, folder, env)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{block} ran longer than {BLOCK_TIMEOUT_S} s")
        assert done.returncode == 0, (
            f"{block} exited {done.returncode}\n--- stdout (end) ---\n{done.stdout[-3000:]}"
            f"\n--- stderr (end) ---\n{done.stderr[-3000:]}")


def test_the_slow_pages_are_pages_that_run():
    """SLOW_PAGES names pages whose blocks run (a renamed page would silently join the default
    suite again otherwise)."""
    names = {p.relative_to(REPO).as_posix() for p in PAGES_THAT_RUN}
    assert set(SLOW_PAGES) <= names, set(SLOW_PAGES) - names
