"""`topkscope scale`: the table, its CSV, the sources, one-line errors."""

import pandas as pd
import pytest

from topkscope.cli import main


def test_scale_prints_and_writes_the_table(tmp_path, capsys):
    out = tmp_path / "t.csv"
    rc = main(["scale", "--model", "fnn3", "--network", "10gbe", "--workers", "2", "16",
               "--compute-s", "0.01", "--select-s", "gaussiank=0.002", "--results",
               str(tmp_path / "none"), "--csv", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "sources: compute user" in text and "select user" in text and "preset" in text
    df = pd.read_csv(out)
    assert len(df) == 2 * 4  # methods x workers
    for col in ("method", "workers", "t_compute", "t_select", "t_comm", "t_step"):
        assert col in df.columns
    g = df[(df.method == "gaussiank") & (df.workers == 16)].iloc[0]
    assert g["t_select"] == 0.002
    assert g["t_step"] == pytest.approx(g["t_compute"] + g["t_select"] + g["t_comm"])


def test_scale_user_network(tmp_path, capsys):
    rc = main(["scale", "--model", "fnn3", "--alpha", "1e-4", "--beta", "1e-9", "--workers", "4",
               "--compute-s", "0.01", "--methods", "topk", "--results", str(tmp_path)])
    assert rc == 0
    assert "comm user" in capsys.readouterr().out


@pytest.mark.parametrize("argv, match", [
    (["--model", "nope", "--network", "1gbe", "--workers", "2", "--compute-s", "1"], "unknown model"),
    (["--model", "fnn3", "--network", "3gbe", "--workers", "2", "--compute-s", "1"], "unknown network"),
    (["--model", "fnn3", "--network", "1gbe", "--workers", "0", "--compute-s", "1"], "--workers"),
    (["--model", "fnn3", "--network", "1gbe", "--workers", "2", "--methods", "foo",
      "--compute-s", "1"], "unknown method"),
    (["--model", "fnn3", "--workers", "2", "--compute-s", "1"], "alpha and beta"),
])
def test_scale_bad_input_is_one_line(argv, match, capsys, tmp_path):
    assert main(["scale", *argv, "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert match in err and "\n" not in err


def test_scale_without_compute_time_says_how_to_give_it(tmp_path, capsys):
    bench = tmp_path / "compute.csv"  # a model-compute benchmark without fnn3
    pd.DataFrame({"model": ["vgg16"], "threads": [1], "batch_per_worker": [128],
                  "compute_s": [2.0]}).to_csv(bench, index=False)
    assert main(["scale", "--model", "fnn3", "--network", "1gbe", "--workers", "2",
                 "--results", str(tmp_path), "--compute-csv", str(bench)]) == 2
    assert "--compute-s" in capsys.readouterr().err


def test_scale_takes_compute_from_the_benchmark_when_no_run(tmp_path, capsys):
    bench = tmp_path / "compute.csv"
    pd.DataFrame({"model": ["fnn3", "fnn3"], "threads": [1, 2], "batch_per_worker": [128, 128],
                  "batch_measured": [128, 32], "compute_s": [0.5, 0.25],
                  "device": ["cpu", "cpu"]}).to_csv(bench, index=False)
    out = tmp_path / "t.csv"
    assert main(["scale", "--model", "fnn3", "--network", "1gbe", "--workers", "16",
                 "--results", str(tmp_path), "--compute-csv", str(bench),
                 "--csv", str(out)]) == 0
    table = pd.read_csv(out)
    assert (table["t_compute"] == 0.25).all() and (table["batch_per_worker"] == 128).all()
    assert table["compute_source"].str.startswith("measured here, CPU, benchmark").all()
    assert "measured here, CPU, benchmark" in capsys.readouterr().out


def test_scale_bad_select_pair():
    with pytest.raises(SystemExit) as exc:
        main(["scale", "--model", "fnn3", "--network", "1gbe", "--workers", "2",
              "--select-s", "gaussiank"])
    assert exc.value.code == 2
