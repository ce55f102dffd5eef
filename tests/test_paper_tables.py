"""Tables for papers: the builders' values against direct computations, and the .tex a reader
sees: readable headers with units, a fixed number of decimals per column, the CSV's numbers."""

import math
import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from topkscope.analysis.runs import load
from topkscope.claims.registry import (
    Claim,
    Presentation,
    get_claim,
    register_claim,
    registered,
    unregister_claim,
)
from topkscope.claims.row import ClaimRow
from topkscope.claims.row import frame as row_frame
from topkscope.condition import Condition, describe
from topkscope.hooks import Recorder
from topkscope.publish import paper_tables as pt

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "results" / "reference"


def body_rows(tex: str) -> list[list[str]]:
    """The data rows of a table written by to_latex: cells split at '&' (the group rows that
    span the table, the head, the '(continued)' line left out)."""
    text = tex.split(r"\midrule", 1)[1]
    if r"\endfoot" in text:  # a longtable: the rows follow its foot
        text = text.split(r"\endfoot", 1)[1]
    text = text.split(r"\bottomrule")[0] if r"\endfoot" not in tex else \
        text.split(r"\end{longtable}")[0]
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if not line.endswith(r"\\") or line.startswith(r"\multicolumn"):
            continue
        rows.append([c.strip() for c in re.split(r"(?<!\\)&", line[:-2])])
    return rows


def head(tex: str) -> list[str]:
    line = tex.split(r"\toprule", 1)[1].strip().splitlines()[0]
    return [c.strip() for c in re.split(r"(?<!\\)&", line.rstrip("\\ "))]


def assert_fixed_decimals(rows: list[list[str]], column: int, decimals: int) -> None:
    for row in rows:
        cell = row[column].strip("$")
        if cell != "--":
            assert re.fullmatch(rf"-?\d+\.\d{{{decimals}}}", cell), (column, cell)


def test_cells_and_names():
    assert pt.fixed(3)(0.98765) == "0.988" and pt.fixed(1, 100)(0.5) == "50.0"
    assert pt.fixed(2)(-1.234) == "$-1.23$" and pt.fixed(2)(float("nan")) == "--"
    assert pt.whole(1234567) == r"1\,234\,567"
    assert pt.breakable("warmup=custom[0.1]") == r"warmup=\allowbreak{}custom[\allowbreak{}0.1]"
    assert pt.caption(r"$\delta$ of u", "fnn3_x", "quick") == \
        r"$\delta$ of u (fnn3\_x; profile quick)."
    with pytest.raises(ValueError, match="table name 'a/b'"):
        pt.write_table(pd.DataFrame({"x": [1]}), Path("."), "a/b", "")


def test_contraction_table_equals_the_exact_ratio_of_known_vectors(tmp_path):
    d, layout = 200, [("w", 0, 150), ("b", 150, 50)]
    vectors = [torch.linspace(-1, 1, d, dtype=torch.float64) ** (1 + step) for step in range(3)]
    with Recorder(tmp_path / "run", densities=[0.05, 0.2]) as rec:
        for step, u in enumerate(vectors):
            rec.record(step, 0, u=u, layout=layout)
    run = load(tmp_path / "run")
    run.manifest["model"] = "fnn3"
    table = pt.contraction_table([run])
    assert list(table["density"]) == [0.05, 0.2] and list(table["records"]) == [3, 3]
    for rho, row in table.set_index("density").iterrows():
        k = max(1, round(rho * d))
        exact = []
        for u in vectors:
            mags = np.sort(np.abs(u.numpy()))[::-1] ** 2
            exact.append(mags[k:].sum() / mags.sum())
        assert row["delta_emp"] == pytest.approx(np.median(exact), rel=1e-9)
        assert row["classic_bound"] == pytest.approx(1 - k / d)
        assert row["paper_bound"] == pytest.approx((1 - k / d) ** 2)
        t = stats.norm.isf(k / d / 2)  # the Gaussian value, written out
        gaussian = 1 - k / d - 2 * t * stats.norm.pdf(t)
        assert row["share_at_most_gaussian"] == pytest.approx(np.mean(np.array(exact)
                                                                      <= gaussian))
        assert row["share_at_most_paper"] == pytest.approx(np.mean(np.array(exact)
                                                                   <= (1 - k / d) ** 2))
        assert row["condition"] == "warmup=none"  # a recorder run without a manifest density
    tex = pt.contraction_latex(table, pt.caption("m", "toy", "quick"))
    rows = body_rows(tex)
    # the model and its experiment once, as a group row (a recorder run without a manifest
    # density: no training condition to say)
    assert len(rows) == 2 and rf"\emph{{FNN-3, {pt.latex_escape(tmp_path.name)}}}" in tex
    assert "Recorder" in head(tex)[0] and head(tex)[1:3] == ["Rows", r"$\delta$"]
    for column in (2, 3, 4, 5):  # δ and the references: four decimals, as the CSV rounds
        assert_fixed_decimals(rows, column, 4)
    assert [float(r[2]) for r in rows] == [round(v, 4) for v in table["delta_emp"]]
    assert [r[6] for r in rows] == [f"{100 * v:.0f}" for v in table["share_at_most_paper"]]
    csv, written = pt.write_table(table, tmp_path, "contraction", tex)
    read = pd.read_csv(csv, dtype={"condition_text": str}).fillna({"condition_text": ""})
    pd.testing.assert_frame_equal(read, table, check_dtype=False)
    assert written.read_text() == tex


