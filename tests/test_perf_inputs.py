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


def _run(root, name, sparsifier, train, status="complete", model="fnn3", P=4):
    folder = root / "exp" / name
    folder.mkdir(parents=True)
    manifest = {"status": status, "model": model, "sparsifier": sparsifier, "density": 0.001,
                "world_size": P, "device": "cpu", "config": {"batch_size": 128}}
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


def test_counts_prefer_the_max_over_workers(tmp_path):
    d, k = 199210, 199
    steps = np.arange(6)
    _run(tmp_path, "g", "gaussiank", {"step": steps, "selected": [float(k)] * 6,
                                       "count_max": [0, 0, 2 * k, 2 * k, 2 * k, 2 * k]})
    got = inputs.count_ratio(tmp_path, "fnn3", "gaussiank", 0.001, d)
    assert got.value == pytest.approx(2.0) and "count_max" in got.source


def test_counts_read_selected_max_first_over_its_own_k(tmp_path):
    d, k = 199210, 199
    steps = np.arange(6)
    # the training loop's columns: k (target per worker), selected (mean), min/median/max
    _run(tmp_path, "g", "gaussiank", {
        "step": steps, "k": np.full(6, 2 * k, dtype=np.int64),
        "selected": [1.1 * 2 * k] * 6, "selected_min": [0.5 * 2 * k] * 6,
        "selected_median": [2 * k] * 6, "selected_max": [9e9, 9e9] + [3 * 2 * k] * 4,
        "count_max": [5 * k] * 6})
    got = inputs.count_ratio(tmp_path, "fnn3", "gaussiank", 0.001, d)
    # selected_max wins over count_max and the mean; divided by the run's own k, not k(d)
    assert got.value == pytest.approx(3.0) and "selected_max / k" in got.source
    # without k: divided by the nominal k of (density, d)
    _run(tmp_path / "b", "g", "gaussiank", {"step": steps, "selected": [1.0] * 6,
                                             "selected_max": [4.0 * k] * 6})
    got = inputs.count_ratio(tmp_path / "b", "fnn3", "gaussiank", 0.001, d)
    assert got.value == pytest.approx(4.0) and "selected_max" in got.source
    # an all-missing selected_max falls back to count_max
    _run(tmp_path / "c", "g", "gaussiank", {"step": steps, "selected_max": [np.nan] * 6,
                                             "count_max": [2.0 * k] * 6})
    got = inputs.count_ratio(tmp_path / "c", "fnn3", "gaussiank", 0.001, d)
    assert got.value == pytest.approx(2.0) and "count_max" in got.source


def test_counts_from_per_worker_columns(tmp_path):
    k = 199
    steps = np.arange(4)
    _run(tmp_path, "g", "gaussiank", {"step": steps, "selected": [1.0] * 4,
                                       "count_0": [k] * 4, "count_1": [3 * k] * 4})
    got = inputs.count_ratio(tmp_path, "fnn3", "gaussiank", 0.001, 199210)
    assert got.value == pytest.approx(3.0) and "per-worker" in got.source


def test_counts_fall_back_to_the_mean_then_nominal(tmp_path):
    k = 199
    _run(tmp_path, "g", "gaussiank", {"step": np.arange(5), "selected": [1.5 * k] * 5})
    got = inputs.count_ratio(tmp_path, "fnn3", "gaussiank", 0.001, 199210)
    assert got.value == pytest.approx(1.5) and "mean over workers" in got.source
    nominal = inputs.count_ratio(tmp_path, "fnn3", "dgc", 0.001, 199210)
    assert nominal.value == 1.0 and "nominal" in nominal.source
    assert inputs.count_ratio(None, "fnn3", "topk", 0.001, 10).source.startswith("exact")


def test_recorded_counts_are_a_ratio_to_the_recorded_runs_own_k(tmp_path):
    """A run of a narrower model (its own k = 90) predicts the counts of the full-size model
    as count/k, not as count / k(d of the model predicted)."""
    from topkscope.schema import part_name

    folder = _run(tmp_path, "w", "topk", {"step": np.arange(6), "selected": [90.0] * 6},
                  model="vgg16")
    (folder / "stats").mkdir()
    rows = [{"step": s, "rank": r, "layer": "__global__", "kind": "u", "density": 0.001,
             "k": 90, "gaussiank_2019_count": (2 if r else 3) * 90}
            for s in range(6) for r in range(2)]
    pd.DataFrame(rows).to_parquet(folder / "stats" / part_name(0, 0))
    got = inputs.count_ratio(tmp_path, "vgg16", "gaussiank-2019", 0.001, 14_728_266)
    assert got.value == pytest.approx(3.0)  # max over ranks per step / the run's own k
    assert "gaussiank-2019_count / k" in got.source


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
