"""Outer-loop (DiLoCo-style) training against a reference loop written with torch.optim on model
copies, its config checks, its rows and tables, and a resume from a checkpoint taken mid-round."""

from __future__ import annotations

import copy
import json
import math

import pandas as pd
import pytest
import torch

from tests.test_results_schema import check, documented
from topkscope.cli import main
from topkscope.comm import SimulatedTransport
from topkscope.manifest import condition_of
from topkscope.schema import OUTER_COLUMNS, OUTER_FILE, RUN_KEYS
from topkscope.sparsify.source import step_seed
from topkscope.train import build_trainer, checkpoint, validate
from topkscope.train.outer import OuterTrainer, settings_against_papers

BASE = dict(experiment="outer", model="fnn3", dataset="mnist", workers=2, batch_size=16,
            train_subset=512, eval_subset=200, steps=7, optimizer="adamw", lr=2e-3,
            betas=[0.9, 0.99], weight_decay=0.01, density=0.02, seed=3,
            outer={"inner_steps": 3})


def config(**changes):
    return validate({**BASE, **changes})


# ---------------------------------------------------------------- the config block
def test_the_block_is_filled_with_the_published_defaults_of_its_rule():
    assert config().outer == {"inner_steps": 3, "step": "nesterov", "lr": 0.7,
                              "momentum": 0.9, "error_decay": 1.0}
    assert config(outer={"inner_steps": 15, "step": "average", "error_decay": 0.95}).outer == {
        "inner_steps": 15, "step": "average", "lr": 1.0, "momentum": 0.0, "error_decay": 0.95}


@pytest.mark.parametrize("block,message", [
    ({}, "outer.inner_steps is required"),
    ({"inner_steps": 0}, r"outer.inner_steps = 0 is outside the allowed range \[1, inf\)"),
    ({"inner_steps": 2, "H": 3}, "unknown key 'H' in outer; allowed: inner_steps"),
    ({"inner_steps": 2, "step": "adam"}, "outer.step = 'adam'"),
    ({"inner_steps": 2, "step": "average", "momentum": 0.9},
     "outer.momentum = 0.9 does not apply to outer.step = 'average'"),
    ({"inner_steps": 2, "momentum": 0}, "outer.momentum = 0 with outer.step = 'nesterov'"),
    ({"inner_steps": 2, "error_decay": 1.5}, r"outer.error_decay = 1.5 is outside"),
])
def test_bad_blocks_are_refused_in_one_line(block, message):
    with pytest.raises(ValueError, match=message):
        config(outer=block)


def test_options_that_do_not_combine_with_the_outer_loop_are_refused():
    with pytest.raises(ValueError, match="lr_in_residual = true does not apply to outer-loop"):
        config(optimizer="sgd", betas=[0.9, 0.999], momentum=0.9, lr_in_residual=True)
    with pytest.raises(ValueError, match=r"outer.error_decay = 0.9 needs error_feedback = true"):
        config(error_feedback=False, outer={"inner_steps": 3, "error_decay": 0.9})


def test_the_condition_names_the_outer_loop_and_the_quantization():
    cfg = config(quantize={"bits": 2}, outer={"inner_steps": 15, "step": "average",
                                               "error_decay": 0.95})
    assert condition_of({"config": cfg.to_dict()}) == \
        "warmup=none; outer=average(H=15, lr=1, beta=0.95); quantize=2bit"
    assert condition_of({"config": config().to_dict()}) == \
        "warmup=none; outer=nesterov(H=3, lr=0.7, mu=0.9, beta=1)"
    # a hand-written manifest's block may lack settings: they are left out of the name
    assert condition_of({"outer": {"step": "nesterov", "inner_steps": 15}}) == \
        "warmup=none; outer=nesterov(H=15)"


def test_settings_against_the_papers_name_every_difference():
    # the SparseLoCo authors' public H = 15 settings: 32 of each 4,096
    cfg = config(sparsifier="chunk-topk", density=1 / 128, quantize={"bits": 2},
                 outer={"inner_steps": 15, "step": "average", "error_decay": 0.95})
    rows = {r["setting"]: r for r in settings_against_papers(cfg)}
    assert not any(r["differs"] for name, r in rows.items()
                   if name not in ("chunks", "aggregation"))
    assert rows["chunks"]["differs"] and "ccloco.py" in rows["chunks"]["source"]
    wider = {r["setting"]: r for r in settings_against_papers(cfg.replace(density=1 / 64))}
    assert wider["density"]["differs"] and wider["density"]["published"] == 1 / 128
    assert rows["aggregation"]["differs"]
    dense = {r["setting"]: r for r in settings_against_papers(config(sparsifier="dense"))}
    assert dense["inner_steps"]["differs"] and dense["inner_steps"]["published"] == 500
    assert not dense["lr"]["differs"] and not dense["momentum"]["differs"]


