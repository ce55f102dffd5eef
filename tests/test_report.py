"""`topkscope report`: one self-contained HTML page for a user's DDP-hook run and for a
profile's results root, loaded in a real headless Chromium (no console error, no request
leaving the page, every image decoded, a screenshot that is not blank); bad input is one line
and writes nothing."""

from __future__ import annotations

import html
import io
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from tests._browser import CHROMIUM, render
from tests.test_hand_runs import hand_run, results  # noqa: F401  (results: a fixture)
from topkscope.analysis.runs import load
from topkscope.claims import build as claims_table
from topkscope.cli import main as cli
from topkscope.publish.findings import verdict_sentence

REPO = Path(__file__).resolve().parents[1]
needs_browser = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")


def self_contained(page: str) -> None:
    """No script, no stylesheet or image fetched: every image is PNG data in the page."""
    assert "<script" not in page and "<link" not in page and "url(" not in page
    sources = re.findall(r'src="([^"]*)"', page)
    assert sources and all(s.startswith("data:image/png;base64,") for s in sources)
    assert not re.search(r'(href|src)="(https?:)?//', page)


def check_in_browser(path: Path, page: str) -> dict:
    """The page in Chromium: no console error or exception, no request leaving it, every
    image decoded at a size, a screenshot that is not blank; returns the numbers."""
    shown = render(path)
    assert [m for m in shown.console if m["level"] == "error"] == [] and shown.exceptions == []
    assert shown.requests == []
    assert len(shown.images) == page.count("<img ")
    assert all(i["decoded"] and i["width"] > 0 and i["height"] > 0 for i in shown.images)
    shot = Image.open(io.BytesIO(shown.screenshot)).convert("L")
    lo, hi = shot.getextrema()
    inked = sum(shot.histogram()[:200]) / (shot.width * shot.height)
    assert hi - lo > 100 and inked > 0.02, (lo, hi, inked)  # text and figures, not a blank
    return {"load_s": shown.load_s, "bytes": path.stat().st_size, "screenshot": shown.screenshot}


@pytest.mark.train
def test_the_report_of_a_users_hook_run(results, tmp_path, capsys):  # noqa: F811
    run_dir = results / "my-exp" / "run1"
    out = tmp_path / "hook.html"
    assert cli(["report", str(run_dir), "--out", str(out), "--no-progress"]) == 0
    assert capsys.readouterr().out.startswith("report: 1 run(s), ")
    page = out.read_text()
    self_contained(page)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert f"Sequential (d = {manifest['num_parameters']:,})" in page
    assert f"{manifest['world_size']} (ddp-hook)" in page and "sgd (lr=0.1, by=run_fields)" in page
    table = claims_table([load(run_dir)], roots=[run_dir])
    claims = page.split('id="claims"')[1].split('id="figures"')[0]
    assert claims.count("<tr><td>") == len(table)
    # one builder: `topkscope claims` on the same run gives the same table
    assert cli(["claims", str(run_dir), "--out", str(tmp_path / "c.csv"), "--no-progress"]) == 0
    by_command = pd.read_csv(tmp_path / "c.csv")
    assert by_command[["claim", "sparsifier", "condition", "verdict", "reason"]].fillna("")\
        .equals(pd.read_csv(io.StringIO(table.to_csv(index=False)))[
            ["claim", "sparsifier", "condition", "verdict", "reason"]].fillna(""))
    # the paper's questions first, then every question whose rows the run holds (the atlas's
    # too), each once and answered with its word
    from topkscope.claims.answers import WORDS, run_answers

    answers = page.split('id="answers"')[1].split('id="what-ran"')[0]
    told = run_answers(table, None)
    keys = [a.question.key for a in told]
    assert keys[:2] == ["gaussian_like", "below_paper"] and len(set(keys)) == len(keys)
    assert {"gaussiank_speedup_p16", "delta_curve_gaussian"} <= set(keys)
    assert all(a.word in WORDS for a in told)
    for a in told:
        assert html.escape(a.question.text) in answers and html.escape(a.text) in answers
    assert "Would sparsification pay on a cluster at the run" in answers
    for row in table.itertuples(index=False):  # each verdict with its cause, in words
        assert html.escape(verdict_sentence(row)) in claims
    figures = page.split('id="figures"')[1].split('id="scaling"')[0]
    assert figures.count("<figure ") == figures.count("<img ") > 0
    # the hook measured the step's compute time: the page predicts the user's model from it
    scaling = page.split('id="scaling"')[1]
    assert "no compute time recorded" not in page and "<td>Sequential</td>" in scaling
    assert f"measured in {run_dir} (median time_compute of" in scaling
    for table_file in ("train.parquet", "stats"):
        assert f"run1/{table_file}" in page
    if CHROMIUM is not None:
        check_in_browser(out, page)


