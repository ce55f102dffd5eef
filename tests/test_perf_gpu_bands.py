"""The numbers of the P = 16 GPU bands (topkscope.perf.gpu_bands), the memory-traffic model of
the threshold selectors (topkscope.perf.traffic) and the published torch.topk measurements
(topkscope.perf.torch_topk), each against a hand computation on small synthetic inputs."""

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from topkscope.perf import gpu_bands as gb
from topkscope.perf import gtopkssgd, torch_topk, traffic
from topkscope.perf import model as pm
from topkscope.perf.gpu_bands import ON_TOPK_U, OWN_TRAINING
from topkscope.perf.model import Band, Input
from topkscope.perf.networks import PRESETS

D = 14_728_266
LOGGED = "measured on a GPU (kljp/topk_results@x job/topk.o1; ...)"


def validation(**extra) -> pd.DataFrame:
    rows = [
        # dense runs at the common batch (128) on an A100 and an unnamed GPU, one at batch 64
        {"job": 1, "model": "vgg16", "method": "dense", "batch_per_gpu": 128, "gpu": "A100",
         "compute_s": 0.027, "measured_s": 0.035, "params": D, "family": "one-node dense"},
        {"job": 2, "model": "vgg16", "method": "dense", "batch_per_gpu": 128,
         "gpu": "not named", "compute_s": 0.033, "measured_s": 0.049, "params": D,
         "family": "one-node dense"},
        {"job": 3, "model": "vgg16", "method": "dense", "batch_per_gpu": 64, "gpu": "A100",
         "compute_s": 0.010, "measured_s": 0.090, "params": D, "family": "one-node dense"},
        # sparse rows: the exchange beyond the model's all-gather, 0.2 ms and 1.4 ms
        {"job": 4, "model": "vgg16", "method": "topk", "batch_per_gpu": 128, "gpu": "A100",
         "params": D, "family": "one-node sparse", "exchange_s": 0.0015,
         "predicted_communicate_s": 0.0001, "ratio_slowest": 0.95, "ratio": 0.9},
        {"job": 5, "model": "vgg16", "method": "randk", "batch_per_gpu": 128, "gpu": "A100",
         "params": D, "family": "one-node sparse", "exchange_s": 0.0003,
         "predicted_communicate_s": 0.0001, "ratio_slowest": 0.85, "ratio": 0.84},
    ]
    return pd.DataFrame(rows).assign(**extra)


def selection() -> pd.DataFrame:
    return pd.DataFrame([
        {"method": "topk", "model": "vgg16", "d": D, "job": 4, "phase": "target",
         "low_s": 0.18, "high_s": 0.19, "slowest_high_s": 0.21, "label": LOGGED},
        {"method": "topk", "model": "vgg16", "d": D, "job": 4, "phase": "warm-up",
         "low_s": 0.17, "high_s": 0.2, "slowest_high_s": 0.24, "label": LOGGED},
        {"method": "randk", "model": "vgg16", "d": D, "job": 5, "phase": "target",
         "low_s": 1e-4, "high_s": 2e-4, "slowest_high_s": 3e-4, "label": LOGGED},
        # a fitted row: no job, no slowest worker; never read as a logged COMP
        {"method": "topk", "model": "vgg16", "d": D, "job": None, "phase": "any k",
         "low_s": 1e-6, "high_s": 1e-6, "slowest_high_s": None, "label": "fitted by"}])


def measured_counts(p5=0.8, p95=1.6, basis=None, model="vgg16", density=0.001) -> pd.DataFrame:
    """A measured-counts table of one row (topkscope.perf.inputs.counts_table's columns)."""
    return pd.DataFrame([{"model": model, "method": gb.METHOD, "density": density,
                          "basis": basis or OWN_TRAINING, "n_runs": 3, "n_steps": 210,
                          "count_p5": p5, "count_median": (p5 + p95) / 2, "count_p95": p95,
                          "source": f"measured here: fixture ({basis or OWN_TRAINING})"}])


def sources(tmp_path, counts=None, **kw) -> gb.Sources:
    evaluations = tmp_path / "selector_counts.csv"
    pd.DataFrame([{"method": gb.METHOD, "source": "fnn3-training", "evaluations": e}
                  for e in (1, 2, 2, 3)]).to_csv(evaluations, index=False)
    return gb.Sources(kw.get("validation", validation()), selection(),
                      kw.get("gtopk", gtopkssgd.measurements()),
                      pd.DataFrame() if counts is None else counts, evaluations,
                      torch_topk.measurements(),
                      {"vgg16": 0.666, "alexnet": 0.655, "resnet20": 0.665})


