"""Every notebook runs top to bottom (papermill and `jupyter nbconvert --execute`, real kernel,
from a working directory outside the repository) on a small real result folder, shows its
figures, skips with a hint what a run lacks, and is committed with its outputs stripped."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch

from tests._figures_results import shared_small_results
from topkscope import notebooks
from topkscope.hooks import Recorder

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
REQUIRED = {"distributions", "contraction", "selectors", "convergence", "selection_speed",
            "pseudo_gradients", "atlas"}
FIGURES = {"distributions": 3, "contraction": 2, "selectors": 1, "convergence": 4,
           "selection_speed": 2, "pseudo_gradients": 3, "atlas": 1}
# run with its defaults on the small results, which hold no outer-loop run: it says so and
# draws nothing
DEFAULT_FIGURES = {**FIGURES, "pseudo_gradients": 0}


@pytest.fixture(scope="session")
def small(tmp_path_factory, data_root):
    return shared_small_results(tmp_path_factory, data_root)


def parameters_for(name: str, small, request) -> dict:
    if name == "pseudo_gradients":  # runs of tests/_outer_runs.py
        return {"results_root": str(request.getfixturevalue("outer_runs")),
                "experiment": "outer-fnn3-mnist"}
    run_dir = next(p for p in (small.root / "tiny-fnn3").iterdir() if (p / "manifest.json").exists())
    return {
        "distributions": {"run_dir": str(run_dir)},
        "contraction": {"run_dir": str(run_dir)},
        "selectors": {"run_dir": str(run_dir)},
        "convergence": {"results_root": str(small.root), "experiment": "tiny-seeds"},
        "selection_speed": {"bench_csv": str(small.root / "bench" / "selection.csv")},
        "atlas": {"results_root": str(small.root)},
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
    assert "topkscope.analysis.runs" in "".join(c.source for c in code) or \
        path.stem == "selection_speed"
    assert "notebooks." in "".join(c.source for c in code)  # paths from topkscope.notebooks


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes_on_a_real_run(path, small, tmp_path, request):
    import papermill

    out = tmp_path / path.name
    papermill.execute_notebook(str(path), str(out),
                               parameters=parameters_for(path.stem, small, request),
                               kernel_name="python3", progress_bar=False, cwd=str(tmp_path))
    book = nbformat.read(out, as_version=4)
    outputs = [o for c in book.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) == FIGURES[path.stem]
    assert path.read_text() == path.read_text()  # the committed notebook is not modified
    assert nbformat.read(path, as_version=4).cells[0].get("outputs", []) == []


def outputs_of(path: Path) -> list:
    book = nbformat.read(path, as_version=4)
    return [o for c in book.cells if c.cell_type == "code" for o in c.outputs]


def kernel_env(**extra) -> dict:
    repo = str(REPO)
    return {**os.environ, "PYTHONPATH": repo + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "OMP_NUM_THREADS": "1", **extra}


def test_nbconvert_runs_every_notebook_with_its_defaults_from_another_folder(small, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
         "--output-dir", str(tmp_path / "out"), *map(str, NOTEBOOKS)],
        cwd=elsewhere, env=kernel_env(TOPKSCOPE_RESULTS=str(small.root)), capture_output=True,
        text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    for path in NOTEBOOKS:
        outputs = outputs_of(tmp_path / "out" / path.name)
        assert not [o for o in outputs if o.output_type == "error"], path.stem
        images = [o for o in outputs if "image/png" in o.get("data", {})]
        assert len(images) == DEFAULT_FIGURES[path.stem], path.stem
        text = "".join(o.get("text", "") for o in outputs)
        assert "skipped" not in text, (path.stem, text)


@pytest.fixture
def thin_run(tmp_path):
    """A user's run with cheap statistics only: no histograms, snapshots or selectors."""
    run_dir = tmp_path / "thin"
    layout = [("w", 0, 400), ("b", 400, 100)]
    with Recorder(run_dir, densities=[0.01, 0.1], per_layer=False) as rec:
        for step in range(5):
            rec.record(step, 0, u=torch.randn(500), layout=layout)
    return run_dir


