"""claims.build on run-like objects whose tables carry the documented columns.

The stats rows are computed from real vectors with the analysis functions (as the recorder
does), so every verdict below follows from data, not from hard-coded evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from tests._topk_reference import published_gaussiank
from topkscope import claims, kernel
from topkscope.analysis import contraction, selection

D = 20_000
DENSITIES = (0.001, 0.01)
FLOOR_STEPS = 30  # criteria.ZERO_EVENT_BLOCKS: a share holds or fails only on >= 30 (run, step) blocks
SMALL_D = 5_000   # vectors of the runs that need FLOOR_STEPS steps (kept fast)


@dataclass
class RunLike:
    """The attributes of topkscope.analysis.runs.Run that claims reads."""

    manifest: dict
    stats: pd.DataFrame = field(default_factory=pd.DataFrame)
    eval: pd.DataFrame = field(default_factory=pd.DataFrame)
    train: pd.DataFrame = field(default_factory=pd.DataFrame)
    hist: pd.DataFrame = field(default_factory=pd.DataFrame)
    vectors: dict = field(default_factory=dict)
    path: Path = Path("results", "test", "run")  # a stand-in: nothing is read from it

    @property
    def snapshots(self) -> pd.DataFrame:
        keys = sorted(self.vectors)
        return pd.DataFrame({"step": [s for s, _ in keys], "rank": [r for _, r in keys],
                             "path": [f"snapshots/step{s}-rank{r}.npy" for s, r in keys]})

    def snapshot(self, step: int, rank: int, kind: str = "u") -> np.ndarray:
        if kind != "u":
            raise KeyError(f"no snapshot of {kind} at step {step}, rank {rank}")
        return self.vectors[(step, rank)].astype(np.float32)


def gaussiank_2019(u: np.ndarray, k: int) -> np.ndarray:
    """The published rule's selection (the shared slow reference)."""
    return published_gaussiank(u, k)[0]


def loose_threshold(u: np.ndarray, k: int) -> np.ndarray:
    """A badly calibrated selector: everything beyond one standard deviation."""
    return np.flatnonzero(np.abs(u - u.mean()) > u.std())


def stats_rows(u: np.ndarray, step: int, rank: int, approximate=gaussiank_2019) -> list[dict]:
    """What the recorder writes for one whole-model u: one row per density."""
    m = kernel.central_sums(u)
    skew, kurt = kernel.skew_kurtosis(m.m2 / m.n, m.m3 / m.n, m.m4 / m.n)
    rows = []
    for rho in DENSITIES:
        k = contraction.k_from_density(rho, u.size)
        q = selection.quality(u, approximate(u, k), k)
        rows.append({
            "step": step, "rank": rank, "layer": "__global__", "kind": "u", "density": rho,
            "numel": u.size, "k": k, "norm": float(np.linalg.norm(u)), "mean": m.mean,
            "std": (m.m2 / m.n) ** 0.5, "skew": skew, "excess_kurtosis": kurt,
            "max_abs": float(np.abs(u).max()), "zero_frac": float(np.mean(u == 0)),
            "nonfinite": 0, "topk_ratio": contraction.topk_ratio(u, k),
            "classic_bound": contraction.classic_bound(k, u.size),
            "paper_bound": contraction.paper_bound(k, u.size),
            "gaussian_ratio": contraction.gaussian_ratio(k, u.size),
            "gaussiank_2019_count": q["count"], "gaussiank_2019_ratio": q["ratio"],
            "gaussiank_2019_recall": q["recall"],
        })  # fmt: skip
        # a g row of the same step must be ignored by the claims
        rows.append({**rows[-1], "kind": "g", "topk_ratio": 1.0})
    return rows


def make_run(model: str, draw, sparsifier="topk", steps=4, ranks=2, snapshot_steps=(0, 2, 3),
             approximate=gaussiank_2019, seed=0) -> RunLike:
    rng = np.random.default_rng(seed)
    rows, vectors = [], {}
    for step in range(steps):
        for rank in range(ranks):
            u = draw(rng)
            rows += stats_rows(u, step, rank, approximate)
            if step in snapshot_steps and rank == 0:
                vectors[(step, rank)] = u
    manifest = {"experiment": f"{model}-exp", "model": model, "dataset": "mnist",
                "dataset_substitute": None, "sparsifier": sparsifier, "density": 0.001,
                "status": "complete"}  # fmt: skip
    return RunLike(manifest=manifest, stats=pd.DataFrame(rows), vectors=vectors)