def one_node_only() -> pd.DataFrame:
    """gtopkssgd's rows less its 16-worker Top-k throughputs: no multi-node excess at P = 16
    (the overhead band is then the one-node rows' alone)."""
    table = gtopkssgd.measurements()
    return table[~((table["method"] == "topk") & (table["workers"] == 16))]


# ------------------------------------------------------------------ bands by hand
def test_compute_band_is_the_dense_runs_of_the_common_batch(tmp_path):
    bands = gb.model_bands("vgg16", sources(tmp_path))
    assert (bands["compute"].low, bands["compute"].high) == (0.027, 0.049)
    assert bands["batch"].low == 128
    assert "jobs 1, 2" in bands["compute"].source


def test_gtopkssgd_compute_is_its_one_worker_time_and_breakdown(tmp_path):
    bands = gb.model_bands("alexnet", sources(tmp_path), gb.TOPK_LOGGED)
    one_worker = 64 / 173.469  # batch / samples per s per worker (gtopkssgd.csv)
    assert bands["compute"].low == pytest.approx(0.257205)  # the breakdown's compute
    assert bands["compute"].high == pytest.approx(one_worker)
    # Top-k: the breakdown's compression, measured on the compute's own source: no fit added
    assert bands["topk"].low == bands["topk"].high == pytest.approx(0.383776)


def test_topk_band_spans_phases_the_slowest_worker_and_the_breakdown(tmp_path):
    bands = gb.model_bands("vgg16", sources(tmp_path), gb.TOPK_LOGGED)
    # low: min(the phases' 5th percentiles of the mean, the breakdown's 91.353 ms); high: the
    # slowest worker's 95th percentile over every phase
    assert bands["topk"].low == pytest.approx(0.091353)
    assert bands["topk"].high == pytest.approx(0.24)
    assert bands["topk"].grade == "published"


def test_topk_by_default_is_the_published_current_torch_topk(tmp_path):
    bands = gb.model_bands("vgg16", sources(tmp_path))
    t = torch_topk.seconds(torch_topk.measurements(), torch_topk.CURRENT, D)[0]
    assert bands["topk"].low == bands["topk"].high == pytest.approx(t)
    assert bands["topk"].grade == "published" and "pytorch/pytorch#164459" in bands["topk"].source


def test_topk_without_a_measurement_on_the_computes_gpus_uses_the_fit_times_its_ratios(tmp_path):
    rows = validation()
    extra = rows.iloc[:1].assign(model="resnet20", params=269_722, job=9, gpu="not named")
    src = sources(tmp_path, validation=pd.concat([rows, extra], ignore_index=True))
    bands = gb.model_bands("resnet20", src, gb.TOPK_LOGGED)
    fit = gtopkssgd.AUTHORS_TOPK_S * 269_722 * math.log2(269_722)
    fit_vgg = gtopkssgd.AUTHORS_TOPK_S * D * math.log2(D)
    ratios = [0.18 / fit_vgg, 0.21 / fit_vgg, 0.17 / fit_vgg, 0.24 / fit_vgg]
    breakdown = 0.001618  # ResNet-20's compression in the gtopkssgd breakdown
    assert bands["topk"].low == pytest.approx(min(breakdown, fit * min(ratios)))
    assert bands["topk"].high == pytest.approx(max(breakdown, fit * max(ratios)))
    assert bands["topk"].grade == "modelled"  # a fit of another GPU, scaled
    # the current torch.topk at d = 269,722 lies below the published sizes: extrapolated
    assert gb.model_bands("resnet20", src)["topk"].grade == "modelled"


def test_counts_come_from_the_measured_table_own_training_first_else_nominal(tmp_path):
    nominal = gb.model_bands("vgg16", sources(tmp_path))["counts"]
    assert nominal == Band(1.0, 1.0, gb.NOMINAL, "assumed")
    own = gb.model_bands("vgg16", sources(tmp_path, measured_counts()))["counts"]
    assert (own.low, own.high, own.grade) == (0.8, 1.6, "measured")
    # the rule's own training preferred over the recorder's count on Top-k's u
    both = pd.concat([measured_counts(13.6, 28.6, ON_TOPK_U), measured_counts()])
    assert gb.model_bands("vgg16", sources(tmp_path, both))["counts"].high == 1.6
    topk_u = gb.model_bands("vgg16", sources(tmp_path, both.iloc[:1]))["counts"]
    assert (topk_u.low, topk_u.high) == (13.6, 28.6) and ON_TOPK_U in topk_u.source
    # another model or another density: not this model's counts
    for table in (measured_counts(model="resnet20"), measured_counts(density=0.01)):
        assert gb.model_bands("vgg16", sources(tmp_path, table))["counts"].grade == "assumed"


