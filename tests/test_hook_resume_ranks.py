"""A resumed DDP-hook run is rank-safe: each rank sets aside only its own files of the steps it
redoes, into one superseded/ folder the ranks agreed on, so a rank that is quicker than rank 0
keeps the new snapshot and rows it has already written (rank 0 once moved every rank's files at
its own first step, and a quick rank 1 lost its new snapshot or crashed on its own temporary
file)."""

from __future__ import annotations

import json
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
                    time.sleep(2.0)  # rank 1 records step 3 (u, snapshot) meanwhile
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
