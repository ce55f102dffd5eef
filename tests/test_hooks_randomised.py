"""Randomised estimators in the Recorder draw from (seed, rank, step) alone.

A simulated run (one Recorder for every rank) and a torchrun run (one Recorder per process)
must record the same randk/dgc numbers, whatever else each Recorder saw before.
"""

import torch

from topkscope.analysis.runs import load
from topkscope.hooks import Recorder
from topkscope.manifest import Manifest

LAYOUT = [("a.weight", 0, 3000), ("b.weight", 3000, 1000)]


def _vector(seed: int) -> torch.Tensor:
    return torch.randn(4000, generator=torch.Generator().manual_seed(seed))


def _rows(folder, rank, step):
    stats = load(folder).stats
    sel = stats[(stats["rank"] == rank) & (stats["step"] == step) & (stats["kind"] == "u")]
    return sel.sort_values(["layer", "density"])[["randk_ratio", "dgc_ratio", "dgc_count"]]


def test_randomised_columns_do_not_depend_on_what_the_recorder_saw_before(tmp_path):
    common = dict(densities=[0.01, 0.1], sparsifiers=["randk", "dgc"], kinds=("u",), seed=7)
    # "simulated": one recorder sees ranks 0 and 1 at steps 0..2
    with Recorder(tmp_path / "sim", **common) as rec:
        for step in range(3):
            for rank in range(2):
                rec.record(step, rank, u=_vector(10 * step + rank), layout=LAYOUT)
    # "torchrun rank 1": a recorder of its own that only sees rank 1, and only step 2
    Manifest(tmp_path / "proc").write()  # rank 0's process would have written it
    with Recorder(tmp_path / "proc", rank=1, **common) as rec:
        rec.record(2, 1, u=_vector(21), layout=LAYOUT)
    a, b = _rows(tmp_path / "sim", 1, 2), _rows(tmp_path / "proc", 1, 2)
    assert len(a) == len(b) == 6
    assert a.to_numpy().tolist() == b.to_numpy().tolist()


def test_different_steps_and_seeds_draw_differently(tmp_path):
    u = _vector(0)
    for seed in (1, 2):
        with Recorder(tmp_path / f"s{seed}", densities=[0.1], sparsifiers=["randk"],
                      kinds=("u",), per_layer=False, seed=seed) as rec:
            for step in range(2):
                rec.record(step, 0, u=u, layout=LAYOUT)
    s1, s2 = load(tmp_path / "s1").stats, load(tmp_path / "s2").stats
    r1 = s1.sort_values("step").randk_ratio.to_numpy()
    r2 = s2.sort_values("step").randk_ratio.to_numpy()
    assert r1[0] != r1[1]  # a new draw every step on the same vector
    assert r1[0] != r2[0]  # and another one for another seed


def test_a_stateful_selector_adapts_on_each_rank_alone(tmp_path):
    """sidco's stage count adapts on the vectors of one rank: a recorder of every rank and a
    recorder of rank 1 alone record the same sidco numbers for rank 1."""
    from tests.test_sparsify_cases import mixture, normal

    common = dict(densities=[0.001], sparsifiers=["sidco"], kinds=("u",), per_layer=False)
    whole = [("w", 0, 100_000)]
    vectors = {0: [normal(100_000, s) for s in range(8)],   # one stage keeps 7 k: M stays 1
               1: [mixture(100_000, s) for s in range(8)]}  # one stage keeps k / 4: M climbs
    with Recorder(tmp_path / "sim", **common) as rec:
        for step in range(8):
            for rank in range(2):
                rec.record(step, rank, u=vectors[rank][step], layout=whole)
    Manifest(tmp_path / "proc").write()
    with Recorder(tmp_path / "proc", rank=1, **common) as rec:
        for step in range(8):
            rec.record(step, 1, u=vectors[1][step], layout=whole)
    counts = {}
    for name in ("sim", "proc"):
        stats = load(tmp_path / name).stats
        mine = stats[stats["rank"] == 1].sort_values("step")
        counts[name] = mine["sidco_count"].astype(int).tolist()
    assert counts["sim"] == counts["proc"]
    assert min(counts["sim"][:5]) > max(counts["sim"][5:])  # rank 1 adapted (M = 2) at step 4
