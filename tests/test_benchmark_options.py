"""The benchmark scripts share their common options (benchmarks/_options.py): every script
accepts --quick, which `topkscope bench --quick` forwards to each.

Every script's parser is checked without running it (most full benchmarks take minutes, some
start several processes); one script, redsync_versions (the one that used to reject --quick),
also runs for real through `topkscope bench --quick --only`.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from topkscope.cli import main as cli
from topkscope.commands.bench import discover

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def script(name: str, monkeypatch):
    """benchmarks/<name>.py imported as a module (its folder on sys.path, as when run)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", discover(BENCHMARKS))
def test_every_benchmark_accepts_quick_and_writes_its_csv_where_bench_looks(name, monkeypatch):
    args = script(name, monkeypatch).build_parser().parse_args(["--quick"])
    assert args.quick is True
    assert args.out == BENCHMARKS.parent / "results" / "bench" / f"{name}.csv"


def test_quick_and_out_are_declared_once():
    declared = {p.name for p in BENCHMARKS.glob("*.py")
                if re.search(r"add_argument\(\s*\"--(quick|out)\"", p.read_text())}
    assert declared == {"_options.py"}


def test_a_bad_option_is_one_line_and_exit_2(monkeypatch, capsys):
    parser = script("stats_battery", monkeypatch).build_parser()
    with pytest.raises(SystemExit) as stop:
        parser.parse_args(["--quick", "--repeats", "x"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1
    assert err.startswith("python benchmarks/stats_battery.py: error: argument --repeats")


@pytest.mark.train
def test_bench_quick_runs_redsync_versions(tmp_path, data_root, monkeypatch, capfd):
    folder = tmp_path / "repo" / "benchmarks"
    folder.mkdir(parents=True)
    for name in ("_options.py", "redsync_versions.py"):
        shutil.copy(BENCHMARKS / name, folder / name)
    monkeypatch.setenv("TOPKSCOPE_DATA", str(data_root))
    assert cli(["bench", "--quick", "--only", "redsync_versions",
                "--benchmarks", str(folder)]) == 0
    assert "1 of 1 benchmarks passed" in capfd.readouterr().out
    table = pd.read_csv(tmp_path / "repo" / "results" / "bench" / "redsync_versions.csv")
    assert list(table["vector"]) == ["step10", "step20", "step30"]  # steps 0..39, every 10th
    assert (table["topk_count_over_k"] == 1).all()  # exact Top-k selects exactly k
    jaccard = table.filter(like="jaccard_")
    assert ((jaccard >= 0) & (jaccard <= 1)).all().all()


@pytest.mark.train
def test_recorder_calls_times_each_kind_of_call_with_the_configs_settings(data_root,
                                                                          monkeypatch):
    """benchmarks/recorder_calls.py on FNN-3 (2 workers): after the 2 warm-up steps, steps 2
    and 4 run the selectors and step 3 the statistics alone, one call per worker each; the
    configs' own sparsifier_per_layer, or the one given."""
    module = script("recorder_calls", monkeypatch)
    row = module.measure("fnn3-mnist", "quick", 5, str(data_root))
    assert (row["workers"], row["stats_calls"], row["selector_calls"]) == (2, 2, 4)
    assert row["sparsifiers"] == 7 and row["densities"] == 2
    assert row["sparsifier_per_layer"] is False  # the quick profile's setting
    assert 0 < row["stats_ms"] < row["selectors_ms"]
    assert module.measure("fnn3-mnist", "quick", 4, str(data_root),
                          per_layer=True)["sparsifier_per_layer"] is True
