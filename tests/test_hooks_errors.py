"""Bad input and unusable output folders fail at once, with messages naming the value."""

import pytest
import torch

from topkscope.hooks import Recorder
from topkscope.io import os_free_bytes

LAYOUT = [("w", 0, 20), ("b", 20, 5)]


@pytest.fixture
def rec(tmp_path):
    r = Recorder(tmp_path / "run", densities=[0.1])
    yield r
    r.close()


def test_unwritable_output_folder_fails_before_anything_runs(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(OSError, match="'[^']*a-file' is a file, not a folder"):
        Recorder(blocker / "run")


def test_full_disk_fails_at_construction(tmp_path):
    free = os_free_bytes(tmp_path)
    assert free is not None
    with pytest.raises(OSError, match="bytes free"):
        Recorder(tmp_path / "run", min_free_bytes=free + (1 << 40))
    assert not (tmp_path / "run" / "manifest.json").exists()


@pytest.mark.parametrize("kwargs,match", [
    ({"densities": [0.0]}, r"density = 0.0 is outside the allowed range \(0, 1\]"),
    ({"densities": [1.5]}, "outside the allowed range"),
    ({"densities": ["x"]}, r"density = 'x' must be a number in \(0, 1\]"),
    ({"densities": []}, "densities is empty"),
    ({"sparsifiers": ["fastk"]}, "unknown sparsifier 'fastk'"),
    ({"kinds": ["q"]}, "kinds"),
    ({"kinds": []}, "kinds"),
    ({"snapshot_kinds": ["u", "z"]}, "snapshot_kinds"),
    ({"flush_every": 0}, r"flush_every = 0 is outside the allowed range \[1, inf\)"),
    ({"rank": -1}, "rank = -1"),
    ({"hist_bins": 0}, "hist_bins"),
    ({"hist_range": 0.0}, "hist_range"),
    ({"schedule": {"every": -3}}, "every"),
    ({"hist_schedule": "weekly"}, "bad schedule"),
])
def test_bad_settings_raise_value_error(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        Recorder(tmp_path / "run", **kwargs)


@pytest.mark.parametrize("kwargs,match", [
    ({"u": torch.randn(5, 5)}, "flat 1-D"),
    ({"u": torch.arange(25)}, "float tensor"),
    ({"u": [0.0] * 25}, "torch.Tensor"),
    ({"u": torch.randn(25), "e": torch.randn(24)}, "e has 24 elements but u has 25"),
    ({"u": torch.randn(25), "g": torch.randn(26)}, "g has 26 elements"),
    ({"u": torch.randn(25), "layout": [("w", 0, 20), ("b", 19, 5)]}, "overlaps"),
    ({"u": torch.randn(25), "layout": [("w", 0, 30)]}, r"outside \[0, d = 25\)"),
    ({"u": torch.randn(25), "layout": [("w", 0, 20), ("w", 20, 5)]}, "twice"),
    ({"u": torch.randn(25), "layout": [("__global__", 0, 25)]}, "layer name"),
    ({"u": torch.randn(25), "layout": [("w", 0)]}, r"\(layer_name, offset, numel\)"),
    ({"u": torch.randn(25), "layout": [("w", 0.5, 20)]}, "must be an integer"),
    ({"u": torch.randn(25), "layout": None}, "record needs layout"),
    ({"u": torch.randn(25), "selected": torch.tensor([3, 25])}, r"outside the allowed range \[0, d = 25\)"),
    ({"u": torch.randn(25), "selected": torch.tensor([0.5])}, "integer tensor"),
    ({"u": torch.randn(25), "selected": torch.tensor([[1]])}, "1-D integer tensor"),
])
def test_bad_record_arguments_raise_value_error(rec, kwargs, match):
    kwargs = {"layout": LAYOUT, **kwargs}
    with pytest.raises(ValueError, match=match):
        rec.record(0, 0, **kwargs)


@pytest.mark.parametrize("step,rank,match", [(-1, 0, "step = -1"), (0, -2, "rank = -2"),
                                             (1.5, 0, "step = 1.5")])
def test_bad_step_or_rank(rec, step, rank, match):
    with pytest.raises(ValueError, match=match):
        rec.record(step, rank, u=torch.randn(25), layout=LAYOUT)


def test_recording_after_close_is_refused(tmp_path):
    r = Recorder(tmp_path)
    r.close()
    r.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        r.record(0, 0, u=torch.randn(25), layout=LAYOUT)


def test_attach_needs_a_module(rec):
    with pytest.raises(ValueError, match="nn.Module"):
        rec.attach(lambda x: x)


def test_nonfinite_u_is_recorded_not_raised(tmp_path):
    u = torch.randn(25)
    u[3] = float("nan")
    with Recorder(tmp_path, densities=[0.1], sparsifiers=["gaussiank"]) as r:
        r.record(0, 0, u=u, layout=LAYOUT)
    from topkscope.analysis.runs import load

    s = load(tmp_path).stats
    glob = s[(s.layer == "__global__")].iloc[0]
    assert glob.nonfinite == 1 and glob.isna()["mean"] and glob.isna()["gaussiank_ratio"]
    b = s[(s.layer == "b")].iloc[0]
    assert b.nonfinite == 0 and b["std"] > 0


def test_exact_topk_is_refused_as_an_extra_sparsifier(tmp_path):
    # its S_ratio column would be named topk_ratio and overwrite the exact reference
    with pytest.raises(ValueError, match="may not include 'topk'"):
        Recorder(tmp_path, sparsifiers=["gaussiank", "topk"])
