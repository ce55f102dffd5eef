"""The Recorder in a small TopK-SGD loop: what it writes equals what the workers computed."""

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from tests._hooks_loop import layout_of, run, tiny_model
from topkscope.analysis import contraction
from topkscope.analysis.runs import load
from topkscope.hooks import GLOBAL, Recorder
from topkscope.manifest import Manifest
from topkscope.sparsify import available, get_sparsifier, k_from_density

DENSITIES = [0.01, 0.05, 0.3]


def rows_of(x: np.ndarray, layout) -> list[tuple[str, np.ndarray]]:
    return [(GLOBAL, x)] + [(name, x[o : o + n]) for name, o, n in layout]


def test_u_is_g_plus_previous_e_and_stats_match_references(tmp_path):
    steps = 4
    with Recorder(tmp_path, schedule=1, snapshot_schedule=1, densities=DENSITIES,
                  snapshot_kinds=("g", "u", "e"), topk_kinds=("g", "u", "e"),
                  flush_every=2) as rec:
        hist = run(steps, rec)
    r = load(tmp_path)
    assert r.manifest["status"] == "complete"
    layout = layout_of(tiny_model())
    for rank in range(2):
        for step in range(steps):
            u = r.snapshot(step, rank)
            g = r.snapshot(step, rank, "g")
            e_prev = r.snapshot(step - 1, rank, "e") if step else np.zeros_like(u)
            assert u.dtype == np.float32
            np.testing.assert_array_equal(u, g + e_prev)  # error feedback, bit for bit
            np.testing.assert_array_equal(u, hist.u[step, rank].numpy())
    # every statistic of every (step, rank, layer, kind, density) against float64 numpy/scipy
    for (step, rank), _ in hist.u.items():
        for kind in "gue":
            vec = getattr(hist, kind)[step, rank].double().numpy()
            for layer, x in rows_of(vec, layout):
                sel = r.stats[(r.stats.step == step) & (r.stats["rank"] == rank)
                              & (r.stats.layer == layer) & (r.stats.kind == kind)]
                assert list(sel.density) == DENSITIES
                row = sel.iloc[0]
                assert row.numel == x.size and row.nonfinite == 0
                assert math.isclose(row["mean"], x.mean(), rel_tol=1e-6, abs_tol=1e-15)
                assert math.isclose(row["std"], x.std(), rel_tol=1e-6)
                assert math.isclose(row["norm"], np.linalg.norm(x), rel_tol=1e-6)
                assert row.max_abs == np.abs(x).max()
                assert row.zero_frac == np.mean(x == 0)
                if x.std() > 0:
                    assert math.isclose(row["skew"], stats.skew(x), rel_tol=1e-6, abs_tol=1e-9)
                    assert math.isclose(row.excess_kurtosis, stats.kurtosis(x), rel_tol=1e-6,
                                        abs_tol=1e-9)
                for _, srow in sel.iterrows():
                    k = k_from_density(srow.density, x.size)
                    assert srow.k == k
                    ref = contraction.topk_ratio(x, k)
                    assert (math.isnan(ref) and math.isnan(srow.topk_ratio)) or math.isclose(
                        srow.topk_ratio, ref, rel_tol=1e-6, abs_tol=1e-13)
                    assert srow.classic_bound == contraction.classic_bound(k, x.size)
                    assert srow.paper_bound == contraction.paper_bound(k, x.size)
                    assert srow.gaussian_ratio == contraction.gaussian_ratio(k, x.size)


def test_topk_ratio_recomputed_from_a_saved_snapshot(tmp_path):
    with Recorder(tmp_path, schedule=1, snapshot_schedule=[3], densities=DENSITIES) as rec:
        run(5, rec)
    r = load(tmp_path)
    assert set(r.snapshots.step) == {3} and set(r.snapshots["rank"]) == {0, 1}
    for rank in (0, 1):
        u = r.snapshot(3, rank)
        got = r.stats[(r.stats.step == 3) & (r.stats["rank"] == rank) & (r.stats.kind == "u")
                      & (r.stats.layer == GLOBAL)]
        for _, row in got.iterrows():
            ref = contraction.topk_ratio(u, k_from_density(row.density, u.size))
            assert math.isclose(row.topk_ratio, ref, rel_tol=1e-6)


