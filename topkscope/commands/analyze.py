"""`topkscope analyze RUN_DIR ...`: normality, family fits, contraction and tails of every
snapshot of u.

For each run folder (or every run folder under a results root or an experiment folder) and each
raw snapshot snapshots/step{t}-rank{r}.npy of u, topkscope.analysis.snapshots.analyze_snapshot
measures the normality battery, the distribution-family fits, delta_emp at the densities
against 1 - k/d, (1 - k/d)^2 and the Gaussian value, and the tail row (the Hill index and the
power-law fit against lognormal and exponential tails, analysis.tails). The tidy tables go to
RUN_DIR/analysis/{normality,fits,contraction,tails}.parquet, rewritten atomically after each snapshot,
so an interrupted analysis keeps what it finished. With --out DIR (results shared read-only) they
go to DIR/<experiment>/<run_id>/ instead and the run folder is only read. Snapshots already in the tables are skipped
(only densities not yet measured are added) unless --force. Every row records the seed and
max_n it was measured with; a rerun with another --seed or --max-n is refused (exit 2,
nothing written) unless --force, which recomputes the snapshots with the new settings.
"""

from __future__ import annotations

import argparse
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from topkscope.commands import CommandError, deprecated, list_option

HELP = "analyze the snapshots of u in run folders: normality, family fits, contraction, tails"
DEFAULT_DENSITIES = "0.001,0.01,0.1"
TABLES = ("normality", "fits", "contraction", "tails")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", type=Path, metavar="RUN_DIR",
                   help="run folder (holding manifest.json), experiment folder or results root")
    list_option(p, "--densities", metavar="RHO",
                help="densities rho = k/d to compare Top-k at, each in (0, 1], space-separated "
                     f"(default {DEFAULT_DENSITIES.replace(',', ' ')})")
    p.add_argument("--max-n", default=None, metavar="N",
                   help="subsample size (>= 8) for the sort-based tests, the fits and the "
                        "magnitude curve (default: each statistic's own)")
    p.add_argument("--seed", default="0", metavar="S", help="subsampling seed, >= 0 (default 0)")
    p.add_argument("--force", action="store_true",
                   help="re-analyze snapshots already analyzed (needed to change the --seed or "
                        "--max-n of existing tables)")
    p.add_argument("--results", type=Path, metavar="DIR",
                   help="write the tables to DIR/<experiment>/<run_id>/ instead of "
                        "RUN_DIR/analysis/ (the run folders are only read)")
    deprecated(p, "--out", "--results", type=Path)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


@dataclass
class Work:
    """One snapshot to analyze: what is missing from the tables."""

    step: int
    rank: int
    distribution: bool  # battery and fits still to do
    densities: list[float]  # contraction densities still to do
    tails: bool = False  # the tail row still to do


@dataclass
class RunPlan:
    run: object  # topkscope.analysis.runs.Run
    tables: dict  # name -> existing DataFrame or None
    todo: list[Work]
    snapshots: int
    folder: Path  # where the tables are written
    failed: list[str] = field(default_factory=list)


def parse_densities(text: str) -> list[float]:
    """'0.001,0.01' -> [0.001, 0.01] (duplicates dropped); ValueError outside (0, 1]."""
    from topkscope.bounds import k_from_density

    out: list[float] = []
    for item in str(text).split(","):
        try:
            rho = float(item.strip())
        except ValueError:
            raise ValueError(f"--densities: {item.strip()!r} is not a number; give "
                             "densities in (0, 1]") from None
        try:
            k_from_density(rho, 1)
        except ValueError as exc:
            raise ValueError(f"--densities: {exc}") from None
        if rho not in out:
            out.append(rho)
    return out


def parse_int(flag: str, text: str | None, minimum: int) -> int | None:
    if text is None:
        return None
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ValueError(f"{flag}: {text!r} is not an integer; allowed: >= {minimum}") from None
    if value < minimum:
        raise ValueError(f"{flag}: {value} is outside the allowed range (>= {minimum})")
    return value


def run_folders(paths: list[Path]) -> list[Path]:
    """Run folders (any status) named by paths: a run folder itself, an experiment folder or a
    results root (topkscope.manifest.runs_at). ValueError naming a path that holds none."""
    from topkscope.manifest import runs_at

    return [r.path for r in runs_at(paths, status=None)]


def tables_folder(run_dir: Path, out: Path | None) -> Path:
    """RUN_DIR/analysis, or with --out DIR: DIR/<experiment>/<run_id>."""
    run_dir = Path(run_dir).resolve()
    return run_dir / "analysis" if out is None else Path(out) / run_dir.parent.name / run_dir.name


