"""Load result folders (results/<experiment>/<run_id>/) into pandas DataFrames.

    run = load("results/fnn3-mnist/topk-rho0.001-p2-s0")
    run.manifest["status"]; run.train; run.eval; run.stats; run.hist; run.snapshots
    u = run.snapshot(step=800, rank=0)                     # float32 whole-model u
    find("results", experiment="fnn3-mnist")               # run folders, sorted by path

Both open runs the project's one way: the manifest with topkscope.manifest.Manifest.load,
run folders selected by manifest content with topkscope.manifest.find_runs.

Every table on disk starts with the run's identity columns (schema.RUN_KEYS: experiment,
run_id), so that the tables of many runs read as one; a loaded run is one run, and `load`
leaves them out (they are in `run.manifest`). The stats parts hold a column group for every
selector a recorder may evaluate (null where it did not): `load` keeps the groups of the
selectors the manifest says were recorded (`recorder.sparsifiers`) and any other that holds a
value.

stats and hist concatenate every part of every rank. A part is complete by construction
(written under a temporary name, then renamed), so a run killed mid-way loads up to its
last flush. If a step was recorded twice (a resumed run redoing steps after its
checkpoint, or a recorder opened with mode="append" recording a step again), the row from the
later part wins: rows are de-duplicated by key (STATS_KEYS, HIST_KEYS). Absent tables load as empty frames with the
documented columns.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from topkscope import schema
from topkscope.manifest import DamagedRun, Manifest, find_runs, run_row
from topkscope.schema import EVAL_COLUMNS, PART_GLOB, TRAIN_COLUMNS, column_prefix
from topkscope.schema import PART_RE as _PART_RE
from topkscope.schema import SNAPSHOT_RE as _SNAPSHOT_RE

STATS_KEYS = list(schema.STATS_KEYS)
HIST_KEYS = list(schema.HIST_KEYS)
COORD_KEYS = list(schema.COORD_KEYS)


def _coords_empty() -> pd.DataFrame:
    return schema.coords_schema().empty_table().to_pandas()


@dataclass
class Run:
    """One result folder, loaded."""

    path: Path
    manifest: dict[str, Any]
    train: pd.DataFrame
    eval: pd.DataFrame
    stats: pd.DataFrame
    hist: pd.DataFrame
    snapshots: pd.DataFrame  # step, rank, kind, path
    # the recorder's sampled coordinates (coords/): step, rank, kind, coordinate, layer, value
    coords: pd.DataFrame = dataclasses.field(default_factory=_coords_empty)
    # the snapshot analyses measured on this loaded run (kept by analysis.snapshots.analyze_loaded)
    analyses: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)

    @property
    def status(self) -> str | None:
        return self.manifest.get("status")

    def snapshot(self, step: int, rank: int = 0, kind: str = "u") -> np.ndarray:
        """The saved float32 whole-model vector of `kind` at (step, rank)."""
        hit = self.snapshots[(self.snapshots["step"] == step) & (self.snapshots["rank"] == rank)
                             & (self.snapshots["kind"] == kind)]
        if hit.empty:
            have = sorted({(int(s), int(r)) for s, r, k in
                           self.snapshots[["step", "rank", "kind"]].itertuples(index=False)
                           if k == kind})
            raise ValueError(f"no {kind} snapshot at step {step}, rank {rank} in "
                             f"{str(self.path)!r}; available (step, rank): {have[:20]}")
        return np.load(hit["path"].iloc[0], allow_pickle=False)


def _typed_empty(columns: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in columns.items()})


def read_table(path: Path, remedy: str, filters: list | None = None) -> pa.Table:
    """pyarrow.parquet.read_table, but a damaged or unreadable file raises a one-line
    ValueError naming the file, what went wrong and `remedy` (what the user can do)."""
    try:
        return pq.read_table(path, filters=filters)
    except (pa.ArrowException, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"{str(path)!r} is not a readable parquet file ({reason}); "
                         f"{remedy}") from None


def _damaged_part(path: Path) -> str:
    return (f"move it out of {str(path.parent)!r} to load the rest of the run, "
            "or run the experiment again")


def _without_identity(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns=[k for k in schema.RUN_KEYS if k in frame.columns])


def _read_single(path: Path, columns: dict[str, str]) -> pd.DataFrame:
    if not path.is_file():
        return _typed_empty(columns)
    return _without_identity(read_table(path, _damaged_part(path)).to_pandas())


def _recorded_selectors(stats: pd.DataFrame, manifest: dict[str, Any]) -> pd.DataFrame:
    """stats without the column groups of selectors the run did not evaluate: not in the
    manifest's recorder.sparsifiers, and null in every row."""
    names = (manifest.get("recorder") or {}).get("sparsifiers") or []
    recorded = {column_prefix(n) for n in names}
    drop = []
    for prefix in schema.selector_prefixes(stats.columns):
        group = [c for c in schema.sparsifier_columns([prefix]) if c in stats.columns]
        if prefix not in recorded and len(group) == len(schema.SPARSIFIER_SUFFIXES) \
                and not stats[group].notna().to_numpy().any():
            drop += group
    return stats.drop(columns=drop)


