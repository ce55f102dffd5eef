"""TopK-SGD training: config, schedules, the loop, checkpoints, and running an experiment.

    cfg, profile = load_config("experiments/fnn3-mnist.yaml", profile="quick")
    run(cfg, RunOptions(out_root=Path("results")))        # -> results/<experiment>/<run_id>/
"""

from topkscope.train.config import ExperimentConfig, load_config, resolve, validate
from topkscope.train.run import RunOptions, build_trainer, run
from topkscope.train.trainer import Trainer

__all__ = [
    "ExperimentConfig",
    "RunOptions",
    "Trainer",
    "build_trainer",
    "load_config",
    "resolve",
    "run",
    "validate",
]
