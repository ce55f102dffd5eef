"""Runs for people: `topkscope runs` lists each run under results roots (nested ones
included) in display names with the root it came from; runs started without a run id get a
name people can read; a damaged run under a folder is named and left out by `claims`,
`report` and `tables`, which write the others' output and exit 1; a loop of one's own without
run_fields is named from what its Recorder saw."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch

from tests._hooks_loop import layout_of, tiny_model
from tests.test_query_runs import make_run
from topkscope.cli import main as cli
from topkscope.hooks import Recorder
from topkscope.manifest import Manifest, model_of, results_roots
from topkscope.validate import plain_name

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """Three runs of fnn3-mnist (Top-k seed 0, Gaussian-k seeds 1 and 2, the last with the
    paper's warm-up) and a profile root nested in it holding the same run ids."""
    root = tmp_path_factory.mktemp("listed") / "results"
    make_run(root, "a", "topk", 0, ["gaussiank"], None)
    make_run(root, "b", "gaussiank", 1, [], None)
    make_run(root, "c", "gaussiank", 2, [], "paper")
    shutil.copytree(root / "fnn3-mnist", root / "standard" / "fnn3-mnist")
    return root


def lines_of(capsys) -> tuple[list[str], str]:
    captured = capsys.readouterr()
    return captured.out.splitlines(), captured.err


def cells(line: str) -> list[str]:
    """The cells of a line of the table (columns are two spaces apart at least)."""
    return re.split(r"\s{2,}", line.strip())


def test_runs_lists_every_run_with_its_root_and_display_names(results, capsys, monkeypatch):
    monkeypatch.chdir(results.parent)
    assert results_roots(results) == [results, results / "standard"]
    assert cli(["runs"]) == 0  # default: ./results, and the root nested in it
    lines, err = lines_of(capsys)
    assert err == ""
    header, *rows = [cells(line) for line in lines]
    assert header == ["root", "run", "model", "method", "density", "seed", "condition",
                      "status", "steps"]
    assert len(rows) == 6  # one line per run of each root: nothing twice, nothing fanned out
    assert rows[0] == ["results", "fnn3-mnist/a", "FNN-3", "Top-k", "0.01", "0",
                       "no warm-up", "complete", "12"]
    assert rows[2][:7] == ["results", "fnn3-mnist/c", "FNN-3", "Gaussian-k", "0.01", "2",
                           "the paper's warm-up"]
    assert [r[:2] for r in rows[3:]] == [["results/standard", f"fnn3-mnist/{r}"] for r in "abc"]
    # columns line up: every cell starts where its header does
    for name, first in (("model", "FNN-3"), ("status", "complete")):
        at = lines[0].index(name)
        assert all(line[at:].startswith(first) for line in lines[1:]), name
    # a run folder and an experiment folder are roots too; a path twice is listed once
    assert cli(["runs", str(results / "fnn3-mnist" / "b"), str(results / "fnn3-mnist")]) == 0
    rows = [cells(line) for line in lines_of(capsys)[0][1:]]
    assert [r[1] for r in rows] == [".", "a", "c"]


def test_runs_refuses_a_path_it_cannot_list_in_one_line(tmp_path, capsys):
    for path, said in ((tmp_path / "nowhere", "does not exist"),
                       (REPO / "README.md", "is a file, not a folder")):
        assert cli(["runs", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and said in err and err.startswith("topkscope runs: error:")
    (tmp_path / "empty").mkdir()
    assert cli(["runs", str(tmp_path / "empty")]) == 2
    assert "no run folders under" in capsys.readouterr().err


def damage(root: Path) -> tuple[Path, Path]:
    """A copy of the results with run a's manifest cut short and a stats part of run b that
    is not parquet; run c intact."""
    truncated, garbled = root / "fnn3-mnist" / "a", root / "fnn3-mnist" / "b"
    text = (truncated / "manifest.json").read_text()
    (truncated / "manifest.json").write_text(text[: len(text) // 2])
    part = sorted((garbled / "stats").iterdir())[0]
    part.write_bytes(b"PAR1 this is not parquet")
    return truncated, garbled


def test_runs_names_a_damaged_run_and_exits_1(results, tmp_path, capsys):
    root = tmp_path / "results"
    shutil.copytree(results / "fnn3-mnist", root / "fnn3-mnist")
    truncated, _ = damage(root)
    assert cli(["runs", str(root)]) == 1
    lines, err = lines_of(capsys)
    rows = [cells(line) for line in lines[1:]]
    assert [r[1] for r in rows] == ["fnn3-mnist/a", "fnn3-mnist/b", "fnn3-mnist/c"]
    assert rows[0][2:4] == ["-", "-"] and rows[0][-2] == "damaged"
    assert rows[0][-1].startswith("its manifest.json is not valid JSON")
    assert rows[2][-2:] == ["complete", "12"]
    assert err.count("\n") == 1 and "1 damaged run(s)" in err


@pytest.mark.parametrize("command", ["claims", "tables", "report"])
def test_a_damaged_run_under_a_root_is_named_and_left_out_and_the_rest_is_written(
        command, results, tmp_path, capsys):
    root = tmp_path / "results"
    shutil.copytree(results / "fnn3-mnist", root / "fnn3-mnist")
    truncated, garbled = damage(root)
    out = {"claims": ["--out", str(tmp_path / "claims.csv")],
           "tables": ["--tables", str(tmp_path / "tables")],
           "report": ["--out", str(tmp_path / "report.html")]}[command]
    assert cli([command, str(root), *out, "--no-progress"]) == 1
    err = capsys.readouterr().err.splitlines()
    named = [line for line in err if line.startswith(f"{command}: skipped damaged run ")]
    assert len(named) == 2
    assert f"{str(truncated)!r}: its manifest.json is not valid JSON" in named[0]
    assert f"{str(garbled)!r}: " in named[1] and "is not a readable parquet file" in named[1]
    assert err[-1] == (f"topkscope {command}: error: 2 damaged run(s) left out (named above; "
                       "move them aside or rerun them); the output holds the other 1 run(s)")
    assert not [line for line in err if "Warning" in line]  # each damaged run named once
    written = Path(out[1])
    assert written.exists()
    if command == "claims":  # the table of the intact run, as if the others were not there
        alone = tmp_path / "alone.csv"
        capsys.readouterr()
        assert cli(["claims", str(root / "fnn3-mnist" / "c"), "--out", str(alone),
                    "--no-progress"]) == 0
        got, want = pd.read_csv(written), pd.read_csv(alone)
        measured = ["model", "claim", "sparsifier", "condition", "n_runs", "n_units",
                    "fraction", "verdict"]
        pd.testing.assert_frame_equal(got[got["section"] != "prediction"][measured]
                                      .reset_index(drop=True),
                                      want[want["section"] != "prediction"][measured]
                                      .reset_index(drop=True))
        assert got["n_runs"].max() == 1  # the intact run alone
    if command == "tables":
        assert (written / "claims.csv").is_file()
    if command == "report":
        page = written.read_text()
        assert "fnn3-mnist/c" in page and "fnn3-mnist/a" not in page \
            and "fnn3-mnist/b" not in page


def test_a_damaged_run_named_itself_is_refused_and_nothing_is_written(results, tmp_path,
                                                                      capsys):
    root = tmp_path / "results"
    shutil.copytree(results / "fnn3-mnist", root / "fnn3-mnist")
    truncated, garbled = damage(root)
    out = tmp_path / "claims.csv"
    for run in (truncated, garbled):
        assert cli(["claims", str(run), "--out", str(out), "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(run) in err
    assert not out.exists()
    # a folder whose every run is damaged holds nothing to tabulate
    shutil.rmtree(root / "fnn3-mnist" / "c")
    assert cli(["claims", str(root), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "no readable run" in err and str(garbled) in err and not out.exists()


# ------------------------------------------------------------------ readable run ids
def test_a_run_without_a_run_id_is_named_after_what_ran_and_never_twice_the_same(tmp_path):
    from topkscope.train.config import load_config
    from topkscope.train.run import default_run_id

    cfg, _ = load_config(REPO / "experiments" / "fnn3-mnist.yaml", "quick",
                         {"sparsifier": "gaussiank", "seed": 3, "density_schedule": "paper"})
    base = tmp_path / "fnn3-mnist"
    first = default_run_id(cfg, base)
    assert first == f"gaussiank-rho{cfg.density:g}-p{cfg.workers}-s3-ds-paper"
    assert plain_name("run id", first) == first and not first[0].isdigit()  # no time stamp
    (base / first).mkdir(parents=True)
    assert default_run_id(cfg, base) == f"{first}-2"
    (base / f"{first}-2").mkdir()
    assert default_run_id(cfg, base) == f"{first}-3"
    cfg2, _ = load_config(REPO / "experiments" / "fnn3-mnist.yaml", "quick",
                          {"outer": {"inner_steps": 15, "step": "average"}})
    assert plain_name("run id", default_run_id(cfg2, base))


# ------------------------------------------------------------------ a loop of one's own
def own_loop(run_dir: Path, attach: bool) -> int:
    """The docs' recorder loop on the tiny model, without run_fields; returns d."""
    model = tiny_model(0)
    layout = layout_of(model)
    d = sum(n for _, _, n in layout)
    with Recorder(run_dir, schedule=1, densities=[0.05]) as rec:
        if attach:
            rec.attach(model)
        for step in range(4):
            rec.record(step, 0, u=torch.randn(d), layout=None if attach else layout)
    return d


def test_a_loop_without_run_fields_is_named_from_what_the_recorder_saw(tmp_path, capsys):
    from topkscope.analysis.runs import load
    from topkscope.claims import build
    from topkscope.plots.titles import describe_run

    attached, bare = tmp_path / "results" / "mine" / "attached", tmp_path / "results" / "mine" / "bare"
    d = own_loop(attached, attach=True)
    assert own_loop(bare, attach=False) == d
    m = Manifest.load(attached)
    assert (m["model_class"], m["num_parameters"]) == ("Sequential", d)
    assert "model" not in m  # what the script named: nothing; what the recorder saw: above
    assert model_of(m) == f"Sequential ({d:,} parameters)"
    assert model_of(Manifest.load(bare)) == f"a model of {d:,} parameters"
    assert model_of({"model": "fnn3", "model_class": "FNN3", "num_parameters": 5}) == "fnn3"
    title = describe_run(m)
    assert title.startswith(f"Sequential ({d:,} parameters) on a dataset its script did not "
                            "name") and "unnamed" not in title
    table = build([load(attached), load(bare)])
    assert set(table["model"]) == {f"Sequential ({d:,} parameters)",
                                   f"a model of {d:,} parameters"}
    assert cli(["runs", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out
    assert f"mine/attached  Sequential ({d:,} parameters)" in out and "unnamed" not in out
    # what a script names wins over what the recorder saw
    named = tmp_path / "named"
    with Recorder(named, schedule=1, densities=[0.05], run_fields={"model": "tiny"}) as rec:
        rec.attach(tiny_model(0))
        rec.record(0, 0, u=torch.randn(d))
    assert model_of(json.loads((named / "manifest.json").read_text())) == "tiny"
