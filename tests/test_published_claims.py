"""Claims of imported published runs (topkscope.analysis.published_claims): compared only
where every logged setting agrees, never pooled without seeds, and the time split."""

import pytest

from tests._gaussiank_logs import write_job
from topkscope import claims
from topkscope.analysis.runs import load
from topkscope.cli import main
from topkscope.importers import gaussiank_sgd as imp
from topkscope.manifest import find_runs


def _runs(tmp_path, jobs):
    logs = tmp_path / "job"
    for job, kw in jobs.items():
        write_job(logs, job, **kw)
    imp.import_runs([logs], tmp_path / "res")
    return [load(r.path) for r in find_runs(tmp_path / "res")]


def _published(table):
    return table[table["section"] == "published"]


def test_same_settings_are_listed_not_pooled(tmp_path):
    runs = _runs(tmp_path, {"1": {}, "2": {"acc_shift": 1.0},
                            "3": {"compressor": "none", "density": 1.0, "acc_shift": 2.0}})
    table = _published(claims.build(runs))
    row = table[table["claim"] == "topk_accuracy"].iloc[0]
    assert row["verdict"] == "insufficient-data" and row["n_runs"] == 3
    assert "grouping unknown" in row["cause"] and "seeds not published" in row["evidence"]
    # finals 70% and 71% against Dense's 72%: differences -2 and -1 points
    assert "job 1 (gpu99) 70.00%" in row["evidence"] and "job 3 (gpu99) 72.00%" in row["evidence"]
    assert "−2 … −1 points over 2 run pair(s)" in row["evidence"]
    assert row["diff_mean"] == pytest.approx(-1.5)


def test_runs_whose_logged_settings_differ_are_never_compared(tmp_path):
    runs = _runs(tmp_path, {"1": {"batch": 32}, "2": {"batch": 64},
                            "3": {"compressor": "none", "density": 1.0, "batch": 32}})
    rows = _published(claims.build(runs))
    acc = rows[rows["claim"] == "topk_accuracy"].sort_values("condition")
    assert acc["condition"].tolist() == ["published: P=2, batch 32, lr 0.1, rho=0.001",
                                         "published: P=2, batch 64, lr 0.1, rho=0.001"]
    assert acc["n_runs"].tolist() == [2, 1]
    assert "one run each" in acc["cause"].iloc[0]
    assert "no dense run with the same logged settings" in acc["cause"].iloc[1]


def test_selection_share_holds_or_fails_on_the_logged_times(tmp_path):
    # every = 1: target-density intervals 10..12 (9, after a validation, has no kept iteration
    # and no selection time); compute = fwd + bwd ~ 0.205
    slow = _runs(tmp_path / "a", {"1": {"every": 1}})
    fast = _runs(tmp_path / "b", {"1": {"every": 1, "select_base": 0.0}})
    (row,) = _published(claims.build(slow)).query("claim == 'topk_selection_share'")\
        .itertuples()
    # selection 0.1 + 0.001 it > 0.205 - selection for every it in 10..12
    assert (row.verdict, row.n_units, row.fraction) == ("holds", 3, 1.0)
    (row,) = _published(claims.build(fast)).query("claim == 'topk_selection_share'")\
        .itertuples()
    assert (row.verdict, row.n_units, row.fraction) == ("fails", 3, 0.0)


def test_claims_command_on_imported_folder(tmp_path, capsys):
    logs = tmp_path / "job"
    write_job(logs, "1", dnn="resnet20")
    write_job(logs, "2", dnn="resnet20", compressor="none", density=1.0)
    write_job(logs, "3", dnn="vgg16")
    write_job(logs, "4", dnn="vgg16", compressor="randomk")
    assert main(["import", "gaussiank-sgd", str(logs), "--results", str(tmp_path / "res"),
                 "--no-progress"]) == 0
    out = tmp_path / "claims.csv"
    assert main(["claims", str(tmp_path / "res"), "--out", str(out)]) == 0
    import pandas as pd

    table = pd.read_csv(out)
    got = set(zip(table["model"], table["claim"]))
    assert {("resnet20", "topk_accuracy"), ("vgg16", "randk_accuracy"),
            ("vgg16", "topk_selection_share")} <= got
    assert set(table["section"]) == {"published"}  # no distribution rows without a recorder


def test_readme_sentences_are_generated_from_the_committed_tables():
    """The README's published block is what the reference tables answer, every question of
    the registry they hold rows of, one sentence each."""
    from tests.conftest import REPO
    from topkscope.publish import published_findings as pf

    text = (REPO / "README.md").read_text()
    assert pf.START in text and pf.END in text
    assert pf.with_published(text) == text  # what `topkscope gallery` writes
    block = text.split(pf.START, 1)[1].split(pf.END, 1)[0]
    assert "the published logs name no seed" in " ".join(block.split())
    said = " ".join(block.split())  # the block wraps its lines
    assert "Top-k − Dense" in said and "GRACE release" in said and "Covenant-72B" in said


def test_each_reference_table_answers_its_own_questions(tmp_path):
    """A reference table answers the questions its rows belong to, never another's, and a
    table missing on disk is left out."""
    from topkscope.publish import published_findings as pf

    tables = pf.reference_tables()
    assert set(tables) == set(pf.REFERENCE_TABLES)
    text = pf.published_markdown({"GRACE release": tables["GRACE release"]})
    assert "(GRACE release)" in text and "Covenant" not in text and "P = 16" not in text
    missing = pf.reference_tables({"nothing": tmp_path / "none.csv"})
    assert missing == {} and pf.published_markdown(missing) == "_no published reference tables_"


def test_the_figures_driver_draws_and_finds_imported_runs(tmp_path):
    from topkscope.publish import published_findings as pf

    logs = tmp_path / "job"
    write_job(logs, "1", every=1)
    write_job(logs, "2", every=1, compressor="none", density=1.0)
    write_job(logs, "3", every=1, batch=64)  # alone in its settings: no figure
    imp.import_runs([logs], tmp_path / "res")
    runs = pf.imported_runs(tmp_path / "res")
    assert sorted(r.manifest["run_id"] for r in runs) == ["1", "2", "3"]
    entries = pf.draw(runs, tmp_path / "figures")
    assert [e.name for e in entries] == ["published-vgg16-p2-b32-lr0.1"]
    assert entries[0].png.is_file() and "seeds not published" in entries[0].caption


def test_notebook_frames_keep_each_job_apart(tmp_path):
    from topkscope.publish.figures import run_frames

    runs = _runs(tmp_path, {"1": {}, "2": {}, "3": {"batch": 64}})
    train, evaluation = run_frames(runs)
    # same logged settings, no seed: two series (job ids), never one pooled "seed 0"
    assert sorted(set(evaluation["seed"])) == [1, 2, 3]
    assert evaluation.groupby("seed")["condition"].nunique().eq(1).all()
    assert evaluation.loc[evaluation["seed"] == 3, "condition"].iloc[0].endswith(
        "batch 64, lr 0.1, rho=0.001")
    # elements: 15 per worker and iteration in epoch 0 (iterations 1..4), P = 2
    first = evaluation[(evaluation["seed"] == 1) & (evaluation["step"] == 4)]
    assert first["elements"].iloc[0] == 15.0 * 4 * 2