def test_overhead_band_from_one_node_up_to_the_multi_node_excess(tmp_path):
    missed = np.array([0.0015 - 0.0001, 0.0003 - 0.0001])
    excess = gtopkssgd.sparse_excess(gtopkssgd.validation_table()).set_index("model")
    for model, d in (("vgg16", D), ("alexnet", 61_100_840)):
        band = gb.model_bands(model, sources(tmp_path))["overhead"]
        per_d = missed / D
        assert band.low == pytest.approx(min(missed.min(), per_d.min() * d))
        # gtopkssgd's Top-k at 16 workers: measured exchange less the model's, by hand
        rows = gtopkssgd.validation_table()
        row = rows[(rows["model"] == model) & (rows["method"] == "topk")
                   & (rows["workers"] == 16)].iloc[0]
        multi = row["measured_s"] - row["compute_s"] - row["select_s"] \
            - row["predicted_communicate_s"]
        assert band.high == pytest.approx(max(missed.max(), per_d.max() * d, multi))
        assert band.high == pytest.approx(excess.loc[model, "excess_s"])
        assert band.grade == "published" and "1 GbE" in band.source
    # without the multi-node rows: the one-node envelope alone
    band = gb.model_bands("vgg16", sources(tmp_path, gtopk=one_node_only()))["overhead"]
    assert band.high == pytest.approx(max(missed.max(), (missed / D).max() * D))


def test_every_input_is_graded(tmp_path):
    """compute and overhead published; select modelled on a named GPU and assumed where its
    slow end is the floor for an unnamed one; counts measured or, nominal, assumed."""
    named = sources(tmp_path, measured_counts(), validation=validation(gpu="A100"))
    assert gb.grades(gb.model_bands("vgg16", named)) == {
        "compute": "published", "topk": "published", "select": "modelled",
        "counts": "measured", "overhead": "published"}
    unnamed = gb.grades(gb.model_bands("vgg16", sources(tmp_path)))
    assert (unnamed["select"], unnamed["counts"]) == ("assumed", "assumed")
    for model in ("alexnet", "resnet50", "lstm-ptb"):  # gtopkssgd: its GPU is not named
        bands = gb.model_bands(model, sources(tmp_path))
        assert bands["select"].grade == "assumed" and bands["compute"].grade == "published"
    assert pm.weakest(["measured", "modelled", "published"]) == "modelled"
    with pytest.raises(ValueError, match="grade must be one of"):
        Band(0.0, 1.0, "x", "guessed")


def test_sparse_error_is_the_one_node_sparse_rows_with_the_slowest_selection():
    assert gb.sparse_error(validation()) == pytest.approx(0.15)
    cluster = {"no-overlap": 0.045, "wfbp": 0.275}
    assert gb.comparison_error("dense", cluster, 0.15) == 0.15
    assert gb.comparison_error("dense-wfbp", cluster, 0.15) == 0.275
    assert gb.comparison_error("gtopk", cluster, 0.15) == 0.15


def test_a_corner_is_the_models_step_and_the_overhead_lands_on_the_sparse_steps():
    net = PRESETS["ib100"]
    point = {"compute": 0.05, "topk": 0.2, "select": 0.004, "counts": 2.0, "overhead": 0.001}
    t = gb.steps(D, net, point, 0.666)
    rule = pm.step(gb.METHOD, 16, D, 0.001, net, Input(0.05, "t"),
                   pm.MethodInputs(Input(0.004, "t"), Input(2.0, "t")))["t_step"]
    dense = pm.step("dense", 16, D, 0.001, net, Input(0.05, "t"),
                    pm.MethodInputs(Input(0.0, "t"), Input(1.0, "t")))["t_step"]
    assert t[gb.METHOD] == pytest.approx(rule + 0.001)
    assert t["dense"] == pytest.approx(dense)
    assert t["gtopk"] - t["topk"] < 0  # the tree moves fewer pairs than the all-gather
    assert len(gb.corner_points({k: Band(0, 1, "") for k in gb.VARIED})) == 2 ** 5


