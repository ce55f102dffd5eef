"""A resumed DDP-hook run is rank-safe: each rank sets aside only its own files of the steps it
redoes, into one superseded/ folder the ranks agreed on, so a rank that is quicker than rank 0
keeps the new snapshot and rows it has already written (rank 0 once moved every rank's files at
its own first step, and a quick rank 1 lost its new snapshot or crashed on its own temporary
file)."""

from __future__ import annotations

import json
import os
import signal
import textwrap

import numpy as np
import pandas as pd
import pytest

from tests.test_hooks_distributed import DDP_PREAMBLE, run_two_gloo_ranks
from topkscope.hooks.lifecycle import SUPERSEDED, supersede_from

# two segments in one pair of processes: steps 0..5, a checkpoint after step 3 (in memory),
# then a resume from it with rank 0 starting late: rank 1 records step 3 before rank 0 begins
RESUMED_SCRIPT = DDP_PREAMBLE.format(
    comment="a user's script resumed from its checkpoint at step 3; rank 0 starts late"
) + textwrap.dedent("""
    import time
    from topkscope.hooks.lifecycle import SUPERSEDED

    def segment(ddp, model, mode, saved, late):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with Recorder(sys.argv[1], schedule=1, snapshot_schedule=[3, 4], densities=[0.1],
                      rank=rank, mode=mode) as rec, \\
                TopKHookState(model, density=0.1, dense_steps=0, recorder=rec) as state:
            ddp.register_comm_hook(state, topk_hook)
            if saved is not None:
                state.load_state_dict(saved)
            for step in range(state.step, 6):
                if late and rank == 0 and step == state.step:
                    time.sleep(1.0)  # rank 1 records step 3 (u, snapshot) meanwhile
                g = torch.Generator().manual_seed(100 * rank + step)
                x, y = torch.randn(16, 12, generator=g), torch.randint(0, 3, (16,), generator=g)
                opt.zero_grad()
                torch.nn.functional.cross_entropy(ddp(x), y).backward()
                opt.step()
                if step + 1 == 3:
                    saved = state.state_dict()
        return saved

    saved = segment(ddp, model, None, None, late=False)
    segment(DDP(model), model, "append", saved, late=True)
    dist.destroy_process_group()
""")


@pytest.mark.train
def test_a_quick_rank_keeps_what_it_wrote_when_rank_0_begins_late(tmp_path):
    run = tmp_path / "exp" / "run1"
    run_two_gloo_ranks(RESUMED_SCRIPT, run)
    snaps = sorted(p.name for p in (run / "snapshots").iterdir())
    assert snaps == ["step3-rank0.npy", "step3-rank1.npy", "step4-rank0.npy", "step4-rank1.npy"]
    stats = pd.read_parquet(run / "stats")
    keys = ["step", "rank", "layer", "kind", "density"]
    assert not stats.duplicated(keys).any()
    assert sorted(set(zip(stats["step"], stats["rank"]))) == [(s, r) for s in range(6)
                                                              for r in (0, 1)]
    (aside,) = (run / SUPERSEDED).iterdir()  # one folder for both ranks' files
    assert sorted(p.name for p in (aside / "snapshots").iterdir()) == snaps
    old = pd.read_parquet(aside / "stats")
    assert sorted(set(zip(old["step"], old["rank"]))) == [(s, r) for s in (3, 4, 5)
                                                          for r in (0, 1)]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    last = manifest["segments"][-1]
    assert last["from_step"] == 3 and last["superseded"] == f"{SUPERSEDED}/{aside.name}"
    assert pd.read_parquet(run / "train.parquet")["step"].tolist() == list(range(6))


