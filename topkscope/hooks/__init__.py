"""Gradient recorder: statistics of g, u and e per (step, rank, layer), written as parquet parts.

    from topkscope.hooks import Recorder, Every, LogSpaced
    rec = Recorder(run_dir, schedule=1, hist_schedule=Every(100) | LogSpaced(5),
                   densities=[0.001, 0.01], sparsifiers=["gaussiank"])
"""

from topkscope.hooks.recorder import Recorder
from topkscope.hooks.schedules import (
    AllOf,
    AnyOf,
    At,
    Every,
    LogSpaced,
    Never,
    Schedule,
    parse_schedule,
)
from topkscope.schema import GLOBAL

__all__ = [
    "GLOBAL",
    "AllOf",
    "AnyOf",
    "At",
    "Every",
    "LogSpaced",
    "Never",
    "Recorder",
    "Schedule",
    "parse_schedule",
]
