"""The recorder's tail statistics: the Hill columns against a float64 loop on every row, kind
and density, and the sampled coordinates (coords/) against the vectors they were taken from."""

import math

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

from tests.test_analysis_tails import hill_by_loop
from topkscope import kernel, schema
from topkscope.analysis import tails
from topkscope.analysis.runs import load
from topkscope.hooks import GLOBAL, Recorder
from topkscope.hooks.rows import coordinate_sample, segments_of
from topkscope.sparsify import k_from_density

LAYOUT = [("w1", 0, 30_000), ("b1", 30_000, 40), ("w2", 30_040, 8_000), ("b2", 38_040, 10)]
D = 38_100
DENSITIES = [0.001, 0.01, 0.05]


def heavy_vectors(seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    g = torch.distributions.StudentT(torch.tensor(3.0)).sample((D,)).float() * 1e-3
    e = torch.randn(D, generator=gen) * 1e-4
    return {"g": g, "u": g + e, "e": e}


def rows_of(x: np.ndarray):
    yield GLOBAL, x
    for name, offset, n in LAYOUT:
        yield name, x[offset : offset + n]


@pytest.mark.parametrize("topk_kinds", [("u",), ("g", "u", "e")])
def test_hill_columns_equal_a_float64_loop_on_every_ranked_row(tmp_path, topk_kinds):
    vecs = heavy_vectors(1)
    with Recorder(tmp_path, schedule=1, densities=DENSITIES, topk_kinds=topk_kinds,
                  coordinates=0) as rec:
        rec.record(0, 0, **vecs, layout=LAYOUT)
    stats = load(tmp_path).stats
    checked = 0
    for kind in "gue":
        for layer, x in rows_of(vecs[kind].double().numpy()):
            for _, row in stats[(stats.kind == kind) & (stats.layer == layer)].iterrows():
                k = k_from_density(row.density, x.size)
                if kind not in topk_kinds or k - 1 < kernel.HILL_MIN_ORDER:
                    assert math.isnan(row.hill_alpha) and math.isnan(row.hill_alpha_low)
                    continue
                want = hill_by_loop(x, k - 1)
                assert row.hill_alpha == pytest.approx(want, rel=1e-9)
                low, high = kernel.hill_interval(want, k)
                assert row.hill_alpha_low == pytest.approx(low, rel=1e-9)
                assert row.hill_alpha_high == pytest.approx(high, rel=1e-9)
                checked += 1
    assert checked >= 4 * len(topk_kinds)  # the big rows at every density at least


def test_the_recorded_hill_index_is_the_statistics_hill_at_m_equal_k_minus_1(tmp_path):
    """One formula: the recorder's column equals analysis.tails.hill on the same vector."""
    vecs = heavy_vectors(2)
    with Recorder(tmp_path, schedule=1, densities=[0.01], per_layer=False,
                  coordinates=0) as rec:
        rec.record(3, 0, **vecs, layout=LAYOUT)
    row = load(tmp_path).stats.query("kind == 'u' and layer == @GLOBAL").iloc[0]
    ref = tails.hill(vecs["u"].numpy(), m=int(row.k) - 1)
    assert row.hill_alpha == pytest.approx(ref["hill_alpha"], rel=1e-9)
    assert row.hill_alpha == pytest.approx(3.0, rel=0.25)  # a Student-t(3) sample


def test_sampled_coordinates_are_the_vectors_values_at_a_fixed_seeded_sample(tmp_path):
    steps = {s: heavy_vectors(10 + s) for s in range(3)}
    with Recorder(tmp_path, schedule=1, densities=[0.01], coordinates=50, seed=7,
                  flush_every=2) as rec:
        for s, vecs in steps.items():
            for rank in (0, 1):
                rec.record(s, rank, **vecs, layout=LAYOUT)
    run = load(tmp_path)
    coords = run.coords
    picked, layers = coordinate_sample(segments_of(LAYOUT, D), 50, 7)
    assert len(coords) == 3 * 2 * 3 * 50  # steps x ranks x kinds x coordinates
    assert coords.groupby(["step", "rank", "kind"]).size().eq(50).all()
    for (step, _rank, kind), rows in coords.groupby(["step", "rank", "kind"]):
        np.testing.assert_array_equal(rows["coordinate"], picked)
        assert list(rows["layer"]) == list(layers)
        np.testing.assert_array_equal(rows["value"],
                                      steps[step][kind].double().numpy()[picked])
    spans = {name: (offset, offset + n) for name, offset, n in LAYOUT}  # no gap in LAYOUT
    for c, layer in zip(picked, layers):
        assert spans[layer][0] <= c < spans[layer][1]
    table = pq.read_table(next((tmp_path / "coords").glob("part-*.parquet")))
    assert table.schema.names == [*schema.RUN_KEYS, *schema.COORD_COLUMNS]
    assert run.manifest["recorder"]["coordinates"] == 50
    # the same sample on every rank and for every seed-7 recorder: follow one coordinate
    wide = coords[coords.kind == "u"].pivot_table(index=["step", "rank"], columns="coordinate",
                                                  values="value")
    assert wide.shape == (6, 50)
    assert tails.per_coordinate(wide.to_numpy(), coordinates=list(wide.columns),
                                min_tail=2)["coordinate"].tolist() == list(picked)


def test_no_coordinates_no_folder_and_a_gap_is_the_whole_models(tmp_path):
    with Recorder(tmp_path / "none", schedule=1, densities=[0.01], coordinates=0) as rec:
        rec.record(0, 0, **heavy_vectors(3), layout=LAYOUT)
    assert not (tmp_path / "none" / "coords").exists()
    assert load(tmp_path / "none").coords.empty
    gappy = segments_of([("a", 10, 20)], 100)
    picked, layers = coordinate_sample(gappy, 100, 0)
    assert list(picked) == list(range(100))
    assert set(layers[10:30]) == {"a"} and set(layers[:10]) | set(layers[30:]) == {GLOBAL}
    with pytest.raises(ValueError, match="coordinates"):
        Recorder(tmp_path / "bad", coordinates=-1)


def test_a_resume_sets_coordinates_aside_with_the_rest(tmp_path):
    from topkscope.hooks.lifecycle import supersede_from

    with Recorder(tmp_path, schedule=1, densities=[0.01], coordinates=5, flush_every=1) as rec:
        for s in range(4):
            rec.record(s, 0, **heavy_vectors(s), layout=LAYOUT)
    aside = supersede_from(tmp_path, 2)
    kept = pd.concat([pq.read_table(p).to_pandas()
                      for p in (tmp_path / "coords").glob("part-*.parquet")])
    moved = pd.concat([pq.read_table(p).to_pandas()
                       for p in (aside / "coords").glob("part-*.parquet")])
    assert sorted(kept.step.unique()) == [0, 1] and sorted(moved.step.unique()) == [2, 3]
