"""manifest.json of a result folder: what ran, with what, and whether it finished.

Status moves running -> complete | failed. Every write is atomic, so a killed run
leaves the last good manifest with status `running` (never `complete`).
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from topkscope.io import write_json_atomic

STATUSES = ("running", "complete", "failed")


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


class Manifest:
    """A run's manifest.json, rewritten atomically on every change."""

    def __init__(self, run_dir: str | Path, **fields: Any) -> None:
        self.path = Path(run_dir) / "manifest.json"
        self.data: dict[str, Any] = {
            "status": "running",
            "start_time": now_iso(),
            "end_time": None,
            "versions": versions(),
            "git_commit": git_commit(),
            "command": " ".join(sys.argv),
        }
        self.data.update(fields)

    @classmethod
    def load(cls, run_dir: str | Path) -> dict[str, Any]:
        path = Path(run_dir) / "manifest.json"
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            raise FileNotFoundError(f"no manifest.json in {str(run_dir)!r}: not a result folder") from None

    @classmethod
    def resume(cls, run_dir: str | Path, note: str = "resumed_at") -> Manifest:
        """Reopen an existing manifest (for --resume, or a recorder appending a segment with
        note="appended_at"): the time is added to the list `note`, status back to running."""
        m = cls.__new__(cls)
        m.path = Path(run_dir) / "manifest.json"
        m.data = cls.load(run_dir)
        m.data.setdefault(note, []).append(now_iso())
        m.data["status"] = "running"
        m.data["end_time"] = None
        return m

    def write(self) -> None:
        write_json_atomic(self.path, self.data)

    def update(self, **fields: Any) -> None:
        self.data.update(fields)
        self.write()

    def complete(self, **fields: Any) -> None:
        self.update(status="complete", end_time=now_iso(), **fields)

    def fail(self, error: BaseException | str) -> None:
        msg = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        self.update(status="failed", end_time=now_iso(), error=msg)
