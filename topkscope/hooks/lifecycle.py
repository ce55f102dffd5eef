"""A recorder's run folder from opening to closing: the output folder check, what to do with
results already there (`mode`), the manifest a recorder owns, flushing and closing (also at
exit, by a finalizer), and setting aside what a resumed run records again.

Modes (what the recorder does when out_dir already holds results):

- None refuses with one line;
- "append" adds a new segment: new part files after the old ones (`analysis.runs.load`
  de-duplicates by (step, rank, layer, kind, density), so a step recorded again replaces the
  older row); an owned manifest lists each segment under `appended_at` and `segments`;
- "overwrite" first moves the old files into `replaced/<time>/` inside the folder (never
  deleted; that folder loads as a run of its own).

A folder that holds only what a run that failed before its first step left (`failed_set_up`:
a failed or interrupted manifest, no row, no snapshot) is not refused in any mode: its files
go to `replaced/<time>/` as with "overwrite", so the corrected rerun starts.

Each rank checks and moves its own part files and snapshots; rank 0, which owns the manifest,
also the manifest and every other file of the folder.

A resumed training run sets aside, before it writes again, every row and snapshot of the steps
it will redo (`supersede_from`: into `superseded/<time>/`), so that plain readers of the folder
(pandas, duckdb, polars on `stats/*.parquet`) see each step once. Under torchrun every process
sets aside only its own files (`rank=`: its parts, its snapshots, its own half-written files;
rank 0 also the step tables), into one folder whose name the ranks agreed on first
(`aside_name`): a rank never moves a file another, live rank may be writing.

A recorder the process forgets to close is closed when it is garbage collected or at
interpreter exit (normal exit or an uncaught exception): buffered rows are flushed and a
manifest it owns is marked complete, failed with the uncaught exception, or interrupted when
that exception is an interruption (Ctrl-C). SIGKILL keeps what the last flush wrote.

A script's run that stops (an error, a Ctrl-C, a dead peer) records `checkpoint_step` and
`resume_command` when it keeps topkscope.checkpoint's checkpoints (`script_resume_fields`),
as `topkscope run` does; a Ctrl-C or SIGTERM ends the script with one line from the rank that
owns the manifest and none from the others, not a traceback per rank (`end_quietly`).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

from topkscope.hooks.parts import PartWriter, rank_files
from topkscope.interrupts import interruption_signal
from topkscope.io import atomic_write, check_writable, is_unfinished_write
from topkscope.manifest import Manifest, interruption_message, now_iso
from topkscope.schema import (
    OUTER_FILE,
    PART_FOLDERS,
    PART_GLOB,
    PART_RE,
    RUN_TABLE,
    SNAPSHOT_RE,
)

MODES = (None, "append", "overwrite")
# a script's checkpoints (topkscope.checkpoint): <run>/checkpoints/step-<N>/, and `latest`
# naming the newest complete one
CHECKPOINTS, LATEST = "checkpoints", "latest"
CLOSED_AT_EXIT = "exit without close()"  # manifest `closed_by` of a recorder closed for the program
REPLACED = "replaced"  # overwrite mode moves old results to <run>/replaced/<time>/
SUPERSEDED = "superseded"  # a resume moves what it redoes to <run>/superseded/<time>/
# what counts as results in a run folder (the training loop's, the recorder's and analyze's)
RESULT_ENTRIES = ("manifest.json", RUN_TABLE, "train.parquet", "eval.parquet", OUTER_FILE,
                  *PART_FOLDERS, "snapshots", "analysis")
# the training loop's tables, one row per step (an outer-loop run's outer.parquet: per exchange)
STEP_TABLES = ("train.parquet", "eval.parquet", OUTER_FILE)


def check_output_dir(out_dir: str | Path, rank: int, need_bytes: int) -> Path:
    """check_writable on a probe folder of this process's own, so ranks starting together
    in one run folder do not race on a shared probe file."""
    out = Path(out_dir)
    probe = out / f".recorder-probe-r{rank}-{os.getpid()}"
    try:
        check_writable(probe, need_bytes=need_bytes)
    except OSError as exc:
        raise OSError(str(exc).replace(str(probe), str(out))) from None
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    return out


def _run_files(out: Path) -> list[Path]:
    """The result files of a run folder (RESULT_ENTRIES); anything else there (a user's log,
    earlier replaced results) is neither results nor moved."""
    found = []
    for name in RESULT_ENTRIES:
        entry = out / name
        if entry.is_file():
            found.append(entry)
        elif entry.is_dir():
            found += [Path(root) / f for root, _, files in os.walk(entry) for f in files]
    return found


def _existing_results(out: Path, rank: int, whole_folder: bool, manifest_given: bool
                      ) -> list[Path]:
    """Results already in out that this recorder would add to: this rank's parts and
    snapshots; with whole_folder (rank 0) every rank's, and manifest.json unless the caller
    brought its own (the training loop writes a fresh one before the recorder starts)."""
    if not whole_folder:
        return sorted(rank_files(out, rank))
    found = [f for f in _run_files(out) if not f.name.startswith(".")]
    if manifest_given:
        found = [f for f in found if f not in (out / "manifest.json", out / RUN_TABLE)]
    return sorted(found)


def _time_names() -> Iterator[str]:
    """<time>, <time>-1, <time>-2, ...: the names tried for a new folder of set-aside files."""
    stamp = now_iso().replace(":", "-").replace("+00-00", "Z")
    return (stamp if n == 0 else f"{stamp}-{n}" for n in range(1000))


def _new_aside_folder(out: Path, under: str) -> Path:
    """A new, empty folder out/under/<time>[-n]/ claimed by this call (mkdir that fails when
    the name is taken), so nothing there is ever overwritten."""
    (out / under).mkdir(exist_ok=True)
    for name in _time_names():
        try:
            (out / under / name).mkdir()
            return out / under / name
        except FileExistsError:
            continue
    raise OSError(f"cannot make a new folder under {str(out / under)!r}")


def _move_aside(out: Path, files: list[Path], under: str = REPLACED) -> Path:
    """Move files into a new folder out/under/<time>/ (same relative paths) and return it;
    a file already gone (another rank moved it first) is skipped."""
    dest = _new_aside_folder(out, under)
    for f in files:
        target = dest / f.relative_to(out)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(f, target)
        except FileNotFoundError:
            pass
    return dest


def failed_set_up(out: Path) -> bool:
    """Whether out holds only what a run that failed before its first step left: a manifest
    that ended failed or interrupted (and run.parquet, the manifest's row), and no recorded row
    or snapshot (empty tables at most). Such a folder holds nothing to lose: a rerun replaces
    it rather than refusing it."""
    try:
        status = Manifest.load(out).get("status")
    except (OSError, ValueError):
        return False
    if status not in ("failed", "interrupted"):
        return False
    for f in _run_files(out):
        if f.name in ("manifest.json", RUN_TABLE) and f.parent == out:
            continue  # what the run is, not what it recorded
        if f.suffix != ".parquet":
            return False
        try:
            if pq.read_metadata(f).num_rows:
                return False
        except (OSError, ValueError):
            return False
    return True


def prepare_folder(out: Path, rank: int, mode: str | None, manifest_given: bool
                   ) -> Path | None:
    """Apply `mode` to results already in out; returns where overwrite moved them (or where
    a run that failed at set-up went: it is replaced, never refused)."""
    if mode not in MODES:
        raise ValueError(f"mode = {mode!r}; allowed: None, 'append', 'overwrite'")
    existing = _existing_results(out, rank, rank == 0, manifest_given)
    if not existing or mode == "append":
        return None
    if mode is None and rank == 0 and failed_set_up(out):
        return _move_aside(out, existing)
    if mode is None:
        first = existing[0].relative_to(out)
        raise ValueError(f"{str(out)!r} already holds results ({len(existing)} file(s), e.g. "
                         f"{first}); pass mode='append' to add to them or mode='overwrite' to "
                         f"move them aside into {REPLACED}/, or choose another folder")
    return _move_aside(out, existing)


def own_manifest(out: Path, mode: str | None, replaced: Path | None) -> Manifest:
    """The manifest of a recorder that was given none (rank 0 of a user's script): the
    existing one reopened for a new segment in append mode, else a new one."""
    if mode == "append" and (out / "manifest.json").is_file():
        return Manifest.resume(out, note="appended_at")
    fields: dict[str, Any] = {"launcher": "user"}
    if replaced is not None:
        fields["replaced"] = str(replaced.relative_to(out))
    return Manifest(out, **fields)


def discard_folder(out: Path, with_manifest: bool) -> None:
    """Remove what a recorder that recorded nothing wrote in a folder it created: the manifest
    (rank 0), the empty result folders, and out itself once empty. Other ranks may be doing
    the same at once: a folder already gone or not yet empty is left to them."""
    if with_manifest:
        (out / "manifest.json").unlink(missing_ok=True)
        (out / RUN_TABLE).unlink(missing_ok=True)
    for sub in (*PART_FOLDERS, "snapshots", ""):
        try:
            (out / sub).rmdir()
        except OSError:
            pass


def aside_name(run_dir: str | Path) -> str:
    """A name under run_dir/superseded/ that no folder has yet (<time>[-n]), for ranks to agree
    on before each sets its own files aside there; nothing is created."""
    taken = Path(run_dir) / SUPERSEDED
    for name in _time_names():
        if not (taken / name).exists():
            return name
    raise OSError(f"cannot find a free folder name under {str(taken)!r}")


def _written_name(name: str) -> str:
    """The file an unfinished write of atomic_write was for (`.<name>.<random>.tmp` -> name)."""
    return name[1:].rsplit(".", 2)[0]


def _rank_of(name: str) -> int | None:
    """The rank whose recorder writes the file `name` (a part or a snapshot, finished or a
    half-written temporary file of one), None for a file of the whole run (tables, manifest)."""
    if is_unfinished_write(name):
        name = _written_name(name)
    if m := PART_RE.match(name):
        return int(m.group(1))
    if m := SNAPSHOT_RE.match(name):
        return int(m.group(2))
    return None


def supersede_from(run_dir: str | Path, step: int, rank: int | None = None,
                   dest: str | Path | None = None) -> Path | None:
    """Set aside everything a run folder holds for steps >= step (what a run resumed from the
    checkpoint after `step` steps records again) into run_dir/superseded/<time>/, same
    relative paths, never deleted: rows of train.parquet, eval.parquet, outer.parquet (an
    outer-loop run's exchanges, by the step that ended each round) and every stats/, hist/
    and coords/ part, snapshots, and the temporary file of any write a killed process left half
    done (io.is_unfinished_write). A file with rows on both sides keeps its earlier rows in place
    (rewritten atomically) after its later rows were written aside under its name, so
    superseded/ holds exactly the rows the resumed run records again.

    rank: None sets aside every file (one process writes the whole folder, or no other process
    is running: `topkscope run` before its ranks record); a rank sets aside only that rank's
    files (its parts, its snapshots, its half-written files; rank 0 also the step tables and
    half-written files of no rank), so each process of a torchrun group moves its own and none
    moves a file another, live rank is writing. dest: the folder name under superseded/ the
    ranks agreed on (`aside_name`); None picks a new one.

    Which files hold such steps is read from their parquet statistics; only a file with rows
    on both sides is read whole. Everything is read before anything moves, so a file that
    cannot be read leaves the folder as it was. Returns the folder the rows went to, or None
    when nothing was at or past step.
    """
    run_dir = Path(run_dir)

    def mine(path: Path) -> bool:
        owner = _rank_of(path.name)
        return rank is None or owner == rank or (owner is None and rank == 0)

    tables = [run_dir / name for name in STEP_TABLES if (run_dir / name).is_file()]
    for sub in PART_FOLDERS:
        if (run_dir / sub).is_dir():
            tables += sorted(p for p in (run_dir / sub).glob(PART_GLOB) if PART_RE.match(p.name))
    moved, split = [], []
    for path in filter(mine, tables):
        span = _step_span(path)
        if span is None or span[1] < step:
            continue
        if span[0] >= step:
            moved.append(path)
        else:
            table = pq.read_table(path)
            later = pc.greater_equal(table["step"], step)
            split.append((path, table.filter(pc.invert(later)), table.filter(later)))
    snapshots = run_dir / "snapshots"
    if snapshots.is_dir():
        moved += sorted(f for f in snapshots.iterdir()
                        if (m := SNAPSHOT_RE.match(f.name)) and int(m.group(1)) >= step
                        and mine(f))
    # half-written files of a process killed mid-write: set aside with what is redone
    for folder in (run_dir, *(run_dir / sub for sub in PART_FOLDERS), snapshots):
        if folder.is_dir():
            moved += sorted(f for f in folder.iterdir()
                            if f.is_file() and is_unfinished_write(f.name) and mine(f))
    if not moved and not split:
        return None
    if dest is None:
        dest = _new_aside_folder(run_dir, SUPERSEDED)
    else:
        dest = run_dir / SUPERSEDED / dest
        dest.mkdir(parents=True, exist_ok=True)
    for path, kept, later in split:
        target = dest / path.relative_to(run_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        # the later rows aside first, then the earlier ones in place: no row is only in memory
        atomic_write(target, lambda tmp, later=later: pq.write_table(later, tmp))
        atomic_write(path, lambda tmp, kept=kept: pq.write_table(kept, tmp))
    for path in moved:
        target = dest / path.relative_to(run_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(path, target)
        except FileNotFoundError:  # gone since it was listed: nothing of it to keep here
            pass
    return dest


def _step_span(path: Path) -> tuple[int, int] | None:
    """(first, last) step of a parquet file, from its row-group statistics (no data read)
    where they are stored; None for a file without rows."""
    meta = pq.read_metadata(path)
    if meta.num_rows == 0:
        return None
    column = meta.schema.to_arrow_schema().get_field_index("step")
    spans = []
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(column).statistics
        if stats is None or not stats.has_min_max:
            steps = pq.read_table(path, columns=["step"])["step"]
            return pc.min(steps).as_py(), pc.max(steps).as_py()
        if meta.row_group(g).num_rows:
            spans.append((stats.min, stats.max))
    return min(lo for lo, _ in spans), max(hi for _, hi in spans)


def run_folder_is_a_file(run_dir: str | Path) -> str:
    """The one line for a script given a file where its run folder goes."""
    return (f"run folder {str(run_dir)!r} is a file, not a folder; give the folder the run "
            "writes to (it is made when missing)")


def script_checkpoint_step(run_dir: str | Path) -> int | None:
    """The step of the checkpoint a script's `latest` names (topkscope.checkpoint), None
    without one; ValueError (one line) when run_dir is a file, not a folder."""
    pointer = Path(run_dir) / CHECKPOINTS / LATEST
    try:
        name = pointer.read_text().strip()
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise ValueError(run_folder_is_a_file(run_dir)) from None
    try:
        return int(name.split("-", 1)[1])
    except (IndexError, ValueError):
        return None


def script_command() -> str:
    """The command line that started this script, to run again: torchrun's (the worker's
    parent, read from /proc where there is one) when torchrun started this process, else the
    interpreter's own (sys.orig_argv)."""
    if os.environ.get("TORCHELASTIC_RUN_ID"):
        try:
            argv = Path(f"/proc/{os.getppid()}/cmdline").read_bytes().split(b"\0")
            return shlex.join(a.decode() for a in argv if a)
        except OSError:
            pass
    return shlex.join(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])


def script_resume_fields(run_dir: str | Path) -> dict[str, Any]:
    """checkpoint_step and resume_command of a script's run that stopped (empty without a
    checkpoint: the same command would find the folder's rows and be refused), as
    `topkscope run` records them."""
    try:
        step = script_checkpoint_step(run_dir)
    except ValueError:
        return {}
    return {} if step is None else {"checkpoint_step": step, "resume_command": script_command()}


_QUIET: dict[int, tuple[BaseException, str | None]] = {}  # end_quietly's errors, by id


def end_quietly(error: BaseException, line: str | None) -> None:
    """Let `error` — the interruption (Ctrl-C, a SIGTERM) that stopped a script's run, once
    its files are flushed and its manifest says so — end the process with `line` on stderr
    (None: nothing, e.g. every rank but the one that reports) instead of its traceback: a
    sys.excepthook for that exception alone; any other goes to the hook before it. Python
    still ends the process as killed by the signal."""
    if id(error) in _QUIET:
        if line is not None and _QUIET[id(error)][1] is None:
            _QUIET[id(error)] = (error, line)
        return
    if not _QUIET:
        previous = sys.excepthook

        def hook(kind, value, tb):
            quiet = _QUIET.get(id(value))
            if quiet is None or quiet[0] is not value:
                previous(kind, value, tb)
            elif quiet[1]:
                print(quiet[1], file=sys.stderr, flush=True)

        sys.excepthook = hook
    _QUIET[id(error)] = (error, line)


class RecorderOutput:
    """What a recorder has buffered and written, and its manifest: everything closing needs.
    Kept apart from the Recorder so that a finalizer can close it without holding the
    recorder alive."""

    def __init__(self, stats: PartWriter, hist: PartWriter, manifest: Manifest | None,
                 owns_manifest: bool, settings: dict[str, Any], out_dir: Path, rank: int,
                 total_steps: int | None, coords: PartWriter | None = None) -> None:
        self.stats, self.hist, self.coords = stats, hist, coords
        self._writers = [w for w in (stats, hist, coords) if w is not None]
        self.manifest, self.owns_manifest = manifest, owns_manifest
        self.settings, self.out_dir, self.rank = settings, out_dir, rank
        self.total_steps = total_steps
        self.buffered_steps: set[int] = set()
        self.flushed_through: int | None = None
        self.rows_written = 0
        self.snapshots_written = 0
        self.last_step_seen: int | None = None
        self.closed = False

    def describe(self) -> dict[str, Any]:
        return {**self.settings,
                "flushed_through_step": self.flushed_through,
                "stats_parts": self.stats.parts_written,
                "hist_parts": self.hist.parts_written,
                "coords_parts": 0 if self.coords is None else self.coords.parts_written}

    def flush(self) -> None:
        rows = sum(w.rows for w in self._writers)
        wrote = any([w.flush() is not None for w in self._writers])  # every writer flushes
        self.rows_written += rows
        if self.buffered_steps:
            self.flushed_through = max(self.buffered_steps)
        self.buffered_steps = set()
        if self.manifest is not None and wrote:
            self.manifest.update(recorder=self.describe())

    def close(self, error: BaseException | str | None = None, closed_by: str | None = None
              ) -> None:
        """Flush; warn about an empty record; finish a manifest this recorder owns
        (complete; failed with error; interrupted when error is an interruption)."""
        if not self.closed:
            self.closed = True
            self.flush()
            if error is None and self.rows_written == 0 and self.snapshots_written == 0:
                seen = "it was given no step" if self.last_step_seen is None else \
                    f"its schedules fired at none of the steps 0..{self.last_step_seen} it saw"
                warnings.warn(f"recorder of {str(self.out_dir)!r} (rank {self.rank}) closed with "
                              f"zero rows: {seen} "
                              f"({self.settings['schedule']}, hist "
                              f"{self.settings['hist_schedule']}, snapshots "
                              f"{self.settings['snapshot_schedule']})", stacklevel=3)
        if not self.owns_manifest:
            if error is not None and self.manifest is None:  # another rank of a script
                self._quiet(error)
            return
        extra = {} if closed_by is None else {"closed_by": closed_by}
        if error is not None:
            self.manifest.stop(error, recorder=self.describe(), **extra,
                               **script_resume_fields(self.out_dir))
            self._quiet(error)
        elif self.manifest.data.get("status") == "running":
            self.manifest.complete(recorder=self.describe(), **extra)

    def _quiet(self, error: BaseException | str) -> None:
        """A script stopped by Ctrl-C or SIGTERM ends with one line from the rank that owns
        the manifest (what topkscope run says: the signal, the step, the command that resumes
        it) and none from the others, not a traceback per rank (end_quietly)."""
        if not isinstance(error, BaseException) or interruption_signal(error) is None:
            return
        line = None
        if self.owns_manifest:
            data = self.manifest.data
            # the steps done: the hook's count, or (a hook not closed yet, a Recorder alone)
            # one past the last step the recorder saw, whichever is later
            seen = [n for n in (data.get("steps_done"), None if self.last_step_seen is None
                                else self.last_step_seen + 1) if n is not None]
            steps = max(seen) if seen else None
            line = "topkscope: run " + interruption_message(self.out_dir,
                                                            {**data, "steps_done": steps})
        end_quietly(error, line)

    def close_unclosed(self) -> None:
        """The finalizer: at garbage collection or interpreter exit, close what the program
        left open; an uncaught exception that is ending the process marks the manifest
        failed (interrupted for Ctrl-C). Does nothing if the folder has gone (a scratch
        folder)."""
        if self.closed or not self.out_dir.is_dir():
            return
        error = getattr(sys, "last_value", None)  # set by the interpreter for an uncaught error
        try:
            self.close(error, closed_by=CLOSED_AT_EXIT)
        except Exception as exc:  # noqa: BLE001 - nothing can be raised from a finalizer
            print(f"topkscope recorder: could not finish {str(self.out_dir)!r} at exit: {exc}",
                  file=sys.stderr)
