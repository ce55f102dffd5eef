"""SIDCo's thresholds against the true k-th largest |u| (analysis.fitted_thresholds) and the
share of the sent values the quantizer's range holds (analysis.sent_range): each number is the
selector's own, checked against direct calls and float64 references."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from topkscope.analysis import fitted_thresholds as F
from topkscope.analysis import sent_range as S
from topkscope.sparsify import get_sparsifier
from topkscope.sparsify._helpers import mean_std, strided_sample
from topkscope.sparsify.sidco import ADAPT_BAND, ADAPT_EVERY, SIDCo, SIDCoFixed, max_stages

D = 200_000


def sample(kind: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "laplace":
        return rng.laplace(0.0, 0.01, D).astype(np.float32)
    if kind == "normal":
        return rng.normal(0.0, 0.01, D).astype(np.float32)
    return (0.01 * rng.standard_t(3.0, D)).astype(np.float32)


# --- SIDCo ---------------------------------------------------------------------------------------


def test_stages_given_their_first_fit_give_the_same_threshold_as_from_scratch():
    mag = torch.from_numpy(np.abs(sample("student_t")))
    moments = mean_std(mag)
    for dist in ("exponential", "gamma", "gpareto"):
        first = SIDCo(dist=dist).first_stage(mag, *moments)
        for stages in (1, 2, 4):
            sel = SIDCo(dist=dist, stages=stages)
            assert sel.staged_threshold(mag, 0.001, moments, first) == \
                sel.staged_threshold(mag, 0.001)


@pytest.mark.parametrize("kind", ["laplace", "normal", "student_t"])
def test_rows_are_sidcos_own_thresholds_against_the_true_kth_largest(kind):
    u = sample(kind)
    rows = F.sidco_thresholds(u, [0.001, 0.01, 0.5])
    assert list(rows.columns) == F.COLUMNS
    mags = np.sort(np.abs(u.astype(np.float64)))
    mag_t = torch.from_numpy(np.abs(u))
    for r in rows.itertuples():
        k = max(1, round(r.density * D))
        assert (r.k, r.d, r.kth) == (k, D, mags[D - k])
        if r.rule == "sidco":
            eta = SIDCo(dist=r.dist, stages=r.stages).staged_threshold(mag_t, k / D)
        else:
            eta = SIDCoFixed(dist=r.dist).fitted_threshold(
                strided_sample(torch.from_numpy(u), 1 << 18), k / D)
        assert r.threshold == eta
        assert r.count == int(np.count_nonzero(np.abs(u) > eta))
        assert r.count_over_k == r.count / k and r.threshold_over_kth == eta / mags[D - k]
    # every law at rho >= first_ratio is one stage: one row per law and rule
    assert len(rows[(rows["density"] == 0.5) & (rows["rule"] == "sidco")]) == 3
    # stage counts from 1, at least 3 (max_stages allows 10 at 0.001)
    assert set(rows.query("density == 0.001 and rule == 'sidco'")
               .groupby("dist")["stages"].min()) == {1}
    assert (rows.query("density == 0.001 and rule == 'sidco'").groupby("dist")["stages"]
            .max() >= 3).all()


def test_the_exponential_law_predicts_the_kth_largest_of_a_laplace_vector():
    """|u| of a Laplace vector is exponential: one fitted stage lands on the k-th largest."""
    rows = F.sidco_thresholds(sample("laplace"), [0.001, 0.01])
    single = rows.query("rule == 'sidco' and dist == 'exponential' and stages == 1")
    assert np.allclose(single["threshold_over_kth"], 1.0, atol=0.03)
    assert ((single["count_over_k"] > 0.8) & (single["count_over_k"] < 1.2)).all()
    gaussian = F.sidco_thresholds(sample("normal"), [0.001]).query(
        "rule == 'sidco' and dist == 'exponential' and stages == 1")
    assert float(gaussian["count_over_k"].iloc[0]) < 0.2  # a Gaussian tail is lighter


@pytest.mark.parametrize("kind, dist", [("normal", "exponential"), ("student_t", "gpareto"),
                                        ("normal", "gamma")])
def test_adapted_is_where_sidcos_own_adaptation_goes_on_this_vector(kind, dist):
    """The authors' adaptation, run on a stream of the same vector from M = 1, reaches the
    row marked `adapted` (or alternates between it and one stage less when that row sends
    more than 1.2 k)."""
    u = sample(kind)
    rho = 0.001
    rows = F.sidco_thresholds(u, [rho], dists=(dist,)).query("rule == 'sidco'")
    (marked,) = rows[rows["adapted"]].itertuples()
    selector = SIDCo(dist=dist)
    k = round(rho * D)
    seen = []
    for _ in range(ADAPT_EVERY * (max_stages(rho) + 2)):
        selector.select(torch.from_numpy(u), k)
        seen.append(selector.stages)
    settled = set(seen[-2 * ADAPT_EVERY:])
    if marked.count_over_k <= 1.0 + ADAPT_BAND:
        assert settled == {marked.stages}
    else:
        assert settled <= {marked.stages - 1, marked.stages}
    earlier = rows[rows["stages"] < marked.stages]
    assert (earlier["count_over_k"] < 1.0 - ADAPT_BAND).all()


def test_a_zero_vector_has_no_threshold_rows():
    assert F.sidco_thresholds(np.zeros(1000), [0.01]).empty
    assert list(F.sidco_thresholds(np.zeros(1000), [0.01]).columns) == F.COLUMNS


# --- the range of the sent values ----------------------------------------------------------------


def reference_shares(sent: np.ndarray, bits: int) -> tuple[float, float, float]:
    """(within 3 s, within 6 s, held by the b-bit range) of one group, float64, by hand."""
    c = sent - sent.mean()
    s = math.sqrt(float(np.sum(c * c)) / (sent.size - 1))
    n = 2**bits
    codes = np.round(c / (6.0 * s / n) + n // 2)
    return (float(np.mean(np.abs(c) <= 3 * s)), float(np.mean(np.abs(c) <= 6 * s)),
            float(np.mean((codes >= 0) & (codes <= n - 1))))


@pytest.mark.parametrize("kind", ["normal", "student_t"])
def test_shares_are_those_of_the_values_topk_and_chunk_topk_send(kind):
    u = sample(kind)
    rows = S.sent_range(u, [0.001, 0.05])
    assert list(rows.columns) == S.COLUMNS and len(rows) == 4
    vec = torch.from_numpy(u)
    for r in rows.itertuples():
        name = r.selector
        idx = get_sparsifier(name).select(vec, r.k).numpy()
        sent = u[idx].astype(np.float64)
        if name == "topk":  # the k largest |u|
            assert np.sort(np.abs(sent)).tolist() == np.sort(np.abs(u))[-r.k:].astype(
                np.float64).tolist()
        within3, within6, held2 = reference_shares(sent, 2)
        assert (r.n_sent, r.groups) == (r.k, 1)
        assert r.share_within_3sd == pytest.approx(within3, abs=1e-12)
        assert r.share_within_6sd == pytest.approx(within6, abs=1e-12)
        assert r.share_held_2bit == pytest.approx(held2, abs=1e-12)
        assert r.share_held_8bit == pytest.approx(reference_shares(sent, 8)[2], abs=1e-12)
        c = sent - sent.mean()
        assert r.max_abs_z == pytest.approx(np.max(np.abs(c)) / c.std(ddof=1), rel=1e-12)


def test_an_outlier_in_u_is_sent_and_falls_outside_the_range():
    u = sample("normal")
    u[123] = 50.0  # one spike, 5000 standard deviations of u
    row = S.sent_range(u, [0.001]).query("selector == 'topk'").iloc[0]
    assert row["max_abs_z"] > 6 and row["share_within_6sd"] == 1 - 1 / row["k"]
    assert row["share_held_2bit"] < 1 and row["share_held_8bit"] < 1


def test_groups_take_the_statistics_of_their_own_values():
    u = sample("normal")
    groups = np.repeat([0, 1], D // 2)
    u[D // 2:] *= 100.0  # the second tensor's values are 100 times larger
    rows = S.sent_range(u, [0.01], groups=groups).query("selector == 'chunk-topk'")
    row = rows.iloc[0]
    idx = get_sparsifier("chunk-topk").select(torch.from_numpy(u), row["k"]).numpy()
    sent, g = u[idx].astype(np.float64), groups[idx]
    expect = np.mean([v for grp in (0, 1) for v in
                      (np.abs(sent[g == grp] - sent[g == grp].mean())
                       <= 3 * sent[g == grp].std(ddof=1))])
    assert row["groups"] == 2 and row["share_within_3sd"] == pytest.approx(expect, abs=1e-12)
    with pytest.raises(ValueError, match="groups has 3 entries, u 200000"):
        S.sent_range(u, [0.01], groups=[0, 1, 2])
