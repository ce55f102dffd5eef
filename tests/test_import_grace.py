"""topkscope.importers.grace and `topkscope import grace FILE --out DIR`: the GRACE data release
read without executing it. Hostile pickles are refused before anything runs (their payload
would create a file: it never exists), a DataFrame pickled here is admitted and read back
equal, and the committed tables equal a fresh conversion of the release when its pickle is at
hand ($TOPKSCOPE_GRACE_PICKLE, else <data root>/grace/GRACE_data_release.pickle; skipped
otherwise) and carry the right sha256s."""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import subprocess

import numpy as np
import pandas as pd
import pytest

from topkscope.cli import main
from topkscope.importers import grace as g


@pytest.fixture(scope="module")
def release(data_root):
    path = os.environ.get("TOPKSCOPE_GRACE_PICKLE") or data_root / "grace" / g.PATH
    if not os.path.isfile(path):
        pytest.skip(f"the GRACE release pickle is not at {path} ({g.SOURCE})")
    return path


class _Payload:
    """Pickles as a call of `func` on `args` (REDUCE): what a hostile file does."""

    def __init__(self, func, *args) -> None:
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def _hostile(marker) -> dict[str, bytes]:
    """Pickles each of whose loading would create `marker`."""
    touch = f"open({str(marker)!r}, 'w').close()"
    shell = f"touch {marker}"
    out = {}
    for proto in (0, 2, 4):
        out[f"os.system p{proto}"] = pickle.dumps(_Payload(os.system, shell), protocol=proto)
    out["builtins.eval"] = pickle.dumps(_Payload(eval, touch), protocol=4)
    out["builtins.exec"] = pickle.dumps(_Payload(exec, touch), protocol=4)
    out["subprocess.Popen"] = pickle.dumps(_Payload(subprocess.Popen, ["touch", str(marker)]),
                                           protocol=4)
    # inside an otherwise admitted structure: a dict holding a DataFrame and the payload
    frame = pd.DataFrame({"a": np.arange(3.0)})
    frame.columns = pd.Index(["a"], dtype=object)
    out["beside a DataFrame"] = pickle.dumps({"t": frame, "x": _Payload(os.system, shell)},
                                             protocol=4)
    # hand-written protocol-4 stream: the module name memoized, then fetched for STACK_GLOBAL
    cmd = shell.encode()
    out["memoized STACK_GLOBAL"] = (
        b"\x80\x04\x8c\x02os\x94" b"0" b"h\x00" b"\x8c\x06system\x93"  # PUT, POP, GET
        + b"\x8c" + bytes([len(cmd)]) + cmd + b"\x85R.")
    return out


@pytest.mark.parametrize("case", ["os.system p0", "os.system p2", "os.system p4",
                                  "builtins.eval", "builtins.exec", "subprocess.Popen",
                                  "beside a DataFrame", "memoized STACK_GLOBAL"])
def test_a_hostile_pickle_is_refused_and_nothing_runs(case, tmp_path):
    marker = tmp_path / "ran"
    data = _hostile(marker)[case]
    with pytest.raises(g.Refused, match="not allowed"):
        g.scan(data)
    with pytest.raises(g.Refused, match="not allowed"):
        g.load(data)
    # the restricted unpickler alone (scan skipped) refuses too, before the call
    with pytest.raises(g.Refused, match="not allowed"):
        g.RestrictedUnpickler(io.BytesIO(data)).load()
    assert not marker.exists()


@pytest.mark.parametrize("case", ["os.system p4", "builtins.eval", "memoized STACK_GLOBAL"])
def test_the_payloads_are_live(case, tmp_path):
    """The control: pickle.loads (in a child process) does run them, so the refusals above
    are of working payloads."""
    import sys

    marker = tmp_path / "ran"
    data = _hostile(marker)[case]
    subprocess.run([sys.executable, "-c", "import pickle, sys; "
                    "pickle.loads(sys.stdin.buffer.read())"], input=data, check=False,
                   timeout=60)
    assert marker.exists()