def test_uses_names_the_inputs_a_comparison_depends_on(tmp_path):
    bands = gb.model_bands("vgg16", sources(tmp_path))
    net = PRESETS["ib100"]
    used = {b: [k for k in gb.VARIED if gb.uses(0.666, D, net, bands, (b,), k)]
            for b in ("dense-wfbp", "topk")}
    assert used["dense-wfbp"] == ["compute", "select", "counts", "overhead"]
    assert used["topk"] == list(gb.VARIED)


@pytest.mark.parametrize("name", ["counts", "select", "overhead"])
def test_flip_is_where_the_verdict_changes_outside_the_band(tmp_path, name):
    """Just inside the flip value the verdict over every corner of the other bands is the
    band's own; just beyond it, the flip's."""
    from topkscope.claims.verdicts import band_verdict

    bands = gb.model_bands("vgg16", sources(tmp_path, measured_counts(0.9, 1.1),
                                            gtopk=one_node_only()))
    net, errs = PRESETS["10gbe"], {"dense": 0.2}

    def judge(points):
        return band_verdict(points, ("dense",), errs)

    assert judge(gb.corners(0.666, D, net, bands, ("dense",))) == "holds"
    found = gb.flip(0.666, D, net, bands, ("dense",), name, judge)
    assert found is not None and found.value > bands[name].high and found.verdict != "holds"

    def verdict_at(value):
        pts = [{**p, name: value} for p in gb.corner_points(bands)]
        return judge(gb.speedups(0.666, D, net, pts, ("dense",)))

    assert verdict_at(found.value * (1 - 1e-6)) == "holds"
    assert verdict_at(found.value * (1 + 1e-6)) == found.verdict


@pytest.mark.parametrize("name, baseline", [("overhead", "dense"), ("overhead", "topk"),
                                             ("select", "dense-fp16"), ("counts", "dense")])
def test_breakeven_is_where_the_speedup_crosses_one_plus_e(tmp_path, name, baseline):
    """Just below the break-even value every corner of the other bands still clears 1 + e;
    just above it one does not (the overhead also lands on a sparse baseline's step)."""
    # Top-k's selection as the published runs logged it: the rule beats it
    bands = gb.model_bands("vgg16", sources(tmp_path, gtopk=one_node_only()), gb.TOPK_LOGGED)
    net, e = PRESETS["ib100"], 0.1
    limit = gb.breakeven(0.666, D, net, bands, baseline, e, name)
    assert math.isfinite(limit) and limit > (1.0 if name == "counts" else 0.0)
    corners = [p for p in gb.corner_points(bands)]

    def lowest(value):
        pts = [{**p, name: value} for p in corners]
        return min(s[baseline] for s in gb.speedups(0.666, D, net, pts, (baseline,)))

    assert lowest(limit * (1 - 1e-6)) > 1 + e
    assert lowest(limit * (1 + 1e-3)) <= 1 + e


# ------------------------------------------------------------------ the memory-traffic model
def test_traffic_model_against_a_float64_restatement(tmp_path):
    sel = selection()
    evaluations = tmp_path / "e.csv"
    pd.DataFrame({"method": [gb.METHOD] * 3, "source": ["fnn3-training", "t3", "t3"],
                  "evaluations": [2, 1, 3]}).to_csv(evaluations, index=False)
    for gpus, (b_lo, b_hi) in ((("A100",), (1555e9, 2039e9)),
                               (("A100", "not named"), (300e9, 2039e9)),
                               (("not named",), (300e9, 2039e9))):
        band = traffic.selection_band(gb.METHOD, D, gpus, sel, evaluations)
        kernel_hi = 2e-4 / 4  # Rand-k's 95th percentile over its fewest 4 kernels
        low = np.float64((36 + 7 * 1) * D) / (1.0 * b_hi) + (9 + 4 * 1) * 5e-6
        high = np.float64((36 + 7 * 3) * D) / (0.5 * b_lo) + (9 + 4 * 3) * kernel_hi
        assert band.low == pytest.approx(float(low), rel=1e-12)
        assert band.high == pytest.approx(float(high), rel=1e-12)
        assert "recorded 1-3 over 3 calls" in band.source
    # no recording: the loop's bounds, said so
    band = traffic.selection_band("redsync-2019", D, ("A100",), sel, tmp_path / "none.csv")
    assert "its loop's bounds 1-3" in band.source
    with pytest.raises(ValueError, match="no memory-traffic counts for 'dgc'"):
        traffic.selection_band("dgc", D, ("A100",), sel)