# ---------------------------------------------------------------- the loop
def flat(model) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def load_flat(model, vector: torch.Tensor) -> None:
    with torch.no_grad():
        offset = 0
        for p in model.parameters():
            p.copy_(vector[offset : offset + p.numel()].view_as(p))
            offset += p.numel()


def reference_run(cfg, steps: int):
    """DiLoCo / SparseLoCo written out with torch.optim.AdamW on P model copies and
    torch.optim.SGD as the outer step; error feedback and Top-k by hand (torch.topk)."""
    base = build_trainer(cfg.replace(outer=None, sparsifier="dense"),
                         SimulatedTransport(cfg.workers))[0]
    P, H = cfg.workers, cfg.outer["inner_steps"]
    theta = copy.deepcopy(base.model)
    replicas = [copy.deepcopy(base.model) for _ in range(P)]
    inner = [torch.optim.AdamW(m.parameters(), lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps,
                               weight_decay=cfg.weight_decay) for m in replicas]
    nesterov = cfg.outer["step"] == "nesterov"
    outer = torch.optim.SGD(theta.parameters(), lr=cfg.outer["lr"],
                            momentum=cfg.outer["momentum"], nesterov=nesterov)
    residual = [torch.zeros_like(flat(theta)) for _ in range(P)]
    for step in range(steps):
        for p in range(P):
            torch.manual_seed(step_seed(cfg.seed, p, step))
            inner[p].zero_grad()
            loss, _ = base.task.loss(replicas[p], base.workers[p], step)
            loss.backward()
            inner[p].step()
        if (step + 1) % H and step + 1 != steps:
            continue
        sent = []
        for p in range(P):
            delta = flat(theta) - flat(replicas[p])
            if cfg.sparsifier == "dense":
                sent.append(delta)
                continue
            u = cfg.outer["error_decay"] * residual[p] + delta
            k = max(1, round(cfg.density * u.numel()))
            idx = torch.topk(u.abs(), k).indices
            s = torch.zeros_like(u)
            s[idx] = u[idx]
            residual[p] = u - s
            sent.append(s)
        mean = sum(sent) / P
        offset = 0
        for q in theta.parameters():
            q.grad = mean[offset : offset + q.numel()].view_as(q).clone()
            offset += q.numel()
        outer.step()
        for m in replicas:
            load_flat(m, flat(theta))
    return flat(theta)


@pytest.mark.train
@pytest.mark.parametrize("changes", [
    {},                                                                  # DiLoCo, dense
    {"sparsifier": "topk", "outer": {"inner_steps": 3, "step": "average",
                                     "error_decay": 0.9}},               # SparseLoCo-style
])
def test_the_loop_equals_a_reference_written_with_torch_optim(changes):
    cfg = config(**changes)
    trainer = build_trainer(cfg, SimulatedTransport(cfg.workers))[0]
    assert isinstance(trainer, OuterTrainer)
    rows = [trainer.train_step() for _ in range(7)]
    expected = reference_run(cfg, 7)
    assert torch.allclose(flat(trainer.model), expected, rtol=1e-5, atol=1e-6)
    # exchanges after steps 2, 5 and the last step 6 (a round of one)
    sending = [r["step"] for r in rows if r["bytes_sent"]]
    assert sending == [2, 5, 6]
    assert all(math.isnan(r["contraction"]) for r in rows if not r["bytes_sent"])


@pytest.mark.train
def test_outer_rows_count_the_encoded_message_and_name_each_round():
    cfg = config(sparsifier="chunk-topk", sparsifier_args={"chunk_size": 1024},
                 density=1 / 64, quantize={"bits": 2},
                 outer={"inner_steps": 3, "step": "average", "error_decay": 0.95})
    trainer = build_trainer(cfg, SimulatedTransport(2))[0]
    outer_rows = []
    for _ in range(7):
        row = trainer.train_step()
        if trainer.outer_row is not None:
            outer_rows.append(trainer.outer_row)
            assert trainer.outer_row["bytes_sent"] == row["bytes_sent"]
            assert trainer.outer_row["payload_bytes"] == row["payload_bytes"]
        else:
            assert row["bytes_sent"] == row["payload_bytes"] == 0
    assert [(r["outer_step"], r["step"], r["inner_steps"]) for r in outer_rows] == [
        (0, 2, 3), (1, 5, 3), (2, 6, 1)]
    d = trainer.layout.d
    k = round(d / 64)
    first = outer_rows[0]
    assert first["selected_min"] == first["selected_max"] == k
    assert first["bytes_values"] == 2 * math.ceil(k * 2 / 8)        # 2-bit codes
    assert first["bytes_indices"] == 2 * math.ceil(k * 10 / 8)       # 10-bit chunk-local
    assert first["bytes_quantization"] == 2 * 6 * 5 * 4              # 6 tensors
    assert first["bytes_sent"] == sum(first[c] for c in ("bytes_values", "bytes_indices",
                                                         "bytes_quantization", "bytes_counts"))
    # the selected pairs alone: equal counts, so what the wire adds is the counts and tables
    assert first["payload_bytes"] == first["bytes_values"] + first["bytes_indices"]
    assert first["bytes_sent"] - first["payload_bytes"] == 2 * 8 + first["bytes_quantization"]
    assert 0 < first["contraction_selection"] <= first["contraction"] < 1
    assert first["pseudo_gradient_norm"] > 0 and first["update_norm"] > 0


