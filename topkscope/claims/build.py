"""The one builder of the claims table: `topkscope claims`, `topkscope figures` and
`topkscope report` all call `build`, so the same runs give the same table by every command.

    table = build(runs, Options(...), roots=[results_root])       # a DataFrame, COLUMNS
    rows = build_rows(runs, options, roots=roots)                 # the ClaimRow objects

Per (model, dataset, substitute) of the runs, in this order: the rows of runs imported from
published logs (section published: no seeds, never pooled with ours), the condition-scope
claims on every (training sparsifier, condition) of recorded u (topkscope.analysis.units), then
the other model-scope claims (counts in training, convergence, explanation). Then, with
`roots` and Options.predictions, the table-scope claims: the predicted P = 16 speed-ups and
times to accuracy of the runs' models. Each row carries the profile and model arguments of the
runs behind it, and what differs from the figures driver's plan (`differing`).

Runs: complete ones feed every claim; failed ones (manifest status `failed`) count as failed
seeds in the convergence claims, and the steps they recorded before they stopped feed the
distribution claims too, except a run whose training diverged (`diverged_at_step`: its u blew
up, a failed seed, not a sample of training's u).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

import pandas as pd

from topkscope.analysis.units import NO_UNITS, condition_units, model_key
from topkscope.claims.inputs import Context, ModelRuns, Options
from topkscope.claims.registry import Claim, get_claim, registered
from topkscope.claims.row import ClaimRow, frame, to_csv
from topkscope.condition import Condition
from topkscope.io import atomic_write
from topkscope.manifest import diverged_at, is_published, model_of, not_ours


def build_rows(runs: Iterable, options: Options | None = None, *,
               roots: Sequence[str | Path] | None = None,
               differing: dict[str, str] | None = None, notes: list | None = None
               ) -> list[ClaimRow]:
    """Every registered claim's rows for `runs` (module docstring); a run whose manifest
    names no model or sparsifier is tabulated as "unnamed" (its u as a training sparsifier of
    its own). roots: the results roots
    the runs were found under (the prediction inputs' roots; None: no predictions).
    differing: resolved run folder -> what differs from the plan. notes: a list that gets what
    the predictions left out, in words."""
    options = options or Options()
    runs = [_named(r) for r in runs]
    groups: dict[tuple, list] = {}
    for run in runs:
        groups.setdefault(model_key(run.manifest), []).append(run)
    rows: list[ClaimRow] = []
    for key in sorted(groups, key=lambda k: tuple("" if v is None else str(v) for v in k)):
        base = {"model": key[0], "dataset": key[1], "dataset_substitute": key[2]}
        ours = [r for r in groups[key] if not is_published(r.manifest)]
        model = ModelRuns(key, ours, [r for r in groups[key] if is_published(r.manifest)],
                          options)
        for claim in registered("model", section="published"):
            rows += [_row(claim, f, base, options) for f in claim.evaluate(model)]
        if not ours:
            continue
        sparsifiers = (*options.sparsifiers, *((UNNAMED,) if any(
            r.manifest["sparsifier"] == UNNAMED for r in ours) else ()))
        trained = [r for r in ours if r.manifest.get("sparsifier") in sparsifiers
                   and diverged_at(r.manifest) is None]
        for units in condition_units(trained, sparsifiers, options.max_snapshots,
                                     options.max_n):
            at = {"condition": (units.row_condition() if units.condition is not None
                                else NO_UNITS), "n_runs": units.n_runs,
                  "sparsifier": units.sparsifier, "run_ids": run_ids(units.runs)}
            for claim in registered("condition"):
                rows += [_row(claim, {**at, **f}, base, options) for f in claim.evaluate(units)]
        for claim in registered("model"):
            if claim.section != "published":
                rows += [_row(claim, f, base, options) for f in claim.evaluate(model)]
    if roots and options.predictions:
        context = Context(runs, [Path(r) for r in roots], options)
        datasets = {k[0]: k for k in groups}  # a prediction's model: the dataset it trained on
        for claim in registered("table"):
            for row in claim.evaluate(context):
                if row.dataset is None and row.model in datasets:
                    row.dataset, row.dataset_substitute = datasets[row.model][1:]
                rows.append(row)
        if notes is not None:
            notes += context.notes
    _add_run_columns(rows, runs, differing or {})
    return rows


def build(runs: Iterable, options: Options | None = None, *,
          roots: Sequence[str | Path] | None = None, differing: dict[str, str] | None = None,
          notes: list | None = None, **option_values) -> pd.DataFrame:
    """build_rows as the claims table (topkscope.claims.row.COLUMNS). Options may also be
    given by name (build(runs, margin=0.5)); ValueError naming a bad one."""
    if option_values:
        try:
            options = Options(**{**(vars(options) if options else {}), **option_values})
        except TypeError as exc:
            raise ValueError(f"bad claims option: {exc}") from None
    return frame(build_rows(runs, options, roots=roots, differing=differing, notes=notes))


def write(runs: Iterable, path: str | Path, **options) -> pd.DataFrame:
    """build(runs, **options), written atomically as CSV to path; returns the table."""
    table = build(runs, **options)
    atomic_write(path, lambda tmp: to_csv(table, tmp))
    return table


def run_ids(runs) -> str:
    """'<experiment>/<run id>' of each run, sorted, comma-separated: the runs behind a row."""
    return ",".join(sorted({f"{r.manifest.get('experiment') or ''}/"
                            f"{r.manifest.get('run_id') or Path(r.path).name}" for r in runs}))


UNNAMED = "unnamed"  # the model or sparsifier of a run whose manifest names none


class _Renamed:
    """A loaded run seen with the model its recorder saw (manifest.model_of: "Net (25,818
    parameters)") or "unnamed" for the model or sparsifier its manifest does not name (a
    Recorder in a loop of one's own); every other attribute is the run's."""

    def __init__(self, run, manifest: dict) -> None:
        self._run, self.manifest = run, manifest

    def __getattr__(self, name):
        return getattr(self._run, name)


def _named(run):
    m = run.manifest
    if m.get("model") is not None and m.get("sparsifier") is not None:
        return run
    return _Renamed(run, {**m, "model": model_of(m) or UNNAMED,
                          "sparsifier": m.get("sparsifier") or UNNAMED})


def _row(claim: Claim, fields: dict, base: dict, options: Options) -> ClaimRow:
    """A ClaimRow from a claim's measured fields: the registered claim that made it
    (`claim_key` where the fields name another, e.g. the traffic rows the accuracy claim
    makes), its row name, statement, rule, section and family filled in from that claim where
    the fields do not give their own, and the condition's typed columns from a Condition."""
    owner = get_claim(fields.get("claim_key", claim.name)) or claim
    values = dict(fields)
    cond = values.pop("condition", "")
    typed = values.pop("fields", None)  # a Condition behind a condition given in words
    recorded_at = values.pop("recorder_density", None)
    if isinstance(cond, Condition) and recorded_at is not None:
        cond = replace(cond, recorder_density=float(recorded_at))
    values.setdefault("sparsifier", "")
    values.setdefault("claim", owner.row_name(values["sparsifier"]))
    values.setdefault("statement", owner.statement_for(values["sparsifier"],
                                                       values.get("metric", "")))
    values.setdefault("rule", owner.rule_text(options))
    values.setdefault("section", owner.section)
    values["claim_key"], values["claim_family"] = owner.name, owner.family
    row = ClaimRow(**base, **values, condition=cond if isinstance(cond, str) else "")
    if isinstance(cond, Condition) or typed is not None:
        row.set_condition(cond if isinstance(cond, Condition) else typed)
    return row


def _add_run_columns(rows: list[ClaimRow], runs: list, differing: dict[str, str]) -> None:
    """profile and model_args of the runs behind each row (per model), and differs_from_plan:
    "<run folder>: <what differs>" for each of them named in `differing`."""
    setting: dict[tuple, tuple[str, str]] = {}
    differs: dict[tuple, list[str]] = {}
    for run in runs:
        key = model_key(run.manifest)
        args = (run.manifest.get("config") or {}).get("model_args") or {}
        setting.setdefault(key, (str(run.manifest.get("profile") or ""),
                                 ", ".join(f"{k}={v}" for k, v in sorted(args.items()))))
        what = differing.get(str(Path(run.path).resolve()))
        if what:
            differs.setdefault(key, []).append(f"{Path(run.path).name}: {what}")
    for row in rows:
        key = (row.model, row.dataset, row.dataset_substitute)
        if key in setting:
            row.profile, row.model_args = setting[key]
        row.differs_from_plan = "; ".join(differs.get(key, []))


def what_is_missing(run) -> str | None:
    """Why the claims cannot read a loaded run, in words (None: they can): a manifest.json
    that is not topkscope's, a run that failed at set-up (before its first step) or one with
    no recorded rows. A run whose manifest names no model or sparsifier (a Recorder in a loop
    of one's own) is read, named "unnamed"."""
    m = run.manifest
    foreign = not_ours(m)
    if foreign is not None:
        return foreign
    rows = {name: len(getattr(run, name)) for name in ("train", "eval", "stats")}
    if not any(rows.values()):
        if m.get("status") == "failed":
            return (f"it failed at set-up, before its first step ({m.get('error')}): no "
                    "recorded rows (train.parquet, eval.parquet, stats/) to tabulate")
        return ("it holds no recorded rows (train.parquet, eval.parquet and stats/ are empty "
                "or absent): nothing to tabulate")
    return None
