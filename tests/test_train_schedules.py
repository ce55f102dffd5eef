"""LR warm-up and step decay, density warm-up: pure functions of the step."""

import math

import pytest

from topkscope.train.config import validate
from topkscope.train.schedules import density_at, lr_at, total_steps

BASE = dict(experiment="x", model="fnn3", dataset="mnist", batch_size=8, lr=0.1, density=0.001,
            steps=100)


def test_constant_lr_without_warmup_or_milestones():
    cfg = validate(BASE)
    assert {lr_at(cfg, t, 10) for t in range(100)} == {0.1}


def test_linear_warmup_then_milestones():
    cfg = validate({**BASE, "lr_warmup_epochs": 2, "lr_milestones": [3, 5], "lr_gamma": 0.5})
    spe = 10  # warm-up over 20 steps: lr * (t + 1) / 20
    for t in range(20):
        assert lr_at(cfg, t, spe) == pytest.approx(0.1 * (t + 1) / 20)
    assert lr_at(cfg, 20, spe) == pytest.approx(0.1)
    assert lr_at(cfg, 29, spe) == pytest.approx(0.1)
    assert lr_at(cfg, 30, spe) == pytest.approx(0.05)   # epoch 3.0 reaches the first milestone
    assert lr_at(cfg, 49, spe) == pytest.approx(0.05)
    assert lr_at(cfg, 50, spe) == pytest.approx(0.025)


def test_warmup_start_factor():
    cfg = validate({**BASE, "lr_warmup_epochs": 1, "lr_warmup_start": 0.5})
    assert lr_at(cfg, 0, 4) == pytest.approx(0.1 * (0.5 + 0.5 * 1 / 4))
    assert lr_at(cfg, 3, 4) == pytest.approx(0.1)


def test_density_schedule_one_value_per_epoch_then_target():
    schedule = [0.25, 0.0625, 0.015625, 0.004]
    cfg = validate({**BASE, "density_schedule": schedule})
    spe = 7
    got = [density_at(cfg, t, spe) for t in range(6 * spe)]
    expected = [schedule[t // spe] if t // spe < len(schedule) else 0.001 for t in range(6 * spe)]
    assert got == expected


def test_total_steps_from_epochs_or_steps():
    assert total_steps(validate(BASE), 10) == 100
    cfg = validate({**BASE, "steps": None, "epochs": 2.5})
    assert total_steps(cfg, 7) == math.ceil(2.5 * 7)


@pytest.mark.parametrize("name, values", [("paper", [1 / 64, 0.004]),
                                          ("dgc", [0.25, 0.0625, 0.015625, 0.004]),
                                          ("none", [])])
def test_named_density_schedules(name, values):
    """paper = the Gaussian-k authors' warm-up: 1/64 in epoch 0, 0.004 in epoch 1, then rho."""
    cfg = validate({**BASE, "density_schedule": name, "density": 0.002})
    spe = 5
    got = [density_at(cfg, t, spe) for t in range(4 * spe)]
    assert got == [values[t // spe] if t // spe < len(values) else 0.002 for t in range(4 * spe)]


def test_an_unknown_schedule_name_lists_the_named_ones():
    with pytest.raises(ValueError, match="paper, dgc, none"):
        validate({**BASE, "density_schedule": "warm"})


def test_linear_warmup_in_steps_then_cosine_to_the_final_factor():
    """nanoGPT's shape: lr * (t + 1) / W for t < W, then half a cosine from lr at t = W - 1
    down to lr * f at the last step T - 1, written out here independently."""
    T, W, f, spe = 100, 10, 0.1, 7
    cfg = validate({**BASE, "lr_schedule": "cosine", "lr_warmup_steps": W, "lr_final_factor": f})
    for t in range(T):
        if t < W:
            expected = 0.1 * (t + 1) / W
        else:
            expected = 0.1 * (f + (1 - f) * (1 + math.cos(math.pi * (t - W) / (T - 1 - W))) / 2)
        assert lr_at(cfg, t, spe) == pytest.approx(expected, rel=1e-12), t
    assert lr_at(cfg, T - 1, spe) == pytest.approx(0.01)
    assert lr_at(cfg, T + 50, spe) == pytest.approx(0.01)  # past the end: stays at lr * f


def test_cosine_follows_the_run_length_from_epochs_and_an_epoch_warmup():
    cfg = validate({**BASE, "steps": None, "epochs": 3, "lr_schedule": "cosine",
                    "lr_warmup_epochs": 1})
    spe = 10  # 30 steps, warm-up over the first 10
    assert lr_at(cfg, 9, spe) == pytest.approx(0.1)
    assert lr_at(cfg, 19, spe) == pytest.approx(0.05 * (1 + math.cos(math.pi * 9 / 19)))
    assert lr_at(cfg, 29, spe) == pytest.approx(0.0, abs=1e-15)


def test_a_run_shorter_than_its_warmup_only_warms_up():
    cfg = validate({**BASE, "steps": 4, "lr_schedule": "cosine", "lr_warmup_steps": 40,
                    "lr_final_factor": 0.1})
    assert [lr_at(cfg, t, 10) for t in range(4)] == pytest.approx([0.1 * (t + 1) / 40
                                                                   for t in range(4)])
    ends = validate({**BASE, "steps": 5, "lr_schedule": "cosine", "lr_warmup_steps": 4,
                     "lr_final_factor": 0.1})  # the last step is the first after the warm-up
    assert [lr_at(ends, t, 10) for t in range(5)] == pytest.approx([0.025, 0.05, 0.075, 0.1,
                                                                    0.01])


@pytest.mark.parametrize("change, message", [
    ({"lr_schedule": "cosine", "lr_milestones": [3]},
     "lr_milestones = [3.0] does not apply to lr_schedule = 'cosine'; allowed with it: "
     "lr_final_factor"),
    ({"lr_final_factor": 0.1},
     "lr_final_factor = 0.1 does not apply to lr_schedule = 'milestones'; allowed with it: "
     "lr_milestones, lr_gamma"),
    ({"lr_schedule": "linear"},
     "lr_schedule = 'linear' is not allowed; choose one of: milestones, cosine"),
    ({"lr_warmup_steps": 5, "lr_warmup_epochs": 1},
     "lr_warmup_epochs = 1.0 and lr_warmup_steps = 5 are both set; allowed: one of them"),
    ({"lr_schedule": "cosine", "lr_final_factor": 1.5},
     "lr_final_factor = 1.5 is outside the allowed range [0, 1]"),
])
def test_schedule_keys_of_the_other_schedule_are_one_line_errors(change, message):
    with pytest.raises(ValueError) as err:
        validate({**BASE, **change})
    assert str(err.value) == message
