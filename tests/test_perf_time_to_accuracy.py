"""Time to accuracy: steps to the target from constructed eval tables, the target from Top-k's
final metric of the same seed and condition (the convergence claims' pairing, margin and
failed seeds), counts from constructed train tables, times from the step-time model, and the
verdict rule against the validated error."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from topkscope import claims as claims_mod
from topkscope.analysis.criteria import ACCURACY_MARGIN_POINTS, PERPLEXITY_MARGIN_PCT
from topkscope.analysis.runs import load
from topkscope.analysis.seeds import evaluated, final_metric
from topkscope.claims import time_to_accuracy as tta_claims
from topkscope.claims import verdicts as claims_verdicts
from topkscope.perf import inputs
from topkscope.perf import model as pm
from topkscope.perf import published as published_errors
from topkscope.perf import time_to_accuracy as tta
from topkscope.perf.networks import resolve
from topkscope.perf.published import validated_errors

D, K, DENSITY = 199_210, 199, 0.001  # FNN-3
ERRORS = {"no-overlap": 0.05, "wfbp": 0.3}
G19 = "gaussiank-2019"


def _gpu_selection(device="cuda:0"):
    rows = [{"distribution": "normal", "d": d, "density": DENSITY, "method": m,
             "median_ms": ms * d / 1e6, "device": device}
            for d in (10**5, 10**7) for m, ms in (("topk", 2.0), (G19, 0.5), ("dgc", 1.0))]
    return pd.DataFrame(rows)


def _run(root, name, method, seed, metrics, *, schedule="none", status="complete", ratio=1.0,
         evaluated=(9, 19, 29), metric_name="accuracy", density=DENSITY, split="test"):
    folder = root / "conv" / name
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({
        "status": status, "experiment": "conv", "profile": "quick", "model": "fnn3",
        "dataset": "mnist", "sparsifier": method, "seed": seed, "density": density,
        "density_schedule": schedule, "world_size": 4, "num_parameters": D, "config": {},
        **({"error": "training diverged at step 10"} if status == "failed" else {})}))
    steps = np.arange(30)
    k = np.full(30, D if method == "dense" else round(density * D), dtype=np.int64)
    pd.DataFrame({"step": steps, "k": k, "selected_max": (k * ratio).astype(np.int64)}
                 ).to_parquet(folder / "train.parquet")
    pd.DataFrame({"step": list(evaluated[:len(metrics)]), "split": split,
                  "metric": metrics, "metric_name": metric_name}).to_parquet(
        folder / "eval.parquet")
    return folder


def _seeded(root, *, g19=(0.93, 0.945, 0.96), topk=(0.80, 0.90, 0.95), schedule="none",
            ratio=2.0, seeds=(0, 1, 2), prefix=""):
    for s in seeds:
        _run(root, f"{prefix}topk{s}", "topk", s, topk, schedule=schedule)
        _run(root, f"{prefix}g{s}", G19, s, g19, schedule=schedule, ratio=ratio)


def _step_time(method, ratio, net="10gbe", selection=None):
    compute, _ = inputs.compute_input("fnn3")
    select = inputs.selection_time(_gpu_selection() if selection is None else selection,
                                   method, D, DENSITY)
    return pm.step(method, 16, D, DENSITY, resolve(net), compute,
                   pm.MethodInputs(select, pm.Input(ratio, "test")))["t_step"]


def _table(root, **kwargs):
    return tta.time_to_accuracy_table(root, selection=_gpu_selection(), **kwargs)


def test_steps_to_target_first_evaluation_at_or_past_it():
    m = ACCURACY_MARGIN_POINTS
    curve = pd.DataFrame({"step": [4, 9, 14, 19], "metric": [0.5, 0.93, 0.9395, 0.95]})
    # Top-k's final 0.95: the target is 1 point below, 0.94; 0.9395 misses it by 0.05 points
    assert tta.steps_to_target(curve, "accuracy", 0.95, m) == 20  # eval at step 19: 20 steps
    assert tta.steps_to_target(curve, "accuracy", 0.9405, m) == 15  # 0.93 < 0.9305 <= 0.9395
    assert tta.steps_to_target(curve, "accuracy", 0.99, m) is None
    # a smaller margin moves the target up: 0.95 - 0.2 points = 0.948, reached at step 19
    assert tta.steps_to_target(curve, "accuracy", 0.95, 0.2) == 20
    assert tta.steps_to_target(curve, "accuracy", 0.9405, 0.05) == 20  # 0.9395 < 0.94
    assert tta.target_value("accuracy", 0.95, m) == pytest.approx(0.95 - m / 100)
    assert tta.target_value("accuracy", 95.0, m) == pytest.approx(95.0 - m)
    # perplexity: lower is better, the target is Top-k's final + the margin in % of it
    p = PERPLEXITY_MARGIN_PCT
    assert tta.reaches("perplexity", 100.0, 102.9, p) and not tta.reaches("perplexity", 100.0,
                                                                          103.1, p)
    assert tta.target_value("perplexity", 100.0, p) == pytest.approx(100.0 + p)
    ppl = pd.DataFrame({"step": [9, 19, 29], "metric": [150.0, 104.0, 101.0]})
    assert tta.steps_to_target(ppl, "perplexity", 100.0, p) == 30
    assert tta.steps_to_target(ppl, "perplexity", 100.0, 5.0) == 20


def test_the_curve_is_the_split_of_the_claims_final_metric():
    from types import SimpleNamespace

    table = pd.DataFrame({"step": [19, 9, 19, 9], "split": ["valid", "valid", "test", "test"],
                          "metric": [0.6, 0.5, 0.8, 0.7], "metric_name": "accuracy"})
    rows, name = evaluated(SimpleNamespace(eval=table))
    assert list(rows["metric"]) == [0.7, 0.8] and name == "accuracy"  # test, sorted by step
    assert final_metric(SimpleNamespace(eval=table)) == (0.8, "accuracy")
    assert evaluated(SimpleNamespace(eval=pd.DataFrame())) is None


def test_times_to_target_are_steps_times_each_runs_own_step(tmp_path):
    _seeded(tmp_path)
    for s in range(3):  # dense reaches 0.94 at the second evaluation too
        _run(tmp_path, f"dense{s}", "dense", s, (0.5, 0.945, 0.96))
    table, notes = _table(tmp_path)
    assert notes == []
    assert set(table["network"]) == {"10gbe", "ib100"} and set(table["workers"]) == {16}
    assert table["selection_counted"].all() and (table["margin"] == ACCURACY_MARGIN_POINTS).all()
    at = table[table["network"] == "10gbe"].set_index(["method", "seed"])
    for s in range(3):
        assert at.loc[("topk", s), "steps_to_target"] == 30   # its own final, 0.95, at step 29
        assert at.loc[(G19, s), "steps_to_target"] == 20      # 0.945 >= 0.94 at step 19
        assert at.loc[(G19, s), "count_ratio"] == pytest.approx(2.0)
        assert at.loc[(G19, s), "time_to_target_s"] == pytest.approx(20 * _step_time(G19, 2.0))
        assert at.loc[("topk", s), "time_to_target_s"] == pytest.approx(
            30 * _step_time("topk", 1.0))
        assert at.loc[("dense", s), "time_to_target_s"] == pytest.approx(
            20 * _step_time("dense", 1.0))
        assert at.loc[(G19, s), "target"] == pytest.approx(0.94)
    claims = tta_claims.claims_rows(table, errors=ERRORS)
    assert len(claims) == 2 and set(claims["claim"]) == {"gaussiank_time_to_accuracy"}
    from topkscope.publish.findings import findings_markdown, verdict_sentence

    md = findings_markdown(claims)
    for row in claims.itertuples(index=False):
        net = row.network
        speedup = 30 * _step_time("topk", 1.0, net) / (20 * _step_time(G19, 2.0, net))
        expect = ("holds" if speedup > 1.05 else "fails" if speedup < 0.95 else "inconclusive")
        assert row.verdict == expect and row.n_seeds == 3 and row.n_failed_seeds == 0
        assert f"{speedup:.3g}x" in row.cause and net in row.cause
        assert row.section == "prediction" and row.model_error == 0.05
        assert (row.metric, row.margin) == ("accuracy", ACCURACY_MARGIN_POINTS)
        assert row.training_condition == "warmup=none; rho=0.001" and row.baselines == "Top-k"
        assert row.selection_basis == "measured" and net in row.statement
        assert "training condition warmup=none; rho=0.001" in row.condition
        dense = 20 * _step_time("dense", 1.0, net) / (20 * _step_time(G19, 2.0, net))
        assert f"{dense:.3g}x sooner than Dense" in row.evidence
        # in words, and in the findings' time-to-accuracy table: the mark and the speed-up
        assert verdict_sentence(row).endswith(f"{row.cause}.")
        mark = {"holds": "✓", "fails": "✗", "inconclusive": "?"}[row.verdict]
        assert f"| {mark} {speedup:.3g}× |" in md
    assert ("| FNN-3 | Gaussian-k (2019) | ρ = 0.001 | Top-k −1 point | 3 | "
            in md)


def test_a_failed_seed_counts_with_its_evaluations_as_the_claims_count_it(tmp_path):
    _seeded(tmp_path, seeds=(0, 1))
    _run(tmp_path, "topk2", "topk", 2, (0.80, 0.90, 0.95))
    _run(tmp_path, "g2", G19, 2, (0.5,), status="failed", ratio=2.0)  # diverged at step 10
    table, _ = _table(tmp_path)
    g = table[(table["method"] == G19) & (table["seed"] == 2)]
    assert not g["reached"].any() and g["time_to_target_s"].isna().all()
    assert set(g["status"]) == {"failed"}
    claims = tta_claims.claims_rows(table, errors=ERRORS)
    # one seed of three never reaches it: counted as speed-up 0, the claim cannot hold, but
    # it does not fail on one seed (the accuracy claim's seed-and-interval rule)
    assert set(claims["verdict"]) == {"inconclusive"} and set(claims["n_failed_seeds"]) == {1}
    assert claims["cause"].str.startswith("1 of 3 seeds failed; never reaches the target on 1 "
                                          "of 3 seeds (counted as 0); ").all()
    assert claims["condition"].str.contains("steps to the target measured in the runs at P = "
                                            "4, the step time modelled at P = 16").all()
    # the convergence claims count the same failed seed
    runs = [load(p) for p in sorted((tmp_path / "conv").iterdir())]
    acc = claims_mod.build(runs, max_snapshots=0)
    assert set(acc.loc[acc["claim"] == "gaussiank_accuracy", "n_failed_seeds"]) == {1}
    # a failed run that reached the target before failing counts with that time, but a failed
    # seed never lets the claim hold
    other = tmp_path / "reached"
    _seeded(other, seeds=(0, 1))
    _run(other, "topk2", "topk", 2, (0.80, 0.90, 0.95))
    _run(other, "g2", G19, 2, (0.93, 0.945), status="failed", ratio=2.0)
    table, _ = _table(other)
    g = table[(table["method"] == G19) & (table["seed"] == 2)]
    assert g["reached"].all() and (g["steps_to_target"] == 20).all()
    claims = tta_claims.claims_rows(table, errors=ERRORS)
    assert "holds" not in set(claims["verdict"]) and set(claims["n_failed_seeds"]) == {1}
    assert claims["cause"].str.startswith("1 of 3 seeds failed; ").all()
    # a complete rerun of that seed stands for it instead
    _run(tmp_path, "g2-rerun", G19, 2, (0.93, 0.945, 0.96), ratio=2.0)
    table, _ = _table(tmp_path)
    assert table[(table["method"] == G19) & (table["seed"] == 2)]["reached"].all()
    assert set(table.loc[table["method"] == G19, "status"]) == {"complete"}


def test_the_claims_margin_sets_the_target_of_both(tmp_path):
    """One margin (the figures driver's Options) moves the convergence claims' limit and the
    time-to-accuracy target together."""
    _seeded(tmp_path)
    runs = [load(p) for p in sorted((tmp_path / "conv").iterdir())]
    table, _ = _table(tmp_path, runs=runs, margin=0.2)
    at = table[table["network"] == "10gbe"].set_index(["method", "seed"])
    for s in range(3):  # 0.945 misses 0.95 - 0.2 points; 0.96 at step 29 reaches it
        assert at.loc[(G19, s), "steps_to_target"] == 30
        assert at.loc[(G19, s), "target"] == pytest.approx(0.948)
    timed = tta_claims.claims_rows(table, errors=ERRORS)
    acc = claims_mod.build(runs, max_snapshots=0, margin=0.2)
    acc = acc[acc["claim"] == "gaussiank_accuracy"]
    assert set(timed["margin"]) == set(acc["margin"]) == {0.2}
    assert (timed["statement"].str.contains("Top-k's final accuracy −0.2 points")).all()
    with pytest.raises(ValueError, match="margin"):
        _table(tmp_path, runs=runs, margin=-1)


def test_only_the_runs_given_are_used(tmp_path):
    """The figures driver passes the runs its claims use: others under the root are not read."""
    _seeded(tmp_path)
    runs = [load(p) for p in sorted((tmp_path / "conv").iterdir()) if p.name != "g2"]
    table, _ = _table(tmp_path, runs=runs)
    assert set(table.loc[table["method"] == G19, "seed"]) == {0, 1}
    assert tta_claims.claims_rows(table, errors=ERRORS)["verdict"].eq("insufficient-data").all()


def test_conditions_are_never_mixed(tmp_path):
    """Each method is paired with Top-k of its own condition, its counts are its own runs'."""
    _seeded(tmp_path, ratio=0.02, g19=(0.3, 0.4, 0.5))        # collapses without warm-up
    _seeded(tmp_path, schedule="paper", ratio=2.4, topk=(0.9, 0.97, 0.98), prefix="p",
            g19=(0.9, 0.975, 0.99))
    table, _ = _table(tmp_path)
    by = table[table["network"] == "10gbe"].groupby(["method", "condition"])
    assert by["topk_final"].unique().map(list).to_dict() == {
        (G19, "warmup=none"): [0.95], (G19, "warmup=paper"): [0.98],
        ("topk", "warmup=none"): [0.95], ("topk", "warmup=paper"): [0.98]}
    assert by["count_ratio"].mean()[(G19, "warmup=none")] == pytest.approx(
        int(0.02 * K) / K)
    assert by["count_ratio"].mean()[(G19, "warmup=paper")] == pytest.approx(int(2.4 * K) / K)
    claims = tta_claims.claims_rows(table, errors=ERRORS).set_index("training_condition")
    none = claims.loc[["warmup=none; rho=0.001"]]
    assert set(none["verdict"]) == {"fails"} and set(none["n_failed_seeds"]) == {0}
    assert none["cause"].eq("never reaches the target on 3 of 3 seeds").all()
    paper = claims.loc[["warmup=paper; rho=0.001"]]  # 0.975 >= 0.97 at step 19 on every seed
    assert not paper["cause"].str.contains("never").any()


@pytest.mark.parametrize("speedups, counted, n_failed, verdict, never", [
    ([1.2, 1.22, 1.21], True, 0, "holds", 0),           # interval above 1 + e
    ([1.2, 1.3, 1.1], True, 0, "inconclusive", 0),      # faster on every seed, interval wide
    ([1.2, 1.03, 1.1], True, 0, "inconclusive", 0),     # one seed within the error
    ([0.8, 0.82, 0.81], True, 0, "fails", 0),           # interval below 1 - e
    ([0.9, 0.8, 0.85], True, 0, "inconclusive", 0),     # later on every seed, interval wide
    ([1.2, 0.8, 1.2], True, 0, "inconclusive", 0),      # the seeds disagree
    # one seed of five never reaches it: counted as 0, at best inconclusive, not fails
    ([1.2, 1.21, 1.2, 1.22, None], True, 0, "inconclusive", 1),
    ([0.1, None, 0.1], True, 0, "fails", 1),            # the interval, with the 0, below
    ([1.2, None, 1.2], True, 1, "inconclusive", 1),     # ... a failed run that never did
    ([1.2, 1.22, 1.21], True, 1, "inconclusive", 0),    # faster, but a seed's run failed
    ([0.8, 0.82, 0.81], True, 1, "fails", 0),
    ([1.5, 1.5, 1.5], False, 0, "inconclusive", 0),     # selection not counted: not decided
    ([None, None, None], False, 0, "fails", 3),         # never reaches it on any seed
    ([1.5, 1.5], True, 0, "insufficient-data", 0),
    ([1.5, 1.5], True, 1, "inconclusive", 0),           # as the convergence claims
    ([None, None], True, 2, "fails", 2),                # failed on every seed
    ([], True, 0, "insufficient-data", 0),
])
def test_verdict_rule_against_the_validated_error(speedups, counted, n_failed, verdict, never):
    got, faster, n_never = claims_verdicts.time_verdict(speedups, 0.05, counted, n_failed)
    assert (got, n_never) == (verdict, never)
    assert faster == sum(s is not None and s > 1.05 for s in speedups)


def test_another_devices_selection_is_not_counted(tmp_path):
    _seeded(tmp_path)
    table, _ = tta.time_to_accuracy_table(tmp_path, selection=_gpu_selection("cpu"))
    assert not table["selection_counted"].any() and (table["t_select"] == 0).all()
    assert table["select_source"].str.startswith(("not counted", "none")).all()
    claims = tta_claims.claims_rows(table, errors=ERRORS)
    assert set(claims["verdict"]) == {"inconclusive"} and claims["fraction"].isna().all()
    assert claims["cause"].str.startswith("with selection not counted").all()
    assert (claims["selection_basis"] == tta.SELECTION_NOT_COUNTED).all()


def test_write_time_to_accuracy_writes_the_table_the_figure_and_the_claims(tmp_path):
    _seeded(tmp_path)
    bench = tmp_path / "bench"
    bench.mkdir()
    _gpu_selection().to_csv(bench / "selection.csv", index=False)
    logged = []
    written, figures = tta.write_time_to_accuracy(tmp_path, log=logged.append)
    table = pd.read_csv(tmp_path / tta.CSV_NAME)
    assert len(written) == len(table)
    claims = tta_claims.claims_rows(written)
    assert len(table) == 3 * 2 * 2 and table["selection_counted"].all()
    ((name, caption, files),) = figures
    assert name == tta.FIGURE and (tmp_path / "figures" / f"{name}.png") in files
    assert "Top-k's final accuracy" in caption and len(claims) == 2
    assert math.isclose(float(claims["model_error"].iloc[0]),
                        published_errors.comparison_error(G19, "topk", validated_errors()))
    assert list(claims.columns) == claims_mod.COLUMNS
    assert set(claims_mod.PREDICTION_COLUMNS) <= set(claims.columns)
    # the LaTeX claims table names the claim and the training condition from the columns
    from topkscope.publish.paper_tables import claims_latex

    tex = claims_latex(claims, "Claims.")["claims"]
    assert tex.count("time to accuracy") == 2 and "trains as Top-k" not in tex
    assert r"predicted; counts from $\rho$ = 0.001; network" in tex
    empty = tmp_path / "empty"
    empty.mkdir()
    assert tta.write_time_to_accuracy(empty, log=logged.append)[0].empty
    assert any("no experiment with runs of Top-k" in line for line in logged)


@pytest.mark.parametrize("status", ["failed", "interrupted"])
def test_a_failed_or_unfinished_topk_seed_never_lets_it_hold(tmp_path, status):
    _seeded(tmp_path / "a")
    base = tta_claims.claims_rows(_table(tmp_path / "a")[0], errors=ERRORS).set_index("network")
    assert "holds" in set(base["verdict"])
    other = tmp_path / "b"  # the same runs, Top-k's seed 2 failed or unfinished
    _seeded(other, seeds=(0, 1))
    _run(other, "topk2", "topk", 2, (0.80, 0.90, 0.95), status=status)
    _run(other, "g2", G19, 2, (0.93, 0.945, 0.96), ratio=2.0)
    table, _ = _table(other)
    assert set(table.loc[(table["method"] == "topk") & (table["seed"] == 2), "status"]) == {
        status}
    rows = tta_claims.claims_rows(table, errors=ERRORS).set_index("network")
    for net in base.index[base["verdict"] == "holds"]:
        assert rows.loc[net, "verdict"] == "inconclusive"
        assert rows.loc[net, "cause"].startswith(f"Top-k seed 2 {status}; ")
