"""Plugins on the command line (topkscope.plugins): a user's sparsifier in one file
(tests/fixtures/strided_quantile.py, one register_sparsifier line) named by `topkscope
--plugin`, by TOPKSCOPE_PLUGINS or by the entry-point group `topkscope.plugins` works in `run`
(simulated and torchrun workers), `claims`, `report`, `tables`, `scale`, `figures` and the
benchmarks as it does in one Python process; `claims` writes the same table as the in-process
build; a plugin that fails to import is one line and exit status 2, nothing written."""

from __future__ import annotations

import importlib
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from topkscope import claims
from topkscope.analysis.runs import load
from topkscope.cli import main as cli
from topkscope.manifest import runs_at
from topkscope.sparsify import available, unregister_sparsifier
from topkscope.train.config import validate as validate_config  # imported before registering

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
ENV_VAR, GROUP = "TOPKSCOPE_PLUGINS", "topkscope.plugins"  # the contract's names
PLUGIN, NAME, LABEL = "strided_quantile", "strided-quantile", "strided quantile (toy)"
TINY = dict(model="fnn3", dataset="mnist", workers=2, batch_size=16, train_subset=320,
            eval_subset=200, steps=12, lr=0.05, momentum=0.9, density=0.01, seed=1, threads=1,
            recorder={"schedule": {"every": 1}, "densities": [0.01],
                      "sparsifiers": ["gaussiank", NAME], "snapshot_schedule": {"steps": [11]}})


@pytest.fixture
def registered(monkeypatch):
    """The plugin imported in this process (as a user's script would), removed afterwards so
    that no other test sees its registry entry."""
    monkeypatch.syspath_prepend(str(FIXTURES))
    monkeypatch.setenv(ENV_VAR, "")  # restored (removed) afterwards
    module = importlib.import_module(PLUGIN)
    try:
        yield module
    finally:
        unregister_sparsifier(NAME)
        sys.modules.pop(PLUGIN, None)


def environment(data_root: Path, *paths: Path, **extra: str) -> dict[str, str]:
    """os.environ for a child: this checkout and `paths` importable, no plugin named."""
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (REPO, *paths))
    return {**env, "TOPKSCOPE_DATA": str(data_root), "OMP_NUM_THREADS": "1", **extra}