def test_snapshot_ranks_limits_who_writes_raw_vectors_not_the_statistics(tmp_path):
    with Recorder(tmp_path / "one", schedule=1, snapshot_schedule=[1, 3], densities=[0.05],
                  snapshot_ranks=[0]) as rec:
        run(5, rec)
    with Recorder(tmp_path / "all", schedule=1, snapshot_schedule=[1, 3],
                  densities=[0.05]) as rec:
        run(5, rec)
    one, every = load(tmp_path / "one"), load(tmp_path / "all")
    assert sorted(zip(one.snapshots.step, one.snapshots["rank"])) == [(1, 0), (3, 0)]
    assert set(every.snapshots["rank"]) == {0, 1}
    np.testing.assert_array_equal(one.snapshot(3, 0), every.snapshot(3, 0))
    pd.testing.assert_frame_equal(one.stats, every.stats)  # both ranks' rows, same numbers
    assert one.manifest["recorder"]["snapshot_ranks"] == [0]
    assert every.manifest["recorder"]["snapshot_ranks"] is None
    for bad, said in (([], "names no rank"), ([-1], "snapshot_ranks")):
        with pytest.raises(ValueError, match=said):
            Recorder(tmp_path / "bad", snapshot_ranks=bad)


def test_layer_rows_add_up_to_the_global_row(tmp_path):
    with Recorder(tmp_path, densities=[0.05]) as rec:
        run(3, rec)
    s = load(tmp_path).stats
    layers = s[s.layer != GLOBAL].groupby(["step", "rank", "kind"])
    glob = s[s.layer == GLOBAL].set_index(["step", "rank", "kind"])
    numel = layers.numel.sum()
    sq = layers.norm.apply(lambda n: (n**2).sum())
    assert (numel == glob.numel.loc[numel.index]).all()
    np.testing.assert_allclose(sq.values, glob.norm.loc[sq.index].values ** 2, rtol=1e-9)
    assert len(s.layer.unique()) == 1 + len(layout_of(tiny_model()))


def test_recording_does_not_change_what_training_selects(tmp_path):
    names = [n for n in ("randk", "dgc", "gaussiank", "sidco", "redsync") if n in available()]
    plain = run(6, None)
    with Recorder(tmp_path, schedule=1, hist_schedule=[2], snapshot_schedule=[3],
                  densities=[0.01, 0.1], sparsifiers=names) as rec:
        recorded = run(6, rec)
    for key, idx in plain.idx.items():
        assert torch.equal(idx, recorded.idx[key]), key
    assert torch.equal(plain.params, recorded.params)


def test_randomised_training_sparsifier_draws_the_same_with_recording(tmp_path):
    # training uses a seeded Rand-k and draws its batches from the global generator
    plain = run(4, None, sparsifier="randk", sparsifier_args={"seed": 7})
    with Recorder(tmp_path, densities=[0.05], sparsifiers=["randk", "dgc"]) as rec:
        recorded = run(4, rec, sparsifier="randk", sparsifier_args={"seed": 7})
    assert torch.equal(plain.params, recorded.params)


