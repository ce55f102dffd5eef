"""benchmarks/selection.py: the device columns, the per-call cap and out-of-memory handling that
let it run up to d = 5e8 on a GPU, and the CPU vectors unchanged (run here on a CPU)."""

from __future__ import annotations

import time

import pandas as pd
import pytest
import torch

from tests.test_benchmark_options import script
from topkscope.perf.inputs import read_selection_csv, selection_time, table_device


@pytest.fixture
def selection(monkeypatch):
    return script("selection", monkeypatch)


def test_time_interleaved_drops_a_slow_or_out_of_memory_method(selection):
    def slow():
        time.sleep(0.05)
        return torch.arange(3)

    def oom():
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    calls = {"fast": lambda: torch.arange(3), "slow": slow, "oom": oom}
    seconds, counts, dropped = selection.time_interleaved(calls, 3, 1, torch.device("cpu"),
                                                          max_call_s=0.02)
    assert set(dropped) == {"slow", "oom"} and dropped["oom"] == "out of device memory"
    assert dropped["slow"].endswith("> --max-call-s 0.02")
    assert len(seconds["fast"]) == 3 and counts["fast"] == [3, 3, 3]
    assert seconds["slow"] == [] and seconds["oom"] == []
    # without a cap a slow method is timed; an error that is not memory still raises
    seconds, _, dropped = selection.time_interleaved({"slow": slow}, 1, 1, torch.device("cpu"))
    assert dropped == {} and len(seconds["slow"]) == 1
    with pytest.raises(RuntimeError, match="boom"):
        selection.time_interleaved({"bad": lambda: (_ for _ in ()).throw(RuntimeError("boom"))},
                                   1, 1, torch.device("cpu"))


def test_cpu_vectors_are_the_seeded_ones_they_were(selection):
    gen = torch.Generator().manual_seed(17)
    chi2 = sum(torch.randn(1000, generator=gen).pow_(2) for _ in range(3))
    expected = torch.randn(1000, generator=gen).div_(chi2.div_(3.0).sqrt_())
    got = selection.make_vector("student_t3", 1000, 17, torch.device("cpu"))
    assert torch.equal(got, expected)


def test_a_dropped_method_is_named_at_its_size_and_every_larger_one(selection, monkeypatch,
                                                                    tmp_path):
    real = selection.time_interleaved

    def capped(calls, rounds, warmup, device, max_call_s=None):
        d = int(calls["torch.topk"]().numel() / 0.01)  # k = rho d
        seconds, counts, dropped = real(calls, rounds, warmup, device, max_call_s)
        if d >= 20_000 and "gaussiank-2019" in calls:
            dropped["gaussiank-2019"] = "one call took 99 s > --max-call-s 60"
        return seconds, counts, dropped

    monkeypatch.setattr(selection, "time_interleaved", capped)
    out = tmp_path / "selection.csv"
    assert selection.main(["--sizes", "1e4,2e4,4e4", "--densities", "0.01", "--methods",
                           "topk,gaussiank-2019", "--distributions", "normal", "--repeats", "1",
                           "--no-plot", "--out", str(out)]) == 0
    table = read_selection_csv(out)
    assert set(table["device"]) == {"cpu"} and table_device(table) == "cpu"
    assert table["device_name"].notna().all()
    g = table[table["method"] == "gaussiank-2019"].set_index("d")
    assert g.loc[10_000, "median_ms"] > 0 and pd.isna(g.loc[10_000, "note"])
    assert g.loc[20_000, "note"] == "not timed: one call took 99 s > --max-call-s 60"
    assert g.loc[40_000, "note"] == "not timed: dropped at d = 20,000"
    assert g.loc[[20_000, 40_000], "median_ms"].isna().all()
    # the step-time model reads only what was timed: one size left, scaled linearly from it
    got = selection_time(table, "gaussiank-2019", 40_000, 0.01)
    assert got.value == pytest.approx(g.loc[10_000, "median_ms"] / 1e3 * 4)
    assert "scaled linearly from one size" in got.source


def test_max_call_s_must_be_positive(selection):
    with pytest.raises(SystemExit, match="--max-call-s = 0.0 must be > 0"):
        selection.main(["--max-call-s", "0", "--sizes", "1e3", "--no-plot"])
