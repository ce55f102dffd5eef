"""The P = 16 claims on published GPU input bands (topkscope.claims.gpu_bands): verdicts only
where every corner of the bands agrees, the deciding input named, each row saying which torch
and GPU its selection inputs come from, the answer's numbers read from the rows' fields, and
the committed table as generated."""

import pandas as pd
import pytest

from tests.test_perf_gpu_bands import own_training, selection, sources, validation
from topkscope.claims import gpu_bands as p16
from topkscope.claims import verdicts
from topkscope.perf import gpu_bands as gb

CLUSTER = {"no-overlap": 0.045, "wfbp": 0.275}


def _row(table, model, network, suffix):
    rows = table[(table["model"] == model) & (table["network"] == network)
                 & (table["claim"] == p16.CLAIM + suffix)]
    assert len(rows) == 1
    return rows.iloc[0]


def _rows(tmp_path, claims=(), **kw):
    src = sources(tmp_path, claims, **kw)
    src.gtopk = src.gtopk[src.gtopk["model"] == "vgg16"]  # the logs' model only: fast
    return p16.claim_rows(src, CLUSTER)


def test_every_comparison_on_every_network_with_its_sources(tmp_path):
    table = _rows(tmp_path)
    assert set(table["network"]) == {"10gbe", "ib100"}
    assert {c.removeprefix(p16.CLAIM) for c in table["claim"]} == set(p16.SUFFIXES)
    logged = _row(table, "vgg16", "ib100", "_topk")
    # which torch and GPU the selection inputs come from
    assert "torch not logged" in logged["condition"] and "A100" in logged["condition"]
    assert "gtopkssgd: torch not stated in the source" in logged["condition"]
    current = _row(table, "vgg16", "ib100", p16.CURRENT_TORCH)
    assert "torch 2.6.0, 2.8.0, 2.8.0 + #164459 on H20" in current["condition"]
    assert "pytorch/pytorch pull request #164459" in current["condition"]
    assert current["inputs"].endswith("a published current torch.topk")
    # counts nominal: said in the row, no training condition behind them
    assert "counts nominal k" in logged["condition"] and logged["training_condition"] == ""
    # the error judged against: the sparse exchange's (0.15 here), and Dense + WFBP's 27.5%
    assert logged["model_error"] == pytest.approx(0.15)
    assert _row(table, "vgg16", "ib100", "_wfbp")["model_error"] == pytest.approx(0.275)
    assert "±15.0% (one-node sparse rows" in logged["condition"]


def test_holds_only_when_every_corner_agrees_and_the_speedups_are_the_corners(tmp_path):
    table = _rows(tmp_path)
    row = _row(table, "vgg16", "10gbe", "_topk")
    # Top-k's 91-240 ms selection against the rule's sub-10 ms: faster at every corner
    assert row["verdict"] == "holds" and row["reason"] == ""
    src = sources(tmp_path)
    bands = gb.model_bands("vgg16", src)
    every = gb.corners(0.666, gb.model_d("vgg16", src), gb.networks()[0], bands, ("topk",))
    assert row["ci_low"] == pytest.approx(min(s["topk"] for s in every))
    assert row["ci_high"] == pytest.approx(max(s["topk"] for s in every))
    assert (row["speedup_topk_low"], row["speedup_topk_high"]) == (row["ci_low"], row["ci_high"])


def test_a_verdict_flips_where_an_inputs_band_decides(tmp_path):
    """The rule's counts in its own training: a narrow band about k keeps the 10 GbE claim over
    Dense and Top-k holding; a band reaching 60 k decides it (inconclusive, `counts` named
    with the verdict at each end)."""
    narrow = _row(_rows(tmp_path, [own_training(0.8, 1.2)]), "vgg16", "10gbe", "")
    assert narrow["verdict"] == "holds"
    assert narrow["training_condition"].startswith("count/k of the rule in its own training")
    wide = _row(_rows(tmp_path, [own_training(0.8, 60.0)]), "vgg16", "10gbe", "")
    assert wide["verdict"] == "inconclusive" and wide["reason"] == "input-band-too-wide"
    assert wide["decided_by"] == "counts"
    assert wide["cause"].startswith("decided by counts (0.8: holds; 60: ")
    # and the overhead: a one-node exchange far beyond the model's decides it the same way
    slow = validation()
    slow.loc[slow["method"] == "topk", "exchange_s"] = 0.2
    row = _row(_rows(tmp_path, validation=slow), "vgg16", "ib100", "")
    assert row["verdict"] == "inconclusive" and "overhead" in row["decided_by"].split(", ")


