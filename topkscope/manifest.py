"""manifest.json of a result folder: what ran, with what, and whether it finished; and the
one way to open and find runs: `Manifest.load` reads a run's manifest (one-line errors),
`find_runs` selects run folders by what their manifests say (never by folder name), `matches`
is its rule for manifests already read, and `runs_at` resolves command-line paths (run,
experiment or results folders) strictly.

Status moves running -> complete | failed | interrupted (a run stopped by SIGINT or SIGTERM,
resumable). Every write is atomic, so a killed run (SIGKILL) leaves the last good manifest with
status `running` (never `complete`).

A run that is resumed (or appended to) runs in segments: `segments` lists each one as
{start_time, end_time, status, error, signal} (plus what its writer adds), oldest first, and
the top-level status, end_time, error and signal are those of the latest segment, so a run
that completes after an interrupted or failed segment keeps that segment's error in the
history, never at the top.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from topkscope.condition import DURING_WARMUP, run_condition  # noqa: F401  (this API)
from topkscope.interrupts import WorkerFailed, interruption_signal
from topkscope.io import atomic_write, write_json_atomic
from topkscope.names import spelling
from topkscope.schema import RUN_COLUMNS, RUN_TABLE, run_identity, run_schema

STATUSES = ("running", "complete", "failed", "interrupted")
MANIFEST = "manifest.json"


class NotAResultFolder(FileNotFoundError, ValueError):
    """A folder without manifest.json. Both a FileNotFoundError and a ValueError, so callers
    written against either (a missing file, bad input) catch it."""


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def versions() -> dict[str, str]:
    """Versions of the interpreter and the numeric stack."""
    out = {"python": platform.python_version()}
    for mod in ("torch", "numpy", "scipy", "pandas", "pyarrow"):
        try:
            out[mod] = __import__(mod).__version__
        except ImportError:  # pragma: no cover - all are dependencies
            out[mod] = "missing"
    import topkscope

    out["topkscope"] = topkscope.__version__
    return out


def git_commit(cwd: str | Path | None = None) -> str | None:
    """The commit of the source tree (with '-dirty' if modified), or None outside git."""
    here = Path(cwd or Path(__file__).resolve().parent)
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        )
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=here, capture_output=True, text=True, timeout=5,
        )
        return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


# set on a run that failed because its training diverged (train.trainer.DivergedError)
DIVERGED_AT = "diverged_at_step"
# top-level fields that describe how the latest segment ended; a new segment clears them
_SEGMENT_STATE = ("signal", "resume_command", "checkpoint_step", "steps_done", "closed_by",
                  DIVERGED_AT)
# the error of a segment whose process ended without closing the manifest
KILLED = "ended without closing its manifest (killed, e.g. by SIGKILL)"


# the layout of manifest.json: 1 (no key) before `segments` and this key; 2 with both.
# Manifest.resume brings an older manifest to the current layout as it appends a segment.
SCHEMA_VERSION = 2


def _segment(start_time: str, **fields: Any) -> dict[str, Any]:
    return {"start_time": start_time, "end_time": None, "status": "running", "error": None,
            "signal": None, **fields}


class Manifest:
    """A run's manifest.json, rewritten atomically on every change."""

    def __init__(self, run_dir: str | Path, **fields: Any) -> None:
        self.path = Path(run_dir) / "manifest.json"
        start = now_iso()
        self.data: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "status": "running",
            "start_time": start,
            "end_time": None,
            "versions": versions(),
            "git_commit": git_commit(),
            "command": " ".join(sys.argv),
            "segments": [_segment(start)],
        }
        self.data.update(fields)

    @classmethod
    def load(cls, run_dir: str | Path) -> dict[str, Any]:
        """The manifest of run_dir as a dict: the one way every reader opens a run.

        Raises NotAResultFolder (no manifest.json) or ValueError (not a JSON object), each one
        line naming the path."""
        path = Path(run_dir) / MANIFEST
        try:
            data = json.loads(path.read_text())
        except (FileNotFoundError, NotADirectoryError):
            raise NotAResultFolder(f"{str(run_dir)!r} is not a result folder (no manifest.json)"
                                   ) from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"{str(path)!r} is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ValueError(f"{str(path)!r} is not a JSON object (a manifest maps names to "
                             "values)")
        return data

    @classmethod
    def resume(cls, run_dir: str | Path, note: str = "resumed_at", **segment: Any) -> Manifest:
        """Reopen an existing manifest for a new segment (--resume, or a recorder appending
        with note="appended_at"): the time is added to the list `note`, a segment (with the
        `segment` fields) is added to `segments`, status back to running, and how the last
        segment ended (error, signal, resume command, steps done) leaves the top level (the
        history keeps it; a segment still `running` died unannounced and is marked
        interrupted with error KILLED). Not written until the caller writes it."""
        m = cls.__new__(cls)
        m.path = Path(run_dir) / "manifest.json"
        m.data = cls.load(run_dir)
        start = now_iso()
        m.data.setdefault(note, []).append(start)
        if "segments" not in m.data:  # written before segments were kept: one for all of it
            m.data["segments"] = [_segment(m.data.get("start_time"), end_time=m.data.get(
                "end_time"), status=m.data.get("status"), error=m.data.get("error"))]
        m.data["schema_version"] = SCHEMA_VERSION
        last = m.data["segments"][-1]
        if last.get("status") == "running":  # its process died without a word (SIGKILL)
            last.update(status="interrupted", error=KILLED)
        m.data["segments"].append(_segment(start, **segment))
        m.data.update(status="running", end_time=None, error=None)
        for key in _SEGMENT_STATE:
            m.data.pop(key, None)
        return m

    @classmethod
    def reopen(cls, run_dir: str | Path) -> Manifest:
        """An existing manifest to amend its latest segment (e.g. a launcher that learns how
        its workers ended), with no new segment."""
        m = cls.__new__(cls)
        m.path = Path(run_dir) / MANIFEST
        m.data = cls.load(run_dir)
        return m

    def write(self) -> None:
        """manifest.json, and run.parquet when the fields it holds changed (run_row)."""
        write_json_atomic(self.path, self.data)
        row = run_row(self.path.parent, self.data)
        if row != getattr(self, "_row_written", None):
            write_run_table(self.path.parent, row)
            self._row_written = row

    def update(self, **fields: Any) -> None:
        self.data.update(fields)
        self.write()

    def _end(self, status: str, error: str | None = None, signal: str | None = None,
             **fields: Any) -> None:
        """End the latest segment (and so the run, for now) with status; write."""
        end = now_iso()
        segments = self.data.get("segments") or [_segment(self.data.get("start_time"))]
        segments[-1].update(end_time=end, status=status, error=error, signal=signal)
        for key in ("steps_done", "closed_by"):
            if key in fields:
                segments[-1][key] = fields[key]
        top = {"signal": signal} if signal is not None else {}
        if signal is None:
            self.data.pop("signal", None)
        self.update(status=status, end_time=end, error=error, segments=segments, **top,
                    **fields)

    def complete(self, **fields: Any) -> None:
        self._end("complete", **fields)

    def fail(self, error: BaseException | str, **fields: Any) -> None:
        """End `failed` with the error: "Type: message", or a WorkerFailed's own message
        (which rank died, and how) with its fields (worker_failures)."""
        if isinstance(error, WorkerFailed):
            msg, fields = error.message, {**error.fields, **fields}
        else:
            msg = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        self._end("failed", error=msg, **fields)

    def interrupt(self, signal: str, **fields: Any) -> None:
        """Status `interrupted` by `signal` (e.g. "SIGTERM"); fields such as resume_command."""
        self._end("interrupted", signal=signal, **fields)

    def stop(self, error: BaseException | str, **fields: Any) -> None:
        """End with `error`: `interrupted` when it is an interruption (a KeyboardInterrupt:
        SIGINT, or interrupts.RunInterrupted with its signal), else `failed`."""
        sig = interruption_signal(error) if isinstance(error, BaseException) else None
        if sig is not None:
            self.interrupt(sig, **fields)
        else:
            self.fail(error, **fields)