def fake_run(experiment, sparsifier, seed, metric, *, workers=2, selected=10, wire=100,
             payload=80):
    ev = pd.DataFrame({"step": [10, 20], "epoch": [0, 1], "split": ["test", "test"],
                       "loss": [1.0, 0.5], "metric": [metric - 0.1, metric],
                       "metric_name": ["accuracy", "accuracy"]})
    train = pd.DataFrame({"step": [1, 2], "loss": [2.0, 1.5], "selected": [selected] * 2,
                          "bytes_sent": [wire] * 2, "payload_bytes": [payload] * 2})
    return SimpleNamespace(manifest={"experiment": experiment, "sparsifier": sparsifier,
                                     "seed": seed, "model": "fnn3", "dataset": "mnist",
                                     "density": 0.01, "world_size": workers},
                           eval=ev, train=train, path=Path("x"))


def test_convergence_table_mean_interval_and_traffic_over_seeds():
    runs = [fake_run("conv", "topk", s, m, wire=100 + s) for s, m in enumerate([0.90, 0.92,
                                                                                  0.94])]
    runs.append(fake_run("conv", "dense", 0, 0.95, selected=1000, wire=8000, payload=8000))
    table = pt.convergence_table(runs)
    assert list(table["sparsifier"]) == ["dense", "topk"]  # Dense first
    topk = table.set_index("sparsifier").loc["topk"]
    half = 4.302652729911275 * 0.02 / math.sqrt(3)  # t_{0.975, 2} * s / sqrt(n)
    assert topk["n_seeds"] == 3 and topk["mean"] == pytest.approx(0.92)
    assert (topk["ci_low"], topk["ci_high"]) == pytest.approx((0.92 - half, 0.92 + half))
    # two steps, two workers, 10 elements each; wire 100, 101, 102 bytes per step
    assert topk["elements"] == 40 and topk["wire_bytes"] == pytest.approx(2 * 101)
    assert topk["payload_bytes"] == 160
    dense = table.set_index("sparsifier").loc["dense"]
    assert dense["n_seeds"] == 1 and math.isnan(dense["ci_low"]) and math.isnan(dense["density"])
    tex = pt.convergence_latex(table, "c")
    rows = body_rows(tex)
    assert rows[0][0] == "Dense" and rows[0][2] == "--"  # no density for Dense
    assert rows[1][4:6] == ["92.00", f"[{100 * (0.92 - half):.2f}, {100 * (0.92 + half):.2f}]"]
    assert rows[0][4:6] == ["95.00", "--"]  # one seed: no interval
    assert "final accuracy, \\%" in tex and "Wire" in head(tex)[8] and "(MB)" in head(tex)[8]


def laplace_run(tmp_path: Path, name: str, draw) -> object:
    with Recorder(tmp_path / name, densities=[0.01], snapshot_schedule=[0, 1, 2]) as rec:
        for step in range(3):
            rec.record(step, 0, u=torch.from_numpy(draw(step)), layout=[("w", 0, 4000)])
    run = load(tmp_path / name)
    run.manifest.update(model=name, sparsifier="topk")
    return run


