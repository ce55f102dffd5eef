"""How a run's workers ended, where their tracebacks go, and the one line that says so.

- `<run>/run.log`: the tracebacks of a run's failures (every rank appends its own, with its
  rank and time) and what torchrun itself says when `topkscope run --launcher torchrun`
  starts it (topkscope.train.launcher); the terminal gets one line.
- `<run>/.worker-failures.json`: written by the launcher's torchrun when workers failed:
  [{rank, exitcode, signal, pid}], root cause (the first failure torchrun saw) first; read
  once by the launching process (`worker_failures`), which ends the manifest `failed` with
  `failure_message` and `worker_failures`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RUN_DIR_ENV = "TOPKSCOPE_RUN_DIR"
FAILURES = ".worker-failures.json"
RUN_LOG = "run.log"


def append_log(run_dir: Path, text: str) -> Path | None:
    """Append text to <run_dir>/run.log (None when the run folder does not exist)."""
    if not text or not run_dir.is_dir():
        return None
    path = run_dir / RUN_LOG
    with open(path, "a", encoding="utf-8") as fh:  # O_APPEND: ranks may write at once
        fh.write(text if text.endswith("\n") else text + "\n")
    return path


def failures_of(error) -> list[dict[str, Any]]:
    """torchrun's ChildFailedError as [{rank, exitcode, signal, pid}], root cause first."""
    root, _ = error.get_first_failure()
    out = []
    for rank in sorted(error.failures, key=lambda r: (r != root, r)):
        f = error.failures[rank]
        name = f.signal_name() if f.exitcode < 0 else None
        out.append({"rank": int(rank), "exitcode": int(f.exitcode), "signal": name,
                    "pid": int(f.pid)})
    return out


def worker_failures(run_dir: Path) -> list[dict[str, Any]]:
    """What the last torchrun of run_dir wrote about its failed workers (and removes it)."""
    path = run_dir / FAILURES
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    path.unlink(missing_ok=True)
    return found if isinstance(found, list) else []


def failure_message(failures: list[dict[str, Any]]) -> str:
    """'worker rank 1 was killed by SIGKILL' / 'worker rank 0 exited with status 1'."""
    if not failures:
        return "a torchrun worker failed"
    first = failures[0]
    how = (f"was killed by {first['signal']}" if first.get("signal")
           else f"exited with status {first['exitcode']}")
    return f"worker rank {first['rank']} {how}"
