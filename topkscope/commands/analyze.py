"""`topkscope analyze RUN_DIR ...`: normality, family fits, contraction and tails (the Hill index,
the power-law fit against lognormal and exponential tails) of every snapshot of u; delta(k)
against the fitted families of every saved vector; SIDCo's thresholds and the range of the
sent values.

For each run folder (or every run folder under a results root or an experiment folder) and each
raw snapshot snapshots/step{t}-rank{r}.npy of u, topkscope.analysis.snapshots.analyze_snapshot
measures the normality battery, the distribution-family fits and delta_emp at the densities
against 1 - k/d, (1 - k/d)^2 and the Gaussian value; for every saved vector (u, and g and e
where the recorder saved them) analyze_delta measures delta(k) over k/d from 1e-4 to 0.5
against the fitted families (delta_curve, delta_families), and for u at the densities SIDCo's
thresholds against the true k-th largest |u| (sidco_thresholds) and the share of the values
Top-k and chunk-wise Top-k send that the quantizer's range holds (sent_range). The tidy tables
go to RUN_DIR/analysis/<table>.parquet, rewritten atomically after each snapshot,
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

HELP = ("analyze the snapshots in run folders: normality, family fits, contraction, tails, delta(k) "
        "against fitted families, SIDCo's thresholds, the sent values' range")
DEFAULT_DENSITIES = "0.001,0.01,0.1"
TABLES = ("normality", "fits", "contraction", "tails", "delta_curve", "delta_families",
          "sidco_thresholds", "sent_range")


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
    delta_kinds: list[str] = field(default_factory=list)  # saved vectors without delta rows
    tail_densities: list[float] = field(default_factory=list)  # SIDCo / sent range still to do
    has_u: bool = True  # a snapshot of u was saved at (step, rank)
    tails: bool = False  # the tail row of u still to do


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
    done_dist, done_rho, done_delta, done_tail, done_tails = set(), set(), set(), set(), set()
    if not force and tables["tails"] is not None:  # tables written before it lack the row
        done_tails = {(int(s), int(r)) for s, r in tables["tails"][["step", "rank"]].values}
    if not force and tables["normality"] is not None:
        done_dist = {(int(s), int(r)) for s, r in tables["normality"][["step", "rank"]].values}
    if not force and tables["contraction"] is not None:
        frame = tables["contraction"][["step", "rank", "density"]]
        done_rho = {(int(s), int(r), float(d)) for s, r, d in frame.itertuples(index=False)}
    if not force and tables["delta_families"] is not None:  # written last of the delta rows
        frame = tables["delta_families"][["step", "rank", "kind"]]
        done_delta = {(int(s), int(r), str(k)) for s, r, k in frame.itertuples(index=False)}
    if not force and tables["sent_range"] is not None:  # written after sidco_thresholds
        frame = tables["sent_range"][["step", "rank", "density"]]
        done_tail = {(int(s), int(r), float(d)) for s, r, d in frame.itertuples(index=False)}
    kinds: dict[tuple[int, int], list[str]] = {}
    for step, rank, kind in run.snapshots[["step", "rank", "kind"]].itertuples(index=False):
        kinds.setdefault((int(step), int(rank)), []).append(str(kind))
    todo = []
    for (step, rank), saved in sorted(kinds.items()):
        has_u = "u" in saved
        missing = [d for d in densities if (step, rank, d) not in done_rho] if has_u else []
        work = Work(step, rank, has_u and (step, rank) not in done_dist, missing,
                    [k for k in sorted(saved) if (step, rank, k) not in done_delta],
                    [d for d in densities if (step, rank, d) not in done_tail] if has_u else [],
                    has_u, has_u and (step, rank) not in done_tails)
        if work.distribution or work.densities or work.delta_kinds or work.tail_densities \
                or work.tails:
            todo.append(work)
    return RunPlan(run, tables, todo, len(snaps), folder)


def analyze_plan(plan: RunPlan, max_n: int | None, seed: int, bar) -> None:
    """Analyze plan.todo one snapshot at a time, rewriting the tables after each."""
    import pandas as pd

    from topkscope.analysis.snapshots import analyze_snapshot

    for work in plan.todo:
        bar.set_postfix_str(f"{plan.run.path.name} step {work.step} rank {work.rank}")
        fitted = None  # the fits of u measured now, which the delta curve of u reuses
        if work.distribution or work.densities or work.tails:
            u = _read(plan, work, "u")
            if u is None:
                bar.update(1)
                continue
            result = analyze_snapshot(u, work.step, work.rank, work.densities, max_n=max_n,
                                      seed=seed, distribution=work.distribution,
                                      with_tails=work.tails)
            fitted = result.fits if work.distribution else None
            key = pd.DataFrame({"step": [work.step], "rank": [work.rank]})
            rho = key.merge(pd.DataFrame({"density": work.densities}), how="cross")
            updates = [("contraction", result.contraction, rho)] if work.densities else []
            if work.tails:
                updates.append(("tails", result.tails, key))
            if work.distribution:  # normality last: its row marks the snapshot as analyzed
                updates = [("fits", result.fits, key), *updates,
                           ("normality", result.normality, key)]
            _write(plan, updates)
        for kind in sorted({*work.delta_kinds, *(["u"] if work.tail_densities else [])}):
            vector = _read(plan, work, kind)
            if vector is not None:
                _delta(plan, work, kind, vector, fitted if kind == "u" else None, max_n, seed)
        bar.update(1)


def _read(plan: RunPlan, work: Work, kind: str):
    """The saved vector, or None after noting why it cannot be read (a truncated or foreign
    .npy file)."""
    try:
        return plan.run.snapshot(work.step, work.rank, kind)
    except (OSError, ValueError) as exc:
        which = "" if kind == "u" else f" ({kind})"
        plan.failed.append(f"step {work.step} rank {work.rank}{which}: cannot read: {exc}")
        return None


def _delta(plan: RunPlan, work: Work, kind: str, vector, fitted, max_n, seed) -> None:
    """The delta rows of one saved vector (when missing) and, for u, SIDCo's thresholds and
    the sent range at the densities still missing; the families' rows last (they mark the
    vector as done), sent_range after sidco_thresholds."""
    import pandas as pd

    from topkscope.analysis.snapshots import analyze_delta

    dens = work.tail_densities if kind == "u" else []
    result = analyze_delta(vector, work.step, work.rank, kind, dens, fits_table=fitted,
                           max_n=max_n, seed=seed)
    key = pd.DataFrame({"step": [work.step], "rank": [work.rank], "kind": [kind]})
    rho = pd.DataFrame({"step": [work.step], "rank": [work.rank]}).merge(
        pd.DataFrame({"density": dens}), how="cross")
    updates = []
    if kind in work.delta_kinds:
        updates += [("delta_curve", result.delta_curve, key),
                    ("delta_families", result.delta_families, key)]
    if dens:
        updates += [("sidco_thresholds", result.sidco_thresholds, rho),
                    ("sent_range", result.sent_range, rho)]
    _write(plan, updates)


def _write(plan: RunPlan, updates: list) -> None:
    """Merge each (table, new rows, keys they replace) into the plan's tables and rewrite
    the table atomically."""
    from topkscope.analysis.snapshots import merge
    from topkscope.io import write_parquet_atomic

    for name, rows, replace in updates:
        plan.tables[name] = merge(plan.tables[name], rows, replace)
        write_parquet_atomic(plan.folder / f"{name}.parquet",
                             with_identity(plan.tables[name], plan.run))


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
             f"{plan.snapshots - sum(w.has_u for w in plan.todo)} already done, "
             f"{len(plan.failed)} failed"]
    lines += [f"  failed: {message}" for message in plan.failed]
    norm, fit, con, tail = (plan.tables[n] for n in ("normality", "fits", "contraction",
                                                      "tails"))
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
    lines += _delta_lines(plan.tables)
    if plan.snapshots:
        lines.append(f"  tables: {plan.folder}")
    return "\n".join(lines)


def _delta_lines(tables: dict) -> list[str]:
    """The families' delta(k) winners per vector, SIDCo's count/k at the adapted stage count
    and the share of Top-k's sent values the 2-bit range holds, per density (medians)."""
    lines = []
    fam = tables["delta_families"]
    if fam is not None and not fam.empty:
        for kind, rows in fam[fam["best"].astype(bool)].groupby("kind"):
            won = rows.groupby("family")["error"].agg(["size", "median"])
            lines.append(f"  delta(k) of {kind}, best family (RMS error of ln(1 - delta) over "
                         "k/d 1e-4..0.5): " + ", ".join(
                             f"{f} {int(r['size'])} (median error {r['median']:.3g})"
                             for f, r in won.iterrows()))
    sid = tables["sidco_thresholds"]
    if sid is not None and not sid.empty:
        adapted = sid[(sid["rule"] == "sidco") & sid["adapted"].astype(bool)]
        for rho, rows in adapted.groupby("density"):
            lines.append(f"  SIDCo at rho {rho:g}, adapted stages: median count/k " + ", ".join(
                f"{dist} {_median(g['count_over_k']):.3g}" for dist, g in rows.groupby("dist")))
    sent = tables["sent_range"]
    if sent is not None and not sent.empty:
        for rho, rows in sent.groupby("density"):
            lines.append(f"  rho {rho:g}: share of the sent values the 2-bit range holds, "
                         "median " + ", ".join(f"{sel} {_median(g['share_held_2bit']):.4g}"
                                              for sel, g in rows.groupby("selector")))
    return lines


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
