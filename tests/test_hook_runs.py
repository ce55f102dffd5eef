"""A user's own DDP script with the TopK hook gives complete, whole runs: the last noted row
lands, compute time is recorded, a stop and a rerun (or a torchrun restart) continue the run
from its checkpoint with every step once and the parameters of an uninterrupted run, a hook
that never ran fails the run, and bad hook arguments leave no folder behind.

The torchrun tests run tests/fixtures/user_cnn_ddp.py (a small CNN on MNIST, 2 gloo ranks)."""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from torch import nn

from tests._process_group import one_process_group
from topkscope.io import Table

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tests" / "fixtures" / "user_cnn_ddp.py"
STEPS, CHECKPOINT_EVERY, STOP_AT = 200, 50, 66  # 66: not a checkpoint boundary
SNAPSHOT_STEPS = ("50", "100", "150")  # snapshots at checkpoint steps: a resume's first step


# ---------------------------------------------------------------- in this process
def manifest_of(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


def test_a_table_rewrites_a_row_amended_after_its_flush(tmp_path):
    table = Table(tmp_path / "t.parquet", {"step": "int64", "loss": "float64"})
    table.append({"step": 0, "loss": math.nan})
    table.flush()
    table.amend_last(loss=0.5)   # the row count did not change
    table.flush()
    assert pd.read_parquet(tmp_path / "t.parquet")["loss"].tolist() == [0.5]
    with pytest.raises(ValueError, match="no column"):
        table.amend_last(lr=0.1)


@pytest.mark.train
def test_every_noted_row_lands_and_carries_its_times_when_the_steps_fill_the_flushes(tmp_path):
    """200 steps, a multiple of the 50-row flush: the last row is written with its note."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    from topkscope.comm import TopKHookState, topk_hook
    from topkscope.hooks import Recorder

    run = tmp_path / "exp" / "run1"
    noted = []
    with one_process_group():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2))
        ddp = DDP(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with Recorder(run, schedule={"every": 25}, densities=[0.1]) as rec, \
                TopKHookState(model, density=0.2, recorder=rec) as state:
            ddp.register_comm_hook(state, topk_hook)
            for step in range(200):
                x, y = torch.randn(4, 6), torch.randint(0, 2, (4,))
                loss = nn.functional.cross_entropy(ddp(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                state.note(loss=loss.item(), lr=0.1 * (step + 1), epoch=step // 40)
                noted.append(loss.item())
    train = pd.read_parquet(run / "train.parquet")
    assert train["step"].tolist() == list(range(200))
    assert train["loss"].tolist() == noted                       # the last row included
    assert train["lr"].iloc[-1] == pytest.approx(20.0) and train["epoch"].iloc[-1] == 4
    assert (train["time_compute"] > 0).all()                     # forward + backward, measured
    sparse = train[train["density"] < 1]
    assert (sparse["time_select"] > 0).all() and (sparse["time_communicate"] >= 0).all()
    manifest = manifest_of(run)
    assert (manifest["status"], manifest["steps_done"]) == ("complete", 200)


def test_a_hook_that_never_ran_fails_its_run(tmp_path):
    from topkscope.comm import TopKHookState
    from topkscope.hooks import Recorder

    run = tmp_path / "exp" / "run1"
    with one_process_group():
        model = nn.Linear(4, 2)
        with pytest.warns(UserWarning, match="never ran"):
            with Recorder(run, schedule=1) as rec, \
                    TopKHookState(model, density=0.5, recorder=rec):
                pass  # e.g. a framework that registered no hook: no step goes through it
    manifest = manifest_of(run)
    assert manifest["status"] == "failed"
    assert "the communication hook never ran" in manifest["error"]
    assert manifest["steps_done"] == 0


@pytest.mark.train
def test_the_hook_sends_chunk_wise_quantized_values_and_keeps_the_error(tmp_path):
    """chunk-topk with 2-bit values through DDP (world size 1): the gradient the optimizer
    gets is Q(u) on each chunk's top entries, and residual + gradient = u to rounding."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    from topkscope.comm import TopKHookState, topk_hook
    from topkscope.hooks import Recorder

    run = tmp_path / "exp" / "q"
    with one_process_group():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(40, 30), nn.ReLU(), nn.Linear(30, 5))
        twin = nn.Sequential(nn.Linear(40, 30), nn.ReLU(), nn.Linear(30, 5))
        twin.load_state_dict(model.state_dict())
        ddp = DDP(model)
        with Recorder(run, schedule=1, densities=[0.1]) as rec, \
                TopKHookState(model, sparsifier="chunk-topk", sparsifier_args={"chunk_size": 64},
                              density=0.1, dense_steps=0, recorder=rec,
                              quantize={"bits": 2}) as state:
            ddp.register_comm_hook(state, topk_hook)
            x, y = torch.randn(8, 40), torch.randint(0, 5, (8,))
            nn.functional.cross_entropy(ddp(x), y).backward()
            nn.functional.cross_entropy(twin(x), y).backward()
            sent = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
            u = torch.cat([p.grad.reshape(-1) for p in twin.parameters()])
            e = state.compressor.state_dict()["__global__"]
            d = u.numel()
            assert int((sent != 0).sum()) == round(0.1 * d)
            assert torch.allclose(sent + e, u, rtol=0, atol=1e-6)
            for (_, off, n) in state.layout.entries():   # at most 4 levels per tensor
                assert torch.unique(sent[off : off + n][sent[off : off + n] != 0]).numel() <= 4
            assert state.last.payload.values == math.ceil(round(0.1 * d) * 2 / 8)
    assert manifest_of(run)["quantize"] == {"bits": 2, "range": 6.0}