@pytest.mark.parametrize("name, hints", [
    ("distributions", ["no histograms of rank 0; record them with Recorder(hist_schedule=",
                       "no snapshots of u of rank 0; save them with "
                       "Recorder(snapshot_schedule="]),
    ("contraction", ["no snapshots of u of rank 0", "no per-layer rows; record them with "
                     "Recorder(per_layer=True)"]),
    ("selectors", ["no approximate selector columns; evaluate them with "
                   "Recorder(sparsifiers="]),
])
def test_a_run_without_some_data_skips_those_cells_with_a_hint(name, hints, thin_run, tmp_path):
    import papermill

    out = tmp_path / f"{name}.ipynb"
    papermill.execute_notebook(str(REPO / "notebooks" / f"{name}.ipynb"), str(out),
                               parameters={"run_dir": str(thin_run)}, kernel_name="python3",
                               progress_bar=False, cwd=str(tmp_path))
    outputs = outputs_of(out)
    assert not [o for o in outputs if o.output_type == "error"]
    lines = [line for o in outputs for line in o.get("text", "").splitlines()]
    skipped = [line for line in lines if line.startswith("skipped: ")]
    for hint in hints:
        assert [line for line in skipped if hint in line], (hint, skipped)
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    # distributions: skewness and kurtosis over training come from the statistics rows
    assert len(images) == {"distributions": 1, "contraction": 1, "selectors": 0}[name]


def test_the_atlas_names_the_runs_without_saved_vectors_and_says_what_it_skips(thin_run,
                                                                               tmp_path):
    import papermill

    out = tmp_path / "atlas.ipynb"
    papermill.execute_notebook(str(REPO / "notebooks" / "atlas.ipynb"), str(out),
                               parameters={"results_root": str(thin_run.parent)},
                               kernel_name="python3", progress_bar=False, cwd=str(tmp_path))
    outputs = outputs_of(out)
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs)
    assert "1 complete run(s) under the results root, 0 with saved vectors" in text
    assert "not in the atlas: 1 run(s) saved no vectors (a config's recorder: " \
        "snapshot_schedule saves them): thin" in text
    assert "skipped: no run under the results root saved a vector of worker 0" in text
    assert str(tmp_path) not in text  # paths relative to the results root
    assert not [o for o in outputs if "image/png" in o.get("data", {})]


HOOK_RUN = """
# a user's one-rank DDP script with the TopK hook, the recorder (statistics only) and AdamW
import sys
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from tests._hooks_loop import tiny_model
from topkscope.comm import TopKHookState, topk_hook
from topkscope.hooks import Recorder

torch.set_num_threads(1)
dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=0, world_size=1)
model = tiny_model(0)
ddp = DDP(model)
opt = torch.optim.AdamW(ddp.parameters(), lr=1e-2)
with Recorder(sys.argv[1], schedule=1, densities=[0.05], rank=0) as rec, \\
        TopKHookState(model, density=0.05, recorder=rec, optimizer=opt) as state:
    ddp.register_comm_hook(state, topk_hook)
    for step in range(30):
        x, y = torch.randn(16, 12), torch.randint(0, 3, (16,))
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        state.note(loss=loss.item())
dist.destroy_process_group()
"""


