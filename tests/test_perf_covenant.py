"""Covenant-72B under our traffic model: the compression ratio counted by hand against
comm.sparse's accounting, the round's exchange against the relay and ring formulas, the one
assumption at a time that would close 70 s, the claims rows' verdicts by closes_verdict, and the
docs showing the generated tables."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from topkscope.claims import covenant as claims
from topkscope.claims.verdicts import closes_verdict
from topkscope.perf import covenant as cv

REPO = Path(__file__).resolve().parents[1]
D, C, KC = 72_000_000_000, 4096, 64
K = D // C * KC                          # 1,125,000,000 values per peer
SIDE = cv.ASSUMED_TENSORS * (1 + 4) * 4   # a shift and 4 table entries (float32) per tensor
MESSAGE = K * 2 // 8 + K * 12 // 8 + SIDE + 8
UP, DOWN = 8 / 110e6, 8 / 500e6          # seconds per byte


def test_every_input_is_graded_and_the_published_ones_are_cited_as_quoted():
    assert {g.grade for g in cv.INPUTS.values()} <= set(cv.GRADES)
    published = [g for g in cv.INPUTS.values() if g.grade == "published"]
    assert len(published) == 11
    assert all(g.source.startswith("arXiv 2603.08163 as quoted: ") for g in published)
    assert {g.name for g in cv.INPUTS.values() if g.grade == "assumed"} == \
        {"tensors", "peers", "overlap"}
    with pytest.raises(ValueError, match="grade = 'guessed'"):
        cv.Graded("x", 1, "", "guessed", "")


def test_the_message_is_counted_as_by_hand_and_as_the_outer_model_counts_it():
    assert cv.selected() == K
    sent = cv.message()
    assert (sent.values, sent.indices, sent.side, sent.counts) == (K * 2 // 8, K * 12 // 8,
                                                                    SIDE, 8)
    assert sent.total == MESSAGE
    assert cv.outer_method().message_bytes() == MESSAGE  # perf.outer agrees with comm.sparse
    assert cv.compression() == pytest.approx(4 * D / MESSAGE, rel=1e-12)
    # the pairs alone: 4096 x 32 bits against 64 x (2 + 12)
    assert cv.dense().total / sent.selected == pytest.approx(C * 32 / (KC * 14), rel=1e-12)


def test_only_chunk_local_indices_and_a_float32_reference_give_146x():
    table = cv.compression_table().set_index("encoding")["compression"]
    assert table["chunk-local indices (ours)"] == pytest.approx(146.28, abs=0.01)
    assert table["global int64 indices"] == pytest.approx(C * 32 / (KC * 66), rel=1e-4)
    assert table["16-bit indices"] == pytest.approx(C * 32 / (KC * 18), rel=1e-4)
    assert table["chunk-local indices, bf16 dense reference"] == pytest.approx(
        C * 16 / (KC * 14), rel=1e-4)
    assert (table.drop("chunk-local indices (ours)") < 146).all()


def test_the_round_is_the_relay_and_ring_formulas():
    up, down = MESSAGE * UP, MESSAGE * DOWN
    assert cv.upload_bound() == pytest.approx(up, rel=1e-12)
    assert up == pytest.approx(143.18, abs=0.01)
    for R in (2, 20):
        assert cv.round_seconds("relay, serial", R) == pytest.approx(up + (R - 1) * down)
        assert cv.round_seconds("relay, concurrent", R) == pytest.approx(max(up, (R - 1) * down))
        assert cv.round_seconds("ring all-gather", R) == pytest.approx((R - 1) * up)
        assert cv.round_seconds("ring all-reduce", R) == pytest.approx(2 * (R - 1) / R * up)
    rounds = cv.round_table()
    assert (rounds["round_s"] >= cv.upload_bound() * (1 - 1e-12)).all()  # none sends less
    compute = 70 * 0.945 / 0.055
    assert cv.compute_per_round() == pytest.approx(compute)
    row = rounds[(rounds["topology"] == "ring all-gather") & (rounds["peers"] == 20)].iloc[0]
    assert row["inner_step_s"] == pytest.approx(compute / 30 + 19 * up / 30)
    with pytest.raises(ValueError, match="topology must be one of"):
        cv.round_seconds("mesh", 2)


def test_the_assumptions_that_would_close_70_s():
    closing = cv.closing_assumptions().set_index("assumption")
    assert closing.loc["uplink rate (relay, concurrent, 20 peers)", "needed"] == \
        f">= {MESSAGE * 8 / 70 / 1e6:.0f} Mbit/s"
    entropy = math.log2(math.comb(C, KC)) / KC
    assert cv.index_entropy_bits() == pytest.approx(entropy, rel=1e-9)
    bits = 70 * 110e6 / K - 2
    assert closing.loc["index encoding", "needed"] == f"<= {bits:.2f} bits per index"
    assert not closing.loc["index encoding", "possible"] and bits < entropy
    assert not closing.loc["topology", "possible"]
    assert not closing.loc["peers (relay, concurrent)", "possible"]
    # overlap closes it where the exchange fits behind the round's compute
    for topology in ("relay, concurrent", "relay, serial", "ring all-gather"):
        t = cv.round_seconds(topology, 20)
        assert closing.loc[f"overlap with compute ({topology}, 20 peers)", "possible"] == \
            (t - 70 <= cv.compute_per_round())
    # rates read as bytes: the most peers whose serial relay still takes at most 70 s
    peers = max(R for R in range(2, 100) if MESSAGE * UP / 8 + (R - 1) * MESSAGE * DOWN / 8 <= 70)
    assert closing.loc["rates read as MB/s, not Mbit/s (relay, serial)", "needed"] == \
        f"<= {peers} peers"


def test_closes_verdict():
    assert closes_verdict([146.3], 146, 0.0, at_least=True) == "holds"
    assert closes_verdict([145.9], 146, 0.0, at_least=True) == "fails"
    assert closes_verdict([71.0, 73.0], 70, 0.045) == "holds"
    assert closes_verdict([143.0, 600.0], 70, 0.045) == "fails"
    assert closes_verdict([70.0, 143.0], 70, 0.045) == "inconclusive"
    with pytest.raises(ValueError, match="published value > 0"):
        closes_verdict([1.0], 0.0, 0.1)


def test_the_claims_rows():
    compression, round_ = claims.rows()
    assert (compression.claim, compression.verdict) == ("covenant_72b_compression", "holds")
    assert compression.diff_mean == pytest.approx(cv.compression() / 146)
    assert round_.claim == "covenant_72b_round" and round_.verdict == "fails"
    from topkscope.perf.published import validated_errors

    assert round_.model_error == validated_errors()["no-overlap"]
    assert round_.diff_mean == pytest.approx(cv.upload_bound() / 70)
    assert "143 s" in round_.cause and "2.05x the published 70 s" in round_.cause
    assert claims.CLAIM.scope == "reference" and claims.CLAIM.section == "prediction"
    assert len(claims.CLAIM.evaluate()) == 2


def test_docs_show_the_generated_tables():
    docs = (REPO / "docs" / "scaling.md").read_text()
    assert cv.markdown() in docs
