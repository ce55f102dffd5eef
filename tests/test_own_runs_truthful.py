"""A user's own run describes itself truthfully: each parameter group's optimizer settings in
the manifest and the report, a Recorder run that names no model or sparsifier tabulated (by
the size of the u it saw, the sparsifier "unnamed"), `scale --from-run` at the run's density
with a break-even that says in words when no selection time can win, `figures --only NAME`
from any folder drawing that experiment alone, and bad output paths named for what they are in
one line."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pandas as pd
import pytest
import torch
from torch import nn

from tests._hooks_loop import layout_of, own_step, tiny_model
from tests._process_group import one_process_group
from topkscope.cli import main as cli
from topkscope.feedback import ErrorFeedback
from topkscope.hooks import Recorder
from topkscope.sparsify import get_sparsifier


# ------------------------------------------------------------------ optimizer groups
def test_two_parameter_groups_are_described_per_group_in_the_manifest_and_the_report():
    from topkscope.manifest import describe_optimizer
    from topkscope.publish.report import run_rows

    model = tiny_model(0)
    head = list(model[-1].parameters())
    body = [p for p in model.parameters() if all(p is not h for h in head)]
    opt = torch.optim.SGD([{"params": body, "lr": 0.1, "weight_decay": 1e-4},
                           {"params": head, "lr": 0.01}], lr=0.05, momentum=0.9)
    described = describe_optimizer(opt)
    assert "lr" not in described and "weight_decay" not in described  # true of neither group
    assert [(g["lr"], g["weight_decay"]) for g in described["param_groups"]] == \
        [(0.1, 1e-4), (0.01, 0)]

    class Found:
        path = Path("results/my-exp/run1")
        manifest = {"model": None, "sparsifier": None, "optimizer": described}

    (row,) = run_rows([Found()]).to_dict("records")
    assert "lr=0.05" not in row["optimizer"]
    assert "group 1: lr=0.1, weight_decay=0.0001" in row["optimizer"]
    assert "group 2: lr=0.01, weight_decay=0" in row["optimizer"]
    assert row["optimizer"].startswith("sgd (") and "momentum=0.9" in row["optimizer"]
    assert row["model"] == "unnamed" and row["sparsifier"] == "unnamed"


# ------------------------------------------------------------------ an unnamed Recorder run
def recorder_run(run: Path, steps: int = 40, **fields) -> None:
    """The recording.md loop on the tiny model, with snapshots; names what ran only when
    fields are given."""
    model = tiny_model(0)
    layout = layout_of(model)
    ef, topk = ErrorFeedback(), get_sparsifier("topk")
    with Recorder(run, schedule=1, snapshot_schedule=list(range(0, steps, 4)),
                  densities=[0.01, 0.05], run_fields=fields or None) as rec:
        for step in range(steps):
            g, u, e, idx = own_step(model, ef, topk, step)
            rec.record(step, 0, u=u, e=e, g=g, layout=layout, selected=idx)


def test_a_recorder_run_that_names_nothing_is_tabulated_by_what_it_saw(tmp_path, capsys):
    from topkscope.analysis.runs import load
    from topkscope.claims import build as claims_table

    run = tmp_path / "results" / "my-exp" / "run1"
    recorder_run(run)
    out = tmp_path / "claims.csv"
    assert cli(["claims", str(run), "--out", str(out), "--no-progress"]) == 0
    table = pd.read_csv(out)
    size = sum(n for _, _, n in layout_of(tiny_model(0)))  # the u it recorded, no attach()
    assert set(table["model"]) == {f"a model of {size:,} parameters"}
    assert "unnamed" in set(table["sparsifier"])
    verdicts = dict(zip(table["claim"], table["verdict"]))
    assert verdicts["below_classic"] == "holds"  # from its 40 recorded steps
    assert not table["evidence"].astype(str).str.contains("no recorded u").any()
    # the report tabulates the same rows (it was: every claim 'no recorded u')
    shown = claims_table([load(run)], roots=[run])
    assert list(shown["claim"]) == list(table["claim"])
    assert list(shown["verdict"].astype(str)) == list(table["verdict"].astype(str))


def test_a_recorder_run_names_what_ran_with_run_fields(tmp_path):
    run = tmp_path / "run1"
    recorder_run(run, steps=4, model="tiny", sparsifier="topk", density=0.05)
    manifest = json.loads((run / "manifest.json").read_text())
    assert (manifest["model"], manifest["sparsifier"], manifest["density"]) == \
        ("tiny", "topk", 0.05)


# ------------------------------------------------------------------ scale --from-run
def hook_run(run: Path, density: float = 0.01, steps: int = 12,
             sparsifiers: tuple[str, ...] = ()) -> None:
    """A DDP-hook run of the tiny model in one gloo process (train.parquet with compute), the
    recorder counting `sparsifiers` on u."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    from topkscope.comm import TopKHookState, topk_hook

    with one_process_group():
        model = tiny_model(0)
        ddp = DDP(model)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with Recorder(run, schedule={"every": 4}, densities=[density],
                      sparsifiers=list(sparsifiers)) as rec, \
                TopKHookState(model, density=density, recorder=rec, optimizer=opt,
                              run_fields={"model": "tiny", "dataset": "random"}) as state:
            ddp.register_comm_hook(state, topk_hook)
            for step in range(steps):
                gen = torch.Generator().manual_seed(step)
                x, y = torch.randn(16, 12, generator=gen), torch.randint(0, 3, (16,),
                                                                         generator=gen)
                loss = nn.functional.cross_entropy(ddp(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                state.note(loss=loss.item(), lr=0.1)


def test_scale_from_a_run_predicts_at_its_density_and_says_when_no_selection_can_win(
        tmp_path, capsys):
    run = tmp_path / "results" / "my-exp" / "run1"
    hook_run(run, density=0.01)
    # a compute time long enough that dense overlapping the backward pass hides its whole
    # exchange: no selection time can make Top-k faster than it
    assert cli(["scale", "--from-run", str(run), "--network", "10gbe", "--workers", "16",
                "--compute-s", "5", "--results", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out.replace("\n    ", " ")  # a wrapped line of prose, joined
    assert "density 0.01," in out and "density 0.001" not in out
    lines = out.splitlines()
    table = lines[lines.index(next(line for line in lines if "break-even ms" in line)) + 1:]
    assert not [line for line in table if line.split() and line.split()[-1].startswith("-")]
    never = [line for line in lines if "no selection time can beat" in line]
    assert never and all("compute dominates" in line for line in never)
    assert cli(["scale", "--from-run", str(run), "--network", "10gbe", "--workers", "16",
                "--density", "0.1", "--compute-s", "5"]) == 0
    assert "density 0.1," in capsys.readouterr().out  # --density still wins when given


# ------------------------------------------------------------------ figures --only from anywhere
@pytest.mark.train
def test_figures_only_draws_a_users_experiment_from_any_folder(tmp_path, monkeypatch, capsys):
    root = tmp_path / "results"
    # an approximate selector's counts recorded: its P = 16 prediction is a claim
    hook_run(root / "my-exp" / "run1", steps=40, sparsifiers=("gaussiank",))
    elsewhere = tmp_path / "elsewhere"  # no experiments/ here
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert cli(["figures", "--no-run", "--only", "my-exp", "--results", str(root),
                "--no-notebooks", "--no-tables", "--no-bench"]) == 0
    claims = pd.read_csv(root / "claims.csv")
    assert set(claims["model"]) == {"tiny"}  # no row of a paper model the user never ran
    predicted = claims[claims["section"] == "prediction"]
    assert len(predicted) and set(predicted["model"]) == {"tiny"}
    index = (root / "figures" / "index.md").read_text()
    assert "my-exp" in index


# ------------------------------------------------------------------ bad output paths
def test_a_recorder_given_a_file_says_it_is_a_file(tmp_path):
    path = tmp_path / "results.txt"
    path.write_text("not a folder")
    with pytest.raises(OSError, match=r"results\.txt' is a file, not a folder") as err:
        Recorder(path / "run1", schedule=1)
    assert "\n" not in str(err.value) and "Not a directory" not in str(err.value)


def test_a_read_only_folder_is_named_read_only(tmp_path, monkeypatch):
    import tempfile

    from topkscope.io import check_writable

    def refused(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    with pytest.raises(OSError, match=r"is read-only \(Permission denied\); give a folder you "
                                      "can write to"):
        check_writable(tmp_path / "out")


def test_topkscope_run_into_a_read_only_results_folder_is_one_line(tmp_path, monkeypatch,
                                                                   capsys):
    root = tmp_path / "ro"
    root.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, *a, **k: False if Path(p) == root
                        else real(p, mode, *a, **k))
    code = cli(["run", "experiments/fnn3-mnist.yaml", "--results", str(root / "results"),
                "--steps", "2", "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "is read-only (it would be created inside" in err[0] and "Errno" not in err[0]
    assert list(root.iterdir()) == []
