"""`topkscope bench [--quick] [--only NAME,...]`: run the benchmark scripts one after another.

Each benchmarks/<name>.py runs as a subprocess of this same interpreter, from the folder above
benchmarks/ (the repository root), so it writes results/bench/<name>.csv there. A benchmark
counts as passed when it exits 0 and has (re)written that CSV; the command exits 1 if any failed,
2 on bad input (unknown name, no benchmarks folder: e.g. topkscope installed without its
repository).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from topkscope.commands import CommandError, list_option

HELP = "run the benchmark scripts of the repository's benchmarks/ folder"
# the suite's benchmarks, in the order they run; other scripts in the folder run after them
KNOWN_ORDER = ("selection", "comm", "recorder_overhead", "stats_battery", "sim_throughput",
               "data_batch")  # fmt: skip
ENV_VAR = "TOPKSCOPE_BENCHMARKS"
REPO_BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true",
                   help="forward --quick to every benchmark (each well under a minute)")
    list_option(p, "--only", metavar="NAME",
                help="run only these benchmarks, space-separated (default: every one; see "
                     "--list)")
    p.add_argument("--benchmarks", type=Path, metavar="DIR",
                   help=f"folder of benchmark scripts (default: ${ENV_VAR}, else the "
                        "repository's benchmarks/)")
    p.add_argument("--timeout", metavar="SECONDS",
                   help="stop a benchmark running longer than this (default: no limit)")
    p.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar over the benchmarks (their lines are printed still)")


@dataclass(frozen=True)
class BenchResult:
    """How one benchmark run ended."""

    name: str
    returncode: int | None  # None: timed out
    seconds: float
    csv: Path
    csv_written: bool

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.csv_written

    @property
    def status(self) -> str:
        if self.returncode is None:
            return "failed (timed out)"
        if self.returncode != 0:
            return f"failed (exit {self.returncode})"
        return "ok" if self.csv_written else "failed (exit 0 but no CSV written)"


def benchmarks_folder(option: Path | None) -> Path:
    """--benchmarks, else $TOPKSCOPE_BENCHMARKS, else the repository's benchmarks/ folder."""
    if option is not None:
        folder, source = option, "--benchmarks"
    elif os.environ.get(ENV_VAR):
        folder, source = Path(os.environ[ENV_VAR]), f"${ENV_VAR}"
    else:
        folder, source = REPO_BENCHMARKS, "the repository"
        if not folder.is_dir():
            raise ValueError(f"no benchmarks folder at {str(folder)!r}: topkscope seems to be "
                             "installed without its repository; run from a clone, or give "
                             f"--benchmarks DIR or ${ENV_VAR}")
    if not folder.is_dir():
        raise ValueError(f"benchmarks folder {str(folder)!r} (from {source}) is not a folder")
    return folder


def discover(folder: Path) -> list[str]:
    """Benchmark names in run order: KNOWN_ORDER first, then any other <name>.py, sorted."""
    present = {p.stem for p in folder.glob("*.py") if not p.name.startswith("_")}
    return [n for n in KNOWN_ORDER if n in present] + sorted(present - set(KNOWN_ORDER))


def choose(available: list[str], only: list[str] | str | None) -> list[str]:
    """The benchmarks to run, in run order (only: names, or one comma-separated text);
    ValueError naming an unknown name."""
    if only is None:
        return available
    names = only.split(",") if isinstance(only, str) else only
    wanted = [n.strip().removesuffix(".py") for n in names if n.strip()]
    if not wanted:
        raise ValueError(f"--only {only!r} names no benchmark; available: {', '.join(available)}")
    unknown = [n for n in wanted if n not in available]
    if unknown:
        raise ValueError(f"--only: unknown benchmark {unknown[0]!r}; available: "
                         f"{', '.join(available) or 'none'}")
    return [n for n in available if n in wanted]


def parse_timeout(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"--timeout: {text!r} is not a number of seconds (> 0)") from None
    if not value > 0:
        raise ValueError(f"--timeout: {text} is outside the allowed range (> 0 seconds)")
    return value


def run_one(folder: Path, name: str, quick: bool, timeout: float | None) -> BenchResult:
    """python benchmarks/<name>.py [--quick], from folder's parent; did it write its CSV?"""
    cwd = folder.resolve().parent
    csv = cwd / "results" / "bench" / f"{name}.csv"
    before = csv.stat().st_mtime_ns if csv.is_file() else None
    argv = [sys.executable, str(folder.resolve() / f"{name}.py")] + ["--quick"] * quick
    start = time.perf_counter()
    # its own process group, so a timeout or Ctrl-C also stops the benchmark's children
    proc = subprocess.Popen(argv, cwd=cwd, start_new_session=True)
    returncode: int | None
    try:
        returncode = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(proc, signal.SIGKILL)
        returncode = None
    except KeyboardInterrupt:
        _stop(proc, signal.SIGTERM)
        raise
    seconds = time.perf_counter() - start
    written = csv.is_file() and csv.stat().st_mtime_ns != before
    return BenchResult(name, returncode, seconds, csv, written)


def _stop(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
    proc.wait()


def shown(path: Path) -> str:
    """path relative to the working folder when under it."""
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def run_all(folder: Path, names: list[str], quick: bool, timeout: float | None,
            outcomes: list[BenchResult], progress_shown: bool = True) -> None:
    """Run each benchmark in turn, announcing it and its outcome (and a bar over them on a
    terminal); appends to outcomes."""
    from topkscope import progress

    with progress.bar(total=len(names), desc="bench", unit="benchmark",
                      enabled=progress_shown) as bar:
        for i, name in enumerate(names, 1):
            flag = " --quick" if quick else ""
            bar.write(f"[{i}/{len(names)}] {name}: python "
                      f"{shown(folder.resolve() / name)}.py{flag}", file=sys.stdout)
            outcome = run_one(folder, name, quick, timeout)
            outcomes.append(outcome)
            bar.write(f"[{i}/{len(names)}] {name}: {outcome.status} in {outcome.seconds:.1f} s"
                      + (f" -> {shown(outcome.csv)}" if outcome.csv_written else ""),
                      file=sys.stdout)
            bar.update()


def report(outcomes: list[BenchResult]) -> int:
    """The summary table; 1 if any benchmark failed."""
    print("\nbenchmark            status                              seconds  csv")
    for o in outcomes:
        csv = shown(o.csv) if o.csv_written else "-"
        print(f"{o.name:<20} {o.status:<35} {o.seconds:>7.1f}  {csv}")
    failed = [o.name for o in outcomes if not o.ok]
    print(f"{len(outcomes) - len(failed)} of {len(outcomes)} benchmarks passed"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def main(args: argparse.Namespace) -> int:
    try:
        folder = benchmarks_folder(args.benchmarks)
        available = discover(folder)
        names = choose(available, args.only)
        timeout = parse_timeout(args.timeout)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    if args.list:
        print("\n".join(available))
        return 0
    if not names:
        raise CommandError(f"no benchmark scripts (*.py) in {str(folder)!r}")
    outcomes: list[BenchResult] = []
    run_all(folder, names, args.quick, timeout, outcomes, not args.no_progress)
    return report(outcomes)
