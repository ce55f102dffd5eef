"""The statistics on one whole-model vector: normality battery + fits + contraction, timed.

    .venv/bin/python benchmarks/stats_battery.py [--quick] [--d D] [--repeats R] [--threads N]
                                              [--no-baseline]

One float32 vector of d = 2.5e7 values (Student-t, 4 degrees of freedom: gradient-like tails;
--quick: 2.5e6) goes through
  battery              normality.battery (moments and K^2/JB on all values, sort-based tests
                       on a 2.5e5 subsample, Shapiro-Wilk on 5,000)  + its parts, timed alone
  fits                 fits.compare (7 families, 1e5 subsample)
  contraction          contraction.analyze at densities 0.001, 0.01, 0.1 (ratios, curve, gap)
  total                the three back to back (goal: under 3 s at d = 2.5e7 on 2 CPU cores)
and, side by side, the obvious baseline on every value: scipy normaltest, kstest, anderson,
one float64 partition per density, a full sort for the curve. Times are the best of
--repeats runs. Writes results/bench/stats_battery.csv: component, seconds, median_seconds,
values, share_of_total, ratio_to_total, d, repeats, threads, device, numpy, scipy.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

from _options import benchmark_parser

DENSITIES = (0.001, 0.01, 0.1)
GOAL_SECONDS = 3.0


def device_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return f"cpu: {line.split(':', 1)[1].strip()} ({os.cpu_count()} cores)"
    except OSError:
        pass
    return f"cpu: {platform.processor() or platform.machine()} ({os.cpu_count()} cores)"


def timed(fn, repeats: int) -> tuple[float, float, object]:
    """(best seconds, median seconds, last result) over `repeats` calls."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[0], times[len(times) // 2], result


def build_parser() -> argparse.ArgumentParser:
    parser = benchmark_parser(__file__, __doc__, quick="d = 2.5e6, one repeat")
    parser.add_argument("--d", type=float, default=None, help="vector length (default 2.5e7)")
    parser.add_argument("--repeats", type=int, default=None, help="timed runs (best is kept)")
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads (default 1)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the full-data baseline")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.threads < 1:
        print(f"error: --threads {args.threads} must be >= 1", file=sys.stderr)
        return 2
    # BLAS reads its thread count once, at import: set it before numpy is loaded
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)

    import numpy as np
    import pandas as pd
    import scipy
    from scipy import stats

    from topkscope import kernel
    from topkscope.analysis import contraction, fits, normality
    from topkscope.analysis.vectors import finite_values, subsample
    from topkscope.io import atomic_write

    d = int(args.d or (2.5e6 if args.quick else 2.5e7))
    if d < 1000:
        print(f"error: --d {d} must be at least 1000", file=sys.stderr)
        return 2
    repeats = args.repeats or (1 if args.quick else 3)
    if repeats < 1:
        print(f"error: --repeats {repeats} must be >= 1", file=sys.stderr)
        return 2
    u = np.random.default_rng(0).standard_t(4, d).astype(np.float32) * np.float32(1e-3)
    sub = np.sort(subsample(u, normality.DEFAULT_MAX_N, np.random.default_rng(0)).astype(np.float64))
    sw = sub[:: max(1, sub.size // normality.SHAPIRO_MAX_N)][: normality.SHAPIRO_MAX_N]

    rows: list[dict] = []

    def add(component: str, fn, values: int, runs: int = repeats):
        best, median, result = timed(fn, runs)
        rows.append({"component": component, "seconds": best, "median_seconds": median,
                     "values": values})  # fmt: skip
        print(f"{component:34s} {best:8.3f} s  (median {median:.3f}, {values:,} values)")
        return result

    print(f"d = {d:,} float32, {repeats} repeat(s), {args.threads} BLAS thread(s), {device_name()}")
    add("finite_check", lambda: finite_values(u), d)
    add("battery.moments_K2_JB", lambda: kernel.central_sums(u), d)
    add("battery.subsample_and_sort", lambda: np.sort(
        subsample(u, normality.DEFAULT_MAX_N, np.random.default_rng(0)).astype(np.float64)), sub.size)
    add("battery.ks_lilliefors", lambda: normality.lilliefors(sub), sub.size)
    add("battery.anderson_darling", lambda: stats.anderson(sub, "norm", method="interpolate"),
        sub.size)
    add("battery.qq_correlation", lambda: normality.qq_correlation(sub), sub.size)
    add("battery.shapiro_wilk", lambda: stats.shapiro(sw), sw.size)
    add("battery", lambda: normality.battery(u), d)
    add("fits", lambda: fits.compare(u), fits.DEFAULT_MAX_N)
    report = add("contraction", lambda: contraction.analyze(u, DENSITIES), d)

    def everything():
        return normality.battery(u), fits.compare(u), contraction.analyze(u, DENSITIES)

    add("total", everything, d)
    total = rows[-1]["seconds"]

    if not args.no_baseline:
        u64 = u.astype(np.float64)
        ks = [contraction.k_from_density(r, d) for r in DENSITIES]
        add("baseline.normaltest_all_values", lambda: stats.normaltest(u64), d, 1)
        add("baseline.kstest_all_values",
            lambda: stats.kstest(u64, "norm", args=(u64.mean(), u64.std(ddof=1))), d, 1)
        add("baseline.anderson_all_values", lambda: stats.anderson(u64, "norm",
                                                                   method="interpolate"), d, 1)
        exact = add("baseline.topk_ratio_per_density",
                    lambda: [contraction.topk_ratio(u64, k) for k in ks], d, 1)
        add("baseline.full_sort_for_curve", lambda: np.sort(np.abs(u64)), d, 1)
        base = sum(r["seconds"] for r in rows if r["component"].startswith("baseline."))
        rows.append({"component": "baseline.total", "seconds": base, "median_seconds": base,
                     "values": d})  # fmt: skip
        agree = np.allclose(report.ratios["topk_ratio"], exact, rtol=1e-9, atol=0)
        print(f"{'baseline.total':34s} {base:8.3f} s  = {base / total:.1f}x the fast total; "
              f"ratios agree with the float64 partitions: {agree}")
        if not agree:
            print("error: contraction.analyze disagrees with topk_ratio", file=sys.stderr)
            return 1

    table = pd.DataFrame(rows)
    baseline = table["component"].str.startswith("baseline.")
    table["share_of_total"] = (table["seconds"] / total).where(~baseline)
    table["ratio_to_total"] = (table["seconds"] / total).where(baseline)
    table = table.assign(d=d, repeats=repeats, threads=args.threads, device=device_name(),
                         numpy=np.__version__, scipy=scipy.__version__)  # fmt: skip
    atomic_write(args.out, lambda tmp: table.to_csv(tmp, index=False))
    verdict = "meets" if total < GOAL_SECONDS else "misses"
    print(f"total {total:.3f} s {verdict} the {GOAL_SECONDS:g} s goal (at d = 2.5e7); "
          f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
