"""The experiment plan: which runs each profile makes (methods x conditions x seeds, the density
sensitivity), that every approximate run has its Top-k partner, that the runs are long enough
after the paper warm-up, that the recorder runs only where the claims read it, and the budgets
of the CPU profiles."""

from __future__ import annotations

import functools
import itertools
import math
from pathlib import Path

import pytest

from topkscope.analysis.criteria import MIN_SEEDS
from topkscope.reproduce import plan
from topkscope.reproduce.runner import RunSpec, command
from topkscope.train.config import density_schedule_values, load_config
from topkscope.train.schedules import density_at, total_steps

REPO = Path(__file__).resolve().parents[1]
METHODS = ["gaussiank-2019", "dgc", "redsync", "redsync-2019", "sidco", "randk", "tail-k"]
TRAIN_SAMPLES = {"mnist": 60_000, "cifar10": 50_000}  # training images per dataset


def job(name: str) -> plan.TrainingJob:
    (found,) = [j for j in plan.JOBS if j.experiment == name]
    return found


def convergence_jobs() -> list[tuple[str, plan.TrainingJob]]:
    """(profile, job) for every convergence design in every profile it runs in."""
    return [(p, j) for j in plan.JOBS if isinstance(j, plan.TrainingJob)
            and isinstance(j.design, plan.ConvergenceDesign) for p in j.profiles]


def as_tuples(variants) -> list[tuple]:
    return [(v.sparsifier, v.seed, v.density_schedule, v.density) for v in variants]


@pytest.mark.parametrize(("profile", "n_seeds"), [("quick", 5), ("full", 8)])
def test_fnn3_convergence_runs_every_method_condition_and_seed(profile, n_seeds):
    got = as_tuples(job("convergence-fnn3-mnist").variants(profile))
    expected = []
    for seed in range(n_seeds):
        expected.append(("dense", seed, "none", None))
        for cond in ("paper", "none"):
            expected += [(m, seed, cond, None) for m in ["topk", *METHODS]]
        for rho in (0.005, 0.01):
            expected += [(m, seed, "none", rho) for m in ("topk", "gaussiank-2019")]
    assert got == expected
    assert len(got) == n_seeds * (1 + 2 * 8 + 4) and len(set(got)) == len(got)
    assert "gaussiank" not in {v[0] for v in got}  # robust Gaussian-k = Top-k: tested, not run


@pytest.mark.parametrize(("experiment", "methods", "standard_seeds"), [
    ("convergence-lstm-ptb", ("topk", "gaussiank-2019", "dgc"), 4),
    ("convergence-gpt-ptb", ("topk", "gaussiank-2019"), 3),
])
@pytest.mark.parametrize("profile", ["standard", "full"])
def test_language_model_convergence_runs_dense_and_each_method_under_both_conditions(
        experiment, methods, standard_seeds, profile):
    """... and tail-k under the paper warm-up alone (what the standard budget affords); the
    LSTM gets a fourth seed in standard (the plan's docstring: its intervals over three seeds
    contained the margin)."""
    n_seeds = standard_seeds if profile == "standard" else 8
    got = as_tuples(job(experiment).variants(profile))
    expected = []
    for seed in range(n_seeds):
        expected.append(("dense", seed, "none", None))
        for cond in ("paper", "none"):
            expected += [(m, seed, cond, None) for m in methods]
            if cond == "paper":
                expected.append(("tail-k", seed, "paper", None))
    assert got == expected
    assert job(experiment).profiles == ("standard", "full")


def test_the_gpt_distribution_study_runs_in_quick_with_the_recorder(data_root):
    """gpt-ptb: one Top-k run with the recorder (u distribution, contraction, Gaussian value
    and Gaussian-k count claims), the distribution figures, in quick and full."""
    gpt = job("gpt-ptb")
    assert gpt.profiles == ("quick", "full") and gpt.figures == plan.DISTRIBUTION_FIGURES
    assert gpt.variants("quick") == (plan.Variant(),)
    cfg, _ = load_config(gpt.config_path(REPO / "experiments"), "quick")
    assert cfg.sparsifier == "topk" and cfg.optimizer == "adamw"
    assert {"gaussiank", "gaussiank-2019"} <= set(cfg.recorder["sparsifiers"])


