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
    from topkscope.claims.answers import OUTER_CLAIMS

    assert set(table.index[table["section"] == "convergence"]) == set(OUTER_CLAIMS)
    assert not table.index.str.endswith("_count_in_training").any()


def test_chunk_wise_and_quantized_contraction_by_hand():
    rng = np.random.default_rng(0)
    rows = []
    for step in range(40):
        exact = rng.uniform(0.5, 0.6)
        kept = 1 - exact
        chunk = 1 - kept * (0.95 if step % 4 else 0.8)   # every 4th step keeps only 80%
        rows.append({"step": step, "rank": 0, "layer": "__global__", "kind": "u",
                     "density": 0.015625, "numel": 1000, "k": 16, "topk_ratio": exact,
                     "chunk_topk_ratio": chunk, "topk_quantized_ratio": exact + 0.05 * kept})
    manifest = {"experiment": EXP, "model": "m", "dataset": "mnist", "dataset_substitute": None,
                "sparsifier": "chunk-topk", "density": 0.015625, "status": "complete",
                "outer": {"inner_steps": 15, "step": "average", "lr": 1.0, "error_decay": 0.95}}
    table = claims.build([RunLike(manifest=manifest, stats=pd.DataFrame(rows))]).set_index("claim")
    chunk = table.loc["chunk_contraction"]
    assert chunk["fraction"] == pytest.approx(0.75) and chunk["n_units"] == 40
    assert chunk["verdict"] == "mixed" or chunk["reason"] == "share-on-the-cut"
    assert chunk["sparsifier"] == "chunk-topk"
    quantized = table.loc["quantization_error"]
    assert quantized["fraction"] == 1.0 and quantized["diff_mean"] == pytest.approx(0.05)
    assert quantized["verdict"] == "holds"


def test_an_answer_counts_one_seed_as_one_seed():
    """The evidence behind an answer reads '1 seed' for one seed, 'N seeds' otherwise."""
    from topkscope.claims.answers import _strength

    def rows(seeds):
        return pd.DataFrame({"model": ["fnn3"] * len(seeds), "n_runs": [2] * len(seeds),
                             "n_seeds": seeds, "n_units": [64] * len(seeds),
                             "section": ["convergence"] * len(seeds)})

    assert _strength(rows([1])) == "FNN-3; 2 runs; 1 seed"
    assert _strength(rows([1, 3])) == "FNN-3; 2 runs; 1–3 seeds"
