"""What `topkscope figures` runs: the experiment plan of docs/figures.md, per profile.

A training job is one experiment config (experiments/<name>.yaml) run once per *variant*: a
sparsifier, and for the convergence experiments also a seed, a density warm-up (the
*condition*) and a density. A benchmark job runs the script its config names (selection-speed:
benchmarks/selection.py). The plan is data (tuples), so the README's figure -> experiment ->
command table, `--dry-run` and the driver read the same thing. A job lists the profiles it
runs in:

    quick     2-core CPU, at most 20 minutes: four distribution runs (FNN-3, VGG-16, LSTM,
              the GPT with AdamW), the selection-speed benchmark, the FNN-3 convergence
              (5 seeds)
    standard  2-core CPU, at most 120 minutes: the convergence models quick cannot afford,
              the LSTM (4 seeds) and the GPT (3 seeds) on PTB, and the ResNet-20 and VGG-16
              distribution studies on 3 seeds (quick's settings; its claims are a file of
              their own, claims-standard.csv under results/reference/ once committed)
    full      the paper's settings (GPUs): everything, 8 seeds per convergence design

The outer-loop experiments (Top-k on DiLoCo-style pseudo-gradients) run a TrainingsDesign of
named trainings per seed (outer_trainings): FNN-3 in quick (three seeds, 240 inner steps; the
two Nesterov trainings at outer lr 0.5, 0.7 and 0.9 each, as the SparseLoCo authors swept
DiLoCo's at H = 15, and the SparseLoCo-style training at H = 1 and H = 30 for the
pseudo-gradient's tails over H: eleven trainings a seed), the GPT in standard (three seeds, 420 inner steps;
four trainings a seed at DiLoCo's lr 0.7 alone, untuned at H = 15, which its claims say:
dense DiLoCo without outer momentum and the sweep run in full only, for the budget).

Convergence design (ConvergenceDesign), per seed:

    dense                                 once (nothing to warm up)
    topk and every approximate method     under each condition: warmup=paper, warmup=none
    density sensitivity                   topk and gaussiank-2019 at rho = 0.005, 0.01
                                          (warmup=none; rho = 0.001 is the main grid's run)

FNN-3 approximate methods: gaussiank-2019 (the paper's Gaussian-k), dgc (DGC as its authors
published it), redsync, redsync-2019 (the RedSync the paper compared against), sidco (with its
adaptive stage count), randk, tail-k (the earlier variants dgc-sampled and sidco-fixed are not run), with the density
sensitivity; LSTM-PTB: gaussiank-2019 and dgc under both conditions and tail-k under the paper
warm-up alone, no sensitivity; GPT-PTB (AdamW): gaussiank-2019 under both, tail-k under the
paper warm-up alone, no sensitivity (tail-k under both conditions on the LSTM and the GPT
would add (4 x 274.4 + 3 x 177.1) / 2 s ~ 13.6 min to standard's 118.8, past its 120). The robust
`gaussiank` is not run: it selects the exact
top-k set by construction, and a test shows that it trains identically to topk. Pairing is per
(seed, condition, density): every method's seed s is compared with topk's seed s. The config's
recorder runs only in the topk runs (RECORDED_METHODS: the claims read u there); every other
run gets `--set recorder=null` (the recorder observes u, it never changes training).

Seeds: five in quick, eight in full; in standard four on the LSTM and three on the GPT. The
LSTM's fourth seed: over three seeds each of its method-against-Top-k perplexity intervals
contained the margin (claims-standard.csv: DGC [-10.4, +9.1]% without warm-up and
[-16.2, +4.24]% with it, tail-k [-17.5, +7.61]%, Gaussian-k (2019) [-27.8, +52]%: the seeds
spread); with the same spread a fourth seed narrows an interval by 1.56 (t 4.30 / sqrt(3)
against 3.18 / sqrt(4)), enough for DGC with the warm-up, tail-k needs about five, Gaussian-k
about fifteen; a fifth LSTM seed would take standard past 120 minutes. The GPT gets none: of
its accuracy and traffic rows only Gaussian-k (2019)'s traffic with the warm-up is undecided,
with seeds on both sides of 4/3 (seeds-disagree), and the traffic rule asks every seed to lie
on one side, so a seed above stays above whatever seeds are added (FNN-3's at rho = 0.005
likewise).

The recorder of the CPU profiles (docs/figures.md, "What the recorder records"): a share of a
distribution claim holds or fails only on 30 distinct (run, step) blocks (ZERO_EVENT_BLOCKS),
and a step trained during a density warm-up is a condition of its own, so every condition of
quick and standard gets them for the statistics and each approximate selector, and in
standard for the snapshots of u (quick's single VGG-16, LSTM and GPT runs keep a few snapshot
steps: those models' snapshot claims are judged in standard). The statistics (moments, exact
Top-k delta, the bounds) are recorded densely and the approximate selectors on the
whole-model row (sparsifier_per_layer: false, the row the claims and the figures read),
where a run is long on a sparser sparsifier_schedule. tests/test_plan.py counts the blocks.

Run length: under the paper warm-up (1/64 in epoch 0, 0.004 in epoch 1, then rho) at least two
thirds of a convergence run's steps run at the target rho, in every profile: quick FNN-3 runs 7
epochs of a 25,600-image subset (350 steps, 250 at rho), standard LSTM-PTB 7 epochs of a
120,000-token subset (602 steps, 430 at rho), standard GPT-PTB (gpt-mini) 7 epochs of a
120,000-token subset (826 steps, 590 at rho); all evaluate 14 times, dense enough to find
when a target is first reached.

Budgets (expected_seconds): on 2 idle cores a profile takes its benchmark alone, then its
training runs two at a time (CPU seconds / 2), then FINISH_SECONDS (analyze, draw, claims,
tables, notebooks). RUN_SECONDS are CPU seconds (user + sys) of one one-thread run, robust to
other jobs on a shared machine (wall times are not), measured with

    /usr/bin/time -f "%U %S" topkscope run experiments/<experiment>.yaml --profile <profile> \
        [the variant's --sparsifier/--seed/--set of `topkscope figures --dry-run`] --no-progress

(for the convergence experiments: the mean over one seed's variants; the benchmark: the wall
seconds of `python benchmarks/selection.py` as the quick profile runs it, alone), here on the
2-core machine shared with other jobs (load average 6-12, which if anything inflates CPU time):

    fnn3-mnist 11, vgg16-cifar10 56, lstm-ptb 87, resnet20-cifar10 176, gpt-ptb 72
        (distributions; gpt-ptb: 58.4 user + 14.0 sys), then the recorders of the issue
        "evidence that decides": fnn3-mnist +2.4 (statistics every 10 steps, the selectors every 20 instead of
        both every 200: 11.33 against 8.94 s, whole quick runs back to back, load ~8),
        vgg16-cifar10 +25.2 (statistics and selectors every step instead of every 10: 81.89
        against 56.66 s likewise), gpt-ptb -2.5 (the selectors on the whole-model row: 68.1
        against 70.6 s user, likewise; sys time varied by 11 s under the load), lstm-ptb +3.0
        and resnet20-cifar10 -18.3 (calls per run x the CPU time of a call, from
        benchmarks/recorder_calls.py: LSTM 32 calls a worker of 190.6 ms instead of 16 of
        288.5; ResNet-20 160 statistics-only calls of 9.4 ms and 40 with the selectors of
        29.7 instead of 40 of 182.0, 4 workers): 13.4, 81.2, 90.0, 158, 69.5
    convergence-fnn3-mnist 12.10 per run x 105 runs: the mean of seed 0's 21 variants, 11.44
        (7.9 dense .. 15.4 topk at rho = 0.01; tail-k 9.7 warmup=paper, 10.1 warmup=none;
        load average 1-2.5), plus the 16 raw snapshots of u each of the 20 Top-k runs then
        wrote (13.8 against 12.8 s for topk warmup=paper, measured back to back: 1.0 s), plus
        their stats every 8 steps instead of 20 and rank 0's u at 20 steps instead of every
        rank's at 4 (16.94 against 14.57 s for topk warmup=paper, back to back, load ~3: 2.4 s
        a Top-k run, 0.46 s on the mean), minus the selectors' layer rows
        (sparsifier_per_layer: false; benchmarks/recorder_calls.py: 44 calls a worker of
        9.8 ms instead of 16.8, 4 workers: -1.23 s a Top-k run, -0.23 on the mean): 11.87
    selection-speed ~45 s wall (31 s CPU; 41 s in the last quick profile on idle cores)
    finish, quick: 213 s wall in the last quick profile on idle cores (57 convergence runs:
        analyze 7, draw 59, claims 18, tables 0.2, 14 notebooks 129); their CPU does not grow
        with the runs (`/usr/bin/time topkscope figures --no-run --only
        convergence-fnn3-mnist`: 36.5 s over 57 runs, 36.6 s over 95); the GPT distribution
        run adds at most its own finish (`... --no-run --only gpt-ptb`: 47.6 s CPU, with the
        fixed costs: analyze 5.6 s, 6 figures, 3 notebooks), VGG-16's statistics at every step
        and its 24 snapshots of rank 0 (instead of 6 of every rank) 8.0 s (`... --only
        vgg16-cifar10`: 62.9 against 54.9 s CPU, back to back): 270 s allowed
    convergence-lstm-ptb 271 per run: dense 234, topk 292 (289 + 15 recorded steps of ~0.2 s),
        gaussiank-2019 298, dgc 242 (measured with the paper warm-up, whose first two epochs
        select more than the runs without it), weighted by the design's 3 + 6 + 6 + 6 runs;
        counted for its 3 tail-k runs too (tail-k on the LSTM and the GPT not measured yet:
        an O(d) selector, it should cost no more than topk's selection); then a Top-k run's
        recorder every 8 steps instead of 43 (76 calls a worker of 113.3 ms instead of 14 of
        156.8, benchmarks/recorder_calls.py) and 30 snapshots of 18.6 MB (~0.02 s CPU each):
        +13.4 s a Top-k run, 2 of the 8 runs a seed: 274.4
    convergence-gpt-ptb 175 per run: topk with the paper warm-up (116.4 user + 58.7 sys,
        14 recorded steps; the costliest variant: its first two epochs select more),
        counted for each of the design's 3 + 6 + 6 + 3 (tail-k) runs (dense: 152.6); then its
        recorder every 11 steps instead of 59 (76 calls a worker of 20.7 ms instead of 14 of
        42.0) and 33 snapshots of 3 MB: +2.1 s, counted for every run: 177.1
    finish, standard: 23.6 s CPU (`topkscope figures --profile standard --no-run`), then the
        snapshots the claims analyse (at most 30 per condition, analysis.units; CPU seconds
        per snapshot from units.snapshot_analyses on these models' snapshots: gpt-mini 0.34,
        lstm-ptb-small 0.53, resnet20 0.33): the LSTM's and the GPT's ~150 each (four
        conditions and their pool) 80 + 51 s, ResNet-20's 100 instead of 33 and VGG-16's
        figures as in quick 22 + 8 s: 185 s; then outer-gpt-ptb's: its figures, claims and
        notebook (~11 s, as quick's below) and the snapshots the claims analyse (2 conditions x
        30 x 0.34 s: 20 s): 216 s; 270 s allowed
    outer-fnn3-mnist 5.6 per run: the mean of its 5 trainings in two rounds back to back
        (5.57 and 5.63; load average 1-1.4): sparseloco 6.3-6.4 and topk-per-step 7.2 with
        their recorders (the selectors on the whole-model row alone, sparsifier_per_layer:
        false: 6.03 before, and the branch's first measurement 6.15 at load ~4), the three
        others 4.7-5.0
    outer-gpt-ptb 86 per run: sparseloco 94.2 (recorded), topk-per-step 94.1 (recorded),
        diloco 80.6, counted for all of its runs (load average 6-8; measured with the
        selectors on every layer's row, now on the whole-model row alone: an upper figure);
        in standard 4 trainings a seed (dense DiLoCo without outer momentum, diloco-average,
        runs in full only: its 3 runs would bring standard to 121.0 min)
    finish, quick's outer-loop experiment: its 3 figures 2.2 s, its claims 1.3 s, its
        notebook 7.2 s (wall, on its 5 quick runs): not in FINISH_SECONDS' 270 s (measured
        for the other experiments, 268.6 s); it is drawn from the two minutes quick keeps
        for the finish to grow (tests/test_plan.py: the estimate stays under 18 of 20)

The quick profile re-measured whole (`make reproduce-figures` into an empty results/ on idle
cores, 2026-12-03, with the atlas's trainings and statistics: outer-fnn3-mnist's eleven
trainings a seed, the tails, the notebooks executed beside the drawing and the claims): the
driver took 17.9 min (18.6 with make's set-up checks). Its log's per-run wall seconds, two runs
at a time (a one-thread run's wall is about its CPU time), replace quick's figures above:
fnn3-mnist 11.1, vgg16-cifar10 62.5, lstm-ptb 82.2, gpt-ptb 69.1, convergence-fnn3-mnist 9.17
(the mean of its 105 runs), outer-fnn3-mnist 5.9 (33 runs: sparseloco-h1 10.0-10.8, topk-per-step
7.5-7.6, sparseloco 6.7-7.0, sparseloco-h30 5.5-5.7, the other seven 4.7-5.3), the selection
benchmark 36.5; the finish, from the last run's end to the driver's end, 342 s (drawing 2.6 min,
the claims 143.6 s, the 30 notebooks 345.6 s on a thread of their own meanwhile).

Then outer-fnn3-mnist's sparseloco and topk-per-step runs snapshot rank 0's u at every
exchange (16 a run, not 3: the snapshot claims of the later exchanges get 42 (run, step) blocks
where a share needs 30). Their six runs, rerun alone while the standard profile held both
cores, took 10.5-13.8 CPU seconds against 8.75 for an unchanged training (diloco-average,
4.7-5.3 idle) run beside them: scaled by that ratio, 6.0-7.9 idle, about 0.4 s a run more
than before; outer-fnn3-mnist's mean becomes 6.0 (197.1 / 33). The claims then analyse 66 of
its snapshots instead of 18: `topkscope claims` on that experiment's runs alone took 41.4 and
46.1 CPU seconds before, 111.9 and 115.9 after (alternating, the same load), about +40 s idle by
the ratio above; the finish runs the claims beside the notebooks (143.6 s against 345.6 s), so
they stay inside FINISH_SECONDS; its notebook took 17.6 s of CPU against 14.8 before.

All of these were measured before a training step stopped seeding CUDA on the CPU
(Trainer._seed_step, about 1 ms of every worker's step: an FNN-3 step of 4 simulated workers
went from 23.9 to 17.4 ms in benchmarks/recorder_overhead.py), so the small models' runs are
upper figures until the profile is timed again.

expected_seconds("quick") ~ 17.86 min (36.5 + (225.0 + 105 x 9.17 + 33 x 6.0) / 2 + 342 s;
225.0 = the distribution runs without ResNet-20's), against the 17.9 measured before the
snapshots;
expected_seconds("standard") ~ 118.35 min ((32 x 274.4 + 18 x 177.1 + 12 x 86 + 3 x 158
+ 3 x 62.5) / 2 + 270 s; outer-gpt-ptb adds 8.6 min to 110.2); before, with three LSTM seeds
and a 90-minute budget, 87.8 min.

Distribution claims on 3 seeds (issue: one run per model flips verdicts on a rerun): in quick
they would cost ResNet-20 2 x 176 and VGG-16 2 x 56 CPU seconds more, 232 s of wall time, and
quick with tail-k's 10 FNN-3 runs already stood at 18.6 min (the test keeps 18 for the finish);
so they run in standard (3 seeds each: 348 s), and ResNet-20's one quick run (88 s) moves there
too, which brings quick back under 18 min (the snapshots then add 10 s). VGG-16 keeps its one quick run.
Where the seconds go in a quick FNN-3 convergence run (CPU, one thread): the interpreter
start-up and imports ~2.3 s (scipy.stats no longer among them: topkscope.bounds uses
scipy.special), 350 steps x 4 workers ~4.6 s (13 ms a step), 14 evaluations on the 10,000
test images ~0.8 s, the recorder ~0.8 s (topk runs only), checkpoints ~0.02 s.

Left out of standard (measured): the ResNet-20 convergence (MNIST at 3x32x32 standing in for
CIFAR-10): 0.33 s per step with 2 workers and 5.5 s per evaluation of 2,000 images, so runs
long enough for the paper warm-up (6 epochs of a 6,400-image subset, 600 steps) take ~280 s
each: its 15 runs a seed over 3 seeds would take ~105 minutes, even the LSTM's 7 runs a
seed ~49. It runs in `full`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

PROFILES = ("quick", "standard", "full")
CPU_PROFILES = ("quick", "standard")   # sized for a 2-core CPU: one thread per run, two at a time
BUDGET_SECONDS = {"quick": 20 * 60, "standard": 120 * 60}   # the whole profile, 2 cores
QUICK_BUDGET_SECONDS = BUDGET_SECONDS["quick"]
QUICK_PARALLEL = 2               # training runs at a time in the CPU profiles

# approximate methods of the convergence experiments; gaussiank-2019 is the paper's Gaussian-k
APPROXIMATE_METHODS = ("gaussiank-2019", "dgc", "redsync", "redsync-2019", "sidco", "randk",
                       "tail-k")
CONDITIONS = ("paper", "none")   # density warm-up: the authors' paper-time schedule, or none
SENSITIVITY_METHODS = ("topk", "gaussiank-2019")
SENSITIVITY_DENSITIES = (0.005, 0.01)   # with the experiment's own rho = 0.001: the paper's three
RECORDED_METHODS = ("topk",)     # the claims read u (the recorder) of Top-k's runs only


@dataclasses.dataclass(frozen=True)
class Variant:
    """One run of a training job: overrides of the experiment config (None: as configured;
    recorded=False switches the config's recorder off). A named training of an outer-loop
    design (TrainingsDesign) adds `settings`: more overrides, (key, YAML text) pairs given to
    `topkscope run` as --set key=text (mappings such as `outer` merge key by key)."""

    sparsifier: str | None = None
    seed: int | None = None
    density_schedule: str | None = None   # the condition (a named density warm-up)
    density: float | None = None
    recorded: bool | None = None
    name: str | None = None               # the training's name (TrainingsDesign)
    settings: tuple[tuple[str, str], ...] = ()

    def overrides(self) -> dict:
        from topkscope.train.config import read_yaml

        names = ("sparsifier", "seed", "density_schedule", "density")
        out = {n: getattr(self, n) for n in names if getattr(self, n) is not None}
        out.update((key, read_yaml(text)) for key, text in self.settings)
        if self.recorded is False:
            out["recorder"] = None
        return out

    def label(self) -> str:
        """e.g. 'gaussiank-2019 seed 1 warmup=paper rho=0.005' ('' for the config as it is);
        a named training: 'sparseloco seed 1'."""
        parts = [self.name or self.sparsifier or ""]
        if self.seed is not None:
            parts.append(f"seed {self.seed}")
        if self.density_schedule is not None:
            parts.append(f"warmup={self.density_schedule}")
        if self.density is not None:
            parts.append(f"rho={self.density:g}")
        return " ".join(p for p in parts if p)


def seed_count(seeds: tuple[tuple[str, int], ...], profile: str) -> int:
    """The number of seeds a design runs under `profile` (ValueError naming the profiles it
    has)."""
    found = dict(seeds)
    if profile not in found:
        raise ValueError(f"profile {profile!r} has no seed count; it has {', '.join(found)}")
    return found[profile]


@dataclasses.dataclass(frozen=True)
class ConvergenceDesign:
    """Methods x conditions x seeds (+ a density sensitivity), enumerated by variants(). The
    config's recorder runs only in the runs of `recorded` methods (the others: recorded=False)."""

    seeds: tuple[tuple[str, int], ...]          # (profile, number of seeds 0..n-1)
    methods: tuple[str, ...] = APPROXIMATE_METHODS
    conditions: tuple[str, ...] = CONDITIONS
    sensitivity_methods: tuple[str, ...] = ()
    sensitivity_densities: tuple[float, ...] = ()
    sensitivity_condition: str = "none"
    recorded: tuple[str, ...] = RECORDED_METHODS
    first_condition_only: tuple[str, ...] = ()  # methods run under conditions[0] alone

    def n_seeds(self, profile: str) -> int:
        return seed_count(self.seeds, profile)

    def variants(self, profile: str) -> tuple[Variant, ...]:
        def one(method: str, seed: int, cond: str, rho: float | None = None) -> Variant:
            return Variant(method, seed, cond, rho, recorded=method in self.recorded)

        out = []
        for seed in range(self.n_seeds(profile)):
            out.append(one("dense", seed, "none"))
            for i, cond in enumerate(self.conditions):
                out += [one(m, seed, cond) for m in ("topk", *self.methods)]
                if i == 0:
                    out += [one(m, seed, cond) for m in self.first_condition_only]
            for rho in self.sensitivity_densities:
                out += [one(m, seed, self.sensitivity_condition, rho)
                        for m in self.sensitivity_methods]
        return tuple(out)


@dataclasses.dataclass(frozen=True)
class Training:
    """One named way to train in a TrainingsDesign: the overrides of the experiment config
    (sparsifier, density, and --set settings as (key, YAML text)), whether the config's
    recorder runs in it, and the profiles it runs in (None: every profile of its job)."""

    name: str
    sparsifier: str | None = None
    density: float | None = None
    settings: tuple[tuple[str, str], ...] = ()
    recorded: bool = False
    profiles: tuple[str, ...] | None = None


@dataclasses.dataclass(frozen=True)
class TrainingsDesign:
    """Named trainings x seeds (the outer-loop experiments of issue 37): every training of
    the profile (Training.profiles) once per seed 0..n-1, paired by seed."""

    seeds: tuple[tuple[str, int], ...]
    trainings: tuple[Training, ...]

    def n_seeds(self, profile: str) -> int:
        return seed_count(self.seeds, profile)

    def variants(self, profile: str) -> tuple[Variant, ...]:
        return tuple(Variant(t.sparsifier, seed, None, t.density, recorded=t.recorded,
                             name=t.name, settings=t.settings)
                     for seed in range(self.n_seeds(profile)) for t in self.trainings
                     if t.profiles is None or profile in t.profiles)


@dataclasses.dataclass(frozen=True)
class TrainingJob:
    """Run experiments/<experiment>.yaml under a profile, once per variant: one per sparsifier
    (None: as configured), or the design's variants when a design is given. Runs only in the
    listed profiles."""

    experiment: str
    sparsifiers: tuple[str | None, ...] = (None,)
    figures: tuple[str, ...] = ()
    design: ConvergenceDesign | TrainingsDesign | None = None
    profiles: tuple[str, ...] = PROFILES
    seeds: tuple[tuple[str, int], ...] = ()  # without a design: (profile, seeds 0..n-1)

    def config_path(self, experiments_dir: Path) -> Path:
        return Path(experiments_dir) / f"{self.experiment}.yaml"

    def variants(self, profile: str) -> tuple[Variant, ...]:
        if self.design is not None:
            return self.design.variants(profile)
        n_seeds = dict(self.seeds).get(profile)
        if n_seeds is None:
            return tuple(Variant(s) for s in self.sparsifiers)
        return tuple(Variant(s, seed) for s in self.sparsifiers for seed in range(n_seeds))


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
    "delta_curve",
)
CONVERGENCE_FIGURES = ("convergence", "traffic", "density_sensitivity", "selected_per_step",
                       "contraction_gap")

