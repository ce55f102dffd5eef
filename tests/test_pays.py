"""Does Top-k pay? One answer per run, the same in `topkscope scale --from-run` and `topkscope
report`: the failures a new user met (a Recorder loop of their own stopped at "num_parameters =
None"; an outer-loop run modelled as a plain Top-k exchange every step; the command and the
report disagreeing on the same run, the report on an unsaid GPU compute), the word from the
verdict rule with the model's validated error, and the nearest published measurements read
from one frame that a new source joins by one line."""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.test_own_runs_commands import measured_run  # noqa: F401  (a fixture)
from tests.test_own_runs_truthful import recorder_run
from topkscope.cli import main as cli

REPO = Path(__file__).resolve().parents[1]


def scale(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli(["scale", *argv, "--no-progress"])
    captured = capsys.readouterr()
    return code, captured.out.replace("\n    ", " "), captured.err  # wrapped prose, joined


def pays_lines(out: str) -> list[str]:
    return [line.removeprefix("pays? ") for line in out.splitlines()
            if line.startswith("pays? ")]


# ------------------------------------------------------------------ a Recorder loop of one's own
def test_a_recorder_loop_of_ones_own_takes_d_from_the_layout_and_says_what_to_pass(tmp_path,
                                                                                  capsys):
    """It stopped at "num_parameters = None"; then, with --params, at "time_compute is null in
    every row" of a train.parquet the run never had."""
    from tests._hooks_loop import tiny_model
    from topkscope.analysis.runs import load
    from topkscope.schema import GLOBAL

    run = tmp_path / "results" / "mine" / "run1"
    recorder_run(run, steps=8)
    out = tmp_path / "scale.csv"
    code, _, err = scale(capsys, "--from-run", str(run), "--network", "10gbe", "--workers",
                         "16", "--csv", str(out))
    assert code == 2 and err == (
        f"topkscope scale: error: {str(run)!r} has no measured compute time (it has no "
        "train.parquet: a Recorder in a loop of your own times no step); give --compute-s "
        "SECONDS (one worker's forward + backward of a step)\n")
    assert not out.exists()
    code, printed, _ = scale(capsys, "--from-run", str(run), "--network", "10gbe", "--workers",
                             "16", "--compute-s", "0.01", "--csv", str(out))
    assert code == 0
    d = sum(p.numel() for p in tiny_model(0).parameters())
    stats = load(run).stats
    assert set(stats.loc[stats["layer"] == GLOBAL, "numel"]) == {d}
    table = pd.read_csv(out)
    assert (table["d"] == d).all() and (table["t_compute"] == 0.01).all()
    # the Recorder notes the layout's size in the manifest, which the prediction reads
    assert json.loads((run / "manifest.json").read_text())["num_parameters"] == d
    assert "from the run: d from the run's manifest (num_parameters); density from 0.001, " \
           "the default: the run names no density" in printed
    assert len(pays_lines(printed)) == 1


# ------------------------------------------------------------------ an outer-loop run
@pytest.mark.train
def test_an_outer_loop_run_is_predicted_with_its_exchange_every_h_steps(outer_runs, tmp_path,
                                                                       capsys):
    """It was predicted as a plain Top-k exchange of float32 values and int32 indices every
    step, without a word."""
    run = outer_runs / "outer-fnn3-mnist" / "sparseloco"
    manifest = json.loads((run / "manifest.json").read_text())
    exchanges = pd.read_parquet(run / "outer.parquet")
    train = pd.read_parquet(run / "train.parquet")
    P, H = manifest["world_size"], manifest["outer"]["inner_steps"]
    out = tmp_path / "scale.csv"
    code, printed, _ = scale(capsys, "--from-run", str(run), "--network", "1gbe", "--workers",
                             str(P), "16", "--csv", str(out))
    assert code == 0
    table = pd.read_csv(out)
    assert set(table["method"]) == {"dense", "diloco", manifest["sparsifier"]}
    own = table[table["method"] == manifest["sparsifier"]].set_index("workers")
    assert (own["inner_steps"] == H).all()
    # its bytes at its own P are what the run sent: 2-bit values, 12-bit chunk-local indices,
    # the quantizer's tables and the counts, per exchange
    assert own.loc[P, "bytes_per_exchange"] == exchanges["bytes_sent"].max()
    assert own.loc[P, "bytes_per_exchange"] < P * 8 * exchanges["selected_max"].max()
    compute = train[train["step"] >= 2]["time_compute"].median()
    select = exchanges["time_select"].mean()
    from topkscope.perf.networks import PRESETS
    from topkscope.perf.patterns import allgather

    net = PRESETS["1gbe"]
    message = exchanges["bytes_sent"].max() / P
    for workers in (P, 16):
        expected = compute + (select + allgather(workers, message, net.alpha, net.beta)) / H
        assert own.loc[workers, "t_step"] == pytest.approx(expected, rel=1e-9)
    assert f"every {H} steps" in printed and "an outer-loop run" in printed
    assert "Dense is DDP (an all-reduce every step)" in printed
    assert len(pays_lines(printed)) == 2
    assert all(f"exchanging every {H} steps" in line for line in pays_lines(printed))
    code, _, err = scale(capsys, "--from-run", str(run), "--network", "1gbe", "--workers", "16",
                         "--density", "0.01")
    assert code == 2 and "a density does not apply to the outer-loop run" in err


# ------------------------------------------------------------------ one answer, command and report
@pytest.mark.train
def test_the_command_and_the_report_give_the_same_numbers_for_the_same_run(measured_run,  # noqa: F811
                                                                          tmp_path, capsys):
    """On 5efa0c4 the command predicted the run's measured CPU compute and the report an
    estimated GPU compute it did not name (GK-2019 1.35x Dense against 2.3x). The run: a short
    `topkscope run` of FNN-3, a paper model."""
    fnn3_run = measured_run
    tables = []
    for network in ("10gbe", "ib100"):
        out = tmp_path / f"{network}.csv"
        code, printed, _ = scale(capsys, "--from-run", str(fnn3_run), "--network", network,
                                 "--workers", "16", "--csv", str(out))
        assert code == 0
        tables.append((pd.read_csv(out), pays_lines(printed)))
    page_path = tmp_path / "page.html"
    assert cli(["report", str(fnn3_run), "--out", str(page_path), "--no-progress"]) == 0
    capsys.readouterr()
    page = html.unescape(page_path.read_text())
    scaling = page.split('id="scaling"')[1]
    shown = [re.sub(r"<[^>]+>", "|", row).strip("|").split("|")
             for row in re.findall(r"<tr><td>.*?</tr>", scaling)]
    shown = [[c for c in cells if c != ""] for cells in shown]
    for table, lines in tables:
        assert (table["compute_source"].str.startswith(f"measured in {fnn3_run}")).all()
        assert f"measured in {fnn3_run} (median time_compute of" in scaling
        for row in table.itertuples():
            cells = [c for c in shown if c[1] == row.network and c[2] == _label(row.method)]
            assert len(cells) == 1, (row.network, row.method)
            assert cells[0][3] == f"{row.t_step * 1e3:.3g}"  # t_step ms
            assert cells[0][4] == f"{row.speedup_vs_dense:.3g}"
        (line,) = lines
        assert line in page  # the same sentence, word and numbers
    answers = page.split('id="answers"')[1].split('id="what-ran"')[0]
    assert "Would sparsification pay" in answers and tables[0][1][0] in answers


def _label(method: str) -> str:
    from topkscope.sparsify import label_of

    return label_of(method)


# ------------------------------------------------------------------ the word: the verdict rule
def _table(dense_s: float, sparse_s: float, basis: str = "measured") -> pd.DataFrame:
    row = dict(model="m", network="10gbe", workers=16, d=1_000_000, density=0.001,
               t_compute=0.1, t_comm=0.0, t_select=0.0, compute_source="given",
               selection_basis=basis, condition="")
    return pd.DataFrame([{**row, "method": "dense", "t_step": dense_s, "t_comm": dense_s - 0.1},
                         {**row, "method": "topk", "t_step": sparse_s, "t_select": 0.001,
                          "t_comm": sparse_s - 0.101}])


def test_the_word_comes_from_the_verdict_rule_with_the_validated_error():
    """It was `> 1.05`, whatever the model's error."""
    from topkscope.claims.answers import pays_answer
    from topkscope.perf.published import validated_errors

    e = validated_errors()["no-overlap"]
    for speedup, word in ((1 + e + 0.002, "yes"), (1 + e - 0.002, "not settled"),
                          (1 - e - 0.002, "no")):
        answer = pays_answer(_table(0.2, 0.2 / speedup), 16)
        assert answer.word == word, (speedup, answer.text)
        assert f"model error +-{e:.1%}" in answer.text
    assert pays_answer(_table(0.2, 0.19), 8).word == "not measured"
    # a selection time measured on another device: judged with free selection only
    answer = pays_answer(_table(0.2, 0.15, basis="break-even"), 16)
    assert answer.word == "not settled" and "with free selection" in answer.text


# ------------------------------------------------------------------ the published evidence
def test_published_settings_give_the_measured_speedups_of_the_raw_rows():
    from topkscope.perf import evidence

    frame = evidence.published_frame()
    assert set(frame["source"]) == {"ddl-benchmarks", "gtopkssgd", "kljp"}
    assert list(frame.columns) == list(evidence.FRAME_COLUMNS)
    settings = evidence.settings(frame).set_index(["source", "model", "workers", "setting"])
    raw = pd.read_csv(REPO / "results" / "reference" / "published" / "gtopkssgd.csv")
    vgg = raw[(raw["model"] == "vgg16") & (raw["workers"] == 16)
              & (raw["quantity"] == "throughput")].set_index("method")["value"]
    got = settings.loc[("gtopkssgd", "vgg16", 16, "batch 128")]
    assert got["speedup_vs_dense"] == pytest.approx(vgg["topk"] / vgg["dense"], rel=1e-12)
    runs = pd.read_csv(REPO / "results" / "reference" / "published" / "runs.csv")
    node = runs[(runs["node"] == "gpu04") & (runs["model"] == "vgg16")].set_index("sparsifier")
    got = settings.loc[("kljp", "vgg16", 8, "node gpu04, batch 128")]
    assert got["speedup_vs_dense"] == pytest.approx(
        node.loc["dense", "median_iteration_s"] / node.loc["topk", "median_iteration_s"])
    assert np.isnan(settings.loc[("ddl-benchmarks", "resnet50", 16, "batch 64")].iloc[0][
        "speedup_vs_dense"])


def test_a_source_joins_the_lookup_by_one_line(tmp_path):
    """The GRACE release will be one more Source; here a CSV written in the frame."""
    from topkscope.perf import evidence

    extra = pd.DataFrame([
        {"source": "extra", "citation": "someone/somewhere@0000 table.csv", "model": "m",
         "params": 1_000_000, "workers": 8, "network": "10gbe", "bandwidth_gbit": 10.0,
         "method": method, "density": rho, "batch": 32, "step_s": step, "setting": "batch 32"}
        for method, rho, step in (("dense", math.nan, 0.2), ("topk", 0.001, 0.1))])
    path = tmp_path / "extra.csv"
    extra.to_csv(path, index=False)
    sources = (*evidence.SOURCES, evidence.Source("extra", lambda: evidence.read_frame_csv(path)))
    frame = evidence.published_frame(sources)
    near = evidence.nearest(1_000_000, 8, "10gbe", 0.001, n=2, frame=frame)
    assert near.iloc[0]["source"] == "extra" and near.iloc[0]["distance"] == 0
    assert near.iloc[0]["speedup_vs_dense"] == pytest.approx(2.0)
    assert "Top-k 2x Dense's speed [someone/somewhere@0000 table.csv]" in \
        evidence.describe(near.iloc[0])
    # without it, the nearest setting that measured Top-k against Dense is still cited
    near = evidence.nearest(1_000_000, 8, "10gbe", 0.001, n=1)
    assert near["speedup_vs_dense"].notna().all()
    path.write_text("source,model\nx,y\n")
    with pytest.raises(ValueError, match="lacks"):
        evidence.read_frame_csv(path)