def test_approximate_sparsifier_columns_match_a_rerun_on_u(tmp_path):
    names = [n for n in ("gaussiank", "gaussiank-2019", "dense", "redsync", "sidco-fixed")
             if n in available()]  # stateless: a fresh instance per row reruns each
    with Recorder(tmp_path, schedule=1, snapshot_schedule=1, densities=DENSITIES,
                  sparsifiers=names) as rec:
        run(3, rec)
    r = load(tmp_path)
    layout = layout_of(tiny_model())
    for name in names:
        p = name.replace("-", "_")
        assert r.stats[f"{p}_count"].dtype == "Int64"
        not_u = r.stats[r.stats.kind != "u"]
        assert not_u[f"{p}_count"].isna().all() and not_u[f"{p}_ratio"].isna().all()
    for step in range(3):
        for rank in (0, 1):
            u = r.snapshot(step, rank)
            for layer, x in rows_of(u, layout):
                sel = r.stats[(r.stats.step == step) & (r.stats["rank"] == rank)
                              & (r.stats.layer == layer) & (r.stats.kind == "u")]
                for _, row in sel.iterrows():
                    k = k_from_density(row.density, x.size)
                    exact = set(np.argsort(-np.abs(x.astype(np.float64)), kind="stable")[:k])
                    for name in names:
                        p = name.replace("-", "_")
                        idx = get_sparsifier(name).select(torch.from_numpy(x.copy()), k).numpy()
                        v = x.astype(np.float64).copy()
                        v[idx] = 0
                        assert row[f"{p}_count"] == idx.size
                        assert math.isclose(row[f"{p}_ratio"], (v**2).sum() / (x.astype(
                            np.float64) ** 2).sum(), rel_tol=1e-6, abs_tol=1e-12)
                        if len(set(np.abs(x))) == x.size:  # no ties: the top-k set is unique
                            assert row[f"{p}_recall"] == len(exact & set(idx)) / k
                        if name == "topk":
                            assert row[f"{p}_recall"] == 1.0
                            assert math.isclose(row[f"{p}_ratio"], row.topk_ratio, rel_tol=1e-9,
                                                abs_tol=1e-13)


def test_recall_counts_ties_at_the_kth_value_generously():
    from topkscope.hooks.rows import plan_rows, whole
    from topkscope.hooks.topk_sums import RowTops, selection_rows

    u = torch.tensor([4.0, 1.0, 1.0, 1.0, 0.5, 0.0])
    plan = plan_rows(whole(6), [0.5], per_layer=False)  # k = 3: {0} plus two of the three 1s

    class Pick:
        def __init__(self, idx):
            self.idx = torch.tensor(idx)

        def select(self, x, k):
            return self.idx

    tops = RowTops(u.abs()[None], u.abs().amax()[None, None], plan)
    kth = tops.kth()
    above = tops.count_above(kth)
    sumsq = (u.double() ** 2).sum()[None]
    cols = selection_rows(u, plan, sumsq, kth[0], above[0],
                          {"a": Pick([1, 2, 3]), "b": Pick([0, 3]), "c": Pick([4, 5])})
    assert cols["a_recall"][0, 0] == pytest.approx(2 / 3)  # three tied 1s, two places left
    assert cols["b_recall"][0, 0] == pytest.approx(2 / 3)
    assert cols["c_recall"][0, 0] == 0.0
    assert cols["b_count"][0, 0] == 2
    assert cols["b_ratio"][0, 0] == pytest.approx((1 + 1 + 0.25) / (16 + 3 + 0.25))


def test_histograms_on_their_schedule_cover_every_element(tmp_path):
    with Recorder(tmp_path, schedule=[0], hist_schedule=[1, 3], hist_bins=16,
                  hist_range=4.0) as rec:
        run(4, rec)
    r = load(tmp_path)
    assert set(r.hist.step) == {1, 3} and set(r.stats.step) == {0}
    counts = r.hist.groupby(["step", "rank", "layer", "kind"])["count"].sum()
    sizes = {GLOBAL: sum(n for _, _, n in layout_of(tiny_model()))}
    sizes.update({name: n for name, _, n in layout_of(tiny_model())})
    # e of a layer with all entries selected is constant zero: no histogram for it
    for (_, _, layer, _), total in counts.items():
        assert total == sizes[layer]
    bins = r.hist.groupby(["step", "rank", "layer", "kind"]).bin.apply(list)
    assert all(b == list(range(18)) for b in bins)
    first = r.hist[r.hist.bin == 0]
    assert np.isneginf(first.left).all()
    assert np.isposinf(r.hist[r.hist.bin == 17].right).all()


