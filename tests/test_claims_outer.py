"""The claims on pseudo-gradients (topkscope.claims.outer): the trainings of an outer-loop
experiment compared by seed (SparseLoCo-style vs dense DiLoCo, vs per-step TopK-SGD at equal
bytes, with and without outer momentum), chunk-wise against global Top-k and the error
quantization adds, each against a computation by hand; outer runs never pair with the per-step
convergence claims."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from tests.test_analysis_claims import RunLike, eval_run
from topkscope import claims
from topkscope.claims.outer import training_of

EXP = "outer-m"
OUTER = {"sparseloco": ("chunk-topk", {"inner_steps": 15, "step": "average"}),
         "sparseloco-nesterov": ("chunk-topk", {"inner_steps": 15, "step": "nesterov"}),
         "diloco": ("dense", {"inner_steps": 15, "step": "nesterov"}),
         "diloco-average": ("dense", {"inner_steps": 15, "step": "average"}),
         "topk-per-step": ("topk", None)}


def trained(training: str, seed: int, metric: float, sent: float = 100.0) -> RunLike:
    sparsifier, outer = OUTER[training]
    run = eval_run("m", sparsifier, metric, experiment=EXP, seed=seed, sent=sent)
    run.train = run.train.assign(bytes_sent=8.0 * sent)
    if outer:
        run.manifest["outer"] = {**outer, "lr": 1.0, "error_decay": 0.95}
    return run


def test_each_run_names_its_training():
    for name in OUTER:
        assert training_of(trained(name, 0, 0.9).manifest) == name


def test_trainings_are_compared_by_seed_against_the_margin():
    sparse, dense = [0.950, 0.955, 0.948], [0.952, 0.958, 0.951]
    runs = [trained("sparseloco", s, m, sent=1.0) for s, m in enumerate(sparse)]
    runs += [trained("diloco", s, m, sent=140.0) for s, m in enumerate(dense)]
    runs += [trained("topk-per-step", s, m - 0.1, sent=1.0) for s, m in enumerate(sparse)]
    table = claims.build(runs).set_index("claim")
    row = table.loc["sparseloco_accuracy"]
    diffs = 100 * (np.array(sparse) - np.array(dense))
    half = sps.t.ppf(0.975, 2) * diffs.std(ddof=1) / np.sqrt(3)
    assert row["ci_low"] == pytest.approx(diffs.mean() - half)
    assert row["verdict"] == ("holds" if diffs.mean() - half > -1 else "inconclusive")
    assert row["bytes_ratio"] == pytest.approx(1 / 140)
    assert row["condition"] == f"{EXP}: sparseloco vs diloco" and row["diff_unit"] == "points"
    per_step = table.loc["sparseloco_accuracy_per_step"]
    assert per_step["verdict"] == "holds" and per_step["diff_mean"] == pytest.approx(10.0)
    # nothing to compare the momentum with: not measured, said so
    momentum = table.loc["outer_momentum_accuracy"]
    assert momentum["verdict"] == "insufficient-data" and momentum["reason"] == "not-measured"
    # the outer runs are not paired with Top-k by the per-step convergence claims
    outer_claims = {c.name for c in claims.registered(family="outer", section="convergence")}
    assert set(table.index[table["section"] == "convergence"]) == outer_claims
    assert set(table.loc[table["section"] == "convergence", "claim_family"]) == {"outer"}
    assert not table.index.str.endswith("_count_in_training").any()


def test_chunk_wise_and_quantized_contraction_by_hand():
    """Recorded at the exchanges (step 15 i + 14): the first two exchanges are a phase of their
    own; quantization is judged on the set training sends (chunk-wise Top-k's) and, named
    apart, on the global Top-k set."""
    rng = np.random.default_rng(0)
    rows = []
    for exchange in range(40):
        exact = rng.uniform(0.5, 0.6)
        kept = 1 - exact
        chunk = 1 - kept * (0.95 if exchange % 4 else 0.8)   # every 4th keeps only 80%
        rows.append({"step": 15 * exchange + 14, "rank": 0, "layer": "__global__",
                     "kind": "u", "density": 0.015625, "numel": 1000, "k": 16,
                     "topk_ratio": exact, "chunk_topk_ratio": chunk,
                     "topk_quantized_ratio": exact + 0.05 * kept,
                     # the sent set loses 20% of its kept energy on every 5th exchange
                     "chunk_topk_quantized_ratio": chunk + (0.2 if exchange % 5 == 4 else 0.01)
                     * (1 - chunk)})
    manifest = {"experiment": EXP, "model": "m", "dataset": "mnist", "dataset_substitute": None,
                "sparsifier": "chunk-topk", "density": 0.015625, "status": "complete",
                "outer": {"inner_steps": 15, "step": "average", "lr": 1.0, "error_decay": 0.95}}
    table = claims.build([RunLike(manifest=manifest, stats=pd.DataFrame(rows))])
    table = table[table["section"].isin(("distribution", "check"))]  # the outer u's rows
    assert set(table["phase"]) == {"first-exchanges", "later-exchanges"}
    later = table[table["phase"] == "later-exchanges"].set_index("claim")
    early = table[table["phase"] == "first-exchanges"].set_index("claim")
    assert early.loc["chunk_contraction", "n_units"] == 2  # exchanges 1 and 2 (steps 14, 29)
    chunk = later.loc["chunk_contraction"]
    expected = np.mean([bool(i % 4) for i in range(2, 40)])
    assert chunk["fraction"] == pytest.approx(expected) and chunk["n_units"] == 38
    assert chunk["verdict"] == "mixed" or chunk["reason"] == "share-on-the-cut"
    assert chunk["sparsifier"] == "chunk-topk" and chunk["recorder_density"] == 0.015625
    sent = later.loc["quantization_error"]
    lost = np.array([0.2 if i % 5 == 4 else 0.01 for i in range(2, 40)])
    assert sent["fraction"] == pytest.approx(np.mean(lost <= 0.1))
    assert sent["diff_mean"] == pytest.approx(np.median(lost))
    assert "chunk-wise Top-k's sent set" in sent["evidence"]
    whole = later.loc["quantization_error_global"]
    assert whole["fraction"] == 1.0 and whole["diff_mean"] == pytest.approx(0.05)
    assert whole["verdict"] in ("holds", "inconclusive")
    assert "the global Top-k set" in whole["evidence"]


def test_an_answer_counts_one_seed_as_one_seed():
    """An answer's numbers read '1 seed' for one seed, 'N seeds' otherwise."""
    from topkscope.claims.phrases import seeds

    assert seeds({"n_seeds": 1}) == "1 seed"
    assert seeds({"n_seeds": 3.0}) == "3 seeds"
    assert seeds({"n_seeds": float("nan")}) == ""


def test_a_swept_reference_is_compared_at_its_best_rate_and_says_so():
    """DiLoCo at three outer learning rates: the comparison uses the rate with the best mean
    final metric over the seeds both share, and the row's reference names it and the rates."""
    sparse = [0.950, 0.955, 0.948]
    runs = [trained("sparseloco", s, m) for s, m in enumerate(sparse)]
    by_rate = {0.5: [0.90, 0.91, 0.90], 0.7: [0.96, 0.965, 0.958], 0.9: [0.93, 0.94, 0.93]}
    for lr, finals in by_rate.items():
        for s, m in enumerate(finals):
            run = trained("diloco", s, m)
            run.manifest["outer"]["lr"] = lr
            runs.append(run)
    row = claims.build(runs).set_index("claim").loc["sparseloco_accuracy"]
    diffs = 100 * (np.array(sparse) - np.array(by_rate[0.7]))
    assert row["diff_mean"] == pytest.approx(diffs.mean())
    assert row["reference"] == "diloco lr 0.7 (best of 3)"
    assert "best mean final held-out metric" in row["rule"]
    assert "diloco lr 0.7 (best of 3): the best of outer lr 0.5, 0.7, 0.9" in row["evidence"]
    assert row["condition"] == f"{EXP}: sparseloco vs diloco"