def _snapshot(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:  # np.save(path) would add .npy to a temporary file's name
        np.save(fh, np.zeros(3, dtype=np.float32))


def test_a_rank_sets_aside_only_its_own_files_and_rank_0_the_tables(tmp_path):
    """supersede_from(rank=r): rank r's parts, snapshots and half-written files; rank 0 also
    the step tables and half-written files of no rank; never another rank's, finished or
    being written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    run = tmp_path / "run"
    for name in ("train.parquet", "stats/part-r00000-000000.parquet",
                 "stats/part-r00001-000000.parquet"):
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"step": np.array([4, 5, 6], dtype=np.int64)}), run / name)
    for name in ("step5-rank0.npy", "step5-rank1.npy", ".step5-rank1.npy.ab12cd34.tmp",
                 ".step6-rank0.npy.zz99yy88.tmp"):
        _snapshot(run / "snapshots" / name)
    (run / ".train.parquet.qq11ww22.tmp").write_bytes(b"half")

    aside = supersede_from(run, 5, rank=1, dest="agreed")
    assert aside == run / SUPERSEDED / "agreed"
    assert sorted(p.name for p in (aside / "snapshots").iterdir()) == [
        ".step5-rank1.npy.ab12cd34.tmp", "step5-rank1.npy"]
    assert pq.read_table(aside / "stats" / "part-r00001-000000.parquet")["step"].to_pylist() \
        == [5, 6]
    assert not (aside / "train.parquet").exists()  # rank 0's
    assert (run / "snapshots" / "step5-rank0.npy").exists()
    assert (run / ".train.parquet.qq11ww22.tmp").exists()

    assert supersede_from(run, 5, rank=0, dest="agreed") == aside
    assert pq.read_table(run / "train.parquet")["step"].to_pylist() == [4]
    assert sorted(p.name for p in (aside / "snapshots").iterdir()) == [
        ".step5-rank1.npy.ab12cd34.tmp", ".step6-rank0.npy.zz99yy88.tmp", "step5-rank0.npy",
        "step5-rank1.npy"]
    assert (aside / ".train.parquet.qq11ww22.tmp").exists()
    assert sorted(p.name for p in (run / "snapshots").iterdir()) == []


# ------------------------------------------------- the user's script, resumed many times
# Checkpoints every 20 steps and snapshots at 20 and 40: each resume's first step is a snapshot
# step, the case where rank 0 used to set aside the quicker rank's new snapshot or its
# half-written temporary file. One run is stopped (kill -9 of rank 1 after step 45), RESUMES
# copies of it are resumed, and torchrun --max-restarts 1 restarts RESTARTS more by itself.
STRESS = ("--steps", "60", "--checkpoint-every", "20", "--snapshots", "20", "40")
RESUMES, RESTARTS = 6, 2
SNAPSHOTS = sorted(f"step{s}-rank{r}.npy" for s in (20, 40) for r in (0, 1))


def assert_every_step_once(run, reference) -> None:
    """Every step's train row, stats row and snapshot of every rank exactly once, as the
    uninterrupted run has them; superseded/ holds only steps at or past the checkpoint."""
    from tests.test_hook_runs import manifest_of

    train = pd.read_parquet(run / "train.parquet")
    assert train["step"].tolist() == list(range(60))
    assert train["loss"].tolist() == pd.read_parquet(reference / "train.parquet")["loss"].tolist()
    keys = ["step", "rank", "layer", "kind", "density"]
    stats, ref = pd.read_parquet(run / "stats"), pd.read_parquet(reference / "stats")
    assert not stats.duplicated(keys).any()
    assert sorted(map(tuple, stats[keys].values)) == sorted(map(tuple, ref[keys].values))
    assert sorted(p.name for p in (run / "snapshots").iterdir()) == SNAPSHOTS
    for aside in (run / SUPERSEDED).glob("*"):
        for part in [aside / "train.parquet", *aside.glob("stats/*.parquet")]:
            if part.exists():
                assert pd.read_parquet(part)["step"].min() >= 40, part
        for snap in aside.glob("snapshots/*"):
            assert snap.name.startswith("step40-") or snap.name.startswith(".step"), snap
    manifest = manifest_of(run)
    assert (manifest["status"], manifest["steps_done"]) == ("complete", 60)
    assert manifest["segments"][0]["error"] == "worker rank 1 was killed by SIGKILL"


@pytest.mark.train
@pytest.mark.slow
def test_resumes_whose_checkpoint_steps_are_snapshot_steps_keep_every_step_once(
        tmp_path, data_root):
    import shutil
    import time

    from tests.test_hook_runs import kill_rank, run_script, stop_at

    t0 = time.monotonic()
    reference = tmp_path / "ref" / "exp" / "r0"
    run_script(reference, data_root, *STRESS)
    stopped = tmp_path / "stopped" / "exp" / "r1"
    assert stop_at(stopped, data_root, 45, kill_rank(1), *STRESS).returncode != 0
    for i in range(RESUMES):  # the same command again, on copies of one stopped run
        copy = tmp_path / f"resume{i}" / "exp" / "r1"
        shutil.copytree(stopped, copy)
        run_script(copy, data_root, *STRESS)
        assert_every_step_once(copy, reference)
    for i in range(RESTARTS):  # torchrun restarts the killed group by itself
        out = tmp_path / f"restart{i}" / "exp" / "r1"
        done = stop_at(out, data_root, 45, kill_rank(1), *STRESS, max_restarts=1)
        assert done.returncode == 0, done.stderr[-3000:]
        assert_every_step_once(out, reference)
    print(f"{RESUMES} resumes and {RESTARTS} torchrun restarts with snapshots at checkpoint "
          f"steps: {time.monotonic() - t0:.0f} s wall")


@pytest.mark.train
@pytest.mark.slow
def test_the_users_script_with_a_head_unused_on_odd_steps_keeps_sent_plus_residual_equal_u(
        tmp_path, data_root):
    """The fixture's --unused-head variant (find_unused_parameters=True): on every step and
    for every parameter, what DDP applied is what the ranks sent (P * grad = sum over ranks of
    u - e), the unused head included, also across a Ctrl-C and the resume."""
    from tests.test_hook_runs import run_script, stop_at

    out, check = tmp_path / "exp" / "r1", tmp_path / "feedback.json"
    args = ("--steps", "30", "--checkpoint-every", "10", "--unused-head",
            "--check-feedback", str(check))
    stopped = stop_at(out, data_root, 15, lambda p: os.killpg(p.pid, signal.SIGINT), *args)
    assert stopped.returncode != 0
    run_script(out, data_root, *args)
    worst = {int(k): v for k, v in json.loads(check.read_text()).items()}
    assert sorted(worst) == list(range(10, 30))  # the resumed segment's steps
    assert {name for v in worst.values() for name in v} >= {"aux.weight", "aux.bias"}
    assert max(g for v in worst.values() for g in v.values()) == 0.0
    train = pd.read_parquet(out / "train.parquet")
    assert train["step"].tolist() == list(range(30))
    d_aux = 10 * 16 * 25 + 10
    d = int(json.loads((out / "manifest.json").read_text())["num_parameters"])
    odd = train[(train["step"] % 2 == 1) & (train["density"] < 1)]
    assert (odd["k"] == round(0.01 * (d - d_aux))).all()  # k from the tensors that are sent
