"""Short runs of experiments/outer-fnn3-mnist.yaml's trainings (the plan's), shared by the
tests of the outer-loop figures, tables and notebook: SparseLoCo-style (recorded, histograms at
both exchanges), dense DiLoCo, per-step Top-k at the same bytes (recorded), 30 steps each,
built once per session (xdist workers share them through a lock)."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from topkscope.reproduce import plan
from topkscope.train.config import read_yaml

REPO = Path(__file__).resolve().parents[1]
EXPERIMENT = "outer-fnn3-mnist"
TRAININGS = ("sparseloco", "diloco", "topk-per-step")
SHORT = ["--steps", "30", "--set", "train_subset=3840", "--set", "eval_every_steps=15",
         "--no-progress"]
HIST = {"hist_schedule": {"steps": [14, 29]}, "snapshot_schedule": None}


def _build(out: Path, data: Path) -> None:
    from topkscope.cli import main

    trainings = {t.name: t for t in plan.outer_trainings(0.000226)}
    for name in TRAININGS:
        t = trainings[name]
        argv = ["run", str(REPO / "experiments" / f"{EXPERIMENT}.yaml"), "--results", str(out),
                "--run-id", name, "--data", str(data), *SHORT]
        argv += ["--sparsifier", t.sparsifier] if t.sparsifier else []
        argv += ["--density", str(t.density)] if t.density else []
        settings = {key: read_yaml(text) for key, text in t.settings}
        settings["recorder"] = {**(settings.get("recorder") or {}), **HIST} if t.recorded \
            else None     # one --set per key: a second one would replace the first
        for key, value in settings.items():
            argv += ["--set", f"{key}={json.dumps(value)}"]
        assert main(argv) == 0, name


def shared_outer_runs(tmp_path_factory, data: Path) -> Path:
    """The results root holding the runs (results/<experiment>/<training>)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    root = base / "topkscope-outer-runs"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not (root / ".built").exists():
                _build(root / "results", data)
                (root / ".built").touch()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return root / "results"
