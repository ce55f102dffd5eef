"""Convergence rows count every seed (Top-k's failed ones, unfinished runs) and show the whole
run's traffic against Top-k without warm-up; a bimodal traffic outcome cannot hold."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.test_analysis_claims import eval_run
from tests.test_claims_evidence import TOPK, failed_run, rows_of, traffic_run
from topkscope import claims
from topkscope.analysis import seeds


def plain_run(seed: int, sent: float, metric: float, steps: int = 10):
    """Top-k without warm-up: `sent` elements every step."""
    run = eval_run("acc", "topk", metric, seed=seed)
    run.train = pd.DataFrame({"step": np.arange(steps), "epoch": np.arange(steps) // 2,
                              "selected": np.full(steps, sent)})
    return run


def test_traffic_vs_plain_topk_counts_the_warmups_own_cost():
    runs = [traffic_run("topk", s, 100.0, 10.0, m) for s, m in enumerate(TOPK[:3])]
    runs += [traffic_run("gaussiank-2019", s, 300.0, 12.0, m) for s, m in enumerate(TOPK[:3])]
    runs += [plain_run(s, 10.0, m) for s, m in enumerate(TOPK[:3])]
    table = claims.build(runs)
    for claim in ("gaussiank_accuracy", "gaussiank_traffic"):
        row = rows_of(table, claim, condition="warmup=paper; rho=0.001").iloc[0]
        # (4 * 300 + 6 * 12) / (10 * 10): the warm-up's elements against plain Top-k's
        assert row["traffic_vs_plain_topk"] == pytest.approx(12.72)
        assert "whole run against Top-k without warm-up 12.7×" in row["evidence"]
    # a run without a warmup=none Top-k: no ratio, not a made-up one
    alone = claims.build(runs[:6])
    row = rows_of(alone, "gaussiank_traffic").iloc[0]
    assert np.isnan(row["traffic_vs_plain_topk"])


def test_seeds_that_disagree_in_kind_cannot_hold_and_show_their_spread():
    runs = [traffic_run("topk", s, 10.0, 10.0, m) for s, m in enumerate(TOPK[:3])]
    bimodal = [1.0, 19.5, 1.06]  # 0.1x, 1.95x, 0.106x of Top-k's at the target density
    runs += [traffic_run("redsync", s, 10.0, t, m) for s, (t, m) in
             enumerate(zip(bimodal, TOPK[:3]))]
    row = rows_of(claims.build(runs), "redsync_traffic").iloc[0]
    assert row["verdict"] == "inconclusive"
    assert "seeds disagree in kind" in row["cause"] and "seed 1 1.95×" in row["cause"]
    # the same mean without a seed above 4/3 and none below 2/3 holds
    runs = runs[:3] + [traffic_run("redsync", s, 10.0, 7.2, m) for s, m in enumerate(TOPK[:3])]
    row = rows_of(claims.build(runs), "redsync_traffic").iloc[0]
    assert row["verdict"] == "holds" and "disagree" not in row["cause"]


def test_disagree_in_kind():
    assert seeds.disagree_in_kind([0.1, 1.95])
    assert not seeds.disagree_in_kind([0.7, 1.3])
    assert not seeds.disagree_in_kind([0.1, 0.5])


def test_a_failed_topk_seed_is_counted_and_never_lets_the_claim_hold():
    close = [0.951, 0.959, 0.956, 0.953, 0.957]
    runs = [eval_run("acc", "topk", m, seed=s) for s, m in enumerate(TOPK)]
    runs += [eval_run("acc", "randk", m, seed=s) for s, m in enumerate(close)]
    assert rows_of(claims.build(runs), "randk_accuracy")["verdict"].iloc[0] == "holds"
    runs[4] = failed_run("topk", 4, 0.958)  # Top-k's seed 4 diverged after its last eval
    row = rows_of(claims.build(runs), "randk_accuracy").iloc[0]
    assert row["n_failed_seeds"] == 1 and row["verdict"] == "inconclusive"
    assert row["cause"].startswith("Top-k seed 4 failed")


@pytest.mark.parametrize("status", ["interrupted", "running"])
def test_an_unfinished_run_counts_as_an_unfinished_seed(status):
    close = [0.951, 0.959, 0.956, 0.953, 0.957]
    runs = [eval_run("acc", "topk", m, seed=s) for s, m in enumerate(TOPK)]
    runs += [eval_run("acc", "randk", m, seed=s) for s, m in enumerate(close[:4])]
    runs.append(eval_run("acc", "randk", close[4], seed=4, status=status))
    row = rows_of(claims.build(runs), "randk_accuracy").iloc[0]
    assert row["n_seeds"] == 5 and row["n_unfinished_seeds"] == 1
    assert row["verdict"] == "inconclusive"
    assert f"method seed 4 unfinished ({status})" in row["cause"]
    assert f"is unfinished, {status}: counted with its last evaluated accuracy" in row["evidence"]
    # a complete run of the seed wins over the unfinished attempt
    runs.append(eval_run("acc", "randk", close[4], seed=4))
    row = rows_of(claims.build(runs), "randk_accuracy").iloc[0]
    assert row["n_unfinished_seeds"] == 0 and row["verdict"] == "holds"


def test_the_claims_command_reads_unfinished_runs_as_unfinished_seeds(tmp_path):
    """Real folders through the loader: an interrupted run without any rows yet is read (not
    refused) and counted as an unfinished seed."""
    import json

    from topkscope.analysis.runs import load
    from topkscope.commands.claims import readable_runs
    from topkscope.manifest import runs_at

    def save(run, name):
        folder = tmp_path / "acc-conv" / name
        folder.mkdir(parents=True)
        manifest = {**run.manifest, "start_time": "2026-01-01T00:00:00",
                    "versions": {"topkscope": "0"}}
        (folder / "manifest.json").write_text(json.dumps(manifest))
        if not run.eval.empty:
            run.eval.to_parquet(folder / "eval.parquet")

    close = [0.951, 0.959, 0.956]
    for s, m in enumerate(TOPK[:3]):
        save(eval_run("acc", "topk", m, seed=s), f"topk-{s}")
    for s, m in enumerate(close[:2]):
        save(eval_run("acc", "randk", m, seed=s), f"randk-{s}")
    unfinished = eval_run("acc", "randk", 0.0, seed=2, status="interrupted")
    unfinished.eval = unfinished.eval.iloc[:0]
    save(unfinished, "randk-2")
    runs = readable_runs([tmp_path], load, runs_at, progress_shown=False)
    assert len(runs) == 6
    row = rows_of(claims.build(runs), "randk_accuracy").iloc[0]
    assert row["n_seeds"] == 3 and row["n_unfinished_seeds"] == 1
    assert row["verdict"] in ("fails", "inconclusive")
    assert "before any evaluation: counted as accuracy 0" in row["evidence"]