def test_flushes_bound_memory_and_parts_are_rank_local(tmp_path):
    rec = Recorder(tmp_path, schedule=1, densities=[0.05], flush_every=3, rank=0)
    rows_per_step = None
    for step in range(10):
        run_rows_before = rec._stats.rows
        run(1, None)  # (work between steps)
        g = torch.randn(100)
        rec.record(step, 0, u=g, layout=[("a", 0, 60), ("b", 60, 40)])
        rec.record(step, 1, u=g * 2, layout=[("a", 0, 60), ("b", 60, 40)])
        if rows_per_step is None:
            rows_per_step = rec._stats.rows - run_rows_before
        assert rec._stats.rows <= 3 * rows_per_step  # never more than flush_every steps held
    rec.close()
    parts = sorted(p.name for p in (tmp_path / "stats").iterdir())
    assert parts == [f"part-r00000-{i:06d}.parquet" for i in range(4)]
    s = load(tmp_path).stats
    assert sorted(s.step.unique()) == list(range(10))
    both = s.groupby("step")["rank"].nunique()
    assert (both == 2).all()  # a step's ranks are never split across parts
    for p in (tmp_path / "stats").iterdir():
        assert len(pd.read_parquet(p).step.unique()) <= 3


def test_a_folder_reopened_to_append_continues_the_part_sequence(tmp_path):
    for attempt in range(2):
        with Recorder(tmp_path, densities=[0.1], mode="append" if attempt else None) as rec:
            rec.record(attempt, 0, u=torch.randn(50), layout=[("w", 0, 50)])
    assert sorted(p.name for p in (tmp_path / "stats").iterdir()) == [
        "part-r00000-000000.parquet", "part-r00000-000001.parquet"]


def test_attach_names_layers_and_captures_raw_g(tmp_path):
    model = tiny_model()
    rec = Recorder(tmp_path, densities=[0.1], snapshot_schedule=1, snapshot_kinds=("g",))
    rec.attach(model)
    x, y = torch.randn(8, 12), torch.randint(0, 3, (8,))
    torch.nn.functional.cross_entropy(model(x), y).backward()
    g = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    rec.record(0, 0, u=g * 3)  # no layout, no g: both from the hooks
    rec.close()
    r = load(tmp_path)
    np.testing.assert_array_equal(r.snapshot(0, 0, "g"), g.numpy())
    names = [n for n, _ in model.named_parameters()]
    assert list(r.stats[r.stats.kind == "g"].layer.unique()) == [GLOBAL, *names]
    gl = r.stats[(r.stats.layer == GLOBAL)].set_index("kind")
    assert gl.loc["u", "norm"] == pytest.approx(3 * gl.loc["g", "norm"], rel=1e-6)
    assert not rec._handles  # close removed the hooks


def test_e_is_derived_from_the_selected_indices(tmp_path):
    with Recorder(tmp_path, densities=[0.05], snapshot_schedule=1,
                  snapshot_kinds=("u", "e")) as rec:
        hist = run(3, rec, pass_e=False)
    r = load(tmp_path)
    for (step, rank), e in hist.e.items():
        np.testing.assert_array_equal(r.snapshot(step, rank, "e"), e.numpy())


def test_owned_manifest_fails_with_the_message(tmp_path):
    with pytest.raises(RuntimeError, match="diverged"):
        with Recorder(tmp_path, flush_every=1) as rec:
            rec.record(0, 0, u=torch.randn(30), layout=[("w", 0, 30)])
            raise RuntimeError("loss diverged")
    m = json.loads((tmp_path / "manifest.json").read_text())
    assert m["status"] == "failed" and "loss diverged" in m["error"]
    assert load(tmp_path).stats.step.tolist()  # what was recorded is kept