def test_tail_k_trains_in_fnn3_quick_under_both_conditions_on_five_seeds():
    variants = as_tuples(job("convergence-fnn3-mnist").variants("quick"))
    tail = sorted((seed, cond) for m, seed, cond, rho in variants if m == "tail-k")
    assert tail == sorted((seed, cond) for seed in range(5) for cond in ("paper", "none"))


def test_seeds_per_profile():
    """Five seeds per (method, condition) in quick, at least eight in full, at least three in
    the standard profile's LSTM."""
    for profile, j in convergence_jobs():
        seeds = {v.seed for v in j.variants(profile)}
        assert seeds == set(range(len(seeds)))
        least = {"quick": 5, "standard": 3, "full": 8}[profile]
        assert len(seeds) >= max(least, MIN_SEEDS), (j.experiment, profile)


def test_every_approximate_run_has_its_topk_partner():
    for profile, j in itertools.product(plan.PROFILES, plan.jobs()):
        if not isinstance(j, plan.TrainingJob) or profile not in j.profiles or \
                not isinstance(j.design, plan.ConvergenceDesign):
            continue
        variants = as_tuples(j.variants(profile))
        for sparsifier, seed, cond, rho in variants:
            if sparsifier != "dense":
                assert ("topk", seed, cond, rho) in variants, (j.experiment, sparsifier, seed)
        assert len({v[1] for v in variants}) >= MIN_SEEDS


def test_each_profile_runs_its_own_experiments():
    names = {p: [j.experiment for j in plan.jobs(profile=p)] for p in plan.PROFILES}
    assert "convergence-resnet20-cifar10" not in names["quick"] + names["standard"]
    assert "convergence-fnn3-mnist" in names["quick"] and "selection-speed" in names["quick"]
    assert "gpt-ptb" in names["quick"] and "outer-fnn3-mnist" in names["quick"]
    # standard adds the convergence models quick cannot afford, and the ResNet-20 and VGG-16
    # distribution studies (quick's settings) on 3 seeds; ResNet-20's runs in standard alone;
    # the GPT's outer-loop experiment
    assert names["standard"] == ["resnet20-cifar10", "vgg16-cifar10", "convergence-lstm-ptb",
                                 "convergence-gpt-ptb", "outer-gpt-ptb"]
    for name in ("resnet20-cifar10", "vgg16-cifar10"):
        assert job(name).variants("standard") == tuple(plan.Variant(None, s) for s in range(3))
    assert "resnet20-cifar10" not in names["quick"]
    assert job("vgg16-cifar10").variants("quick") == (plan.Variant(),)
    assert set(names["full"]) == {j.experiment for j in plan.JOBS}
    variants = job("convergence-resnet20-cifar10").variants("full")
    assert {v.seed for v in variants} == set(range(8)) and len(variants) == 8 * 17
    with pytest.raises(ValueError, match="do not run in the 'quick' profile"):
        plan.jobs(["convergence-resnet20-cifar10"], profile="quick")
    with pytest.raises(ValueError, match="do not run in the 'standard' profile"):
        plan.jobs(["convergence-fnn3-mnist"], profile="standard")


def test_the_figures_command_offers_every_profile():
    import argparse

    from topkscope.commands import figures

    parser = argparse.ArgumentParser()
    figures.add_arguments(parser)
    (action,) = [a for a in parser._actions if a.dest == "profile"]
    assert tuple(action.choices) == plan.PROFILES


@functools.cache
def ptb_train_tokens(data_root: Path) -> int:
    from topkscope.data import load

    return load("ptb", "train", str(data_root)).tokens.numel()


def steps_per_epoch(cfg, data_root: Path) -> int:
    """Steps per epoch computed here from the dataset's size: images / (workers x batch), or
    for a token stream ceil((tokens per worker // batch - 1) / bptt) windows."""
    if cfg.dataset == "ptb":
        tokens = ptb_train_tokens(data_root)
        rows = min(tokens, cfg.train_subset or tokens) // cfg.workers // cfg.batch_size
        return math.ceil((rows - 1) / cfg.bptt)
    images = min(TRAIN_SAMPLES[cfg.dataset], cfg.train_subset or TRAIN_SAMPLES[cfg.dataset])
    return images // cfg.workers // cfg.batch_size


