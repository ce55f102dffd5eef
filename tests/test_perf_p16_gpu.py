"""The P = 16 claims on published GPU input bands (topkscope.claims.gpu_bands): verdicts only
where every corner of the bands agrees, the deciding input named, each row saying which torch
and GPU its selection inputs come from, the answer's numbers read from the rows' fields, and
the evidence grade of each row, and the committed table as generated."""

import pandas as pd
import pytest

from tests.test_perf_gpu_bands import (
    measured_counts,
    one_node_only,
    selection,
    sources,
    validation,
)
from topkscope.claims import gpu_bands as p16
from topkscope.claims import verdicts
from topkscope.perf import gpu_bands as gb

CLUSTER = {"no-overlap": 0.045, "wfbp": 0.275}


def _row(table, model, network, suffix):
    rows = table[(table["model"] == model) & (table["network"] == network)
                 & (table["claim"] == p16.CLAIM + suffix)]
    assert len(rows) == 1
    return rows.iloc[0]


def _rows(tmp_path, counts=None, gtopk=None, **kw):
    """The rows of VGG-16 alone (fast). gtopk: gtopkssgd's table (default: without its
    16-worker Top-k rows, so the overhead is the one-node rows' alone)."""
    src = sources(tmp_path, counts, gtopk=one_node_only() if gtopk is None else gtopk, **kw)
    src.gtopk = src.gtopk[(src.gtopk["model"] == "vgg16") | src.gtopk["model"].isna()]
    # (the rows without a model are the authors' alpha and beta)
    return p16.claim_rows(src, CLUSTER)


def test_every_comparison_on_every_network_with_its_sources_and_grades(tmp_path):
    table = _rows(tmp_path)
    assert set(table["network"]) == {"10gbe", "ib100"}
    assert {c.removeprefix(p16.CLAIM) for c in table["claim"]} == set(p16.SUFFIXES)
    current = _row(table, "vgg16", "ib100", "_topk")
    # which torch and GPU the selection inputs come from: the default is the published
    # torch.topk with pytorch/pytorch#164459, the logged one a named variant
    assert "torch 2.8.0 + #164459 on H20" in current["condition"]
    assert "pytorch/pytorch#164459" in current["condition"] and "A100" in current["condition"]
    logged = _row(table, "vgg16", "ib100", p16.LOGGED_TORCH)
    assert "torch not logged" in logged["condition"]
    assert logged["inputs"].endswith("as the published runs logged it")
    # counts nominal: said in the row, no training condition behind them, graded assumed
    assert "counts nominal k (assumed)" in logged["condition"]
    assert logged["training_condition"] == ""
    # the evidence grade: the weakest over the inputs the speed-ups depend on
    assert p16.row_evidence(current) == ("assumed", ["select", "counts"])
    wfbp = _row(table, "vgg16", "ib100", "_wfbp")
    # Top-k's selection does not enter a comparison with Dense + WFBP alone
    assert "topk published" in current["inputs"] and "topk published" not in wfbp["inputs"]
    # the error judged against: the sparse exchange's (0.15 here), and Dense + WFBP's 27.5%
    assert current["model_error"] == pytest.approx(0.15)
    assert wfbp["model_error"] == pytest.approx(0.275)
    assert "±15.0% (slowest worker's selection)" in current["condition"]


def test_holds_only_when_every_corner_agrees_and_every_input_is_not_assumed(tmp_path):
    """On a named GPU (the rule's selection modelled) with measured counts, the rule holds over
    Top-k as the published runs logged it at every corner; the same row with nominal k is
    inconclusive (assumed-input), naming counts and the count that flips it."""
    named = validation(gpu="A100")
    table = _rows(tmp_path, measured_counts(0.9, 1.1), validation=named)
    row = _row(table, "vgg16", "10gbe", p16.LOGGED_TORCH)
    assert row["verdict"] == "holds" and row["reason"] == ""
    assert p16.row_evidence(row) == ("modelled", ["select"])
    src = sources(tmp_path, measured_counts(0.9, 1.1), gtopk=one_node_only(), validation=named)
    bands = gb.model_bands("vgg16", src, gb.TOPK_LOGGED)
    every = gb.corners(0.666, gb.model_d("vgg16", src), gb.networks()[0], bands, ("topk",))
    assert row["ci_low"] == pytest.approx(min(s["topk"] for s in every))
    assert row["ci_high"] == pytest.approx(max(s["topk"] for s in every))
    assert (row["speedup_topk_low"], row["speedup_topk_high"]) == (row["ci_low"], row["ci_high"])

    nominal = _row(_rows(tmp_path, validation=named), "vgg16", "10gbe", p16.LOGGED_TORCH)
    assert (nominal["verdict"], nominal["reason"]) == ("inconclusive", "assumed-input")
    assert nominal["decided_by"] == "counts"
    assert nominal["cause"].startswith("would hold over the input bands")
    assert "only at the assumed value of counts (1): inconclusive at counts = " in \
        nominal["cause"]


