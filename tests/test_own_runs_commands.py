"""The standard commands on a user's own runs: the user's CNN script
(tests/fixtures/user_cnn_ddp.py, TopKHookState + Recorder, no epoch noted) complete and with a
rank killed by SIGKILL. `topkscope claims` tabulates both and refuses, in one line, the folders
it cannot read (a foreign manifest.json, a set-up failure, no recorded rows); `topkscope
figures --no-run` draws the user's experiment."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.test_hooks_distributed import free_port
from topkscope.analysis.runs import load
from topkscope.cli import main as cli
from topkscope.hooks import Recorder
from topkscope.schema import GLOBAL

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "fixtures" / "user_cnn_ddp.py"
STEPS = 30       # the script records every 10th step: 10, 20 (0 is a dense all-reduce step)
KILL_AFTER = 35  # rank 1 is killed once rank 0 has done this step: 10, 20, 30 recorded


def start_ranks(out: Path, world: int, *args: str) -> list[subprocess.Popen]:
    """The user's script as ranks 0..world-1 of a gloo group on this machine."""
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
           "WORLD_SIZE": str(world), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return [subprocess.Popen([sys.executable, str(SCRIPT), str(out), *args], cwd=REPO,
                             env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for r in range(world)]


def user_run(out: Path, steps: int = STEPS, *args: str) -> Path:
    (rank0,) = start_ranks(out, 1, "--steps", str(steps), *args)
    _, err = rank0.communicate(timeout=300)
    assert rank0.returncode == 0, err[-2000:]
    return out


def killed_run(out: Path) -> Path:
    """Two ranks; rank 1 is killed with SIGKILL after rank 0's step KILL_AFTER: rank 0's
    collective fails and its `with` blocks end the run `failed`."""
    procs = start_ranks(out, 2, "--steps", "200")
    try:
        for line in procs[0].stdout:
            if line.strip() == f"step {KILL_AFTER}":
                procs[1].send_signal(signal.SIGKILL)
                break
        procs[0].communicate(timeout=300)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
    return out


@pytest.fixture(scope="module")
def own_runs(tmp_path_factory, data_root) -> Path:
    """cnn-exp/{complete,killed} under a results root: the user's script run as it is (no epoch noted)."""
    root = tmp_path_factory.mktemp("own") / "results"
    user_run(root / "cnn-exp" / "complete")
    killed_run(root / "cnn-exp" / "killed")
    return root


def claims_of(path: Path, capsys) -> tuple[pd.DataFrame, list[str]]:
    assert cli(["claims", str(path), "--out", "-"]) == 0
    captured = capsys.readouterr()
    return pd.read_csv(io.StringIO(captured.out)), captured.err.splitlines()


def global_u(run) -> pd.DataFrame:
    return run.stats[(run.stats["layer"] == GLOBAL) & (run.stats["kind"] == "u")]


def at_density(u: pd.DataFrame, row) -> pd.DataFrame:
    """The u rows of a claims row's recorder density."""
    return u[np.isclose(u["density"], row["recorder_density"])]


@pytest.mark.train
def test_claims_read_a_hook_run_whose_epoch_is_null(own_runs, capsys):
    run = load(own_runs / "cnn-exp" / "complete")
    assert run.manifest["status"] == "complete" and run.train["epoch"].isna().all()
    table, sentences = claims_of(run.path, capsys)
    u = global_u(run)
    assert len(u) and set(table["model"]) == {"CNN"} and set(table["dataset"]) == {"mnist"}
    row = table[table["claim"] == "below_paper"].iloc[0]
    u = at_density(u, row)  # a row per recorder density
    frac = float(np.mean(u["topk_ratio"] <= (1 - u["k"] / u["numel"]) ** 2))
    assert row["n_units"] == len(u) and row["fraction"] == pytest.approx(frac)
    assert row["condition"].startswith("warmup=none; rho=0.01")
    assert len(sentences) == len(table) and all(s.startswith("CNN on MNIST: ") for s in sentences)


@pytest.mark.train
def test_a_killed_runs_recorded_steps_count_in_its_claims(own_runs, capsys):
    run = load(own_runs / "cnn-exp" / "killed")
    assert run.manifest["status"] == "failed" and "diverged_at_step" not in run.manifest
    u = global_u(run)
    assert sorted(u[u["rank"] == 0]["step"].unique()) == [10, 20, 30]  # flushed by rank 0
    table, _ = claims_of(run.path, capsys)
    for claim in ("below_classic", "below_paper", "gaussian_value"):
        row = table[table["claim"] == claim].iloc[0]
        assert row["n_units"] == len(at_density(u, row)) and row["n_runs"] == 1, claim
        assert row["condition"].startswith("warmup=none; rho=0.01")
    # both runs of the experiment: one rank and two are conditions of their own, never pooled
    both, _ = claims_of(own_runs / "cnn-exp", capsys)
    rows = both[both["claim"] == "below_paper"]
    complete = global_u(load(own_runs / "cnn-exp" / "complete"))
    assert sorted(rows["world_size"]) == [1, 1, 2, 2] and (rows["n_runs"] == 1).all()
    for row in rows.to_dict("records"):
        units = u if row["world_size"] == 2 else complete
        assert row["n_units"] == len(at_density(units, row))


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("topkscope claims: error: "), err
    return err


def test_claims_refuse_what_they_cannot_read_in_one_line(tmp_path, capsys):
    out = tmp_path / "claims.csv"
    # a folder of another tool's with a manifest.json, with or without a status
    for name, manifest in (("foreign", {"name": "x", "status": "complete"}),
                           ("foreign-no-status", {"name": "x", "version": 3})):
        folder = tmp_path / "results" / name / "r1"
        folder.mkdir(parents=True)
        (folder / "manifest.json").write_text(json.dumps(manifest))
        assert cli(["claims", str(folder.parent), "--out", str(out)]) == 2
        err = one_line_error(capsys)
        # every command's path reader (manifest.runs_at) names another tool's manifest first
        assert f"{str(folder / 'manifest.json')!r} was not written by topkscope" in err
        assert "None" not in err and "nan" not in err
        shutil.rmtree(folder.parent)
    # a run that failed at set-up: the script failed before its first step
    setup = tmp_path / "results" / "mine" / "setup"
    with pytest.raises(FileNotFoundError):
        with Recorder(setup, schedule=1, rank=0):
            raise FileNotFoundError("no such file: 'my-data.npy'")
    assert load(setup).manifest["status"] == "failed"
    assert cli(["claims", str(setup), "--out", str(out)]) == 2
    err = one_line_error(capsys)
    assert f"{str(setup)!r}: it failed at set-up, before its first step (FileNotFoundError: " \
           "no such file: 'my-data.npy'): no recorded rows" in err
    # a complete run that recorded nothing
    empty = tmp_path / "results" / "mine" / "empty"
    with pytest.warns(UserWarning, match="closed with zero rows"):
        with Recorder(empty, schedule=1, rank=0):
            pass
    assert load(empty).manifest["status"] == "complete"
    assert cli(["claims", str(empty), "--out", str(out)]) == 2
    assert f"{str(empty)!r}: it holds no recorded rows" in one_line_error(capsys)
    # the experiment folder holding both: the first is named
    assert cli(["claims", str(empty.parent), "--out", str(out)]) == 2
    assert f"{str(empty)!r}: it holds no recorded rows" in one_line_error(capsys)
    assert not out.exists()


@pytest.mark.train
def test_a_run_whose_manifest_names_no_model_is_tabulated_by_its_size(own_runs, tmp_path):
    run_dir = tmp_path / "nameless"
    shutil.copytree(own_runs / "cnn-exp" / "complete", run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest.pop("model")  # what a Recorder in a loop of one's own writes: no model
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    assert cli(["claims", str(run_dir), "--out", str(tmp_path / "c.csv")]) == 0
    claims = pd.read_csv(tmp_path / "c.csv")
    size = manifest["num_parameters"]  # what the recorder saw: the length of u
    assert set(claims["model"]) == {f"a model of {size:,} parameters"}
    assert "below_paper" in set(claims["claim"])


@pytest.mark.train
def test_figures_no_run_draws_a_users_own_experiment(own_runs, tmp_path, capsys):
    root = tmp_path / "results"
    shutil.copytree(own_runs / "cnn-exp" / "complete", root / "cnn-exp" / "complete")
    assert cli(["figures", "--no-run", "--results", str(root), "--only", "cnn-exp",
                "--experiments", str(REPO / "experiments"), "--no-notebooks",
                "--no-tables"]) == 0
    log = capsys.readouterr().out
    assert "drawing cnn-exp (your own runs: 1; drawn, never run)" in log and "FAILED" not in log
    figures = root / "figures"
    # what the run holds data for: u's statistics every 10th step and the noted loss (no
    # histograms, snapshots or approximate selectors recorded by the script)
    drawn = sorted(p.stem for p in figures.glob("cnn-exp-*.png"))
    assert drawn == ["cnn-exp-contraction", "cnn-exp-convergence", "cnn-exp-normality"]
    index = (figures / "index.md").read_text()
    assert "## cnn-exp" in index and "CNN on MNIST" in index
    run = load(root / "cnn-exp" / "complete")
    claims = pd.read_csv(root / "claims.csv")
    row = claims[(claims["model"] == "CNN") & (claims["claim"] == "below_paper")].iloc[0]
    assert row["n_units"] == len(at_density(global_u(run), row))


@pytest.fixture(scope="module")
def measured_run(tmp_path_factory, data_root) -> Path:
    """A short `topkscope run` (12 steps of FNN-3, simulated workers): time_compute measured."""
    root = tmp_path_factory.mktemp("measured") / "results"
    assert cli(["run", str(REPO / "experiments" / "fnn3-mnist.yaml"), "--profile", "quick",
                "--results", str(root), "--steps", "12", "--run-id", "r1", "--set",
                "train_subset=2560", "--set", "eval_subset=1000", "--set", "recorder=null",
                "--data", str(data_root), "--no-progress"]) == 0
    return root / "fnn3-mnist" / "r1"


@pytest.mark.train
def test_scale_from_run_takes_the_size_and_measured_compute_of_a_run(measured_run, tmp_path,
                                                                     capsys):
    out = tmp_path / "scale.csv"
    assert cli(["scale", "--from-run", str(measured_run), "--network", "10gbe", "--workers",
                "16", "--methods", "topk", "--csv", str(out)]) == 0
    printed = capsys.readouterr().out
    manifest = json.loads((measured_run / "manifest.json").read_text())
    train = pd.read_parquet(measured_run / "train.parquet")
    compute = train[train["step"] >= 2]["time_compute"].median()  # the first steps warm up
    table = pd.read_csv(out)
    assert (table["d"] == manifest["num_parameters"]).all()
    assert table["t_compute"].to_numpy() == pytest.approx(compute, rel=1e-12)
    assert (table["inputs"] == "measured in a run").all()
    assert (table["batch_per_worker"] == manifest["config"]["batch_size"]).all()
    assert printed.startswith(f"fnn3 of {measured_run}: d = {manifest['num_parameters']:,}, ")
    assert f"sources of compute: measured in {measured_run} (median time_compute of 10 steps, " \
           "device cpu)" in printed


@pytest.mark.train
def test_scale_from_a_run_without_a_measured_compute_time_says_so(own_runs, tmp_path, capsys):
    """A hook run recorded before hook runs measured the compute time (topkscope 30062a1):
    time_compute null in every row. One line, exit 2, no guess."""
    run_dir = tmp_path / "older"
    shutil.copytree(own_runs / "cnn-exp" / "complete", run_dir)
    train = pd.read_parquet(run_dir / "train.parquet")
    train.assign(time_compute=np.nan).to_parquet(run_dir / "train.parquet")
    out = tmp_path / "scale.csv"
    assert cli(["scale", "--from-run", str(run_dir), "--network", "10gbe", "--workers", "16",
                "--csv", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (f"topkscope scale: error: {str(run_dir)!r} has no measured compute time "
                   "(time_compute is null in every train.parquet row); give --compute-s "
                   "SECONDS (one worker's forward + backward of a step)\n")
    assert not out.exists()
    # --compute-s supplies it; d still comes from the run
    assert cli(["scale", "--from-run", str(run_dir), "--network", "10gbe", "--workers", "16",
                "--compute-s", "0.01", "--csv", str(out)]) == 0
    table = pd.read_csv(out)
    assert (table["d"] == load(run_dir).manifest["num_parameters"]).all()
    assert (table["t_compute"] == 0.01).all()


@pytest.mark.slow
@pytest.mark.train
@pytest.mark.parametrize("name", ["distributions", "contraction", "selectors", "convergence"])
def test_the_notebooks_run_on_a_hook_run_whose_epoch_is_null(own_runs, name, tmp_path):
    import nbformat
    import papermill

    run_dir = own_runs / "cnn-exp" / "complete"
    assert load(run_dir).train["epoch"].isna().all()
    params = {"results_root": str(own_runs)}
    if name != "convergence":
        params["run_dir"] = str(run_dir)
    out = tmp_path / f"{name}.ipynb"
    papermill.execute_notebook(str(REPO / "notebooks" / f"{name}.ipynb"), str(out),
                               parameters=params, kernel_name="python3", progress_bar=False,
                               cwd=str(tmp_path))
    book = nbformat.read(out, as_version=4)
    outputs = [o for c in book.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    if name == "selectors":  # the script evaluates no approximate selector: said, not drawn
        text = "".join(o.get("text", "") for o in outputs)
        assert f"skipped: {run_dir} has no approximate selector columns" in text
    else:
        assert [o for o in outputs if "image/png" in o.get("data", {})], name


def test_figures_draw_a_recorder_loop_of_ones_own_and_name_it_by_its_size(tmp_path, capsys):
    """A Recorder in a loop of one's own (launcher `user`) names no model or sparsifier: its
    figures are drawn and the claims tabulate its u under what the recorder saw (the length
    of u: "a model of 763 parameters") and the sparsifier "unnamed", as `topkscope claims`
    does."""
    from tests._hooks_loop import layout_of, tiny_model
    from tests._hooks_loop import run as loop

    run_dir = tmp_path / "results" / "loop-exp" / "r1"
    with Recorder(run_dir, schedule=1, densities=[0.05], rank=0) as rec:
        loop(6, recorder=rec, keep=False)
    assert load(run_dir).manifest["launcher"] == "user"
    assert cli(["figures", "--no-run", "--results", str(tmp_path / "results"), "--only",
                "loop-exp", "--experiments", str(REPO / "experiments"), "--no-notebooks",
                "--no-tables"]) == 0
    log = capsys.readouterr().out
    assert "not in the claims" not in log
    drawn = sorted(p.stem for p in (tmp_path / "results" / "figures").glob("loop-exp-*.png"))
    assert drawn == ["loop-exp-contraction", "loop-exp-normality"]
    table = pd.read_csv(tmp_path / "results" / "claims.csv")
    below = table[table["claim"] == "below_paper"].iloc[0]
    recorded = load(run_dir).stats.query("kind == 'u' and layer == '__global__'")
    size = sum(n for _, _, n in layout_of(tiny_model()))
    assert (below["model"], below["sparsifier"]) == (f"a model of {size:,} parameters", "unnamed")
    assert below["n_units"] == len(recorded) >= 6  # every (step, rank, density) of its u
    assert cli(["claims", str(run_dir), "--out", str(tmp_path / "c.csv")]) == 0
    alone = pd.read_csv(tmp_path / "c.csv")
    assert alone[alone["claim"] == "below_paper"].iloc[0]["n_units"] == below["n_units"]


def test_figures_only_an_experiment_neither_planned_nor_found_is_one_line(tmp_path, capsys):
    (tmp_path / "results").mkdir()
    assert cli(["figures", "--no-run", "--results", str(tmp_path / "results"), "--only",
                "my-exp", "--experiments", str(REPO / "experiments")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        "topkscope figures: error: unknown experiment(s) ['my-exp']: not in the plan (fnn3-mnist")
    assert (f"and no complete or failed run of your own (DDP hook or Recorder) under "
            f"{str(tmp_path / 'results')!r} names it") in err
