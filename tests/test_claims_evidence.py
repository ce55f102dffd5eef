"""The claims' evidence a reviewer asks for, recomputed here from the constructed runs (never
from the claims code): one row per condition (warm-up units apart), the Gaussian-value claim,
the generalised-normal shape, failed seeds counted, the margin, traffic per phase, causes."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from tests.test_analysis_claims import DENSITIES, D, RunLike, eval_run, stats_rows
from topkscope import claims

PAPER = (0.015625, 0.004)  # the paper warm-up: one density per epoch


def recorded_run(draw, *, density=0.001, schedule=None, steps=6, ranks=2, spe=2, seed=0,
                 snapshot_steps=(), model="m") -> RunLike:
    """A Top-k run with recorder rows at every step (spe steps per epoch)."""
    rng = np.random.default_rng(seed)
    rows, vectors = [], {}
    for step in range(steps):
        for rank in range(ranks):
            u = draw(rng)
            rows += stats_rows(u, step, rank)
            if step in snapshot_steps and rank == 0:
                vectors[(step, rank)] = u
    manifest = {"experiment": f"{model}-exp", "model": model, "dataset": "mnist",
                "dataset_substitute": None, "sparsifier": "topk", "density": density,
                "density_schedule": schedule, "steps_per_epoch": spe, "status": "complete",
                "seed": seed}
    return RunLike(manifest=manifest, stats=pd.DataFrame(rows), vectors=vectors)


def gaussian(rng):
    return rng.standard_normal(D)


def heavy(rng):
    return rng.standard_t(2.5, D)


def rows_of(table, claim, **match) -> pd.DataFrame:
    rows = table[table["claim"] == claim]
    for col, value in match.items():
        rows = rows[rows[col] == value]
    return rows


# --------------------------------------------------------------------- one row per condition
LONG = {"steps": 30, "ranks": 1}  # the 30 (run, step) blocks a share needs for a verdict
@pytest.fixture(scope="module")
def conditions_table() -> pd.DataFrame:
    runs = [recorded_run(gaussian, density=0.001, seed=0, **LONG),
            recorded_run(heavy, density=0.01, seed=1, **LONG),
            recorded_run(gaussian, density=0.001, schedule="paper", steps=6, seed=2)]
    return claims.build(runs, max_snapshots=0)


def test_each_condition_is_its_own_row_and_warmup_units_are_apart(conditions_table):
    """One row per (condition, phase, recorder density): the warm-up's units apart from the
    target density's, each density the recorder evaluated Top-k at apart, and no summary row
    pooling conditions."""
    units_per_step = 2  # ranks
    long = LONG["steps"] * LONG["ranks"]
    expected = {  # from the schedule: epoch = step // 2; epochs 0, 1 warm up (PAPER)
        "warmup=none; rho=0.001": long,
        "warmup=none; rho=0.01": long,
        "warmup=paper; rho=0.001": 2 * units_per_step,                       # steps 4, 5
        f"warmup=paper; rho=0.001; during warm-up at rho={PAPER[0]:g}": 2 * units_per_step,
        f"warmup=paper; rho=0.001; during warm-up at rho={PAPER[1]:g}": 2 * units_per_step,
    }
    below = rows_of(conditions_table, "below_paper").set_index("condition")["n_units"]
    assert below.to_dict() == {f"{c}; recorded at rho={d:g}": n for c, n in expected.items()
                               for d in DENSITIES}
    assert claims.ALL_CONDITIONS not in set(conditions_table["condition"])
    warm = rows_of(conditions_table, "below_paper", phase="warm-up")
    assert sorted(set(warm["phase_density"])) == sorted(PAPER)
    assert set(rows_of(conditions_table, "below_paper", phase="")["phase_density"].isna()) == {
        True}


def test_conditions_that_behave_oppositely_are_not_pooled(conditions_table):
    v = rows_of(conditions_table, "gaussian_like").set_index("condition")["verdict"]
    assert v["warmup=none; rho=0.001"] == "holds"    # Gaussian draws
    assert v["warmup=none; rho=0.01"] == "fails"     # Student-t, 2.5 degrees of freedom
    assert claims.ALL_CONDITIONS not in v  # no summary pools the two


def gaussian_value(k: int, d: int) -> float:
    """The Gaussian value, written out here: 1 - rho - 2 t phi(t), t = Phi^-1(1 - rho/2)."""
    rho = k / d
    t = sps.norm.isf(rho / 2)
    return 1 - rho - 2 * t * sps.norm.pdf(t)


def test_gaussian_value_claim_counts_units_at_most_the_gaussian_prediction(conditions_table):
    for cond, draw, seed in (("warmup=none; rho=0.001", gaussian, 0),
                             ("warmup=none; rho=0.01", heavy, 1)):
        u = recorded_run(draw, seed=seed, **LONG).stats
        u = u[u["kind"] == "u"]
        passed = [r <= gaussian_value(k, n) * (1 + 1e-9)
                  for r, k, n in zip(u["topk_ratio"], u["k"], u["numel"])]
        u = u[u["density"] == DENSITIES[0]]
        passed = [r <= gaussian_value(k, n) * (1 + 1e-9)
                  for r, k, n in zip(u["topk_ratio"], u["k"], u["numel"])]
        row = rows_of(conditions_table, "gaussian_value", recorder_density=DENSITIES[0],
                      condition=f"{cond}; recorded at rho={DENSITIES[0]:g}").iloc[0]
        assert row["n_units"] == len(passed)
        assert row["fraction"] == pytest.approx(np.mean(passed))
        assert row["cause"].startswith(f"{sum(passed)} of {len(passed)} units "
                                       f"({np.mean(passed):.0%}; 95% interval ")
        assert row["fraction_low"] <= row["fraction"] <= row["fraction_high"]
    # heavy tails contract more than a Gaussian vector would
    assert set(rows_of(conditions_table, "gaussian_value", training_density=0.01,
                       warmup="none")["verdict"]) == {"holds"}
    flat = claims.build([recorded_run(lambda r: r.choice([-1.0, 1.0], 2000), **LONG)],
                        max_snapshots=0)
    assert rows_of(flat, "gaussian_value")["verdict"].iloc[0] == "fails"


def test_gennorm_beta_is_the_median_shape_of_the_snapshot_fits():
    laplace = recorded_run(lambda r: r.laplace(size=D), steps=4, snapshot_steps=(0, 2, 3))
    row = rows_of(claims.build([laplace]), "gaussian_like").iloc[0]
    betas = [sps.gennorm.fit(laplace.vectors[(s, 0)].astype(np.float32).astype(np.float64))[0]
             for s in (0, 2, 3)]
    assert row["gennorm_beta"] == pytest.approx(np.median(betas), rel=0.03)
    assert 0.85 < row["gennorm_beta"] < 1.15  # Laplace: beta = 1
    assert f"beta median {row['gennorm_beta']:.3g} (IQR " in row["evidence"]


# --------------------------------------------------------------------- failed seeds
def failed_run(method: str, seed: int, last: float | None, step: int = 10) -> RunLike:
    """A run of `method` that diverged after evaluating `last` at `step` (None: never)."""
    run = eval_run("acc", method, 0.0, seed=seed, status="failed")
    run.manifest["error"] = f"training diverged at step {step + 5}: loss = nan on worker 0"
    run.eval = (run.eval.iloc[:0] if last is None else
                pd.DataFrame({"step": [step], "epoch": [0], "split": ["test"], "loss": [1.0],
                              "metric": [last], "metric_name": ["accuracy"]}))
    return run


TOPK = [0.950, 0.960, 0.955, 0.952, 0.958]


def five_seeds(method_finals: list[float], failed: dict[int, float | None]) -> list[RunLike]:
    runs = [eval_run("acc", "topk", m, seed=s) for s, m in enumerate(TOPK)]
    for s, m in enumerate(method_finals):
        runs.append(failed_run("randk", s, failed[s]) if s in failed
                    else eval_run("acc", "randk", m, seed=s))
    return runs


def test_failed_seeds_count_with_their_last_accuracy_or_the_worst_value():
    finals = [0.951, 0.959, 0.956, 0.0, 0.0]
    runs = five_seeds(finals, failed={3: 0.62, 4: None})
    row = rows_of(claims.build(runs), "randk_accuracy").iloc[0]
    counted = [0.951, 0.959, 0.956, 0.62, 0.0]  # the last evaluation; never evaluated: 0
    diffs = 100 * (np.array(counted) - np.array(TOPK))
    half = sps.t.ppf(0.975, 4) * diffs.std(ddof=1) / np.sqrt(5)
    assert row["n_seeds"] == 5 and row["n_failed_seeds"] == 2
    assert row["diff_mean"] == pytest.approx(diffs.mean())
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((diffs.mean() - half,
                                                             diffs.mean() + half))
    assert row["verdict"] in ("fails", "inconclusive")  # never insufficient-data, never holds
    assert row["cause"].startswith("2 of 5 seeds failed")
    assert "before any evaluation: counted as accuracy 0" in row["evidence"]
    assert "training diverged at step 15" in row["evidence"]
    for s, d in enumerate(diffs):
        assert f"seed {s} {d:+.3g}".replace("-", "−") in row["evidence"]


def test_a_failing_seed_never_lets_the_claim_hold():
    close = [0.951, 0.959, 0.956, 0.953, 0.0]
    ok = rows_of(claims.build(five_seeds(close[:4] + [0.957], {})), "randk_accuracy").iloc[0]
    assert ok["verdict"] == "holds" and ok["n_failed_seeds"] == 0
    # the same seeds, the fifth diverging right after an evaluation that matched Top-k
    row = rows_of(claims.build(five_seeds(close, {4: 0.957})), "randk_accuracy").iloc[0]
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((ok["ci_low"], ok["ci_high"]))
    assert row["verdict"] == "inconclusive" and row["cause"].startswith("1 of 5 seeds failed")


def test_every_seed_failing_fails_and_few_seeds_with_a_failure_are_inconclusive():
    every = five_seeds([0.0] * 5, {s: 0.9 for s in range(5)})
    assert rows_of(claims.build(every), "randk_accuracy")["verdict"].iloc[0] == "fails"
    two = [eval_run("acc", "topk", m, seed=s) for s, m in enumerate(TOPK[:2])]
    two += [eval_run("acc", "randk", 0.95, seed=0), failed_run("randk", 1, 0.3)]
    row = rows_of(claims.build(two), "randk_accuracy").iloc[0]
    assert row["n_seeds"] == 2 and row["verdict"] == "inconclusive"
    assert "2 paired seed(s), 3 needed" in row["cause"]


def test_a_complete_run_of_a_seed_wins_over_a_failed_attempt():
    runs = five_seeds([0.951, 0.959, 0.956, 0.953, 0.957], {})
    runs.append(failed_run("randk", 2, 0.1))  # an earlier attempt of seed 2
    row = rows_of(claims.build(runs), "randk_accuracy").iloc[0]
    assert row["n_failed_seeds"] == 0 and row["verdict"] == "holds"


# --------------------------------------------------------------------- the margin
def test_the_margin_is_named_in_the_rule_and_settable():
    runs = five_seeds([0.949, 0.955, 0.950, 0.950, 0.953], {})
    diffs = 100 * (np.array([0.949, 0.955, 0.950, 0.950, 0.953]) - np.array(TOPK))
    half = sps.t.ppf(0.975, 4) * diffs.std(ddof=1) / np.sqrt(5)
    low, high = diffs.mean() - half, diffs.mean() + half
    assert -1 < low < -0.2 < high < 0  # above -1 point, straddling -0.2, below -0.1
    wide = rows_of(claims.build(runs), "randk_accuracy").iloc[0]
    assert wide["margin"] == 1.0 and "m = 1 point(s)" in wide["rule"]
    assert wide["verdict"] == "holds" and "above −1 point" in wide["cause"]
    narrow = rows_of(claims.build(runs, margin=0.2), "randk_accuracy").iloc[0]
    assert narrow["margin"] == 0.2 and "m = 0.2 point(s)" in narrow["rule"]
    assert narrow["verdict"] == "inconclusive" and "contains −0.2 points" in narrow["cause"]
    none = rows_of(claims.build(runs, margin=0.0), "randk_accuracy").iloc[0]
    assert none["verdict"] == "fails" and "below −0 points" in none["cause"]
    with pytest.raises(ValueError, match="margin = -1"):
        claims.build(runs, margin=-1)


def test_perplexity_margin_is_in_percent_of_topks_perplexity():
    topk = [100.0, 100.0, 100.0]
    runs = ([eval_run("ptb", "topk", p, seed=s, name="perplexity") for s, p in enumerate(topk)]
            + [eval_run("ptb", "randk", p, seed=s, name="perplexity")
               for s, p in enumerate([101.0, 102.0, 101.5])])
    row = rows_of(claims.build(runs), "randk_accuracy").iloc[0]
    assert row["metric"] == "perplexity" and row["margin"] == 3.0
    assert row["verdict"] == "holds" and "below +3%" in row["cause"]
    diffs = 100 * (np.array([101.0, 102.0, 101.5]) / 100.0 - 1)  # % of Top-k's
    low = diffs.mean() - sps.t.ppf(0.975, 2) * diffs.std(ddof=1) / np.sqrt(3)
    assert row["ci_low"] == pytest.approx(low) and 0.2 < low < 1.0
    strict = rows_of(claims.build(runs, perplexity_margin=0.2), "randk_accuracy").iloc[0]
    assert strict["verdict"] == "fails" and "above +0.2%" in strict["cause"]
    middle = rows_of(claims.build(runs, perplexity_margin=1.0), "randk_accuracy").iloc[0]
    assert middle["verdict"] == "inconclusive" and "contains +1%" in middle["cause"]
    traffic = rows_of(claims.build(runs), "randk_traffic").iloc[0]
    assert traffic["statement"] == ("Rand-k reaches Top-k's perplexity while sending at most "
                                    "4/3 of Top-k's elements")


# --------------------------------------------------------------------- traffic per phase
def traffic_run(method: str, seed: int, warm: float, target: float, metric: float,
                steps: int = 10) -> RunLike:
    """Steps 0..steps-1, 2 per epoch, paper warm-up (steps 0-3), `warm` / `target` elements
    sent per step in each phase."""
    run = eval_run("acc", method, metric, seed=seed, schedule="paper")
    run.manifest["steps_per_epoch"] = 2
    step = np.arange(steps)
    run.train = pd.DataFrame({"step": step, "epoch": step // 2,
                              "selected": np.where(step < 4, warm, target)})
    return run


def test_traffic_is_reported_per_phase_and_judged_at_the_target_density():
    runs = [traffic_run("topk", s, 100.0, 10.0, m) for s, m in enumerate(TOPK[:3])]
    runs += [traffic_run("gaussiank-2019", s, 300.0, 12.0, m) for s, m in enumerate(TOPK[:3])]
    table = claims.build(runs)
    acc = rows_of(table, "gaussiank_accuracy").iloc[0]
    traffic = rows_of(table, "gaussiank_traffic").iloc[0]
    # from the frames: warm-up steps 0-3, target steps 4-9
    assert traffic["traffic_warmup"] == pytest.approx((4 * 300) / (4 * 100))
    assert traffic["traffic_target"] == pytest.approx((6 * 12) / (6 * 10))
    assert traffic["traffic_ratio"] == pytest.approx((4 * 300 + 6 * 12) / (4 * 100 + 6 * 10))
    assert acc["verdict"] == "holds"
    # 2.77x over the whole run, but 1.2x at the target density: the warm-up does not decide
    assert traffic["verdict"] == "holds"
    assert traffic["cause"] == ("matches Top-k and sends 1.2× Top-k's elements at the target "
                                "density (ratio used: traffic_target, against Top-k under the "
                                "same warm-up)")
    costly = [traffic_run("topk", s, 100.0, 10.0, m) for s, m in enumerate(TOPK[:3])]
    costly += [traffic_run("gaussiank-2019", s, 100.0, 23.6, m) for s, m in enumerate(TOPK[:3])]
    row = rows_of(claims.build(costly), "gaussiank_traffic").iloc[0]
    assert row["verdict"] == "fails"
    assert row["cause"].startswith("sends 2.36× Top-k's elements at the target density (every "
                                   "seed above 4/3)")


def test_a_failed_run_is_compared_on_the_steps_both_runs_logged():
    runs = [traffic_run("topk", s, 100.0, 10.0, m) for s, m in enumerate(TOPK[:3])]
    runs += [traffic_run("randk", s, 100.0, 10.0, m) for s, m in enumerate(TOPK[:2])]
    broken = traffic_run("randk", 2, 100.0, 30.0, 0.5, steps=6)  # stopped after step 5
    broken.manifest.update(status="failed", error="training diverged at step 6")
    runs.append(broken)
    row = rows_of(claims.build(runs), "randk_traffic").iloc[0]
    # seed 2: target steps 4, 5 of both runs: 60 / 20
    assert row["traffic_target"] == pytest.approx((1 + 1 + 3) / 3)
    assert row["n_failed_seeds"] == 1 and math.isfinite(row["traffic_ratio"])
