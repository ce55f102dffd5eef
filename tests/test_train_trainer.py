"""The TopK-SGD loop in one process: recorder protocol, options, buffers, language models."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tests._topk_reference import max_rel_diff
from topkscope.comm import SimulatedTransport
from topkscope.train import build_trainer, validate

pytestmark = pytest.mark.train  # every test here trains (see tests/conftest.py)

SMALL = dict(experiment="small", model="fnn3", dataset="mnist", workers=2, batch_size=16,
             train_subset=512, eval_subset=200, steps=6, lr=0.05, momentum=0.9,
             weight_decay=1e-4, density=0.01, seed=5)


def trainer_for(**changes):
    cfg = validate({**SMALL, **changes})
    return build_trainer(cfg, SimulatedTransport(cfg.workers))[0]


class CallLog:
    """Records what the loop hands a Recorder (the protocol of hooks.Recorder)."""

    def __init__(self, steps: set[int]) -> None:
        self.steps, self.asked, self.calls = steps, [], []

    def wants(self, step: int) -> bool:
        self.asked.append(step)
        return step in self.steps

    def record(self, step, rank, *, u, e=None, g=None, layout, selected=None) -> None:
        self.calls.append(dict(step=step, rank=rank, u=u.clone(), e=e.clone(), g=g.clone(),
                               layout=layout, selected=selected.clone()))


def test_recorder_sees_u_e_g_and_the_sent_indices_of_every_worker():
    trainer = trainer_for(steps=4)
    log = CallLog({1, 2})
    trainer.recorder = log
    for _ in range(4):
        trainer.train_step()
    assert sorted(set(log.asked)) == [0, 1, 2, 3]
    assert [(c["step"], c["rank"]) for c in log.calls] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    d, k = trainer.layout.d, round(0.01 * trainer.layout.d)
    by = {(c["step"], c["rank"]): c for c in log.calls}
    for c in log.calls:
        assert c["layout"] == trainer.layout.entries() and c["u"].shape == (d,)
        assert c["selected"].dtype == torch.int64 and c["selected"].numel() == k
        expected_e = c["u"].clone()
        expected_e[c["selected"]] = 0
        assert torch.equal(c["e"], expected_e)                   # e = u with the sent part removed
        assert not torch.equal(c["g"], c["u"])                    # step >= 1: a residual exists
    for rank in (0, 1):  # u_2 = g_2 + e_1
        assert torch.equal(by[2, rank]["u"], by[2, rank]["g"] + by[1, rank]["e"])


def test_rows_report_density_schedule_counts_and_bytes():
    trainer = trainer_for(train_subset=128, batch_size=16, steps=8,
                          density_schedule=[0.1], density=0.01)   # 4 steps per epoch
    rows = [trainer.train_step() for _ in range(8)]
    d = trainer.layout.d
    assert [r["density"] for r in rows] == [0.1] * 4 + [0.01] * 4
    assert [r["selected"] for r in rows] == [round(0.1 * d)] * 4 + [round(0.01 * d)] * 4
    assert [r["epoch"] for r in rows] == [0] * 4 + [1] * 4
    assert rows[0]["bytes_sent"] == 2 * (8 + round(0.1 * d) * 8)
    assert rows[0]["payload_bytes"] == 2 * round(0.1 * d) * 8  # Top-k: equal counts, no padding
    for r in rows:
        assert r["metric_name"] == "accuracy" and 0 <= r["metric"] <= 1
        assert math.isfinite(r["loss"]) and r["time_compute"] > 0
    assert trainer.evaluate()["split"] == "test"


def test_lr_inside_the_residual_gives_the_same_trajectory_at_constant_lr():
    """u = e + lr g with SGD(lr=1, wd*lr) equals u = e + g with SGD(lr, wd) when lr is fixed."""
    a, b = trainer_for(), trainer_for(lr_in_residual=True)
    for _ in range(6):
        a.train_step()
        b.train_step()
    assert max_rel_diff(list(a.params), list(b.params)) <= 1e-5


@pytest.mark.parametrize("clip_at", ["aggregate", "worker"])
def test_gradient_clipping_bounds_the_first_dense_update(clip_at):
    """One dense worker: s = g, so both placements clip the same vector."""
    clip, lr = 1e-3, 0.05
    trainer = trainer_for(workers=1, sparsifier="dense", momentum=0.0, weight_decay=0.0,
                          grad_clip=clip, clip_at=clip_at, lr=lr)
    before = torch.cat([p.detach().flatten().clone() for p in trainer.params])
    trainer.train_step()
    after = torch.cat([p.detach().flatten() for p in trainer.params])
    assert float((after - before).norm()) == pytest.approx(lr * clip, rel=1e-3)


def first_sparse_step(clip_at: str, clip: float, lr: float = 0.05):
    """Two Top-k workers, plain SGD: (x0, update x1 - x0 in float64, the recorder's step 0)."""
    trainer = trainer_for(momentum=0.0, weight_decay=0.0, grad_clip=clip, clip_at=clip_at,
                          lr=lr)
    log = CallLog({0})
    trainer.recorder = log
    before = torch.cat([p.detach().flatten().clone() for p in trainer.params])
    trainer.train_step()
    after = torch.cat([p.detach().flatten() for p in trainer.params])
    return before, after.double() - before.double(), log.calls


def test_aggregate_clipping_clips_the_averaged_sparse_update_and_keeps_residuals_unclipped():
    """The published placement (hclhkbu/GaussianK-SGD@3da1fb3 dist_trainer.py): s = mean of the
    workers' sparse u, then s *= min(1, c / (||s|| + 1e-6)), computed here in float64."""
    clip, lr = 1e-3, 0.05
    before, update, calls = first_sparse_step("aggregate", clip, lr)
    s = torch.zeros(update.numel(), dtype=torch.float64)
    for c in calls:
        assert float(c["g"].norm()) > 10 * clip        # a worker's g exceeds the norm
        assert torch.equal(c["u"], c["g"])             # step 0: u = g, not clipped
        s[c["selected"]] += c["u"][c["selected"]].double() / len(calls)
    norm = float(s.norm())
    assert norm > clip                                  # the aggregate is clipped too
    expected = -lr * s * min(1.0, clip / (norm + 1e-6))
    # float32 parameters: x1 - x0 is exact to the rounding of x (eps |x|), no better
    rounding = 2 * torch.finfo(torch.float32).eps * before.double().abs() + 1e-12
    assert bool(((update - expected).abs() <= rounding).all())
    assert float((update - expected).norm()) <= 1e-3 * float(expected.norm())


def test_worker_clipping_clips_each_g_before_error_feedback_and_differs_from_aggregate():
    clip, lr = 1e-3, 0.05
    _, update, calls = first_sparse_step("worker", clip, lr)
    for c in calls:  # u = e + clipped g: every worker's u has the clip norm at step 0
        assert float(c["u"].norm()) == pytest.approx(clip, rel=1e-3)
    _, aggregate, _ = first_sparse_step("aggregate", clip, lr)
    assert float((update - aggregate).norm()) > 0.1 * float(aggregate.norm())


def test_batchnorm_running_statistics_follow_rank_0():
    trainer = trainer_for(model="resnet20", model_args={"in_channels": 1, "width": 4},
                          batch_size=8, steps=1)
    model = trainer.model
    bn = next(m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d))
    first = next(m for m in model.modules() if isinstance(m, torch.nn.Conv2d))
    shard = trainer.task._shard(trainer.workers[0], 0)[:8]
    x, _ = trainer.task.train.batch(shard)
    with torch.no_grad():
        features = first(x)  # the first BatchNorm sees the stem convolution's output
    expected = 0.9 * bn.running_mean + 0.1 * features.mean(dim=(0, 2, 3))
    trainer.train_step()
    torch.testing.assert_close(bn.running_mean, expected, rtol=1e-5, atol=1e-6)
    assert int(bn.num_batches_tracked) == 1