def test_at_least_two_thirds_of_the_steps_run_at_the_target_density(data_root):
    """Under the paper warm-up (1/64 in epoch 0, 0.004 in epoch 1, then rho), in every profile
    of every convergence experiment: the warm-up shortens with the epoch (a training subset),
    so the share of steps at the target rho is counted over the run's own steps."""
    for profile, j in convergence_jobs():
        warm = [v for v in j.variants(profile) if v.density_schedule == "paper"]
        assert warm, (j.experiment, profile)
        for v in warm[:1] + warm[-1:]:
            cfg = RunSpec.of(j.experiment, j.config_path(REPO / "experiments"), profile, v,
                             Path("results")).resolved()
            assert density_schedule_values(cfg) == [1 / 64, 0.004]
            spe = steps_per_epoch(cfg, data_root)
            steps = total_steps(cfg, spe)
            at_target = sum(density_at(cfg, t, spe) == cfg.density for t in range(steps))
            assert at_target >= 2 / 3 * steps, (j.experiment, profile, at_target, steps)


def test_cpu_convergence_runs_count_steps_as_their_tasks_do(data_root):
    """The steps per epoch of the test above are those the training task computes."""
    from topkscope.comm.simulated import SimulatedTransport
    from topkscope.train.run import build_trainer

    for profile, j in convergence_jobs():
        if profile not in plan.CPU_PROFILES:
            continue
        cfg, _ = load_config(j.config_path(REPO / "experiments"), profile)
        trainer, _ = build_trainer(cfg, SimulatedTransport(cfg.workers), "cpu", str(data_root))
        assert trainer.steps_per_epoch == steps_per_epoch(cfg, data_root), j.experiment


def test_quick_convergence_runs_are_dense_curves(data_root):
    """Evaluation points dense enough to find when a target is first reached (time to
    accuracy): at least 12 per run in the CPU profiles; every epoch in full."""
    for profile, j in convergence_jobs():
        cfg, _ = load_config(j.config_path(REPO / "experiments"), profile)
        if profile in plan.CPU_PROFILES:
            steps = total_steps(cfg, steps_per_epoch(cfg, data_root))
            assert steps // cfg.eval_every_steps >= 12, (j.experiment, profile)
        else:
            assert cfg.eval_every_steps is None  # the end of every epoch


@functools.cache
def recorded_blocks(profile: str, data_root: Path) -> dict[tuple, set]:
    """The distinct (run, step) blocks of criteria.share_interval that the plan's recorded runs
    give each (model, condition, what) of a profile's claims table, counted from the resolved
    configs: `what` is "stats" (the cheap statistics' schedule), "snapshots" (steps with a raw u
    of a rank the recorder keeps) or "selector S" (sparsifier_schedule, for each approximate
    sparsifier S the recorder runs). A condition is the claims' (analysis.units): the target
    density and the warm-up's densities (an outer-loop run's also its outer rule and
    quantization: manifest.condition_of), and a step trained during the warm-up is a condition
    of its own (its density); runs of two experiments of one model in one condition are pooled.
    An outer-loop run's recorder is asked only at its exchanges (train.outer: the last inner
    step of each round), and its first EARLY_EXCHANGES exchanges are a phase of their own."""
    from topkscope.condition import EARLY_EXCHANGES
    from topkscope.hooks.schedules import parse_schedule
    from topkscope.manifest import outer_label

    blocks: dict[tuple, set] = {}
    for j in plan.jobs(profile=profile):
        if not isinstance(j, plan.TrainingJob):
            continue
        for v in j.variants(profile):
            cfg = RunSpec.of(j.experiment, j.config_path(REPO / "experiments"), profile, v,
                             Path("results")).resolved()
            if not cfg.recorder:
                continue
            rec, run = cfg.recorder, (j.experiment, v)
            stats = parse_schedule(rec.get("schedule", 1))
            selectors = parse_schedule(rec.get("sparsifier_schedule") or stats)
            ranks = set(rec.get("snapshot_ranks") or range(cfg.workers)) & set(range(cfg.workers))
            snapshots = parse_schedule(rec.get("snapshot_schedule")) if ranks else None
            warmup = density_schedule_values(cfg)
            spe = steps_per_epoch(cfg, data_root)
            last = total_steps(cfg, spe)
            outer = None if cfg.outer is None else (outer_label(cfg.outer), str(cfg.quantize))
            exchanges = 0
            for t in range(last):
                if outer and (t + 1) % cfg.outer["inner_steps"] and t + 1 != last:
                    continue  # no exchange at t: nothing is recorded
                exchanges += 1
                during = density_at(cfg, t, spe) if t // spe < len(warmup) else None
                phase = outer and ("first" if exchanges <= EARLY_EXCHANGES else "later")
                where = (cfg.model, tuple(warmup), cfg.density, during, outer, phase)
                done = [("stats", stats(t)), ("snapshots", snapshots is not None and snapshots(t))]
                done += [(f"selector {s}", selectors(t)) for s in rec.get("sparsifiers", ())]
                for what, recorded in done:
                    if recorded:
                        blocks.setdefault((*where, what), set()).add((run, t))
    return blocks


