"""The training phase of a step (analysis.phases.training_phases): warm-up, early, late."""

import pytest

from topkscope.analysis import phases


def test_phases_split_the_steps_after_the_warm_up_in_halves():
    manifest = {"density": 0.001, "density_schedule_values": [0.25, 0.0625],
                "steps_per_epoch": 10, "total_steps": 50}
    got = phases.training_phases(manifest, [0, 19, 20, 34, 35, 49])
    # warm-up: epochs 0 and 1 (steps 0-19); then [20, 50) split at 35
    assert list(got) == ["warm-up", "warm-up", "early", "early", "late", "late"]


def test_without_a_warm_up_the_run_is_split_at_its_middle():
    got = phases.training_phases({"density": 0.01, "total_steps": 8}, range(8))
    assert list(got) == ["early"] * 4 + ["late"] * 4
    # no total_steps: one past the largest step given
    assert list(phases.training_phases({}, [0, 1, 2, 5])) == ["early"] * 3 + ["late"]


def test_a_warm_up_without_epochs_is_refused():
    with pytest.raises(ValueError, match="steps_per_epoch"):
        phases.training_phases({"density_schedule_values": [0.25]}, [0, 1])
