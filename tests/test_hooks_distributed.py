"""Recording under 2 gloo processes: each rank writes its own parts, with the same steps."""

import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tests._hooks_loop import layout_of, tiny_model
from topkscope.analysis.runs import load
from topkscope.hooks import GLOBAL

WORKER = textwrap.dedent("""
    import sys
    import torch
    import torch.distributed as dist
    from tests._hooks_loop import layout_of, tiny_model
    from topkscope.feedback import ErrorFeedback
    from topkscope.hooks import Recorder
    from topkscope.sparsify import get_sparsifier, k_from_density

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = tiny_model(0)  # the same initial weights on every rank
    layout = layout_of(model)
    d = sum(n for _, _, n in layout)
    rec = Recorder(sys.argv[1], schedule=1, snapshot_schedule=[2], densities=[0.05],
                   rank=rank, flush_every=2)
    rec.attach(model)
    ef, topk = ErrorFeedback(), get_sparsifier("topk")
    torch.manual_seed(100 + rank)  # each rank its own data
    for step in range(5):
        model.zero_grad()
        x, y = torch.randn(16, 12), torch.randint(0, 3, (16,))
        torch.nn.functional.cross_entropy(model(x), y).backward()
        g = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        u = ef.compensate("flat", g)
        idx = topk.select(u, k_from_density(0.05, d))
        sent = torch.zeros(d)
        sent[idx] = u[idx]
        e = ef.update("flat", u, idx)
        if rec.wants(step):
            rec.record(step, rank, u=u, e=e, layout=layout, selected=idx)  # g from the hooks
        dist.all_reduce(sent)
        with torch.no_grad():
            off = 0
            for p in model.parameters():
                p -= 0.1 * sent[off : off + p.numel()].view_as(p) / world
                off += p.numel()
    rec.close()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    torch.save(flat, sys.argv[1] + f"/params-{rank}.pt")
    dist.destroy_process_group()
""")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

def run_two_gloo_ranks(script: str, run_dir) -> list[tuple[str, str]]:
    """Run `python -c script run_dir` as ranks 0 and 1 of a gloo group on this machine;
    returns their (stdout, stderr)."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    base = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
            "WORLD_SIZE": "2", "OMP_NUM_THREADS": "1",
            "PYTHONPATH": repo + os.pathsep + os.environ.get("PYTHONPATH", "")}
    procs = [subprocess.Popen([sys.executable, "-c", script, str(run_dir)], cwd=repo,
                              env={**base, "RANK": str(r), "LOCAL_RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(2)]
    outs = [p.communicate(timeout=240) for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(err for _, err in outs)
    return outs



@pytest.mark.train
def test_two_gloo_ranks_record_the_same_steps(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    run_two_gloo_ranks(WORKER, run_dir)

    run = load(run_dir)
    assert run.manifest["status"] == "complete"  # rank 0 owns it, rank 1 never touches it
    parts = sorted(p.name[:12] for p in (run_dir / "stats").iterdir())
    assert set(parts) == {"part-r00000-", "part-r00001-"}
    s = run.stats
    steps = {r: sorted(s[s["rank"] == r].step.unique()) for r in (0, 1)}
    assert steps[0] == steps[1] == [0, 1, 2, 3, 4]
    layers = [GLOBAL] + [n for n, _, _ in layout_of(tiny_model())]
    for r in (0, 1):
        for kind in "gue":
            assert list(s[(s["rank"] == r) & (s.step == 0) & (s.kind == kind)].layer) == layers
    u0 = s[(s.kind == "u") & (s.layer == GLOBAL)].pivot(index="step", columns="rank",
                                                         values="norm")
    assert (u0[0] != u0[1]).all()  # different data per rank, so different u
    assert sorted(run.snapshots["rank"]) == [0, 1]
    import torch

    p0, p1 = (torch.load(run_dir / f"params-{r}.pt") for r in (0, 1))
    assert torch.equal(p0, p1)  # recording did not desynchronise the replicas
    assert np.isfinite(s[s.kind == "u"].topk_ratio).all()


# the lines every two-rank DDP test script starts with: a tiny model wrapped in DDP on gloo
DDP_PREAMBLE = "# {comment}\n" + textwrap.dedent("""
    import sys
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from tests._hooks_loop import tiny_model
    from topkscope.comm import TopKHookState, topk_hook
    from topkscope.hooks import Recorder

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = tiny_model(0)
    ddp = DDP(model)
