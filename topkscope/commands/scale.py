"""`topkscope scale`: predicted TopK-SGD step time on a network, per method and worker count.

    topkscope scale --model resnet50 --network 10gbe --workers 16 64 256
    topkscope scale --params 110000000 --batch 64 --compute-s 0.30 --network ib100 --workers 32
    topkscope scale --from-run results/my-exp/cnn1 --network 10gbe --workers 16 64

Compute comes from --compute-s, else (--inputs published, the default) the published GPU
compute table (topkscope.perf.published), or (--inputs here) the model's complete runs under
--results, else the model-compute benchmark CSV (this machine's CPU). --params N predicts a
model given only by its parameter count (then --compute-s is needed). --from-run RUN predicts
one run folder from its own inputs by the function `topkscope report` uses too
(topkscope.perf.pays.run_prediction): its size (manifest num_parameters, else the recorded
layout), its measured compute (median train.parquet time_compute), batch, density and own
selection time, the selection benchmark of the compute's device (--selection-csv, else the
committed one; --inputs, --compute-csv and --results do not apply); an outer-loop run with its
exchange every H steps and the payload it sent; a run that timed no step is refused in one line
that says to give --compute-s. --batch B is the per-worker batch: it rescales a table's compute
time linearly and gives the throughput.

Prints the answer: a table with one row per (method, training condition of its counts, P)
(an outer-loop run: Dense as DDP, dense DiLoCo and its own exchange every H steps):
t_step, the speed-ups over each baseline, the selection time and the break-even selection
(the longest that still beats every dense baseline); per P the fastest method, by how much,
and what decides it; the sources of the inputs once below (measured here, published, preset,
user, nominal); a warning when the selection times come from another device than the
compute; last, per network and P, whether sparsification pays (`pays?`: the word of the
verdict rule with the model's validated error, topkscope.claims.pays, the sentence `topkscope
report` shows, with the nearest published measurements). --verbose prints instead every row in
detail: compute, selection and communication
milliseconds, the throughput, the crossover bandwidth, each break-even time and the sources. The selection CSV is --selection-csv, else the first measured on the
compute's device (topkscope.perf.inputs.selection_table). A value that
does not apply prints as a dash, explained in a footnote. --csv writes the same table (every
column; docs/scaling.md documents each).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from topkscope.commands import CommandError

HELP = "predict the TopK-SGD step time (compute, selection, communication) on a network"


def _select_pair(text: str) -> tuple[str, float]:
    method, sep, value = text.partition("=")
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not sep or not method or not seconds >= 0:
        raise argparse.ArgumentTypeError(f"expected METHOD=SECONDS with SECONDS >= 0, got {text!r}")
    return method, seconds


LINE = 160  # the longest line of prose scale prints (tables keep their rows whole)


def wrapped(lines: list[str], width: int = LINE) -> list[str]:
    """lines with every line of prose longer than `width` wrapped, continuations indented;
    table rows (starting with spaces) are kept whole."""
    import textwrap

    out = []
    for line in lines:
        if len(line) <= width or line.startswith("  "):
            out.append(line)
        else:
            out += textwrap.wrap(line, width=width, subsequent_indent="    ",
                                 break_long_words=False, break_on_hyphens=False)
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help="model name (topkscope.models.available()); or --params")
    p.add_argument("--params", type=int, metavar="N",
                   help="a model given only by its parameter count d (needs --compute-s)")
    p.add_argument("--from-run", type=Path, metavar="RUN",
                   help="a run folder (yours or topkscope run's): its model size "
                        "(num_parameters, else the recorded layout), measured compute time "
                        "(median time_compute), density; an outer-loop run's exchange every H "
                        "steps")
    p.add_argument("--batch", type=int, metavar="B",
                   help="per-worker batch: the throughput, and a table's compute time scaled "
                        "linearly to it (default: the batch of the compute's source)")
    p.add_argument("--inputs", choices=("published", "here"), default="published",
                   help="where the compute time comes from: published (default; GPU inputs "
                        "from published measurements, results/reference/scaling/"
                        "gpu_compute.csv) or here (this machine: runs under --results, else "
                        "the model-compute benchmark)")
    p.add_argument("--network", help="preset: 10gbe, ib100 (fitted on published measurements); "
                   "1gbe, 10gbe-line, 25gbe, ib100-line, nvlink (line rate); or a calibration "
                   "CSV of benchmarks/calibrate_comm.py (default with --alpha and --beta: none)")
    p.add_argument("--workers", type=int, nargs="+", required=True, metavar="P",
                   help="worker counts P to predict (space-separated, >= 1)")
    p.add_argument("--methods", nargs="+", metavar="METHOD",
                   help="sparsifiers and baselines (default: dense dense-wfbp dense-fp16 topk "
                        "gaussiank gaussiank-2019; gtopk = Top-k selection with gTop-k's tree "
                        "exchange; dense-wfbp = dense overlapping the backward pass; dense-fp16 "
                        "= dense with 2-byte values)")
    p.add_argument("--density", type=float,
                   help=f"rho = k/d (default: the run's with --from-run, else {DENSITY:g})")
    p.add_argument("--alpha", type=float, help="latency, seconds per message (overrides)")
    p.add_argument("--beta", type=float, help="seconds per byte (overrides)")
    p.add_argument("--compute-s", type=float, help="forward + backward seconds per step")
    p.add_argument("--select-s", type=_select_pair, action="append", default=[],
                   metavar="METHOD=S", help="selection seconds of a method (repeatable)")
    p.add_argument("--selection-csv", type=Path, metavar="FILE",
                   help="selection benchmark CSV (default: the first of RESULTS/bench/"
                        "selection.csv and the committed GPU, then CPU, references measured on "
                        "the compute's device; else the first that exists)")
    p.add_argument("--compute-csv", type=Path, metavar="FILE",
                   help="model-compute benchmark CSV of --inputs here, used when the model has "
                        "no complete run (default: RESULTS/bench/model_compute.csv, else the "
                        "committed CPU reference)")
    p.add_argument("--results", type=Path, default=Path("results"), metavar="DIR",
                   help="results root whose runs give compute times and counts")
    p.add_argument("--layout", choices=("two", "packed"), default="two",
                   help="two all-gathers as published (default) or one packed buffer")
    p.add_argument("--unpadded", action="store_true",
                   help="all-gatherv of the real counts (default: padded to the largest)")
    p.add_argument("--algorithm", choices=("ring", "recursive-doubling"), default="ring",
                   help="collective algorithm of the exchange's cost model (default: ring, "
                        "as NCCL)")
    p.add_argument("--overlap", type=float, default=0.0,
                   help="fraction of compute the exchange may hide behind (default 0: the "
                        "published code does not overlap)")
    p.add_argument("--csv", type=Path, metavar="FILE", help="write the table here")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar while the predictions are computed")
    p.add_argument("--verbose", action="store_true",
                   help="every row in detail (parts, throughput, crossover, each break-even "
                        "time, its sources) instead of the answer table")


DASH = "—"
DENSITY = 0.001  # --density without --from-run
FOOTNOTE = (f"{DASH}: does not apply (dense methods have no crossover with dense; no batch is "
            "known for the throughput; or the method compared with was not predicted)")


def _number(value, spec: str, unit: str = "") -> str:
    """value formatted by spec (and unit), or a dash when it is missing or not a number."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return DASH
    return f"{value:{spec}}{unit}"


