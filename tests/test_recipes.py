"""The scripts the docs give users run as written: each is cut out of its page here (so the page
and the test cannot drift), run the way the page says, and its results read with pandas."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from topkscope.analysis.runs import load

REPO = Path(__file__).resolve().parents[1]


def script_under(page: Path, heading: str) -> str:
    """The first ```python block after the markdown heading `## {heading}` in page."""
    text = page.read_text()
    start = text.index(f"\n## {heading}\n")
    block = re.search(r"```python\n(.*?)```", text[start:], re.S)
    assert block, f"no python block under '## {heading}' in {page.name}"
    return block.group(1)


def run_under_torchrun(text: str, script: Path, run_dir: Path, data_root: Path) -> dict:
    """Write the recipe to `script`, run it under torchrun with two gloo processes (the
    page's command) on run_dir; its manifest, checked complete, of a two-rank hook run."""
    script.write_text(text)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOPKSCOPE_DATA": str(data_root),
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc-per-node", "2", str(script), str(run_dir)],
                          cwd=script.parent, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert (manifest["status"], manifest["launcher"], manifest["world_size"]) == \
        ("complete", "ddp-hook", 2)
    return manifest


def test_the_transformer_recipe_is_found_in_its_page():
    script = script_under(REPO / "docs" / "training.md", "Your own transformer with AdamW")
    for piece in ("torch.optim.AdamW(", "TopKHookState(", "optimizer=opt", "Recorder(",
                  "state.note(loss=", "self.head.weight = self.token.weight", "is_causal=True"):
        assert piece in script, piece
    compile(script, "train_gpt.py", "exec")


@pytest.mark.slow
def test_the_transformer_recipe_runs_under_torchrun_with_two_ranks(tmp_path, data_root):
    run_dir = tmp_path / "results" / "my-gpt" / "run1"
    manifest = run_under_torchrun(
        script_under(REPO / "docs" / "training.md", "Your own transformer with AdamW"),
        tmp_path / "train_gpt.py", run_dir, data_root)
    assert (manifest["model"], manifest["dataset"], manifest["sparsifier"]) == \
        ("GPT", "ptb", "topk")
    opt = manifest["optimizer"]
    assert (opt["name"], opt["lr"], opt["betas"]) == ("adamw", 3e-3, [0.9, 0.95])
    groups = opt["param_groups"]
    assert [g["weight_decay"] for g in groups] == [0.1, 0.0]
    assert sum(g["elements"] for g in groups) == manifest["num_parameters"]

    train = pd.read_parquet(run_dir / "train.parquet")
    assert train["step"].tolist() == list(range(40))
    assert train["loss"].notna().all() and train["lr"].notna().all()
    assert train["loss"].iloc[-5:].mean() < train["loss"].iloc[:5].mean()  # it learns
    assert train["lr"].max() == pytest.approx(3e-3) and train["lr"].iloc[-1] < 3e-4
    d = manifest["num_parameters"]
    assert (train["k"].iloc[:2] == d).all()  # the hook's dense all-reduce steps
    assert (train["k"].iloc[2:] == round(0.01 * d)).all()
    assert (train["selected_min"].iloc[2:] == round(0.01 * d)).all()

    stats = load(run_dir).stats
    steps = sorted(stats["step"].unique())
    assert steps == [5, 10, 15, 20, 25, 30, 35] and sorted(stats["rank"].unique()) == [0, 1]
    u = stats[(stats["kind"] == "u") & (stats["layer"] == "__global__")]
    assert set(u["density"]) == {0.001, 0.01} and u["topk_ratio"].between(0, 1).all()


FRAMEWORK_RECIPES = {  # first line of the block -> the framework it needs
    "# train_lightning.py": "lightning",
    "# train_accelerate.py": "accelerate",
}


def framework_script(name: str) -> str:
    """The Lightning or Accelerate recipe of docs/training.md ('## Lightning and Accelerate')."""
    text = (REPO / "docs" / "training.md").read_text()
    start = text.index("\n## Lightning and Accelerate\n")
    blocks = re.findall(r"```python\n(.*?)```", text[start:], re.S)
    (found,) = [b for b in blocks if b.startswith(f"# {name}.py:")]
    return found


@pytest.mark.parametrize("name", ["train_lightning", "train_accelerate"])
def test_the_framework_recipes_are_found_in_their_page(name):
    script = framework_script(name)
    pieces = (("TopKCallback(", "L.Trainer(", 'strategy="ddp"') if name == "train_lightning"
              else ("Accelerator(", "accelerator.prepare(", "register_topk(ddp", "Recorder("))
    for piece in pieces:
        assert piece in script, piece
    compile(script, f"{name}.py", "exec")


def test_register_topk_refuses_a_model_that_is_not_wrapped_in_ddp():
    from torch import nn

    from topkscope.integrations import register_topk

    with pytest.raises(ValueError, match="needs the DistributedDataParallel wrapper of the "
                                         "model, got Linear"):
        register_topk(nn.Linear(3, 2), sparsifier="topk", density=0.5)


