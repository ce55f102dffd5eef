"""The count claims: each approximate method judged on its own training
(<family>_count_in_training) and the tail Gaussian-k's first threshold relies on
(gaussian_tail), on synthetic runs whose answer is known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from tests._topk_reference import published_gaussiank
from tests.test_analysis_claims import D, RunLike, at_density, make_run
from topkscope import claims
from topkscope.analysis import criteria, selection, units
from topkscope.sparsify import get_sparsifier, label_of

K = 100


def trained_run(method: str, ratios, seed=0, model="m", steps=None) -> RunLike:
    """A run of `method` whose train.parquet logs selected_median = ratio * k per step."""
    ratios = np.asarray(ratios, dtype=np.float64)
    steps = np.arange(ratios.size) if steps is None else np.asarray(steps)
    train = pd.DataFrame({"step": steps, "k": K, "selected_median": ratios * K,
                          "selected": ratios * K})
    manifest = {"experiment": f"{model}-conv", "model": model, "dataset": "mnist",
                "dataset_substitute": None, "sparsifier": method, "density": 0.001,
                "status": "complete", "seed": seed}
    return RunLike(manifest=manifest, train=train)


def in_training(runs, method: str) -> pd.Series:
    table = claims.build(runs)
    rows = table[table["claim"].str.endswith("_count_in_training")
                 & (table["sparsifier"] == method)]
    assert len(rows) == 1, rows
    return rows.iloc[0]


def test_a_method_that_under_sends_in_its_own_training_fails_and_one_near_k_holds():
    under = [trained_run("gaussiank-2019", np.full(10, 0.02), seed=s) for s in range(3)]
    row = in_training(under, "gaussiank-2019")
    assert row["claim"] == "gaussiank_count_in_training" and row["verdict"] == "fails"
    assert row["count_over_k"] == pytest.approx(0.02) and row["n_seeds"] == 3
    assert row["n_units"] == 30 and row["section"] == "distribution"
    assert "in its own training" in row["statement"]
    near = [trained_run("dgc", np.full(10, 1.1), seed=s) for s in range(3)]
    row = in_training(near, "dgc")
    assert row["claim"] == "dgc_count_in_training" and row["verdict"] == "holds"
    assert row["fraction"] == 1.0 and row["statement"].startswith("DGC selects about k")


def test_steps_in_band_but_one_seed_out_cannot_hold():
    """99% of the steps are in the band (the share's interval clear of the cut), but one
    seed's median is out: mixed, not holds."""
    runs = [trained_run("redsync", np.full(200, 1.0), seed=s) for s in range(3)]
    runs.append(trained_run("redsync", np.r_[np.full(4, 3.0), np.full(3, 1.0)], seed=3))
    row = in_training(runs, "redsync")
    n_in = 3 * 200 + 3
    assert row["fraction"] == pytest.approx(n_in / 607) and row["fraction_low"] >= 0.9
    assert row["verdict"] == "mixed" and "1 of 4 seeds" in row["cause"]


def test_exact_methods_are_checks_and_dense_and_topk_have_no_row():
    runs = [trained_run("gaussiank", np.ones(5), seed=s) for s in range(3)]
    runs += [trained_run("topk", np.ones(5)), trained_run("dense", np.full(5, 1000.0))]
    table = claims.build(runs)
    rows = table[table["claim"].str.endswith("_count_in_training")]
    assert rows["sparsifier"].tolist() == ["gaussiank"]
    assert rows["section"].tolist() == ["check"]
    assert claims.section_of("gaussiank_count_in_training", "gaussiank") == "check"
    assert claims.section_of("gaussiank_count_in_training", "gaussiank-2019") == "distribution"


def test_warmup_steps_are_their_own_condition():
    runs = []
    for s in range(3):
        # 10 warm-up steps, then 10 at the target: 3 x 10 blocks, as many as a holds needs
        run = trained_run("sidco", np.r_[np.full(10, 5.0), np.full(10, 1.0)], seed=s)
        run.manifest.update(density_schedule="paper", density_schedule_values=[0.25],
                            steps_per_epoch=10)
        run.train["epoch"] = run.train["step"] // 10
        runs.append(run)
    table = claims.build(runs)
    rows = table[table["claim"] == "sidco_count_in_training"].set_index("condition")
    assert len(rows) == 2, rows
    target = rows.loc[[c for c in rows.index if claims.DURING_WARMUP not in c][0]]
    assert target["verdict"] == "holds" and target["n_units"] == 30


# --- gaussian_tail ------------------------------------------------------------------------
def test_the_tail_count_is_the_published_rules_first_evaluation():
    """Slow reference: scipy's quantile in float64; and the published rule returns the same
    set when its first evaluation lands in the band."""
    rng = np.random.default_rng(0)
    u = rng.standard_normal(200_000) * 0.01 + 0.001
    k = 200
    t = abs(sps.norm.ppf(k / u.size / 2))
    expected = int(np.count_nonzero(np.abs(u) > u.mean() + t * u.std(ddof=1)))
    assert selection.gaussian_tail_count(u, k) == expected
    assert criteria.in_count_band(expected, k)
    chosen = get_sparsifier("gaussiank-2019").select(
        __import__("torch").from_numpy(u.astype(np.float32)), k)
    assert len(chosen) == expected
    assert len(published_gaussiank(u, k)[0]) == expected


def test_the_tail_count_rejects_a_bad_k():
    with pytest.raises(ValueError, match="k = 0 is outside"):
        selection.gaussian_tail_count(np.ones(10), 0)


def gennorm(beta: float):
    """Generalised normal vectors of shape beta, scaled to unit variance."""
    dist = sps.gennorm(beta)
    return lambda r: dist.rvs(size=D, random_state=r) / dist.std()


@pytest.mark.parametrize("draw, moment, tail", [
    (lambda r: r.standard_normal(D), "holds", "holds"),
    # light tails (excess kurtosis -0.37): inside the moment window, the first threshold
    # selects about 0.2k at rho = 0.001 and 0.54k at rho = 0.01: out of band
    (gennorm(2.5), "holds", "fails"),
    # heavier tails (Student-t with 12 degrees of freedom, excess kurtosis 0.75): inside the
    # window, 3.6k above the first threshold at rho = 0.001 and 1.54k at 0.01
    (lambda r: r.standard_t(12, 200_000), "holds", "fails"),
])
def test_a_vector_inside_the_moment_window_can_fail_the_tail_claim(draw, moment, tail):
    """4 snapshots (kept few: a snapshot is costly): the shares tell the two claims apart;
    4 blocks are below the 30-block floor, so both verdicts are inconclusive here (the floor's
    own test shows 30 blocks that all pass hold)."""
    runs = [make_run("g", draw, snapshot_steps=(0, 1, 2, 3), steps=4, ranks=1)]
    table = at_density(claims.build(runs, max_snapshots=4))
    share = table.set_index("claim")["fraction"]
    assert share["gaussian_like"] == (1.0 if moment == "holds" else 0.0)
    assert share["gaussian_tail"] == (1.0 if tail == "holds" else 0.0)
    assert set(table.set_index("claim")["verdict"][["gaussian_like", "gaussian_tail"]]) == {
        "inconclusive"}
    row = table[table["claim"] == "gaussian_tail"].iloc[0]
    assert row["n_units"] == 4  # (snapshot, density): one density a row
    assert "first threshold" in row["evidence"]


def test_p16_rows_on_counts_from_another_methods_u_are_at_most_inconclusive():
    """The same scaling table, the published Gaussian-k's count once from its own runs and
    once as the recorder measured it on Top-k's u: only the first may decide."""
    from tests.test_perf_report import ERRORS, _selection
    from topkscope.claims import speedup
    from topkscope.perf import report

    table, _ = report.scaling_table(["fnn3"], ["1gbe", "nvlink"], [16],
                                    selection=_selection().drop(columns="device"),
                                    compute_s=0.01)
    g19 = table["method"] == "gaussiank-2019"
    table.loc[g19, "count_source"] = "measured (gaussiank-2019's own runs, warmup=none: ...)"
    own = speedup.claims_rows(table, errors=ERRORS, sparsifiers="gaussiank-2019")
    assert {"holds", "fails"} & set(own["verdict"])  # decided on its own counts
    table.loc[g19, "count_source"] = ("measured (not gaussiank-2019's own training, "
                                      "warmup=none: recorded gaussiank-2019_count / k on "
                                      "topk's u)")
    other = speedup.claims_rows(table, errors=ERRORS, sparsifiers="gaussiank-2019")
    assert set(other["verdict"]) == {"inconclusive"}
    assert other["cause"].str.startswith("counts not from Gaussian-k (2019)'s own training").all()
    assert (other["evidence"] == own["evidence"]).all()  # the same numbers, not decided


def test_the_worked_example_of_the_docs():
    """docs/statistics.md's table: moments and count/k at the first threshold, from scipy's
    distributions (exact), and a sample of each through selection.gaussian_tail_count."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "statistics.md").read_text()
    cases = {"generalised normal β = 2.5": sps.gennorm(2.5), "Student-t₁₀": sps.t(10),
             "normal": sps.norm()}
    rng = np.random.default_rng(1)
    for label, dist in cases.items():
        kurt = float(dist.stats(moments="k"))
        inside = bool(criteria.gaussian_like(0.0, kurt))
        tails = [2 * dist.sf(abs(sps.norm.ppf(rho / 2)) * dist.std()) / rho
                 for rho in (0.001, 0.01)]
        line = next(ln for ln in text.splitlines() if ln.startswith(f"| {label} |"))
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert float(cells[2].replace("−", "-")) == pytest.approx(kurt, abs=5e-3)
        assert cells[3].startswith("inside") == inside
        assert [float(c) for c in cells[4:6]] == pytest.approx(tails, rel=5e-3)
        assert (cells[6] == "in band") == bool(criteria.in_count_band(tails[0], 1.0))
        # a sample of 2 million values agrees with the exact share
        x = dist.rvs(size=2_000_000, random_state=rng)
        k = 2000
        assert selection.gaussian_tail_count(x, k) / k == pytest.approx(tails[0], rel=0.15)


def test_the_findings_show_the_three_counts_side_by_side():
    """The README's findings table of counts: on Top-k's u, in the method's own training (with
    its median) and the tail, one row per (model, condition, method)."""
    from topkscope.publish.findings import findings_markdown

    topk = make_run("m", lambda r: r.standard_normal(D), snapshot_steps=(0, 1, 2, 3), ranks=1)
    topk.manifest["experiment"] = "m-conv"
    own = [trained_run("gaussiank-2019", np.full(10, 0.02), seed=s) for s in range(3)]
    md = findings_markdown(claims.build([topk, *own], max_snapshots=4))
    line = next(ln for ln in md.splitlines()
                if ln.startswith("| m | ρ = 0.001 | Gaussian-k (2019) |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    # on Top-k's u and the tail: 4 steps / snapshots, every unit in band, below the 30-block
    # floor (inconclusive); in training: 3 seeds x 10 steps = 30 blocks, none in band (fails)
    assert cells[3].startswith("inconclusive (100% [") and cells[5].startswith(
        "inconclusive (100% [")
    assert cells[4].startswith("**fails** (0% [0–10%]") and cells[4].endswith("median 0.02·k")



def test_every_recorded_selector_gets_a_count_claim_on_topks_u():
    """tail-k and DGC run on the same recorded u as Gaussian-k: each gets <family>_count with
    the share of units in band, its median count/k and its median recall, all as computed
    here by hand from the same selections."""
    import torch

    from tests.test_analysis_claims import at_density, stats_rows

    rng = np.random.default_rng(3)
    rows, by_hand = [], {"tail-k": [], "dgc": []}
    for step in range(6):
        u = rng.standard_t(3, D)
        for row in stats_rows(u, step, 0):
            if row["kind"] == "u":
                k = row["k"]
                for name in by_hand:
                    chosen = get_sparsifier(name).select(torch.from_numpy(u).float(), k)
                    q = selection.quality(u, chosen.numpy(), k)
                    prefix = name.replace("-", "_")
                    row.update({f"{prefix}_count": q["count"], f"{prefix}_recall": q["recall"],
                                f"{prefix}_ratio_vs_topk": q["ratio_to_topk"]})
                    if np.isclose(row["density"], 0.001):  # the row of that recorder density
                        by_hand[name].append((q["count"] / k, q["recall"]))
            rows.append(row)
    manifest = {"experiment": "t-exp", "model": "t", "dataset": "mnist",
                "dataset_substitute": None, "sparsifier": "topk", "density": 0.001,
                "status": "complete"}
    frame = pd.DataFrame(rows).assign(redsync_count=pd.array([None] * len(rows), "Int64"))
    table = at_density(claims.build([RunLike(manifest=manifest, stats=frame)]))
    assert "redsync_count" not in set(table["claim"])  # a column without values: not recorded
    table = table.set_index("claim")
    for name, claim in (("tail-k", "tail_count"), ("dgc", "dgc_count")):
        row = table.loc[claim]
        ratios, recalls = np.array(by_hand[name]).T
        assert row["sparsifier"] == name and row["section"] == "distribution"
        assert row["fraction"] == pytest.approx(np.mean(criteria.in_count_band(ratios, 1.0)))
        assert row["count_over_k"] == pytest.approx(np.median(ratios))
        assert f"recall of the exact top-k median {np.median(recalls):.3g}" in row["evidence"]
        assert row["statement"] == f"{label_of(name)} selects about k elements on Top-k's u"


def test_the_other_selectors_question_is_answered_from_their_own_rows():
    """The registry's question on the other selectors in their own training: every other
    method's rows, never the published rule's (its own question) nor a check (the robust
    Gaussian-k, exact by construction); the word read off their verdicts."""
    from topkscope.claims.answers import answer
    from topkscope.claims.registry import get_claim

    runs = [trained_run("gaussiank-2019", np.full(40, 0.02), seed=s) for s in range(3)]
    runs += [trained_run("redsync", np.full(40, 3.0), seed=s) for s in range(3)]
    runs += [trained_run("tail-k", np.full(40, 1.0), seed=s) for s in range(3)]
    runs += [trained_run("gaussiank", np.ones(40), seed=s) for s in range(3)]
    table = claims.build(runs)
    claim = get_claim("count_in_training")
    other = next(q for q in claim.questions if q.key == "other_count_in_training")
    told = answer(table, other, claim)
    assert set(told.rows["sparsifier"]) == {"redsync", "tail-k"}
    assert dict(zip(told.rows["sparsifier"], told.rows["verdict"])) == {"redsync": "fails",
                                                                       "tail-k": "holds"}
    assert told.word == "only in some conditions" and told.text.startswith("Only in some")
    published = next(q for q in claim.questions if q.key == "gaussiank_count_in_training")
    assert set(answer(table, published, claim).rows["sparsifier"]) == {"gaussiank-2019"}
    checks = table[table["sparsifier"] == "gaussiank"]
    assert (checks["section"] == "check").all() and (checks["verdict"] == "holds").all()


def test_snapshots_are_picked_one_block_at_a_time():
    """The ranks of one (run, step) are one block: a budget first spreads over blocks, one
    rank each, then adds ranks; never more than the budget, never a snapshot twice."""
    found = [(run, step, rank) for run in range(2) for step in (10, 20, 30) for rank in range(4)]
    four = units.pick_snapshots(found, 4)
    assert len({(i, s) for i, s, _ in four}) == 4 and len({r for *_, r in four}) == 4
    ten = units.pick_snapshots(found, 10)
    assert len(ten) == 10 == len(set(ten)) and len({(i, s) for i, s, _ in ten}) == 6
    assert sorted(units.pick_snapshots(found, 100)) == sorted(found)
    assert units.pick_snapshots([], 5) == [] and units.pick_snapshots(found, 0) == []