def _stats_empty(manifest: dict[str, Any]) -> pd.DataFrame:
    names = (manifest.get("recorder") or {}).get("sparsifiers") or []
    prefixes = [column_prefix(n) for n in names]
    frame = schema.stats_schema(prefixes).empty_table().to_pandas()
    for col in schema.sparsifier_columns(prefixes):
        if col.endswith("_count"):
            frame[col] = frame[col].astype("Int64")
    return frame


def _hist_empty() -> pd.DataFrame:
    return schema.hist_schema().empty_table().to_pandas()


def _part_order(path: Path) -> tuple[int, int]:
    m = _PART_RE.match(path.name)
    return (int(m.group(1)), int(m.group(2))) if m else (1 << 30, 0)


def read_parts(folder: Path, keys: list[str], filters: list | None = None,
               dedupe: bool = True) -> pd.DataFrame | None:
    """Concatenate folder/part-*.parquet (ranks, then sequence); later duplicates of keys win.

    None when the folder holds no parts. filters: pyarrow row filters, e.g.
    [("layer", "==", "__global__")]. Sparsifier counts (S_count) and integer columns with
    gaps load as pandas' nullable Int64.
    """
    if not folder.is_dir():
        return None
    parts = sorted((p for p in folder.glob(PART_GLOB) if _PART_RE.match(p.name)),
                   key=_part_order)
    if not parts:
        return None
    tables = [read_table(p, _damaged_part(p), filters) for p in parts]
    table = pa.concat_tables(tables, promote_options="default")
    frame = _without_identity(table.to_pandas())
    for field in table.schema:  # nullable counts stay integers (pandas' Int64)
        if field.name in schema.RUN_KEYS:
            continue
        if pa.types.is_integer(field.type) and (
            frame[field.name].dtype.kind == "f" or field.name.endswith("_count")
        ):
            frame[field.name] = frame[field.name].astype("Int64")
    if dedupe and len(parts) > 1 and all(k in frame.columns for k in keys):
        dup = frame.duplicated(keys, keep="last")
        if dup.any():
            frame = frame[~dup]
    sort = [k for k in keys if k in frame.columns]
    return frame.sort_values(sort[:2], kind="stable").reset_index(drop=True)


def list_snapshots(folder: Path) -> pd.DataFrame:
    rows = []
    if folder.is_dir():
        for p in folder.iterdir():
            m = _SNAPSHOT_RE.match(p.name)
            if m:
                rows.append((int(m.group(1)), int(m.group(2)), m.group(3) or "u", str(p)))
    frame = pd.DataFrame(rows, columns=["step", "rank", "kind", "path"])
    frame = frame.astype({"step": "int64", "rank": "int64", "kind": "object", "path": "object"})
    return frame.sort_values(["step", "rank", "kind"]).reset_index(drop=True)


def _filters(layers, kinds, ranks) -> list | None:
    out = []
    for column, values in (("layer", layers), ("kind", kinds), ("rank", ranks)):
        if values is not None:
            values = [values] if isinstance(values, (str, int)) else list(values)
            out.append((column, "in", values))
    return out or None


