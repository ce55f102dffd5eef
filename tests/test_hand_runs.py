"""Runs made by hand, not by the figures driver, through the real command line: a short FNN-3
run of experiments/fnn3-mnist.yaml (`topkscope run`, folder named after what ran, recorder on) is
drawn by `topkscope figures --no-run` and named with what differs from the plan; `topkscope
claims` tabulates it and a user's DDP-hook run, which `topkscope figures --no-run --only my-exp`
draws as a user's own experiment."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.test_hooks_distributed import USERS_RUN_SCRIPT, free_port
from topkscope.analysis.runs import load
from topkscope.claims import build as claims_table
from topkscope.cli import main as cli
from topkscope.reproduce.plan import DISTRIBUTION_FIGURES
from topkscope.schema import GLOBAL

pytestmark = pytest.mark.train  # every test here trains (see tests/conftest.py)

REPO = Path(__file__).resolve().parents[1]
STEPS = 12
RECORDER = ("recorder={schedule: {every: 2}, hist_schedule: {every: 4}, snapshot_schedule: "
            "{steps: [4, 8]}, densities: [0.001, 0.01], sparsifiers: [gaussiank-2019]}")

@pytest.fixture(scope="module")
def results(tmp_path_factory, data_root) -> Path:
    """A results root with a hand run of fnn3-mnist (quick profile, 12 steps, recorder on)
    and a user's DDP-hook run under my-exp/run1."""
    root = tmp_path_factory.mktemp("hand") / "results"
    assert cli(["run", str(REPO / "experiments" / "fnn3-mnist.yaml"), "--profile", "quick",
                "--results", str(root), "--steps", str(STEPS), "--set", RECORDER,
                "--set", "train_subset=2560", "--set", "eval_subset=1000",
                "--data", str(data_root), "--no-progress"]) == 0
    hook = root / "my-exp" / "run1"  # the hook test's user script, as one gloo rank
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
           "WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-c", USERS_RUN_SCRIPT, str(hook)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    return root


def hand_run(results: Path) -> Path:
    (run_dir,) = (results / "fnn3-mnist").iterdir()
    return run_dir


def test_figures_no_run_draws_a_hand_run_naming_what_differs(results, tmp_path, capsys):
    root = tmp_path / "results"
    shutil.copytree(results / "fnn3-mnist", root / "fnn3-mnist")
    run_dir = hand_run(root)
    assert run_dir.name.startswith("topk-rho")  # named after what ran, not as the driver names
    assert cli(["figures", "--no-run", "--results", str(root), "--only", "fnn3-mnist",
                "--experiments", str(REPO / "experiments"), "--no-notebooks",
                "--no-tables"]) == 0
    log = capsys.readouterr().out
    assert f"drawing from {run_dir}, whose settings differ from the plan: " in log
    for figure in DISTRIBUTION_FIGURES:
        assert (root / "figures" / f"fnn3-mnist-{figure}.png").is_file(), figure
    index = (root / "figures" / "index.md").read_text()
    assert f"drawn from `{run_dir.resolve()}`, whose settings differ from the plan: " in index
    assert f"steps={STEPS} (plan: unset)" in index and "train_subset=2560 (plan: unset)" in index
    table = pd.read_csv(root / "claims.csv")
    measured = table[table["model"] == "fnn3"].dropna(subset=["n_units"])
    measured = measured[~measured["condition"].fillna("").str.startswith("prediction")]
    assert len(measured) and measured["differs_from_plan"].str.startswith(
        f"{run_dir.name}: ").all()
    assert measured["differs_from_plan"].str.contains(f"steps={STEPS} ", regex=False).all()


def test_figures_no_run_without_a_covering_run_says_what_is_missing(results, tmp_path, capsys):
    root = tmp_path / "results"
    shutil.copytree(results / "my-exp", root / "my-exp")  # a run of another experiment
    assert cli(["figures", "--no-run", "--results", str(root), "--only", "fnn3-mnist",
                "--experiments", str(REPO / "experiments"), "--no-notebooks",
                "--no-tables"]) == 1
    assert "FAILED fnn3-mnist: no complete run of fnn3-mnist under" in capsys.readouterr().out


