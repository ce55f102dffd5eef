"""`topkscope runs [ROOT...]`: the runs under results roots, one line each, as people name them.

Each ROOT (default: ./results) is a results root, an experiment folder or a run folder; a
results root nested in it (results/standard/ of `make reproduce-figures PROFILE=standard`
below results/: topkscope.manifest.results_roots) is listed as a root of its own. Runs are
found by manifest content (topkscope.manifest.find_runs, any status), and each line names
the root it came from, the run folder relative to it (<experiment>/<run_id>), then the model,
the method, the density, the seed, the training condition, the status and the steps done, in
the display names of figures and tables (topkscope.names; the model of a loop of one's own:
topkscope.manifest.model_of). A run whose manifest.json cannot be read is listed as
`damaged`, with why, and the command exits 1 after listing the others.

Bad input (a ROOT that does not exist, is a file or holds no run folder): one line, exit 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from topkscope.commands import CommandError

HELP = "list the runs under results roots: model, method, density, seed, status, steps"
HEADER = ("root", "run", "model", "method", "density", "seed", "condition", "status", "steps")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("roots", nargs="*", type=Path, metavar="ROOT",
                   help="results root, experiment folder or run folder (default: results)")


def _steps(manifest: dict) -> str:
    """'40/40' (done of planned), '12' (done), or '-' where the manifest says neither."""
    done, total = manifest.get("steps_done"), manifest.get("total_steps")
    if done is None:
        return "-" if total is None else f"?/{total}"
    return f"{done}/{total}" if total is not None else str(done)


def _status(manifest: dict) -> str:
    """The status, with the step a diverged run stopped at."""
    from topkscope.manifest import diverged_at

    status = str(manifest.get("status") or "?")
    step = diverged_at(manifest)
    return f"{status} (diverged at step {step})" if step is not None else status


def run_line(root: Path, path: Path, manifest: dict) -> tuple[str, ...]:
    """The cells of one run's line (HEADER)."""
    from topkscope.condition import describe, run_condition
    from topkscope.manifest import model_of
    from topkscope.plots.titles import model_name, sparsifier_name

    model = model_of(manifest)
    density = manifest.get("density")
    seed = manifest.get("seed")
    return (str(root), path.relative_to(root).as_posix() or ".",
            model_name(model) if model else "not named",
            sparsifier_name(manifest["sparsifier"]) if manifest.get("sparsifier")
            else "not named",
            f"{density:g}" if isinstance(density, (int, float)) else "-",
            "-" if seed is None else str(seed),
            describe(run_condition(manifest), density=False) or "no warm-up", _status(manifest),
            _steps(manifest))


def table(rows: list[tuple[str, ...]]) -> str:
    """rows under HEADER, each column as wide as its widest cell (the last one not padded)."""
    lines = [HEADER, *rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADER) - 1)]
    return "\n".join("  ".join([*(cell.ljust(w) for cell, w in zip(line, widths)), line[-1]])
                     .rstrip() for line in lines)


def main(args: argparse.Namespace) -> int:
    from topkscope.manifest import EXPECTED_FOLDER, find_runs, results_roots

    given = args.roots or [Path("results")]
    rows, damaged, seen = [], [], set()
    for root in given:
        if not root.is_dir():
            what = "is a file, not a folder" if root.exists() else "does not exist"
            raise CommandError(f"{str(root)!r} {what} ({EXPECTED_FOLDER})")
        for base in results_roots(root):
            broken: list = []
            found = find_runs(base, status=None, damaged=broken)
            here = [run_line(base, r.path, r.manifest) for r in found
                    if r.path.resolve() not in seen]
            here += [(str(base), b.path.relative_to(base).as_posix() or ".", *("-",) * 5,
                      "damaged", b.reason) for b in broken if b.path.resolve() not in seen]
            rows += sorted(here, key=lambda row: row[1])
            damaged += [b for b in broken if b.path.resolve() not in seen]
            seen |= {r.path.resolve() for r in [*found, *broken]}
    if not rows:
        raise CommandError(f"no run folders under {', '.join(repr(str(r)) for r in given)} "
                           f"({EXPECTED_FOLDER})")
    print(table(rows))
    if damaged:
        print(f"runs: {len(damaged)} damaged run(s): a manifest.json that cannot be read (the "
              "status column says why); move them aside or rerun them", file=sys.stderr)
        return 1
    return 0