def _crossover(gbit: float) -> str:
    if gbit is None or math.isnan(gbit):
        return f"crossover {DASH}"
    if math.isinf(gbit):
        return "beats dense at any bandwidth"
    if gbit == 0:
        return "beats dense at no lower bandwidth"
    return f"beats dense below {gbit:.3g} Gbit/s"


def _validate(args: argparse.Namespace, models) -> str:
    """The model's label; raises ValueError naming a bad argument."""
    if sum(v is not None for v in (args.model, args.params, args.from_run)) != 1:
        raise ValueError("give exactly one of --model NAME, --params N and --from-run RUN")
    if args.params is not None and not args.params >= 1:
        raise ValueError(f"--params must be >= 1, got {args.params}")
    if args.model is not None and args.model not in models.available():
        raise ValueError(f"unknown model {args.model!r}; available: "
                         f"{', '.join(models.available())}")
    if args.batch is not None and not args.batch >= 1:
        raise ValueError(f"--batch must be >= 1, got {args.batch}")
    if any(p < 1 for p in args.workers):
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    if args.density is not None and not 0 < args.density <= 1:
        raise ValueError(f"--density must be in (0, 1], got {args.density}")
    if args.compute_s is not None and not args.compute_s >= 0:
        raise ValueError(f"--compute-s must be >= 0, got {args.compute_s}")
    if args.from_run is not None:
        return str(args.from_run)
    if args.density is None:
        args.density = DENSITY
    return args.model if args.model is not None else f"params:{args.params}"


