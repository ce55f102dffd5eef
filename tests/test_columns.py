"""The column registry (topkscope.columns): one declaration per statistic and per selector
column reaches the stats parquet, the schema and the docs tables."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

from tests._hooks_loop import layout_of, run, tiny_model
from topkscope import columns, schema
from topkscope.analysis.runs import load
from topkscope.hooks import GLOBAL, Recorder
from topkscope.hooks.parts import MOMENT_COLUMNS
from topkscope.hooks.power_sums import Moments
from topkscope.sparsify import get_sparsifier, k_from_density

REPO = Path(__file__).resolve().parents[1]
DENSITIES = [0.01, 0.05]


def docs_stats_rows() -> list[str]:
    text = (REPO / "docs" / "results-schema.md").read_text()
    return re.findall(r"^\| stats \| .*\|$", text, flags=re.M)


def docs_meaning_rows() -> list[str]:
    text = (REPO / "docs" / "results.md").read_text()
    section = text[text.index("## stats/"):]
    section = section[: section.index("\n## ", 1)]
    return [line for line in section.splitlines() if line.startswith("| `")][8:]  # after k


KEY_DTYPES = {"experiment": "str", "run_id": "str", "step": "int64", "rank": "int64", "layer": "str", "kind": "str",
              "density": "float64"}


def test_the_docs_tables_are_what_the_registry_generates():
    assert docs_stats_rows() == columns.schema_rows(KEY_DTYPES)
    assert docs_meaning_rows() == columns.meaning_rows()[2:]  # numel and k sit with the keys


def test_schema_constants_are_derived_from_the_registry():
    assert list(schema.STATS_VALUES) == [s.name for s in columns.statistics()]
    assert list(schema.SPARSIFIER_SUFFIXES) == [c.suffix for c in columns.SELECTOR_COLUMNS]
    assert set(MOMENT_COLUMNS) <= {*Moments.__dataclass_fields__, "norm"}
    assert list(schema.stats_schema(["x"]).names) == [*schema.STATS_KEYS, *schema.STATS_VALUES,
                                                       "x_count", "x_ratio", "x_recall",
                                                       "x_quantized_ratio", "x_ratio_vs_topk"]


def test_a_bad_declaration_is_refused_with_the_allowed_values():
    with pytest.raises(ValueError, match="allowed"):
        columns.Statistic("x", "float32", "m", source="row", of_row=float)
    with pytest.raises(ValueError, match="of_row"):
        columns.Statistic("x", "float64", "m", source="row")
    with pytest.raises(ValueError, match="already registered"):
        columns.register_statistic(columns.Statistic("norm", "float64", "m", source="moment"))
    with pytest.raises(ValueError, match="built-in"):
        columns.unregister_statistic("norm")


@pytest.fixture
def toy_statistic():
    """A per-tensor statistic no code knows of: the mean of |x|^3 in float64."""
    stat = columns.register_statistic(columns.Statistic(
        "toy_abs_cube", "float64", "mean of abs(x)^3 (test statistic)", "—", source="row",
        of_row=lambda x: float(x.to(torch.float64).abs().pow(3).mean())))
    yield stat
    columns.unregister_statistic(stat.name)


def test_a_statistic_added_through_the_registry_alone_reaches_parquet_and_docs(
        tmp_path, toy_statistic):
    with Recorder(tmp_path, schedule=1, snapshot_schedule=1, densities=DENSITIES,
                  snapshot_kinds=("u",)) as rec:
        run(2, rec)
    part = next((tmp_path / "stats").glob("part-*.parquet"))
    assert pq.read_schema(part).field("toy_abs_cube").type == columns.Statistic(
        "y", "float64", "m", source="moment").arrow
    r = load(tmp_path)
    layout = layout_of(tiny_model())
    for step in range(2):
        u = r.snapshot(step, 0).astype(np.float64)
        for layer, x in [(GLOBAL, u)] + [(n, u[o : o + m]) for n, o, m in layout]:
            got = r.stats[(r.stats.step == step) & (r.stats["rank"] == 0)
                          & (r.stats.layer == layer) & (r.stats.kind == "u")].toy_abs_cube
            assert len(got) == len(DENSITIES)
            assert np.allclose(got, np.mean(np.abs(x) ** 3), rtol=1e-6)
    assert "| stats | toy_abs_cube | float64 |" in columns.schema_rows(KEY_DTYPES)
    assert "| `toy_abs_cube` | float64 | mean of abs(x)^3 (test statistic) | — |" in \
        columns.meaning_rows()
    assert "toy_abs_cube" not in "\n".join(docs_stats_rows())  # not in the shipped docs


def test_selector_columns_and_a_stateful_selector_follow_each_rows_recorded_u(tmp_path):
    """tail-k (stateful) gets the selector columns; its state is one per (row, density) and
    follows that row's recorded u: a float64 rerun with one fresh instance per row matches."""
    names = ["gaussiank", "tail-k"]
    with Recorder(tmp_path, schedule=1, snapshot_schedule=1, densities=DENSITIES,
                  sparsifiers=names) as rec:
        run(4, rec)
    r = load(tmp_path)
    layout = layout_of(tiny_model())
    st = r.stats[r.stats.kind == "u"]
    for name in names:
        p = name.replace("-", "_")
        rel = st[f"{p}_ratio"] / st.topk_ratio
        assert np.allclose(st[f"{p}_ratio_vs_topk"], rel.where(st.topk_ratio > 0), rtol=1e-12,
                           equal_nan=True)
        at_most_k = st[st[f"{p}_count"] <= st.k][f"{p}_ratio_vs_topk"].dropna()
        assert len(at_most_k) and (at_most_k >= 1 - 1e-9).all()  # no k-set beats Top-k
    for rank in (0, 1):
        rerun = {}  # (layer, density) -> a tail-k fed that row's recorded u, step by step
        for step in range(4):
            u = r.snapshot(step, rank)
            for layer, x in [(GLOBAL, u)] + [(n, u[o : o + m]) for n, o, m in layout]:
                rows = st[(st.step == step) & (st["rank"] == rank) & (st.layer == layer)]
                for _, row in rows.iterrows():
                    sel = rerun.setdefault((layer, row.density), get_sparsifier("tail-k"))
                    k = k_from_density(row.density, x.size)
                    idx = sel.select(torch.from_numpy(x.copy()), k).numpy()
                    x64 = x.astype(np.float64)
                    rest = x64.copy()
                    rest[idx] = 0
                    assert row.tail_k_count == idx.size
                    assert math.isclose(row.tail_k_ratio, (rest**2).sum() / (x64**2).sum(),
                                        rel_tol=1e-6, abs_tol=1e-12)
    assert pd.api.types.is_integer_dtype(st.tail_k_count)


def test_recorded_selectors_are_registered_sparsifiers():
    for name in columns.RECORDED_SELECTORS:
        assert get_sparsifier(name).name == name


def test_compared_in_a_recorder_config_means_the_recorded_selectors():
    from topkscope.hooks.settings import check_settings

    got = check_settings({"sparsifiers": ["dgc", "compared"]})["sparsifiers"]
    assert got == ("dgc", *[n for n in columns.RECORDED_SELECTORS if n != "dgc"])
    assert "tail-k" in got