def topkscope(*argv: str, env: dict[str, str], cwd: Path = REPO, console: bool = False):
    """`topkscope ARGV` in a new process: `python -m topkscope.cli`, or the console script
    (which, unlike `python -m`, does not search the working directory)."""
    command = [str(Path(sys.executable).parent / "topkscope")] if console else \
        [sys.executable, "-m", "topkscope.cli"]
    return subprocess.run([*command, *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=900)


def test_a_sparsifier_registered_after_the_config_module_is_a_valid_config(registered):
    """The config schema reads the registry when it checks, not when it was imported."""
    config = validate_config({**TINY, "experiment": "tiny", "sparsifier": NAME})
    assert config.sparsifier == NAME


@pytest.mark.parametrize("argv, environ, says", [
    (["--plugin", "no_such_plugin_module"], "",
     "plugin 'no_such_plugin_module' (--plugin) failed to import: ModuleNotFoundError: "
     "No module named 'no_such_plugin_module'"),
    ([], "no_such_plugin_module",
     "plugin 'no_such_plugin_module' ($TOPKSCOPE_PLUGINS) failed to import: "),
    (["--plugin", "tests/fixtures/strided_quantile.py"], "",
     "plugin 'tests/fixtures/strided_quantile.py' (--plugin) is not a module name"),
    (["--plugin", "clashing_plugin"], "",
     "plugin 'clashing_plugin' (--plugin) failed to import: ValueError: 'topk' is a built-in "
     "sparsifier; choose another name"),
])
def test_a_plugin_that_fails_to_import_is_one_line_exit_2_and_writes_nothing(
        argv, environ, says, tmp_path, monkeypatch, capsys):
    (tmp_path / "clashing_plugin.py").write_text(
        "from topkscope.sparsify import TopK, register_sparsifier\n"
        "register_sparsifier('topk', TopK)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(ENV_VAR, environ)
    out = tmp_path / "claims.csv"
    assert cli([*argv, "claims", str(tmp_path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"topkscope claims: error: {says}"), err
    assert not out.exists() and os.environ[ENV_VAR] == environ


def test_activate_imports_once_and_names_the_modules_for_child_processes(tmp_path, monkeypatch):
    from topkscope import plugins

    (tmp_path / "counting_plugin.py").write_text("IMPORTS = globals().get('IMPORTS', 0) + 1\n")
    monkeypatch.chdir(tmp_path)  # found in the working directory, which sys.path lacks here
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    environ = {ENV_VAR: "counting_plugin", "PYTHONPATH": "/elsewhere"}
    try:
        assert plugins.activate(["counting_plugin"], environ=environ)[-1] == "counting_plugin"
        plugins.activate(["counting_plugin"], environ=environ)
        assert sys.modules["counting_plugin"].IMPORTS == 1
    finally:
        sys.modules.pop("counting_plugin", None)
    # the children (runner's `topkscope run`, torchrun's workers, benchmarks) import it too,
    # whatever their own working directory
    assert environ == {ENV_VAR: "counting_plugin",
                       "PYTHONPATH": os.pathsep.join(["/elsewhere", str(tmp_path)])}


def _scale_argv(csv: Path) -> list[str]:
    return ["scale", "--model", "fnn3", "--network", "10gbe", "--workers", "16", "--methods",
            "topk", NAME, "--select-s", f"{NAME}=0.002", "--csv", str(csv), "--no-progress"]


def test_scale_predicts_a_plugins_method_as_in_process_by_each_way_of_naming_it(
        registered, tmp_path, data_root):
    from topkscope.perf import model as pm
    from topkscope.perf import report

    in_process, _ = report.scaling_table(["fnn3"], ["10gbe"], [16], ["dense", "topk", NAME],
                                         density=0.001, select_s={NAME: 0.002})
    expected = pd.read_csv(io.StringIO(in_process.to_csv(index=False)))
    assert NAME in set(expected["method"]) and pm.speedup_column("dense") in expected
    site = tmp_path / "site"  # an installed distribution declaring the entry point
    info = site / "strided_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: strided-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{GROUP}]\nstrided = {PLUGIN}\n")
    ways = {"--plugin": (["--plugin", PLUGIN], environment(data_root, FIXTURES)),
            "environment": ([], environment(data_root, FIXTURES, TOPKSCOPE_PLUGINS=PLUGIN)),
            "entry point": ([], environment(data_root, FIXTURES, site))}
    for way, (argv, env) in ways.items():
        csv = tmp_path / f"{way}.csv"
        done = topkscope(*argv, *_scale_argv(csv), env=env, cwd=tmp_path)
        assert done.returncode == 0, (way, done.stderr[-2000:])
        pd.testing.assert_frame_equal(pd.read_csv(csv), expected)
    refused = topkscope(*_scale_argv(tmp_path / "none.csv"), env=environment(data_root, FIXTURES),
                        cwd=tmp_path)
    assert refused.returncode == 2 and f"unknown method(s) ['{NAME}']" in refused.stderr


MINI_BENCH = '''"""The selection benchmark on a few small vectors (a test's)."""
import sys

from selection import main

if __name__ == "__main__":
    sys.exit(main(["--methods", "dense,topk,gaussiank,gaussiank-2019,{name}", "--sizes",
                   "100000,200000", "--distributions", "normal", "--repeats", "1",
                   "--no-plot", "--out", "results/bench/mini.csv"]))
'''


def selection_bench(results: Path, data_root: Path, cwd: Path) -> pd.DataFrame:
    """`topkscope --plugin strided_quantile bench` of a small copy of benchmarks/selection.py,
    the plugin a file in `cwd` (not on PYTHONPATH): the benchmark's process, started from
    another folder, imports it too. Its CSV becomes results/bench/selection.csv, the
    predictions' selection times."""
    folder = cwd / "repo" / "benchmarks"
    folder.mkdir(parents=True)
    for name in ("_options.py", "selection.py"):
        shutil.copy(REPO / "benchmarks" / name, folder / name)
    (folder / "mini.py").write_text(MINI_BENCH.format(name=NAME))
    shutil.copy(FIXTURES / f"{PLUGIN}.py", cwd / f"{PLUGIN}.py")
    done = topkscope("--plugin", PLUGIN, "bench", "--benchmarks", str(folder), "--only", "mini",
                     "--no-progress", env=environment(data_root), cwd=cwd, console=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (results / "bench").mkdir(parents=True, exist_ok=True)
    shutil.copy(cwd / "repo" / "results" / "bench" / "mini.csv", results / "bench" / "selection.csv")
    return pd.read_csv(results / "bench" / "selection.csv")


@pytest.fixture(scope="module")
def trained(tmp_path_factory, data_root):
    """A results root trained and benchmarked through the command line with the plugin: Top-k
    training recording the plugin's counts on its u (simulated workers), the plugin's own
    training (torchrun workers), and the selection benchmark."""
    root = tmp_path_factory.mktemp("plugin-runs")
    results = root / "results"
    config = root / "tiny.yaml"
    config.write_text(yaml.safe_dump({**TINY, "experiment": "tiny"}))
    env = environment(data_root, FIXTURES)
    for run_id, argv in (("topk", []), ("own", ["--sparsifier", NAME, "--launcher", "torchrun"])):
        done = topkscope("--plugin", PLUGIN, "run", str(config), "--results", str(results),
                         "--run-id", run_id, "--no-progress", *argv, env=env)
        assert done.returncode == 0, done.stderr[-3000:]
    bench = selection_bench(results, data_root, root / "bench-here")
    return results, bench


@pytest.mark.train
def test_the_plugin_trains_under_torchrun_and_is_recorded_and_benchmarked(trained):
    results, bench = trained
    own, topk = load(results / "tiny" / "own"), load(results / "tiny" / "topk")
    assert (own.manifest["sparsifier"], own.manifest["launcher"]) == (NAME, "torchrun")
    assert own.manifest["status"] == topk.manifest["status"] == "complete"
    # what each worker sent is the plugin's selection: about k, never the exact k every step
    k = own.train["k"].to_numpy(float)
    assert (own.train["selected"] > 0).all() and (own.train["selected"] != k).any()
    u = topk.stats.query("kind == 'u' and layer == '__global__'")
    assert u[f"{PLUGIN}_count"].notna().all() and (u[f"{PLUGIN}_count"] > 0).all()
    mine = bench[bench["method"] == NAME]
    assert len(mine) == 4 and (mine["median_ms"] > 0).all() and (mine["selected_over_k"] > 0).all()


@pytest.mark.train
def test_claims_on_the_command_line_equal_the_in_process_build(trained, registered, tmp_path,
                                                                data_root):
    results, _ = trained
    runs = [load(r.path) for r in runs_at([results])]
    in_process = claims.build(runs, roots=[results])
    out = tmp_path / "cli.csv"
    done = topkscope("--plugin", PLUGIN, "claims", str(results), "--out", str(out),
                     "--no-progress", env=environment(data_root, FIXTURES))
    assert done.returncode == 0, done.stderr[-3000:]
    assert out.read_text() == in_process.to_csv(index=False)  # the same rows, byte for byte
    count = in_process[in_process["claim"] == f"{PLUGIN}_count"]
    assert count["sparsifier"].tolist() == [NAME]
    assert count["statement"].iloc[0].startswith(LABEL)
    # P = 16 predictions for every registered selector whose counts were recorded: the
    # plugin's (trained and recorded) and the robust Gaussian-k (recorded), not the published
    # Gaussian-k, which no run recorded
    predicted = in_process[in_process["section"] == "prediction"]
    speedup = predicted[predicted["claim"].str.contains("speedup_p16")]
    assert set(speedup["sparsifier"]) == {NAME, "gaussiank"}
    # without the plugin the recorded column still gives its count row (named by its
    # column): the selectors come from what was recorded, not from this process's registry
    bare = tmp_path / "bare.csv"
    done = topkscope("claims", str(results), "--out", str(bare), "--no-progress",
                     env=environment(data_root))
    assert done.returncode == 0, done.stderr[-3000:]
    row = pd.read_csv(bare).query(f"claim == '{PLUGIN}_count'")
    assert row["sparsifier"].tolist() == [PLUGIN]
    assert row["fraction"].tolist() == pytest.approx(count["fraction"].tolist())


@pytest.mark.train
def test_report_and_tables_show_the_plugin_like_a_built_in(trained, tmp_path, data_root):
    results, _ = trained
    env = environment(data_root, FIXTURES)
    page = tmp_path / "report.html"
    done = topkscope("--plugin", PLUGIN, "report", str(results), "--out", str(page),
                     "--no-progress", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert LABEL in page.read_text()
    done = topkscope("--plugin", PLUGIN, "tables", str(results), "--tables",
                     str(tmp_path / "tables"), env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    written = "".join(p.read_text() for p in (tmp_path / "tables").rglob("*.csv"))
    assert LABEL in written


def test_figures_draw_and_tabulate_a_recorder_loop_of_the_plugin(registered, tmp_path,
                                                                 data_root):
    """A Recorder loop of one's own (launcher `user`) evaluating the plugin, drawn by
    `topkscope --plugin ... figures --no-run` in a new process."""
    from tests._hooks_loop import run as loop
    from topkscope.hooks import Recorder

    run_dir = tmp_path / "results" / "loop-exp" / "r1"
    with Recorder(run_dir, schedule=1, densities=[0.05], rank=0, sparsifiers=[NAME]) as rec:
        rec.manifest.update(model="toy-mlp", sparsifier="topk")
        loop(6, recorder=rec)
    assert NAME in available()
    done = topkscope("--plugin", PLUGIN, "figures", "--no-run", "--results",
                     str(tmp_path / "results"), "--only", "loop-exp", "--experiments",
                     str(REPO / "experiments"), "--no-notebooks", "--no-tables",
                     "--no-progress", env=environment(data_root, FIXTURES))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    table = pd.read_csv(tmp_path / "results" / "claims.csv")
    count = table[table["claim"] == f"{PLUGIN}_count"]
    assert count["sparsifier"].tolist() == [NAME] and count["statement"].iloc[0].startswith(LABEL)
    drawn = {p.stem for p in (tmp_path / "results" / "figures").glob("loop-exp-*.png")}
    assert "loop-exp-selectors" in drawn, drawn
