"""A small but real result tree for the figure, plot and notebook tests.

Built once per test session (and shared by pytest-xdist workers through a file lock) by the
real driver, `topkscope.reproduce.driver.reproduce`, on real MNIST:

    tiny-fnn3.yaml         FNN-3, 2 simulated workers, 40 steps, recorder on
    tiny-convergence.yaml  FNN-3, 2 workers, 30 steps, run for dense/topk/gaussiank/randk
    tiny-seeds.yaml        FNN-3, 2 workers, 20 steps, a convergence design: seeds 0-2 x
                           (dense; topk, gaussiank-2019 under warmup=paper and none; topk at
                           rho = 0.05 too), 18 runs
    tiny-selection.yaml    benchmarks/selection.py on d in {1e4, 1e5}, 4 methods

(experiment configs written into the session's temporary folder, not the repository's),
so every plot function and notebook is exercised on what training actually wrote.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from topkscope.cli import main as cli_main
from topkscope.reproduce import plan
from topkscope.reproduce.driver import Options, Outcome, reproduce

REPO = Path(__file__).resolve().parents[1]

DISTRIBUTION_YAML = """\
experiment: tiny-fnn3
description: test run
model: fnn3
dataset: mnist
workers: 2
batch_size: 64
steps: 40
train_subset: 2560
eval_subset: 1000
lr: 0.05
momentum: 0.9
sparsifier: topk
density: 0.01
threads: 1
seed: 0
recorder:
  schedule: {every: 2}
  hist_schedule: {steps: [10, 20, 38]}
  snapshot_schedule: {steps: [10, 20, 38]}
  densities: [0.001, 0.01]
  sparsifiers: [gaussiank, gaussiank-2019, randk]
profiles:
  quick: {}
"""

CONVERGENCE_YAML = """\
experiment: tiny-convergence
description: test runs
model: fnn3
dataset: mnist
workers: 2
batch_size: 64
steps: 30
train_subset: 1280
eval_subset: 1000
lr: 0.05
momentum: 0.9
sparsifier: topk
density: 0.01
threads: 1
seed: 0
profiles:
  quick: {}
"""

SEEDS_YAML = """\
experiment: tiny-seeds
description: test runs over seeds and conditions
model: fnn3
dataset: mnist
workers: 2
batch_size: 64
steps: 20
train_subset: 640
eval_subset: 500
eval_every_steps: 4
lr: 0.05
momentum: 0.9
sparsifier: topk
density: 0.01
threads: 1
seed: 0
profiles:
  quick: {}
"""

SELECTION_YAML = """\
experiment: tiny-selection
benchmark: selection
output: selection.csv
args: [--densities, "0.001,0.01", --distributions, normal, --methods,
       "topk,gaussiank,gaussiank-2019,randk"]
profiles:
  quick:
    args: [--sizes, "1e4,1e5", --repeats, "1", --no-plot]
"""

SPARSIFIERS = ("dense", "topk", "gaussiank", "randk")
# 640 samples / (2 workers x 64) = 5 steps per epoch: the paper warm-up covers steps 0-9
SEEDS_DESIGN = plan.ConvergenceDesign(seeds=(("quick", 3),), methods=("gaussiank-2019",),
                                      sensitivity_methods=("topk",), sensitivity_densities=(0.05,))
JOBS = (
    plan.TrainingJob("tiny-fnn3", figures=plan.DISTRIBUTION_FIGURES),
    plan.TrainingJob("tiny-convergence", SPARSIFIERS, figures=("convergence",)),
    plan.TrainingJob("tiny-seeds", figures=plan.CONVERGENCE_FIGURES, design=SEEDS_DESIGN),
    plan.BenchmarkJob("tiny-selection", figures=("selection_speed",)),
)


@dataclass
class SmallResults:
    root: Path            # results root (runs, bench/, figures/, claims.csv)
    experiments: Path     # the YAMLs above
    data: Path
    outcome: Outcome | None  # None when another xdist worker built the tree

    def options(self, **changes) -> Options:
        base = dict(profile="quick", results_root=self.root, experiments_dir=self.experiments,
                    data_root=self.data, benchmarks_dir=REPO / "benchmarks", jobs=JOBS,
                    in_process=cli_main, notebooks=False, tables=False)
        base.update(changes)
        return Options(**base)


def build(root: Path, data: Path) -> SmallResults:
    """Write the YAMLs, then run the driver (idempotent: complete results are kept)."""
    experiments = root / "experiments"
    experiments.mkdir(parents=True, exist_ok=True)
    (experiments / "tiny-fnn3.yaml").write_text(DISTRIBUTION_YAML)
    (experiments / "tiny-convergence.yaml").write_text(CONVERGENCE_YAML)
    (experiments / "tiny-seeds.yaml").write_text(SEEDS_YAML)
    (experiments / "tiny-selection.yaml").write_text(SELECTION_YAML)
    results = root / "results"
    small = SmallResults(results, experiments, data, None)
    small.outcome = reproduce(small.options(), log=lambda m: None)
    return small


def shared_small_results(tmp_path_factory, data: Path) -> SmallResults:
    """build() once per session; xdist workers share one tree through an exclusive lock."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the session folder every worker shares
    root = base / "topkscope-small-results"
    root.mkdir(parents=True, exist_ok=True)
    done = root / ".built"
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if done.exists():  # another test module or xdist worker built it already
                return SmallResults(root / "results", root / "experiments", data, None)
            small = build(root, data)
            if not small.outcome.failures:
                done.touch()
            return small
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
