"""`topkscope analyze`: tables equal direct calls of the analysis functions; skips; bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests._topk_reference import gaussian_ratio_by_quadrature
from topkscope.analysis import contraction, fits, normality
from topkscope.analysis.snapshots import (
    CONTRACTION_COLUMNS,
    FITS_COLUMNS,
    NORMALITY_COLUMNS,
    analyze_snapshot,
    merge,
)
from topkscope.cli import main as cli

D = 20_000
DENSITIES = [0.001, 0.01, 0.1]
MAX_N = 5_000
SEED = 3


def gaussian(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.0, 0.01, D).astype(np.float32)


def laplace(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).laplace(0.0, 0.01, D).astype(np.float32)


def write_run(root: Path, name: str, snapshots: dict[tuple[int, int], np.ndarray]) -> Path:
    """A result folder in the docs/results.md layout: manifest.json + snapshots/*.npy."""
    run = root / "fnn3-mnist" / name
    (run / "snapshots").mkdir(parents=True)
    manifest = {"experiment": "fnn3-mnist", "run_id": name, "model": "fnn3", "dataset": "mnist",
                "dataset_substitute": None, "sparsifier": "topk", "density": 0.001,
                "selection": "global", "world_size": 2, "seed": 0, "status": "complete"}
    (run / "manifest.json").write_text(json.dumps(manifest))
    for (step, rank), u in snapshots.items():
        np.save(run / "snapshots" / f"step{step}-rank{rank}.npy", u)
    return run


def tables(run: Path) -> dict[str, pd.DataFrame]:
    return {n: pd.read_parquet(run / "analysis" / f"{n}.parquet")
            for n in ("normality", "fits", "contraction")}


def analyze(*argv: str) -> int:
    return cli(["analyze", *argv, "--no-progress"])


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return write_run(tmp_path / "results", "r1", {(100, 0): gaussian(1), (100, 1): laplace(2),
                                                  (200, 0): gaussian(4)})


def at(frame: pd.DataFrame, step: int, rank: int) -> pd.Series:
    return (frame["step"] == step) & (frame["rank"] == rank)


def assert_frames_match(written: pd.DataFrame, direct: pd.DataFrame, columns: list[str]) -> None:
    for column in columns:
        a, b = written[column].to_numpy(), direct[column].to_numpy()
        if a.dtype.kind in "fc" or b.dtype.kind in "fc":
            np.testing.assert_allclose(a.astype(float), b.astype(float), rtol=1e-12,
                                       equal_nan=True, err_msg=column)
        else:  # text: a stored null stands for the direct call's "" (nothing to say)
            assert [None if pd.isna(v) else v for v in a] == \
                [None if isinstance(v, str) and v == "" else v for v in b], column


def test_written_tables_equal_direct_calls(run_dir: Path, capsys) -> None:
    rc = analyze(str(run_dir), "--densities", *map(str, DENSITIES),
                 "--max-n", str(MAX_N), "--seed", str(SEED))
    assert rc == 0
    out = tables(run_dir)
    identity = ["experiment", "run_id"]  # every table names its run first
    assert list(out["normality"].columns) == [*identity, *NORMALITY_COLUMNS]
    assert list(out["fits"].columns) == [*identity, *FITS_COLUMNS]
    assert list(out["contraction"].columns) == [*identity, *CONTRACTION_COLUMNS]
    for table in out.values():
        assert set(table["run_id"]) == {run_dir.name}
        assert set(table["experiment"]) == {run_dir.parent.name}
    assert sorted(zip(out["normality"]["step"], out["normality"]["rank"])) == [
        (100, 0), (100, 1), (200, 0)]
    for step, rank, make in ((100, 0, lambda: gaussian(1)), (100, 1, lambda: laplace(2)),
                             (200, 0, lambda: gaussian(4))):
        u = make()
        row = out["normality"][at(out["normality"], step, rank)].iloc[0]
        direct = normality.battery(u, max_n=MAX_N, seed=SEED)
        for key in normality.KEYS:
            if key == "note":  # stored as null where the battery has nothing to say ("")
                assert (None if pd.isna(row[key]) else row[key]) == (direct[key] or None)
            else:
                assert row[key] == pytest.approx(direct[key], rel=1e-12, nan_ok=True), key
        written = out["fits"][at(out["fits"], step, rank)].reset_index(drop=True)
        direct = fits.compare(u, max_n=MAX_N, seed=SEED).rename(columns={"rank": "family_rank"})
        assert_frames_match(written, direct, FITS_COLUMNS[2:-2])
        written = out["contraction"][at(out["contraction"], step, rank)]
        report = contraction.analyze(u, DENSITIES, max_n=MAX_N, seed=SEED)
        assert_frames_match(written.reset_index(drop=True), report.ratios,
                            contraction.RATIO_COLUMNS)
        # the ratio is the exact float64 one and the references are the closed forms
        for r in written.itertuples():
            assert r.topk_ratio == pytest.approx(contraction.topk_ratio(u, r.k), rel=1e-12)
            assert r.paper_bound == pytest.approx((1 - r.k / D) ** 2, rel=1e-15)
            assert r.gaussian_ratio == pytest.approx(gaussian_ratio_by_quadrature(r.k / D),
                                                     rel=1e-9)
        assert (written["seed"] == SEED).all() and (written["max_n"] == MAX_N).all()
    text = capsys.readouterr().out
    assert "3 snapshot(s) of u, 3 analyzed now, 0 already done, 0 failed" in text


def test_laplace_fails_gaussian_checks_and_gaussian_passes(run_dir: Path) -> None:
    assert analyze(str(run_dir), "--max-n", str(MAX_N), "--seed", str(SEED)) == 0
    out = tables(run_dir)
    norm = out["normality"].set_index(["step", "rank"])
    lap, gau = norm.loc[(100, 1)], norm.loc[(100, 0)]
    for p in ("shapiro_p", "dagostino_p", "ks_p", "jarque_bera_p"):
        assert lap[p] < 1e-3, p
    assert lap["excess_kurtosis"] > 2.0  # Laplace: 3
    assert gau["dagostino_p"] > 1e-3 and abs(gau["excess_kurtosis"]) < 0.2
    best = out["fits"].query("on == 'x' and family_rank == 1").set_index(["step", "rank"])["family"]
    assert best.loc[(100, 1)] == "laplace"
    assert best.loc[(100, 0)] == best.loc[(200, 0)] == "normal"
    con = out["contraction"]
    g = con[(con["step"] == 100) & (con["rank"] == 0)]
    assert g["below_paper"].all() and g["condition_holds"].all()
    assert (g["topk_ratio"] < g["paper_bound"]).all()


def test_rerun_skips_adds_new_work_and_force_recomputes(run_dir: Path, capsys) -> None:
    args = [str(run_dir), "--max-n", str(MAX_N), "--densities", "0.01"]
    assert analyze(*args) == 0
    first = tables(run_dir)
    capsys.readouterr()
    assert analyze(*args) == 0
    assert "0 analyzed now, 3 already done" in capsys.readouterr().out
    for name, frame in tables(run_dir).items():
        pd.testing.assert_frame_equal(frame, first[name])
    # a new snapshot and a new density: only those are computed
    np.save(run_dir / "snapshots" / "step300-rank0.npy", laplace(9))
    assert analyze(*args[:-1], "0.01", "0.1") == 0
    assert "4 snapshot(s) of u, 4 analyzed now, 0 already done" in capsys.readouterr().out
    second = tables(run_dir)
    assert len(second["normality"]) == 4
    assert sorted(second["contraction"]["density"].unique()) == [0.01, 0.1]
    assert second["contraction"].groupby(["step", "rank"]).size().eq(2).all()
    old = second["normality"][second["normality"]["step"] < 300].reset_index(drop=True)
    pd.testing.assert_frame_equal(old, first["normality"])  # not recomputed
    # --force with another seed recomputes everything in place (no duplicate rows)
    assert analyze(*args, "--seed", "7", "--force") == 0
    third = tables(run_dir)
    assert len(third["normality"]) == 4 and (third["normality"]["seed"] == 7).all()
    assert len(third["contraction"]) == 4 + 4  # 0.01 recomputed, 0.1 kept
    assert set(third["contraction"].query("density == 0.01")["seed"]) == {7}


def test_rerun_with_other_seed_or_max_n_is_refused_without_force(run_dir: Path, capsys) -> None:
    args = [str(run_dir), "--max-n", str(MAX_N), "--densities", "0.01", "0.1"]
    assert analyze(*args) == 0
    first = tables(run_dir)
    capsys.readouterr()
    for other in (["--seed", "7"], ["--max-n", "2000"]):
        assert analyze(*args, *other) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("topkscope analyze: error: ")
        assert f"was measured with seed 0, max_n {MAX_N}" in err and "add --force" in err
        for name, frame in tables(run_dir).items():  # nothing rewritten
            pd.testing.assert_frame_equal(frame, first[name])
    # --force recomputes with the new seed; then that seed needs no --force, at the densities
    # it was measured at (0.1 still holds seed-0 rows: asking for it is refused again)
    assert analyze(str(run_dir), "--max-n", str(MAX_N), "--densities", "0.01", "--seed", "7",
                   "--force") == 0
    capsys.readouterr()
    assert analyze(str(run_dir), "--max-n", str(MAX_N), "--densities", "0.01",
                   "--seed", "7") == 0
    assert "0 analyzed now, 3 already done" in capsys.readouterr().out
    assert analyze(str(run_dir), "--max-n", str(MAX_N), "--densities", "0.1",
                   "--seed", "7") == 2
    assert "the contraction table" in capsys.readouterr().err


def test_results_root_finds_every_run(tmp_path: Path, capsys) -> None:
    root = tmp_path / "results"
    a = write_run(root, "a", {(10, 0): gaussian(5)})
    b = write_run(root, "b", {(10, 0): laplace(6)})
    write_run(root, "empty", {})
    assert analyze(str(root), "--densities", "0.1", "--max-n", "1000") == 0
    for run in (a, b):
        assert len(tables(run)["normality"]) == 1
    assert not (root / "fnn3-mnist" / "empty" / "analysis").exists()
    text = capsys.readouterr().out
    assert text.count("snapshot(s) of u") == 3 and "0 snapshot(s) of u" in text


@pytest.mark.parametrize("argv, expected", [
    (["--densities", "0"], "--densities: density = 0.0 is outside the allowed range (0, 1]"),
    (["--densities", "0.01", "1.5"], "outside the allowed range (0, 1]"),
    (["--densities", "0.01", "abc"], "'abc' is not a number"),
    (["--max-n", "3"], "--max-n: 3 is outside the allowed range (>= 8)"),
    (["--seed", "x"], "--seed: 'x' is not an integer"),
])
def test_bad_option_exits_2_with_one_line_and_writes_nothing(run_dir, capsys, argv,
                                                             expected) -> None:
    assert analyze(str(run_dir), *argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("topkscope analyze: error: ")
    assert expected in err
    assert not (run_dir / "analysis").exists()


def test_not_a_run_folder_exits_2_and_writes_nothing(run_dir: Path, tmp_path: Path,
                                                     capsys) -> None:
    empty = tmp_path / "not-a-run"
    empty.mkdir()
    for bad in (empty, tmp_path / "missing"):
        assert analyze(str(run_dir), str(bad)) == 2  # the good run is not touched either
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(bad) in err
        assert not (run_dir / "analysis").exists()
    broken = write_run(tmp_path / "other", "broken", {})
    (broken / "manifest.json").write_text("{not json")
    assert analyze(str(broken)) == 2
    assert "is not valid JSON" in capsys.readouterr().err


def test_unreadable_snapshot_is_reported_and_the_rest_analysed(run_dir: Path, capsys) -> None:
    (run_dir / "snapshots" / "step400-rank0.npy").write_bytes(b"not an npy file")
    assert analyze(str(run_dir), "--densities", "0.1", "--max-n", "1000") == 1
    text = capsys.readouterr().out
    assert "1 failed" in text and "step 400 rank 0" in text
    assert len(tables(run_dir)["normality"]) == 3


def test_degenerate_snapshots_are_rows_with_notes_not_errors() -> None:
    zero = analyze_snapshot(np.zeros(100, np.float32), 1, 0, [0.1])
    assert zero.normality["note"].iloc[0] == "all values zero"
    assert zero.fits.empty and list(zero.fits.columns) == FITS_COLUMNS
    assert math.isnan(zero.contraction["topk_ratio"].iloc[0])
    assert "undefined" in zero.contraction["note"].iloc[0]
    nan = np.array([np.nan, np.inf, *np.linspace(-1, 1, 50)], np.float32)
    part = analyze_snapshot(nan, 2, 1, [], distribution=True)
    assert part.normality["nonfinite"].iloc[0] == 2 and part.contraction.empty


def test_merge_replaces_only_the_named_keys() -> None:
    old = pd.DataFrame({"step": [1, 1, 2], "rank": [0, 0, 0], "density": [0.1, 0.2, 0.1],
                        "v": [1.0, 2.0, 3.0]})
    new = pd.DataFrame({"step": [1], "rank": [0], "density": [0.1], "v": [9.0]})
    out = merge(old, new, new[["step", "rank", "density"]])
    assert sorted(zip(out["density"], out["v"])) == [(0.1, 3.0), (0.1, 9.0), (0.2, 2.0)]
    out = merge(old, new.iloc[:0], pd.DataFrame({"step": [1], "rank": [0]}))
    assert list(out["v"]) == [3.0]  # a re-analysis with no rows still drops the stale ones


def test_damaged_table_is_bad_input(run_dir: Path, capsys) -> None:
    (run_dir / "analysis").mkdir()
    (run_dir / "analysis" / "normality.parquet").write_bytes(b"PAR1 truncated")
    assert analyze(str(run_dir), "--densities", "0.1") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "normality.parquet" in err and "delete it" in err
    assert sorted(p.name for p in (run_dir / "analysis").iterdir()) == ["normality.parquet"]


def test_damaged_stats_part_is_one_line_naming_the_file(run_dir: Path, capsys) -> None:
    part = run_dir / "stats" / "part-r00000-000001.parquet"
    part.parent.mkdir()
    part.write_bytes(b"PAR1 cut short by a full disk")
    assert analyze(str(run_dir), "--densities", "0.1") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("topkscope analyze: error: ")
    assert f"{str(part)!r} is not a readable parquet file" in err
    assert "move it out of" in err and "to load the rest of the run" in err
    assert not (run_dir / "analysis").exists()


def test_out_writes_the_tables_elsewhere_and_leaves_the_run_folder_alone(run_dir, tmp_path):
    before = sorted(p.relative_to(run_dir) for p in run_dir.rglob("*"))
    out = tmp_path / "mine"
    assert analyze(str(run_dir), "--results", str(out), "--densities", "0.01") == 0
    assert sorted(p.relative_to(run_dir) for p in run_dir.rglob("*")) == before
    elsewhere = out / "fnn3-mnist" / "r1"
    written = {n: pd.read_parquet(elsewhere / f"{n}.parquet")
               for n in ("normality", "fits", "contraction")}
    assert sorted(map(tuple, written["normality"][["step", "rank"]].values)) == \
        [(100, 0), (100, 1), (200, 0)]
    # a second call finds its own tables there: nothing left to do
    assert analyze(str(run_dir), "--results", str(out), "--densities", "0.01") == 0
    again = pd.read_parquet(elsewhere / "normality.parquet")
    pd.testing.assert_frame_equal(again, written["normality"])


def test_delta_tables_cover_every_saved_vector_and_equal_direct_calls(run_dir: Path,
                                                                      capsys) -> None:
    from topkscope.analysis import snapshots

    e = laplace(11)
    np.save(run_dir / "snapshots" / "step100-rank0-e.npy", e)
    assert analyze(str(run_dir), "--densities", "0.01", "--max-n", str(MAX_N),
                   "--seed", str(SEED)) == 0
    out = {n: pd.read_parquet(run_dir / "analysis" / f"{n}.parquet")
           for n in snapshots.DELTA_TABLES}
    identity = ["experiment", "run_id"]
    for name, columns in zip(snapshots.DELTA_TABLES, (
            snapshots.DELTA_CURVE_COLUMNS, snapshots.DELTA_FAMILY_COLUMNS,
            snapshots.SIDCO_COLUMNS, snapshots.SENT_RANGE_COLUMNS)):
        assert list(out[name].columns) == [*identity, *columns], name
    fam = out["delta_families"]
    assert sorted(set(zip(fam["step"], fam["rank"], fam["kind"]))) == [
        (100, 0, "e"), (100, 0, "u"), (100, 1, "u"), (200, 0, "u")]
    assert (fam["layer"] == "__global__").all() and (fam["max_n"] == MAX_N).all()
    # the delta rows of u equal the direct call, with the fits the table holds
    direct = snapshots.analyze_delta(gaussian(1), 100, 0, "u", [0.01], max_n=MAX_N, seed=SEED)
    for name in snapshots.DELTA_TABLES:  # the tables are sorted by step, rank, kind, density
        order = [c for c in ("family", "rule", "dist", "stages", "selector", "density")
                 if c in out[name].columns]
        written = out[name].query("step == 100 and rank == 0 and kind == 'u'")
        if "shape_name" in written:  # a stored null stands for the direct call's ""
            written = written.fillna({"shape_name": ""})
        pd.testing.assert_frame_equal(
            written.drop(columns=identity).sort_values(order).reset_index(drop=True),
            getattr(direct, name).sort_values(order).reset_index(drop=True), check_dtype=False)
    # e: its delta rows only (SIDCo's thresholds and the sent values are u's)
    assert set(out["sidco_thresholds"]["kind"]) == set(out["sent_range"]["kind"]) == {"u"}
    best = fam[fam["best"]].set_index(["step", "rank", "kind"])["family"]
    assert best.loc[(100, 1, "u")] == best.loc[(100, 0, "e")] == "laplace"
    assert best.loc[(100, 0, "u")] == "normal"
    text = capsys.readouterr().out
    assert "delta(k) of u, best family" in text and "SIDCo at rho 0.01" in text
    # a rerun has nothing to do; a new density adds only SIDCo's and the sent values' rows
    assert analyze(str(run_dir), "--densities", "0.01", "--max-n", str(MAX_N),
                   "--seed", str(SEED)) == 0
    assert "0 analyzed now, 3 already done" in capsys.readouterr().out
    assert analyze(str(run_dir), "--densities", "0.01", "0.1", "--max-n", str(MAX_N),
                   "--seed", str(SEED)) == 0
    again = {n: pd.read_parquet(run_dir / "analysis" / f"{n}.parquet")
             for n in snapshots.DELTA_TABLES}
    pd.testing.assert_frame_equal(again["delta_families"], out["delta_families"])
    assert sorted(again["sent_range"]["density"].unique()) == [0.01, 0.1]
    assert len(again["sent_range"]) == 2 * len(out["sent_range"])