def test_an_undecided_row_says_whether_the_band_or_the_models_error_keeps_it():
    errs = {"dense": 0.15}
    flip = gb.Deciding("select", 0.001, 0.005, "holds", "inconclusive")
    # every corner within 1 +- e and no input decides: the model cannot tell them apart
    assert p16._reason("inconclusive", [{"dense": 1.1}, {"dense": 0.9}], ("dense",), errs,
                       []) == "within-model-error"
    # corners on both sides of the band, or an input that decides: the band is too wide
    assert p16._reason("inconclusive", [{"dense": 1.3}, {"dense": 0.8}], ("dense",), errs,
                       []) == "input-band-too-wide"
    assert p16._reason("inconclusive", [{"dense": 1.1}, {"dense": 0.9}], ("dense",), errs,
                       [flip]) == "input-band-too-wide"
    assert p16._reason("holds", [{"dense": 1.3}], ("dense",), errs, []) == ""


def test_the_answer_reads_the_rows_fields_only(tmp_path):
    table = _rows(tmp_path)
    table["evidence"] = "x"
    table["cause"] = "y"  # the answer never reads prose
    answer = p16.p16_answer(table)
    assert answer["counts_nominal"] is True
    assert answer["model_error"] == pytest.approx(
        (table["model_error"].min(), table["model_error"].max()))
    held = answer["comparisons"]["Top-k"]["holds"]
    assert held["models"] == {"vgg16": ["10gbe", "ib100"]}
    topk = table[table["claim"] == p16.CLAIM + "_topk"]
    assert held["low"] == pytest.approx(topk["ci_low"].min())
    current = answer["comparisons"]["Top-k (current torch.topk)"]["inconclusive"]
    rows = table[table["claim"] == p16.CLAIM + p16.CURRENT_TORCH]
    assert current["reasons"]["vgg16"] == sorted(set(rows["reason"]))


def test_verdict_rule():
    errors = {"dense": 0.05, "topk": 0.05}
    assert verdicts.band_verdict([{"dense": 1.1, "topk": 2.0}], ("dense", "topk"), errors) == "holds"
    assert verdicts.band_verdict([{"dense": 0.9, "topk": 2.0}, {"dense": 0.8, "topk": 2.0}],
                                 ("dense", "topk"), errors) == "fails"
    assert verdicts.band_verdict([{"dense": 0.9, "topk": 2.0}, {"dense": 1.2, "topk": 2.0}],
                                 ("dense", "topk"), errors) == "inconclusive"


def test_committed_table_is_generated():
    committed = pd.read_csv(p16.P16_CSV)
    fresh = p16.claim_rows()
    for column in ("model", "network", "claim", "verdict", "reason", "cause", "decided_by",
                   "condition"):
        assert committed[column].fillna("").tolist() == fresh[column].fillna("").tolist()
    pd.testing.assert_series_equal(committed["ci_low"], fresh["ci_low"], rtol=1e-9)


def test_docs_show_the_committed_verdicts():
    docs = p16.REFERENCE.parents[1] / "docs" / "scaling.md"
    assert p16.markdown(pd.read_csv(p16.P16_CSV)) in docs.read_text()


def test_selection_fixture_is_the_logged_shape():
    # the synthetic logs carry what the bands read from the committed table
    committed = pd.read_csv(gb.PUBLISHED_DIR / "gpu_selection.csv")
    assert set(selection().columns) <= set(committed.columns)
    assert set(validation().columns) <= set(pd.read_csv(gb.PUBLISHED_DIR / "validation.csv"))