def eval_run(model: str, sparsifier: str, metric: float, density=0.001, name="accuracy",
             status="complete", experiment=None, seed=0, schedule=None, deviations=(),
             sent=None) -> RunLike:
    manifest = {"experiment": experiment or f"{model}-conv", "model": model, "dataset": "mnist",
                "dataset_substitute": None, "sparsifier": sparsifier, "density": density,
                "status": status, "seed": seed, "density_schedule": schedule,
                "deviations": list(deviations)}  # fmt: skip
    ev = pd.DataFrame({"step": [10, 20, 20], "epoch": [0, 1, 1], "split": ["test", "test", "train"],
                       "loss": [1.0, 0.5, 0.1], "metric": [0.1, metric, 0.999],
                       "metric_name": [name] * 3})  # fmt: skip
    run = RunLike(manifest=manifest, eval=ev)
    if sent is not None:
        run.train = pd.DataFrame({"step": [0, 1, 2], "selected": [float(sent)] * 3})
    return run


def at_density(table: pd.DataFrame, density: float | None = 0.001) -> pd.DataFrame:
    """The rows of one recorder density (a row never pools densities), and those that do not
    depend on one (gaussian_like: no recorder_density)."""
    recorded = table["recorder_density"]
    return table[recorded.isna() | np.isclose(recorded.fillna(-1.0), density or -1.0)]


def _verdicts(table: pd.DataFrame, model: str, density: float = 0.001) -> dict:
    rows = at_density(table[table["model"] == model], density)
    return {(c, s): v for c, s, v in zip(rows["claim"], rows["sparsifier"], rows["verdict"])}


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    long = {"steps": FLOOR_STEPS, "ranks": 1}  # enough blocks for a verdict
    runs = [
        make_run("gauss", lambda r: r.standard_normal(SMALL_D) * 1e-3, **long),
        make_run("heavy", lambda r: r.standard_t(2.5, SMALL_D), approximate=loose_threshold,
                 seed=1, **long),
        make_run("flat", lambda r: r.choice([-0.01, 0.01], SMALL_D), seed=2, **long),
        make_run("gauss", lambda r: r.standard_normal(D), sparsifier="dense", seed=3),
        make_run("denseonly", lambda r: r.standard_normal(D), sparsifier="dense", seed=4),
    ]
    return claims.build(runs, max_snapshots=3)