@pytest.mark.train
@pytest.mark.slow
def test_the_report_of_a_profiles_results_root(results, tmp_path, capsys):  # noqa: F811
    """A results root as `make reproduce-figures` leaves it (figures/index.md, claims.csv,
    report.html): its claims and figures as written, the predicted scaling of its model."""
    root = tmp_path / "results"
    shutil.copytree(results / "fnn3-mnist", root / "fnn3-mnist")
    assert cli(["figures", "--no-run", "--results", str(root), "--only", "fnn3-mnist",
                "--experiments", str(REPO / "experiments"), "--no-notebooks",
                "--no-tables"]) == 0
    capsys.readouterr()
    out = tmp_path / "report.html"
    assert cli(["report", str(root), "--out", str(out), "--no-progress"]) == 0
    page = out.read_text()
    self_contained(page)
    assert (root / "report.html").read_text() == page  # the figures driver wrote the same
    claims = pd.read_csv(root / "claims.csv")
    shown = page.split('id="claims"')[1].split('id="figures"')[0]
    assert shown.count("<tr><td>") == len(claims) and "as make reproduce-figures wrote it" in shown
    index = (root / "figures" / "index.md").read_text()
    drawn = [p.stem for p in (root / "figures").glob("*.png")]
    assert page.count("<figure ") == len(drawn)
    for name in drawn:
        assert f"### {name}" in index and f'id="{name}"' in page
    assert str(hand_run(root).name) in page
    if CHROMIUM is not None:
        check_in_browser(out, page)


def test_report_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "report.html"
    (tmp_path / "empty").mkdir()
    (tmp_path / "a-file.txt").write_text("not a run")
    other = tmp_path / "other-tool" / "run7"
    other.mkdir(parents=True)
    (other / "manifest.json").write_text(json.dumps({"name": "run7", "status": "finished"}))
    cases = [
        ([str(tmp_path / "nowhere")], "does not exist (expected a run folder"),
        ([str(tmp_path / "empty")], "is not a result folder (no manifest.json)"),
        ([str(tmp_path / "a-file.txt")], "is a file, not a folder"),
        ([str(tmp_path / "other-tool")], "was not written by topkscope"),
        ([str(tmp_path), "--out", str(tmp_path)], "is a folder; give a file name"),
        ([str(tmp_path), "--out", str(tmp_path / "r.txt")], "is not an .html file"),
        ([str(tmp_path), "--out", str(tmp_path / "a-file.txt" / "r.html")],
         "does not exist (or is a file)"),
    ]
    for argv, message in cases:
        given = argv if "--out" in argv else [*argv, "--out", str(out)]
        assert cli(["report", *given]) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("topkscope report: error: "), err
        assert message in err, (message, err)
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == [
        "a-file.txt", "empty", "other-tool"]


@needs_browser
def test_the_browser_check_catches_a_broken_page(tmp_path):
    """The checks can fail: a script error, a request leaving the page and an image that
    does not decode are each seen."""
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><body><p>text</p>'
                    '<img src="data:image/png;base64,bm90IGEgcG5n">'
                    '<img src="http://127.0.0.1:9/x.png"><script>undefinedCall()</script>'
                    '</body></html>')
    shown = render(page)
    assert shown.exceptions or any(m["level"] == "error" for m in shown.console)
    assert shown.requests == ["http://127.0.0.1:9/x.png"]
    assert [i["decoded"] for i in shown.images] == [False, False]


@needs_browser
def test_a_refused_devtools_connection_is_one_line():
    """A connection from a foreign origin is refused by Chromium 111 and later (150 refused its
    own DevTools origin too, without --remote-allow-origins); the
    helper says so in one line naming the browser's version, not in a websocket traceback
    (and connects without the header, as `render` does)."""
    from tests._browser import _connect, _devtools_json, chromium

    with chromium() as port:
        version = _devtools_json(port, "version")["Browser"]           # e.g. "Chrome/150.0..."
        if int(version.split("/")[1].split(".")[0]) < 111:
            pytest.skip(f"{version} does not check the origin")
        with pytest.raises(RuntimeError) as refused:
            _connect(port, 30.0, origin="http://example.com")
        _connect(port, 30.0).close()
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{version} refused the DevTools")
    assert "403" in message, message


@pytest.mark.parametrize("script, said", [
    ("import time; time.sleep(60)", "did not announce its DevTools endpoint in time"),
    ("import sys; sys.stderr.write('no endpoint here\\n'); sys.exit(3)", "exit status 3"),
])
def test_a_browser_that_never_announces_its_port_fails_at_the_deadline(script, said):
    """A silent browser (the line read blocked forever before) or one that ends without an
    endpoint is a one-line error at the deadline, not a stalled suite."""
    import subprocess
    import sys
    import time

    from tests._browser import _devtools_port

    proc = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE)
    start = time.monotonic()
    try:
        with pytest.raises(RuntimeError, match=said):
            _devtools_port(proc, start + 2.0)
        assert time.monotonic() - start < 20
    finally:
        proc.kill()
        proc.wait()