# models of quick whose snapshot claims are judged in standard, on more runs: quick's one
# VGG-16 run has 10 and 14 snapshot steps per condition, its one LSTM and one GPT run 3
SNAPSHOTS_IN_STANDARD = ("vgg16", "lstm-ptb-small", "gpt-mini")
# An outer loop's first EARLY_EXCHANGES exchanges are 2 a seed: at most 6 blocks on three seeds
# at any schedule (a share there would need 15 seeds), in both profiles; their rows stay inconclusive
# with too few blocks. Quick's outer-loop experiment (three FNN-3 seeds of 240 inner steps)
# records at every exchange, so H = 15 and the per-step run get 42 and 48 blocks for every
# statistic, selector and snapshot; H = 30's later exchanges are 6 a seed (18 blocks).
OUTER_IN_QUICK = "outer-fnn3-mnist"
FIRST_EXCHANGE_BLOCKS = 2 * 3
H30_LATER_BLOCKS_IN_QUICK = 6 * 3


@pytest.mark.parametrize("profile", plan.CPU_PROFILES)
def test_every_condition_gets_the_blocks_a_share_needs(profile, data_root):
    """A share of the distribution claims can hold or fail only on ZERO_EVENT_BLOCKS (30)
    distinct (run, step) blocks (the rule of three bounds its interval): every condition of
    the CPU profiles gets them for the statistics and every approximate selector, and for the
    snapshots except where the standard profile judges that condition's snapshot claims, but
    for an outer loop's first exchanges and quick's H = 30 (FIRST_EXCHANGE_BLOCKS,
    H30_LATER_BLOCKS_IN_QUICK: no schedule gives them more)."""
    from topkscope.analysis.criteria import ZERO_EVENT_BLOCKS

    blocks = recorded_blocks(profile, data_root)
    short = {key: len(found) for key, found in blocks.items() if len(found) < ZERO_EVENT_BLOCKS}
    first = {key for key in short if key[-2] == "first"}
    assert first and all(short[key] <= FIRST_EXCHANGE_BLOCKS for key in first), first
    short = {key: n for key, n in short.items() if key not in first}
    if profile == "quick":
        outer_only = {key for key in short
                      if {run[0] for run, _ in blocks[key]} == {OUTER_IN_QUICK}}
        assert outer_only and all(  # H = 30's later exchanges, the statistics alone
            short[key] == H30_LATER_BLOCKS_IN_QUICK and "H=30" in key[-3][0]
            and key[-1] == "stats" for key in outer_only), {k: short[k] for k in outer_only}
        short = {key: n for key, n in short.items() if key not in outer_only}
    snapshot_short = {key for key in short if key[-1] == "snapshots"}
    assert set(short) == snapshot_short, short
    if profile == "quick":
        assert {key[0] for key in snapshot_short} <= set(SNAPSHOTS_IN_STANDARD), short
        standard = recorded_blocks("standard", data_root)
        for key in snapshot_short:  # the same condition's snapshots, judged in standard
            assert len(standard.get(key, ())) >= ZERO_EVENT_BLOCKS, key
    else:
        assert not short
    models = {key[0] for key in blocks}
    assert models == ({"fnn3", "vgg16", "lstm-ptb-small", "gpt-mini"} if profile == "quick"
                      else {"resnet20", "vgg16", "lstm-ptb-small", "gpt-mini"})