def interruption_message(run_dir: str | Path, manifest: dict[str, Any]) -> str:
    """One line on an interrupted run (from its manifest): the signal, the step, and the
    command that resumes it (`resume_command`, from the checkpoint at `checkpoint_step`)."""
    head = (f"interrupted by {manifest.get('signal')} at step {manifest.get('steps_done')} "
            f"({run_dir})")
    if manifest.get("resume_command"):
        return (f"{head}; resume from the checkpoint at step {manifest.get('checkpoint_step')} "
                f"with: {manifest['resume_command']}")
    return f"{head}; it had no checkpoint yet, so there is nothing to resume: start it again"


def diverged_at(manifest: dict) -> int | None:
    """The step at which a failed run's training diverged (`diverged_at_step`), None for any
    other run. A diverged run is a result, not an accident: rerunning it diverges again."""
    step = manifest.get(DIVERGED_AT) if manifest.get("status") == "failed" else None
    return None if step is None else int(step)


# --- finding runs by manifest content ----------------------------------------------------


PUBLISHED = "published"  # manifest `launcher` of a run imported from published logs


def is_published(manifest: dict) -> bool:
    """A run imported from published logs (`topkscope import`): no seed, no recorder."""
    return manifest.get("launcher") == PUBLISHED


def outer_label(outer: dict) -> str:
    """A short name of an outer-loop block, e.g. 'nesterov(H=15, lr=0.7, mu=0.9, beta=1)'
    (a run's manifest holds the block resolved; a setting a hand-written one lacks is left
    out of the name)."""
    return run_condition({"outer": outer}).outer_key()


