"""topkscope.cli is the one error boundary: one parser class, one failure path (commands raise
CommandError, the cli prints `topkscope <command>: error: <one line>`), Ctrl-C handled once,
and every entry point a subcommand."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from topkscope import cli
from topkscope.commands import CommandError

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "topkscope"


def python_files(*folders: str) -> list[Path]:
    return [p for folder in folders for p in sorted((REPO / folder).rglob("*.py"))]


def test_one_argument_parser_class():
    subclasses = []
    for path in python_files("topkscope", "benchmarks"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                    "ArgumentParser" in ast.unparse(base) for base in node.bases):
                subclasses.append(f"{path.relative_to(REPO)}:{node.name}")
    assert subclasses == ["topkscope/cli.py:OneLineParser"]


def test_commands_never_print_their_own_errors():
    for path in sorted((PACKAGE / "commands").glob("*.py")):
        tree = ast.parse(path.read_text())
        printed = [ast.unparse(node) for node in ast.walk(tree) if isinstance(node, ast.Call)
                   and ast.unparse(node.func) == "print" and "error" in ast.unparse(node)]
        assert printed == [], path.name
        functions = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert "fail" not in functions, path.name
        # Ctrl-C: a command may clean up (bench stops its benchmark) but re-raises; run.py's
        # own handling belongs to the run lifecycle (signals, resume)
        swallowed = [h.lineno for h in ast.walk(tree) if isinstance(h, ast.ExceptHandler)
                     and h.type is not None and "KeyboardInterrupt" in ast.unparse(h.type)
                     and not any(isinstance(n, ast.Raise) and n.exc is None
                                 for n in ast.walk(h))]
        assert swallowed == [] or path.name == "run.py", (path.name, swallowed)


def test_old_entry_points_are_gone():
    assert importlib.util.find_spec("topkscope.data.fetch") is None
    assert "__main__" not in (PACKAGE / "publish" / "gallery.py").read_text()
    for path in [REPO / "Makefile", REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
                 *python_files("tests", "topkscope")]:
        text = path.read_text()
        for old in ("-m topkscope.data.fetch", "-m topkscope.publish.gallery"):
            assert old not in text or path.name == "test_cli_boundary.py", (path, old)


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_every_usage_error_is_one_line_naming_the_command_and_exit_2(command, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main([command, "--no-such-option"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1
    assert err.startswith(f"topkscope {command}: error: ")
    assert "--no-such-option" in err or "required" in err  # whichever argparse finds first


def test_an_unrecognized_argument_is_reported_by_its_subcommand(capsys):
    with pytest.raises(SystemExit):
        cli.main(["bench", "--quick", "--no-such-option"])
    assert capsys.readouterr().err == ("topkscope bench: error: unrecognized arguments: "
                                       "--no-such-option (see topkscope bench --help)\n")


def test_a_command_error_is_printed_once_with_its_code(monkeypatch, capsys):
    from topkscope.commands import bench

    def fails(args):
        raise CommandError("first line\n  second line", code=3)

    monkeypatch.setattr(bench, "main", fails)
    assert cli.main(["bench"]) == 3
    assert capsys.readouterr().err == "topkscope bench: error: first line second line\n"


def test_ctrl_c_is_handled_once(monkeypatch, capsys):
    from topkscope.commands import scale

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(scale, "main", interrupted)
    assert cli.main(["scale", "--model", "fnn3", "--workers", "2"]) == 130
    assert capsys.readouterr().err == "topkscope scale: interrupted\n"


def test_an_unexpected_error_keeps_its_traceback(monkeypatch):
    from topkscope.commands import bench

    def bug(args):
        raise ZeroDivisionError("a bug, not bad input")

    monkeypatch.setattr(bench, "main", bug)
    with pytest.raises(ZeroDivisionError):
        cli.main(["bench"])


def test_output_to_a_closed_pipe_ends_quietly_with_128_plus_sigpipe():
    """`topkscope ... | head` with the reader gone: no BrokenPipeError traceback, exit 141."""
    import os
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)  # no reader at all: the first write fails, however short the output
    try:
        argv = ["scale", "--model", "resnet50", "--network", "10gbe", "--workers", "16", "64"]
        done = subprocess.run([sys.executable, "-m", "topkscope.cli", *argv], cwd=REPO,
                              stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert done.stderr == "" and done.returncode == cli.BROKEN_PIPE == 141, done.stderr


def test_a_results_folder_that_is_a_file_is_one_line(tmp_path, capsys):
    """--out / --results naming a file, or a folder inside one: one line naming the path,
    exit 2, nothing written (no raw 'Not a directory')."""
    from topkscope.cli import main

    afile = tmp_path / "a-file"
    afile.write_text("x")
    repo = Path(__file__).resolve().parents[1]
    cases = [["run", str(repo / "experiments" / "fnn3-mnist.yaml"), "--steps", "1", "--results",
              str(afile / "results")],
             ["figures", "--results", str(afile), "--dry-run"],
             ["analyze", str(tmp_path), "--results", str(afile)]]
    for argv in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is a file" in err and "Errno" not in err, err
        assert str(afile) in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_progress_bars_show_on_a_terminal_only(monkeypatch):
    """A bar is drawn when enabled and stderr is a terminal; piped (CI logs) or
    --no-progress: none."""
    import io

    from topkscope import progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    for stream, enabled, drawn in ((Terminal(), True, True), (Terminal(), False, False),
                                   (io.StringIO(), True, False)):
        monkeypatch.setattr("sys.stderr", stream)
        assert progress.shown(enabled) is drawn
        with progress.bar(total=3, desc="work", unit="item", enabled=enabled) as bar:
            for _ in range(3):
                bar.update()
        assert ("work" in stream.getvalue()) is drawn


@pytest.mark.parametrize("profile, folder", [("quick", "results"),
                                             ("standard", "results/standard")])
def test_each_profile_has_its_own_results_folder_by_default(profile, folder, tmp_path,
                                                            monkeypatch, capsys):
    """`topkscope figures --profile standard` reads and writes where `make reproduce-figures
    PROFILE=standard` does, never over the quick profile's results/."""
    monkeypatch.chdir(tmp_path)
    assert cli.main(["figures", "--profile", profile, "--dry-run", "--experiments",
                     str(REPO / "experiments"), "--benchmarks", str(REPO / "benchmarks")]) == 0
    out = capsys.readouterr().out.splitlines()
    printed = [ln for ln in out if ln.endswith("[missing]")]
    commands = [ln for ln in out if "topkscope run" in ln]
    assert printed and all(ln.startswith(f"{folder}/") and "/standard/" not in
                           ln.removeprefix(f"{folder}/") for ln in printed)
    assert len(commands) == len(printed)
    assert all(f"--results {folder} " in ln for ln in commands)
    assert list(tmp_path.iterdir()) == []  # a dry run writes nothing
