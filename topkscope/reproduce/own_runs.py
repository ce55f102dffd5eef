"""A user's own experiments in `topkscope figures`: the experiment folders of runs that no
`topkscope run` made (a DDP-hook run, launcher `ddp-hook`, or a Recorder in a loop of one's
own, launcher `user`) and whose experiment the plan does not have.

Nothing is run for them: each is drawn from its complete and failed runs, with the figures its
runs hold the data for (figures_for), and its runs go to the claims like the plan's.

    own_experiments(results_root, plan_names)   experiment -> its run folders
    figures_for(runs)                           the figures those loaded runs can draw
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from topkscope.reproduce import plan

OWN_LAUNCHERS = ("ddp-hook", "user")   # runs not made by `topkscope run` (sim, torchrun)
DRAWN_STATUSES = ("complete", "failed")


def own_experiments(results_root: str | Path, plan_names: Iterable[str]) -> dict[str, list[Path]]:
    """experiment -> run folders (sorted by path) of every complete or failed own run under
    results_root whose experiment (the manifest's, else the name of the folder holding the
    run, as the hook names it) is not among plan_names."""
    from topkscope.manifest import find_runs

    skip = set(plan_names)
    root = Path(results_root).resolve()
    found: dict[str, list[Path]] = {}
    for run in find_runs(results_root, status=DRAWN_STATUSES):
        m = run.manifest
        parent = run.path.resolve().parent  # a Recorder's own manifest names no experiment
        name = m.get("experiment") or (parent.name if parent != root else None)
        if m.get("launcher") in OWN_LAUNCHERS and name and name not in skip:
            found.setdefault(str(name), []).append(run.path)
    return {name: sorted(paths) for name, paths in sorted(found.items())}


def _u_rows(run):
    st = run.stats
    return st[(st["kind"] == "u") & (st["layer"] == "__global__")] if len(st) else st


def figures_for(runs: Sequence) -> tuple[str, ...]:
    """The figures of plan.DISTRIBUTION_FIGURES and plan.CONVERGENCE_FIGURES that the loaded
    runs hold data for, drawn from the first run (put it first: distribution_first): the
    statistics of u (contraction, normality), its histograms, its snapshots (sorted magnitudes,
    Q-Q, δ(k) against the fitted families), approximate selectors' counts (selectors); a loss noted per step (convergence)."""
    first = runs[0]
    u = _u_rows(first)
    out = []
    if len(u) and u["topk_ratio"].notna().any():
        out.append("contraction")
    if len(u) and u["skew"].notna().any():
        out.append("normality")
    hist = first.hist
    if len(hist) and (hist["kind"] == "u").any():
        out.append("histogram")
    if len(first.snapshots):
        out += ["sorted_magnitudes", "qq", "delta_curve"]
    counts = [c for c in u.columns if c.endswith("_count")]
    if any(u[c].notna().any() for c in counts):
        out.append("selectors")
    if any(len(r.train) and r.train["loss"].notna().any() and r.manifest.get("density")
           is not None for r in runs):
        out.append("convergence")
    order = plan.DISTRIBUTION_FIGURES + plan.CONVERGENCE_FIGURES
    return tuple(sorted(out, key=order.index))


def distribution_first(runs: Sequence) -> list:
    """The runs with the one most recorded first (complete before failed, then by u rows)."""
    return sorted(runs, key=lambda r: (r.manifest.get("status") != "complete",
                                       -len(_u_rows(r)), str(r.path)))