@pytest.mark.parametrize("bad, match", [({"sparsifier": "topkk"}, "topkk"),
                                        ({"density": 2.0}, "density"),
                                        ({"selection": "everything"}, "selection"),
                                        ({"quantize": {"bits": 0}}, "quantize.bits")])
def test_a_hook_given_bad_arguments_leaves_no_folder_and_the_corrected_rerun_starts(
        tmp_path, bad, match):
    from topkscope.comm import TopKHookState
    from topkscope.hooks import Recorder

    run = tmp_path / "exp" / "run1"
    with one_process_group():
        model = nn.Linear(4, 2)
        with pytest.raises(ValueError, match=match):
            with Recorder(run, schedule=1) as rec, \
                    TopKHookState(model, **{"density": 0.5, **bad}, recorder=rec):
                pass
        assert not run.exists()
        with Recorder(run, schedule=1) as rec:   # not refused: "already holds results"
            assert TopKHookState(model, density=0.5, recorder=rec).step == 0
            rec.record(0, 0, u=torch.randn(10), layout=[("w", 0, 10)])
    assert manifest_of(run)["status"] == "complete"


def _rerun_starts_cleanly(run: Path) -> None:
    """The corrected rerun into the same folder (mode None) is not refused: the failed set-up's
    files went to replaced/, the new run is complete."""
    from topkscope.comm import TopKHookState
    from topkscope.hooks import Recorder

    with Recorder(run, schedule=1) as rec:
        assert TopKHookState(nn.Linear(4, 2), density=0.5, recorder=rec).step == 0
        rec.record(0, 0, u=torch.randn(10), layout=[("w", 0, 10)])
    manifest = manifest_of(run)
    assert manifest["status"] == "complete" and manifest["replaced"].startswith("replaced/")
    assert manifest_of(run / manifest["replaced"])["status"] == "failed"


def test_a_set_up_that_fails_after_the_recorder_opened_leaves_nothing_to_refuse(tmp_path):
    """`with Recorder(...) as rec, register_topk(model_not_wrapped, ...)`: the error of a
    launch that did not wrap the model (one process) ends the recorder's run failed; the
    corrected rerun into the same folder replaces it (it was refused: 'already holds
    results')."""
    from topkscope.hooks import Recorder
    from topkscope.integrations import register_topk

    run = tmp_path / "exp" / "run1"
    with one_process_group():
        with pytest.raises(ValueError, match="DistributedDataParallel wrapper"):
            with Recorder(run, schedule=1) as rec, \
                    register_topk(nn.Linear(4, 2), density=0.5, recorder=rec):
                pass
        assert manifest_of(run)["status"] == "failed"
        _rerun_starts_cleanly(run)