def test_the_command_refuses_in_one_line_exit_2_nothing_written(tmp_path, capsys):
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.pickle"
    evil.write_bytes(_hostile(marker)["os.system p4"])
    out = tmp_path / "out"
    assert main(["import", "grace", str(evil), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "system, which is not allowed" in err
    assert not out.exists() and not marker.exists()


def test_a_call_of_a_call_result_is_refused_statically():
    # REDUCE whose callable is what an allowed call returned (slice(1)(...)): never admitted
    data = b"\x80\x04\x8c\x08builtins\x8c\x05slice\x93K\x01\x85RK\x02\x85R."
    with pytest.raises(g.Refused, match="not an allowed global"):
        g.scan(data)


@pytest.mark.parametrize("data, match", [
    (b"\x80\x04\x8c\x01xQ.", "reaches outside"),          # BINPERSID
    (b"\x80\x04\x82\x01.", "reaches outside"),             # EXT1
    (b"\x80\x04h\x05.", "malformed"),                     # GET before PUT
    (b"not a pickle", "malformed"),
])
def test_streams_that_reach_outside_or_do_not_parse_are_refused(data, match):
    with pytest.raises(g.Refused, match=match):
        g.scan(data)


def test_a_dataframe_pickled_here_is_admitted_and_read_back_equal():
    a = pd.DataFrame({"throughput": [1.5, np.nan, 3.0], "workers": [2, 4, 8]})
    a.columns = pd.Index(list(a.columns), dtype=object)
    b = pd.DataFrame({"x": np.arange(4.0)}, index=pd.Index([10, 20, 30, 40]))
    b.columns = pd.Index(["x"], dtype=object)
    b["name"] = pd.Series(["topk", "none", None, "dgc"], dtype=object, index=b.index)
    obj, found = g.load(pickle.dumps({"cifar10": a, "ptb": b}, protocol=4))
    pd.testing.assert_frame_equal(obj["cifar10"], a)
    pd.testing.assert_frame_equal(obj["ptb"], b)
    assert set(found.globals) <= {f"{m}.{n}" for m, n in g.ALLOWED}
    assert found.calls  # the scan saw the reconstruction calls it admitted


def test_the_setting_and_error_feedback_come_from_the_run_name():
    assert g.setting_of("topk_mem_ratio=0.01", "topk") == ("ratio=0.01", True)
    assert g.setting_of("qsgd_q=64", "qsgd") == ("q=64", False)
    assert g.setting_of("threshold_mem_thres=1e-05", "threshold") == ("thres=1e-05", True)
    assert g.setting_of("none", "none") == ("", None)
    with pytest.raises(g.Refused):
        g.setting_of("topk_ratio=0.1", "dgc")


def test_committed_tables_equal_a_fresh_conversion(release, tmp_path, capsys):
    out = tmp_path / "grace"
    assert main(["import", "grace", str(release), "--out", str(out)]) == 0
    assert "10190 measurements of 1836 runs" in capsys.readouterr().out
    for name in (g.MEASUREMENTS, g.PROVENANCE):
        assert (out / name).read_bytes() == (g.COMMITTED / name).read_bytes(), name
    pd.testing.assert_frame_equal(pd.read_parquet(out / g.MEASUREMENTS_PARQUET),
                                  pd.read_parquet(g.COMMITTED / g.MEASUREMENTS_PARQUET))


def test_the_release_as_read_by_a_slow_loop_matches_the_tidy_table(release):
    """Every value of every table, read cell by cell, is one tidy row (or left out for the
    documented reasons), and nothing else is."""
    tables, _, _ = g.read_release(release)
    table = g.read_measurements()
    got = {(r.task, int(r.source_row), r.metric): r.value for r in table.itertuples()}
    expected = {}
    for task, df in tables.items():
        for i in range(len(df)):
            for col in df.columns:
                if col in g.NOT_METRICS:
                    continue
                raw = df[col].iloc[i]
                if raw is None or (isinstance(raw, str) and raw == "n/a"):
                    continue
                if isinstance(raw, float) and np.isnan(raw):
                    continue
                if col == "top_1_accuracy" and df["mode"].iloc[i] == "accuracy" and \
                        not isinstance(raw, str) and float(raw) == 0.0:
                    continue
                expected[(task, i, col)] = float("nan") if raw == "NaN" else float(raw)
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == value or (np.isnan(got[key]) and np.isnan(value)), key


def test_the_committed_provenance_is_right():
    prov = g.provenance()
    assert prov["source"] == g.SOURCE and prov["sha256"] == g.RELEASE_SHA256
    assert prov["bytes"] == g.RELEASE_BYTES and prov["matches_release"] is True
    csv = (g.COMMITTED / g.MEASUREMENTS).read_bytes()
    assert prov["files"][g.MEASUREMENTS] == hashlib.sha256(csv).hexdigest()
    assert set(prov["globals"]) <= {f"{m}.{n}" for m, n in g.ALLOWED}
    table = g.read_measurements()
    assert prov["measurements"] == len(table)
    # every run of every table has rows (runtime is in each), in the release's numbers
    runs = table.groupby("task")["source_row"].nunique().to_dict()
    assert runs == {t: v["rows"] for t, v in prov["tables"].items()}
    assert sum(runs.values()) == 1836


def test_the_documented_odd_rows_are_as_documented():
    table = g.read_measurements()
    diverged = table[table["note"].str.contains("diverged")]
    assert len(diverged) == 3 and diverged["value"].isna().all()
    assert (diverged["metric"] == "loss").all()
    disagree = table[table["note"].str.contains("error_feedback is the tag")]
    assert set(disagree["run_name"].str.split("_").str[1]) == {"mem"}
    assert disagree["run_id"].nunique() == 4 and not disagree["error_feedback"].any()
    # the authors' "no accuracy found" zero is left out, never an accuracy of 0
    acc = table[(table["metric"] == "top_1_accuracy") & (table["mode"] == "accuracy")]
    assert (acc["value"] > 0).all()
    assert set(table["bandwidth_gbps"].dropna()) == {1.0, 10.0, 25.0}
    assert table["value"].notna().sum() == len(table) - 3


@pytest.mark.parametrize("argv, match", [
    (["--results", "r"], "not run folders"),
    ([], "--out DIR is required"),
])
def test_grace_options_are_checked(argv, match, tmp_path, capsys):
    pickle_file = tmp_path / "x.pickle"
    pickle_file.write_bytes(pickle.dumps({}, protocol=4))
    assert main(["import", "grace", str(pickle_file), *argv]) == 2
    assert match in capsys.readouterr().err


def test_a_pickle_of_something_else_is_refused(tmp_path, capsys):
    other = tmp_path / "x.pickle"
    other.write_bytes(pickle.dumps([1, 2, 3], protocol=4))
    assert main(["import", "grace", str(other), "--out", str(tmp_path / "o")]) == 2
    assert "not the release's dict of DataFrames" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
