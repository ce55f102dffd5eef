"""The measured-counts table of the P = 16 rows: the published Gaussian-k's count / k on every
model with published GPU inputs, measured in run folders here and committed as
results/reference/scaling/measured_counts.csv, which topkscope.perf.gpu_bands reads (no claims
table is read: the numbers are computed once, from the runs, and passed down as a file).

    python -m topkscope.perf.counts RESULTS [--out CSV]

Per model (count_band): the rule's largest count over workers / k per step at the target
density, warm-up steps left out (topkscope.perf.inputs.count_steps), pooled over runs; the 5th,
50th and 95th percentile over steps (COUNT_PERCENTILES). From the rule's own complete runs of
the model where any ran (its own training), else from the recorder on the u of the model's
complete Top-k runs (Top-k's u: not its own training, said so). The row's source names the
runs: profile, seeds, P, dataset and stand-in, model arguments, commit.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from topkscope.perf import gpu_bands as gb
from topkscope.perf.gpu_bands import ON_TOPK_U, OWN_TRAINING
from topkscope.perf.inputs import count_steps, runs_here

COUNT_PERCENTILES = (5, 50, 95)
COLUMNS = ["model", "method", "density", "basis", "n_runs", "n_steps", "count_p5",
           "count_median", "count_p95", "source"]


def count_band(results_root: str | Path, model: str, method: str, density: float
               ) -> dict | None:
    """`method`'s count/k band for `model` at `density` (module docstring): one row of the
    table, None without a run that measured it."""
    from topkscope.analysis.runs import load

    for basis, wanted in ((OWN_TRAINING, {"sparsifier": method, "density": density}),
                          (ON_TOPK_U, {"sparsifier": "topk", "density": density})):
        per_run, manifests = [], []
        for found in runs_here(results_root, model=model, **wanted):
            steps = count_steps(load(found.path), method, density)
            if steps is not None:
                per_run.append(steps.to_numpy(float))
                manifests.append(found.manifest)
        if per_run:
            return _row(model, method, density, basis, per_run, manifests)
    return None


def _row(model, method, density, basis, per_run, manifests) -> dict:
    ratios = np.concatenate(per_run)
    p5, p50, p95 = np.percentile(ratios, COUNT_PERCENTILES)

    def values(key, how=str):
        return "/".join(sorted({how(m.get(key)) for m in manifests}))

    width = values("config", lambda c: str((c or {}).get("model_args") or "paper size"))
    source = (f"measured here: {method}'s largest count over workers / k per step "
              + ("in its own training (train.parquet)" if basis == OWN_TRAINING else
                 f"as the recorder measured it on {ON_TOPK_U} (stats {method}_count, "
                 "largest over ranks), not in its own training")
              + f", {len(ratios)} steps at rho={density:g} (warm-up steps left out) of "
              f"{len(per_run)} {model} run(s): profile {values('profile')}, seeds "
              f"{values('seed')}, P={values('world_size')}, {values('dataset')} (stand-in "
              f"{values('dataset_substitute', lambda s: s or 'none')}), model {width}, "
              f"commit {values('git_commit', lambda c: str(c)[:7])}")
    return {"model": model, "method": method, "density": density, "basis": basis,
            "n_runs": len(per_run), "n_steps": int(ratios.size), "count_p5": float(p5),
            "count_median": float(p50), "count_p95": float(p95), "source": source}


def counts_table(results_root: str | Path, models, method: str = gb.METHOD,
                 density: float = gb.pm.PAPER_DENSITY) -> pd.DataFrame:
    """One count_band row per model that has one."""
    rows = [r for m in models if (r := count_band(results_root, m, method, density))]
    return pd.DataFrame(rows, columns=COLUMNS)


def write(results_root: str | Path, out: str | Path = gb.COUNTS_CSV) -> Path:
    """The table for every model with published GPU inputs (gpu_bands.models), from the run
    folders under results_root, into `out`; ValueError when results_root is not a folder."""
    from topkscope.io import write_bytes_atomic

    root = Path(results_root)
    if not root.is_dir():
        raise ValueError(f"results root {str(root)!r} is not a folder")
    table = counts_table(root, gb.models(gb.Sources.committed()))
    return write_bytes_atomic(Path(out), table.to_csv(index=False).encode())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="a results root holding the run folders")
    parser.add_argument("--out", type=Path, default=gb.COUNTS_CSV, help="the CSV to write")
    args = parser.parse_args(argv)
    try:
        path = write(args.results, args.out)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    print(gb.counts_markdown(gb.read_counts(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