def _detail(table, methods) -> list[str]:
    """--verbose: every row with its parts, throughput, crossover, break-even times, sources."""
    from topkscope.perf import model as pm
    from topkscope.perf import report

    lines = []
    for row in table.to_dict("records"):
        overlap = f" (overlaps {row['overlap']:.3g} of compute)" if row["overlap"] else ""
        speedups = ", ".join(f"{ref} {_number(row[pm.speedup_column(ref)], '.3f', 'x')}"
                             for ref in pm.SPEEDUP_REFERENCES if ref in methods)
        name = row["method"] + (f" [{row['condition']}]" if row["condition"] else "")
        lines += [f"  P={row['workers']:<5} {name:<15} t_step {row['t_step'] * 1e3:10.3f} ms = "
                  f"compute {row['t_compute'] * 1e3:.3f} + select {row['t_select'] * 1e3:.3f} "
                  f"+ comm {row['t_comm'] * 1e3:.3f}{overlap}",
                  f"      speed-up over {speedups}; throughput "
                  f"{_number(row['throughput'], '.1f', ' samples/s')}; "
                  f"{_crossover(row['crossover_gbit'])}"]
        if row["method"] not in pm.DENSE_METHODS:
            lines.append("      break-even: " + "; ".join(
                report.breakeven_text(ref, row[pm.breakeven_column(ref)])
                for ref in pm.SPEEDUP_REFERENCES if ref in methods and ref != row["method"]))
        lines.append(f"      sources: compute {row['compute_source']}; select "
                     f"{row['select_source']}; counts {row['count_source']}; comm "
                     f"{row['comm_source']}")
    return lines


def _answer(table, methods) -> list[str]:
    """The answer table (one row per method, condition and P), per P the fastest method and
    what decides it, then the inputs' sources once."""
    from topkscope.perf import model as pm

    refs = [r for r in pm.SPEEDUP_REFERENCES if r in methods]
    dense = [r for r in pm.DENSE_METHODS if r in methods]
    rows = table.to_dict("records")
    names = [r["method"] + (f" [{r['condition']}]" if r["condition"] else "") for r in rows]
    width = max(len("method"), *map(len, names))
    head = (f"  {'P':>5}  {'method':<{width}}  {'t_step ms':>10}  "
            + "  ".join(f"{'x ' + r:>12}" for r in refs) + f"  {'select ms':>9}  "
            "break-even ms")
    lines = [head]
    never = []  # (row, name, the dense baseline it cannot beat) where no selection time wins
    for row, name in zip(rows, names):
        breakeven = DASH
        if row["method"] not in pm.DENSE_METHODS and dense:
            limit, ref = min((row[pm.breakeven_column(r)], r) for r in dense)
            breakeven = _number(limit * 1e3, '.3g') if not limit <= 0 else NONE
            if limit <= 0:
                never.append((row, name, ref))
        lines.append(f"  {row['workers']:>5}  {name:<{width}}  {row['t_step'] * 1e3:>10.3f}  "
                     + "  ".join(f"{_number(row[pm.speedup_column(r)], '.3f', 'x'):>12}"
                                 for r in refs)
                     + f"  {row['t_select'] * 1e3:>9.3g}  {breakeven}")
    lines.append("break-even ms: the longest selection that still beats every dense baseline")
    lines += _never_wins(never, rows)
    for workers in sorted({r["workers"] for r in rows}):
        at = [(r, n) for r, n in zip(rows, names) if r["workers"] == workers]
        best, name = min(at, key=lambda rn: rn[0]["t_step"])
        others = [r for r, _ in at if r is not best]
        line = f"P={workers}: fastest {name} at {best['t_step'] * 1e3:.3g} ms"
        if others:
            second = min(others, key=lambda r: r["t_step"])
            line += (f", {second['t_step'] / best['t_step']:.3g}x faster than the next, "
                     f"{second['method']}")
        parts = {"compute": best["t_compute"], "selection": best["t_select"],
                 "communication": best["t_comm"]}
        line += f"; its largest part: {max(parts, key=parts.get)}"
        if best["method"] not in pm.DENSE_METHODS and dense:
            limit = min(best[pm.breakeven_column(r)] for r in dense)
            line += (f"; it stays ahead of the dense baselines while its selection "
                     f"({best['t_select'] * 1e3:.3g} ms) takes below {limit * 1e3:.3g} ms")
        lines.append(line)
    for kind in ("compute", "select", "count", "comm"):  # each source once, with its methods
        by_source: dict[str, list[str]] = {}
        for r in rows:
            if kind in ("compute", "comm") or r["method"] not in pm.DENSE_METHODS:
                by_source.setdefault(str(r[kind + "_source"]), []).append(r["method"])
        if by_source:
            lines.append(f"sources of {kind}: " + "; ".join(
                (f"{', '.join(dict.fromkeys(m))}: " if kind in ("select", "count") else "") + src
                for src, m in by_source.items()))
    return lines