def test_the_recorder_runs_only_in_the_runs_the_claims_read(tmp_path):
    """Top-k's runs keep the config's recorder (the claims read u there); every other
    method's runs switch it off, in the resolved config and on the command line."""
    for profile, j in convergence_jobs():
        path = j.config_path(REPO / "experiments")
        configured, _ = load_config(path, profile)
        assert configured.recorder, j.experiment
        for v in j.variants(profile)[:19]:
            spec = RunSpec.of(j.experiment, path, profile, v, tmp_path)
            recorder = spec.resolved().recorder
            argv = command(spec, resume=False)
            if v.sparsifier in plan.RECORDED_METHODS:
                assert recorder == configured.recorder and "recorder=null" not in argv
            else:
                assert recorder is None and argv[argv.index("recorder=null") - 1] == "--set"


def test_budgets_from_the_measured_run_times():
    assert plan.QUICK_BUDGET_SECONDS == plan.BUDGET_SECONDS["quick"] == 20 * 60
    assert plan.BUDGET_SECONDS["standard"] == 120 * 60
    for profile in plan.CPU_PROFILES:
        training = bench = 0.0
        for j in plan.jobs(profile=profile):
            assert plan.RUN_SECONDS[j.experiment] > 0, j.experiment
            if isinstance(j, plan.BenchmarkJob):
                bench += plan.RUN_SECONDS[j.experiment]
            else:
                training += plan.RUN_SECONDS[j.experiment] * len(j.variants(profile))
        expected = bench + training / plan.QUICK_PARALLEL + plan.FINISH_SECONDS[profile]
        assert plan.expected_seconds(profile) == pytest.approx(expected)
        assert plan.expected_seconds(profile) <= plan.BUDGET_SECONDS[profile]
    # quick keeps two minutes for the finish phase to grow with the runs it draws
    assert plan.expected_seconds("quick") <= 18 * 60
    with pytest.raises(ValueError, match="no measured run time for 'x'"):
        plan.expected_seconds("quick", plan=[plan.TrainingJob("x")])
    with pytest.raises(ValueError, match="profile 'full' has no measured budget"):
        plan.expected_seconds("full")


def test_each_variant_resolves_to_its_own_named_run(tmp_path):
    j = job("convergence-fnn3-mnist")
    path = j.config_path(REPO / "experiments")
    ids = set()
    for v in j.variants("quick"):
        spec = RunSpec.of(j.experiment, path, "quick", v, tmp_path)
        cfg = spec.resolved()
        assert (cfg.sparsifier, cfg.seed, cfg.density_schedule) == (
            v.sparsifier, v.seed, v.density_schedule)
        assert cfg.density == (v.density or 0.001)
        run_id = spec.run_id()
        assert run_id.startswith(f"quick-{v.sparsifier}-") and f"-s{v.seed}-" in run_id
        assert ("-ds-paper-" in run_id) == (v.density_schedule == "paper")
        ids.add(run_id)
        argv = command(spec, resume=False)
        assert argv[argv.index("--seed") + 1] == str(v.seed)
        assert f"density_schedule={v.density_schedule}" in argv
    assert len(ids) == len(j.variants("quick"))


