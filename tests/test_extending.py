"""Extending topkscope through its public API alone (docs/development.md): a sparsifier of
one's own (topkscope.sparsify.register_sparsifier) and a claim in one file
(tests/_toy_claim.py, topkscope.claims.register_claim) are seen like the built-in ones — in the
recorder's parquet, in training, in the claims table, in the findings tables and in the
report."""

from __future__ import annotations

import importlib

import numpy as np
import pandas as pd
import pytest
import torch

from tests._hooks_loop import run as loop
from topkscope import claims
from topkscope.analysis.runs import load
from topkscope.hooks import Recorder
from topkscope.publish.findings import findings_markdown
from topkscope.sparsify import (
    Sparsifier,
    available,
    family_of,
    get_sparsifier,
    label_of,
    register_sparsifier,
    unregister_sparsifier,
)


class EveryOther(Sparsifier):
    """The exact top-k among the even indices only: a toy selector that sends k (or every
    even index when there are fewer)."""

    label = "every other (toy)"
    family = "every_other"
    plot_order = 65

    def _select(self, u: torch.Tensor, k: int) -> torch.Tensor:
        even = u[::2].abs()
        return torch.topk(even, min(k, even.numel())).indices * 2


@pytest.fixture
def toys():
    register_sparsifier("every-other", EveryOther)
    toy = importlib.import_module("tests._toy_claim")
    if claims.get_claim(toy.NAME) is None:  # imported before and unregistered since
        claims.register_claim(toy.CLAIM)
    try:
        yield toy
    finally:
        toy.unregister()
        unregister_sparsifier("every-other")


def test_a_registered_sparsifier_describes_itself_and_selects(toys):
    assert "every-other" in available()
    assert (label_of("every-other"), family_of("every-other")) == ("every other (toy)",
                                                                   "every_other")
    u = torch.tensor([5.0, 9.0, -7.0, 8.0, 1.0, 0.0])
    assert sorted(get_sparsifier("every-other").select(u, 2).tolist()) == [0, 2]
    with pytest.raises(ValueError, match="built-in"):
        register_sparsifier("topk", EveryOther)
    with pytest.raises(ValueError, match="not a Sparsifier subclass"):
        register_sparsifier("odd", int)
    with pytest.raises(ValueError, match="already registered"):
        register_sparsifier("every-other", EveryOther)


def test_the_toy_sparsifier_and_claim_reach_the_parquet_the_claims_findings_and_report(
        toys, tmp_path):
    run_dir = tmp_path / "toy-exp" / "r1"
    with Recorder(run_dir, schedule=1, densities=[0.05], rank=0,
                  sparsifiers=["every-other"]) as rec:  # Top-k trains; the toy is recorded
        rec.manifest.update(model="toy-mlp", sparsifier="topk", experiment="toy-exp")
        loop(6, recorder=rec)
    stats = load(run_dir).stats
    u = stats[(stats["kind"] == "u") & (stats["layer"] == "__global__")]
    assert u["every_other_count"].notna().all()  # the recorder's column, like a built-in's
    # and it trains: what each worker sent is what the toy selects, even indices only
    history = loop(3, sparsifier="every-other")
    assert history.idx and all((idx % 2 == 0).all() for idx in history.idx.values())
    table = claims.build([load(run_dir)])
    count = table[table["claim"] == "every_other_count"].iloc[0]
    k = u["k"].to_numpy(float)
    by_hand = np.mean((u["every_other_count"].to_numpy(float) / k >= 2 / 3)
                      & (u["every_other_count"].to_numpy(float) / k <= 4 / 3))
    assert count["sparsifier"] == "every-other" and count["fraction"] == pytest.approx(by_hand)
    assert count["statement"] == "every other (toy) selects about k elements on Top-k's u"
    spikes = table[table["claim"] == toys.NAME].iloc[0]
    one = u.drop_duplicates(["step", "rank"])
    ratio = (one["max_abs"] / one["std"]).to_numpy(float)
    assert spikes["fraction"] == pytest.approx(np.mean(ratio <= 10.0))
    assert spikes["rule"] == toys.CLAIM.rule and spikes["n_units"] == len(one)
    assert (spikes["claim_key"], spikes["claim_family"]) == (toys.NAME, "distribution")
    # its own column of the distribution table, its question answered in its own words
    findings = findings_markdown(table, "Mine")
    assert "every other (toy)" in findings
    header = next(ln for ln in findings.splitlines() if "no spike (max \\|u\\| ≤ 10σ)" in ln)
    assert header.startswith("| model | condition | runs |")
    from topkscope.claims.answers import answers
    from topkscope.publish.headline import answers_markdown

    told = next(a for a in answers(table) if a.question.key == toys.NAME)
    assert told.text.startswith(told.word.capitalize())
    assert "the largest |u| stayed within 10σ in" in told.text
    readme = answers_markdown({"Mine": table}, gallery=None)
    assert "**Is u free of spikes (max |u| within 10σ)?** · [figure][toy-exp-histogram]" in \
        readme and told.text.split(";")[0] in readme.replace("\n    ", " ")
    from topkscope.cli import main as cli

    assert cli(["report", str(run_dir), "--out", str(tmp_path / "r.html"),
                "--no-progress"]) == 0
    page = (tmp_path / "r.html").read_text()
    assert "Is u free of spikes (max |u| within 10σ)?" in page
    assert "every other (toy)" in page


def test_a_claim_name_is_checked_and_a_built_in_one_stays():
    with pytest.raises(ValueError, match="claim name"):
        claims.Claim("bad name", "q", "s", "r", "distribution", "condition", lambda u: [])
    with pytest.raises(ValueError, match="built-in claim"):
        claims.unregister_claim("below_paper")
    with pytest.raises(ValueError, match="section"):
        claims.Claim("x", "q", "s", "r", "nowhere", "condition", lambda u: [])


def test_a_row_is_typed_and_its_reason_follows_its_verdict():
    row = claims.ClaimRow(model="m", dataset="d", dataset_substitute=None, claim="c",
                          sparsifier="topk", verdict="inconclusive", reason="share-on-the-cut")
    assert row.record()["schema_version"] == claims.SCHEMA_VERSION
    assert list(row.record()) == claims.COLUMNS
    with pytest.raises(ValueError, match="needs a reason"):
        claims.ClaimRow(model="m", dataset="d", dataset_substitute=None, claim="c",
                        sparsifier="topk", verdict="inconclusive")
    with pytest.raises(ValueError, match="has no reason"):
        claims.ClaimRow(model="m", dataset="d", dataset_substitute=None, claim="c",
                        sparsifier="topk", verdict="holds", reason="not-measured")
    frame = claims.frame([row])
    assert isinstance(frame, pd.DataFrame) and frame["reason"].tolist() == ["share-on-the-cut"]
