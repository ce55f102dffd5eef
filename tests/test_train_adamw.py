"""AdamW with a warm-up + cosine schedule in the TopK-SGD loop, on the GPT language model.

The Trainer is checked against a hand-written single-process reference (plain torch: the
per-worker windows cut from the token stream by hand, u = e + g with a dense 0/1 mask, AdamW
with decoupled weight decay and the schedule written out in float64), with Top-k and dense;
simulated workers against two gloo processes (same parameters).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tests._topk_reference import (
    exact_topk,
    masked_send,
    max_rel_diff,
    ptb,
    run_gloo,
    trainer_on,
)
from topkscope.comm import SimulatedTransport
from topkscope.train import validate

GPT = dict(experiment="adamw", model="gpt-mini", dataset="ptb", workers=2, batch_size=3, bptt=6,
           model_args={"layers": 1, "heads": 2, "width": 8, "context": 8, "dropout": 0.0},
           train_subset=2000, eval_subset=200, eval_batch_size=4, steps=6, lr=1e-2,
           optimizer="adamw", betas=[0.9, 0.95], eps=1e-8, weight_decay=0.1, no_decay_1d=True,
           lr_schedule="cosine", lr_warmup_steps=2, lr_final_factor=0.1, density=0.05, seed=7,
           threads=1)


def schedule(step: int, c: dict) -> float:
    """Linear warm-up over W steps, then cosine from lr to lr * f at the last step."""
    W, T, f = c["lr_warmup_steps"], c["steps"], c["lr_final_factor"]
    if step < W:
        return c["lr"] * (step + 1) / W
    return c["lr"] * (f + (1 - f) * (1 + math.cos(math.pi * (step - W) / (T - 1 - W))) / 2)


def reference_topk_adamw(model: torch.nn.Module, tokens: torch.Tensor, c: dict,
                         dense: bool) -> torch.Tensor:
    """Final parameters (float64) of P-worker TopK-SGD with AdamW after aggregation."""
    params = list(model.parameters())  # the tied matrix once, as the gradient vector holds it
    d = sum(p.numel() for p in params)
    k = max(1, round(c["density"] * d))
    P, B, T = c["workers"], c["batch_size"], c["bptt"]
    piece = len(tokens) // P
    columns = [tokens[r * piece:(r + 1) * piece] for r in range(P)]
    columns = [s[: len(s) // B * B].view(B, -1).t() for s in columns]  # (rows, B) per worker
    wd = torch.cat([torch.full((p.numel(),), 0.0 if p.dim() == 1 else c["weight_decay"],
                               dtype=torch.float64) for p in params])
    b1, b2 = c["betas"]
    x = torch.cat([p.detach().reshape(-1) for p in params]).double()
    m, v = torch.zeros(d, dtype=torch.float64), torch.zeros(d, dtype=torch.float64)
    residual = [torch.zeros(d) for _ in range(P)]
    for step in range(c["steps"]):
        sent = []
        for r in range(P):
            rows = columns[r][step * T: step * T + T + 1]
            model.zero_grad()
            logits = model(rows[:-1])
            F.cross_entropy(logits.reshape(-1, logits.shape[-1]), rows[1:].reshape(-1)).backward()
            g = torch.cat([p.grad.reshape(-1) for p in params])
            if dense:
                sent.append(g)
                continue
            sent_part, residual[r] = masked_send(residual[r] + g, k, exact_topk)
            sent.append(sent_part)
        s = (torch.stack(sent).sum(0) / P).double()
        lr, n = schedule(step, c), step + 1
        x = x * (1 - lr * wd)  # decoupled decay: on the parameters, not in u
        m = b1 * m + (1 - b1) * s
        v = b2 * v + (1 - b2) * s * s
        x = x - lr * (m / (1 - b1**n)) / ((v / (1 - b2**n)).sqrt() + c["eps"])
        with torch.no_grad():
            offset = 0
            for p in params:
                p.copy_(x[offset:offset + p.numel()].view_as(p))
                offset += p.numel()
    return x


@pytest.mark.train
@pytest.mark.parametrize("sparsifier", ["topk", "dense"])
def test_adamw_through_the_trainer_equals_the_reference_loop(sparsifier):
    cfg = validate({**GPT, "sparsifier": sparsifier})
    trainer = trainer_on(cfg, SimulatedTransport(2), ptb())
    rows = [trainer.train_step() for _ in range(cfg.steps)]
    assert [r["lr"] for r in rows] == pytest.approx([schedule(t, GPT) for t in range(6)])
    assert all(w.hidden is None for w in trainer.workers)  # a stateless model carries nothing
    reference_model = trainer_on(cfg, SimulatedTransport(1), ptb()).model
    tokens = ptb()[0].tokens[: GPT["train_subset"]]
    expected = reference_topk_adamw(reference_model, tokens, GPT, dense=sparsifier == "dense")
    got = torch.cat([p.detach().reshape(-1) for p in trainer.params]).double()
    start = torch.cat([p.detach().reshape(-1) for p in
                       trainer_on(cfg, SimulatedTransport(1), ptb()).params]).double()
    # float32 sums differ from the reference's order (and with the thread count); Adam divides
    # by sqrt(v), so where |s| is tiny those differences grow: a wrong decay, eps or bias
    # correction moves the result by > 4e-3
    assert max_rel_diff([got], [expected]) <= 2e-5
    assert float((got - expected).abs().max() / (got - start).abs().max()) <= 1e-3  # vs. the move
    if sparsifier == "topk":
        d = trainer.layout.d
        assert [r["selected"] for r in rows] == [round(0.05 * d)] * 6


@pytest.mark.train
def test_no_decay_1d_and_the_decoupled_decay_reach_every_parameter():
    """With s = 0 (nothing sent: a threshold far above |u|) AdamW moves nothing but the decay:
    matrices shrink by (1 - lr_t wd) per step, 1-D tensors stay."""
    cfg = validate({**GPT, "sparsifier": "threshold", "sparsifier_args": {"threshold": 1e6},
                    "steps": 3})
    trainer = trainer_on(cfg, SimulatedTransport(2), ptb())
    before = [p.detach().clone() for p in trainer.params]
    lrs = [trainer.train_step()["lr"] for _ in range(3)]
    shrink = math.prod(1 - lr * 0.1 for lr in lrs)
    for p, b in zip(trainer.params, before):
        if p.dim() == 1:
            assert torch.equal(p, b)
        else:
            torch.testing.assert_close(p, b * shrink, rtol=1e-6, atol=0)


def _gloo_body(rank: int, world: int) -> dict:
    from topkscope.comm import DistributedTransport

    out = {}
    for name in ("topk", "gaussiank-2019"):
        cfg = validate({**GPT, "sparsifier": name, "model_args": {**GPT["model_args"],
                                                                   "dropout": 0.1}})
        trainer = trainer_on(cfg, DistributedTransport(), ptb())
        rows = [trainer.train_step() for _ in range(cfg.steps)]
        out[name] = ([p.detach().clone() for p in trainer.params], rows,
                     trainer.optimizer.state_dict())
    return out


@pytest.mark.train
def test_simulated_and_gloo_workers_give_the_same_adamw_run():
    results = run_gloo(_gloo_body)
    for name in ("topk", "gaussiank-2019"):
        cfg = validate({**GPT, "sparsifier": name, "model_args": {**GPT["model_args"],
                                                                   "dropout": 0.1}})
        sim = trainer_on(cfg, SimulatedTransport(2), ptb())
        sim_rows = [sim.train_step() for _ in range(cfg.steps)]
        for rank in range(2):
            params, rows, state = results[rank][name]
            assert max_rel_diff(params, list(sim.params)) <= 1e-6, (name, rank)
            assert [r["selected"] for r in rows] == [r["selected"] for r in sim_rows]
            assert [r["loss"] for r in rows] == pytest.approx([r["loss"] for r in sim_rows],
                                                              rel=1e-6)
            assert state["steps"] == cfg.steps
            assert max_rel_diff(state["exp_avg_sq"], sim.optimizer.state_dict()["exp_avg_sq"]) \
                <= 1e-5