OUTER_FIGURES = ("pseudo_gradient", "outer_contraction", "metric_vs_bytes")


# the outer learning rates dense DiLoCo and SparseLoCo with Nesterov are swept over at H = 15,
# as the SparseLoCo authors swept DiLoCo's there (tplr-y/CCLoco@c01a785e203f0c5b57b3c57092102
# 109e0c5cbce hparams/1B/sweeps/diloco_baseline.yaml: outer lr 0.9, 0.7, 0.5); each row is
# judged against the best of them by the final held-out metric (topkscope.claims.outer)
OUTER_LRS = (0.5, 0.7, 0.9)
# the other numbers of inner steps the SparseLoCo-style training runs at beside the config's
# H = 15, for the tails of the pseudo-gradient over H (claims.atlas, heavy_tail_pseudo_gradient)
OUTER_TAIL_H = (1, 30)


def outer_trainings(per_step_density: float, average_profiles: tuple[str, ...] | None = None,
                    sweep_profiles: tuple[str, ...] | None = None,
                    tail_profiles: tuple[str, ...] = ()) -> tuple[Training, ...]:
    """The trainings of an outer-loop experiment whose config is the SparseLoCo-style training
    with H = 15 (experiments/outer-*.yaml): SparseLoCo-style, the same plus DiLoCo's outer
    Nesterov momentum, dense DiLoCo with and without outer momentum, and TopK-SGD per step at
    `per_step_density` (the SparseLoCo-style run's bytes per step: tests/test_plan.py). The
    per-step run records u at the steps the outer run exchanges (14, 29, ...), so both meet at
    the config's histogram and snapshot steps, at its own density and at the outer run's.
    The two Nesterov trainings run at each outer learning rate of OUTER_LRS in
    `sweep_profiles` (named '<training>-lr<lr>'), at DiLoCo's published 0.7 alone elsewhere
    (their claims then say the reference is untuned). average_profiles: the profiles dense
    DiLoCo without outer momentum runs in (None: every profile of the job; the GPT's standard
    profile leaves it out for its budget). tail_profiles: the profiles that also run the
    SparseLoCo-style training at H = 1 and H = 30 (named 'sparseloco-h1', 'sparseloco-h30';
    OUTER_TAIL_H), recording only the statistics of the pseudo-gradient at the steps the H = 15
    run exchanges (H = 30: at each of its exchanges), so the claim "the pseudo-gradient is
    lighter-tailed than one step's" compares Hill indices over H, paired by seed."""
    untuned = (None if sweep_profiles is None
               else tuple(p for p in PROFILES if p not in sweep_profiles))

    def nesterov(name: str, sparsifier: str | None, settings: str) -> tuple[Training, ...]:
        dense = (("quantize", "null"),) if sparsifier == "dense" else ()
        runs = [] if untuned == () else [
            Training(name, sparsifier, settings=(*dense, ("outer", "{" + settings + "}")),
                     profiles=untuned)]
        runs += [Training(f"{name}-lr{lr:g}", sparsifier,
                          settings=(*dense, ("outer", "{" + settings + f", lr: {lr:g}}}")),
                          profiles=sweep_profiles) for lr in OUTER_LRS if sweep_profiles]
        return tuple(runs)

    return (
        Training("sparseloco", recorded=True),
        *nesterov("sparseloco-nesterov", None, "step: nesterov"),
        *nesterov("diloco", "dense", "step: nesterov, error_decay: 1"),
        Training("diloco-average", "dense", settings=(("quantize", "null"),
                                                      ("outer", "{error_decay: 1}")),
                 profiles=average_profiles),
        *(Training(f"sparseloco-h{h}", recorded=True, profiles=tail_profiles,
                   settings=(("outer", f"{{inner_steps: {h}}}"),
                             ("recorder", "{schedule: {every: 15, start: 14}, "
                                          "hist_schedule: null, snapshot_schedule: null, "
                                          "sparsifiers: []}")))
          for h in OUTER_TAIL_H if tail_profiles),
        Training("topk-per-step", "topk", per_step_density, recorded=True,
                 settings=(("outer", "null"), ("quantize", "null"),
                           ("recorder", "{schedule: {every: 15, start: 14}, densities: "
                                        f"[{per_step_density}, 0.0078125]}}"))),
    )


