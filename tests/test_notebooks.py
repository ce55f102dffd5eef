"""Every notebook runs top to bottom (papermill, real kernel) on a small real result folder,
shows its figures, and is committed with its outputs stripped."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from tests._figures_results import shared_small_results

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
REQUIRED = {"distributions", "contraction", "selectors", "convergence", "selection_speed"}
FIGURES = {"distributions": 3, "contraction": 2, "selectors": 1, "convergence": 4,
           "selection_speed": 2}


@pytest.fixture(scope="session")
def small(tmp_path_factory, data_root):
    return shared_small_results(tmp_path_factory, data_root)


def parameters_for(name: str, small) -> dict:
    run_dir = next(p for p in (small.root / "tiny-fnn3").iterdir() if (p / "manifest.json").exists())
    return {
        "distributions": {"run_dir": str(run_dir)},
        "contraction": {"run_dir": str(run_dir)},
        "selectors": {"run_dir": str(run_dir)},
        "convergence": {"results_root": str(small.root), "experiment": "tiny-seeds"},
        "selection_speed": {"bench_csv": str(small.root / "bench" / "selection.csv")},
    }[name]


def test_the_required_notebooks_exist():
    assert {p.stem for p in NOTEBOOKS} == REQUIRED


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stripped_and_parameterised(path):
    book = nbformat.read(path, as_version=4)
    nbformat.validate(book)
    code = [c for c in book.cells if c.cell_type == "code"]
    assert all(c.outputs == [] and c.execution_count is None for c in code), "outputs not stripped"
    tagged = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and code.index(tagged[0]) == 0  # papermill's parameters cell first
    assert "topkscope.analysis.runs" in "".join(c.source for c in code)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes_on_a_real_run(path, small, tmp_path):
    import papermill

    out = tmp_path / path.name
    papermill.execute_notebook(str(path), str(out), parameters=parameters_for(path.stem, small),
                               kernel_name="python3", progress_bar=False, cwd=str(tmp_path))
    book = nbformat.read(out, as_version=4)
    outputs = [o for c in book.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == FIGURES[path.stem]
    assert path.read_text() == path.read_text()  # the committed notebook is not modified
    assert nbformat.read(path, as_version=4).cells[0].get("outputs", []) == []
