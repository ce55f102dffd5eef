"""topkscope.manifest.find_runs: runs selected by manifest content, never by folder name."""

from __future__ import annotations

import json

import pytest

from topkscope.manifest import condition_of, find_runs


def _run(root, experiment, folder, **manifest):
    path = root / experiment / folder
    path.mkdir(parents=True)
    (path / "manifest.json").write_text(json.dumps({"experiment": experiment, **manifest}))
    return path


@pytest.fixture
def tree(tmp_path):
    _run(tmp_path, "fnn3-mnist", "20261201-120000-topk", status="complete", profile="quick",
         sparsifier="topk", seed=0, density=0.001, density_schedule="none")
    _run(tmp_path, "fnn3-mnist", "quick-dgc-s1-abc", status="complete", profile="quick",
         sparsifier="dgc", seed=1, density=1e-3, density_schedule="paper")
    _run(tmp_path, "fnn3-mnist", "odd-name", status="interrupted", profile="quick",
         sparsifier="topk", seed=1, density=0.001, density_schedule="none")
    _run(tmp_path, "lstm-ptb", "x", status="failed", profile="full", sparsifier="topk", seed=0)
    return tmp_path


def test_default_selects_complete_runs_whatever_the_folder_name(tree):
    found = find_runs(tree)
    assert [r.path.name for r in found] == ["20261201-120000-topk", "quick-dgc-s1-abc"]
    assert all(r.manifest["status"] == "complete" for r in found)


def test_fields_values_and_tuples(tree):
    assert [r.manifest["sparsifier"] for r in find_runs(tree, sparsifier="dgc")] == ["dgc"]
    assert len(find_runs(tree, density=0.001)) == 2          # 1e-3 and 0.001 are one number
    assert len(find_runs(tree, status=("interrupted", "failed"))) == 2
    assert len(find_runs(tree, status=None)) == 4
    assert find_runs(tree, experiment="lstm-ptb") == []       # complete only by default
    assert [r.manifest["seed"] for r in find_runs(tree, seed=1, status=None)] == [1, 1]


def test_condition_is_matched_on_the_manifest(tree):
    found = find_runs(tree, condition="warmup=paper")
    assert [r.manifest["sparsifier"] for r in found] == ["dgc"]
    assert condition_of({"density_schedule": "none", "k_rule": "floor",
                         "deviations": ["empty_fallback=topk"]}) == \
        "warmup=none; k_rule=floor; empty_fallback=topk"


def test_display_names_and_a_bare_warm_up_select_the_same_runs(tree):
    _run(tree, "fnn3b", "g", status="complete", model="fnn3", sparsifier="gaussiank-2019",
         density_schedule="paper")
    assert [r.path.name for r in find_runs(tree, model="FNN-3")] == ["g"]
    assert [r.path.name for r in find_runs(tree, sparsifier="Top-k")] == \
        [r.path.name for r in find_runs(tree, sparsifier="topk")] == ["20261201-120000-topk"]
    assert [r.path.name for r in find_runs(tree, sparsifier="gaussian-k (2019)")] == ["g"]
    assert [r.path.name for r in find_runs(tree, sparsifier=("DGC", "Gaussian-k (2019)"))] \
        == ["quick-dgc-s1-abc", "g"]
    assert [r.path.name for r in find_runs(tree, condition="paper")] == \
        [r.path.name for r in find_runs(tree, condition="warmup=paper")] == \
        ["quick-dgc-s1-abc", "g"]
    assert find_runs(tree, sparsifier="Gaussian-k") == []  # another method than Gaussian-k 2019


def test_roots_may_be_runs_experiments_or_missing(tree):
    one = tree / "fnn3-mnist" / "odd-name"
    assert [r.path for r in find_runs(one, status=None)] == [one]
    assert len(find_runs(tree / "fnn3-mnist")) == 2
    assert find_runs(tree / "nowhere") == []
    assert len(find_runs([tree, tree / "fnn3-mnist"])) == 2   # no run found twice


def test_an_unreadable_manifest_is_skipped_with_a_warning(tree):
    bad = tree / "fnn3-mnist" / "broken"
    bad.mkdir()
    (bad / "manifest.json").write_text("{not json")
    with pytest.warns(UserWarning, match="broken"):
        found = find_runs(tree)
    assert len(found) == 2


def test_an_unreadable_folder_is_one_line_naming_it(tmp_path, monkeypatch):
    """A folder the user may not list (simulated: these tests may run as root, who may list
    any) is named with what was expected, not a raw errno."""
    import pytest

    from topkscope import manifest

    locked = tmp_path / "locked"
    locked.mkdir()

    def refuse(root):
        raise PermissionError(13, "Permission denied", str(root))

    monkeypatch.setattr(manifest, "_run_folders", refuse)
    with pytest.raises(ValueError) as err:
        manifest.runs_at([locked])
    assert str(err.value) == (f"cannot read {str(locked)!r}: permission denied (expected a run "
                              "folder, an experiment folder or a results root)")
