"""`topkscope bench`: runs tiny benchmark scripts from a temporary benchmarks folder."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from topkscope.cli import main as cli
from topkscope.commands.bench import ENV_VAR, KNOWN_ORDER, discover

# writes results/bench/<name>.csv (relative to its working folder) with the arguments it got
WRITES_CSV = """
    import pathlib, sys
    out = pathlib.Path("results/bench/{name}.csv")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("argv,executable\\n" + " ".join(sys.argv[1:]) + "," + sys.executable + "\\n")
"""
SCRIPTS = {
    "stats_battery": WRITES_CSV,
    "selection": WRITES_CSV,
    "extra_one": WRITES_CSV,
    "crashes": "import sys\nprint('boom', file=sys.stderr)\nsys.exit(3)\n",
    "no_csv": "print('forgot to write my table')\n",
    "_helper": "raise SystemExit('a helper module is not a benchmark')\n",
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A folder shaped like the repository: benchmarks/*.py, results/ written beside it."""
    folder = tmp_path / "repo" / "benchmarks"
    folder.mkdir(parents=True)
    for name, body in SCRIPTS.items():
        (folder / f"{name}.py").write_text(textwrap.dedent(body.format(name=name)))
    return tmp_path / "repo"


def bench(repo: Path, *argv: str) -> int:
    return cli(["bench", "--benchmarks", str(repo / "benchmarks"), *argv])


def test_discovery_order_known_first_then_others_and_no_private_modules(repo: Path) -> None:
    assert discover(repo / "benchmarks") == ["selection", "stats_battery", "crashes", "extra_one",
                                             "no_csv"]
    assert KNOWN_ORDER.index("selection") < KNOWN_ORDER.index("stats_battery")


def test_only_runs_the_named_benchmark_forwarding_quick(repo: Path, capfd) -> None:
    assert bench(repo, "--only", "stats_battery", "--quick") == 0
    csv = repo / "results" / "bench" / "stats_battery.csv"
    argv, executable = csv.read_text().splitlines()[1].split(",")
    assert argv == "--quick" and executable == sys.executable  # the same interpreter
    assert not (repo / "results" / "bench" / "selection.csv").exists()
    out = capfd.readouterr().out
    assert "stats_battery: ok in" in out and str(csv) in out
    assert "1 of 1 benchmarks passed" in out


def test_without_quick_nothing_is_forwarded(repo: Path) -> None:
    assert bench(repo, "--only", "selection") == 0
    row = (repo / "results" / "bench" / "selection.csv").read_text().splitlines()[1]
    assert row.split(",")[0] == ""


def test_a_failing_benchmark_fails_the_command_but_the_others_still_run(repo: Path,
                                                                         capfd) -> None:
    assert bench(repo, "--only", "crashes,selection,no_csv", "--quick") == 1
    assert (repo / "results" / "bench" / "selection.csv").is_file()
    out = capfd.readouterr()
    assert "crashes: failed (exit 3)" in out.out and "boom" in out.err
    assert "no_csv: failed (exit 0 but no CSV written)" in out.out
    assert "selection: ok" in out.out
    assert "1 of 3 benchmarks passed; failed: crashes, no_csv" in out.out
    # run order is the discovery order, not the order given
    assert out.out.index("[1/3] selection") < out.out.index("[2/3] crashes")


def test_a_stale_csv_from_an_earlier_run_does_not_count(repo: Path, capfd) -> None:
    stale = repo / "results" / "bench" / "no_csv.csv"
    stale.parent.mkdir(parents=True)
    stale.write_text("old\n")
    assert bench(repo, "--only", "no_csv") == 1
    assert "no CSV written" in capfd.readouterr().out


def test_timeout_stops_a_benchmark(repo: Path, capfd) -> None:
    (repo / "benchmarks" / "sleeps.py").write_text("import time\ntime.sleep(60)\n")
    assert bench(repo, "--only", "sleeps", "--timeout", "0.5") == 1
    assert "sleeps: failed (timed out)" in capfd.readouterr().out


def test_env_var_names_the_folder_and_list_shows_names(repo: Path, monkeypatch,
                                                       capsys) -> None:
    monkeypatch.setenv(ENV_VAR, str(repo / "benchmarks"))
    assert cli(["bench", "--list"]) == 0
    assert capsys.readouterr().out.split() == discover(repo / "benchmarks")


@pytest.mark.parametrize("argv, expected", [
    (["--only", "nope"], "unknown benchmark 'nope'; available: selection, stats_battery"),
    (["--only", ""], "names no benchmark"),
    (["--timeout", "-1"], "--timeout: -1 is outside the allowed range"),
])
def test_bad_input_exits_2_with_one_line(repo: Path, capsys, argv, expected) -> None:
    assert bench(repo, *argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("topkscope bench: error: ")
    assert expected in err
    assert not (repo / "results").exists()


def test_missing_benchmarks_folder_is_a_clear_error(tmp_path: Path, monkeypatch,
                                                    capsys) -> None:
    assert cli(["bench", "--benchmarks", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nowhere" in err and "is not a folder" in err
    (tmp_path / "empty").mkdir()
    assert cli(["bench", "--benchmarks", str(tmp_path / "empty")]) == 2
    assert "no benchmark scripts" in capsys.readouterr().err
    # installed without the repository: the default location does not exist
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setattr("topkscope.commands.bench.REPO_BENCHMARKS", tmp_path / "site" / "bench")
    assert cli(["bench"]) == 2
    err = capsys.readouterr().err
    assert "installed without its repository" in err and f"${ENV_VAR}" in err