def test_language_model_carries_hidden_state_and_reports_perplexity():
    trainer = trainer_for(model="lstm-ptb-small", dataset="ptb",
                          model_args={"hidden_size": 8, "num_layers": 1, "dropout": 0.0},
                          batch_size=4, bptt=5, train_subset=400, eval_subset=200,
                          eval_batch_size=5, grad_clip=0.25, momentum=0.0, weight_decay=0.0,
                          lr=5.0, steps=5)
    assert trainer.steps_per_epoch == math.ceil((400 // 2 // 4 - 1) / 5)
    rows = [trainer.train_step() for _ in range(5)]
    for r in rows:
        assert r["metric_name"] == "perplexity"
        assert r["metric"] == pytest.approx(math.exp(r["loss"]))
    for w in trainer.workers:
        h, c = w.hidden
        assert h.shape == (1, 4, 8) and not h.requires_grad
    ev = trainer.evaluate()
    assert ev["split"] == "valid" and ev["metric"] == pytest.approx(math.exp(ev["loss"]))


def test_language_model_hidden_state_matters():
    """Reference: worker 0's first two windows run by hand with the carried hidden state."""
    args = dict(model="lstm-ptb-small", dataset="ptb", workers=1, batch_size=2, bptt=3,
                model_args={"hidden_size": 6, "num_layers": 1, "dropout": 0.0},
                train_subset=100, eval_subset=50, eval_batch_size=5, sparsifier="dense",
                momentum=0.0, weight_decay=0.0,
                lr=1e-9, steps=2)
    trainer = trainer_for(**args)
    model, source = trainer.model, trainer.task.streams[0]
    with torch.no_grad():
        _, hidden = model(source[0:3])
        logits, _ = model(source[3:6], hidden)
        expected = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), source[4:7].reshape(-1))
    rows = [trainer.train_step() for _ in range(2)]
    assert rows[1]["loss"] == pytest.approx(float(expected), rel=1e-5)


