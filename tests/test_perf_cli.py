"""`topkscope scale`: the table, its CSV, the sources, one-line errors."""

import numpy as np
import pandas as pd
import pytest

from topkscope.cli import main


def test_scale_verbose_prints_every_row_and_writes_the_table(tmp_path, capsys):
    out = tmp_path / "t.csv"
    rc = main(["scale", "--model", "fnn3", "--network", "10gbe", "--workers", "2", "16",
               "--compute-s", "0.01", "--select-s", "gaussiank=0.002", "--results",
               str(tmp_path / "none"), "--csv", str(out), "--verbose"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "sources: compute user" in text and "select user" in text and "preset" in text
    df = pd.read_csv(out)
    assert len(df) == 2 * 6  # methods (dense, its two baselines, three sparse) x workers
    for col in ("method", "workers", "t_compute", "t_select", "t_comm", "t_step"):
        assert col in df.columns
    g = df[(df.method == "gaussiank") & (df.workers == 16)].iloc[0]
    assert g["t_select"] == 0.002
    assert g["t_step"] == pytest.approx(g["t_compute"] + g["t_select"] + g["t_comm"])
    # each sparse row says the longest selection that still beats every baseline
    dense = df[(df.method == "dense") & (df.workers == 16)].iloc[0]
    expect = (dense["t_step"] - g["t_compute"] - g["t_comm"]) * 1e3
    assert f"beats Dense while its selection takes below {expect:.3g} ms" in text
    assert text.count("break-even:") == 2 * 3  # the sparse methods, at each P


def test_scale_prints_the_answer_table_and_each_source_once(tmp_path, capsys):
    """By default: one row per (method, P) with t_step, the speed-ups and the break-even
    selection against every dense baseline; per P the fastest method; sources once."""
    rc, text, _, df = _scale(["--model", "fnn3", "--network", "10gbe", "--workers", "2", "16",
                              "--compute-s", "0.01", "--select-s", "gaussiank=0.002"],
                             capsys, tmp_path, csv=True)
    assert rc == 0
    lines = text.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.split()[:2] == ["P", "method"])
    rows = [ln.split() for ln in lines[head + 1: head + 1 + len(df)]]
    for cells, row in zip(rows, df.itertuples(index=False)):
        assert (int(cells[0]), cells[1]) == (row.workers, row.method)
        assert float(cells[2]) == pytest.approx(row.t_step * 1e3, abs=5e-4)
        assert cells[3] == f"{row.speedup_vs_dense:.3f}x"
        if row.method not in ("dense", "dense-wfbp", "dense-fp16"):
            limit = min(row.breakeven_select_vs_dense, row.breakeven_select_vs_dense_wfbp,
                        row.breakeven_select_vs_dense_fp16)
            # no selection time can win: none, and a line says why (never a negative time)
            assert cells[-1] == (f"{limit * 1e3:.3g}" if limit > 0 else "none")
            if limit <= 0:
                assert any(ln.startswith(f"none (P={row.workers}: ") and row.method in ln
                           and "no selection time can beat" in ln for ln in lines)
    for workers, at in df.groupby("workers"):
        best = at.loc[at["t_step"].idxmin()]
        assert f"P={workers}: fastest {best['method']} at {best['t_step'] * 1e3:.3g} ms" in text
    for kind in ("compute", "select", "count", "comm"):
        assert text.count(f"sources of {kind}: ") == 1
    assert "sources: " not in text and "break-even:" not in text  # the detail: --verbose
    assert "user" in next(ln for ln in lines if ln.startswith("sources of compute"))


def test_a_fitted_presets_old_name_still_works_with_a_note(tmp_path, capsys):
    args = ["--model", "fnn3", "--workers", "16", "--compute-s", "0.01"]
    rc, _, err, old = _scale([*args, "--network", "10gbe-fit"], capsys, tmp_path, csv=True)
    assert rc == 0 and "10gbe-fit is deprecated; it is now named 10gbe" in err
    rc, _, _, new = _scale([*args, "--network", "10gbe"], capsys, tmp_path, csv=True)
    pd.testing.assert_frame_equal(old, new)
    rc, _, _, line = _scale([*args, "--network", "10gbe-line"], capsys, tmp_path, csv=True)
    dense = (new["method"] == "dense")
    # the fitted preset reaches 0.935 of the line rate: its dense exchange takes longer
    assert (new.loc[dense, "t_comm"].iloc[0] > line.loc[dense, "t_comm"].iloc[0])


def test_scale_user_network(tmp_path, capsys):
    rc = main(["scale", "--model", "fnn3", "--alpha", "1e-4", "--beta", "1e-9", "--workers", "4",
               "--compute-s", "0.01", "--methods", "topk", "--results", str(tmp_path)])
    assert rc == 0
    comm = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("sources of comm"))
    assert "user" in comm


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
                 "--inputs", "here", "--results", str(tmp_path), "--compute-csv", str(bench)]) == 2
    assert "--compute-s" in capsys.readouterr().err