def test_a_manifest_passed_in_is_updated_but_its_status_left_to_the_owner(tmp_path):
    manifest = Manifest(tmp_path, experiment="x", run_id="y")
    manifest.write()
    rec = Recorder(tmp_path, densities=[0.1], flush_every=1, manifest=manifest)
    for step in range(3):
        rec.record(step, 0, u=torch.randn(30), layout=[("w", 0, 30)])
    on_disk = json.loads((tmp_path / "manifest.json").read_text())
    assert on_disk["recorder"]["flushed_through_step"] == 1
    assert on_disk["recorder"]["densities"] == [0.1]
    rec.close()
    on_disk = json.loads((tmp_path / "manifest.json").read_text())
    assert on_disk["status"] == "running" and on_disk["recorder"]["stats_parts"] == 3


def test_wants_follows_the_schedules(tmp_path):
    rec = Recorder(tmp_path, schedule={"every": 10}, hist_schedule={"steps": [15]},
                   snapshot_schedule="at:7", sparsifiers=["gaussiank"],
                   sparsifier_schedule=[4])
    assert [s for s in range(30) if rec.wants(s)] == [0, 4, 7, 10, 15, 20]
    rec.record(3, 0, u=torch.randn(10), layout=[("w", 0, 10)])  # nothing scheduled: no rows
    rec.close()
    assert load(tmp_path).stats.empty


SELECTORS = ["gaussiank-2019", "dgc", "randk", "tail-k"]  # randomised (dgc, randk), stateful


def selector_frame(tmp_path, name: str, **settings) -> pd.DataFrame:
    """The stats of u of one recorder run over the tiny loop: statistics every step, the
    approximate SELECTORS every other step, with `settings`."""
    with Recorder(tmp_path / name, schedule=1, sparsifier_schedule={"every": 2},
                  densities=[0.05, 0.3], sparsifiers=SELECTORS, kinds=("u",), **settings) as rec:
        run(6, rec)
    stats = load(tmp_path / name).stats
    return stats.sort_values(["step", "rank", "layer", "density"]).reset_index(drop=True)


def test_selectors_run_on_their_schedule_and_on_the_whole_model_row_when_asked(tmp_path):
    """sparsifier_schedule: the S_* columns of a stats step without the selectors are null;
    sparsifier_per_layer=False: only the whole-model row has them, equal to the per-layer
    recorder's (the randomised and stateful selectors draw and adapt the same there), and
    every other column is the same."""
    both = selector_frame(tmp_path, "layers")
    whole = selector_frame(tmp_path, "whole", sparsifier_per_layer=False)
    columns = [c for c in both.columns if any(c.startswith(f"{s.replace('-', '_')}_")
                                              for s in SELECTORS)]
    from topkscope.columns import SELECTOR_COLUMNS

    assert len(columns) == len(SELECTOR_COLUMNS) * len(SELECTORS)
    quantized = [c for c in columns if c.endswith("_quantized_ratio")]  # NaN without quantize
    assert len(quantized) == len(SELECTORS) and both[quantized].isna().all().all()
    on_schedule = both["step"] % 2 == 0
    assert both.loc[on_schedule, [c for c in columns if c not in quantized]].notna().all().all()
    assert both.loc[~on_schedule, columns].isna().all().all()
    is_global = whole["layer"] == GLOBAL
    pd.testing.assert_frame_equal(whole.loc[is_global], both.loc[is_global])
    assert whole.loc[~is_global, columns].isna().all().all()
    pd.testing.assert_frame_equal(whole.drop(columns=columns), both.drop(columns=columns))
    manifest = json.loads((tmp_path / "whole" / "manifest.json").read_text())
    assert manifest["recorder"]["sparsifier_per_layer"] is False
    with pytest.raises(ValueError, match="sparsifier_per_layer = 'no' must be true or false"):
        Recorder(tmp_path / "bad", sparsifier_per_layer="no")


