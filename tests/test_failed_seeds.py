"""Failed seeds are data: a run whose training diverges is a result — manifest `failed` with
the step, its rows and evaluations before it kept — that the figures driver never resumes or
reruns, draws, and hands to the claims without counting it as a failure; a run that fails for
another reason is a failure of the driver, and is handed to the claims all the same."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.test_cli_run import files_under, write_config
from topkscope.cli import main
from topkscope.manifest import Manifest, diverged_at
from topkscope.reproduce import driver, plan
from topkscope.reproduce.runner import (
    RunFailed,
    RunSpec,
    covering_runs,
    ensure_run,
    has_checkpoint,
)

# a tiny FNN-3 run that goes NaN after a few evaluations and checkpoints (lr far too large)
DIVERGES = dict(lr=10.0, steps=40, eval_every_steps=2, checkpoint_every_steps=2,
                profiles={"quick": {}})


def manifest_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "manifest.json").read_text())


@pytest.mark.train
def test_a_diverged_run_records_the_step_and_keeps_what_it_evaluated(tmp_path, capsys):
    cfg = write_config(tmp_path, **DIVERGES)
    out = tmp_path / "results"
    assert main(["run", str(cfg), "--results", str(out), "--run-id", "nan", "--no-progress"]) == 2
    run_dir = out / "tiny" / "nan"
    manifest = manifest_of(run_dir)
    step = manifest["diverged_at_step"]
    assert manifest["status"] == "failed" and manifest["steps_done"] == step > 2
    assert manifest["error"].startswith(f"DivergedError: training diverged at step {step}: ")
    assert diverged_at(manifest) == step and manifest["segments"][-1]["steps_done"] == step
    train = pd.read_parquet(run_dir / "train.parquet")
    assert train["step"].tolist() == list(range(step)) and np.isfinite(train["loss"]).all()
    evaluated = pd.read_parquet(run_dir / "eval.parquet")
    # every evaluation before the divergence (after steps 2, 4, ...), the last one included
    assert evaluated["step"].tolist() == [done - 1 for done in range(2, step + 1, 2)]
    assert evaluated["metric"].notna().all()


def test_diverged_at_reads_only_failed_runs():
    assert diverged_at({"status": "failed", "diverged_at_step": 7}) == 7
    assert diverged_at({"status": "failed", "error": "OSError: disk full"}) is None
    assert diverged_at({"status": "complete", "diverged_at_step": 7}) is None


def test_a_resume_clears_the_divergence_of_the_segment_before(tmp_path):
    m = Manifest(tmp_path, experiment="x")
    m.fail("DivergedError: training diverged at step 3", diverged_at_step=3, steps_done=3)
    again = Manifest.resume(tmp_path, from_step=2)
    assert "diverged_at_step" not in again.data and again.data["status"] == "running"
    assert again.data["segments"][0]["error"].startswith("DivergedError")


@pytest.mark.train
def test_the_runner_keeps_a_diverged_run_and_never_reruns_it(tmp_path):
    cfg = write_config(tmp_path, name="plan", **DIVERGES)
    spec = RunSpec("plan", cfg, "quick", None, tmp_path / "results")
    run_dir, calls, lines = spec.run_dir(), [], []

    def counted(argv):
        calls.append(argv)
        return main(argv)

    assert ensure_run(spec, log=lines.append, in_process=counted) == (run_dir, "diverged")
    step = manifest_of(run_dir)["diverged_at_step"]
    assert any(f"training diverged at step {step}" in line for line in lines)
    assert has_checkpoint(run_dir)  # a failed run with a checkpoint: once resumed, not now
    before = files_under(run_dir)
    assert ensure_run(spec, log=lines.append, in_process=counted) == (run_dir, "diverged")
    assert len(calls) == 1 and files_under(run_dir) == before
    (found,) = covering_runs(spec)  # a finished run of the variant, with the plan's settings
    assert (found.path, found.differences, found.diverged_at) == (run_dir, (), step)


@pytest.mark.train
def test_the_driver_hands_diverged_and_failed_seeds_to_the_claims(tmp_path, data_root, spy,
                                                                  monkeypatch):
    """topk diverges: a result (no failure, exit 0 from `topkscope figures`); dense fails for
    another reason after training: a failure, drawn and handed to the claims all the same."""
    from topkscope.perf import report

    def no_scaling(*args, **kwargs):  # the predicted scaling is not under test here
        raise ValueError("not predicted in this test")

    monkeypatch.setattr(report, "write_scaling", no_scaling)
    experiments = tmp_path / "experiments"
    experiments.mkdir()
    write_config(experiments, name="plan", **DIVERGES)
    job = plan.TrainingJob("plan", ("topk",), figures=("convergence",))
    options = dict(profile="quick", results_root=tmp_path / "results",
                   experiments_dir=experiments, data_root=data_root, jobs=(job,),
                   in_process=main, notebooks=False, tables=False, bench=False)
    claimed = spy(driver, "write_claims")
    outcome = driver.reproduce(driver.Options(**options), log=lambda m: None)
    assert outcome.failures == []
    runs = outcome.timings[outcome.timings["phase"] == "run"]
    assert runs["action"].tolist() == ["diverged"]
    (topk,) = [run.path for run in claimed[-1][0]]
    assert manifest_of(topk)["status"] == "failed"
    assert "plan-convergence" in [e.name for e in outcome.entries]
    said = []
    driver.reproduce(driver.Options(**options, dry_run=True), log=said.append)
    step = manifest_of(topk)["diverged_at_step"]
    assert said[0] == f"{topk} [failed; diverged at step {step}: a result, not rerun]"

    def fails_after_training(argv):  # e.g. the disk filled up as the run ended
        code = main([*argv, "--set", "steps=4"])
        run_dir = Path(argv[argv.index("--results") + 1]) / "plan" / argv[argv.index("--run-id") + 1]
        Manifest.resume(run_dir).fail("OSError: [Errno 28] No space left on device")
        return 2 if code == 0 else code

    job = plan.TrainingJob("plan", ("topk", "dense"), figures=("convergence",))
    outcome = driver.reproduce(driver.Options(**{**options, "jobs": (job,),
                                                 "in_process": fails_after_training}),
                               log=lambda m: None)
    (failure,) = outcome.failures
    assert failure.startswith("plan: run failed (exit 2): topkscope run ") and "dense" in failure
    actions = outcome.timings[outcome.timings["phase"] == "run"]["action"].tolist()
    assert actions == ["diverged"]  # the failed run records no action: it is an error
    handed = {run.manifest["sparsifier"]: run.manifest for run in claimed[-1][0]}
    assert handed["topk"]["diverged_at_step"] > 2
    assert handed["dense"]["status"] == "failed" and diverged_at(handed["dense"]) is None
    index = (tmp_path / "results" / "figures" / "index.md").read_text()
    assert "failed — plan: run failed (exit 2)" in index


def test_a_failed_run_names_its_folder_only_when_it_left_one(tmp_path):
    cfg = write_config(tmp_path, name="plan", profiles={"quick": {}})
    spec = RunSpec("plan", cfg, "quick", None, tmp_path / "results")
    with pytest.raises(RunFailed, match="run failed \\(exit 2\\)") as failed:
        ensure_run(spec, log=lambda m: None, in_process=lambda argv: 2)  # wrote nothing
    assert failed.value.run_dir is None