def test_scale_takes_compute_from_the_benchmark_when_no_run(tmp_path, capsys):
    bench = tmp_path / "compute.csv"
    pd.DataFrame({"model": ["fnn3", "fnn3"], "threads": [1, 2], "batch_per_worker": [128, 128],
                  "batch_measured": [128, 32], "compute_s": [0.5, 0.25],
                  "device": ["cpu", "cpu"]}).to_csv(bench, index=False)
    out = tmp_path / "t.csv"
    assert main(["scale", "--model", "fnn3", "--network", "1gbe", "--workers", "16",
                 "--inputs", "here", "--results", str(tmp_path), "--compute-csv", str(bench),
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


def _scale(args, capsys, tmp_path, csv=False):
    """(exit code, stdout, stderr[, table]) of one `topkscope scale` run."""
    out = tmp_path / "t.csv"
    rc = main(["scale", *args, "--results", str(tmp_path / "none")]
              + (["--csv", str(out)] if csv else []))
    captured = capsys.readouterr()
    return (rc, captured.out, captured.err) + ((pd.read_csv(out),) if csv else ())


@pytest.mark.parametrize("args", [
    ["--model", "fnn3", "--network", "10gbe", "--workers", "16", "--compute-s", "0.25"],
    ["--model", "resnet50", "--network", "ib100", "--workers", "1", "16"],
    ["--model", "fnn3", "--network", "1gbe", "--workers", "4", "--compute-s", "0.01",
     "--select-s", "gaussiank=0", "--methods", "gaussiank"],  # faster at any bandwidth
    ["--params", "5000", "--network", "10gbe", "--workers", "2", "--compute-s", "0.01",
     "--methods", "dense-wfbp"],
])
@pytest.mark.parametrize("verbose", [[], ["--verbose"]])
def test_scale_text_has_no_nan_and_explains_each_dash(args, verbose, capsys, tmp_path):
    rc, text, _ = _scale(args + verbose, capsys, tmp_path)
    assert rc == 0
    words = text.replace(",", " ").replace(";", " ").split()
    assert not {"nan", "NaN", "None", "inf", "<NA>"} & set(words), text
    assert ("—" in text) == text.rstrip().endswith("—: does not apply (dense methods have no "
                                                   "crossover with dense; no batch is known for "
                                                   "the throughput; or the method compared with "
                                                   "was not predicted)")
    if "gaussiank=0" in args and verbose:
        assert "beats dense at any bandwidth" in text


def test_scale_warns_when_compute_and_selection_devices_differ(capsys, tmp_path):
    base = ["--model", "fnn3", "--network", "10gbe", "--workers", "16"]
    rc, text, _, table = _scale(base, capsys, tmp_path, csv=True)  # published GPU compute
    assert rc == 0
    warning = next(line for line in text.splitlines() if line.startswith("warning:"))
    assert "compute on a GPU but selection measured on a CPU" in warning
    # exact Top-k and the published rule take the published GPU selection inputs; our
    # Gaussian-k has none, so only its CPU time is warned about
    assert warning.startswith("warning: gaussiank: ")
    assert table.loc[table["method"] == "topk", "select_source"].str.startswith(
        "fitted by the authors").all()
    assert (table["inputs"] == "GPU inputs from published measurements").all()
    assert table.loc[table["method"] == "gaussiank", "inputs_warning"].str.contains("CPU").all()
    # every selecting method timed by the user: nothing to warn about (dense selects nothing)
    given = [a for m in ("topk", "gaussiank", "gaussiank-2019") for a in ("--select-s", f"{m}=0.001")]
    rc, text, _ = _scale(base + given, capsys, tmp_path)
    assert rc == 0 and "warning:" not in text
    # this machine's CPU compute with CPU selection times: the devices agree
    bench = tmp_path / "compute.csv"
    pd.DataFrame({"model": ["fnn3"], "threads": [1], "batch_per_worker": [128],
                  "compute_s": [0.5], "device": ["cpu"]}).to_csv(bench, index=False)
    rc, text, _ = _scale(base + ["--inputs", "here", "--compute-csv", str(bench)], capsys,
                         tmp_path)
    assert rc == 0 and "warning:" not in text and "inputs: this machine" in text


def test_scale_params_and_batch_give_size_and_throughput(capsys, tmp_path):
    rc, text, _, table = _scale(["--params", "1000000", "--batch", "32", "--compute-s", "0.1",
                                 "--network", "10gbe", "--workers", "4", "8", "--verbose"],
                                capsys, tmp_path,
                                csv=True)
    assert rc == 0 and text.startswith("params:1000000: d = 1,000,000")
    assert (table["d"] == 1_000_000).all() and (table["batch_per_worker"] == 32).all()
    np.testing.assert_allclose(table["throughput"], table["workers"] * 32 / table["t_step"])
    assert "samples/s" in text
    wfbp = table[(table["method"] == "dense-wfbp")].iloc[0]
    assert wfbp["overlap"] == pytest.approx(2 / 3) and "Kaplan" in wfbp["overlap_source"]


def test_scale_batch_rescales_the_published_compute(capsys, tmp_path):
    from topkscope.perf import published

    row = published.measurements()
    row = row[(row["model"] == "resnet50") & (row["gpus"] == 1)].iloc[0]
    rc, _, _, table = _scale(["--model", "resnet50", "--network", "10gbe", "--workers", "16",
                              "--batch", str(int(row["batch_per_gpu"]))], capsys, tmp_path,
                             csv=True)
    assert rc == 0
    # the published table holds ResNet-50 at the paper's batch 32, scaled from the measured
    # batch 64: asking for batch 64 gives back the measured 1-GPU time
    assert table["t_compute"].iloc[0] == pytest.approx(row["batch_per_gpu"] / row["samples_per_s"])
    assert "scaled linearly from batch 32 to 64" in table["compute_source"].iloc[0]


@pytest.mark.parametrize("model, network, method", [
    ("bert-base", "ib100", "dense"), ("bert-base", "10gbe", "dense-wfbp"),
    ("bert-large", "ib100", "dense"),
])
def test_scale_params_reproduces_the_published_validation_rows(model, network, method, capsys,
                                                                tmp_path):
    from topkscope.perf.published import PUBLISHED_CSV

    row = pd.read_csv(PUBLISHED_CSV)
    row = row[(row["model"] == model) & (row["network"] == network) & (row["method"] == method)
              & (row["gpus"] == 16)].iloc[0]
    rc, _, _, table = _scale(["--params", str(int(row["params"])), "--batch",
                              str(int(row["batch_per_gpu"])), "--compute-s", repr(float(row["compute_s"])),
                              "--network", network, "--workers", "16", "--methods",
                              method], capsys, tmp_path, csv=True)
    assert rc == 0
    got = table.set_index("method").loc[method]
    assert got["t_step"] == pytest.approx(row["predicted_s"], rel=1e-9)
    assert got["throughput"] == pytest.approx(16 * row["batch_per_gpu"] / row["predicted_s"])


@pytest.mark.parametrize("argv, match", [
    (["--params", "0", "--network", "1gbe", "--workers", "2", "--compute-s", "1"], "--params"),
    (["--model", "fnn3", "--params", "5", "--network", "1gbe", "--workers", "2"], "exactly one"),
    (["--network", "1gbe", "--workers", "2", "--compute-s", "1"], "exactly one"),
    (["--model", "fnn3", "--batch", "0", "--network", "1gbe", "--workers", "2"], "--batch"),
    (["--params", "5000", "--network", "1gbe", "--workers", "2"], "--compute-s"),
])
def test_scale_bad_params_or_batch_is_one_line(argv, match, capsys, tmp_path):
    assert main(["scale", *argv, "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert match in err and err.startswith("topkscope scale: error:")


def test_every_scale_column_is_documented(capsys, tmp_path):
    import re
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[1] / "docs" / "scaling.md").read_text()
    section = docs[docs.index("## Columns"):]
    section = section[:section.index("\n## ", 3)] if "\n## " in section[3:] else section
    documented = set(re.findall(r"^\| `([a-z_0-9]+)` \|", section, flags=re.M))
    rc, _, _, table = _scale(["--model", "fnn3", "--network", "10gbe", "--workers", "2", "16"],
                             capsys, tmp_path, csv=True)
    assert rc == 0
    assert set(table.columns) <= documented, sorted(set(table.columns) - documented)
    assert documented <= set(table.columns), sorted(documented - set(table.columns))