def test_committed_band_and_traffic_tables_are_generated_and_shown():
    committed = pd.read_csv(traffic.TRAFFIC_CSV)
    fresh = traffic.table(gb.input_gpus())
    pd.testing.assert_frame_equal(committed, fresh, check_exact=False, rtol=1e-9)
    bands = pd.read_csv(gb.BANDS_CSV)
    pd.testing.assert_frame_equal(bands, gb.bands_table(), check_exact=False, rtol=1e-9)
    docs = (gb.REFERENCE.parents[1] / "docs" / "scaling.md").read_text()
    assert traffic.markdown(committed) in docs and gb.bands_markdown(bands) in docs
    assert torch_topk.markdown() in docs


# ------------------------------------------------------------------ torch.topk, published
# The table of pytorch/pytorch#164459's description (2025-10-02), as it reads there: H20,
# float32, the top 100 values. The two batched shapes are many short slices, not one slice of d.
PR_164459_TABLE = """
| Input Shape    | torch2.6.0 (ms) | torch2.8.0 (ms) | 2.8.0+this PR (ms) |
| -------------- | --------------- | --------------- | ------------------ |
| (1, 1B)        | 36.6            | 1564.1          | 25.6               |
| (1, 100M)      | 3.56            | 17.4            | 2.54               |
| (1, 1000,000)  | 0.135           | 0.145           | 0.098              |
| (512, 128000)  | 1.33            | 1.33            | 1.32               |
| (8192, 128000) | 19.6            | 19.6            | 19.4               |
"""


def test_torch_topk_table_is_the_pull_requests_numbers():
    sizes = {"(1, 1B)": 10**9, "(1, 100M)": 10**8, "(1, 1000,000)": 10**6}
    versions = ("2.6.0", "2.8.0", torch_topk.CURRENT)
    expected = set()
    for line in PR_164459_TABLE.strip().splitlines()[2:]:
        shape, *times = [c.strip() for c in line.strip("|").split("|")]
        if shape in sizes:  # one slice of d
            expected |= {(sizes[shape], v, float(t)) for v, t in zip(versions, times)}
    table = torch_topk.measurements()
    assert set(zip(table["d"], table["torch"], table["ms"])) == expected and len(table) == 9
    assert set(table["k"]) == {100} and set(table["gpu"]) == {"H20"}
    assert set(table["source"]) == {
        "pytorch/pytorch#164459 (the table in its description, 2025-10-02)"}


def test_published_torch_topk_band_interpolates_in_log_log():
    table = torch_topk.measurements()
    d = 14_728_266
    per_version = {}
    for version, (t6, t8) in {"2.6.0": (0.135, 3.56), "2.8.0": (0.145, 17.4),
                              torch_topk.CURRENT: (0.098, 2.54)}.items():
        slope = math.log(t8 / t6) / math.log(1e8 / 1e6)
        per_version[version] = t6 / 1e3 * (d / 1e6) ** slope
        assert torch_topk.seconds(table, version, d)[0] == pytest.approx(per_version[version])
    current = torch_topk.band(d, table)
    assert current.low == current.high == pytest.approx(per_version[torch_topk.CURRENT])
    assert current.grade == "published" and "H20" in current.source
    every = torch_topk.band(d, table, torch_topk.ALL)
    assert (every.low, every.high) == pytest.approx((min(per_version.values()),
                                                     max(per_version.values())))
    _, how = torch_topk.seconds(table, "2.6.0", 269_722)
    assert how.startswith("extrapolated")
    assert torch_topk.band(269_722, table).grade == "modelled"


# ------------------------------------------------------------------ counts from run folders
def _run(sparsifier, train=None, stats=None):
    from topkscope.analysis.runs import Run

    manifest = {"sparsifier": sparsifier, "density": 0.001, "density_schedule_values": [0.0156, 0.004],
                "steps_per_epoch": 2, "model": "vgg16"}
    empty = pd.DataFrame()
    return Run(gb.REFERENCE, manifest, train if train is not None else empty, empty,
               stats if stats is not None else empty, empty, empty)


def test_count_steps_on_topks_u_is_the_largest_over_ranks_at_the_target_density():
    from topkscope.perf.inputs import count_steps

    rows = []
    for step in range(5):
        for rank in range(2):
            for density, k in ((0.001, 10.0), (0.01, 100.0)):
                rows.append({"step": step, "rank": rank, "layer": "__global__", "kind": "u",
                             "density": density, "k": k,
                             "gaussiank_2019_count": 10.0 * step + rank + density * 1000})
    rows.append({**rows[-1], "layer": "conv1"})  # a layer row: never read
    ratio = count_steps(_run("topk", stats=pd.DataFrame(rows)), gb.METHOD, 0.001)
    # steps 0-3 are the warm-up (2 epochs of 2 steps): only step 4 trains at rho = 0.001
    assert ratio.index.tolist() == [4]
    assert ratio.iloc[0] == pytest.approx((10.0 * 4 + 1 + 1) / 10.0)


