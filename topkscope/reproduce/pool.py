"""Run many training runs, `parallel` at a time, with a heartbeat while they train.

Each run is a child process (`topkscope run`), so runs on a 2-core CPU with one thread each can
go two at a time. With more than one at a time the children's progress bars would overwrite each
other, so they are silenced and the driver prints every `heartbeat_s` seconds how far each run
has got (rows of its train.parquet against the manifest's total_steps).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from topkscope.reproduce.runner import RunSpec, ensure_run


def steps_done(run_dir: Path) -> tuple[int, int | None]:
    """(steps logged so far, total steps) of a run in progress; (0, None) before it starts."""
    total = None
    try:
        total = json.loads((run_dir / "manifest.json").read_text()).get("total_steps")
    except (OSError, ValueError):
        pass
    try:
        import pyarrow.parquet as pq

        done = pq.read_metadata(run_dir / "train.parquet").num_rows
    except (OSError, ValueError):
        done = 0
    return done, total


class Heartbeat:
    """Logs the progress of the runs in flight every `every` seconds (in its own thread)."""

    def __init__(self, log: Callable[[str], None], every: float | None) -> None:
        self.log, self.every = log, every
        self.flying: dict[str, tuple[Path, float]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    def __enter__(self) -> Heartbeat:
        if self.every is not None:  # None: silent (a single run shows its own progress bar)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def started(self, label: str, run_dir: Path) -> None:
        with self._lock:
            self.flying[label] = (run_dir, time.perf_counter())

    def finished(self, label: str) -> None:
        with self._lock:
            self.flying.pop(label, None)

    def _beat(self) -> None:
        while not self._stop.wait(self.every):
            with self._lock:
                flying = dict(self.flying)
            for label, (run_dir, t0) in flying.items():
                done, total = steps_done(run_dir)
                self.log(f"  … {label}: {done}/{total or '?'} steps logged, "
                         f"{time.perf_counter() - t0:.0f} s")


def run_all(specs: Sequence[tuple[str, RunSpec]], *, parallel: int, isolate: bool,
            log: Callable[[str], None], record: Callable[[str, float, str], None],
            heartbeat_s: float = 30.0) -> dict[str, Path | Exception]:
    """ensure_run for every (label, spec), `parallel` at a time. Returns label -> folder or error.

    record(label, seconds, action) is called as each run ends. In-process runs (isolate=False)
    share this interpreter's global state, so they always go one at a time.
    """
    if parallel < 1:
        raise ValueError(f"parallel = {parallel} must be at least 1")
    parallel = parallel if isolate else 1
    out: dict[str, Path | Exception] = {}

    with Heartbeat(log, heartbeat_s if parallel > 1 else None) as beat:
        def one(label: str, spec: RunSpec) -> None:
            t = time.perf_counter()
            beat.started(label, spec.run_dir())
            try:
                run_dir, action = ensure_run(spec, log=log, isolate=isolate,
                                             progress=parallel == 1)
                out[label] = run_dir
                record(label, time.perf_counter() - t, action)
            except (RuntimeError, ValueError, OSError) as exc:
                out[label] = exc
                log(f"  FAILED {label}: {exc}")
            finally:
                beat.finished(label)

        with ThreadPoolExecutor(max_workers=parallel) as pool:
            for future in [pool.submit(one, label, spec) for label, spec in specs]:
                future.result()
    return out