def condition_of(manifest: dict) -> str:
    """The training condition of a run as the claims table keys it (topkscope.condition's
    Condition.training_key): its density warm-up plus a non-default k rule, the outer loop
    and the quantization of an outer-loop or quantizing run, and any named deviation, e.g.
    "warmup=paper", "warmup=none; empty_fallback=topk" or
    "warmup=none; outer=average(H=15, lr=1, beta=0.95); quantize=2bit"."""
    return run_condition(manifest).training_key()


def model_of(manifest: dict) -> str | None:
    """The model a run is of: the manifest's `model` (a config's, the DDP hook's, a script's
    run_fields), else what a Recorder in a loop of one's own saw of it — its class and
    parameter count from `attach(model)` ("Net (25,818 parameters)"), or the length of the u
    it recorded alone ("a model of 25,818 parameters"); None when the manifest says nothing."""
    if manifest.get("model") is not None:
        return str(manifest["model"])
    size = _number(manifest.get("num_parameters"), int)
    cls = manifest.get("model_class")
    if cls and size is not None:
        return f"{cls} ({size:,} parameters)"
    if cls:
        return str(cls)
    return None if size is None else f"a model of {size:,} parameters"


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _number(value: Any, kind: type) -> int | float | None:
    """value as int or float, None when it is not a finite number of that kind (a seed
    "not published", a density computed by a function)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if kind is int:
        return int(value) if float(value).is_integer() else None
    return float(value) if value == value and abs(value) != float("inf") else None


def run_row(run_dir: str | Path, manifest: dict) -> dict[str, Any]:
    """The row of run.parquet (schema.RUN_COLUMNS) for a run folder and its manifest: its
    identity (schema.run_identity), the fields runs are selected by, its condition
    (condition_of), the recorder's densities and selectors (null without a recorder)."""
    recorder = manifest.get("recorder") if isinstance(manifest.get("recorder"), dict) else {}
    optimizer = manifest.get("optimizer")
    row = {**run_identity(run_dir, manifest),
           **{k: _text(manifest.get(k)) for k in (
               "status", "launcher", "profile", "model", "dataset", "dataset_substitute",
               "sparsifier", "selection", "start_time", "end_time", "git_commit")},
           "train_density": _number(manifest.get("density"), float),
           "condition": condition_of(manifest),
           **{k: _number(manifest.get(k), int) for k in (
               "seed", "world_size", "num_parameters", "total_steps", "steps_done")},
           "optimizer": _text(optimizer.get("name") if isinstance(optimizer, dict) else optimizer),
           "recorder_densities": [float(d) for d in recorder["densities"]]
           if recorder.get("densities") else None,
           "recorder_sparsifiers": [str(n) for n in recorder.get("sparsifiers") or []]
           if recorder else None}
    return {k: row[k] for k in RUN_COLUMNS}


