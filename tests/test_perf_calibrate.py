"""Calibration recovers alpha and beta from synthetic timings; networks resolve with sources."""

import numpy as np
import pandas as pd
import pytest

from topkscope.perf import calibrate, networks, patterns


def _synthetic(alpha, beta, noise, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for P in (2, 4):
        for n in [8] + [2**e for e in range(10, 26, 3)]:
            t_ar = patterns.ring_allreduce(P, n, alpha, beta)
            t_ag = patterns.allgather(P, n, alpha, beta)
            for coll, t in (("allreduce", t_ar), ("allgather", t_ag)):
                rows.append({"collective": coll, "workers": P, "nbytes": n,
                             "seconds": t * (1 + noise * rng.standard_normal())})
    return pd.DataFrame(rows)


def test_exact_timings_give_alpha_and_beta_back():
    fit = calibrate.fit_table(_synthetic(2e-4, 3e-9, 0.0))
    assert set(fit["workers"]) == {"2", "4", "all"}
    assert np.allclose(fit["alpha"], 2e-4, rtol=1e-6)
    assert np.allclose(fit["beta"], 3e-9, rtol=1e-6)


def test_noisy_timings_within_ten_percent():
    fit = calibrate.fit_table(_synthetic(5e-5, 1e-9, 0.03, seed=3))
    row = fit[(fit.collective == "allgather") & (fit.workers == "all")].iloc[0]
    assert row["alpha"] == pytest.approx(5e-5, rel=0.1)
    assert row["beta"] == pytest.approx(1e-9, rel=0.1)


def test_fit_refuses_bad_input():
    with pytest.raises(ValueError, match="at least 2"):
        calibrate.fit_alpha_beta("allgather", [2], [8], [1e-4])
    with pytest.raises(ValueError, match="> 0"):
        calibrate.fit_alpha_beta("allgather", [2, 2], [8, 16], [1e-4, 0.0])
    with pytest.raises(ValueError, match="collective"):
        calibrate.features("broadcast", [2], [8])


def test_calibration_csv_is_a_network(tmp_path):
    fit = calibrate.fit_table(_synthetic(2e-4, 3e-9, 0.0))
    path = tmp_path / "cal.csv"
    fit.to_csv(path, index=False)
    net = networks.resolve(str(path))
    assert net.constants("allgather") == pytest.approx((2e-4, 3e-9))
    assert net.constants("allreduce") == pytest.approx((2e-4, 3e-9))
    assert "measured here" in net.alpha_source
    four = networks.from_calibration(path, workers="4")
    assert four.alpha == pytest.approx(2e-4)


def test_presets_and_user_overrides():
    ten = networks.resolve("10gbe-line")
    assert ten.bandwidth_gbit == pytest.approx(10.0)
    assert "preset" in ten.beta_source
    mixed = networks.resolve("10gbe-line", beta=1e-9)
    assert mixed.beta == 1e-9 and mixed.beta_source == "user" and mixed.alpha == ten.alpha
    user = networks.resolve(None, alpha=1e-4, beta=2e-9)
    assert (user.alpha_source, user.beta_source) == ("user", "user")
    with pytest.raises(ValueError, match="unknown network"):
        networks.resolve("3gbe")
    with pytest.raises(ValueError, match="both alpha and beta"):
        networks.resolve(None, alpha=1e-4)
    with pytest.raises(ValueError, match="beta"):
        networks.resolve("1gbe", beta=-1.0)
    assert networks.available()[0] == "1gbe"


def test_the_plain_names_are_the_fitted_presets_and_line_rates_carry_line():
    """`10gbe` / `ib100` are fitted on published measurements (a factor below 1), their line
    rates `-line`; the figures' labels say the same (plots cannot import perf); tables written
    before the renaming read with today's names."""
    from topkscope.plots import scaling

    fitted = {n for n in networks.PRESETS if networks.is_fitted(n)}
    assert fitted == set(networks.FIT_FACTORS) == set(scaling.CLUSTER_NETWORKS)
    for name in fitted:
        line = networks.PRESETS[name + networks.LINE]
        assert line.bandwidth_factor == 1.0 and networks.PRESETS[name].beta > line.beta
        assert scaling.network_name(name).endswith("fitted on published measurements")
        assert scaling.network_name(name + networks.LINE).endswith("line rate")
        assert networks.resolve(f"{name}-fit") == networks.PRESETS[name]
    assert scaling.network_name("1gbe") == "1 GbE, line rate"
    assert not any("measured" in scaling.network_name(n) and not networks.is_fitted(n)
                   for n in networks.PRESETS)
    old = networks.current_names(["1gbe", "10gbe-fit", "10gbe", "ib100-fit", "ib100"])
    assert old == {"1gbe": "1gbe", "10gbe-fit": "10gbe", "10gbe": "10gbe-line",
                   "ib100-fit": "ib100", "ib100": "ib100-line"}
    assert networks.current_names(["10gbe", "10gbe-line"]) == {"10gbe": "10gbe",
                                                               "10gbe-line": "10gbe-line"}