def test_normality_table_gives_the_moments_effect_sizes_and_fitted_family(tmp_path):
    rng = np.random.default_rng(0)
    normal = laplace_run(tmp_path, "normal", lambda s: rng.standard_normal(4000))
    laplace = laplace_run(tmp_path, "laplace", lambda s: rng.laplace(size=4000))
    table = pt.normality_table([normal, laplace]).set_index("model")
    assert list(table["snapshots"]) == [3, 3]
    assert table.loc["laplace", "best_family"] == "laplace" and \
        table.loc["laplace", "gennorm_beta"] == pytest.approx(1.0, abs=0.2)
    assert table.loc["normal", "gennorm_beta"] == pytest.approx(2.0, abs=0.35)
    assert table.loc["laplace", "excess_kurtosis"] == pytest.approx(3.0, abs=0.8)
    u = normal.snapshot(1, 0).astype(np.float64)
    assert table.loc["normal", "ks_D"] < table.loc["laplace", "ks_D"]
    skews = [stats.skew(normal.snapshot(s, 0).astype(np.float64)) for s in range(3)]
    assert table.loc["normal", "skew"] == pytest.approx(np.median(skews), rel=1e-4, abs=1e-6)
    assert u.size == 4000
    tex = pt.normality_latex(table.reset_index(), "n")
    assert head(tex)[:4] == ["Method", "Condition", "Snap.", "Skew"]
    assert r"Ex.\ \\ \relax kurt." in head(tex)[4]  # a header over two lines
    assert r"\emph{laplace, " in tex  # the model and its experiment once, as a group row
    assert "anderson" not in tex and "n\\_sub" not in tex  # no raw identifiers
    assert "Laplace (" in tex


def test_selectors_and_speed_tables(tmp_path):
    bench = pd.read_csv(REFERENCE / "bench-cpu" / "selection.csv")
    speed = pt.speed_table(bench)
    normal = bench[bench["distribution"] == "normal"]
    assert len(speed) == len(normal) and set(speed["method"]) == set(normal["method"])
    tex = pt.speed_latex(speed, "s")
    rows = body_rows(tex)
    assert len(rows) == 2 * normal["method"].nunique()  # one row per method and density
    one = normal[(normal["method"] == "gaussiank") & (normal["density"] == 0.001)
                 & (normal["d"] == 1_000_000)].iloc[0]
    assert f"{one['median_ms']:.2f} ({one['ratio_to_topk']:.2f})" in tex
    with Recorder(tmp_path / "run", densities=[0.1], sparsifiers=["gaussiank"]) as rec:
        for step in range(4):
            rec.record(step, 0, u=torch.randn(500), layout=[("w", 0, 500)])
    run = load(tmp_path / "run")
    sel = pt.selectors_table([run])
    assert list(sel["selector"]) == ["gaussiank"] and sel["records"].iloc[0] == 4
    u = run.stats[(run.stats.layer == "__global__") & (run.stats.kind == "u")]
    assert sel["median_recall"].iloc[0] == pytest.approx(u["gaussiank_recall"].median())
    rows = body_rows(pt.selectors_latex(sel, "x"))
    assert rows[0][1] == "Gaussian-k" and rows[0][5] == f"{u['gaussiank_recall'].median():.3f}"


@pytest.fixture(scope="module")
def reference() -> pd.DataFrame:
    return pd.read_csv(REFERENCE / "claims-quick.csv")