OUTER_FNN3_DESIGN = TrainingsDesign(seeds=(("quick", 3), ("full", 3)),
                                    trainings=outer_trainings(0.0001155,
                                                              sweep_profiles=("quick", "full"),
                                                              tail_profiles=("quick", "full")))
OUTER_GPT_DESIGN = TrainingsDesign(seeds=(("standard", 3), ("full", 3)),
                                   trainings=outer_trainings(0.0001196, ("full",),
                                                             sweep_profiles=("full",),
                                                             tail_profiles=("full",)))

QUICK_AND_FULL = ("quick", "full")
THREE_SEEDS_IN_STANDARD = (("standard", 3),)   # distribution claims on 3 seeds (docstring)
FNN3_DESIGN = ConvergenceDesign(seeds=(("quick", 5), ("full", 8)),
                                sensitivity_methods=SENSITIVITY_METHODS,
                                sensitivity_densities=SENSITIVITY_DENSITIES)
RESNET20_DESIGN = ConvergenceDesign(seeds=(("quick", 3), ("full", 8)))
LSTM_METHODS = ("gaussiank-2019", "dgc")
# tail-k on the language models: under the paper warm-up alone (the budget, see the docstring)
LSTM_DESIGN = ConvergenceDesign(seeds=(("standard", 4), ("full", 8)), methods=LSTM_METHODS,
                                first_condition_only=("tail-k",))