def read_tables(folder: Path) -> dict:
    """The tables an earlier analysis wrote (None where absent); ValueError if unreadable."""
    from topkscope.analysis.runs import read_table

    out = {}
    for name in TABLES:
        path = folder / f"{name}.parquet"
        out[name] = read_table(path, "delete it to analyze again").to_pandas() \
            if path.is_file() else None
    return out


def check_settings(folder: Path, tables: dict, densities: list[float], max_n: int | None,
                   seed: int) -> None:
    """ValueError (saying --force is needed) when rows an analysis would keep were measured
    with another seed or max_n: the normality and fits rows, and the contraction rows at the
    requested densities. Each row records its seed and max_n (analysis.snapshots)."""
    from topkscope.analysis.snapshots import used_max_n

    for name in TABLES:
        rows = tables[name]
        if rows is None or rows.empty or not {"seed", "max_n"} <= set(rows.columns):
            continue
        if name == "contraction":
            rows = rows[rows["density"].isin(densities)]
        wanted = (seed, used_max_n(name, max_n))
        other = sorted({(int(a), int(b)) for a, b in rows[["seed", "max_n"]].itertuples(
            index=False)} - {wanted})
        if other:
            raise ValueError(
                f"the {name} table in {str(folder)!r} was measured with seed {other[0][0]}, "
                f"max_n {other[0][1]}; this analysis asks for seed {wanted[0]}, max_n "
                f"{wanted[1]}: add --force to recompute those snapshots with the new settings")


def plan_run(run_dir: Path, densities: list[float], force: bool, out: Path | None = None,
             max_n: int | None = None, seed: int = 0) -> RunPlan:
    """What to analyze in one run: the snapshots (and densities) its tables lack, or with
    force all of them. ValueError when its tables hold rows of other settings (seed, max_n)
    and not force."""
    from topkscope.analysis.runs import load
    from topkscope.schema import GLOBAL

    run = load(run_dir, layers=GLOBAL)
    folder = tables_folder(run_dir, out)
    tables = read_tables(folder)
    if not force:
        check_settings(folder, tables, densities, max_n, seed)
    snaps = run.snapshots[run.snapshots["kind"] == "u"]
    done_dist, done_rho, done_tails = set(), set(), set()
    if not force and tables["normality"] is not None:
        done_dist = {(int(s), int(r)) for s, r in tables["normality"][["step", "rank"]].values}
    if not force and tables["tails"] is not None:  # tables written before it lack the row
        done_tails = {(int(s), int(r)) for s, r in tables["tails"][["step", "rank"]].values}
    if not force and tables["contraction"] is not None:
        frame = tables["contraction"][["step", "rank", "density"]]
        done_rho = {(int(s), int(r), float(d)) for s, r, d in frame.itertuples(index=False)}
    todo = []
    for step, rank in snaps[["step", "rank"]].itertuples(index=False):
        step, rank = int(step), int(rank)
        missing = [d for d in densities if (step, rank, d) not in done_rho]
        if (step, rank) not in done_dist or missing or (step, rank) not in done_tails:
            todo.append(Work(step, rank, (step, rank) not in done_dist, missing,
                             (step, rank) not in done_tails))
    return RunPlan(run, tables, todo, len(snaps), folder)


def analyze_plan(plan: RunPlan, max_n: int | None, seed: int, bar) -> None:
    """Analyze plan.todo one snapshot at a time, rewriting the tables after each."""
    import pandas as pd

    from topkscope.analysis.snapshots import analyze_snapshot, merge
    from topkscope.io import write_parquet_atomic

    folder = plan.folder
    for work in plan.todo:
        bar.set_postfix_str(f"{plan.run.path.name} step {work.step} rank {work.rank}")
        try:
            u = plan.run.snapshot(work.step, work.rank)
        except (OSError, ValueError) as exc:  # a truncated or foreign .npy file
            plan.failed.append(f"step {work.step} rank {work.rank}: cannot read: {exc}")
            bar.update(1)
            continue
        result = analyze_snapshot(u, work.step, work.rank, work.densities, max_n=max_n,
                                  seed=seed, distribution=work.distribution,
                                  with_tails=work.tails)
        key = pd.DataFrame({"step": [work.step], "rank": [work.rank]})
        rho = key.merge(pd.DataFrame({"density": work.densities}), how="cross")
        updates = [("contraction", result.contraction, rho)] if work.densities else []
        if work.tails:
            updates.append(("tails", result.tails, key))
        if work.distribution:  # normality last: its row marks the snapshot as analyzed
            updates = [("fits", result.fits, key), *updates, ("normality", result.normality, key)]
        for name, rows, replace in updates:
            plan.tables[name] = merge(plan.tables[name], rows, replace)
            write_parquet_atomic(folder / f"{name}.parquet",
                                 with_identity(plan.tables[name], plan.run))
        bar.update(1)