@pytest.mark.slow
@pytest.mark.train
@pytest.mark.parametrize("name", ["train_lightning", "train_accelerate"])
def test_the_framework_recipes_run_the_hook_under_torchrun_with_two_cpu_ranks(
        name, tmp_path, data_root):
    """The hook really ran on CPU (Lightning alone registers comm hooks on CUDA only): every
    step after the dense ones sent k = 1% of d per rank, both ranks recorded u, the manifest
    is complete with the steps done."""
    run_dir = tmp_path / "results" / "my-exp" / name
    manifest = run_under_torchrun(framework_script(name), tmp_path / f"{name}.py", run_dir,
                                  data_root)
    assert manifest["steps_done"] == 30 and manifest["sparsifier"] == "topk"
    assert manifest["dataset"] == "mnist"
    opt = manifest["optimizer"]
    assert (opt["name"], opt["lr"], opt["momentum"]) == ("sgd", 0.05, 0.9)
    train = pd.read_parquet(run_dir / "train.parquet")
    d = manifest["num_parameters"]
    assert train["step"].tolist() == list(range(30))
    assert (train["k"].iloc[:2] == d).all()  # the hook's dense all-reduce steps
    k = round(0.01 * d)
    assert (train["density"].iloc[2:] == 0.01).all() and (train["k"].iloc[2:] == k).all()
    assert (train["selected_min"].iloc[2:] == k).all() and (train["selected_max"].iloc[2:] == k).all()
    assert train["loss"].notna().all() and (train["lr"] == 0.05).all()
    if name == "train_lightning":
        assert (train["epoch"] == 0).all()  # noted by the callback
    u = load(run_dir).stats
    u = u[(u["kind"] == "u") & (u["layer"] == "__global__")]
    assert sorted(u["step"].unique()) == [5, 10, 15, 20, 25] and sorted(u["rank"].unique()) == [0, 1]
    assert u["topk_ratio"].between(0, 1).all()


def diloco_script() -> str:
    """The torchrun DiLoCo loop of docs/training.md ("The same loop under torchrun")."""
    text = (REPO / "docs" / "training.md").read_text()
    block = re.search(r"```python\n(# diloco_torchrun\.py:.*?)```", text, re.S)
    assert block, "no diloco_torchrun.py block in docs/training.md"
    return block.group(1)


def test_the_diloco_torchrun_recipe_is_found_in_its_page():
    script = diloco_script()
    for piece in ("exchange(transport, [compressor], [delta]", "DistributedTransport()",
                  '"outer": {"step": "average"', "run_fields=run_fields", "rank=rank"):
        assert piece in script, piece
    compile(script, "diloco_torchrun.py", "exec")


@pytest.mark.train
def test_the_diloco_torchrun_recipe_records_each_ranks_pseudo_gradient_as_an_outer_run(
        tmp_path, data_root):
    """Under torchrun with two gloo ranks: a complete outer-loop run whose condition names the
    outer loop and the quantization, every rank's u at every exchange, and round 0's u equal
    to the pseudo-gradient a single process computes for that rank (no residual yet)."""
    import torch

    from topkscope import data, models
    from topkscope.kernel import topk_ratio
    from topkscope.manifest import condition_of
    from topkscope.sparsify import k_from_density

    run_dir = tmp_path / "results" / "my-exp" / "diloco2"
    script = tmp_path / "diloco_torchrun.py"
    script.write_text(diloco_script())
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOPKSCOPE_DATA": str(data_root),
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc-per-node", "2", str(script), str(run_dir)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    run = load(run_dir)
    m = run.manifest
    assert (m["status"], m["world_size"], m["model"], m["sparsifier"]) == \
        ("complete", 2, "fnn3", "chunk-topk")
    assert condition_of(m) == "warmup=none; outer=average(H=5, lr=1, beta=0.95); quantize=2bit"
    u = run.stats[(run.stats.layer == "__global__") & (run.stats.kind == "u")]
    assert sorted(set(zip(u["step"], u["rank"]))) == [(s, r) for s in (4, 9, 14, 19)
                                                       for r in (0, 1)]
    # round 0, by hand: each rank's H AdamW steps from the common model on its own batches
    torch.manual_seed(0)
    model = models.create("fnn3")
    mnist = data.load("mnist", "train", root=data_root)
    theta = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    d = theta.numel()
    for rank in (0, 1):
        replica = models.create("fnn3")
        replica.load_state_dict(model.state_dict())
        opt = torch.optim.AdamW(replica.parameters(), lr=1e-3)
        for step in range(5):
            idx = torch.randint(0, len(mnist), (32,), generator=torch.Generator().manual_seed(
                10 * step + rank))
            x, y = mnist.batch(idx)
            opt.zero_grad()
            torch.nn.functional.cross_entropy(replica(x), y).backward()
            opt.step()
        delta = theta - torch.cat([p.detach().reshape(-1) for p in replica.parameters()])
        row = u[(u["step"] == 4) & (u["rank"] == rank)].iloc[0]
        assert row["numel"] == d
        assert row["max_abs"] == pytest.approx(float(delta.abs().max()), rel=1e-6)
        assert row["topk_ratio"] == pytest.approx(
            topk_ratio(delta.double(), k_from_density(1 / 64, d)), rel=1e-6)
