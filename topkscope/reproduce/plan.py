"""What `topkscope figures` runs: the experiment plan of docs/figures.md, per profile.

A training job is one experiment config (experiments/<name>.yaml) run once per sparsifier it
compares; a benchmark job runs the script its config names (selection-speed: benchmarks/selection.py). The plan is data (tuples), so the
README's figure -> experiment -> command table and the driver read the same thing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

PROFILES = ("quick", "full")
# gaussiank-2019 is the paper's Gaussian-k; the robust gaussiank selects the exact top-k set
CONVERGENCE_SPARSIFIERS = ("dense", "topk", "gaussiank-2019", "gaussiank", "randk")


@dataclasses.dataclass(frozen=True)
class TrainingJob:
    """Run experiments/<experiment>.yaml under a profile, once per sparsifier (None: as configured)."""

    experiment: str
    sparsifiers: tuple[str | None, ...] = (None,)
    figures: tuple[str, ...] = ()

    def config_path(self, experiments_dir: Path) -> Path:
        return Path(experiments_dir) / f"{self.experiment}.yaml"


@dataclasses.dataclass(frozen=True)
class BenchmarkJob:
    """Run the benchmark that experiments/<experiment>.yaml names (see driver.load_benchmark_config)."""

    experiment: str
    figures: tuple[str, ...] = ()

    def config_path(self, experiments_dir: Path) -> Path:
        return Path(experiments_dir) / f"{self.experiment}.yaml"


DISTRIBUTION_FIGURES = (
    "histogram", "sorted_magnitudes", "contraction", "normality", "qq", "selectors",
)

JOBS: tuple[TrainingJob | BenchmarkJob, ...] = (
    TrainingJob("fnn3-mnist", figures=DISTRIBUTION_FIGURES),
    TrainingJob("resnet20-cifar10", figures=DISTRIBUTION_FIGURES),
    TrainingJob("vgg16-cifar10", figures=DISTRIBUTION_FIGURES),
    TrainingJob("lstm-ptb", figures=DISTRIBUTION_FIGURES),
    TrainingJob("convergence-fnn3-mnist", CONVERGENCE_SPARSIFIERS, figures=("convergence",)),
    TrainingJob("convergence-resnet20-cifar10", CONVERGENCE_SPARSIFIERS, figures=("convergence",)),
    BenchmarkJob("selection-speed", figures=("selection_speed",)),
)


def jobs(only: Sequence[str] | None = None,
         plan: Sequence[TrainingJob | BenchmarkJob] | None = None) -> list[TrainingJob | BenchmarkJob]:
    """The plan (JOBS unless another is given), optionally restricted to the named experiments
    (ValueError on an unknown name)."""
    plan = list(JOBS if plan is None else plan)
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