def with_identity(table, run):
    """table with the run's identity columns first (schema.RUN_KEYS), as in every table of
    a run folder."""
    from topkscope.schema import RUN_KEYS, run_identity

    identity = run_identity(run.path, run.manifest)
    out = table.drop(columns=[k for k in RUN_KEYS if k in table.columns])
    for i, key in enumerate(RUN_KEYS):
        out.insert(i, key, [identity[key]] * len(out))
    return out


def summary(plan: RunPlan, densities: list[float]) -> str:
    """A few lines: snapshots done, normality effect sizes, best families, bounds held."""
    import pandas as pd

    run = plan.run
    status = run.manifest.get("status") or "unknown"
    lines = [f"{run.path} ({status}): {plan.snapshots} snapshot(s) of u, "
             f"{len(plan.todo) - len(plan.failed)} analyzed now, "
             f"{plan.snapshots - len(plan.todo)} already done, {len(plan.failed)} failed"]
    lines += [f"  failed: {message}" for message in plan.failed]
    norm, fit, con, tail = (plan.tables[n] for n in TABLES)
    if norm is not None and not norm.empty:
        rejected = int((norm["dagostino_p"] < 0.05).sum())
        lines.append(f"  normality: median KS D {_median(norm['ks_D']):.4g}, median excess "
                     f"kurtosis {_median(norm['excess_kurtosis']):.4g}, median Q-Q r "
                     f"{_median(norm['qq_r']):.6g}; D'Agostino rejects normal at 5% in "
                     f"{rejected}/{len(norm)}")
    if fit is not None and not fit.empty:
        best = fit[(fit["on"] == "x") & (fit["family_rank"] == 1)]["family"].value_counts()
        lines.append("  best family on x (BIC): "
                     + ", ".join(f"{name} {count}" for name, count in best.items()))
    if con is not None and not con.empty:
        for rho in densities:
            rows = con[con["density"] == rho]
            if rows.empty:
                continue
            lines.append(
                f"  rho {rho:g}: median delta {_median(rows['topk_ratio']):.4g} vs (1-k/d)^2 "
                f"{_median(rows['paper_bound']):.4g}; below (1-k/d)^2 in "
                f"{int(rows['below_paper'].sum())}/{len(rows)}, convexity condition held in "
                f"{int(pd.Series(rows['condition_holds'], dtype=bool).sum())}/{len(rows)}")
    if tail is not None and not tail.empty:
        heavy = int(((tail["lr_exponential"] > 0) & (tail["p_exponential"] < 0.1)).sum())
        lines.append(f"  tails: median Hill index {_median(tail['hill_alpha']):.3g}, power law "
                     f"likelier than an exponential tail (p < 0.1) in {heavy}/{len(tail)}")
    if plan.snapshots:
        lines.append(f"  tables: {plan.folder}")
    return "\n".join(lines)


def _median(values) -> float:
    finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return statistics.median(finite) if finite else math.nan


def main(args: argparse.Namespace) -> int:
    from topkscope import progress

    try:
        densities = parse_densities(",".join(args.densities or [DEFAULT_DENSITIES]))
        max_n = parse_int("--max-n", args.max_n, 8)
        seed = parse_int("--seed", args.seed, 0)
        out = getattr(args, "results", None)
        if out is not None:
            from topkscope.validate import output_folder

            output_folder("--results", out)
        plans = [plan_run(d, densities, args.force, out, max_n, seed)
                 for d in run_folders(list(args.paths))]
    except ValueError as exc:  # nothing has been written yet
        raise CommandError(str(exc)) from None
    total = sum(len(p.todo) for p in plans)
    with progress.bar(total=total, desc="analyze", unit="snapshot",
                      enabled=not args.no_progress) as bar:
        try:
            for plan in plans:
                analyze_plan(plan, max_n, seed, bar)
        except OSError as exc:
            raise CommandError(f"cannot write the tables: {exc}", code=1) from None
    for plan in plans:
        print(summary(plan, densities))
    return 1 if any(p.failed for p in plans) else 0