def test_the_distribution_view_shows_each_claims_share_and_verdict(reference):
    """One view row per experiment and condition (its recorder density included): each shown
    claim's share and verdict as its claims row has them."""
    view = pt.claims_distribution_table(reference)
    shown = [c.name for c in registered() if c.show.table == "distribution"]
    assert shown == ["gaussian_like", "below_paper", "gaussian_value", "convexity_condition"]
    source = reference[(reference["experiment"] == "fnn3-mnist")
                       & reference["condition"].str.startswith("warmup=none; rho=0.001")]
    for claim in shown:
        rows = source[source["claim"] == claim]
        assert len(rows), claim
        for r in rows.itertuples(index=False):
            at = view[(view["experiment"] == r.experiment) & (view["condition"] == r.condition)]
            assert len(at) == 1, (claim, r.condition)
            assert at[f"{claim}_fraction"].iloc[0] == pytest.approx(r.fraction, nan_ok=True)
            assert at[f"{claim}_verdict"].iloc[0] == r.verdict
    tex = pt.claims_distribution_latex(view, "d")
    like = source[source["claim"] == "gaussian_like"].iloc[0]
    verdict = pt.VERDICT_SHORT[like["verdict"]]
    assert f"{verdict} ({100 * like['fraction']:.0f}\\%)" in tex


def test_the_convergence_view_pairs_each_accuracy_row_with_its_traffic_verdict(reference):
    view = pt.claims_convergence_table(reference)
    conv = reference[reference["section"] == "convergence"]
    # the per-method accuracy claims (registered "accuracy"), not the outer comparisons
    per_method = conv[conv["claim"].isin([f"{m}_accuracy" for m in
                                          ("dgc", "gaussiank", "redsync", "sidco", "tail",
                                           "randk")])]
    assert len(view) == len(per_method) == 16
    row = view[(view["sparsifier"] == "gaussiank-2019")
               & (view["condition"] == "warmup=paper; rho=0.001")].iloc[0]
    acc = conv[(conv["claim"] == "gaussiank_accuracy") & (conv["sparsifier"] == "gaussiank-2019")
               & (conv["condition"] == "warmup=paper; rho=0.001")].iloc[0]
    traffic = conv[(conv["claim"] == "gaussiank_traffic")
                   & (conv["sparsifier"] == "gaussiank-2019")
                   & (conv["condition"] == "warmup=paper; rho=0.001")].iloc[0]
    assert (row["diff_mean"], row["ci_low"], row["traffic_target"]) == \
        (acc["diff_mean"], acc["ci_low"], acc["traffic_target"])
    assert (row["accuracy_verdict"], row["traffic_verdict"]) == (acc["verdict"],
                                                                traffic["verdict"])
    tex = pt.claims_convergence_latex(view, "c")
    show = pt.fixed(2)  # a negative bound is typeset as math
    cells = f"{show(acc['diff_mean'])} [{show(acc['ci_low'])}, {show(acc['ci_high'])}]"
    assert cells in tex and "points of accuracy" in tex


def test_the_predictions_view_has_one_row_per_setting_and_a_column_per_baseline(reference):
    view = pt.claims_predictions_table(reference)
    speedups = reference[reference["claim"].str.contains("speedup_p16")]
    assert len(view) * 3 == len(speedups)
    row = speedups.iloc[0]
    hit = view[(view["model"] == row["model"]) & (view["sparsifier"] == row["sparsifier"])
               & (view["network"] == row["network"])].iloc[0]
    assert hit["dense_breakeven_ms"] == row["breakeven_ms"]
    assert hit["topk_breakeven_ms"] == row["breakeven_topk_ms"]
    assert hit["dense_verdict"] == row["verdict"]
    assert {"dense_wfbp_verdict", "dense_fp16_verdict"} <= set(view.columns)

# ------------------------------------------------------------ the claims views of the catalog
WARMED = Condition(experiment="fnn3-mnist", world_size=2, training_density=0.001,
                   warmup="custom", warmup_schedule=(0.015625,))
FOUR = replace(WARMED, experiment="convergence-fnn3-mnist", world_size=4)
OUTER = Condition(experiment="outer-fnn3-mnist", world_size=4, training_density=0.015625,
                  outer_step="average", outer_inner_steps=15, outer_lr=1.0,
                  outer_error_decay=0.95, quantize_bits=2)


def claim_row(key: str, sparsifier: str = "topk", cond: Condition = WARMED, **values
              ) -> ClaimRow:
    """A schema-3 row of the registered claim `key`, as the builder makes it."""
    claim = get_claim(key)
    row = ClaimRow("fnn3", "mnist", None, claim.row_name(sparsifier), sparsifier,
                   section=claim.section, claim_key=key, claim_family=claim.family,
                   rule=claim.rule_text(), **values)
    row.set_condition(cond)
    return row