def test_variant_labels_and_overrides():
    v = plan.Variant("gaussiank-2019", 1, "paper", 0.005)
    assert v.label() == "gaussiank-2019 seed 1 warmup=paper rho=0.005"
    assert v.overrides() == {"sparsifier": "gaussiank-2019", "seed": 1,
                             "density_schedule": "paper", "density": 0.005}
    assert plan.Variant("dgc", recorded=False).overrides() == {"sparsifier": "dgc",
                                                               "recorder": None}
    assert plan.Variant("topk", recorded=True).overrides() == {"sparsifier": "topk"}
    assert plan.Variant().overrides() == {} and plan.Variant().label() == ""
    with pytest.raises(ValueError, match="profile 'medium' has no seed count"):
        plan.FNN3_DESIGN.variants("medium")


@pytest.mark.train
def test_switching_the_recorder_off_changes_no_number_of_training(tmp_path, data_root):
    """The plan drops the recorder from the runs whose u no claim reads: it only observes u,
    so the trained numbers are the same bit for bit (here recording at every step, with a
    randomised selector among its sparsifiers)."""
    import pandas as pd

    from topkscope.cli import main

    path = job("convergence-fnn3-mnist").config_path(REPO / "experiments")
    tables = {}
    for name, recorder in (("on", "{schedule: 1, densities: [0.001], sparsifiers: "
                                  "[gaussiank, gaussiank-2019, randk]}"), ("off", "null")):
        assert main(["run", str(path), "--profile", "quick", "--results", str(tmp_path),
                     "--run-id", name, "--sparsifier", "topk", "--steps", "12",
                     "--set", "eval_every_steps=4", "--set", f"recorder={recorder}",
                     "--set", "eval_subset=1000", "--data", str(data_root),
                     "--no-progress"]) == 0
        run_dir = tmp_path / "convergence-fnn3-mnist" / name
        tables[name] = [pd.read_parquet(run_dir / f) for f in ("train.parquet", "eval.parquet")]
    assert (tmp_path / "convergence-fnn3-mnist" / "on" / "stats").is_dir()
    assert not (tmp_path / "convergence-fnn3-mnist" / "off" / "stats").exists()
    for on, off in zip(tables["on"], tables["off"]):
        assert set(on["run_id"]) == {"on"} and set(off["run_id"]) == {"off"}
        pd.testing.assert_frame_equal(  # the numbers; not the times or the run's name
            on.drop(columns=[c for c in on if c.startswith("time_") or c == "run_id"]),
            off.drop(columns=[c for c in off if c.startswith("time_") or c == "run_id"]))


# ---------------------------------------------------------------- the outer-loop experiments
OUTER = {"outer-fnn3-mnist": (("quick", 3), ("full", 3)),
         "outer-gpt-ptb": (("standard", 3), ("full", 3))}
SWEPT = ["sparseloco-nesterov-lr0.5", "sparseloco-nesterov-lr0.7", "sparseloco-nesterov-lr0.9",
         "diloco-lr0.5", "diloco-lr0.7", "diloco-lr0.9"]
# the SparseLoCo-style training at H = 1 and 30 too, for the pseudo-gradient's tails over H
OVER_H = ["sparseloco-h1", "sparseloco-h30"]
TRAININGS = ["sparseloco", *SWEPT, "diloco-average", *OVER_H, "topk-per-step"]
# standard's budget leaves dense DiLoCo without outer momentum and the other H to full and
# runs the two Nesterov trainings at DiLoCo's lr 0.7 alone (plan docstring)
UNTUNED = ["sparseloco", "sparseloco-nesterov", "diloco", "topk-per-step"]
TRAININGS_IN = {("outer-gpt-ptb", "standard"): UNTUNED}