def test_figures_no_run_draws_a_users_hook_experiment_with_every_figure_it_recorded(
        results, tmp_path, capsys):
    """The hook run records histograms, snapshots and Gaussian-k's count: every distribution
    figure is drawn from it, and its noted loss gives the convergence figure."""
    root = tmp_path / "results"
    shutil.copytree(results / "my-exp", root / "my-exp")
    assert cli(["figures", "--no-run", "--results", str(root), "--only", "my-exp",
                "--experiments", str(REPO / "experiments"), "--no-notebooks",
                "--no-tables"]) == 0
    assert "drawing my-exp (your own runs: 1; drawn, never run)" in capsys.readouterr().out
    drawn = {p.stem for p in (root / "figures").glob("my-exp-*.png")}
    assert drawn == {f"my-exp-{f}" for f in (*DISTRIBUTION_FIGURES, "convergence")}
    index = (root / "figures" / "index.md").read_text()
    assert "## my-exp" in index and "Sequential on random" in index


def test_claims_command_tabulates_hand_and_hook_runs(results, tmp_path, capsys):
    out = tmp_path / "mine" / "claims.csv"
    assert cli(["claims", str(results), "--out", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    table = pd.read_csv(out)
    runs = [load(hand_run(results)), load(results / "my-exp" / "run1")]
    assert runs[1].manifest["launcher"] == "ddp-hook"
    # exactly these two complete runs, as the figures driver tabulates them
    expected = pd.read_csv(io.StringIO(claims_table(runs, roots=[results]).to_csv(index=False)))
    pd.testing.assert_frame_equal(table, expected)
    assert set(table["model"]) == {"fnn3", "Sequential"}
    # the verdict of below_paper recomputed from the recorded statistics
    for run in runs:
        u = run.stats[(run.stats["layer"] == GLOBAL) & (run.stats["kind"] == "u")]
        rows = table[(table["model"] == run.manifest["model"])
                     & (table["claim"] == "below_paper")]
        # a row per recorder density
        assert sorted(rows["recorder_density"]) == sorted(u["density"].unique())
        for row in rows.itertuples(index=False):
            at = u[np.isclose(u["density"], row.recorder_density)]
            frac = float(np.mean(at["topk_ratio"] <= (1 - at["k"] / at["numel"]) ** 2))
            assert row.n_units == len(at) and row.fraction == pytest.approx(frac)
    # one plain sentence per row, then where the table went
    assert len(printed) == len(table) + 1 and printed[-1].endswith(f"-> {out}")
    for model in ("FNN-3 on MNIST: ", "Sequential on random: "):
        assert sum(line.startswith(model) for line in printed) == \
            (table["model"] == model.split(" on")[0].replace("FNN-3", "fnn3")).sum()
    assert all(" — " in line for line in printed[:-1])


def test_claims_of_one_run_folder_to_stdout(results, capsys):
    run_dir = results / "my-exp" / "run1"
    assert cli(["claims", str(run_dir), str(run_dir.parent), "--out", "-"]) == 0
    captured = capsys.readouterr()
    table = pd.read_csv(io.StringIO(captured.out))
    measured = table[table["section"] != "prediction"]  # predictions name no run count
    assert set(table["model"]) == {"Sequential"} and (measured["n_runs"] <= 1).all()  # not twice
    assert len(captured.err.strip().splitlines()) == len(table)


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("topkscope claims: error: "), err
    return err


def test_claims_bad_input_is_one_line_exit_2_and_writes_nothing(results, tmp_path, capsys):
    out = tmp_path / "claims.csv"
    assert cli(["claims", str(tmp_path / "nowhere"), "--out", str(out)]) == 2
    assert "does not exist" in one_line_error(capsys)
    (tmp_path / "empty").mkdir()
    assert cli(["claims", str(tmp_path / "empty"), "--out", str(out)]) == 2
    assert "is not a result folder" in one_line_error(capsys)
    stopped = tmp_path / "stopped"
    shutil.copytree(results / "my-exp" / "run1", stopped)
    manifest = json.loads((stopped / "manifest.json").read_text())
    (stopped / "manifest.json").write_text(json.dumps({**manifest, "status": "interrupted"}))
    # an interrupted run is read, its recorded steps counted (an unfinished seed, never dropped)
    assert cli(["claims", str(results), str(stopped), "--out", str(out)]) == 0
    assert out.is_file()
    out.unlink()
    capsys.readouterr()
    assert cli(["claims", str(results), "--out", str(tmp_path)]) == 2
    assert "is a folder" in one_line_error(capsys)
    damaged = tmp_path / "damaged"
    shutil.copytree(results / "my-exp" / "run1", damaged)
    part = sorted((damaged / "stats").iterdir())[0]
    part.write_bytes(b"PAR1 cut short")
    assert cli(["claims", str(damaged), "--out", str(out)]) == 2
    assert f"{str(part)!r} is not a readable parquet file" in one_line_error(capsys)
    assert not out.exists()