GPT_METHODS = ("gaussiank-2019",)
GPT_DESIGN = ConvergenceDesign(seeds=(("standard", 3), ("full", 8)), methods=GPT_METHODS,
                               first_condition_only=("tail-k",))

JOBS: tuple[TrainingJob | BenchmarkJob, ...] = (
    TrainingJob("fnn3-mnist", figures=DISTRIBUTION_FIGURES, profiles=QUICK_AND_FULL),
    TrainingJob("resnet20-cifar10", figures=DISTRIBUTION_FIGURES, profiles=("standard", "full"),
                seeds=THREE_SEEDS_IN_STANDARD),
    TrainingJob("vgg16-cifar10", figures=DISTRIBUTION_FIGURES, profiles=PROFILES,
                seeds=THREE_SEEDS_IN_STANDARD),
    TrainingJob("lstm-ptb", figures=DISTRIBUTION_FIGURES, profiles=QUICK_AND_FULL),
    TrainingJob("gpt-ptb", figures=DISTRIBUTION_FIGURES, profiles=QUICK_AND_FULL),
    TrainingJob("convergence-fnn3-mnist", figures=CONVERGENCE_FIGURES, design=FNN3_DESIGN,
                profiles=QUICK_AND_FULL),
    TrainingJob("convergence-resnet20-cifar10", figures=CONVERGENCE_FIGURES,
                design=RESNET20_DESIGN, profiles=("full",)),
    TrainingJob("convergence-lstm-ptb", figures=CONVERGENCE_FIGURES, design=LSTM_DESIGN,
                profiles=("standard", "full")),
    TrainingJob("convergence-gpt-ptb", figures=CONVERGENCE_FIGURES, design=GPT_DESIGN,
                profiles=("standard", "full")),
    TrainingJob("outer-fnn3-mnist", figures=OUTER_FIGURES, design=OUTER_FNN3_DESIGN,
                profiles=QUICK_AND_FULL),
    TrainingJob("outer-gpt-ptb", figures=OUTER_FIGURES, design=OUTER_GPT_DESIGN,
                profiles=("standard", "full")),
    BenchmarkJob("selection-speed", figures=("selection_speed",), profiles=QUICK_AND_FULL),
)

