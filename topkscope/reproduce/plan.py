"""What `topkscope figures` runs: the experiment plan of docs/figures.md, per profile.

A training job is one experiment config (experiments/<name>.yaml) run once per *variant*: a
sparsifier, and for the convergence experiments also a seed, a density warm-up (the
*condition*) and a density. A benchmark job runs the script its config names (selection-speed:
benchmarks/selection.py). The plan is data (tuples), so the README's figure -> experiment ->
command table, `--dry-run` and the driver read the same thing.

Convergence design (ConvergenceDesign), per seed:

    dense                                 once (nothing to warm up)
    topk and every approximate method     under each condition: warmup=paper, warmup=none
    density sensitivity                   topk and gaussiank-2019 at rho = 0.005, 0.01
                                          (warmup=none; rho = 0.001 is the main grid's run)

Approximate methods: gaussiank-2019 (the paper's Gaussian-k), dgc (DGC as its authors published
it), redsync, redsync-2019 (the RedSync the paper compared against), sidco (with its adaptive
stage count), randk. The earlier variants dgc-sampled and sidco-fixed are not run. The robust
`gaussiank` is not run: it selects the exact top-k set by construction, and a test shows that
it trains identically to topk.
Pairing is per (seed, condition, density): every method's seed s is compared with topk's seed s.

Quick-profile budget (2 cores, two runs at a time, after set-up): 20 minutes in all. Seconds
per run (RUN_SECONDS): the distribution runs as measured on an idle 2-core CPU; a convergence
run's CPU time (user + sys, one thread: its wall time when two share 2 idle cores), measured
16-18 s for topk and redsync; the benchmark an allowance (not measured separately):

    fnn3-mnist 23, resnet20-cifar10 289, vgg16-cifar10 104, lstm-ptb 164  (distributions)
    convergence-fnn3-mnist 17 per run x 57 runs (3 seeds x 19)            (~485 s at two at a time)
    selection-speed benchmark ~60 s (alone, before training)

expected_seconds("quick") ~ 14 min; on a machine shared with other jobs every run takes
several times as long (a convergence run took 70-130 s wall with a load average of 6-8). The ResNet-20 convergence (5 runs x 100 s for 150 steps
today; curves with >= 8 evaluation points over 3 seeds x 15 runs would need over an hour) runs
only in the `full` profile (3 seeds there; FNN-3 runs 5 seeds in `full`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

PROFILES = ("quick", "full")
QUICK_BUDGET_SECONDS = 20 * 60   # the whole quick profile, 2 cores, after set-up
QUICK_PARALLEL = 2               # training runs at a time in the quick profile

# approximate methods of the convergence experiments; gaussiank-2019 is the paper's Gaussian-k
APPROXIMATE_METHODS = ("gaussiank-2019", "dgc", "redsync", "redsync-2019", "sidco", "randk")
CONDITIONS = ("paper", "none")   # density warm-up: the authors' paper-time schedule, or none
SENSITIVITY_METHODS = ("topk", "gaussiank-2019")
SENSITIVITY_DENSITIES = (0.005, 0.01)   # with the experiment's own rho = 0.001: the paper's three


@dataclasses.dataclass(frozen=True)
class Variant:
    """One run of a training job: overrides of the experiment config (None: as configured)."""

    sparsifier: str | None = None
    seed: int | None = None
    density_schedule: str | None = None   # the condition (a named density warm-up)
    density: float | None = None

    def overrides(self) -> dict:
        names = ("sparsifier", "seed", "density_schedule", "density")
        return {n: getattr(self, n) for n in names if getattr(self, n) is not None}

    def label(self) -> str:
        """e.g. 'gaussiank-2019 seed 1 warmup=paper rho=0.005' ('' for the config as it is)."""
        parts = [self.sparsifier or ""]
        if self.seed is not None:
            parts.append(f"seed {self.seed}")
        if self.density_schedule is not None:
            parts.append(f"warmup={self.density_schedule}")
        if self.density is not None:
            parts.append(f"rho={self.density:g}")
        return " ".join(p for p in parts if p)


@dataclasses.dataclass(frozen=True)
class ConvergenceDesign:
    """Methods x conditions x seeds (+ a density sensitivity), enumerated by variants()."""

    seeds: tuple[tuple[str, int], ...]          # (profile, number of seeds 0..n-1)
    methods: tuple[str, ...] = APPROXIMATE_METHODS
    conditions: tuple[str, ...] = CONDITIONS
    sensitivity_methods: tuple[str, ...] = ()
    sensitivity_densities: tuple[float, ...] = ()
    sensitivity_condition: str = "none"

    def n_seeds(self, profile: str) -> int:
        found = dict(self.seeds)
        if profile not in found:
            raise ValueError(f"profile {profile!r} has no seed count; it has {', '.join(found)}")
        return found[profile]

    def variants(self, profile: str) -> tuple[Variant, ...]:
        out = []
        for seed in range(self.n_seeds(profile)):
            out.append(Variant("dense", seed, "none"))
            for cond in self.conditions:
                out += [Variant(m, seed, cond) for m in ("topk", *self.methods)]
            for rho in self.sensitivity_densities:
                out += [Variant(m, seed, self.sensitivity_condition, rho)
                        for m in self.sensitivity_methods]
        return tuple(out)


@dataclasses.dataclass(frozen=True)
class TrainingJob:
    """Run experiments/<experiment>.yaml under a profile, once per variant: one per sparsifier
    (None: as configured), or the design's variants when a design is given. Runs only in the
    listed profiles."""

    experiment: str
    sparsifiers: tuple[str | None, ...] = (None,)
    figures: tuple[str, ...] = ()
    design: ConvergenceDesign | None = None
    profiles: tuple[str, ...] = PROFILES

    def config_path(self, experiments_dir: Path) -> Path:
        return Path(experiments_dir) / f"{self.experiment}.yaml"

    def variants(self, profile: str) -> tuple[Variant, ...]:
        if self.design is not None:
            return self.design.variants(profile)
        return tuple(Variant(s) for s in self.sparsifiers)


@dataclasses.dataclass(frozen=True)
class BenchmarkJob:
    """Run the benchmark that experiments/<experiment>.yaml names (see driver.load_benchmark_config)."""

    experiment: str
    figures: tuple[str, ...] = ()
    profiles: tuple[str, ...] = PROFILES

    def config_path(self, experiments_dir: Path) -> Path:
        return Path(experiments_dir) / f"{self.experiment}.yaml"


DISTRIBUTION_FIGURES = (
    "histogram", "sorted_magnitudes", "contraction", "normality", "qq", "selectors",
)
CONVERGENCE_FIGURES = ("convergence", "traffic", "density_sensitivity", "selected_per_step")

FNN3_DESIGN = ConvergenceDesign(seeds=(("quick", 3), ("full", 5)),
                                sensitivity_methods=SENSITIVITY_METHODS,
                                sensitivity_densities=SENSITIVITY_DENSITIES)
RESNET20_DESIGN = ConvergenceDesign(seeds=(("quick", 3), ("full", 3)))

JOBS: tuple[TrainingJob | BenchmarkJob, ...] = (
    TrainingJob("fnn3-mnist", figures=DISTRIBUTION_FIGURES),
    TrainingJob("resnet20-cifar10", figures=DISTRIBUTION_FIGURES),
    TrainingJob("vgg16-cifar10", figures=DISTRIBUTION_FIGURES),
    TrainingJob("lstm-ptb", figures=DISTRIBUTION_FIGURES),
    TrainingJob("convergence-fnn3-mnist", figures=CONVERGENCE_FIGURES, design=FNN3_DESIGN),
    TrainingJob("convergence-resnet20-cifar10", figures=CONVERGENCE_FIGURES,
                design=RESNET20_DESIGN, profiles=("full",)),
    BenchmarkJob("selection-speed", figures=("selection_speed",)),
)

# seconds per run, quick profile, 2-core CPU, one thread per run (see the module docstring)
RUN_SECONDS = {
    "fnn3-mnist": 23, "resnet20-cifar10": 289, "vgg16-cifar10": 104, "lstm-ptb": 164,
    "convergence-fnn3-mnist": 17, "selection-speed": 60,
}


def expected_seconds(profile: str = "quick", plan: Sequence[TrainingJob | BenchmarkJob] | None = None,
                     parallel: int = QUICK_PARALLEL) -> float:
    """Wall seconds the plan's runs should take under `profile` (benchmarks alone, training
    `parallel` at a time), from RUN_SECONDS; ValueError for a job without a measured time."""
    check_profile(profile)
    bench = training = 0.0
    for job in jobs(plan=plan, profile=profile):
        if job.experiment not in RUN_SECONDS:
            raise ValueError(f"no measured run time for {job.experiment!r} (RUN_SECONDS)")
        if isinstance(job, BenchmarkJob):
            bench += RUN_SECONDS[job.experiment]
        else:
            training += RUN_SECONDS[job.experiment] * len(job.variants(profile))
    return bench + training / parallel


def jobs(only: Sequence[str] | None = None,
         plan: Sequence[TrainingJob | BenchmarkJob] | None = None,
         profile: str | None = None) -> list[TrainingJob | BenchmarkJob]:
    """The plan (JOBS unless another is given) under `profile` (None: every job), optionally
    restricted to the named experiments (ValueError on a name the plan or profile lacks)."""
    plan = list(JOBS if plan is None else plan)
    if profile is not None:
        check_profile(profile)
        absent = [j.experiment for j in plan if profile not in j.profiles]
        plan = [j for j in plan if profile in j.profiles]
        if only and [n for n in only if n in absent]:
            raise ValueError(f"experiment(s) {[n for n in only if n in absent]} do not run in "
                             f"the {profile!r} profile; it has: "
                             f"{', '.join(j.experiment for j in plan)}")
    if not only:
        return plan
    names = [j.experiment for j in plan]
    unknown = [n for n in only if n not in names]
    if unknown:
        raise ValueError(f"unknown experiment(s) {unknown}; the plan has: {', '.join(names)}")
    return [j for j in plan if j.experiment in only]


def check_profile(profile: str) -> str:
    if profile not in PROFILES:
        raise ValueError(f"profile {profile!r} is not one of: {', '.join(PROFILES)}")
    return profile
