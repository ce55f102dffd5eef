"""Claim fitted_value and the fourth reference curve of the contraction figure: the Top-k
contraction of the fitted generalised normal (with the measured zero share) against the
measured delta and the Gaussian value, on vectors where the answer is known."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.test_analysis_claims import D, make_run
from topkscope import claims, plots
from topkscope.analysis import fits, fitted_value, snapshots
from topkscope.bounds import gennorm_ratio
from topkscope.claims.explanation import CLAIM as EXPLAINS
from topkscope.kernel import topk_ratio
from topkscope.plots.contraction import FITTED_LABEL


def laplace_with_zeros(rng):
    u = rng.laplace(size=D)
    u[rng.random(D) < 0.3] = 0.0   # unused embedding rows
    return u


def clipped_laplace(rng):
    """A Laplace bulk whose extreme tail is cut (as error feedback truncates it): the bulk's
    fitted shape (beta ~ 1.3) overstates the energy in the top entries."""
    return np.clip(rng.laplace(size=D), -3.0, 3.0)


def fitted_row(draw, **kw) -> pd.Series:
    table = claims.build([make_run("m", draw, snapshot_steps=(0, 1, 2, 3), **kw)])
    return table.query("claim == 'fitted_value'").iloc[0]


def test_zero_inflated_laplace_the_fitted_value_is_closer():
    row = fitted_row(laplace_with_zeros)
    assert row["verdict"] == "holds" and row["section"] == "distribution"
    assert row["n_units"] == 4 and row["ci_low"] > 0.3   # 4 snapshots at one density
    assert "zero share 0.3" in row["evidence"]


def test_truncated_tail_the_gaussian_value_is_closer():
    row = fitted_row(clipped_laplace)
    assert row["verdict"] == "fails" and row["ci_high"] < 0
    assert "the Gaussian value is closer" in row["cause"]


def test_gaussian_vectors_cannot_tell_them_apart():
    row = fitted_row(lambda r: r.standard_normal(D))
    assert row["verdict"] == "inconclusive" and row["ci_low"] < 0 < row["ci_high"]


def test_units_are_gennorm_ratio_of_the_snapshots_fit():
    rng = np.random.default_rng(3)
    u = laplace_with_zeros(rng)
    tables = snapshots.analyze_snapshot(u, 5, 0, [0.001, 0.01], seed=0)
    units = fitted_value.snapshot_units(tables.contraction, tables.fits)
    table = fits.compare(u, seed=0)
    beta = float(table.query("family == 'gennorm' and on == 'x'")["shape"].iloc[0])
    for row in units.itertuples():
        assert row.zero_share == pytest.approx(np.mean(u == 0), abs=1e-12)
        assert row.fitted_ratio == pytest.approx(gennorm_ratio(row.k, D, beta, row.zero_share))
        assert row.delta == pytest.approx(topk_ratio(u, row.k), rel=1e-9)
        assert row.fit_error == pytest.approx(abs(row.delta - row.fitted_ratio) / (1 - row.delta))


def test_too_few_snapshot_steps_are_insufficient_data():
    row = claims.build([make_run("m", laplace_with_zeros, snapshot_steps=(0, 1))]).query(
        "claim == 'fitted_value'").iloc[0]
    assert row["verdict"] == "insufficient-data" and "2 snapshot step(s)" in row["cause"]


def test_cluster_bootstrap_resamples_whole_steps():
    rng = np.random.default_rng(0)
    values = rng.standard_normal(60)
    copies = np.repeat(values, 5)   # five perfectly correlated units per step

    def mean_of(x):
        return lambda i: float(np.mean(x[i]))

    by_step = fitted_value.cluster_bootstrap(mean_of(copies), np.repeat(np.arange(60), 5))
    one_each = fitted_value.cluster_bootstrap(mean_of(values), np.arange(60))
    as_units = fitted_value.cluster_bootstrap(mean_of(copies), np.arange(300))
    assert by_step == pytest.approx(one_each, rel=1e-12)
    # treating the copies as independent units would narrow the interval by about sqrt(5)
    assert (as_units[2] - as_units[1]) < 0.6 * (by_step[2] - by_step[1])
    # the percentile interval of a mean is close to the normal-theory one
    half = 1.96 * values.std(ddof=1) / np.sqrt(values.size)
    assert by_step[2] - by_step[1] == pytest.approx(2 * half, rel=0.15)
    assert np.isnan(fitted_value.cluster_bootstrap(mean_of(values), [0] * 60)[1])


def test_the_contraction_figure_draws_the_fitted_value_at_the_snapshots():
    run = make_run("m", laplace_with_zeros, ranks=1, snapshot_steps=(0, 2, 3))
    analysis = snapshots.analyze_run(run)
    fitted = fitted_value.analysis_units(analysis.ratios, analysis.fits)
    fig = plots.contraction_over_iterations(run.stats, fitted=fitted)
    for ax, rho in zip(fig.axes, sorted(run.stats["density"].unique())):
        (line,) = [ln for ln in ax.lines if ln.get_label() == FITTED_LABEL]
        assert list(line.get_xdata()) == [0, 2, 3]
        expected = []
        for step in (0, 2, 3):
            u = run.snapshot(step, 0)
            beta = float(fits.compare(u, seed=0).query("family == 'gennorm' and on == 'x'")
                         ["shape"].iloc[0])
            k = int(round(rho * D))
            expected.append(gennorm_ratio(k, D, beta, float(np.mean(u == 0))))
        np.testing.assert_allclose(line.get_ydata(), expected, rtol=1e-12)
    # one legend below the panels for the series they share
    assert FITTED_LABEL in [t.get_text() for t in fig.legends[0].get_texts()]
    without = plots.contraction_over_iterations(run.stats)
    assert FITTED_LABEL not in [ln.get_label() for ax in without.axes for ln in ax.lines]


def test_the_new_claims_are_answered_by_their_own_questions():
    """The fitted value and the explanation of convergence are asked by their own registered
    questions: the answers block names them with their words read off their rows, and a
    table without their rows does not ask them."""
    from topkscope.publish import headline

    base = pd.read_csv(Path(__file__).resolve().parents[1] / "results" / "reference"
                       / "claims-quick.csv")
    base = base[~base["claim"].isin(["fitted_value", EXPLAINS])]

    def rows(claim, verdicts, section):
        return [{"model": m, "dataset": "mnist", "claim": claim, "verdict": v, "n_runs": 5,
                 "n_units": 8, "fraction": 0.5, "cause": "measured", "section": section,
                 "condition": f"c{i}", "sparsifier": "topk", "statement": "s", "rule": "r",
                 "reason": "" if v in ("holds", "fails") else "not-significant"}
                for i, (m, v) in enumerate(verdicts)]

    beyond = pd.DataFrame(
        rows("fitted_value", [("fnn3", "holds"), ("lstm", "fails"), ("gpt", "fails")],
             "distribution")
        + rows(EXPLAINS, [("fnn3", "inconclusive")] * 2, "explanation"))
    text = headline.answers_markdown({"Quick": pd.concat([base, beyond], ignore_index=True)})
    lines = text.splitlines()
    fitted = next(i for i, ln in enumerate(lines) if "fitted generalised normal" in ln)
    assert lines[fitted + 1].startswith("  - quick: Only in some conditions")
    explained = next(i for i, ln in enumerate(lines) if "order the methods' gap" in ln)
    assert lines[explained + 1].startswith("  - quick: Not settled")
    assert headline.long_lines(text) == []
    plain = headline.answers_markdown({"Quick": base})
    assert "fitted generalised normal" not in plain and "order the methods' gap" not in plain