""")


DDP_SCRIPT = DDP_PREAMBLE.format(
    comment="a user's own DDP script with TopK-SGD as a communication hook and the recorder "
            "attached") + textwrap.dedent("""
    with Recorder(sys.argv[1], schedule=1, snapshot_schedule=[3], densities=[0.01, 0.1],
                  rank=rank) as rec:
        state = TopKHookState(model, sparsifier="topk", density=0.1, dense_steps=1,
                              recorder=rec)
        ddp.register_comm_hook(state, topk_hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        torch.manual_seed(10 + rank)
        for _ in range(5):
            opt.zero_grad()
            x, y = torch.randn(16, 12), torch.randint(0, 3, (16,))
            torch.nn.functional.cross_entropy(ddp(x), y).backward()
            opt.step()
    dist.destroy_process_group()
""")


@pytest.mark.slow
def test_a_users_ddp_script_records_through_the_comm_hook(tmp_path):
    run_dir = tmp_path / "run"
    run_two_gloo_ranks(DDP_SCRIPT, run_dir)
    run = load(run_dir)
    assert run.status == "complete"
    s = run.stats
    # the hook runs dense all-reduce for its first step, then records steps 1..4 on both ranks
    assert {r: sorted(s[s["rank"] == r].step.unique()) for r in (0, 1)} == {
        0: [1, 2, 3, 4], 1: [1, 2, 3, 4]}
    glob = s[(s.layer == GLOBAL) & (s.density == 0.1)].set_index(["step", "rank", "kind"])
    for step in (1, 2, 3, 4):
        for r in (0, 1):  # e is u minus the sent top 10%: ||e||^2 = ||u||^2 * delta(u, k)
            assert glob.loc[(step, r, "e"), "norm"] ** 2 == pytest.approx(
                glob.loc[(step, r, "u"), "norm"] ** 2 * glob.loc[(step, r, "u"), "topk_ratio"],
                rel=1e-6)
    assert sorted(run.snapshots["rank"]) == [0, 1]


FORGETFUL_DDP_SCRIPT = DDP_PREAMBLE.format(
    comment="the README's hook recipe, ending without rec.close() or destroy_process_group()"
) + textwrap.dedent("""
    rec = Recorder(sys.argv[1], schedule={"every": 2}, densities=[0.01, 0.1],
                   rank=rank, flush_every=1000)
    state = TopKHookState(model, sparsifier="topk", density=0.1, recorder=rec)
    ddp.register_comm_hook(state, topk_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    for _ in range(6):
        opt.zero_grad()
        x, y = torch.randn(16, 12), torch.randint(0, 3, (16,))
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
""")


@pytest.mark.slow
def test_two_gloo_ranks_that_never_close_exit_cleanly_ten_times(tmp_path):
    for attempt in range(10):
        run_dir = tmp_path / f"run{attempt}"
        outs = run_two_gloo_ranks(FORGETFUL_DDP_SCRIPT, run_dir)
        for _, err in outs:
            assert "terminate called" not in err and "Traceback" not in err, err
        run = load(run_dir)
        assert run.status == "complete"
        assert run.manifest["closed_by"] == "exit without close()"
        # dense steps 0 and 1, then steps 2 and 4 recorded on both ranks, flushed at exit
        assert {r: sorted(run.stats[run.stats["rank"] == r].step.unique()) for r in (0, 1)} \
            == {0: [2, 4], 1: [2, 4]}


USERS_RUN_SCRIPT = DDP_PREAMBLE.format(
    comment="the README's hook recipe on a user's own model, with the recorder and the loss "
            "noted") + textwrap.dedent("""
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    with Recorder(sys.argv[1], schedule=1, hist_schedule={"every": 4},
                  snapshot_schedule=[4, 8], densities=[0.05, 0.2], sparsifiers=["gaussiank"],
                  rank=rank, total_steps=10) as rec, \\
         TopKHookState(model, sparsifier="topk", density=0.05, recorder=rec, optimizer=opt,
                       run_fields={"dataset": "random", "optimizer": {"name": "sgd", "lr": 0.1,
                                                                      "by": "run_fields"}}
                       ) as state:
        ddp.register_comm_hook(state, topk_hook)
        torch.manual_seed(10 + rank)
        for step in range(10):
            opt.zero_grad()
            x, y = torch.randn(16, 12), torch.randint(0, 3, (16,))
            loss = torch.nn.functional.cross_entropy(ddp(x), y)
            loss.backward()
            opt.step()
            state.note(loss=loss.item(), lr=0.1, epoch=0)
    dist.destroy_process_group()
""")


@pytest.mark.slow
def test_a_users_two_rank_run_goes_through_analyze_claims_and_notebooks(tmp_path):
    import papermill

    from topkscope import claims
    from topkscope.cli import main as cli

    run_dir = tmp_path / "results" / "my-exp" / "run1"
    run_two_gloo_ranks(USERS_RUN_SCRIPT, run_dir)
    run = load(run_dir)
    m = run.manifest
    assert m["status"] == "complete" and m["launcher"] == "ddp-hook"
    d = sum(n for _, _, n in layout_of(tiny_model()))
    assert (m["world_size"], m["sparsifier"], m["density"], m["num_parameters"]) == \
        (2, "topk", 0.05, d)
    assert [n for _, n in m["layers"]] == [n for _, _, n in layout_of(tiny_model())]
    assert m["model"] == "Sequential" and m["dataset"] == "random" and m["experiment"] == "my-exp"
    assert m["optimizer"] == {"name": "sgd", "lr": 0.1, "by": "run_fields"}  # run_fields win
    train = run.train
    assert list(train.step) == list(range(10)) and str(train.epoch.dtype) == "Int64"
    assert list(train.density[:2]) == [1.0, 1.0] and (train.k[:2] == d).all()  # dense steps
    k = max(1, round(0.05 * d))
    assert (train.k[2:] == k).all() and (train.selected_min[2:] == k).all()
    assert train.loss.notna().all() and (train.bytes_sent > 0).all()

    assert cli(["analyze", str(run_dir), "--densities", "0.05", "--no-progress"]) == 0
    assert (run_dir / "analysis" / "normality.parquet").is_file()

    table = claims.build([run])
    assert set(table.claim) >= {"gaussian_like", "below_classic", "below_paper"}
    assert set(table.model) == {"Sequential"}

    for name in ("distributions", "contraction", "selectors", "convergence"):
        params = {"results_root": str(tmp_path / "results")}
        if name != "convergence":
            params["run_dir"] = str(run_dir)
        out = tmp_path / f"{name}.ipynb"
        papermill.execute_notebook(f"notebooks/{name}.ipynb", str(out), parameters=params,
                                   kernel_name="python3", progress_bar=False,
                                   cwd=str(tmp_path))
        import nbformat

        book = nbformat.read(out, as_version=4)
        outputs = [o for c in book.cells if c.cell_type == "code" for o in c.outputs]
        assert not [o for o in outputs if o.output_type == "error"], name
        images = [o for o in outputs if "image/png" in o.get("data", {})]
        text = "".join(o.get("text", "") for o in outputs)
        assert images, name
        if name == "convergence":  # no evaluation in a hook run: the noted training loss
            assert "no evaluation rows (eval.parquet): training loss only" in text
