"""The driver behind `topkscope figures`: every figure, the index, the claims table, skipping
complete runs, resuming, and the experiment configs of both profiles."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests._figures_results import JOBS, shared_small_results
from topkscope import claims as claims_rules
from topkscope.analysis.runs import load
from topkscope.claims import verdicts as claims_verdicts
from topkscope.claims.row import SCHEMA_VERSION
from topkscope.claims.speedup import SPEEDUP_CLAIMS
from topkscope.cli import main as cli_main
from topkscope.reproduce import plan
from topkscope.reproduce.driver import SCALING_EXPERIMENT, reproduce
from topkscope.reproduce.runner import RunSpec, command, ensure_run, status_of
from topkscope.train.config import load_config

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def small(tmp_path_factory, data_root):
    return shared_small_results(tmp_path_factory, data_root)


def expected_figures() -> list[str]:
    names = []
    for job in JOBS:
        if isinstance(job, plan.BenchmarkJob):
            names += [f"{job.experiment}-time_vs_d-rho{r:g}" for r in (0.001, 0.01)]
        else:
            names += [f"{job.experiment}-{f}" for f in job.figures]
    return names


def test_every_figure_drawn_with_png_pdf_and_caption(small):
    figures = small.root / "figures"
    index = (figures / "index.md").read_text()
    assert "not drawn" not in index
    for name in expected_figures():
        png, pdf = figures / f"{name}.png", figures / f"{name}.pdf"
        assert png.read_bytes()[:4] == b"\x89PNG" and pdf.read_bytes()[:4] == b"%PDF"
        assert f"### {name}\n\n![{name}]({name}.png)" in index
        block = index.split(f"### {name}\n")[1].split("\n### ")[0]
        caption = [p for p in block.split("\n\n") if p.strip() and not p.strip().startswith("!")][0]
        assert len(caption) > 80, caption
    assert "FNN-3 on MNIST (first 2,560 samples) · 2 workers" in index
    for link in re.findall(r"\]\(([^)#]+)\)", index):
        assert (figures / link).exists(), link


def test_the_driver_writes_the_profiles_report_page(small):
    """make reproduce-figures writes <results>/report.html: every figure it drew, embedded,
    and every claims row."""
    page = (small.root / "report.html").read_text()
    drawn = sorted(p.stem for p in (small.root / "figures").glob("*.png"))
    assert sorted(re.findall(r'<figure id="([^"]+)">', page)) == drawn
    assert page.count('src="data:image/png;base64,') == len(drawn) and "<script" not in page
    claims = pd.read_csv(small.root / "claims.csv")
    shown = page.split('id="claims"')[1].split('id="figures"')[0]
    assert shown.count("<tr><td>") == len(claims)


def test_timing_table_covers_every_phase(small):
    timing = pd.read_csv(small.root / "figures" / "timing.csv")
    assert set(timing["phase"]) == {"run", "analyze", "draw", "claims"}
    runs = timing[timing["phase"] == "run"]
    assert len(runs) == 1 + 4 + 18 + 1  # tiny-fnn3, four + 18 convergence runs, the benchmark
    assert (timing["seconds"] >= 0).all()


def test_claims_verdicts_follow_from_their_numbers(small):
    table = pd.read_csv(small.root / "claims.csv")
    md = (small.root / "claims.md").read_text()
    assert {"gaussian_like", "below_classic", "below_paper", "convexity_condition",
            "gaussiank_count", "gaussiank_accuracy"} <= set(table["claim"])
    for row in table.itertuples(index=False):
        assert row.verdict in claims_rules.VERDICTS
        assert row.rule and str(row.evidence)
        if row.claim.endswith(("_accuracy", "_traffic")) or row.section == "prediction":
            continue  # seeds' differences and predictions: their own rules
        if row.claim in ("fitted_value", "contraction_explains_convergence"):
            # not the fraction rule: the interval of a difference / of a rank correlation
            if row.verdict == "holds":
                assert row.ci_low > 0, row
            elif row.verdict == "fails":
                assert row.claim != "fitted_value" or row.ci_high < 0, row
            continue
        n_pass = round(row.fraction * row.n_units) if row.n_units else 0
        if row.section == "distribution" and row.n_units:
            assert row.fraction_low <= row.fraction <= row.fraction_high, row
        if row.section == "check":  # true by construction: every unit meets it, or it fails
            assert row.verdict == claims_verdicts.check_verdict(n_pass, row.n_units)[0], row
        else:
            assert row.verdict == claims_verdicts.fraction_verdict(
                n_pass, row.n_units, row.fraction_low, row.fraction_high), row
        unit = "steps" if row.claim.endswith("_count_in_training") else "units"
        if row.n_units:  # else the evidence says why nothing was measured
            assert f"{n_pass} of {row.n_units} {unit}" in row.evidence
    # claim 5 from the runs themselves: final test accuracy of Top-k vs Gaussian-k
    finals = {}
    for path in (small.root / "tiny-convergence").iterdir():
        run = load(path)
        ev = run.eval.sort_values("step")
        finals[run.manifest["sparsifier"]] = float(ev["metric"].iloc[-1])
    acc = table[(table["claim"] == "gaussiank_accuracy") & (table["sparsifier"] == "gaussiank")]
    assert len(acc) == 1
    diff = 100 * (finals["gaussiank"] - finals["topk"])  # one seed: a difference, no interval
    assert acc["verdict"].iloc[0] == "insufficient-data" and acc["n_seeds"].iloc[0] == 1
    assert f"paired difference {diff:+.3g} points" in acc["evidence"].iloc[0]
    assert f"Top-k {finals['topk']:.4g}" in acc["evidence"].iloc[0]
    assert md.count("\n| FNN-3 | MNIST |") == (table["model"] == "fnn3").sum()


def test_below_bound_fractions_match_the_recorded_stats(small):
    run = load(next(p for p in (small.root / "tiny-fnn3").iterdir()))
    u = run.stats[(run.stats["layer"] == "__global__") & (run.stats["kind"] == "u")]
    table = pd.read_csv(small.root / "claims.csv")
    row = table[table["claim"] == "below_paper"].iloc[0]
    # a row per recorder density; the convergence runs (no recorder) add no units: the
    # fraction is this run's alone
    u = u[np.isclose(u["density"], row["recorder_density"])]
    frac = float((u["topk_ratio"] <= (1 - u["k"] / u["numel"]) ** 2).mean())
    assert row["n_units"] == len(u)
    assert math.isclose(row["fraction"], frac)


def copy_runs(small, tmp_path, experiment="tiny-convergence") -> Path:
    root = tmp_path / "results"
    shutil.copytree(small.root / experiment, root / experiment)
    return root


def test_second_invocation_skips_complete_runs(small, tmp_path):
    root = copy_runs(small, tmp_path)
    before = {p.name: (p / "manifest.json").read_text() for p in (root / "tiny-convergence").iterdir()}
    outcome = reproduce(small.options(results_root=root, only=["tiny-convergence"]),
                        log=lambda m: None)
    assert outcome.failures == []
    runs = outcome.timings[outcome.timings["phase"] == "run"]
    assert list(runs["action"]) == ["skipped"] * 4
    after = {p.name: (p / "manifest.json").read_text() for p in (root / "tiny-convergence").iterdir()}
    assert after == before
    # besides the experiment: the predicted scaling and the model on the GRACE release
    drawn = [e.name for e in outcome.entries
             if e.experiment not in (SCALING_EXPERIMENT, "published")]
    assert drawn == ["tiny-convergence-convergence"]


def test_interrupted_run_is_resumed_and_checkpointless_one_set_aside(small, tmp_path):
    root = copy_runs(small, tmp_path)
    specs = {s: RunSpec("tiny-convergence", small.experiments / "tiny-convergence.yaml", "quick", s,
                        root, small.data) for s in ("topk", "dense")}
    # topk: pretend it was killed after its step-20 checkpoint
    topk = specs["topk"].run_dir()
    final = json.loads((topk / "manifest.json").read_text())
    manifest = dict(final, status="running", end_time=None)
    (topk / "manifest.json").write_text(json.dumps(manifest))
    last = sorted((topk / "checkpoints").iterdir())[-1]
    shutil.rmtree(last)
    # dense: killed before any checkpoint
    dense = specs["dense"].run_dir()
    (dense / "manifest.json").write_text(json.dumps(dict(manifest, sparsifier="dense")))
    shutil.rmtree(dense / "checkpoints")
    assert ensure_run(specs["topk"], log=lambda m: None, in_process=cli_main) == (topk, "resumed")
    assert ensure_run(specs["dense"], log=lambda m: None, in_process=cli_main) == (dense, "ran")
    assert status_of(topk) == status_of(dense) == "complete"
    assert (dense.parent / f"{dense.name}.attempt1").is_dir()  # moved aside, never deleted
    # resuming reproduces the uninterrupted run's evaluation exactly
    ev_resumed = load(topk).eval.sort_values("step").reset_index(drop=True)
    ev_original = load(small.root / "tiny-convergence" / topk.name).eval.sort_values("step")
    pd.testing.assert_frame_equal(ev_resumed, ev_original.reset_index(drop=True))


def test_run_id_depends_on_what_is_computed(small, tmp_path):
    src = (small.experiments / "tiny-convergence.yaml").read_text()
    spec = RunSpec("tiny-convergence", small.experiments / "tiny-convergence.yaml", "quick",
                   "topk", tmp_path)
    other = tmp_path / "tiny-convergence.yaml"
    other.write_text(src.replace("threads: 1", "threads: 2"))
    same = RunSpec("tiny-convergence", other, "quick", "topk", tmp_path)
    assert spec.run_id() == same.run_id()  # threads do not change the numbers
    other.write_text(src.replace("lr: 0.05", "lr: 0.06"))
    assert spec.run_id() != RunSpec("tiny-convergence", other, "quick", "topk", tmp_path).run_id()
    assert spec.run_id().startswith("quick-topk-")


def test_run_command_is_a_valid_topkscope_run(small, tmp_path):
    from topkscope.cli import build_parser

    spec = RunSpec("tiny-convergence", small.experiments / "tiny-convergence.yaml", "quick",
                   "gaussiank", tmp_path, small.data)
    argv = command(spec, resume=False)
    args = build_parser().parse_args(argv[3:])
    assert (args.command, args.profile, args.sparsifier, args.run_id) == (
        "run", "quick", "gaussiank", spec.run_id())
    assert Path(args.results) == tmp_path and Path(args.data) == small.data


def test_bad_profile_and_unknown_experiment(small):
    with pytest.raises(ValueError, match="profile 'medium' is not one of: quick, standard, full"):
        reproduce(small.options(profile="medium"), log=lambda m: None)
    with pytest.raises(ValueError, match=r"unknown experiment\(s\) \['nope'\]"):
        reproduce(small.options(only=["nope"]), log=lambda m: None)


def test_predictions_name_their_training_condition_and_time_to_accuracy(small):
    """The P = 16 claims of gaussiank-2019 name the condition of their counts; the seeded runs
    give time_to_accuracy.csv, its figure and a claim per condition and network."""
    from topkscope.perf import time_to_accuracy as tta

    claims = pd.read_csv(small.root / "claims.csv")
    speedups = claims[claims["claim"].isin(SPEEDUP_CLAIMS)]
    assert set(speedups["sparsifier"]) == {"gaussiank", "gaussiank-2019"}
    g19 = speedups[speedups["sparsifier"] == "gaussiank-2019"]
    # FNN-3 has runs that measured its counts (recorded on Top-k's u at rho = 0.001); the
    # models without runs have nominal counts and no training condition
    assert g19[g19["model"] == "fnn3"]["condition"].str.contains("training condition warmup=").all()
    assert not g19[g19["model"] == "vgg16"]["condition"].str.contains("training condition").any()
    table = pd.read_csv(small.root / tta.CSV_NAME)
    seeded = table[table["experiment"] == "tiny-seeds"]
    assert set(seeded["condition"]) == {"warmup=none", "warmup=paper"}
    assert set(seeded["method"]) == {"topk", "dense", "gaussiank-2019"}
    assert set(seeded["seed"]) == {0, 1, 2} and set(seeded["workers"]) == {16}
    timed = claims[claims["claim"] == "gaussiank_time_to_accuracy"]
    tiny = timed[timed["evidence"].str.startswith("tiny-seeds")]
    assert len(tiny) == 2 * 2  # two conditions x two networks
    assert set(tiny["verdict"]) <= {"fails", "inconclusive"}  # CPU selection: not counted
    for row in tiny.itertuples(index=False):
        condition, rho = row.training_condition.split("; rho=")
        got = seeded[(seeded["method"] == "gaussiank-2019") & (seeded["network"] == row.network)
                     & (seeded["condition"] == condition)]
        assert len(got) == 3 and float(rho) == got["density"].iloc[0]
        assert row.n_failed_seeds == (got["status"] == "failed").sum()
        never = int((~got["reached"]).sum())
        assert (f"never reaches the target on {never} of 3 seeds" in row.cause) == (
            never > 0 and row.n_failed_seeds < 3)
        assert row.margin == 1.0 and row.metric == "accuracy"  # the driver's default margin
    index = (small.root / "figures" / "index.md").read_text()
    assert "### time-to-accuracy-p16" in index and "### scaling-breakeven-p16" in index


def test_figures_command_rejects_a_bad_profile(capsys):
    import argparse

    from topkscope.commands import figures

    parser = argparse.ArgumentParser()
    figures.add_arguments(parser)
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["--profile", "medium"])
    assert exc.value.code == 2
    assert "invalid choice: 'medium'" in capsys.readouterr().err


def test_gallery_small_pngs_and_readme(small, tmp_path):
    from PIL import Image

    from topkscope.publish import gallery

    written = gallery.publish(small.root, tmp_path, width=400)
    # besides the experiments': the predicted scaling, the atlas page over the runs, the
    # model on the GRACE release
    beside = {"scaling-breakdown-p16", "scaling-crossover", "scaling-efficiency",
              "scaling-breakeven-p16", "time-to-accuracy-p16", "atlas-delta_curve",
              "published-grace-model"}
    assert {p.stem for p in written} == set(expected_figures()) | beside
    for p in written:
        with Image.open(p) as img:
            assert img.width <= 400
    readme = (tmp_path / "README.md").read_text()
    assert "## Claims table" in readme and readme.count("![") == len(written)
    with pytest.raises(ValueError, match="no figures"):
        gallery.publish(tmp_path / "empty", tmp_path / "out")


# --- the experiment configs of the plan --------------------------------------------------------

PAPER = {  # the paper's settings (docs/figures.md, profiles): lr, batch per worker
    "fnn3": (0.01, 128), "resnet20": (0.1, 32), "vgg16": (0.1, 128), "lstm-ptb": (22.0, 20),
    "gpt-ptb": (1e-3, 4),  # not the paper's: nanoGPT's baby GPT, 64 sequences over 16 workers
}


@pytest.mark.parametrize("job", [j for j in plan.JOBS if isinstance(j, plan.TrainingJob)],
                         ids=lambda j: j.experiment)
def test_plan_configs_resolve_in_every_profile_they_run_in(job):
    path = job.config_path(REPO / "experiments")
    assert "full" in job.profiles
    resolved = {p: load_config(path, p)[0] for p in job.profiles}
    full = resolved["full"]
    assert {c.experiment for c in resolved.values()} == {job.experiment}
    if isinstance(job.design, plan.TrainingsDesign):
        # the outer-loop experiments: SparseLoCo's settings (the papers' beside each run's in
        # its manifest), on 16 workers in full
        # 32 of each 4,096: the SparseLoCo authors' public H = 15 configuration
        assert full.workers == 16 and full.density == 1 / 128 and full.optimizer == "adamw"
        assert full.outer["inner_steps"] == 15 and full.sparsifier == "chunk-topk"
        assert full.quantize["bits"] == 2 and full.outer["error_decay"] == 0.95
        return
    # full = the paper's settings; real CIFAR-10 only
    assert full.workers == 16 and full.density == 0.001 and full.selection == "global"
    assert (full.lr, full.batch_size) == PAPER[full.model]
    assert not full.allow_substitute and not full.lr_in_residual
    if full.model == "lstm-ptb":
        assert (full.bptt, full.grad_clip) == (35, 0.25)
    if full.model == "gpt-ptb":
        assert (full.optimizer, full.lr_schedule, full.bptt, full.steps) == (
            "adamw", "cosine", 256, 5000)
    if full.dataset == "cifar10":
        assert full.momentum == 0.9 and full.weight_decay == 1e-4 and full.lr_milestones
    # the CPU profiles (quick, standard) = sized for a 2-core CPU: one thread, few workers,
    # at most as many samples as 3 epochs of MNIST (the budgets: tests/test_plan.py)
    for profile in set(job.profiles) & set(plan.CPU_PROFILES):
        cpu = resolved[profile]
        assert cpu.workers <= 4 and cpu.threads == 1, profile
        assert cpu.steps is not None or cpu.dataset == "ptb" or (
            cpu.epochs * (cpu.train_subset or 60_000) <= 3 * 60_000), profile
        if full.dataset == "cifar10":
            assert cpu.allow_substitute  # the CPU profiles may substitute, and say so
        for sparsifier in job.sparsifiers:
            if sparsifier is not None:
                load_config(path, profile, {"sparsifier": sparsifier})
    # histograms are standardised with the stats row of their step: it must be recorded
    from topkscope.hooks.schedules import parse_schedule

    for cfg in resolved.values():
        rec = cfg.recorder or {}
        stats = parse_schedule(rec.get("schedule", 1))
        for key in ("hist_schedule", "snapshot_schedule"):
            when = parse_schedule(rec.get(key))
            assert not [t for t in range(20_000) if when(t) and not stats(t)], key


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_selection_speed_config_names_an_existing_benchmark(profile):
    from topkscope.reproduce.driver import load_benchmark_config

    (job,) = [j for j in plan.JOBS if isinstance(j, plan.BenchmarkJob)]
    cfg = load_benchmark_config(job.config_path(REPO / "experiments"), profile)
    argv = cfg.command("python", REPO / "benchmarks", Path("results"))
    assert Path(argv[1]).is_file() and argv[-2:] == ["--out", str(Path("results/bench/selection.csv"))]
    assert ("--sizes" in argv) == (profile == "quick")


def test_benchmark_config_rejects_unknown_keys(tmp_path):
    from topkscope.reproduce.driver import load_benchmark_config

    path = tmp_path / "b.yaml"
    path.write_text("experiment: b\nbenchmark: selection\noutput: s.csv\nsizes: 3\n")
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['sizes'\]"):
        load_benchmark_config(path, "quick")
    path.write_text("experiment: b\nbenchmark: selection\noutput: s.csv\nprofiles: {full: {}}\n")
    with pytest.raises(ValueError, match="profile 'quick' is not defined"):
        load_benchmark_config(path, "quick")


def test_missing_runs_rerun_in_parallel_child_processes_give_the_same_numbers(small, tmp_path):
    """The `make reproduce-figures` path: child `topkscope run` processes, two at a time."""
    root = copy_runs(small, tmp_path)
    originals = {}
    for path in list((root / "tiny-convergence").iterdir()):
        run = load(path)
        if run.manifest["sparsifier"] in ("dense", "gaussiank"):
            originals[run.manifest["sparsifier"]] = run.eval.sort_values("step")
            shutil.rmtree(path)
    outcome = reproduce(small.options(results_root=root, only=["tiny-convergence"],
                                      parallel=2), log=lambda m: None)
    assert outcome.failures == []
    actions = outcome.timings[outcome.timings["phase"] == "run"].set_index("experiment")["action"]
    assert sorted(actions) == ["ran", "ran", "skipped", "skipped"]
    for path in (root / "tiny-convergence").iterdir():
        run = load(path)
        if run.manifest["sparsifier"] in originals:
            ev = run.eval.sort_values("step")
            ref = originals[run.manifest["sparsifier"]]
            assert list(ev["step"]) == list(ref["step"])
            assert ev["metric"].tolist() == pytest.approx(ref["metric"].tolist(), rel=1e-6)


def test_progress_of_a_run_is_read_from_its_folder(small):
    from topkscope.reproduce.runner import steps_done

    run_dir = next(p for p in (small.root / "tiny-fnn3").iterdir())
    assert steps_done(run_dir) == (40, 40)
    assert steps_done(small.root / "no-such-run") == (0, None)


@pytest.mark.slow
def test_reproduce_executes_the_notebooks_and_writes_the_tables(small, tmp_path):
    """The make reproduce-figures path on a copy of the small result tree, running nothing:
    executed notebooks with inline figures and their HTML, CSV + LaTeX tables."""

    import nbformat

    root = tmp_path / "results"
    shutil.copytree(small.root, root)
    outcome = reproduce(small.options(results_root=root, run=False, notebooks=True,
                                      tables=True), log=lambda m: None)
    assert outcome.failures == []
    books = sorted(p.name for p in (root / "notebooks").glob("*.ipynb"))
    assert books == sorted([f"{nb}-tiny-fnn3.ipynb" for nb in
                            ("contraction", "distributions", "selectors")]
                           + ["convergence-tiny-convergence.ipynb", "convergence-tiny-seeds.ipynb",
                              "selection_speed-tiny-selection.ipynb"])
    for name in books:
        book = nbformat.read(root / "notebooks" / name, as_version=4)
        outputs = [o for c in book.cells if c.cell_type == "code" for o in c.outputs]
        assert any("image/png" in o.get("data", {}) for o in outputs), name
        assert not [o for o in outputs if o.output_type == "error"], name
        html = (root / "notebooks" / name.replace(".ipynb", ".html")).read_text()
        assert "<html" in html and "data:image/png;base64" in html
    tables = sorted(p.stem for p in (root / "tables").glob("*.csv"))
    assert {"claims", "claims-distribution", "claims-convergence", "contraction", "convergence",
            "normality", "selectors", "speed"} <= set(tables)
    tex = sorted((root / "tables").glob("*.tex"))
    assert sorted(p.stem for p in tex) == sorted(tables + ["claims-evidence", "claims-rules"])
    for name in books:  # the executed copies name their runs relative to the results root
        assert str(tmp_path) not in (root / "notebooks" / name).read_text(), name
    assert "profile quick" in (root / "tables" / "contraction.tex").read_text()
    from tests._latex import MAX_CLAIMS_COLUMNS, check_structure, compile_tables, have_pdflatex

    for path in tex:
        check_structure(path, MAX_CLAIMS_COLUMNS if path.stem == "claims" else None)
    if have_pdflatex():
        compile_tables(tex, tmp_path / "latex")


def test_claims_over_seeds_give_paired_intervals(small):
    """tiny-seeds: gaussiank-2019 vs topk per condition over 3 seeds, recomputed from the runs."""
    from scipy import stats

    table = pd.read_csv(small.root / "claims.csv")
    finals: dict[tuple, dict] = {}
    for path in (small.root / "tiny-seeds").iterdir():
        run = load(path)
        m = run.manifest
        if m["sparsifier"] == "dense" or m["density"] != 0.01:
            continue
        ev = run.eval[run.eval["split"] == "test"].sort_values("step")
        finals.setdefault((m["density_schedule"], m["sparsifier"]), {})[m["seed"]] = (
            float(ev["metric"].iloc[-1]), float(run.train["selected"].sum()))
    for warmup in ("paper", "none"):
        topk, mine = finals[(warmup, "topk")], finals[(warmup, "gaussiank-2019")]
        assert sorted(topk) == sorted(mine) == [0, 1, 2]
        diffs = np.array([100 * (mine[s][0] - topk[s][0]) for s in range(3)])
        half = stats.t.ppf(0.975, 2) * diffs.std(ddof=1) / np.sqrt(3)
        rows = table[(table["sparsifier"] == "gaussiank-2019")
                     & (table["condition"] == f"warmup={warmup}; rho=0.01")]
        acc = rows[rows["claim"] == "gaussiank_accuracy"].iloc[0]
        assert acc["n_seeds"] == 3
        assert acc["ci_low"] == pytest.approx(diffs.mean() - half)
        assert acc["ci_high"] == pytest.approx(diffs.mean() + half)
        assert acc["verdict"] == claims_verdicts.interval_verdict(acc["ci_low"], acc["ci_high"], 3,
                                                               -1.0)
        ratio = np.mean([mine[s][1] / topk[s][1] for s in range(3)])
        traffic = rows[rows["claim"] == "gaussiank_traffic"].iloc[0]
        assert traffic["traffic_ratio"] == pytest.approx(ratio)
        assert traffic["verdict"] in ("holds", "fails", "inconclusive")


def count_snapshot_analyses(monkeypatch) -> list[tuple[int, int]]:
    """Record (step, rank) of every analyze_snapshot call of the snapshot pipeline."""
    from topkscope.analysis import snapshots

    seen: list[tuple[int, int]] = []
    real = snapshots.analyze_snapshot

    def counting(u, step, rank, *args, **kwargs):
        seen.append((int(step), int(rank)))
        return real(u, step, rank, *args, **kwargs)

    monkeypatch.setattr(snapshots, "analyze_snapshot", counting)
    return seen


def test_figures_and_claims_analyse_each_snapshot_once(small, monkeypatch):
    from topkscope.analysis.snapshots import SEED, analyze_run

    run = load(next((small.root / "tiny-fnn3").iterdir()))
    seen = count_snapshot_analyses(monkeypatch)
    analysis = analyze_run(run)  # what the figures draw (rank 0)
    table = claims_rules.build([run])  # the claims pick snapshots of both ranks
    assert len(seen) == len(set(seen))  # once each
    assert {(s, 0) for s in analysis.ratios["step"]} <= set(seen)
    assert {r for _, r in seen} == {0, 1}  # the claims added rank 1, reusing rank 0
    assert set(analysis.ratios["seed"]) == {SEED}
    convexity = table[table["claim"] == "convexity_condition"]
    # a row per recorder density, a unit per snapshot in each
    assert sorted(convexity["recorder_density"]) == sorted(analysis.ratios["density"].unique())
    assert (convexity["n_units"] == len(seen)).all() and len(seen) == 6


@pytest.mark.slow
def test_one_invocation_analyses_each_snapshot_once(small, tmp_path, monkeypatch):
    root = copy_runs(small, tmp_path, "tiny-fnn3")
    seen = count_snapshot_analyses(monkeypatch)
    outcome = reproduce(small.options(results_root=root, only=["tiny-fnn3"]),
                        log=lambda m: None)
    assert outcome.failures == []
    assert seen and len(seen) == len(set(seen))


def test_a_failed_seed_is_counted_never_dropped(small, tmp_path, capsys):
    """A convergence run that diverged: the driver still draws the experiment from the other
    runs, reports the failure, and the claims (driver and `topkscope claims`) count the seed
    with its last evaluated accuracy; the margin set on the command line reaches the rows."""
    root = copy_runs(small, tmp_path, "tiny-seeds")
    runs = {(m["sparsifier"], m["seed"], m["density_schedule"], m["density"]): p
            for p in (root / "tiny-seeds").iterdir()
            for m in [json.loads((p / "manifest.json").read_text())]}
    broken = runs[("gaussiank-2019", 1, "none", 0.01)]
    manifest = json.loads((broken / "manifest.json").read_text())
    manifest.update(status="failed", error="training diverged at step 9: loss = nan on worker 0")
    (broken / "manifest.json").write_text(json.dumps(manifest))
    ev = pd.read_parquet(broken / "eval.parquet")
    ev[ev["step"] <= 8].to_parquet(broken / "eval.parquet")  # evaluated before diverging
    outcome = reproduce(small.options(results_root=root, run=False, only=["tiny-seeds"],
                                      margin=0.5), log=lambda m: None)
    assert len(outcome.failures) == 1 and "gaussiank-2019 seed 1" in outcome.failures[0]
    assert (root / "figures" / "tiny-seeds-convergence.png").exists()  # drawn from the rest

    def final(path: Path) -> float:
        e = pd.read_parquet(path / "eval.parquet")
        e = e[e["split"] == "test"].sort_values("step")
        return float(e["metric"].iloc[-1])

    diffs = [100 * (final(runs[("gaussiank-2019", s, "none", 0.01)])
                    - final(runs[("topk", s, "none", 0.01)])) for s in range(3)]
    for table in (outcome.claims,
                  (cli_main(["claims", str(root / "tiny-seeds"), "--out",
                             str(tmp_path / "c.csv"), "--margin", "0.5"]),
                   pd.read_csv(tmp_path / "c.csv"))[1]):
        row = table[(table["claim"] == "gaussiank_accuracy")
                    & (table["condition"] == "warmup=none; rho=0.01")].iloc[0]
        assert row["n_seeds"] == 3 and row["n_failed_seeds"] == 1 and row["margin"] == 0.5
        assert row["verdict"] != "holds" and row["cause"].startswith("1 of 3 seeds failed")
        assert row["diff_mean"] == pytest.approx(np.mean(diffs))
        assert f"seed 1 {diffs[1]:+.3g}".replace("-", "−") in row["evidence"]
        assert "training diverged at step 9" in row["evidence"]
    # the time to accuracy of the same runs: the same margin, the same failed seed
    timed = outcome.claims[(outcome.claims["claim"] == "gaussiank_time_to_accuracy")
                           & (outcome.claims["training_condition"] == "warmup=none; rho=0.01")]
    assert len(timed) == 2 and (timed["margin"] == 0.5).all()  # two networks
    assert (timed["n_failed_seeds"] == 1).all() and (timed["verdict"] != "holds").all()
    capsys.readouterr()
    assert cli_main(["claims", str(root / "tiny-seeds"), "--out", str(tmp_path / "d.csv"),
                     "--margin", "-1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "margin = -1.0 is outside the allowed range" in err
    assert not (tmp_path / "d.csv").exists()


def test_claims_figures_and_report_give_the_same_table(small, tmp_path):
    """One builder: `topkscope claims` on the results root the figures driver wrote gives the
    claims.csv it wrote, prediction rows included, and the report of that root shows it."""
    from topkscope.cli import main as cli

    written = pd.read_csv(small.root / "claims.csv")
    assert (written["schema_version"] == SCHEMA_VERSION).all()
    out = tmp_path / "claims.csv"
    assert cli(["claims", str(small.root), "--out", str(out), "--no-progress"]) == 0
    again = pd.read_csv(out)
    key = ["model", "claim", "sparsifier", "condition", "network"]
    for table in (written, again):
        table.sort_values(key, inplace=True, kind="stable", na_position="first")
        table.reset_index(drop=True, inplace=True)
    shown = ["verdict", "reason", "n_units", "fraction", "diff_mean"]
    pd.testing.assert_frame_equal(written[key + shown], again[key + shown])
    assert written["section"].eq("prediction").any()  # the predictions by both commands
    page = (small.root / "report.html").read_text()
    claims = page.split('id="claims"')[1].split('id="figures"')[0]
    assert claims.count("<tr><td>") == len(written)