def test_the_design_docs_name_the_claims_columns_of_the_code():
    """docs/design.md's column contract: claims.COLUMNS in the code's order, and the
    prediction rows' PREDICTION_COLUMNS among them."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "design.md").read_text()
    paragraph = " ".join(text.split("**Claims table.**", 1)[1].split("\n\n", 1)[0].split())

    def listed(after: str) -> list[str]:
        found = re.search(re.escape(after) + r" `([^`]+)`", paragraph)
        assert found, f"docs/design.md's claims paragraph has no '{after} `...`'"
        return [c.strip() for c in found.group(1).split(",")]

    assert listed("has the columns") == claims.COLUMNS
    assert listed("accuracy) fill") == claims.PREDICTION_COLUMNS
    assert set(claims.PREDICTION_COLUMNS) < set(claims.COLUMNS)


def test_table_layout(table):
    assert list(table.columns) == claims.COLUMNS
    assert set(table["verdict"]) <= set(claims.VERDICTS)
    assert (table["rule"] == table["claim_key"].map(
        lambda c: claims.get_claim(c).rule_text())).all()
    assert (table["schema_version"] == claims.SCHEMA_VERSION).all()
    assert table["statement"].notna().all() and table["cause"].notna().all()
    assert table["model"].tolist() == sorted(table["model"].tolist())
    # delta < 1 - k/d holds for any vector that is not flat: a check, not a finding
    assert set(table["section"]) == {"distribution", "check"}
    assert set(table.loc[table["section"] == "check", "claim"]) == {"below_classic"}
    # one training condition per model here (warmup=none at rho = 0.001), one row per density
    # the recorder evaluated Top-k at: never pooled
    assert set(table.loc[table["model"] == "gauss", "condition"]) == {
        "warmup=none; rho=0.001", "warmup=none; rho=0.001; recorded at rho=0.001",
        "warmup=none; rho=0.001; recorded at rho=0.01"}
    assert table.loc[table["claim"] == "gaussian_like", "recorder_density"].isna().all()
    below = table[(table["model"] == "gauss") & (table["claim"] == "below_paper")]
    assert sorted(below["recorder_density"]) == list(DENSITIES)


def test_gaussian_vectors_satisfy_the_papers_claims(table):
    v = _verdicts(table, "gauss")
    assert v[("gaussian_like", "topk")] == "holds"
    assert v[("below_classic", "topk")] == "holds"
    assert v[("below_paper", "topk")] == "holds"
    # at d = 5000 and rho = 0.001 (k = 5) the band admits counts 4-6 only and the rule's count
    # spreads about as Poisson(5): a minority of those units are in band (mixed, not a failure
    # of the rule); at rho = 0.01 (k = 50) nearly every one: two rows, never pooled
    gauss = table[(table["model"] == "gauss") & (table["claim"] == "gaussiank_count")]
    low, high = (gauss[gauss["recorder_density"] == rho].iloc[0] for rho in DENSITIES)
    assert low["verdict"] == "mixed" and 0.2 < low["fraction"] < 0.6
    assert high["fraction"] > 0.9 and high["fraction"] > low["fraction"]
    row = at_density(table[(table["model"] == "gauss") & (table["claim"] == "below_paper")]).iloc[0]
    assert row["n_units"] == FLOOR_STEPS and row["n_runs"] == 1  # no dense run
    assert row["fraction"] == 1.0
    assert "Top-k keeps" in row["evidence"]
    conv = at_density(table[(table["model"] == "gauss")
                            & (table["claim"] == "convexity_condition")]).iloc[0]
    # 3 snapshots (blocks) all pass: below the 30-block floor, not yet a verdict
    assert conv["n_units"] == 3 and conv["fraction"] == 1.0  # (snapshot, rho)
    assert conv["verdict"] == "inconclusive" and conv["fraction_low"] == pytest.approx(0.0)


def test_uniform_ratio_matches_a_float64_monte_carlo():
    """bounds.uniform_ratio = (1 - rho)^3 against delta of U(-1, 1) draws, in float64."""
    from topkscope import bounds

    rng = np.random.default_rng(7)
    for rho in (0.001, 0.01, 0.3):
        d = 400_000
        k = bounds.k_from_density(rho, d)
        measured = np.mean([contraction.topk_ratio(rng.uniform(-1, 1, d), k)
                            for _ in range(3)])
        assert measured == pytest.approx(bounds.uniform_ratio(k, d), abs=2e-4 * (1 + 30 * rho))


def test_a_uniform_u_meets_the_papers_bound_and_the_row_shows_how_close():
    """At rho = 0.001 a uniform u meets (1 - k/d)^2 (delta ~ 1 - 3 rho < 1 - 2 rho): the row
    holds, and its margin (~1 - rho gaps, as a uniform u's) and delta_uniform show that a
    vector barely less flat than noise would pass; a Gaussian u's is many gaps."""
    long = {"steps": FLOOR_STEPS, "ranks": 1}  # enough blocks for a verdict
    uni = make_run("uni", lambda r: r.uniform(-1, 1, D), **long)
    gauss = make_run("gauss", lambda r: r.standard_normal(D), **long)
    table = claims.build([uni, gauss])
    rows = at_density(table[table["claim"] == "below_paper"]).set_index("model")
    rho = DENSITIES[:1]  # one row per recorder density: medians over its units
    assert rows.loc["uni", "verdict"] == "holds"
    # the margin of each unit is (bound - delta) / gap; a uniform u's is 1 - rho up to noise
    assert 0.5 < rows.loc["uni", "bound_margin"] < 1.5
    assert rows.loc["gauss", "bound_margin"] > 5 * rows.loc["uni", "bound_margin"]
    expected_uniform = np.median([(1 - r) ** 3 for r in rho for _ in range(8)])
    assert rows.loc["uni", "delta_uniform"] == pytest.approx(expected_uniform, rel=1e-3)
    assert rows.loc["uni", "delta_gaussian"] == pytest.approx(np.median(
        [contraction.gaussian_ratio(contraction.k_from_density(r, D), D) for r in rho]),
        rel=1e-9)
    assert "a uniform u gives delta" in rows.loc["uni", "evidence"]
    # a flat vector sits on 1 - k/d: exactly one gap above (1 - k/d)^2
    flat = at_density(claims.build([make_run("flat", lambda r: np.sign(r.standard_normal(D)))]))
    assert flat.set_index("claim").loc["below_paper", "bound_margin"] == pytest.approx(-1.0)
    assert (table.loc[(table["model"] == "uni") & (table["claim"] == "below_classic"),
                      "section"] == "check").all()


def test_heavy_tails_fail_gaussianity_and_gaussiank_count(table):
    v = _verdicts(table, "heavy")
    assert v[("gaussian_like", "topk")] == "fails"
    assert v[("below_paper", "topk")] == "holds"  # heavy tails make Top-k contract more
    assert v[("gaussiank_count", "gaussiank-2019")] == "fails"
    row = table[(table["model"] == "heavy") & (table["claim"] == "gaussian_like")].iloc[0]
    assert "best fit by BIC student_t" in row["evidence"]


def test_flat_vectors_fail_the_bounds_and_the_condition(table):
    v = _verdicts(table, "flat")
    assert v[("below_classic", "topk")] == "fails"
    assert v[("below_paper", "topk")] == "fails"
    assert v[("gaussian_like", "topk")] == "fails"  # excess kurtosis -2


def test_models_without_topk_runs_have_insufficient_data(table):
    v = _verdicts(table, "denseonly")
    for claim in ("gaussian_like", "below_classic", "below_paper", "convexity_condition"):
        assert v[(claim, "topk")] == "insufficient-data"
    assert not any(c.startswith("gaussiank") for c, _ in v)


def test_convexity_condition_counts_snapshots_and_reports_the_bound_where_it_failed():
    """30 snapshots (the floor's blocks, small d to stay fast): a flat u fails, a Gaussian u
    holds; 4 snapshots of the flat u all failing are not yet a verdict."""
    long = {"steps": FLOOR_STEPS, "ranks": 1, "snapshot_steps": range(FLOOR_STEPS)}
    n = FLOOR_STEPS  # one row per recorder density: its (snapshot) units
    runs = [make_run("flat", lambda r: r.choice([-1.0, 1.0], 2000), **long)]
    row = claims.build(runs, max_snapshots=FLOOR_STEPS).query(
        "claim == 'convexity_condition'").iloc[0]
    assert row["n_units"] == n and row["verdict"] == "fails"
    assert f"still held in 0 of {n}" in row["evidence"]
    assert row["cause"] == f"0 of {n} units (0%; 95% interval 0%-10%) meet the criterion"
    few = claims.build(runs, max_snapshots=4).query("claim == 'convexity_condition'").iloc[0]
    assert few["n_units"] == 4 and few["fraction"] == 0.0 and few["verdict"] == "inconclusive"
    gauss = [make_run("g", lambda r: r.standard_normal(2000), **long)]
    row = claims.build(gauss, max_snapshots=FLOOR_STEPS).query(
        "claim == 'convexity_condition'").iloc[0]
    assert row["n_units"] == n and row["verdict"] == "holds"


def test_too_few_snapshots_are_insufficient_data():
    run = make_run("g", lambda r: r.standard_normal(D), snapshot_steps=(0,))
    row = claims.build([run]).query("claim == 'convexity_condition'").iloc[0]
    assert row["n_units"] == 1 and row["verdict"] == "insufficient-data"
    assert row["cause"] == "1 unit(s) measured, 3 needed"


def test_snapshots_alone_feed_the_gaussian_claim():
    run = make_run("g", lambda r: r.standard_normal(D), snapshot_steps=(0, 1, 2, 3))
    run.stats = pd.DataFrame(columns=run.stats.columns)
    table = claims.build([run])
    row = table.query("claim == 'gaussian_like'").iloc[0]
    # 4 snapshots, all Gaussian-like: 4 blocks are below the 30-block floor, not a verdict yet
    assert row["n_units"] == 4 and row["fraction"] == 1.0 and row["verdict"] == "inconclusive"
    assert table.query("claim == 'below_paper'").iloc[0]["verdict"] == "insufficient-data"


@pytest.mark.parametrize(
    "passed, n, verdict",
    [(9, 10, "holds"), (8, 10, "mixed"), (1, 10, "fails"), (2, 10, "mixed"), (0, 3, "fails"),
     (2, 2, "insufficient-data"), (0, 0, "insufficient-data")],
)  # fmt: skip
def test_fraction_rule(passed, n, verdict):
    from topkscope.claims import verdicts

    assert verdicts.fraction_verdict(passed, n) == verdict


def test_write_is_a_readable_csv(tmp_path):
    runs = [eval_run("acc", "topk", 0.95), eval_run("acc", "gaussiank-2019", 0.95)]
    path = tmp_path / "out" / "claims.csv"
    written = claims.write(runs, path)
    back = pd.read_csv(path)
    assert list(back.columns) == claims.COLUMNS and len(back) == len(written)
    assert set(back["verdict"]) <= set(claims.VERDICTS)


def test_bad_max_snapshots():
    with pytest.raises(ValueError, match="max_snapshots"):
        claims.build([], max_snapshots=-1)
    assert claims.build([]).empty


def test_claims_from_result_folders_read_by_the_loader(tmp_path):
    """The same claims, through real result folders and topkscope.analysis.runs.load."""
    import json

    from topkscope.analysis import runs as loader

    def save(run: RunLike, run_id: str) -> Path:
        folder = tmp_path / run.manifest["experiment"] / run_id
        (folder / "stats").mkdir(parents=True)
        (folder / "snapshots").mkdir()
        (folder / "manifest.json").write_text(json.dumps(run.manifest))
        if not run.stats.empty:
            frame = run.stats.astype({"step": "int64", "rank": "int32", "numel": "int64",
                                      "k": "int64"})  # fmt: skip
            frame.iloc[: len(frame) // 2].to_parquet(folder / "stats" / "part-r0-000000.parquet")
            frame.iloc[len(frame) // 2 :].to_parquet(folder / "stats" / "part-r0-000001.parquet")
        if not run.eval.empty:
            run.eval.to_parquet(folder / "eval.parquet")
        for (step, rank), u in run.vectors.items():
            np.save(folder / "snapshots" / f"step{step}-rank{rank}.npy", u.astype(np.float32))
            # g snapshots sit beside u ones and must not be mistaken for u
            np.save(folder / "snapshots" / f"step{step}-rank{rank}-g.npy", np.ones(D, np.float32))
        return folder

    gauss = make_run("gauss", lambda r: r.standard_normal(D))
    gauss.eval = eval_run("gauss", "topk", 0.95).eval
    gk = eval_run("gauss", "gaussiank-2019", 0.949, experiment="gauss-exp")
    save(gauss, "a")
    save(gk, "b")
    loaded = [loader.load(p) for p in loader.find(tmp_path)]
    assert len(loaded) == 2
    # the loaded folders give the table of the same runs in memory (4 steps: small-sample
    # verdicts); a ones-vector g snapshot taken for u would lower the convexity share
    measured = ["claim", "sparsifier", "n_units", "fraction", "fraction_low", "verdict"]
    from_disk = claims.build(loaded)
    in_memory = claims.build([gauss, gk])
    pd.testing.assert_frame_equal(from_disk[measured].reset_index(drop=True),
                                  in_memory[measured].reset_index(drop=True))
    row = from_disk[from_disk["claim"] == "convexity_condition"].iloc[0]
    assert row["n_units"] == 3 and row["fraction"] == 1.0
    v = _verdicts(from_disk, "gauss")
    assert v[("below_paper", "topk")] == "inconclusive"  # 4 steps: below the 30-block floor
    assert v[("gaussiank_accuracy", "gaussiank-2019")] == "insufficient-data"  # one seed


def seeded(method: str, metrics: list[float], topk: list[float], **kw) -> list[RunLike]:
    """Top-k and `method` runs of seeds 0, 1, ... with the given final metrics."""
    sent = kw.pop("sent", (100.0, 100.0))
    return ([eval_run("acc", "topk", m, seed=s, sent=sent[0], **kw) for s, m in enumerate(topk)]
            + [eval_run("acc", method, m, seed=s, sent=sent[1], **kw)
               for s, m in enumerate(metrics)])


def accuracy_row(runs, claim="gaussiank_accuracy", **match):
    table = claims.build(runs)
    rows = table[table["claim"] == claim]
    for col, value in match.items():
        rows = rows[rows[col] == value]
    assert len(rows) == 1, rows
    return rows.iloc[0]


def test_accuracy_is_a_paired_interval_over_seeds():
    topk, gk = [0.950, 0.960, 0.955], [0.952, 0.957, 0.956]
    row = accuracy_row(seeded("gaussiank-2019", gk, topk))
    diffs = 100 * (np.array(gk) - np.array(topk))  # points
    half = sps.t.ppf(0.975, 2) * diffs.std(ddof=1) / np.sqrt(3)
    assert row["n_seeds"] == 3 and row["verdict"] == "holds"
    assert row["ci_low"] == pytest.approx(diffs.mean() - half)
    assert row["ci_high"] == pytest.approx(diffs.mean() + half)
    assert row["condition"] == "warmup=none; rho=0.001"  # the density named in every profile
    assert row["traffic_ratio"] == pytest.approx(1.0)


@pytest.mark.parametrize("gk, verdict", [
    ([0.90, 0.91, 0.905], "fails"),            # about -5 points, tight
    ([0.93, 0.965, 0.95], "inconclusive"),     # mean -0.67 points, interval wide
])
def test_accuracy_fails_below_and_is_inconclusive_across_minus_one_point(gk, verdict):
    assert accuracy_row(seeded("gaussiank-2019", gk, [0.95, 0.96, 0.955]))["verdict"] == verdict


def test_fewer_than_three_paired_seeds_is_insufficient_data():
    runs = seeded("randk", [0.95, 0.96], [0.95, 0.96, 0.955])
    row = accuracy_row(runs, claim="randk_accuracy")
    assert row["n_seeds"] == 2 and row["verdict"] == "insufficient-data"


def test_perplexity_is_judged_in_percent_of_topk():
    ok = seeded("gaussiank", [101.0, 102.0, 101.5], [100.0, 100.0, 100.0], name="perplexity")
    assert accuracy_row(ok)["verdict"] == "holds"
    bad = seeded("gaussiank", [110.0, 112.0, 111.0], [100.0, 100.0, 100.0], name="perplexity")
    assert accuracy_row(bad)["verdict"] == "fails"


def test_traffic_matched_claim_needs_the_accuracy_and_at_most_four_thirds_the_elements():
    same = ([0.95, 0.96, 0.955], [0.95, 0.96, 0.955])
    cheap = accuracy_row(seeded("redsync-2019", *same, sent=(100.0, 120.0)),
                         claim="redsync_traffic")
    assert cheap["verdict"] == "holds" and cheap["traffic_ratio"] == pytest.approx(1.2)
    costly = accuracy_row(seeded("redsync-2019", *same, sent=(100.0, 350.0)),
                          claim="redsync_traffic")
    assert costly["verdict"] == "fails" and "target density 3.5× Top-k's" in costly["evidence"]
    accurate = accuracy_row(seeded("redsync-2019", *same, sent=(100.0, 350.0)),
                            claim="redsync_accuracy")
    assert accurate["verdict"] == "holds"  # the accuracy claim alone ignores the traffic


def test_conditions_and_deviations_are_separate_rows_paired_with_their_own_topk():
    topk = [0.95, 0.96, 0.955]
    runs = (seeded("gaussiank-2019", [0.90, 0.91, 0.905], topk, schedule="paper")
            + seeded("gaussiank-2019", topk, topk)
            + [eval_run("acc", "gaussiank-2019", m, seed=s, deviations=["empty_fallback=topk"])
               for s, m in enumerate(topk)])
    table = claims.build(runs)
    rows = table[table["claim"] == "gaussiank_accuracy"].set_index("condition")["verdict"]
    assert rows.to_dict() == {"warmup=paper; rho=0.001": "fails",
                              "warmup=none; rho=0.001": "holds",
                              "warmup=none; empty_fallback=topk; rho=0.001": "holds"}


def test_a_density_sensitivity_gives_one_named_row_per_density():
    topk = [0.95, 0.96, 0.955]
    runs = (seeded("gaussiank-2019", [0.90, 0.91, 0.905], topk)
            + seeded("gaussiank-2019", topk, topk, density=0.005))
    table = claims.build(runs)
    rows = table[table["claim"] == "gaussiank_accuracy"].set_index("condition")["verdict"]
    assert rows.to_dict() == {"warmup=none; rho=0.001": "fails", "warmup=none; rho=0.005": "holds"}
    from topkscope.publish.findings import findings_markdown

    md = findings_markdown(table)  # each density keeps its own row, said in words
    assert "| Gaussian-k (2019) | ρ = 0.001 | " in md
    row = next(ln for ln in md.splitlines() if "| ρ = 0.001 |" in ln)
    assert "| **fails** |" in row
    row = next(ln for ln in md.splitlines() if "| ρ = 0.005 |" in ln)
    assert "| holds |" in row
    assert "rho=" not in md and "warmup=" not in md


# --- the share's block-bootstrap interval (criteria.share_interval) ------------------------
def _slow_share_interval(passed, runs, steps, replicates, seed, level=0.95):
    """The two-stage block bootstrap written plainly: draw runs, then each drawn run's steps,
    with replacement; share over the drawn blocks' units."""
    rng = np.random.default_rng(seed)
    blocks: dict = {}
    for p, r, s in zip(passed, runs, steps):
        blocks.setdefault(r, {}).setdefault(s, []).append(bool(p))
    names = sorted(blocks)
    shares = []
    for _ in range(replicates):
        hit = total = 0
        for r in rng.choice(len(names), size=len(names)):
            own = list(blocks[names[r]].values())
            for j in rng.choice(len(own), size=len(own)):
                hit += sum(own[j])
                total += len(own[j])
        shares.append(hit / total)
    return tuple(np.quantile(shares, [(1 - level) / 2, (1 + level) / 2]))


@pytest.mark.parametrize("n_runs", [1, 3])
def test_share_interval_equals_the_slow_block_bootstrap(n_runs):
    from topkscope.analysis import criteria

    rng = np.random.default_rng(3)
    runs = np.repeat(np.arange(n_runs), 40 * 4)
    steps = np.tile(np.repeat(np.arange(40), 4), n_runs)
    step_p = rng.uniform(0.4, 1.0, size=(n_runs, 40))  # units of a step are correlated
    passed = rng.random(runs.size) < step_p[runs, steps]
    fast = criteria.share_interval(passed, runs, steps, replicates=4000, seed=1)
    slow = _slow_share_interval(passed, runs, steps, replicates=4000, seed=2)
    assert fast == pytest.approx(slow, abs=0.02)
    assert fast == criteria.share_interval(passed, runs, steps, replicates=4000, seed=1)
    assert fast[0] <= passed.mean() <= fast[1]


def test_share_interval_treats_a_step_as_one_block():
    """Every unit of a step alike: the interval is that of the steps' share (the units add no
    information), wider than if the units were independent."""
    from topkscope.analysis import criteria

    steps = np.repeat(np.arange(20), 10)
    per_step = np.arange(20) < 15  # 15 of 20 steps pass, all their units with them
    passed = per_step[steps]
    blocked = criteria.share_interval(passed, np.zeros(steps.size), steps)
    as_steps = criteria.share_interval(per_step, np.zeros(20), np.arange(20))
    independent = criteria.share_interval(passed, np.zeros(steps.size), np.arange(steps.size))
    assert blocked == pytest.approx(as_steps, abs=0.03)
    assert blocked[1] - blocked[0] > 2 * (independent[1] - independent[0])


@pytest.mark.parametrize("low, high, verdict", [
    (0.92, 1.0, "holds"), (0.9, 1.0, "holds"), (0.85, 0.97, "inconclusive"),
    (0.3, 0.7, "mixed"), (0.05, 0.4, "inconclusive"), (0.0, 0.1, "fails"),
    (0.0, 0.08, "fails")])
def test_fraction_verdict_against_the_cuts(low, high, verdict):
    from topkscope.claims import verdicts

    assert verdicts.fraction_verdict(5, 10, low, high) == verdict
    assert verdicts.fraction_verdict(1, 2, low, high) == "insufficient-data"


def test_one_run_of_a_half_passing_vector_is_mixed_or_inconclusive_never_holds():
    """A pooled share of 50% from correlated steps: the verdict follows the interval."""
    runs = [make_run("half", lambda r: r.standard_normal(D) if r.random() < 0.5
                     else r.choice([-1.0, 1.0], D), steps=12, seed=s) for s in range(3)]
    row = claims.build(runs).query("claim == 'below_paper'").iloc[0]
    assert row["n_runs"] == 3
    assert row["fraction_low"] < row["fraction"] < row["fraction_high"]
    assert row["verdict"] in ("mixed", "inconclusive")


def test_findings_and_latex_rows_show_the_runs_and_the_shares_interval(table):
    from topkscope.publish import findings, paper_tables

    dist = table[table["section"] == "distribution"]
    text = findings.distribution_markdown(dist)
    header, _, *rows = text.split("\n")
    assert header.split(" | ")[2] == "runs" and "δ < 1 − k/d" not in header
    gauss = next(r for r in rows if r.startswith("| gauss | ρ = 0.001 |"))
    row = at_density(dist[(dist["model"] == "gauss") & (dist["claim"] == "below_paper")]).iloc[0]
    assert f"| {int(row['n_runs'])} |" in gauss
    assert (f"({row['fraction']:.0%} [{row['fraction_low']:.0%}".rstrip("%")
            + f"–{row['fraction_high']:.0%}])") in gauss
    assert f"| {row['energy_gain']:.3g}·k/d |" in gauss
    cells, _ = paper_tables._claims_cells(next(row.to_frame().T.itertuples(index=False)))
    runs = int(row["n_runs"])
    assert cells[4].endswith(f", {runs} run" + ("" if runs == 1 else "s"))  # never "1 runs"


def test_contraction_shares_equal_a_plain_count_per_group():
    """criteria.contraction_shares (captions, paper tables) against a loop over the records."""
    from topkscope.analysis import criteria

    rng = np.random.default_rng(5)
    n = 300
    records = pd.DataFrame({"model": rng.choice(["a", "b"], n), "density": rng.choice(
        [0.001, 0.01], n), "topk_ratio": rng.uniform(0.95, 1.0, n)})
    records["classic_bound"] = 1 - records["density"]
    records["paper_bound"] = records["classic_bound"] ** 2
    records["gaussian_ratio"] = 0.975
    got = criteria.contraction_shares(records, ["model", "density"]).set_index(
        ["model", "density"])
    for (model, density), g in records.groupby(["model", "density"]):
        rows = list(g.itertuples())
        assert got.loc[(model, density), "records"] == len(rows)
        for column, bound, strict in (("share_below_classic", "classic_bound", True),
                                      ("share_at_most_paper", "paper_bound", False),
                                      ("share_at_most_gaussian", "gaussian_ratio", False)):
            hits = [(r.topk_ratio < getattr(r, bound)) if strict
                    else (r.topk_ratio <= getattr(r, bound)) for r in rows]
            assert got.loc[(model, density), column] == pytest.approx(np.mean(hits))
    assert criteria.contraction_shares(records.iloc[:0], "density").empty


def test_the_rule_of_three_floor_needs_thirty_blocks_and_never_narrows():
    """30 all-passing (run, step) blocks hold and 29 do not; 30 all-failing blocks fail; a
    wider bootstrap interval is left as it is."""
    from topkscope.analysis import criteria
    from topkscope.claims import verdicts

    def verdict(passed, blocks):
        steps = np.repeat(np.arange(blocks), 2)
        low, high = criteria.share_interval(np.full(steps.size, passed), np.zeros(steps.size),
                                            steps)
        return verdicts.fraction_verdict(int(passed) * steps.size, steps.size, low, high)

    assert criteria.ZERO_EVENT_BLOCKS == FLOOR_STEPS
    assert verdict(True, 30) == "holds" and verdict(True, 29) == "inconclusive"
    assert verdict(False, 30) == "fails" and verdict(False, 29) == "inconclusive"
    rng = np.random.default_rng(1)
    steps = np.arange(60)
    passed = rng.random(60) < 0.5
    assert criteria.share_interval(passed, np.zeros(60), steps) == pytest.approx(
        _slow_share_interval(passed, np.zeros(60), steps, 2000, 0), abs=0.03)
