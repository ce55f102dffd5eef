"""Measured inputs: selection interpolation, compute from runs, the counts adapter's fallbacks."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from topkscope.perf import inputs


def _selection():
    rows = []
    for d, ms in ((10**5, 1.0), (10**6, 10.0), (10**7, 40.0)):
        rows.append({"distribution": "normal", "d": d, "density": 0.001, "method": "gaussiank",
                     "median_ms": ms, "device": "cpu"})
        rows.append({"distribution": "normal", "d": d, "density": 0.01, "method": "gaussiank",
                     "median_ms": 100 * ms, "device": "cpu"})
    return pd.DataFrame(rows)


def test_selection_interpolates_log_log_and_says_so():
    sel = _selection()
    at = inputs.selection_time(sel, "gaussiank", 10**6, 0.001)
    assert at.value == pytest.approx(0.010)
    mid = inputs.selection_time(sel, "gaussiank", 316228, 0.001)  # ~10^5.5
    assert mid.value == pytest.approx(math.sqrt(1.0 * 10.0) / 1e3, rel=1e-5)
    assert "interpolated" in mid.source and "rho=0.001" in mid.source
    # beyond the range: the last segment's slope (x4 per decade), said so
    far = inputs.selection_time(sel, "gaussiank", 10**8, 0.001)
    assert far.value == pytest.approx(0.160)
    assert "extrapolated" in far.source
    # nearest density; the source names both
    near = inputs.selection_time(sel, "gaussiank", 10**6, 0.002)
    assert near.value == pytest.approx(0.010) and "for 0.002" in near.source
    assert inputs.selection_time(sel, "sidco", 10**6, 0.001) is None
    assert inputs.selection_time(sel, "dense", 10**6, 0.001).value == 0.0


def test_selection_csv_checked(tmp_path):
    bad = tmp_path / "x.csv"
    pd.DataFrame({"a": [1]}).to_csv(bad, index=False)
    with pytest.raises(ValueError, match="lacks"):
        inputs.read_selection_csv(bad)
    with pytest.raises(ValueError, match="does not exist"):
        inputs.read_selection_csv(tmp_path / "none.csv")


def _run(root, name, sparsifier, train, status="complete", model="fnn3", P=4, seed=0,
         schedule="none"):
    folder = root / "exp" / name
    folder.mkdir(parents=True)
    manifest = {"status": status, "model": model, "sparsifier": sparsifier, "density": 0.001,
                "world_size": P, "device": "cpu", "config": {"batch_size": 128}, "seed": seed,
                "density_schedule": schedule}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    pd.DataFrame(train).to_parquet(folder / "train.parquet")
    return folder


def test_compute_time_from_complete_runs(tmp_path):
    steps = np.arange(10)
    _run(tmp_path, "a", "topk", {"step": steps, "time_compute": [9.0, 9.0] + [0.01] * 8})
    _run(tmp_path, "b", "dense", {"step": steps, "time_compute": [0.03] * 10})
    _run(tmp_path, "c", "dense", {"step": steps, "time_compute": [5.0] * 10}, status="failed")
    got = inputs.compute_time(tmp_path, "fnn3")
    assert got.value == pytest.approx(0.02)  # median of the two complete runs' medians
    assert "2 fnn3 run(s)" in got.source and "batch 128" in got.source
    assert inputs.compute_time(tmp_path, "vgg16") is None


G19 = "gaussiank-2019"


def test_counts_prefer_the_max_over_workers(tmp_path):
    d, k = 199210, 199
    steps = np.arange(6)
    _run(tmp_path, "g", G19, {"step": steps, "selected": [float(k)] * 6,
                              "count_max": [0, 0, 3 * k, 3 * k, 3 * k, 3 * k]})
    got = inputs.count_ratio(tmp_path, "fnn3", G19, 0.001, d)
    # the mean over every step (the first two count too): (0 + 0 + 4 x 3) / 6
    assert got.value == pytest.approx(2.0) and "count_max" in got.source


def test_counts_are_the_mean_over_steps_of_the_max_over_its_own_k(tmp_path):
    """Step time is linear in the largest count: the mean over steps of selected_max / k (the
    run's own k of each step, e.g. a warm-up's), not the median."""
    d, k = 199210, 199
    steps = np.arange(4)
    own_k = np.array([4 * k, 2 * k, k, k], dtype=np.int64)  # a density warm-up
    _run(tmp_path, "g", G19, {
        "step": steps, "k": own_k, "selected": [1.1 * k] * 4, "selected_min": [0] * 4,
        "selected_median": [k] * 4, "selected_max": own_k * np.array([1, 1, 1, 5]),
        "count_max": [9 * k] * 4})
    got = inputs.count_ratio(tmp_path, "fnn3", G19, 0.001, d)
    # selected_max wins over count_max and the mean; per step / that step's k: 1, 1, 1, 5
    assert got.value == pytest.approx(2.0) and "selected_max / k" in got.source
    assert got.value != pytest.approx(float(np.median([1, 1, 1, 5])))
    ratio, how = inputs.run_count_ratio(tmp_path / "exp" / "g", G19, 0.001, k)
    assert ratio == pytest.approx(2.0) and how == "train.parquet selected_max / k"
    # without k: over the nominal k of (density, the run's d)
    _run(tmp_path / "b", "g", G19, {"step": steps, "selected": [1.0] * 4,
                                    "selected_max": [4.0 * k, 2.0 * k, 2.0 * k, 4.0 * k]})
    got = inputs.count_ratio(tmp_path / "b", "fnn3", G19, 0.001, d)
    assert got.value == pytest.approx(3.0) and "selected_max / k of rho=0.001" in got.source
    # an all-missing selected_max falls back to count_max
    _run(tmp_path / "c", "g", G19, {"step": steps, "selected_max": [np.nan] * 4,
                                    "count_max": [2.0 * k] * 4})
    got = inputs.count_ratio(tmp_path / "c", "fnn3", G19, 0.001, d)
    assert got.value == pytest.approx(2.0) and "count_max" in got.source


def test_counts_per_seed_then_the_mean_over_seeds(tmp_path):
    k = 199
    for seed, ratio in ((0, 2.0), (1, 4.0), (2, 3.0)):
        _run(tmp_path, f"s{seed}", G19, {"step": np.arange(3), "k": [k] * 3,
                                         "selected_max": [int(ratio * k)] * 3}, seed=seed)
    # a second run of seed 2: that seed's ratio is the mean of its two runs (3 and 5 -> 4)
    _run(tmp_path, "s2b", G19, {"step": np.arange(3), "k": [k] * 3,
                                "selected_max": [5 * k] * 3}, seed=2)
    got = inputs.count_ratio(tmp_path, "fnn3", G19, 0.001, 199210)
    assert isinstance(got, inputs.Counts) and got.condition == "warmup=none"
    assert dict(got.per_seed) == pytest.approx({0: 2.0, 1: 4.0, 2: 4.0})
    assert got.value == pytest.approx(10.0 / 3) and (got.low, got.high) == (2.0, 4.0)
    assert "mean over 3 seed(s)" in got.source and "4 run(s)" in got.source


def test_conditions_are_never_mixed_and_dense_never_counts(tmp_path):
    k = 199
    for seed in range(2):
        _run(tmp_path, f"none{seed}", G19, {"step": np.arange(3), "k": [k] * 3,
                                            "selected_max": [0, 0, 3]}, seed=seed)
        _run(tmp_path, f"paper{seed}", G19, {"step": np.arange(3), "k": [k] * 3,
                                             "selected_max": [2 * k, 3 * k, 2 * k]},
             seed=seed, schedule="paper")
        _run(tmp_path, f"dense{seed}", "dense", {"step": np.arange(3), "k": [199210] * 3,
                                                 "selected_max": [199210] * 3}, seed=seed)
    found = inputs.count_ratios(tmp_path, "fnn3", G19, 0.001, 199210)
    by = {c.condition: c.value for c in found}
    assert by == pytest.approx({"warmup=none": 1 / k, "warmup=paper": 7 / 3})
    with pytest.raises(ValueError, match="several conditions"):
        inputs.count_ratio(tmp_path, "fnn3", G19, 0.001, 199210)
    paper = inputs.count_ratio(tmp_path, "fnn3", G19, 0.001, 199210, condition="warmup=paper")
    assert paper.value == pytest.approx(7 / 3) and "warmup=paper" in paper.source
    # no dgc run, and nothing recorded dgc's counts: nominal, whatever the dense runs sent
    assert [c.source for c in inputs.count_ratios(tmp_path, "fnn3", "dgc", 0.001, 199210)] == [
        "nominal k (no run of this method measured its counts)"]
    _run(tmp_path / "d", "dense", "dense", {"step": np.arange(3), "k": [199210] * 3,
                                            "selected_max": [199210] * 3})
    assert inputs.method_conditions(tmp_path / "d", "fnn3", G19, 0.001) == []


def test_counts_from_per_worker_columns(tmp_path):
    k = 199
    steps = np.arange(4)
    _run(tmp_path, "g", G19, {"step": steps, "selected": [1.0] * 4,
                              "count_0": [k] * 4, "count_1": [3 * k] * 4})
    got = inputs.count_ratio(tmp_path, "fnn3", G19, 0.001, 199210)
    assert got.value == pytest.approx(3.0) and "per-worker" in got.source


def test_counts_fall_back_to_the_mean_then_nominal(tmp_path):
    k = 199
    _run(tmp_path, "g", G19, {"step": np.arange(5), "selected": [1.5 * k] * 5})
    got = inputs.count_ratio(tmp_path, "fnn3", G19, 0.001, 199210)
    assert got.value == pytest.approx(1.5) and "mean over workers" in got.source
    nominal = inputs.count_ratio(tmp_path, "fnn3", "dgc", 0.001, 199210)
    assert nominal.value == 1.0 and "nominal" in nominal.source
    for exact in ("topk", "gaussiank", "randk", "dense", "gtopk"):  # k (or d) by construction
        assert inputs.count_ratio(tmp_path, "fnn3", exact, 0.001, 10).source.startswith("exact")
    assert not inputs.sends_k(G19) and not inputs.sends_k("dgc")


def test_recorded_counts_are_a_ratio_to_the_recorded_runs_own_k(tmp_path):
    """A run of a narrower model (its own k = 90) predicts the counts of the full-size model
    as count/k, not as count / k(d of the model predicted)."""
    from topkscope.schema import part_name

    def recorded(sparsifier, name, per_rank):
        folder = _run(tmp_path, name, sparsifier, {"step": np.arange(6),
                                                   "selected": [90.0] * 6}, model="vgg16")
        (folder / "stats").mkdir()
        rows = [{"step": s, "rank": r, "layer": "__global__", "kind": "u", "density": 0.001,
                 "k": 90, "gaussiank_2019_count": per_rank[r] * 90}
                for s in range(6) for r in range(2)]
        pd.DataFrame(rows).to_parquet(folder / "stats" / part_name(0, 0))

    recorded("topk", "w", (3, 2))
    recorded("dense", "x", (50, 50))  # a dense run's recorder: never counted
    got = inputs.count_ratio(tmp_path, "vgg16", "gaussiank-2019", 0.001, 14_728_266)
    assert got.value == pytest.approx(3.0)  # max over ranks per step / the run's own k
    assert "gaussiank-2019_count / k on topk's u" in got.source
    assert "not gaussiank-2019's own training" in got.source


def test_compute_time_skips_runs_of_a_resized_model(tmp_path):
    folder = _run(tmp_path, "narrow", "topk", {"step": np.arange(10), "time_compute": [0.05] * 10},
                  model="vgg16")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["config"]["model_args"] = {"width_multiplier": 0.25}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    assert inputs.compute_time(tmp_path, "vgg16") is None
    _run(tmp_path, "full", "topk", {"step": np.arange(10), "time_compute": [0.5] * 10},
         model="vgg16")
    assert inputs.compute_time(tmp_path, "vgg16").value == pytest.approx(0.5)


def test_input_is_the_models_type_under_both_names():
    """Input is defined once, in topkscope.perf.model (below inputs and published, which both
    use it); inputs.Input is that same class, so values made under either name compare equal."""
    from topkscope.perf import model

    assert inputs.Input is model.Input and inputs.Input.__module__ == "topkscope.perf.model"
    assert inputs.Input(1.0, "x", "gpu") == model.Input(1.0, "x", "gpu")
