"""The recorder inside the real training loop (topkscope.train): FNN-3 on MNIST."""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from topkscope.analysis import contraction
from topkscope.analysis.runs import load
from topkscope.hooks import GLOBAL
from topkscope.sparsify import k_from_density

REPO = Path(__file__).resolve().parents[1]
SMALL = dict(experiment="fnn3-mnist", model="fnn3", dataset="mnist", workers=2, batch_size=32,
             train_subset=512, eval_subset=200, steps=6, lr=0.01, momentum=0.9, density=0.001,
             seed=0)
RECORDER = dict(schedule=1, hist_schedule=[2], snapshot_schedule=[3], densities=[0.001, 0.01],
                sparsifiers=["gaussiank"], flush_every=2)


def train(tmp_path, data_root, run_id="r", **changes):
    from topkscope.train import RunOptions, run, validate

    cfg = validate({**SMALL, "recorder": dict(RECORDER), **changes})
    return run(cfg, RunOptions(out_root=tmp_path, run_id=run_id, progress=False,
                               data_root=str(data_root)))


@pytest.mark.train
def test_fnn3_mnist_run_produces_the_result_folder(tmp_path, data_root):
    run_dir = train(tmp_path, data_root)
    assert run_dir == tmp_path / "fnn3-mnist" / "r"
    run = load(run_dir)
    m = run.manifest
    assert m["status"] == "complete" and m["recorder"]["densities"] == [0.001, 0.01]
    assert m["recorder"]["sparsifiers"] == ["gaussiank"]
    assert len(run.train) == 6 and not run.eval.empty
    from topkscope import models

    layers = [GLOBAL] + [n for n, _ in models.create("fnn3").named_parameters()]
    assert len(layers) == 7
    s = run.stats
    assert sorted(s.step.unique()) == list(range(6)) and sorted(s["rank"].unique()) == [0, 1]
    assert list(s[(s.step == 0) & (s["rank"] == 0) & (s.kind == "u")].layer.unique()) == layers
    assert set(s.kind) == {"g", "u", "e"}
    assert len(s) == 6 * 2 * 3 * len(layers) * 2
    glob = s[s.layer == GLOBAL]
    assert (glob.numel == 199_210).all()
    assert (glob.k == glob.density.map(lambda r: k_from_density(r, 199_210))).all()
    u = s[(s.kind == "u")]
    assert u.gaussiank_count.notna().all() and s[s.kind != "u"].gaussiank_count.isna().all()
    # e is u minus the sent Top-k: at the training density its norm^2 is u's times topk_ratio
    for _, grp in glob[glob.density == 0.001].groupby(["step", "rank"]):
        by = grp.set_index("kind")
        assert by.loc["e", "norm"] ** 2 == pytest.approx(
            by.loc["u", "norm"] ** 2 * by.loc["u", "topk_ratio"], rel=1e-6)
    # a snapshot gives back the recorded contraction
    for rank in (0, 1):
        snap = run.snapshot(3, rank)
        assert snap.shape == (199_210,)
        row = glob[(glob.step == 3) & (glob["rank"] == rank) & (glob.kind == "u")]
        for _, r in row.iterrows():
            assert r.topk_ratio == pytest.approx(
                contraction.topk_ratio(snap, int(r.k)), rel=1e-6)
    assert set(run.hist.step) == {2} and (run.hist.groupby(
        ["rank", "layer", "kind"])["count"].sum().xs(GLOBAL, level="layer") == 199_210).all()


@pytest.mark.train
def test_a_run_that_raises_leaves_the_manifest_failed(tmp_path, data_root):
    def exploding(step: int) -> bool:  # a user schedule that fails mid-run
        if step == 3:
            raise RuntimeError("schedule exploded at step 3")
        return True

    with pytest.raises(RuntimeError, match="exploded"):
        train(tmp_path, data_root, recorder=dict(schedule=exploding, densities=[0.01],
                                                 flush_every=1))
    run = load(tmp_path / "fnn3-mnist" / "r")
    assert run.status == "failed"
    assert "schedule exploded at step 3" in run.manifest["error"]
    assert 0 in set(run.stats.step)  # what was flushed before the failure is kept


KILLED = textwrap.dedent("""
    import sys
    from pathlib import Path
    import torch
    from topkscope.train import RunOptions, run, validate

    torch.set_num_threads(1)
    cfg = validate(dict(experiment="fnn3-mnist", model="fnn3", dataset="mnist", workers=2,
                        batch_size=16, train_subset=256, eval_subset=100, steps=100000,
                        lr=0.01, density=0.01, seed=0, checkpoint_every_steps=100000,
                        eval_every_steps=100000,
                        recorder=dict(schedule=1, densities=[0.01], flush_every=2)))
    run(cfg, RunOptions(out_root=Path(sys.argv[1]), run_id="killed", progress=False,
                        data_root=sys.argv[2]))
""")


@pytest.mark.train
def test_sigkill_during_training_leaves_a_loadable_folder(tmp_path, data_root):
    child = subprocess.Popen([sys.executable, "-c", KILLED, str(tmp_path), str(data_root)],
                             cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "OMP_NUM_THREADS": "1"})
    stats_dir = tmp_path / "fnn3-mnist" / "killed" / "stats"
    deadline = time.monotonic() + 180
    try:
        while len(list(stats_dir.glob("part-*.parquet"))) < 3:
            assert child.poll() is None, child.stderr.read()
            assert time.monotonic() < deadline, "no parts appeared in time"
            time.sleep(0.05)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    run_dir = stats_dir.parent
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "running"
    for part in stats_dir.glob("part-*.parquet"):
        assert pq.read_table(part).num_rows > 0
    run = load(run_dir)
    steps = sorted(run.stats.step.unique())
    assert steps == list(range(len(steps))) and len(steps) >= 6
    assert (run.stats.groupby("step")["rank"].nunique() == 2).all()


WORKER = textwrap.dedent("""
    import sys
    from pathlib import Path
    import torch
    from topkscope.train import RunOptions, run, validate

    torch.set_num_threads(1)
    cfg = validate(dict(experiment="fnn3-mnist", model="fnn3", dataset="mnist", workers=2,
                        launcher="torchrun", batch_size=16, train_subset=256, eval_subset=100,
                        steps=4, lr=0.01, density=0.01, seed=0,
                        recorder=dict(schedule=1, snapshot_schedule=[2], densities=[0.01],
                                      flush_every=2)))
    run(cfg, RunOptions(out_root=Path(sys.argv[1]), run_id="ddp", progress=False,
                        data_root=sys.argv[2]))
""")


@pytest.mark.slow
def test_training_under_two_gloo_processes_records_both_ranks(tmp_path, data_root):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "2",
           "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path), str(data_root)],
                              cwd=REPO, env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(err for _, err in outs)
    run = load(tmp_path / "fnn3-mnist" / "ddp")
    assert run.status == "complete"
    s = run.stats
    steps = {r: sorted(s[s["rank"] == r].step.unique()) for r in (0, 1)}
    assert steps[0] == steps[1] == [0, 1, 2, 3]
    parts = {p.name[:12] for p in (run.path / "stats").iterdir()}
    assert parts == {"part-r00000-", "part-r00001-"}
    assert sorted(run.snapshots["rank"]) == [0, 1]
    u = [run.snapshot(2, r) for r in (0, 1)]
    assert not np.array_equal(u[0], u[1]) and all(np.isfinite(x).all() for x in u)