NONE = "none"  # the break-even column where no selection time can win


def _never_wins(never: list[tuple[dict, str, str]], rows: list[dict]) -> list[str]:
    """Why break-even selection times are none, in words, one line per P and dense baseline:
    without any selection the methods' steps (compute + exposed communication) already take
    longer than the baseline's, and which part makes it so (compute dominates: the baseline
    hides its exchange behind the backward pass, or has little to send)."""
    groups: dict[tuple[int, str], list[tuple[dict, str]]] = {}
    for row, name, ref in never:
        groups.setdefault((row["workers"], ref), []).append((row, name))
    lines = []
    for (workers, ref), members in groups.items():
        base = next(r for r in rows if r["method"] == ref and r["workers"] == workers)
        theirs = base["t_compute"] + base["t_comm"]
        names = ", ".join(name for _, name in members)
        without = [(r["t_compute"] + r["t_comm"]) * 1e3 for r, _ in members]
        span = (f"{min(without):.3g}" if f"{min(without):.3g}" == f"{max(without):.3g}"
                else f"{min(without):.3g}-{max(without):.3g}")
        if all(r["t_compute"] >= theirs for r, _ in members):
            why = (f"compute dominates: {ref}'s whole step ({theirs * 1e3:.3g} ms) is no longer "
                   f"than the compute alone, its exchange hidden behind the backward pass or "
                   f"small")
        else:
            why = f"their communication is longer than {ref}'s at this density and P"
        lines.append(f"{NONE} (P={workers}: {names}): no selection time can beat {ref}: "
                     f"without any selection the step takes {span} ms against its "
                     f"{theirs * 1e3:.3g} ms; {why}")
    return lines


def _predict(args: argparse.Namespace, label: str, net, methods, opts, inputs, report):
    """(table, notes) of --model or --params: scaling_table with the command's inputs."""
    results = args.results if args.results.is_dir() else None
    selection = inputs.selection_table(results, args.selection_csv,
                                       inputs.selection_device(args.inputs, args.compute_s))
    compute = inputs.compute_table(results, args.compute_csv) if args.inputs == "here" else None
    return report.scaling_table(
        [label], [net], sorted(set(args.workers)), methods, density=args.density,
        results_root=results, selection=selection, compute_s=args.compute_s,
        select_s=dict(args.select_s), opts=opts, compute=compute, inputs=args.inputs,
        batch=args.batch, d=args.params)