def write_run_table(run_dir: str | Path, row: dict[str, Any]) -> Path:
    """run_dir/run.parquet: the one row `row` with schema.RUN_COLUMNS, written atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist([row], schema=run_schema())
    return atomic_write(Path(run_dir) / RUN_TABLE, lambda tmp: pq.write_table(table, tmp))


@dataclass(frozen=True)
class FoundRun:
    """A run folder and its manifest as read when it was found."""

    path: Path
    manifest: dict


def _run_folders(root: Path) -> list[Path]:
    """root itself if it is a run folder, else its run folders one level down (an experiment
    folder, or a user's run beside the experiments) and two (a results root:
    <experiment>/<run_id>/), never inside another run folder."""
    if (root / MANIFEST).is_file():
        return [root]
    level1 = {p.parent for p in root.glob(f"*/{MANIFEST}")}
    level2 = {p.parent for p in root.glob(f"*/*/{MANIFEST}") if p.parent.parent not in level1}
    return sorted(level1 | level2)


def results_roots(root: str | Path) -> list[Path]:
    """root and the results roots nested one level in it — a folder holding runs as
    <name>/<experiment>/<run_id>/ and no run or experiment folder of its own, such as
    results/standard/ (`make reproduce-figures PROFILE=standard`) below results/ — which
    find_runs(root) does not reach; sorted, root first."""
    root = Path(root)
    nested = [] if not root.is_dir() or (root / MANIFEST).is_file() else sorted(
        child for child in root.iterdir()
        if child.is_dir() and not (child / MANIFEST).is_file()
        and not any(child.glob(f"*/{MANIFEST}")) and any(child.glob(f"*/*/{MANIFEST}")))
    return [root, *nested]


def _matches(value: Any, wanted: Any) -> bool:
    """wanted None: anything; a tuple/list/set: any of them; otherwise equality (numbers
    compared as floats, so density 0.001 in JSON matches 1e-3)."""
    if wanted is None:
        return True
    if isinstance(wanted, (tuple, list, set, frozenset)):
        return any(_matches(value, w) for w in wanted)
    if isinstance(wanted, (int, float)) and not isinstance(wanted, bool):
        try:
            return value is not None and float(value) == float(wanted)
        except (TypeError, ValueError):
            return False
    return value == wanted


MATCHED_FIELDS = ("experiment", "profile", "model", "sparsifier", "seed", "density", "status")


def _spelled(field: str, wanted: Any) -> Any:
    """wanted in the manifests' spelling: display names of models and sparsifiers ("FNN-3",
    "Top-k", any case) read as theirs (topkscope.names.spelling), a condition without '='
    ("paper") as the warm-up it names ("warmup=paper"); tuples element by element."""
    if isinstance(wanted, (tuple, list, set, frozenset)):
        return type(wanted)(_spelled(field, w) for w in wanted)
    if field == "condition":
        return f"warmup={wanted}" if isinstance(wanted, str) and "=" not in wanted else wanted
    return spelling(field, wanted)


def matches(manifest: dict, *, condition: Any = None, **wanted: Any) -> bool:
    """Whether a manifest has every wanted field (MATCHED_FIELDS; each None: any, a value, or
    a tuple of allowed values) and its condition_of is `condition`. Display names are read as
    the manifests' spellings (`_spelled`). find_runs selects with it; a caller holding
    manifests already (the figures driver) narrows them with it."""
    unknown = sorted(set(wanted) - set(MATCHED_FIELDS))
    if unknown:
        raise ValueError(f"cannot match runs on {unknown}; allowed: {', '.join(MATCHED_FIELDS)}, "
                         "condition")
    return all(_matches(manifest.get(k), _spelled(k, v)) for k, v in wanted.items()) and \
        _matches(condition_of(manifest), _spelled("condition", condition))


def find_runs(roots: str | Path | Iterable[str | Path], *, experiment: Any = None,
              profile: Any = None, model: Any = None, sparsifier: Any = None, seed: Any = None,
              density: Any = None, condition: Any = None,
              status: Any = "complete", damaged: list | None = None) -> list[FoundRun]:
    """Every run folder under `roots` whose manifest matches, selected by manifest content only
    (never by folder name).

    Args:
        roots: run folders, experiment folders or results roots (``<experiment>/<run_id>/``),
            one or several; a root that does not exist holds no runs.
        experiment, profile, model, sparsifier, seed, density: manifest fields to match; each
            None (any), a value, or a tuple of allowed values. model and sparsifier take the
            manifests' spellings ("fnn3", "topk") or the display names figures and tables
            print ("FNN-3", "Top-k", "Gaussian-k (2019)"), in any case.
        condition: matched against ``condition_of(manifest)`` (e.g. "warmup=paper"); a value
            without '=' names the warm-up alone ("paper" is "warmup=paper").
        status: "complete" (default), a tuple such as ("interrupted", "failed"), or None (any).

        damaged: a list that gets a DamagedRun (path, why) for each run folder whose
            manifest cannot be read; None: a one-line warning names it.

    Returns:
        FoundRun(path, manifest) per match, sorted by path; a manifest that cannot be read is
        left out.
    """
    if isinstance(roots, (str, Path)):
        roots = [roots]
    wanted = {"experiment": experiment, "profile": profile, "model": model,
              "sparsifier": sparsifier, "seed": seed, "density": density, "status": status}
    out: dict[Path, FoundRun] = {}
    for root in roots:
        for run in _read_runs(Path(root), strict=False, damaged=damaged):
            if matches(run.manifest, condition=condition, **wanted):
                out[run.path.resolve()] = run
    return sorted(out.values(), key=lambda r: str(r.path))


class DamagedRunWarning(UserWarning):
    """find_runs skipping a run folder whose manifest cannot be read (a command that names
    damaged runs itself, from runs_at's `damaged`, ignores these repeats)."""


@dataclass(frozen=True)
class DamagedRun:
    """A run folder whose manifest.json cannot be read (truncated, not JSON), or whose tables
    cannot (analysis.runs.load_found), and why, in one line."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{str(self.path)!r}: {self.reason}"


def _read_runs(root: Path, strict: bool, damaged: list | None = None) -> list[FoundRun]:
    """Every run folder under root with its manifest. An unreadable manifest is appended to
    `damaged` (a list: a DamagedRun), else raises (strict) or is skipped with a one-line
    warning naming it."""
    out = []
    for folder in _run_folders(root) if root.is_dir() else []:
        try:
            out.append(FoundRun(folder, Manifest.load(folder)))
        except (OSError, ValueError) as exc:
            if damaged is not None:
                damaged.append(DamagedRun(folder, _unreadable(folder, exc)))
            elif strict:
                raise ValueError(str(exc)) from None
            else:
                warnings.warn(f"skipping {str(folder)!r}: {exc}", DamagedRunWarning,
                              stacklevel=3)
    return out


def _unreadable(folder: Path, exc: Exception) -> str:
    """Why a run folder's manifest cannot be read, without repeating the folder's path."""
    text = " ".join(str(exc).split()).replace(f"{str(folder / MANIFEST)!r} ", "")
    return f"its {MANIFEST} {text}" if text.startswith("is not") else text


EXPECTED_FOLDER = "expected a run folder, an experiment folder or a results root"


OWN_FIELDS = ("versions", "experiment", "run_id", "sparsifier", "launcher")


def foreign_manifest(manifest: dict) -> bool:
    """Whether a manifest.json was written by another tool: it has none of the fields every
    manifest of ours has (OWN_FIELDS; a folder made by hand in the docs/results.md layout
    names at least its experiment and sparsifier)."""
    return not any(k in manifest for k in OWN_FIELDS)


# what every manifest topkscope writes holds (Manifest), whoever wrote it: the claims need it all
MANIFEST_SCHEMA = ("status", "start_time", "versions")


def not_ours(manifest: dict) -> str | None:
    """What a manifest.json lacks of the fields every topkscope manifest holds (None: it is
    one of ours)."""
    absent = [k for k in MANIFEST_SCHEMA if k not in manifest]
    versions = manifest.get("versions")
    if not absent and isinstance(versions, dict) and "topkscope" in versions:
        return None
    return (f"its manifest.json is not a topkscope manifest (no "
            f"{', '.join(absent) or 'versions.topkscope'}); the claims read the folders of "
            "topkscope run, the DDP hook and the Recorder")


def runs_at(paths: Iterable[str | Path], status: Any = "complete",
            damaged: list | None = None) -> list[FoundRun]:
    """The runs that command-line paths name, each path a run folder, an experiment folder or
    a results root, with `status` (as find_runs), in the order given, none twice.

    Raises ValueError (one line naming the path) for a path that does not exist, is a file,
    cannot be read, holds no run folder, holds an unreadable manifest or one another tool
    wrote (foreign_manifest), or holds runs but none with `status`, so a command fails before
    it writes anything. With `damaged` a list, a run folder found under a path (not named
    itself) whose manifest cannot be read is appended there (DamagedRun) and left out, so one
    damaged run does not block the others; a path whose every run is damaged still raises.
    """
    out: dict[Path, FoundRun] = {}
    for path in [Path(p) for p in paths]:
        if not path.exists():
            raise ValueError(f"{str(path)!r} does not exist ({EXPECTED_FOLDER})")
        if not path.is_dir():
            raise ValueError(f"{str(path)!r} is a file, not a folder ({EXPECTED_FOLDER})")
        broken: list[DamagedRun] = []
        try:
            every = _read_runs(path, strict=True, damaged=None if damaged is None else broken)
        except PermissionError as exc:
            raise ValueError(f"cannot read {str(exc.filename or path)!r}: permission denied "
                             f"({EXPECTED_FOLDER})") from None
        if any(b.path == path for b in broken):  # named itself: refused, as without `damaged`
            raise ValueError(f"{str(path)!r}: {broken[0].reason}")
        if broken and not every:
            raise ValueError(f"{str(path)!r} holds no readable run: {broken[0]}"
                             + (f" (and {len(broken) - 1} more)" if len(broken) > 1 else ""))
        if damaged is not None:
            damaged.extend(broken)
        foreign = next((r for r in every if foreign_manifest(r.manifest)), None)
        if foreign is not None:
            raise ValueError(f"{str(foreign.path / MANIFEST)!r} was not written by topkscope "
                             f"(it has none of {', '.join(OWN_FIELDS)}): expected a run folder "
                             "of topkscope run, the DDP hook or a Recorder")
        if not every:
            raise ValueError(f"{str(path)!r} is not a result folder (no manifest.json) and holds "
                             "no run folders (<run_id>/ or <experiment>/<run_id>/)")
        found = [r for r in every if matches(r.manifest, status=status)]
        if not found:
            have = sorted({str(r.manifest.get("status")) for r in every})
            raise ValueError(f"{str(path)!r} holds no {' or '.join(_as_tuple(status))} run "
                             f"(its runs are: {', '.join(have)})")
        for run in found:
            out.setdefault(run.path.resolve(), run)
    return list(out.values())


def _as_tuple(value: Any) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list, set, frozenset)) else (value,)


# --- what ran with what: the optimizer -------------------------------------------------


def _plain(value: Any) -> Any:
    """A hyper-parameter as a JSON value (tuples as lists, 0-d tensors as numbers)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and getattr(value, "numel", lambda: 0)() == 1:
        return value.item()  # a 0-d tensor or numpy scalar
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def describe_optimizer(optimizer: Any) -> dict[str, Any]:
    """{"name", hyper-parameters...} of an optimizer, as JSON values, for a manifest.

    Ours (MomentumSGD, AdamW): the name of the config's `optimizer` key and its settings.
    A torch.optim optimizer: its class name in lower case ("adamw", "sgd"), the settings every
    parameter group shares (as the groups hold them, not the constructor's defaults, which a
    group may override: with two groups of their own lr and weight_decay the defaults are
    true of neither), `lr` being the base rate (a scheduler's `initial_lr` where one set it),
    and `param_groups`: per group the number of tensors and elements and its own value of
    every setting the groups do not share.
    """
    if hasattr(optimizer, "settings") and hasattr(optimizer, "name"):
        return {"name": optimizer.name, **optimizer.settings}
    if not (hasattr(optimizer, "defaults") and hasattr(optimizer, "param_groups")):
        raise ValueError(f"optimizer = {optimizer!r} is not an optimizer; allowed: a "
                         f"torch.optim optimizer (defaults, param_groups)")
    settings = []
    for group in optimizer.param_groups:
        own = {k: _plain(v) for k, v in group.items() if k not in ("params", "initial_lr")}
        if "initial_lr" in group:  # a scheduler's base rate; group["lr"] is the current one
            own["lr"] = _plain(group["initial_lr"])
        settings.append(own)
    names = list(dict.fromkeys(k for own in settings for k in own))
    shared = {k: settings[0][k] for k in names
              if all(k in own and own[k] == settings[0][k] for own in settings)}
    groups = [{"tensors": len(group["params"]),
               "elements": sum(p.numel() for p in group["params"]),
               **{k: v for k, v in own.items() if k not in shared}}
              for group, own in zip(optimizer.param_groups, settings)]
    return {"name": type(optimizer).__name__.lower(), **shared, "param_groups": groups}
