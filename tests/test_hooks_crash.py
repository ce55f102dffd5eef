"""A recording process killed with SIGKILL leaves complete parts and a manifest not complete."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pyarrow.parquet as pq
import pytest

from topkscope.analysis.runs import load

CHILD = textwrap.dedent("""
    import sys
    import torch
    from topkscope.hooks import Recorder

    torch.set_num_threads(1)
    rec = Recorder(sys.argv[1], schedule=1, hist_schedule={"every": 2},
                   snapshot_schedule={"every": 3}, densities=[0.01, 0.1], flush_every=2)
    layout = [("a", 0, 15000), ("b", 15000, 5000)]
    step = 0
    while True:  # records until it is killed
        u = torch.randn(20000)
        rec.record(step, 0, u=u, g=u * 0.5, layout=layout)
        rec.record(step, 1, u=u * 2, layout=layout)
        print(step, rec.describe()["flushed_through_step"], flush=True)
        step += 1
""")


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")
def test_sigkill_leaves_readable_parts_and_a_running_manifest(tmp_path):
    run_dir = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(run_dir)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    flushed = None
    deadline = time.monotonic() + 120
    try:
        for line in child.stdout:
            step, through = line.split()
            if through != "None" and int(through) >= 7:
                flushed = int(through)
                break
            assert time.monotonic() < deadline, "the child recorded too slowly"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        err = child.stderr.read()
    assert child.returncode == -signal.SIGKILL, err
    assert flushed is not None, err

    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "running"
    for part in list((run_dir / "stats").glob("part-*")) + list((run_dir / "hist").glob("part-*")):
        assert pq.read_table(part).num_rows > 0  # every visible part is complete
    run = load(run_dir)
    steps = sorted(run.stats.step.unique())
    assert steps[: flushed + 1] == list(range(flushed + 1))
    assert (run.stats.groupby("step")["rank"].nunique() == 2).all()
    assert run.status == "running"
    assert set(run.hist.step) <= set(range(0, steps[-1] + 1, 2))
    for step in run.snapshots.step.unique():
        assert run.snapshot(int(step), 0).shape == (20000,)
        assert np.isfinite(run.snapshot(int(step), 1)).all()