# CPU seconds per run (user + sys, one thread) in the CPU profiles; the selection benchmark
# alone (see the module docstring for how each was measured)
RUN_SECONDS = {
    "fnn3-mnist": 11.1, "vgg16-cifar10": 62.5, "lstm-ptb": 82.2, "resnet20-cifar10": 158,
    "convergence-fnn3-mnist": 9.17, "convergence-lstm-ptb": 274.4, "selection-speed": 36.5,
    "gpt-ptb": 69.1, "convergence-gpt-ptb": 177.1, "outer-fnn3-mnist": 6.0, "outer-gpt-ptb": 86,
}
# after the runs: analyze + draw + claims + tables + executing the notebooks (wall seconds)
FINISH_SECONDS = {"quick": 342, "standard": 270}


def expected_seconds(profile: str = "quick", plan: Sequence[TrainingJob | BenchmarkJob] | None = None,
                     parallel: int = QUICK_PARALLEL) -> float:
    """Wall seconds a CPU profile should take on 2 idle cores: its benchmarks alone, then its
    training runs `parallel` at a time (CPU seconds from RUN_SECONDS / parallel), then
    FINISH_SECONDS[profile]. ValueError for another profile or a job without a measured time."""
    check_profile(profile)
    if profile not in CPU_PROFILES:
        raise ValueError(f"profile {profile!r} has no measured budget; measured: "
                         f"{', '.join(CPU_PROFILES)}")
    bench = training = 0.0
    for job in jobs(plan=plan, profile=profile):
        if job.experiment not in RUN_SECONDS:
            raise ValueError(f"no measured run time for {job.experiment!r} (RUN_SECONDS)")
        if isinstance(job, BenchmarkJob):
            bench += RUN_SECONDS[job.experiment]
        else:
            training += RUN_SECONDS[job.experiment] * len(job.variants(profile))
    return bench + training / parallel + FINISH_SECONDS[profile]


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
