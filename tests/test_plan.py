"""The experiment plan: which runs each profile makes (methods x conditions x seeds, the density
sensitivity), that every approximate run has its Top-k partner, and the quick budget."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from topkscope.analysis.claims import MIN_SEEDS
from topkscope.reproduce import plan
from topkscope.reproduce.runner import RunSpec, command
from topkscope.train.config import load_config

REPO = Path(__file__).resolve().parents[1]
METHODS = ["gaussiank-2019", "dgc", "redsync", "redsync-2019", "sidco", "randk"]
MNIST_TRAIN = 60_000


def job(name: str) -> plan.TrainingJob:
    (found,) = [j for j in plan.JOBS if j.experiment == name]
    return found


def as_tuples(variants) -> list[tuple]:
    return [(v.sparsifier, v.seed, v.density_schedule, v.density) for v in variants]


@pytest.mark.parametrize(("profile", "n_seeds"), [("quick", 3), ("full", 5)])
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
    assert len(got) == n_seeds * (1 + 2 * 7 + 4) and len(set(got)) == len(got)
    assert "gaussiank" not in {v[0] for v in got}  # robust Gaussian-k = Top-k: tested, not run


def test_every_approximate_run_has_its_topk_partner():
    for profile, j in itertools.product(plan.PROFILES, plan.jobs()):
        if not isinstance(j, plan.TrainingJob) or j.design is None or profile not in j.profiles:
            continue
        variants = as_tuples(j.variants(profile))
        for sparsifier, seed, cond, rho in variants:
            if sparsifier != "dense":
                assert ("topk", seed, cond, rho) in variants, (j.experiment, sparsifier, seed)
        assert len({v[1] for v in variants}) >= MIN_SEEDS


def test_resnet20_convergence_only_in_full_with_three_seeds():
    quick = [j.experiment for j in plan.jobs(profile="quick")]
    assert "convergence-resnet20-cifar10" not in quick and "convergence-fnn3-mnist" in quick
    variants = job("convergence-resnet20-cifar10").variants("full")
    assert {v.seed for v in variants} == {0, 1, 2} and len(variants) == 3 * 15
    with pytest.raises(ValueError, match="do not run in the 'quick' profile"):
        plan.jobs(["convergence-resnet20-cifar10"], profile="quick")


def test_quick_budget_from_the_measured_run_times():
    assert plan.QUICK_BUDGET_SECONDS == 20 * 60
    for j in plan.jobs(profile="quick"):
        assert plan.RUN_SECONDS[j.experiment] > 0, j.experiment
    fnn3 = plan.RUN_SECONDS["convergence-fnn3-mnist"] * 57 / plan.QUICK_PARALLEL
    rest = sum(plan.RUN_SECONDS[j.experiment] for j in plan.jobs(profile="quick")
               if j.experiment != "convergence-fnn3-mnist" and isinstance(j, plan.TrainingJob))
    bench = plan.RUN_SECONDS["selection-speed"]
    assert plan.expected_seconds("quick") == pytest.approx(bench + fnn3 + rest / 2)
    assert plan.expected_seconds("quick") <= plan.QUICK_BUDGET_SECONDS
    with pytest.raises(ValueError, match="no measured run time for 'x'"):
        plan.expected_seconds("quick", plan=[plan.TrainingJob("x")])


def test_quick_convergence_runs_are_curves():
    """>= 8 evaluation points per run in the quick profile; the full one evaluates every epoch."""
    path = job("convergence-fnn3-mnist").config_path(REPO / "experiments")
    quick, _ = load_config(path, "quick")
    steps = int(quick.epochs * (MNIST_TRAIN // (quick.workers * quick.batch_size)))
    assert steps // quick.eval_every_steps >= 8
    full, _ = load_config(path, "full")
    assert full.eval_every_steps is None and full.epochs == 30


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
    assert plan.Variant().overrides() == {} and plan.Variant().label() == ""
    with pytest.raises(ValueError, match="profile 'medium' has no seed count"):
        plan.FNN3_DESIGN.variants("medium")
