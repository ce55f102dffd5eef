"""The figures driver finds a plan variant's runs by manifest content (runner.covering_runs):
any folder name, the plan's settings preferred, other settings named, never a second run for
a variant a complete run with the plan's settings covers. Manifests are written here as
`topkscope run` writes them (no training: see test_hand_runs.py for real runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from topkscope.manifest import Manifest
from topkscope.reproduce.runner import (
    RunSpec,
    config_differences,
    covering_runs,
    ensure_run,
    pick_covering,
)
from topkscope.train.config import deviations

CONFIG = """\
experiment: tiny
model: fnn3
dataset: mnist
workers: 2
batch_size: 32
steps: 20
lr: 0.05
sparsifier: topk
density: 0.01
seed: 0
profiles:
  quick: {threads: 1}
"""


@pytest.fixture
def spec(tmp_path) -> RunSpec:
    path = tmp_path / "tiny.yaml"
    path.write_text(CONFIG)
    return RunSpec("tiny", path, "quick", "topk", tmp_path / "results")


def write_run(spec: RunSpec, folder: str, status: str = "complete", end: str = "2026-12-01",
              **changes) -> Path:
    """A run folder whose manifest is what `topkscope run` writes for spec's config with
    `changes` applied (e.g. steps=12)."""
    cfg = spec.resolved().replace(**changes)
    run_dir = Path(spec.results_root) / cfg.experiment / folder
    Manifest(run_dir, experiment=cfg.experiment, run_id=folder, config=cfg.to_dict(),
             profile=spec.profile, seed=cfg.seed, model=cfg.model, sparsifier=cfg.sparsifier,
             density=cfg.density, density_schedule=cfg.density_schedule, k_rule=cfg.k_rule,
             deviations=deviations(cfg), status=status, end_time=end).write()
    return run_dir


def never_runs(argv):
    raise AssertionError(f"the driver trained although a run covers the variant: {argv}")


def test_a_hand_run_with_the_plan_settings_is_used_whatever_its_name(spec):
    hand = write_run(spec, "20261201-120000-topk-rho0.01-p2-s0", threads=4)  # not computed
    assert [c.path for c in covering_runs(spec)] == [hand]
    assert covering_runs(spec)[0].differences == ()
    assert ensure_run(spec, log=lambda m: None, in_process=never_runs) == (hand, "skipped")
    assert sorted(p.name for p in hand.parent.iterdir()) == [hand.name]  # no second run


def test_runs_of_other_variants_do_not_cover_it(spec):
    write_run(spec, "other-seed", seed=1)
    write_run(spec, "other-method", sparsifier="gaussiank")
    write_run(spec, "other-density", density=0.05)
    write_run(spec, "other-condition", density_schedule="paper")
    write_run(spec, "interrupted", status="interrupted")
    write_run(spec, "failed", status="failed")
    assert covering_runs(spec) == []
    assert pick_covering("tiny", []) is None


def test_the_plan_settings_come_first_then_the_newest(spec):
    write_run(spec, "shorter", steps=12, end="2026-12-03")
    older = write_run(spec, "same-older", end="2026-12-01")
    newer = write_run(spec, "same-newer", end="2026-12-02")
    own = write_run(spec, spec.run_id(), end="2026-11-01")
    assert [c.path.name for c in covering_runs(spec)] == [own.name, newer.name, older.name,
                                                         "shorter"]


def test_the_only_covering_run_with_other_settings_is_named_with_what_differs(spec):
    hand = write_run(spec, "short", steps=12, workers=4)
    found = pick_covering("tiny [topk]", covering_runs(spec))
    assert found.path == hand
    assert found.differences == ("steps=12 (plan: 20)", "workers=4 (plan: 2)")
    # training is allowed: the plan's own run is made instead of using the short one
    calls = []
    with pytest.raises(RuntimeError, match="run failed"):
        ensure_run(spec, log=lambda m: None, in_process=lambda argv: calls.append(argv) or 1)
    assert calls and calls[0][calls[0].index("--run-id") + 1] == spec.run_id()


def test_several_covering_runs_none_with_the_plan_settings_are_refused(spec):
    a = write_run(spec, "a", steps=12)
    b = write_run(spec, "b", steps=14)
    with pytest.raises(ValueError, match="2 finished runs cover it, none with the plan's") as info:
        pick_covering("tiny [topk]", covering_runs(spec))
    assert str(a) in str(info.value) and str(b) in str(info.value)


def test_differences_name_keys_and_mapping_entries():
    saved = {"steps": 12, "threads": 4, "recorder": {"schedule": {"every": 2}, "seed": 0},
             "lr_milestones": (10, 20)}
    plan = {"steps": None, "threads": 1, "recorder": {"schedule": {"every": 200}, "seed": 0},
            "lr_milestones": [10, 20]}
    assert config_differences(saved, plan) == (
        'recorder.schedule={"every": 2} (plan: {"every": 200})', "steps=12 (plan: unset)")