def catalog() -> pd.DataFrame:
    """A schema-3 claims table with a row of every kind the views show: distribution shares in
    two experiments of one model (P = 2 and P = 4), a check, counts, the convergence pair, the
    published Top-k row (its claim name ends in _accuracy), the outer loop's shares and its
    three comparisons, predicted speed-ups (one break-even below zero) and a time to accuracy."""
    share = dict(n_runs=1, n_units=64, fraction=1.0, verdict="holds", fraction_low=0.94,
                 fraction_high=1.0, run_ids="fnn3-mnist/r0")
    rows = [claim_row(k, **share) for k in ("gaussian_like", "below_paper", "gaussian_value",
                                            "convexity_condition", "fitted_value",
                                            "gaussian_tail", "below_classic")]
    rows += [claim_row("below_paper", cond=FOUR, **{**share, "fraction": 0.5,
                                                    "verdict": "mixed"})]
    rows += [claim_row("count", "gaussiank-2019", count_over_k=1.02, **share)]
    pair = dict(metric="accuracy", diff_unit="points", n_seeds=5, n_failed_seeds=0,
                diff_mean=-0.52, ci_low=-1.2, ci_high=0.16, traffic_target=3.6,
                verdict="inconclusive", reason="interval-contains-margin")
    rows += [claim_row("accuracy", "gaussiank-2019", FOUR, **pair),
             claim_row("traffic", "gaussiank-2019", FOUR, **pair)]
    rows += [ClaimRow("fnn3", "mnist", None, "topk_accuracy", "topk", section="published",
                      claim_key="topk_accuracy", claim_family="published", verdict="holds",
                      condition="published: Shi et al. Table 2")]
    rows += [claim_row("chunk_contraction", "chunk-topk", OUTER, **share)]
    compared = dict(metric="accuracy", diff_unit="points", n_seeds=3, n_failed_seeds=0,
                    diff_mean=-2.35, ci_low=-3.0, ci_high=-1.7, bytes_ratio=0.007,
                    verdict="fails")
    for key, reference in (("sparseloco_accuracy", "diloco"),
                           ("sparseloco_accuracy_per_step", "topk-per-step"),
                           ("outer_momentum_accuracy", "sparseloco-nesterov")):
        rows.append(claim_row(key, "sparseloco", replace(OUTER, reference=reference),
                              **compared))
    predicted = dict(network="10gbe-line", selection_basis="break-even",
                     training_condition=WARMED.training_key(), verdict="inconclusive",
                     reason="not-measured-on-device")
    rows += [claim_row("speedup_p16", "gaussiank-2019", baselines="Dense, Top-k",
                       breakeven_ms=-0.5, breakeven_topk_ms=0.18, **predicted),
             claim_row("speedup_p16_wfbp", "gaussiank-2019", baselines="Dense + WFBP",
                       breakeven_ms=11.8, **predicted),
             claim_row("speedup_p16_fp16", "gaussiank-2019", baselines="Dense fp16",
                       breakeven_ms=1.25, **predicted)]
    rows += [claim_row("time_to_accuracy", "gaussiank-2019", network="10gbe-line",
                       n_seeds=5, diff_mean=1.4, verdict="holds")]
    for row in rows:
        row.profile = "quick"
    return row_frame(rows)