def test_a_fails_that_no_assumed_value_can_lift_stays_fails(tmp_path):
    """The rule's selection graded assumed (a GPU the logs do not name) cannot lift a fails:
    at 0 s it fails still; a fails that free selection would lift is assumed-input."""
    slow = measured_counts(200.0, 300.0)  # the rule sends 200-300 k: slower than Dense
    row = _row(_rows(tmp_path, slow), "vgg16", "ib100", "_fp16")
    assert row["verdict"] == "fails" and row["reason"] == ""
    assert p16.row_evidence(row)[0] == "assumed"
    assert verdicts.assumed_input_verdict("fails", []) == ("fails", "")
    assert verdicts.assumed_input_verdict("holds", ["counts"]) == ("inconclusive",
                                                                   "assumed-input")
    assert verdicts.assumed_input_verdict("inconclusive", ["counts"]) == ("inconclusive", "")


def test_a_verdict_flips_where_an_inputs_band_decides(tmp_path):
    """The rule's counts measured: a narrow band about k keeps the 10 GbE claim over Dense
    holding; a band reaching 60 k decides it (inconclusive, `counts` named with the verdict at
    each end)."""
    named = validation(gpu="A100")
    narrow = _row(_rows(tmp_path, measured_counts(0.8, 1.2), validation=named), "vgg16",
                  "10gbe", "_wfbp")
    assert narrow["verdict"] == "holds"
    assert narrow["training_condition"].startswith("measured here: fixture")
    wide = _row(_rows(tmp_path, measured_counts(0.8, 60.0), validation=named), "vgg16",
                "10gbe", "_wfbp")
    assert wide["verdict"] == "inconclusive" and wide["reason"] == "input-band-too-wide"
    assert "counts" in wide["decided_by"].split(", ")
    assert "counts (0.8: holds; 60: " in wide["cause"]
    # and the overhead: the multi-node sparse exchange (gtopkssgd, 1 GbE) decides it
    multi = _row(_rows(tmp_path, measured_counts(0.8, 1.2), gtopk=gb.gtopkssgd.measurements(),
                       validation=named), "vgg16", "10gbe", "_wfbp")
    assert multi["verdict"] == "inconclusive" and multi["decided_by"] == "overhead"


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
    named = validation(gpu="A100")
    table = _rows(tmp_path, measured_counts(0.9, 1.1), validation=named)
    table["evidence"] = "x"
    table["cause"] = "y"  # the answer never reads prose
    answer = p16.p16_answer(table)
    assert answer["counts_nominal"] is False
    assert answer["model_error"] == pytest.approx(
        (table["model_error"].min(), table["model_error"].max()))
    held = answer["variants"]["Top-k (logged torch.topk)"]["holds"]
    assert held["models"] == {"vgg16": ["10gbe", "ib100"]}
    assert held["evidence"] == {"vgg16": ["modelled"]}
    logged = table[table["claim"] == p16.CLAIM + p16.LOGGED_TORCH]
    assert held["low"] == pytest.approx(logged["ci_low"].min())
    assert "Top-k (logged torch.topk)" not in answer["comparisons"]
    rows = table[table["claim"] == p16.CLAIM + "_topk"]
    for verdict, entry in answer["comparisons"]["Top-k"].items():
        assert entry["reasons"]["vgg16"] == sorted(
            set(rows[rows["verdict"] == verdict]["reason"]) - {""})
    assert p16.p16_answer(_rows(tmp_path))["counts_nominal"] is True


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
                   "condition", "inputs"):
        assert committed[column].fillna("").tolist() == fresh[column].fillna("").tolist()
    pd.testing.assert_series_equal(committed["ci_low"], fresh["ci_low"], rtol=1e-9)