def load(run_dir: str | Path, *, layers=None, kinds=None, ranks=None) -> Run:
    """Read a result folder; ValueError if it has no manifest.json (not a result folder).

    layers / kinds / ranks (a value or a list) keep only those rows of stats and hist (kinds and
    ranks also of coords), read
    that way from disk (long runs hold many layers x kinds x ranks rows per step).
    Duplicate rows are resolved (later part wins) for runs resumed or appended to (manifest
    `resumed_at` / `appended_at`); other runs cannot hold duplicates.
    """
    path = Path(run_dir)
    manifest = Manifest.load(path)
    filters = _filters(layers, kinds, ranks)
    resumed = bool(manifest.get("resumed_at") or manifest.get("appended_at"))
    stats = read_parts(path / "stats", STATS_KEYS, filters, dedupe=resumed)
    hist = read_parts(path / "hist", HIST_KEYS, filters, dedupe=resumed)
    coords = read_parts(path / "coords", COORD_KEYS, _filters(None, kinds, ranks),
                        dedupe=resumed)
    return Run(
        path=path,
        manifest=manifest,
        train=_read_single(path / "train.parquet", TRAIN_COLUMNS),
        eval=_read_single(path / "eval.parquet", EVAL_COLUMNS),
        stats=_stats_empty(manifest) if stats is None else _recorded_selectors(stats, manifest),
        hist=_hist_empty() if hist is None else hist,
        snapshots=list_snapshots(path / "snapshots"),
        coords=_coords_empty() if coords is None else coords,
    )


def load_found(found, named=(), damaged: list | None = None, loader=None,
               progress=None) -> list[Run]:
    """load() each found run (manifest.FoundRun, or a path) in order. A run whose tables
    cannot be read (a part that is not parquet: load's one-line ValueError naming the file) is
    appended to `damaged` (a list: a manifest.DamagedRun) and left out when it was found under
    a folder — not one of the `named` paths itself — so one damaged run does not block the
    rest; otherwise the error is raised, as it is when every run found is damaged (nothing
    to show). loader: load's stand-in (a command's); progress: called once per run read."""
    explicit = {Path(p).resolve() for p in named}
    runs, before = [], len(damaged or [])
    for item in found:
        path = Path(getattr(item, "path", item))
        try:
            runs.append((loader or load)(path))
        except ValueError as exc:
            if damaged is None or path.resolve() in explicit:
                raise
            damaged.append(DamagedRun(path, " ".join(str(exc).split())))
        if progress is not None:
            progress()
    if not runs and damaged is not None and len(damaged) > before:
        first, more = damaged[before], len(damaged) - before - 1
        raise ValueError(f"no readable run: {first}" + (f" (and {more} more)" if more else ""))
    return runs


def runs_table(roots, status: Any = None) -> pd.DataFrame:
    """The run.parquet row of every run folder under roots (run, experiment or results
    folders; `status` as find_runs, default any), built from the manifests, so runs written
    before run.parquet existed have one too: schema.RUN_COLUMNS, sorted by path."""
    rows = [run_row(r.path, r.manifest) for r in find_runs(roots, status=status)]
    return pa.Table.from_pylist(rows, schema=schema.run_schema()).to_pandas()


def find(results_root: str | Path, experiment: str | None = None) -> list[Path]:
    """Run folders of any status under results_root (a results root, an experiment folder or
    a run folder) whose manifest names `experiment` (None: any); sorted by path.
    topkscope.manifest.find_runs selects on more fields (status, sparsifier, seed, ...)."""
    root = Path(results_root)
    if not root.is_dir():
        raise ValueError(f"results root {str(root)!r} is not a folder")
    return [r.path for r in find_runs(root, experiment=experiment, status=None)]


def failed_at_setup(run: Run) -> bool:
    """True for a run that failed before its first step: status failed and no recorded row
    (train.parquet, eval.parquet, stats/ empty or absent), e.g. an imported job whose launcher
    found no hostfile."""
    if run.manifest.get("status") != "failed":
        return False
    return not any(len(getattr(run, name)) for name in ("train", "eval", "stats"))


def skip_setup_failures(runs: list[Run], named=()) -> tuple[list[Run], list[str]]:
    """(the runs less those that failed at set-up, one line per run left out naming it). A run
    whose folder is one of `named` (a path given explicitly) is never left out: the caller
    refuses it (topkscope.claims.what_is_missing says why); only runs found under a
    results root or an experiment folder are skipped, so one such folder does not block a
    whole root."""
    explicit = {Path(p).resolve() for p in named}
    kept, notes = [], []
    for run in runs:
        if failed_at_setup(run) and Path(run.path).resolve() not in explicit:
            notes.append(f"skipped {run.path}: it failed at set-up, before its first step "
                         f"({run.manifest.get('error')})")
        else:
            kept.append(run)
    return kept, notes