def views(table: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {name: build(table) for name, (build, _, _) in pt.CLAIMS_VIEWS.items()}


def test_the_claims_views_select_their_rows_through_the_registry():
    """Each view holds the rows whose registered claim (claim_key) the registry presents in
    its table: the outer comparison per step (`sparseloco_accuracy_per_step`, whose name does
    not end in _accuracy) is in the outer view; the published Top-k row (whose name does) is
    in no convergence view; a check is in no view."""
    made = views(catalog())
    assert {"claims-distribution", "claims-counts", "claims-convergence", "claims-outer",
            "claims-outer-shares", "claims-predictions"} <= set(made)
    convergence = made["claims-convergence"]
    assert list(convergence["sparsifier"]) == ["gaussiank-2019"]  # not topk_accuracy's
    assert list(made["claims-outer"]["claim"]) == ["sparseloco_accuracy",
                                                   "sparseloco_accuracy_per_step",
                                                   "outer_momentum_accuracy"]
    distribution = made["claims-distribution"]
    columns = [c.name for c in registered() if c.show.table == "distribution"]
    assert [c for c in distribution if c.endswith("_verdict")] == [f"{c}_verdict"
                                                                  for c in columns]
    assert "below_classic_verdict" not in distribution  # a check
    assert list(made["claims-counts"]["sparsifier"]) == ["gaussiank-2019"]
    assert len(made["claims-predictions"]) == 1  # one setting, one column per baseline


def test_a_claim_of_ones_own_is_a_column_of_the_table_it_names():
    own = register_claim(Claim("spike_free", "Is u free of spikes?", "no spikes", "rule",
                               "distribution", "condition", lambda units: [],
                               show=Presentation("distribution", "free of spikes")))
    try:
        table = pd.concat([catalog(), row_frame([claim_row("spike_free", fraction=0.25,
                                                           verdict="fails", n_units=8)])])
        view = pt.claims_distribution_table(table)
        assert view["spike_free_verdict"].dropna().tolist() == ["fails"]
        tex = pt.claims_distribution_latex(view, "d", "quick")
        assert "free of spikes" in tex and r"25\%" in tex
    finally:
        unregister_claim(own.name)


def test_two_experiments_of_one_model_are_two_rows_never_pooled():
    view = pt.claims_distribution_table(catalog())
    below = view.set_index("experiment")["below_paper_verdict"]
    assert below.to_dict() == {"fnn3-mnist": "holds", "convergence-fnn3-mnist": "mixed"}


CONFIG_WORDS = ("warmup=", "rho=", "custom[", "outer=", "quantize=")


def test_conditions_methods_and_networks_are_said_for_people():
    """Conditions in words (topkscope.condition.describe), one spelling of each method
    (sparsifier_name), networks as people write them (perf.networks.display_name), shares with
    their %, "never" for a break-even below zero (as docs/findings.md says it)."""
    table = catalog()
    texts = pt.claims_latex(table, "c", "quick")
    for name, (build, latex, _) in pt.CLAIMS_VIEWS.items():
        frame = build(table)
        if len(frame):
            texts[name] = latex(frame, "c", "quick")
    for name, tex in texts.items():
        plain = tex.replace(r"\allowbreak{}", "").replace(r"\_", "_")
        for word in CONFIG_WORDS:
            assert word not in plain, (name, word)
    assert pt.latex_escape(describe(FOUR)) in texts["claims-convergence"]
    assert "convergence-fnn3-mnist" in texts["claims-convergence"]
    assert "Gaussian-k (2019)" in texts["claims-convergence"]
    assert "gaussiank-2019" not in texts["claims-predictions"]
    assert "10 GbE (line rate)" in texts["claims-predictions"]
    assert "10gbe" not in texts["claims-predictions"] and "10gbe" not in texts["claims"]
    assert r"holds (100\%)" in texts["claims-distribution"]
    never = texts["claims-predictions"]
    assert "never" in never and "$-$0.50" not in never and "-0.50" not in never


def test_the_outer_comparisons_name_their_reference():
    view = pt.claims_outer_table(catalog())
    assert list(view["reference"]) == ["diloco", "topk-per-step", "sparseloco-nesterov"]
    tex = pt.claims_outer_latex(view, "o", "quick")
    assert any("Against" in h for h in head(tex)) and "diloco" in tex
    assert not any("Top-$k$" in h for h in head(tex))  # compared with their reference


def test_the_outer_comparisons_of_an_older_table_name_their_reference_too(reference):
    """A schema-2 table (the outer-loop rows of the standard table committed before schema 3,
    tests/fixtures) names each comparison's reference from its claim; the quick one (schema 3)
    the best of the swept rates it was compared with."""
    older = pd.read_csv(Path(__file__).parent / "fixtures" / "claims-standard-schema2-outer.csv")
    assert (older["schema_version"] == 2).all()
    view = pt.claims_outer_table(older)
    assert list(view["reference"]) == ["diloco", "topk-per-step", "sparseloco-nesterov"]
    view = pt.claims_outer_table(reference)
    assert list(view["reference"]) == [
        "diloco lr 0.7 (best of 3)", "topk-per-step", "sparseloco-nesterov lr 0.9 (best of 3)"]
    for table in (older, reference):
        assert not pt.claims_convergence_table(table)["sparsifier"].isin(["sparseloco"]).any()


def test_counts_are_integers_and_columns_have_names_people_read(tmp_path, reference):
    """n_seeds 5, never 5.0 (claims.csv and every view's CSV); column names of letters,
    digits and '_' (not 'Dense + WFBP_verdict'); "1 run", never "1 runs"."""
    files = pt.write_all(tmp_path, "quick", claims=catalog())
    for csv in (p for p in files if p.suffix == ".csv"):
        text = csv.read_text()
        frame = pd.read_csv(csv)
        for column in frame.columns:
            assert re.fullmatch(r"[A-Za-z0-9_]+", column), (csv.name, column)
        for column in ("n_seeds", "n_runs", "n_units", "n_failed_seeds", "world_size"):
            if column in frame:
                assert not re.search(r"(^|,)\d+\.0(,|$)", "\n".join(
                    frame[column].dropna().astype(str))), (csv.name, column)
        assert "5.0," not in text.split("\n", 1)[1] or "n_seeds" not in frame, csv.name
    claims_tex = (tmp_path / "claims.tex").read_text()
    assert "1 run" in claims_tex and "1 runs" not in claims_tex
    assert "5 seeds" in claims_tex
    quick = pt.write_all(tmp_path / "reference", "quick", claims=reference)
    converged = pd.read_csv(next(p for p in quick if p.name == "claims-convergence.csv"))
    assert converged["n_seeds"].dtype.kind == "i"


def test_the_labels_carry_the_profile():
    tex = pt.claims_distribution_latex(pt.claims_distribution_table(catalog()), "d", "quick")
    assert r"\label{tab:claims-distribution-quick}" in tex
    assert pt.label("contraction", "quick/standard") == "contraction-quick-standard"
    assert pt.label("contraction", None) == "contraction"


# ------------------------------------------------------------------- the run tables
def recorded(tmp_path: Path, name: str, experiment: str, workers: int, density: float,
             sparsifiers=("gaussiank-2019",)):
    """A recorded Top-k run of FNN-3 in `experiment` on `workers` workers, training at
    `density` and recording at 0.001 and 0.01."""
    rng = np.random.default_rng(len(name))
    with Recorder(tmp_path / name, densities=[0.001, 0.01], sparsifiers=list(sparsifiers)) \
            as rec:
        for step in range(3):
            rec.record(step, 0, u=torch.from_numpy(rng.standard_normal(4000)),
                       layout=[("w", 0, 4000)])
    run = load(tmp_path / name)
    run.manifest.update(model="fnn3", experiment=experiment, world_size=workers,
                        density=density, sparsifier="topk")
    return run


def test_run_tables_name_the_experiment_and_never_pool_two(tmp_path):
    """The contraction and selectors tables of two experiments of one model (P = 2 and P = 4,
    the same training condition) keep them apart, name each, and say the training density
    in the heading apart from the density the recorder evaluated at; a selector is spelled as
    registered (gaussiank-2019, never its column prefix gaussiank_2019)."""
    runs = [recorded(tmp_path, "a", "fnn3-mnist", 2, 0.001),
            recorded(tmp_path, "b", "convergence-fnn3-mnist", 4, 0.001)]
    contraction = pt.contraction_table(runs)
    assert list(contraction["records"]) == [3, 3, 3, 3]  # never 6: nothing pooled
    assert set(contraction["experiment"]) == {"fnn3-mnist", "convergence-fnn3-mnist"}
    assert set(contraction["world_size"]) == {2, 4}
    selectors = pt.selectors_table(runs)
    assert set(selectors["selector"]) == {"gaussiank-2019"}
    tex = pt.selectors_latex(selectors, "s", "quick")
    assert "convergence-fnn3-mnist" in tex and "P = 4" in tex
    for words in ("rho=", "warmup="):
        assert words not in tex
    groups = [ln for ln in tex.splitlines() if ln.startswith(r"\multicolumn")]
    assert all("training: $\\rho$ = 0.001" in g for g in groups)  # the training's density
    assert all("0.01" not in g for g in groups)     # never the recorder's density