def test_committed_rows_rest_on_no_assumed_input_and_name_what_decides_the_rest():
    """No committed row holds or fails on an assumed input, and every undecided row names
    its reason; one whose band alone decides names the input (fields, not prose)."""
    table = pd.read_csv(p16.P16_CSV)
    for _, row in table.iterrows():
        grade, names = p16.row_evidence(row)
        assert grade in gb.pm.GRADES and names
        if row["verdict"] in verdicts.DECIDED:
            assert grade != "assumed", (row["model"], row["claim"])
        else:
            assert row["reason"] in verdicts.REASONS
        if row["reason"] == "assumed-input":
            assert set(str(row["decided_by"]).split(", ")) <= set(names)


def test_docs_show_the_committed_verdicts():
    docs = p16.REFERENCE.parents[1] / "docs" / "scaling.md"
    assert p16.markdown(pd.read_csv(p16.P16_CSV)) in docs.read_text()


def test_selection_fixture_is_the_logged_shape():
    # the synthetic logs carry what the bands read from the committed table
    committed = pd.read_csv(gb.PUBLISHED_DIR / "gpu_selection.csv")
    assert set(selection().columns) <= set(committed.columns)
    assert set(validation().columns) <= set(pd.read_csv(gb.PUBLISHED_DIR / "validation.csv"))


# ------------------------------------------------------------------ docs/scaling.md's numbers
SECTIONS = ("## Validation on the seed authors' 32-GPU cluster over 1 GbE", "## Does compression pay? The GRACE release")
# what the prose of those sections may type: P, links, the paper, versions and years, pull
# requests' GPUs, the density and the published top-100 (torch_topk.csv's k, tested), never a
# result (every result is in a generated block); a number inside a name (VGG-16, float32,
# P102-100, a commit, #164459, 5th) is not typed data
NAMED = {"1", "10", "16", "32", "100", "0.001", "2019", "1901.04359", "2.7", "2.8", "2.8.4",
         "2022", "3080", "3090"}


def _generated():
    from topkscope.perf import gtopkssgd, torch_topk, traffic

    p16_table = pd.read_csv(p16.P16_CSV)
    return {
        "topkscope.perf.gtopkssgd.source_markdown": gtopkssgd.source_markdown(),
        "topkscope.perf.gtopkssgd.validation_markdown": gtopkssgd.validation_markdown(
            pd.read_csv(gtopkssgd.VALIDATION_CSV)),
        "topkscope.perf.gtopkssgd.findings_markdown": gtopkssgd.findings_markdown(
            gtopkssgd.validation_table()),
        "topkscope.perf.gtopkssgd.breakdown_markdown": gtopkssgd.breakdown_markdown(),
        "topkscope.perf.gpu_bands.counts_markdown": gb.counts_markdown(),
        "topkscope.perf.gpu_bands.bands_markdown": gb.bands_markdown(pd.read_csv(gb.BANDS_CSV)),
        "topkscope.perf.traffic.model_markdown": traffic.model_markdown(),
        "topkscope.perf.traffic.markdown": traffic.markdown(pd.read_csv(traffic.TRAFFIC_CSV)),
        "topkscope.perf.gpu_bands.error_markdown": gb.error_markdown(),
        "topkscope.perf.torch_topk.markdown": torch_topk.markdown(),
        "topkscope.claims.gpu_bands.markdown": p16.markdown(p16_table),
        "topkscope.claims.gpu_bands.decided_markdown": p16.decided_markdown(p16_table),
        "topkscope.claims.gpu_bands.undecided_markdown": p16.undecided_markdown(p16_table),
        "topkscope.claims.gpu_bands.settles_markdown": p16.settles_markdown(p16_table),
    }


def test_docs_numbers_of_the_published_gpu_sections_are_generated():
    """Every generated block of docs/scaling.md's published-GPU and P = 16 sections is what its
    function writes from the committed tables, and their prose types no other number."""
    import re

    docs = (p16.REFERENCE.parents[1] / "docs" / "scaling.md").read_text()
    section = docs[docs.index(SECTIONS[0]):docs.index(SECTIONS[1])]
    blocks = dict(re.findall(r"<!-- generated: (\S+) -->\n(.*?)(?=\n\n|\Z)", section, re.S))
    assert blocks == _generated()
    prose = re.sub(r"<!-- generated: \S+ -->\n.*?(?=\n\n|\Z)", "", section, flags=re.S)
    prose = re.sub(r"```.*?```|`[^`]*`|<!--.*?-->|\]\([^)]*\)", "", prose, flags=re.S)
    typed = set(re.findall(r"(?<![\w#@.-])\d(?:[\d.,]*\d)?(?![\w-])", prose))
    assert typed <= NAMED, sorted(typed - NAMED)
