"""The experiment YAML schema: profiles, overrides, and one-line errors for bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from topkscope.train.config import (
    SCHEMA,
    ExperimentConfig,
    load_config,
    parse_assignment,
    resolve,
    run_tags,
    validate,
    with_defaults,
)
from topkscope.train.config import deviations as config_deviations

REPO = Path(__file__).resolve().parents[1]
MINIMAL = dict(experiment="x", model="fnn3", dataset="mnist", batch_size=8, lr=0.1,
               density=0.01, steps=5)


def test_every_schema_key_is_a_config_field_and_back():
    fields = set(ExperimentConfig.__dataclass_fields__)
    assert set(SCHEMA) == fields


def test_fnn3_experiment_profiles():
    quick, used = load_config(REPO / "experiments" / "fnn3-mnist.yaml")
    assert used == "quick"
    assert (quick.experiment, quick.model, quick.dataset) == ("fnn3-mnist", "fnn3", "mnist")
    assert (quick.workers, quick.epochs) == (2, 3)
    full, used = load_config(REPO / "experiments" / "fnn3-mnist.yaml", profile="full")
    assert used == "full"
    # the paper's FNN-3 settings
    assert (full.lr, full.batch_size, full.epochs, full.workers) == (0.01, 128, 30, 16)
    assert (full.momentum, full.density, full.selection) == (0.9, 0.001, "global")
    assert full.lr_in_residual is False and full.sparsifier == "topk"


def test_profile_then_overrides_take_precedence_and_mappings_merge():
    raw = {**MINIMAL, "recorder": {"schedule": {"every": 10}, "densities": [0.01]},
           "profiles": {"quick": {"lr": 0.5, "recorder": {"densities": [0.1]}}}}
    cfg = resolve(raw, overrides={"lr": 0.25})
    assert cfg.lr == 0.25
    assert cfg.recorder == {"schedule": {"every": 10}, "densities": [0.1]}
    assert resolve(raw, overrides={"recorder": None}).recorder is None
    # profile=None picks quick only when it exists
    assert resolve({k: v for k, v in raw.items() if k != "profiles"}).lr == 0.1


@pytest.mark.parametrize("change, words", [
    ({"lrr": 0.1}, ["unknown config key 'lrr'", "allowed: allow_substitute"]),
    ({"density": 0.0}, ["density = 0.0", "(0, 1]"]),
    ({"density": 1.5}, ["density = 1.5", "(0, 1]"]),
    ({"workers": 0}, ["workers = 0", "[1, inf)"]),
    ({"workers": 2.5}, ["workers = 2.5", "integer"]),
    ({"launcher": "mpi"}, ["launcher = 'mpi'", "sim, torchrun"]),
    ({"selection": "bucket"}, ["selection = 'bucket'", "global, layerwise"]),
    ({"sparsifier": "nope"}, ["sparsifier = 'nope' is not allowed", "topk"]),
    ({"momentum": 1.0}, ["momentum = 1.0", "[0, 1)"]),
    ({"lr_milestones": [80, 40]}, ["lr_milestones", "strictly increasing"]),
    ({"density_schedule": [0.25, 2]}, ["density_schedule[1] = 2", "(0, 1]"]),
    ({"recorder": {"schedul": 5}}, ["unknown key 'schedul' in recorder", "schedule"]),
    ({"recorder": {"sparsifiers": ["nope"]}}, ["'nope' in recorder.sparsifiers", "gaussiank"]),
    ({"steps": None}, ["set epochs or steps"]),
    ({"model": None}, ["'model' is required"]),
    ({"allow_substitute": "yes"}, ["allow_substitute = 'yes'", "true or false"]),
    ({"optimizer": "adam"}, ["optimizer = 'adam' is not allowed", "sgd, adamw"]),
    ({"optimizer": "adamw", "momentum": 0.9},
     ["momentum = 0.9 does not apply to optimizer = 'adamw'", "allowed with it: betas, eps"]),
    ({"betas": [0.9, 0.95]},
     ["betas = [0.9, 0.95] does not apply to optimizer = 'sgd'", "momentum, nesterov"]),
    ({"optimizer": "adamw", "betas": [0.9]}, ["betas = [0.9] must be a list of two numbers"]),
    ({"optimizer": "adamw", "betas": 0.9}, ["betas = 0.9 must be a list of two numbers"]),
    ({"optimizer": "adamw", "betas": [0.9, 1.0]}, ["betas[1] = 1.0", "[0, 1)"]),
    ({"optimizer": "adamw", "eps": 0}, ["eps = 0", "(0, inf)"]),
    ({"optimizer": "adamw", "lr_in_residual": True},
     ["lr_in_residual = true needs optimizer = 'sgd'"]),
    ({"lr_warmup_steps": -1}, ["lr_warmup_steps = -1", "[0, inf)"]),
])
def test_bad_values_name_the_key_and_the_allowed_range(change, words):
    with pytest.raises(ValueError) as err:
        validate({**MINIMAL, **change})
    message = str(err.value)
    assert "\n" not in message
    for word in words:
        assert word in message


def test_unknown_key_inside_a_profile_is_named(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({**MINIMAL, "profiles": {"quick": {"worker": 2}}}))
    with pytest.raises(ValueError, match=r"unknown config key 'worker' in profiles\.quick"):
        load_config(path)
    with pytest.raises(ValueError, match=r"profile 'huge' is not defined; profiles: quick"):
        load_config(path, profile="huge")


def test_file_problems_are_one_line_errors(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [unclosed\n")
    with pytest.raises(ValueError, match="not valid YAML") as err:
        load_config(bad)
    assert "\n" not in str(err.value)


def test_experiment_name_defaults_to_the_file_stem(tmp_path):
    path = tmp_path / "my-exp.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in MINIMAL.items() if k != "experiment"}))
    assert load_config(path)[0].experiment == "my-exp"


def test_assignments_read_values_as_yaml():
    assert parse_assignment("lr=0.5") == ("lr", 0.5)
    assert parse_assignment("lr_milestones=[1, 2]") == ("lr_milestones", [1, 2])
    assert parse_assignment("recorder=null") == ("recorder", None)
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_assignment("lr")


def test_a_dotted_set_key_changes_one_nested_key_and_keeps_its_siblings():
    raw = {**MINIMAL, "recorder": {"schedule": {"every": 200, "start": 5}, "densities": [0.01]},
           "profiles": {"quick": {"recorder": {"densities": [0.1]}}}}
    cfg = resolve(raw, overrides=dict([parse_assignment("recorder.schedule.every=10")]))
    assert cfg.recorder == {"schedule": {"every": 10, "start": 5}, "densities": [0.1]}
    # a number where a mapping is needed becomes one; plain and dotted keys combine
    raw["recorder"]["hist_schedule"] = 50
    cfg = resolve(raw, overrides={"lr": 0.5, "recorder.hist_schedule.every": 7,
                                  "model_args.hidden": 3})
    assert cfg.recorder["hist_schedule"] == {"every": 7} and cfg.lr == 0.5
    assert cfg.model_args == {"hidden": 3}
    with pytest.raises(ValueError, match="unknown key 'shedule' in recorder"):
        resolve(raw, overrides={"recorder.shedule.every": 10})
    with pytest.raises(ValueError, match="unknown config key 'lrr'"):
        resolve(raw, overrides={"lrr.x": 1})
    with pytest.raises(ValueError, match="'recorder..every' has an empty part"):
        resolve(raw, overrides={"recorder..every": 1})


def test_replace_revalidates():
    cfg = validate(MINIMAL)
    assert cfg.replace(workers=4).workers == 4
    with pytest.raises(ValueError, match="workers = 0"):
        cfg.replace(workers=0)


def test_exponent_numbers_in_a_file_and_in_set_are_numbers(tmp_path):
    # YAML 1.1 (PyYAML) reads 1e-2 as the string '1e-2'; configs read it as a number
    path = tmp_path / "exp.yaml"
    path.write_text("model: fnn3\ndataset: mnist\nbatch_size: 8\nlr: 1e-1\ndensity: 1e-2\n"
                    "steps: 1e3\nweight_decay: 5E-4\nmomentum: 9.0e-1\n")
    cfg, _ = load_config(path)
    assert (cfg.lr, cfg.density, cfg.weight_decay, cfg.momentum) == (0.1, 0.01, 5e-4, 0.9)
    assert cfg.steps == 1000 and type(cfg.steps) is int  # integer mantissa, exponent >= 0
    assert parse_assignment("density=1e-3") == ("density", 0.001)
    assert parse_assignment("steps=2e4") == ("steps", 20000)
    assert parse_assignment("lr=2.5E+1") == ("lr", 25.0)
    assert parse_assignment("density_schedule=[1e-1, 1e-2]") == ("density_schedule", [0.1, 0.01])
    assert parse_assignment("experiment=1e5x") == ("experiment", "1e5x")
    assert parse_assignment("experiment='1e5'") == ("experiment", "1e5")  # quoted: a string
    with pytest.raises(ValueError, match=r"^steps = 1500.0 must be an integer in \[1, inf\)$"):
        validate({**MINIMAL, "steps": parse_assignment("steps=1.5e3")[1]})


def test_a_list_for_density_names_density_schedule():
    with pytest.raises(ValueError) as err:
        validate({**MINIMAL, "density": [0.1, 0.01]})
    assert str(err.value) == ("density = [0.1, 0.01] must be a single number; for one value "
                              "per epoch set density_schedule: [0.1, 0.01] (density applies "
                              "once that list runs out)")


def test_a_config_saved_before_a_key_existed_reads_as_its_default():
    """A run written before `optimizer` (and its keys) existed trained with momentum SGD."""
    mine = validate(MINIMAL).to_dict()
    old = {k: v for k, v in mine.items()
           if k not in ("optimizer", "betas", "eps", "lr_schedule", "lr_warmup_steps")}
    assert with_defaults(old) == mine
    assert with_defaults({**old, "lr": 0.3})["lr"] == 0.3  # saved values win
    adamw = validate({**MINIMAL, "optimizer": "adamw"}).to_dict()
    assert with_defaults(adamw) == adamw


def test_gpt_experiment_profiles():
    quick, used = load_config(REPO / "experiments" / "gpt-ptb.yaml")
    full, _ = load_config(REPO / "experiments" / "gpt-ptb.yaml", profile="full")
    assert used == "quick" and quick.model == "gpt-mini" and full.model == "gpt-ptb"
    for cfg in (quick, full):
        assert (cfg.optimizer, cfg.lr_schedule, cfg.dataset) == ("adamw", "cosine", "ptb")
        assert cfg.recorder is not None and cfg.bptt is not None
    # nanoGPT's baby GPT (config/train_shakespeare_char.py) on PTB
    assert (full.lr, full.betas, full.weight_decay, full.lr_warmup_steps, full.steps) == \
        (1e-3, [0.9, 0.99], 0.1, 100, 5000)
    assert (full.batch_size * full.workers, full.bptt, full.grad_clip, full.lr_final_factor) == \
        (64, 256, 1.0, 0.1)  # nanoGPT's 64 sequences per step, over the paper's 16 workers


def test_clip_at_defaults_to_the_published_aggregate_and_worker_is_a_named_deviation():
    cfg = validate({**MINIMAL, "grad_clip": 0.25})
    assert cfg.clip_at == "aggregate" and "clip_at=worker" not in config_deviations(cfg)
    worker = cfg.replace(clip_at="worker")
    assert config_deviations(worker) == ["clip_at=worker"]
    assert "clipat-worker" in run_tags(worker)
    # without grad_clip nothing is clipped: the placement is no deviation
    assert config_deviations(validate({**MINIMAL, "clip_at": "worker"})) == []


def test_a_bad_clip_at_is_a_one_line_error():
    with pytest.raises(ValueError, match=r"^clip_at = 'local' is not allowed; choose one of: aggregate, worker$") as err:
        validate({**MINIMAL, "clip_at": "local"})
    assert "\n" not in str(err.value)


def test_grad_clip_scope_is_read_as_the_deprecated_spelling_of_clip_at(capsys):
    assert validate({**MINIMAL, "grad_clip_scope": "local"}).clip_at == "worker"
    assert validate({**MINIMAL, "grad_clip_scope": "aggregate"}).clip_at == "aggregate"
    assert "grad_clip_scope is deprecated; use clip_at" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"^config key 'grad_clip_scope' = 'mean' is not one"):
        validate({**MINIMAL, "grad_clip_scope": "mean"})
    with pytest.raises(ValueError, match="are both set"):
        validate({**MINIMAL, "grad_clip_scope": "local", "clip_at": "worker"})
    # a run saved before clip_at clipped where grad_clip_scope said, or on each worker
    assert with_defaults({**MINIMAL, "grad_clip_scope": "aggregate"})["clip_at"] == "aggregate"
    assert with_defaults(MINIMAL)["clip_at"] == "worker"
    assert with_defaults({**MINIMAL, "clip_at": "aggregate"})["clip_at"] == "aggregate"


def test_the_language_model_experiments_clip_where_the_authors_do():
    for name in ("lstm-ptb", "convergence-lstm-ptb", "gpt-ptb", "convergence-gpt-ptb"):
        for profile in ("quick", "standard"):
            try:
                cfg, _ = load_config(REPO / "experiments" / f"{name}.yaml", profile)
            except ValueError as exc:
                assert "is not defined" in str(exc)
                continue
            assert (cfg.grad_clip is not None, cfg.clip_at) == (True, "aggregate"), name