def test_a_stateless_language_model_sees_each_window_alone():
    """The GPT carries no state: worker 0's second window by hand, without the first."""
    args = dict(model="gpt-mini", dataset="ptb", workers=1, batch_size=2, bptt=3,
                model_args={"layers": 1, "heads": 2, "width": 8, "context": 4, "dropout": 0.0},
                train_subset=100, eval_subset=50, eval_batch_size=5, sparsifier="dense",
                momentum=0.0, weight_decay=0.0, lr=1e-9, steps=2)
    trainer = trainer_for(**args)
    model, source = trainer.model, trainer.task.streams[0]
    with torch.no_grad():
        logits = model(source[3:6])
        expected = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), source[4:7].reshape(-1))
    rows = [trainer.train_step() for _ in range(2)]
    assert rows[1]["loss"] == pytest.approx(float(expected), rel=1e-5)
    assert rows[1]["metric_name"] == "perplexity" and trainer.workers[0].hidden is None
    ev = trainer.evaluate()
    assert ev["split"] == "valid" and ev["metric"] == pytest.approx(math.exp(ev["loss"]))
    with pytest.raises(ValueError) as err:
        trainer_for(**{**args, "bptt": 5})
    assert str(err.value) == ("bptt = 5 exceeds the context = 4 of model 'gpt-mini'; allowed "
                              "bptt in [1, 4] (or raise model_args.context)")


def test_randomised_selection_is_per_worker_and_reproducible():
    runs = []
    for _ in range(2):
        trainer = trainer_for(sparsifier="randk", steps=3)
        log = CallLog({2})
        trainer.recorder = log
        for _ in range(3):
            trainer.train_step()
        runs.append(([p.detach().clone() for p in trainer.params], log.calls))
    (params_a, calls_a), (params_b, calls_b) = runs
    assert all(torch.equal(a, b) for a, b in zip(params_a, params_b))
    sel = [set(c["selected"].tolist()) for c in calls_a]
    assert sel == [set(c["selected"].tolist()) for c in calls_b]
    assert sel[0] != sel[1]  # the two workers draw independently


def test_rows_keep_every_workers_count_and_a_worker_may_send_nothing():
    """threshold far above every |u|: nothing is sent, nothing changes, the counts say 0."""
    trainer = trainer_for(sparsifier="threshold", sparsifier_args={"threshold": 1e6},
                          momentum=0.0, weight_decay=0.0, steps=2)
    before = [p.detach().clone() for p in trainer.params]
    row = trainer.train_step()
    assert (row["selected_min"], row["selected_median"], row["selected_max"]) == (0, 0.0, 0)
    assert row["selected"] == 0 and row["k"] == round(0.01 * trainer.layout.d)
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.params))


def test_rows_min_median_max_over_workers_of_an_approximate_method():
    trainer = trainer_for(sparsifier="gaussiank-2019", workers=3, steps=3)
    for _ in range(3):
        row = trainer.train_step()
        assert row["selected_min"] <= row["selected_median"] <= row["selected_max"]
        assert row["selected_min"] <= row["selected"] <= row["selected_max"]