def test_a_hook_that_never_ran_does_not_block_the_rerun(tmp_path):
    from topkscope.comm import TopKHookState
    from topkscope.hooks import Recorder

    run = tmp_path / "exp" / "run1"
    with one_process_group():
        with pytest.warns(UserWarning, match="never ran"):
            with Recorder(run, schedule=1) as rec, \
                    TopKHookState(nn.Linear(4, 2), density=0.5, recorder=rec):
                pass
        _rerun_starts_cleanly(run)


def test_a_lightning_callback_whose_set_up_fails_does_not_block_the_rerun(tmp_path):
    """TopKCallback.on_fit_start on a model Lightning did not wrap (one process)."""
    from types import SimpleNamespace

    pytest.importorskip("lightning")
    from topkscope.integrations.lightning import TopKCallback

    run = tmp_path / "exp" / "run1"
    trainer = SimpleNamespace(global_rank=0, optimizers=[],
                              strategy=SimpleNamespace(model=nn.Linear(4, 2)))
    with one_process_group():
        callback = TopKCallback(run, recorder={"schedule": 1}, density=0.5)
        with pytest.raises(ValueError, match="DistributedDataParallel wrapper"):
            callback.on_fit_start(trainer, None)
        _rerun_starts_cleanly(run)


def test_a_run_with_rows_is_still_refused(tmp_path):
    from topkscope.hooks import Recorder

    run = tmp_path / "exp" / "run1"
    with pytest.raises(RuntimeError):
        with Recorder(run, schedule=1) as rec:
            rec.record(0, 0, u=torch.randn(10), layout=[("w", 0, 10)])
            raise RuntimeError("a failure after a recorded step")
    with pytest.raises(ValueError, match="already holds results"):
        Recorder(run, schedule=1)


# ---------------------------------------------------------------- the user's torchrun script
def code_lines(text: str) -> list[str]:
    """The code of each line: stripped, without its trailing comment; no blank or comment
    lines."""
    out = []
    for line in text.splitlines():
        code = re.sub(r"\s+#.*$", "", line).strip()
        if code and not code.startswith("#"):
            out.append(code)
    return out


def test_the_docs_resume_recipe_is_what_the_fixture_runs():
    """Every line of docs/training.md's resume recipe is a line of the script these tests run,
    so the recipe the page gives is the one that is tested."""
    page = (REPO / "docs" / "training.md").read_text()
    start = page.index("\n### Resuming your own script, and torchrun restarts\n")
    recipe = re.search(r"```python\n(.*?)```", page[start:], re.S).group(1)
    script = set(code_lines(SCRIPT.read_text()))
    missing = [line for line in code_lines(recipe) if line not in script]
    assert missing == []
    assert len(code_lines(recipe)) <= 20  # topkscope.checkpoint: a few lines, not about 30
    assert "supersede_from(" not in page and "supersede_from(" not in SCRIPT.read_text()


def torchrun(out: Path, *extra: str, max_restarts: int = 0) -> list[str]:
    """The fixture under torchrun, 2 ranks; extra: its options (default --steps STEPS
    --checkpoint-every CHECKPOINT_EVERY)."""
    if "--steps" not in extra:
        extra = ("--steps", str(STEPS), "--checkpoint-every", str(CHECKPOINT_EVERY),
                 "--snapshots", *SNAPSHOT_STEPS, *extra)
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
            "2", "--max-restarts", str(max_restarts), str(SCRIPT), str(out), *extra]