def test_count_steps_in_its_own_training_is_the_largest_count_over_workers():
    from topkscope.perf.inputs import count_steps

    train = pd.DataFrame({"step": [0, 1, 2, 3, 4, 5], "epoch": [0, 0, 1, 1, 2, 2],
                          "k": [160.0] * 4 + [10.0, 10.0],
                          "count_0": [1, 2, 3, 4, 25.0, 5.0], "count_1": [1, 2, 3, 4, 7.0, 9.0]})
    ratio = count_steps(_run(gb.METHOD, train=train), gb.METHOD, 0.001)
    assert ratio.to_dict() == {4: 2.5, 5: 0.9}
    assert count_steps(_run(gb.METHOD), gb.METHOD, 0.001) is None  # nothing logged


def test_count_band_pools_the_runs_steps_own_training_first(monkeypatch, tmp_path):
    """Percentiles over the steps of every run (not a mean of per-run percentiles), the
    rule's own runs before Top-k's u, the runs named in the source; a results root that is
    not a folder is refused."""
    from types import SimpleNamespace

    from topkscope.analysis import runs as analysis_runs
    from topkscope.perf import counts

    steps = {"a": [1.0, 2.0, 3.0], "b": [10.0, 20.0], "own": [0.5, 0.7]}
    found = {"topk": ["a", "b"], gb.METHOD: []}

    def runs_here(root, model, sparsifier, density):
        return [SimpleNamespace(path=name, manifest={"seed": i, "world_size": 4,
                                                      "profile": "standard"})
                for i, name in enumerate(found[sparsifier])]

    monkeypatch.setattr(counts, "runs_here", runs_here)
    monkeypatch.setattr(analysis_runs, "load", lambda path: path)
    monkeypatch.setattr(counts, "count_steps",
                        lambda run, method, density: pd.Series(steps[run]))
    row = counts.count_band(tmp_path, "vgg16", gb.METHOD, 0.001)
    pooled = [1.0, 2.0, 3.0, 10.0, 20.0]
    assert row["basis"] == ON_TOPK_U and (row["n_runs"], row["n_steps"]) == (2, 5)
    assert (row["count_p5"], row["count_median"], row["count_p95"]) == pytest.approx(
        tuple(np.percentile(pooled, [5, 50, 95])))
    assert "seeds 0/1" in row["source"] and "not in its own training" in row["source"]
    found[gb.METHOD] = ["own"]
    row = counts.count_band(tmp_path, "vgg16", gb.METHOD, 0.001)
    assert row["basis"] == OWN_TRAINING and row["count_p95"] == pytest.approx(0.69)
    with pytest.raises(ValueError, match="is not a folder"):
        counts.write(tmp_path / "missing", tmp_path / "out.csv")
    assert not (tmp_path / "out.csv").exists()


def test_committed_measured_counts_are_measured_here_not_read_from_claims():
    table = gb.read_counts()
    assert len(table) and set(table["basis"]) <= {OWN_TRAINING, ON_TOPK_U}
    assert table["source"].str.startswith("measured here").all()
    assert (table["count_p5"] <= table["count_median"]).all()
    assert (table["count_median"] <= table["count_p95"]).all()
    assert set(table["model"]) <= set(gb.models(gb.Sources.committed()))


def test_perf_reads_no_claims_csv(monkeypatch):
    """The bands and the P = 16 inputs are computed from published tables and the measured
    counts: perf opens no claims table, and no perf module names one."""
    import re

    import topkscope.perf as perf

    opened = []
    read_csv = pd.read_csv

    def spy(path, *args, **kwargs):
        opened.append(str(path))
        return read_csv(path, *args, **kwargs)

    monkeypatch.setattr(pd, "read_csv", spy)
    gb.bands_table(gb.Sources.committed())
    assert opened and not [p for p in opened if "claims" in p.rsplit("/", 1)[-1]]
    for module in Path(perf.__file__).parent.glob("*.py"):
        text = module.read_text()
        assert not re.search(r"claims[-\w]*\.csv|CLAIMS_TABLES", text), module.name