def test_recorder_sparsifiers_leave_every_global_random_state_alone():
    import random

    from topkscope.hooks.rows import plan_rows, whole
    from topkscope.hooks.topk_sums import RowTops, selection_rows

    class GreedyRandom:  # draws from all three global generators, as a careless method might
        def select(self, x, k):
            random.random()
            np.random.rand()
            return torch.randperm(x.numel())[:k]

    u = torch.randn(50)
    plan = plan_rows(whole(50), [0.1], per_layer=False)
    tops = RowTops(u.abs()[None], u.abs().amax()[None, None], plan)
    kth = tops.kth()
    torch.manual_seed(1), np.random.seed(1), random.seed(1)
    expected = (torch.rand(3), np.random.rand(3), [random.random() for _ in range(3)])
    torch.manual_seed(1), np.random.seed(1), random.seed(1)
    selection_rows(u, plan, (u.double() ** 2).sum()[None], kth[0], tops.count_above(kth)[0],
                   {"greedy": GreedyRandom()})
    assert torch.equal(torch.rand(3), expected[0])
    np.testing.assert_array_equal(np.random.rand(3), expected[1])
    assert [random.random() for _ in range(3)] == expected[2]


def test_e_that_is_not_the_residual_of_u_is_measured_directly(tmp_path):
    # without error feedback the loop hands e = 0 while selected is the Top-k of u
    u = torch.randn(400)
    idx = torch.topk(u.abs(), 20).indices
    e_other = torch.randn(400) * 0.01
    with Recorder(tmp_path, densities=[0.05], topk_kinds=("u", "e")) as rec:
        rec.record(0, 0, u=u, e=torch.zeros(400), layout=[("w", 0, 400)], selected=idx)
        rec.record(1, 0, u=u, e=e_other, layout=[("w", 0, 400)], selected=idx)
        rec.record(2, 0, u=u, e=u.index_fill(0, idx, 0), layout=[("w", 0, 400)], selected=idx)
    s = load(tmp_path).stats.set_index(["step", "layer", "kind"])
    assert s.loc[(0, GLOBAL, "e"), "zero_frac"] == 1.0 and s.loc[(0, GLOBAL, "e"), "norm"] == 0
    x = e_other.double().numpy()
    assert s.loc[(1, GLOBAL, "e"), "std"] == pytest.approx(x.std(), rel=1e-9)
    assert s.loc[(1, GLOBAL, "e"), "skew"] == pytest.approx(stats.skew(x), rel=1e-6, abs=1e-9)
    r = u.index_fill(0, idx, 0).double().numpy()
    assert s.loc[(2, GLOBAL, "e"), "excess_kurtosis"] == pytest.approx(stats.kurtosis(r),
                                                                     rel=1e-6, abs=1e-9)
    assert s.loc[(2, GLOBAL, "e"), "topk_ratio"] == pytest.approx(
        contraction.topk_ratio(r, 20), rel=1e-6)
    assert math.isnan(s.loc[(2, GLOBAL, "g"), "topk_ratio"]) if (2, GLOBAL, "g") in s.index \
        else True


def test_record_leaves_its_inputs_untouched_and_takes_half_precision(tmp_path):
    gen = torch.Generator().manual_seed(3)
    u = torch.randn(300, generator=gen)
    idx = torch.topk(u.abs(), 9).indices
    e, g = u.index_fill(0, idx, 0), torch.randn(300, generator=gen)
    before = [t.clone() for t in (u, e, g, idx)]
    with Recorder(tmp_path, densities=[0.03], hist_schedule=1, snapshot_schedule=1,
                  sparsifiers=["gaussiank"], topk_kinds=("g", "u", "e")) as rec:
        rec.record(0, 0, u=u, e=e, g=g, layout=[("a", 0, 100), ("b", 100, 200)], selected=idx)
        rec.record(1, 0, u=u.half(), g=g.bfloat16(), layout=[("a", 0, 100), ("b", 100, 200)],
                   selected=idx)
    for t, b in zip((u, e, g, idx), before):
        assert torch.equal(t, b)
    s = load(tmp_path).stats.set_index(["step", "layer", "kind"])
    half = u.half().double().numpy()
    assert s.loc[(1, GLOBAL, "u"), "std"] == pytest.approx(half.std(), rel=1e-9)
    assert s.loc[(1, GLOBAL, "e"), "zero_frac"] == pytest.approx(
        np.mean(u.half().index_fill(0, idx, 0).numpy() == 0))
