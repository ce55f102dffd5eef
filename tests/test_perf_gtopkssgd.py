"""topkscope.perf.gtopkssgd: the seed authors' 32-GPU 1 GbE measurements as published rows, and
the step-time model checked on them (rows worked out by hand)."""

import math

import pandas as pd
import pytest

from topkscope.perf import gtopkssgd as g
from topkscope.perf.workload import model_size

COMMIT = "hclhkbu/gtopkssgd@6f57343f3749939b0345d36fcb2c24470942aefd"
DOCS = g.PUBLISHED_DIR.parents[2] / "docs" / "scaling.md"


def test_every_published_row_names_its_source():
    table = g.measurements()
    assert table["source"].str.startswith(COMMIT + " scripts/icdcs2019/communication.py ").all()
    # 5 models x (1 worker + 3 methods x 4 worker counts), 4 models x 3 parts, alpha and beta
    assert len(table) == 5 * 13 + 4 * 3 + 2


def test_the_breakdown_is_one_gtopk_iteration_at_32_workers():
    # the reading of the units: batch / throughput per worker = the breakdown's parts summed
    parts = g.breakdown(g.measurements()).set_index("model")
    ratio = parts["sum"] / parts["seconds_from_throughput"]
    assert ((ratio > 0.93) & (ratio < 1.07)).all(), ratio
    assert parts.loc["vgg16", "sum"] == pytest.approx(0.139536 + 0.091353 + 0.811753)


def test_rows_by_hand():
    table = g.validation_table().set_index(["model", "method", "workers"])
    alpha, beta, d = 0.436e-3, 9e-9, model_size("vgg16")
    k = round(0.001 * d)
    compute = 128 / 1317.333
    topk = table.loc[("vgg16", "topk", 16)]
    assert topk["measured_s"] == pytest.approx(128 / 97.865)
    # two ring all-gathers (values, indices) of k 4-byte entries from 16 workers
    comm = 2 * (15 * alpha + 15 * k * 4 * beta)
    assert topk["predicted_s"] == pytest.approx(compute + 0.091353 + comm, rel=1e-9)
    gtopk = table.loc[("vgg16", "gtopk", 32)]
    tree = 2 * math.log2(32) * (alpha + k * 8 * beta)
    assert gtopk["predicted_s"] == pytest.approx(compute + 0.091353 + tree, rel=1e-9)
    dense = table.loc[("vgg16", "dense", 4)]
    ring = 2 * 3 * alpha + 2 * 3 / 4 * d * 4 * beta
    assert dense["predicted_s"] == pytest.approx(compute + ring, rel=1e-9)
    assert dense["use_fitted"] == "fit" and topk["use_fitted"] == "held-out"
    assert set(table["family"]) == {"1gbe dense", "1gbe topk", "1gbe gtopk"}


def test_committed_table_and_docs():
    committed = pd.read_csv(g.VALIDATION_CSV)
    fresh = g.validation_table()
    pd.testing.assert_frame_equal(committed, fresh.astype(committed.dtypes.to_dict()),
                                  check_exact=False, rtol=1e-9)
    assert g.validation_markdown(committed) in DOCS.read_text()
