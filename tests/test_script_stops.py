"""How a user's own script ends, said without reading the source: a Ctrl-C is one line (the
signal, the step, the command that resumes it) and a manifest with checkpoint_step and
resume_command, not a traceback per rank; a killed peer is named at the step that failed,
with what continues the run (torchrun under --max-restarts, else the same command again); a
file given as the run folder is one line naming it."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from tests._hooks_loop import tiny_model
from tests._process_group import one_process_group
from topkscope import checkpoint

REPO = Path(__file__).resolve().parents[1]

# a user's script in one process (gloo, world size 1): the DDP hook with a Recorder, the
# checkpoint recipe of docs/training.md, a checkpoint at step 5 and a Ctrl-C (SIGINT to
# itself) during step 7; with "recorder" as its second argument, a Recorder alone
STOPPED = """
import os, signal, sys
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from tests._hooks_loop import layout_of, tiny_model
from topkscope import checkpoint
from topkscope.comm import TopKHookState, topk_hook
from topkscope.hooks import Recorder

out, kind, store = sys.argv[1:4]
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method="file://" + store, rank=0, world_size=1)
model = tiny_model(0)
ddp = DDP(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def loop(rec, state):
    for step in range(10):
        if step == 7:
            os.kill(os.getpid(), signal.SIGINT)
        loss = torch.nn.functional.cross_entropy(ddp(torch.randn(8, 12)),
                                                 torch.randint(0, 3, (8,)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if state is None:
            rec.record(step, 0, u=torch.randn(763), layout=layout_of(model))
        else:
            state.note(loss=loss.item())
        if step + 1 == 5:
            checkpoint.save(out, 5, model=model, optimizer=opt,
                            **({"topk": state} if state is not None else {"recorder": rec}))


with Recorder(out, schedule=1, densities=[0.05], mode=checkpoint.mode(out)) as rec:
    if kind == "hook":
        with TopKHookState(model, density=0.05, recorder=rec) as state:
            ddp.register_comm_hook(state, topk_hook)
            loop(rec, state)
    else:
        loop(rec, None)
"""


@pytest.mark.parametrize("kind", ["hook", "recorder"])
def test_ctrl_c_of_a_script_is_one_line_and_a_manifest_that_says_how_to_resume(kind, tmp_path):
    out = tmp_path / "results" / "my-exp" / "r1"
    argv = [sys.executable, "-c", STOPPED, str(out), kind, str(tmp_path / "store")]
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == -2  # ended as a Ctrl-C ends a program: 130 in a shell
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["status"], manifest["signal"]) == ("interrupted", "SIGINT")
    assert manifest["checkpoint_step"] == 5
    assert manifest["resume_command"] == shlex.join(argv)
    assert manifest.get("steps_done", 7) == 7  # the hook's count: steps 0..6 done
    assert done.stderr == (f"topkscope: run interrupted by SIGINT at step 7 ({out}); "
                           f"resume from the checkpoint at step 5 with: {shlex.join(argv)}\n")


def test_a_hook_whose_exchange_fails_stays_at_the_step_that_failed(tmp_path, monkeypatch):
    """The step a failed run names is the one whose exchange failed (it was one more)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    from topkscope.comm import TopKHookState, ddp_hook, topk_hook

    real = ddp_hook.exchange

    def failing(transport, compressors, flats, density, *, step, **kw):
        if step == 3:
            raise RuntimeError("the peer's socket closed")
        return real(transport, compressors, flats, density, step=step, **kw)

    monkeypatch.setattr(ddp_hook, "exchange", failing)
    with one_process_group():
        model = tiny_model(0)
        ddp = DDP(model)
        state = TopKHookState(model, density=0.05, dense_steps=0)
        ddp.register_comm_hook(state, topk_hook)
        failed_at = None
        for step in range(5):
            loss = ddp(torch.randn(8, 12)).sum()
            try:
                loss.backward()
            except RuntimeError:
                failed_at = step
                break
        assert failed_at == 3 and state.step == 3


@pytest.mark.parametrize("max_restarts, count, said", [
    (0, 0, "failed at step 67; run the same command again to resume it from its checkpoint "
           "at step 50"),
    (3, 1, "failed at step 67; torchrun starts the workers again (2 of --max-restarts left) "
           "and they continue it from its checkpoint at step 50"),
    (1, 1, "failed at step 67; run the same command again to resume it from its checkpoint "
           "at step 50"),
])
def test_a_dead_peer_is_named_with_what_continues_the_run(max_restarts, count, said, tmp_path,
                                                           monkeypatch):
    from topkscope.comm.ddp_hook import _peer_failure

    monkeypatch.setenv("TORCHELASTIC_MAX_RESTARTS", str(max_restarts))
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", str(count))
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "latest").write_text("step-50")
    peers = SimpleNamespace(failure=lambda: (1, "was killed by SIGKILL", {"rank": 1}, False),
                            reporter=lambda rank: True)
    state = SimpleNamespace(peers=peers, folder=tmp_path, step=67)
    error = _peer_failure(state)
    assert str(error.code) == (f"topkscope: worker rank 1 was killed by SIGKILL; run "
                               f"{str(tmp_path)!r} {said}")
    (tmp_path / "checkpoints" / "latest").unlink()
    monkeypatch.setenv("TORCHELASTIC_MAX_RESTARTS", "0")
    assert str(_peer_failure(state).code).endswith(
        "run the same command again to resume it from step 0 (it has no checkpoint yet)")


def test_a_file_given_as_the_run_folder_is_one_line_naming_it(tmp_path):
    given = tmp_path / "notes.txt"
    given.write_text("not a folder")
    said = (f"run folder {str(given)!r} is a file, not a folder; give the folder the run writes "
            "to (it is made when missing)")
    for call in (lambda: checkpoint.mode(given), lambda: checkpoint.restore(given),
                 lambda: checkpoint.latest(given)):
        with pytest.raises(ValueError) as err:
            call()
        assert str(err.value) == said