def _outer(table) -> list[str]:
    """An outer-loop run's rows: per P the baselines and its own exchange every H steps."""
    from topkscope.claims.pays import method_name

    lines = [f"  {'P':>5}  {'method':<24}  {'every':>5}  {'bytes/exchange':>14}  "
             f"{'t_step ms':>10}  {'x Dense':>8}  {'select ms':>9}  crossover"]
    for row in table.to_dict("records"):
        lines.append(f"  {row['workers']:>5}  {method_name(row['method']):<24}  "
                     f"{row['inner_steps']:>5}  {row['bytes_per_exchange']:>14,}  "
                     f"{row['t_step'] * 1e3:>10.3f}  {row['speedup_vs_dense']:>7.3f}x  "
                     f"{row['t_select'] * 1e3:>9.3g}  {_crossover(row['crossover_gbit'])}")
    lines.append("an outer-loop run: per inner step, t = t_compute + (t_select + T_exchange) / H "
                 "(topkscope.perf.outer); Dense is DDP (an all-reduce every step); select ms "
                 "per inner step")
    for kind in ("compute", "select", "count", "comm"):
        lines.append(f"sources of {kind}: " + "; ".join(dict.fromkeys(
            str(r[kind + "_source"]) for r in table.to_dict("records"))))
    return lines


def main(args: argparse.Namespace) -> int:
    from topkscope import models
    from topkscope.claims.pays import pays
    from topkscope.io import write_bytes_atomic
    from topkscope.perf import inputs, report
    from topkscope.perf import model as pm
    from topkscope.perf.networks import DEPRECATED_NAMES, resolve
    from topkscope.perf.pays import run_prediction
    from topkscope.sparsify import available as sparsifiers

    try:
        label = _validate(args, models)
        methods = args.methods or list(pm.DEFAULT_METHODS)
        known = set(sparsifiers()) | set(pm.MODEL_METHODS)
        unknown = [m for m in methods if m not in known]
        if unknown:
            raise ValueError(f"unknown method(s) {unknown}; allowed: {', '.join(sorted(known))}")
        if "dense" not in methods:
            methods = ["dense", *methods]
        net = resolve(args.network, args.alpha, args.beta)
        if str(args.network).lower() in DEPRECATED_NAMES:
            print(f"note: --network {args.network} is deprecated; it is now named "
                  f"{DEPRECATED_NAMES[str(args.network).lower()]}", file=sys.stderr)
        opts = pm.Options(layout=args.layout, padded=not args.unpadded,
                          algorithm=args.algorithm, overlap=args.overlap)
        from topkscope import progress

        with progress.bar(total=1, desc="scale: predict", unit="table",
                          enabled=not args.no_progress) as bar:
            if args.from_run is not None:
                table, notes, setting = run_prediction(
                    args.from_run, [net], sorted(set(args.workers)), compute_s=args.compute_s,
                    density=args.density, batch=args.batch, methods=methods,
                    select_s=dict(args.select_s), selection_csv=args.selection_csv, opts=opts)
                label = f"{setting.label} of {args.from_run}"
                given = args.density is not None
                args.density = args.density if given else setting.density
                taken = [f"from the run: d from {setting.d_source}"
                         + ("" if given else f"; density from {setting.density_source}")]
            else:
                table, notes = _predict(args, label, net, methods, opts, inputs, report)
                taken = []
            bar.update()
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if table.empty:
        raise CommandError(f"nothing to predict for {label}: " + "; ".join(notes))
    first = table.iloc[0]
    lines = [f"{label}: d = {int(first['d']):,}, density {args.density:g}, network "
             f"{net.name} (alpha {net.alpha:.3g} s, beta {net.beta:.3g} s/B = "
             f"{net.bandwidth_gbit:.3g} Gbit/s), inputs: {first['inputs']}, batch per worker "
             f"{_number(first['batch_per_worker'], '.0f')}, {opts.label()}", *taken]
    if first["inputs_warning"]:
        lines.append(f"warning: {first['inputs_warning']}")
    if "inner_steps" in table:  # an outer-loop run: an exchange every H steps
        lines += _outer(table)
    else:
        lines += (_detail(table, methods) if args.verbose else _answer(table, methods))
    lines += [f"pays? {p.text}" for P in sorted(set(args.workers))
              for p in pays(table, P)]
    if any(DASH in line for line in lines):
        lines.append(FOOTNOTE)
    print("\n".join(wrapped(lines)))
    if args.csv is not None:
        write_bytes_atomic(args.csv, table.to_csv(index=False).encode())
        print(f"wrote {args.csv}")
    return 0