def test_k_rule_floor_sends_the_authors_k():
    trainer = trainer_for(k_rule="floor", density=0.0015, steps=1)
    d = trainer.layout.d
    assert trainer.train_step()["selected"] == max(int(0.0015 * d), 1)


def test_robust_gaussiank_trains_exactly_like_topk():
    """gaussiank selects the exact Top-k set, so the whole run is Top-k's, step for step."""
    a, b = trainer_for(sparsifier="topk", steps=5), trainer_for(sparsifier="gaussiank", steps=5)
    for _ in range(5):
        ra, rb = a.train_step(), b.train_step()
        assert ra["loss"] == rb["loss"] and ra["selected"] == rb["selected"]
    assert all(torch.equal(p, q) for p, q in zip(a.params, b.params))


def test_divergence_stops_with_the_step_and_the_loss():
    from topkscope.train.trainer import DivergedError

    trainer = trainer_for(lr=1e30, steps=40)
    with pytest.raises(DivergedError) as err:
        for _ in range(40):
            trainer.train_step()
    step = err.value.step
    assert 0 < step < 40 and trainer.step == step  # the failing step was not counted
    assert not math.isfinite(err.value.loss)
    assert str(err.value) == (f"training diverged at step {step}: loss = {err.value.loss:g} "
                              f"on worker {err.value.rank}; lower lr or set grad_clip")


def test_a_non_finite_gradient_under_a_finite_loss_is_divergence_too(monkeypatch):
    from topkscope.train.trainer import DivergedError

    trainer = trainer_for(steps=3)
    trainer.train_step()
    real = trainer._worker_gradient

    def poisoned(worker, lr):
        g, row = real(worker, lr)
        g[7] = float("inf")
        return g, row

    monkeypatch.setattr(trainer, "_worker_gradient", poisoned)
    with pytest.raises(DivergedError, match=r"^training diverged at step 1: loss = [0-9.]+ on "
                                            r"worker 0 \(its gradient holds NaN/Inf\)"):
        trainer.train_step()


@pytest.mark.parametrize("sparsifier", ["topk", "gaussiank-2019", "randk", "dense"])
def test_rows_carry_the_steps_own_contraction_averaged_over_workers(sparsifier):
    # delta_C = ||u - C(u)||^2 / ||u||^2, recomputed in float64 from what the recorder was handed
    trainer = trainer_for(steps=3, sparsifier=sparsifier)
    log = CallLog({0, 1, 2})
    trainer.recorder = log
    rows = [trainer.train_step() for _ in range(3)]
    for row in rows:
        calls = [c for c in log.calls if c["step"] == row["step"]]
        expected = [float((c["e"].double() ** 2).sum() / (c["u"].double() ** 2).sum())
                    if sparsifier != "dense" else 0.0 for c in calls]
        assert len(expected) == 2
        assert row["contraction"] == pytest.approx(sum(expected) / 2, rel=1e-9, abs=1e-12)
        if sparsifier == "topk":  # Top-k keeps at least the average energy: 0 < delta < 1 - k/d
            assert 0 < row["contraction"] < 1 - 0.01


def test_a_cpu_step_draws_what_torch_manual_seed_would_give_it(monkeypatch):
    """The step seeds only the CPU generator on the CPU (Trainer._seed_step): a model with
    dropout trains exactly as with torch.manual_seed (which also queues CUDA seeds), and the
    seed matters (another seed per step trains differently: the dropout masks do draw)."""
    from topkscope.train.trainer import Trainer

    lstm = dict(model="lstm-ptb-small", dataset="ptb", batch_size=4, bptt=5, train_subset=400,
                eval_subset=200, eval_batch_size=5, momentum=0.0, weight_decay=0.0, lr=1.0,
                steps=3, model_args={"hidden_size": 8, "num_layers": 2, "dropout": 0.5})

    def trained() -> torch.Tensor:
        trainer = trainer_for(**lstm)
        for _ in range(3):
            trainer.train_step()
        return torch.cat([p.detach().reshape(-1) for p in trainer.params])

    ours = trained()
    monkeypatch.setattr(Trainer, "_seed_step", lambda self, seed: torch.manual_seed(seed))
    assert torch.equal(trained(), ours)
    monkeypatch.setattr(Trainer, "_seed_step", lambda self, seed: torch.manual_seed(seed + 1))
    assert not torch.equal(trained(), ours)