@pytest.mark.train
def test_a_checkpoint_taken_mid_round_resumes_to_the_uninterrupted_result(tmp_path):
    cfg = config(sparsifier="chunk-topk", sparsifier_args={"chunk_size": 512},
                 quantize={"bits": 2}, outer={"inner_steps": 3, "step": "average",
                                               "error_decay": 0.95})
    whole = build_trainer(cfg, SimulatedTransport(2))[0]
    for _ in range(7):
        whole.train_step()
    first = build_trainer(cfg, SimulatedTransport(2))[0]
    for _ in range(4):  # step 4 is inside the second round
        first.train_step()
    folder = checkpoint.save(tmp_path, first, keep=1)
    resumed = build_trainer(cfg, SimulatedTransport(2))[0]
    checkpoint.load(folder, resumed)
    assert resumed.step == 4 and resumed.outer_step == 1
    for _ in range(3):
        resumed.train_step()
    assert torch.equal(flat(resumed.model), flat(whole.model))
    for a, b in zip(resumed.locals, whole.locals):
        assert torch.equal(a, b)
    assert torch.equal(resumed.compressors[1].state_dict()["__global__"],
                       whole.compressors[1].state_dict()["__global__"])


@pytest.mark.train
def test_topkscope_run_writes_the_outer_table_and_the_block_into_the_manifest(tmp_path):
    cfg = tmp_path / "outer.yaml"
    cfg.write_text(json.dumps({**BASE, "sparsifier": "chunk-topk", "quantize": {"bits": 2},
                               "outer": {"inner_steps": 3, "step": "average",
                                         "error_decay": 0.95}, "threads": 1}))
    assert main(["run", str(cfg), "--results", str(tmp_path), "--run-id", "r",
                 "--no-progress"]) == 0
    run = tmp_path / "outer" / "r"
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["quantize"] == {"bits": 2, "range": 6.0}
    outer = manifest["outer"]
    assert {k: outer[k] for k in ("inner_steps", "step", "lr", "momentum", "error_decay")} == \
        {"inner_steps": 3, "step": "average", "lr": 1.0, "momentum": 0.0, "error_decay": 0.95}
    assert outer["inner_optimizer"]["name"] == "adamw" and outer["outer_optimizer"]["lr"] == 1.0
    assert outer["deviations"] == ["inner_steps", "density", "chunks", "aggregation"]
    table = pd.read_parquet(run / OUTER_FILE)
    assert list(table.columns) == [*RUN_KEYS, *OUTER_COLUMNS] == list(documented()["outer"])
    assert set(table["run_id"]) == {"r"} and set(table["experiment"]) == {"outer"}
    check(table, documented()["outer"], "outer")
    assert table["step"].tolist() == [2, 5, 6]


@pytest.mark.train
def test_a_complete_run_extended_counts_the_rounds_after_its_short_last_one(tmp_path):
    cfg = config(sparsifier="topk", outer={"inner_steps": 3, "step": "average"})
    first = build_trainer(cfg, SimulatedTransport(2))[0]
    for _ in range(7):               # exchanges after steps 2, 5 and 6 (the last: a round of 1)
        first.train_step()
    folder = checkpoint.save(tmp_path, first, keep=1)
    longer = build_trainer(cfg.replace(steps=10), SimulatedTransport(2))[0]
    checkpoint.load(folder, longer)
    rows = []
    for _ in range(3):
        longer.train_step()
        if longer.outer_row is not None:
            rows.append(longer.outer_row)
    assert [(r["outer_step"], r["step"], r["inner_steps"]) for r in rows] == [(3, 8, 2),
                                                                              (4, 9, 1)]