def env(data_root: Path) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "TOPKSCOPE_DATA": str(data_root),
            "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def run_script(out: Path, data_root: Path, *extra: str, **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(torchrun(out, *extra, **kw), env=env(data_root), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def worker_pid(parent: int, rank: int) -> int:
    """The pid of torchrun's worker of this rank (a child of the torchrun process)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            environ = (entry / "environ").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and f"RANK={rank}".encode() in environ:
            return int(entry.name)
    raise AssertionError(f"no rank-{rank} worker under pid {parent}")


def stop_at(out: Path, data_root: Path, step: int, stop, *extra: str, max_restarts: int = 0
            ) -> subprocess.CompletedProcess:
    """Start the script; once rank 0 has done `step`, call stop(torchrun's Popen); wait."""
    proc = subprocess.Popen(torchrun(out, *extra, max_restarts=max_restarts),
                            env=env(data_root),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.strip() == f"step {step}":
                stop(proc)
                break
        out_rest, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(proc.args, proc.returncode, "".join(lines) + out_rest,
                                       err)


def final_parameters(run: Path) -> dict[str, torch.Tensor]:
    folder = run / "checkpoints" / f"step-{STEPS}"
    return {rank: torch.load(folder / f"rank-{rank}.pt", weights_only=True)
            for rank in (0, 1)}


def assert_same_parameters(run: Path, reference: Path) -> None:
    mine, ref = final_parameters(run), final_parameters(reference)
    for rank in (0, 1):
        for name, value in ref[rank]["model"].items():
            assert torch.equal(mine[rank]["model"][name], value), (rank, name)
        assert torch.equal(mine[rank]["topk"]["residual"]["__global__"],
                           ref[rank]["topk"]["residual"]["__global__"])


def assert_whole(run: Path, reference: Path, resumed_from: int) -> dict:
    """Every step once in train.parquet, stats/ and snapshots/, equal to the uninterrupted
    run's; only rows past the checkpoint in superseded/; the manifest's totals and last
    segment."""
    snapshots = sorted(p.name for p in (run / "snapshots").iterdir())
    assert snapshots == sorted(p.name for p in (reference / "snapshots").iterdir())
    assert snapshots == sorted(f"step{s}-rank{r}.npy" for s in SNAPSHOT_STEPS for r in (0, 1))
    train, ref = pd.read_parquet(run / "train.parquet"), pd.read_parquet(
        reference / "train.parquet")
    assert train["step"].tolist() == list(range(STEPS))
    assert train["loss"].notna().all() and train["time_compute"].notna().all()
    assert train["loss"].tolist() == ref["loss"].tolist()
    stats, ref_stats = (pd.read_parquet(r / "stats") for r in (run, reference))
    keys = ["step", "rank", "layer", "kind", "density"]
    assert not stats.duplicated(keys).any()  # every row of every rank once, none missing
    assert sorted(map(tuple, stats[keys].values)) == sorted(map(tuple, ref_stats[keys].values))
    for aside in (run / "superseded").glob("*"):  # none when a killed rank wrote none
        for part in [aside / "train.parquet", *aside.glob("stats/*.parquet")]:
            if part.exists():
                assert pd.read_parquet(part)["step"].min() >= resumed_from, part
    manifest = manifest_of(run)
    assert (manifest["status"], manifest["steps_done"]) == ("complete", STEPS)
    assert manifest.get("closed_by") is None
    assert manifest["segments"][-1]["from_step"] == resumed_from
    assert manifest["segments"][-1]["status"] == "complete"
    assert_same_parameters(run, reference)
    return manifest


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, data_root) -> Path:
    out = tmp_path_factory.mktemp("ref") / "exp" / "r0"
    run_script(out, data_root)
    return out


@pytest.mark.train
@pytest.mark.slow
def test_the_users_script_runs_200_steps_with_every_row_noted(uninterrupted):
    train = pd.read_parquet(uninterrupted / "train.parquet")
    assert train["step"].tolist() == list(range(STEPS))
    assert train[["loss", "lr", "time_compute"]].notna().all().all()
    manifest = manifest_of(uninterrupted)
    assert (manifest["status"], manifest["steps_done"], manifest["world_size"]) == \
        ("complete", STEPS, 2)
    assert manifest["segments"][0]["from_step"] == 0


@pytest.mark.train
@pytest.mark.slow
def test_ctrl_c_and_the_same_command_again_continue_the_run_whole(tmp_path, data_root,
                                                                     uninterrupted):
    out = tmp_path / "exp" / "r1"
    stopped = stop_at(out, data_root, STOP_AT, lambda p: os.killpg(p.pid, signal.SIGINT))
    assert stopped.returncode != 0
    manifest = manifest_of(out)
    assert (manifest["status"], manifest["signal"]) == ("interrupted", "SIGINT")
    # the manifest says how to resume; the workers say it in one line, no traceback per rank
    # (what torchrun itself prints on a Ctrl-C is torchrun's)
    assert manifest["checkpoint_step"] == 50
    assert manifest["resume_command"] == shlex.join(torchrun(out))
    ours = [line for line in stopped.stderr.splitlines() if line.startswith("topkscope:")]
    assert ours == [f"topkscope: run interrupted by SIGINT at step {manifest['steps_done']} "
                    f"({out}); resume from the checkpoint at step 50 with: "
                    f"{manifest['resume_command']}"], stopped.stderr[-3000:]
    assert not [line for line in stopped.stderr.splitlines() if line.startswith("[rank")]
    run_script(out, data_root)  # the documented recipe: the same command resumes
    manifest = assert_whole(out, uninterrupted, resumed_from=50)
    assert [s["status"] for s in manifest["segments"]] == ["interrupted", "complete"]


def kill_rank(rank: int):
    return lambda p: os.kill(worker_pid(p.pid, rank), signal.SIGKILL)


def assert_failed_naming(out: Path, stopped: subprocess.CompletedProcess, rank: int) -> None:
    """The killed rank is named: manifest failed with its rank and signal, one line of ours
    on the terminal, whichever process torchrun stopped first."""
    manifest = manifest_of(out)
    assert manifest["status"] == "failed", manifest
    assert manifest["error"] == f"worker rank {rank} was killed by SIGKILL"
    (failure,) = manifest["worker_failures"]
    assert (failure["rank"], failure["signal"], failure["exitcode"]) == (rank, "SIGKILL", -9)
    ours = [line for line in stopped.stderr.splitlines() if line.startswith("topkscope:")]
    assert len(ours) == 1 and f"worker rank {rank} was killed by SIGKILL" in ours[0], \
        stopped.stderr[-3000:]
    # the step that failed: the one after STOP_AT, which rank 0 finished before the kill (when
    # rank 1 died, also the step after the last row of train.parquet: steps_done)
    assert f"failed at step {STOP_AT + 1}; run the same command again to resume it from its " \
           "checkpoint at step 50" in ours[0]
    assert rank == 0 or manifest["steps_done"] == STOP_AT + 1
    assert manifest["checkpoint_step"] == 50 and manifest["resume_command"]


@pytest.mark.train
@pytest.mark.slow
@pytest.mark.parametrize("victim", [1, 0])
def test_a_rank_killed_is_named_and_the_same_command_again_continues_the_run_whole(
        tmp_path, data_root, uninterrupted, victim):
    out = tmp_path / "exp" / "r1"
    stopped = stop_at(out, data_root, STOP_AT, kill_rank(victim))
    assert stopped.returncode != 0
    assert_failed_naming(out, stopped, victim)
    run_script(out, data_root)
    manifest = assert_whole(out, uninterrupted, resumed_from=50)
    assert manifest["segments"][0]["status"] == "failed"
    assert manifest["segments"][0]["error"] == f"worker rank {victim} was killed by SIGKILL"


@pytest.mark.train
@pytest.mark.slow
def test_torchrun_restarts_a_killed_rank_and_the_run_ends_as_an_uninterrupted_one(
        tmp_path, data_root, uninterrupted):
    out = tmp_path / "exp" / "r1"
    t0 = time.monotonic()
    done = stop_at(out, data_root, STOP_AT, kill_rank(1), max_restarts=1)
    wall = time.monotonic() - t0
    assert done.returncode == 0, done.stderr[-3000:]
    # torchrun continues the run: the line says so, not to run the command again
    ours = [line for line in done.stderr.splitlines() if line.startswith("topkscope:")]
    assert len(ours) == 1 and ours[0].endswith(
        "torchrun starts the workers again (1 of --max-restarts left) and they continue it "
        "from its checkpoint at step 50"), done.stderr[-3000:]
    manifest = assert_whole(out, uninterrupted, resumed_from=50)
    assert [s["status"] for s in manifest["segments"]] == ["failed", "complete"]
    assert manifest["segments"][0]["error"] == "worker rank 1 was killed by SIGKILL"
    print(f"elastic restart of the user's script: {wall:.1f} s wall")