@pytest.fixture(scope="module")
def hook_run(tmp_path_factory) -> Path:
    """A DDP-hook run (one gloo rank): train.parquet with the noted loss, statistics rows, no
    evaluation, no snapshots, no histograms."""
    root = tmp_path_factory.mktemp("hook")
    run_dir = root / "results" / "my-exp" / "run1"
    done = subprocess.run([sys.executable, "-c", HOOK_RUN, str(run_dir), str(root / "store")],
                          cwd=REPO, env=kernel_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return run_dir


def test_a_hook_run_records_the_optimizer_it_was_given(hook_run):
    from topkscope.analysis.runs import load

    m = load(hook_run).manifest
    assert (m["launcher"], m["status"], m["world_size"]) == ("ddp-hook", "complete", 1)
    opt = m["optimizer"]
    assert (opt["name"], opt["lr"], opt["betas"], opt["eps"], opt["weight_decay"]) == \
        ("adamw", 1e-2, [0.9, 0.999], 1e-8, 0.01)  # torch.optim.AdamW's defaults but lr
    assert opt["param_groups"] == [{"tensors": 6, "elements": m["num_parameters"]}]


def cell_outputs(book, needle: str) -> list:
    """The outputs of the one code cell whose source contains needle."""
    (cell,) = [c for c in book.cells if c.cell_type == "code" and needle in c.source]
    return cell.outputs


@pytest.mark.parametrize("name, plotting_cell", [
    ("convergence", "plots.convergence("),
    ("distributions", "plots.normality_over_training("),
])
def test_a_hook_run_plots_loss_and_moments_from_its_tables(name, plotting_cell, hook_run,
                                                           tmp_path):
    import papermill

    out = tmp_path / f"{name}.ipynb"
    params = ({"results_root": str(hook_run.parent.parent), "experiment": "my-exp"}
              if name == "convergence" else {"run_dir": str(hook_run)})
    papermill.execute_notebook(str(REPO / "notebooks" / f"{name}.ipynb"), str(out),
                               parameters=params, kernel_name="python3", progress_bar=False,
                               cwd=str(tmp_path))
    book = nbformat.read(out, as_version=4)
    assert not [o for o in outputs_of(out) if o.output_type == "error"]
    plotted = cell_outputs(book, plotting_cell)
    assert [o for o in plotted if "image/png" in o.get("data", {})], name  # the plot, drawn
    text = "".join(o.get("text", "") for o in plotted)
    assert "skipped" not in text, text
    if name == "convergence":
        assert "my-exp/run1 has no evaluation rows (eval.parquet): training loss only" in text
    else:  # the snapshot cells before it were the ones skipped
        skipped = "".join(o.get("text", "") for o in cell_outputs(book, "have_snapshots = "))
        assert "skipped: " in skipped and "no snapshots of u" in skipped


def test_a_hook_run_without_a_noted_loss_says_how_to_note_it(hook_run, tmp_path):
    import pandas as pd
    import papermill

    bare = tmp_path / "results" / "my-exp" / "run1"
    shutil.copytree(hook_run, bare)
    train = pd.read_parquet(bare / "train.parquet").assign(loss=float("nan"))
    train.to_parquet(bare / "train.parquet")
    out = tmp_path / "convergence.ipynb"
    papermill.execute_notebook(str(REPO / "notebooks" / "convergence.ipynb"), str(out),
                               parameters={"results_root": str(tmp_path / "results"),
                                           "experiment": "my-exp"},
                               kernel_name="python3", progress_bar=False, cwd=str(tmp_path))
    book = nbformat.read(out, as_version=4)
    text = "".join(o.get("text", "") for o in cell_outputs(book, "plots.convergence("))
    assert "skipped: " in text and "state.note(loss=loss.item())" in text
    assert not [o for o in outputs_of(out) if "image/png" in o.get("data", {})]


def test_default_paths_come_from_the_environment_or_the_repository(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(notebooks.RESULTS_ENV, raising=False)
    assert notebooks.results_root() == REPO / "results"
    assert notebooks.resolve("notebooks") == REPO / "notebooks"  # not under the cwd
    (tmp_path / "notebooks").mkdir()
    assert notebooks.resolve("notebooks") == tmp_path / "notebooks"  # the cwd's wins
    monkeypatch.setenv(notebooks.RESULTS_ENV, str(tmp_path / "mine"))
    assert notebooks.results_root() == tmp_path / "mine"
    with pytest.raises(ValueError, match="no complete recorded run .*TOPKSCOPE_RESULTS"):
        notebooks.pick_run()
    with pytest.raises(ValueError, match="run_dir = 'nowhere' .* is not a result folder"):
        notebooks.pick_run("nowhere")


def recorded_run(root: Path, experiment: str, run_id: str, start: str, *, hist=None,
                 snapshots=None, sparsifiers=()) -> Path:
    """A complete recorded run (a Recorder's own folder) started at `start`."""
    import json

    run_dir = root / experiment / run_id
    with Recorder(run_dir, densities=[0.01], hist_schedule=hist, snapshot_schedule=snapshots,
                  sparsifiers=list(sparsifiers)) as rec:
        for step in range(3):
            rec.record(step, 0, u=torch.randn(400), layout=[("w", 0, 300), ("b", 300, 100)])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest.update(start_time=start, experiment=experiment)
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    return run_dir


def test_with_no_run_dir_a_notebook_takes_the_newest_run_holding_what_it_draws(tmp_path, capsys):
    """As on the quick profile: the distribution run (histograms, snapshots, selectors) is
    older than the convergence runs, which record statistics alone."""
    root = tmp_path / "results"
    full = recorded_run(root, "fnn3-mnist", "quick-topk", "2026-01-01T00:00:00+00:00", hist=1,
                        snapshots=[1, 2], sparsifiers=["gaussiank"])
    recorded_run(root, "convergence-fnn3-mnist", "quick-topk-s1", "2026-01-02T00:00:00+00:00")
    newest = recorded_run(root, "convergence-fnn3-mnist", "quick-topk-s2",
                          "2026-01-03T00:00:00+00:00")
    needs = {"distributions": ("stats", "hist", "snapshots"),
             "contraction": ("stats", "snapshots", "layers"), "selectors": ("selectors",)}
    for name, wanted in needs.items():
        assert notebooks.pick_run(results=root, needs=wanted) == full, name
        text = capsys.readouterr().out
        assert "took fnn3-mnist/quick-topk, the newest that holds " + ", ".join(wanted) in text
        holds = "stats" if "stats" in wanted else "none"
        assert f"convergence-fnn3-mnist/quick-topk-s2: holds {holds}" in text
        assert str(root) not in text
    assert notebooks.pick_run(results=root, needs=("stats",)) == newest
    shutil.rmtree(full)  # no run holds histograms: the newest, and it says what is skipped
    assert notebooks.pick_run(results=root, needs=("stats", "hist")) == newest
    assert "(none holds hist: those cells are skipped)" in capsys.readouterr().out


def test_executed_copies_name_their_runs_relative_to_the_results_root_and_survive_a_move(
        small, tmp_path):
    """The figures driver's executed notebooks hold no machine's folder, and a copy of the
    results root elsewhere reruns them as they are."""
    import papermill

    from topkscope.reproduce import notebook_runs

    root = tmp_path / "results"
    shutil.copytree(small.root / "tiny-fnn3", root / "tiny-fnn3")
    run_dir = next(p for p in (root / "tiny-fnn3").iterdir() if (p / "manifest.json").exists())
    jobs = notebook_runs.notebook_jobs({"tiny-fnn3": run_dir}, [], {}, root)
    job = next(j for j in jobs if j.notebook == "contraction")
    assert job.parameters == {"run_dir": f"tiny-fnn3/{run_dir.name}"}
    book, _ = notebook_runs.execute(job, root / "notebooks", cwd=root)
    text = book.read_text()
    assert str(tmp_path) not in text and str(REPO) not in text
    assert f"tiny-fnn3/{run_dir.name}" in text
    moved = tmp_path / "moved"
    shutil.move(root, moved)
    again = tmp_path / "again.ipynb"
    papermill.execute_notebook(str(moved / "notebooks" / book.name), str(again),
                               kernel_name="python3", progress_bar=False, cwd=str(moved))
    assert not [o for o in outputs_of(again) if o.output_type == "error"]
    assert len([o for o in outputs_of(again) if "image/png" in o.get("data", {})]) == \
        FIGURES["contraction"]


def test_notebooks_in_the_background_leave_this_process_in_its_folder(small, tmp_path):
    """The driver builds the claims (relative run paths) while Background executes the
    notebooks: the kernel runs in the results root, this process never leaves its folder (a
    papermill cwd= chdir'd it and the claims lost their snapshots)."""
    import os
    import time

    from topkscope.reproduce import notebook_runs

    root = tmp_path / "results"
    shutil.copytree(small.root / "tiny-fnn3", root / "tiny-fnn3")
    run_dir = next(p for p in (root / "tiny-fnn3").iterdir() if (p / "manifest.json").exists())
    jobs = [j for j in notebook_runs.notebook_jobs({"tiny-fnn3": run_dir}, [], {}, root)
            if j.notebook == "contraction"]
    here = os.getcwd()
    background = notebook_runs.Background(root / "notebooks", log=lambda m: None, cwd=root)
    background.submit(jobs)
    seen = set()
    while background._thread.is_alive() and not background.files:
        seen.add(os.getcwd())
        time.sleep(0.01)
        if len(seen) > 1 or background.failures:
            break
    files, failures = background.finish()
    assert seen == {here} and failures == [] and len(files) == 2
    text = files[0].read_text()
    assert f"tiny-fnn3/{run_dir.name}" in text  # the relative path, read in the results root
    assert not [o for o in outputs_of(files[0]) if o.output_type == "error"]


def test_the_figures_driver_executes_the_pseudo_gradients_notebook_per_outer_experiment(
        outer_runs, tmp_path):
    """Once per outer-loop experiment, on the experiment's runs under the results root it
    executes in: the per-run table and the three figures, no error."""
    from topkscope.reproduce import notebook_runs

    jobs = notebook_runs.notebook_jobs({}, [], {}, outer_runs, outer=["outer-fnn3-mnist"])
    assert [(j.notebook, j.label, j.parameters) for j in jobs] == [
        ("pseudo_gradients", "outer-fnn3-mnist",
         {"results_root": ".", "experiment": "outer-fnn3-mnist"})]
    book, page = notebook_runs.execute(jobs[0], tmp_path / "notebooks", cwd=outer_runs)
    assert (book.name, page.name) == ("pseudo_gradients-outer-fnn3-mnist.ipynb",
                                      "pseudo_gradients-outer-fnn3-mnist.html")
    outputs = outputs_of(book)
    assert not [o for o in outputs if o.output_type == "error"]
    assert len([o for o in outputs if "image/png" in o.get("data", {})]) == \
        FIGURES["pseudo_gradients"]
    assert str(outer_runs) not in book.read_text()


def test_what_is_missing_is_said_in_words_with_no_machine_folder(tmp_path, monkeypatch, capsys):
    """A results root without an outer-loop run or a benchmark table, the notebooks executed as
    the figures driver executes them (in the root, results_root '.'): the skip lines name what
    is missing in words ("no complete outer-loop run", never "experiment None") and print
    paths relative to the results root, never this machine's folders."""
    import papermill

    root = tmp_path / "results"
    thin = recorded_run(root, "fnn3-mnist", "r1", "2026-01-01T00:00:00+00:00")
    with pytest.raises(ValueError) as err:
        notebooks.pick_runs(results=root, outer=True)
    assert str(err.value).startswith(
        f"no complete outer-loop run under the results root {str(root)!r}")
    monkeypatch.chdir(tmp_path / "..")
    with pytest.raises(ValueError) as err:
        notebooks.pick_runs(results=".", profile="full", experiment="fnn3-mnist")
    assert "None" not in str(err.value) and str(err.value).startswith(
        "no complete run of experiment 'fnn3-mnist' of the full profile under the results root")
    # a run folder outside the results root and the working folder: from its own results root
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    monkeypatch.delenv(notebooks.RESULTS_ENV, raising=False)
    assert notebooks.shown(thin / "stats") == "fnn3-mnist/r1/stats"
    assert notebooks.missing(load_thin(thin), "hist").startswith(
        "skipped: fnn3-mnist/r1 has no histograms")
    for name, said in (("pseudo_gradients", "no complete outer-loop run under the results root;"),
                       ("selection_speed", "skipped: no selection benchmark table "
                                           "bench/selection.csv; write it with")):
        out = tmp_path / f"{name}.ipynb"
        papermill.execute_notebook(str(REPO / "notebooks" / f"{name}.ipynb"), str(out),
                                   parameters={"results_root": "."}, kernel_name="python3",
                                   progress_bar=False, cwd=str(root))
        text = "".join(o.get("text", "") for o in outputs_of(out))
        assert said in text, text
        assert str(tmp_path) not in text and "None" not in text, text


def load_thin(run_dir: Path):
    from topkscope.analysis.runs import load

    return load(run_dir)