@pytest.mark.parametrize("experiment", sorted(OUTER))
def test_outer_experiments_run_every_training_on_every_seed(experiment, tmp_path):
    j = job(experiment)
    assert j.figures == plan.OUTER_FIGURES
    path = j.config_path(REPO / "experiments")
    for profile, n_seeds in OUTER[experiment]:
        variants = j.variants(profile)
        trainings = TRAININGS_IN.get((experiment, profile), TRAININGS)
        assert [(v.name, v.seed) for v in variants] == [
            (t, s) for s in range(n_seeds) for t in trainings]
        ids, conditions = set(), set()
        for v in variants:
            spec = RunSpec.of(experiment, path, profile, v, tmp_path)
            cfg = spec.resolved()
            ids.add(spec.run_id())
            from topkscope.reproduce.runner import variant_fields

            fields = variant_fields(spec)
            conditions.add((fields["sparsifier"], fields["condition"], fields["seed"]))
            argv = command(spec, resume=False)
            for key, text in v.settings:
                assert argv[argv.index(f"{key}={text}") - 1] == "--set"
            outer = cfg.outer
            if v.name == "topk-per-step":
                assert outer is None and cfg.quantize is None and cfg.sparsifier == "topk"
                assert cfg.recorder["schedule"] == {"every": 15, "start": 14}
                assert cfg.recorder["densities"] == [cfg.density, 1 / 128]
                continue
            if v.name in OVER_H:
                # the statistics alone, at the H = 15 run's exchange steps
                assert outer["inner_steps"] == int(v.name.split("-h")[1])
                assert (outer["step"], outer["error_decay"], cfg.sparsifier) == (
                    "average", 0.95, "chunk-topk")
                assert cfg.recorder["schedule"] == {"every": 15, "start": 14}
                assert cfg.recorder["snapshot_schedule"] is None
                assert cfg.recorder["sparsifiers"] == []
                assert "g" in cfg.recorder["topk_kinds"]
                continue
            assert outer["inner_steps"] == 15
            assert (cfg.recorder is not None) == (v.name == "sparseloco")
            if v.name.startswith("sparseloco"):
                assert (cfg.sparsifier, cfg.density, cfg.quantize["bits"]) == (
                    "chunk-topk", 1 / 128, 2)
                assert outer["error_decay"] == 0.95
            else:
                assert cfg.sparsifier == "dense" and cfg.quantize is None
                assert outer["error_decay"] == 1.0
            step = ("nesterov" if v.name.startswith(("sparseloco-nesterov", "diloco-lr"))
                    or v.name == "diloco" else "average")
            lr = float(v.name.split("-lr")[1]) if "-lr" in v.name else (
                0.7 if step == "nesterov" else 1.0)
            assert (outer["step"], outer["lr"], outer["momentum"]) == (
                (step, lr, 0.9) if step == "nesterov" else (step, 1.0, 0.0))
        assert len(ids) == len(variants)
        assert len(conditions) == len(variants)   # no two trainings share a condition


@pytest.mark.parametrize("experiment", sorted(OUTER))
def test_the_per_step_run_sends_the_bytes_of_the_sparseloco_run(experiment, tmp_path):
    """8 + 8 k bytes a step (float32 values, int32 indices) against the SparseLoCo-style run's
    encoded message (2-bit values, 12-bit chunk-local indices, a table per tensor, the count)
    every H steps, from the model's own d and tensors: within 2%."""
    from topkscope import models
    from topkscope.perf.outer import OuterMethod
    from topkscope.sparsify import get_sparsifier, k_from_density
    from topkscope.sparsify.quantize import Quantizer

    j = job(experiment)
    profile = OUTER[experiment][0][0]
    path = j.config_path(REPO / "experiments")
    by_name = {v.name: RunSpec.of(experiment, path, profile, v, tmp_path).resolved()
               for v in j.variants(profile) if v.seed == 0}
    outer, step = by_name["sparseloco"], by_name["topk-per-step"]
    args = {"vocab_size": 10_000} if outer.dataset == "ptb" else {}
    model = models.create(outer.model, **{**outer.model_args, **args})
    tensors = [p for p in model.parameters() if p.requires_grad]
    d = sum(p.numel() for p in tensors)
    k = k_from_density(outer.density, d)
    message = OuterMethod("sparseloco", 15, False, k, outer.quantize["bits"],
                          get_sparsifier("chunk-topk").local_index_bits(d),
                          Quantizer(outer.quantize["bits"]).table_bytes(len(tensors)))
    per_step_outer = message.message_bytes() / outer.outer["inner_steps"]
    per_step = 8 + 8 * k_from_density(step.density, d)
    assert abs(per_step / per_step_outer - 1) < 0.02, (per_step, per_step_outer)
