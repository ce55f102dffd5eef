"""manifest.json of a result folder: what ran, with what, and whether it finished; and the
one way to find run folders by what their manifests say (`find_runs`).

Status moves running -> complete | failed | interrupted (a run stopped by a signal, resumable).
Every write is atomic, so a killed run leaves the last good manifest with status `running`
(never `complete`).
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

from topkscope.io import write_json_atomic

STATUSES = ("running", "complete", "failed", "interrupted")
MANIFEST = "manifest.json"


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
        path = Path(run_dir) / MANIFEST
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            raise FileNotFoundError(f"no manifest.json in {str(run_dir)!r}: not a result folder") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{str(path)!r} is not valid JSON: {exc}") from None

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


# --- finding runs by manifest content ----------------------------------------------------


def condition_of(manifest: dict) -> str:
    """The training condition of a run: its density warm-up plus a non-default k rule and any
    named deviation, e.g. "warmup=paper" or "warmup=none; empty_fallback=topk"."""
    sched = manifest.get("density_schedule")
    if sched is None:
        sched = (manifest.get("config") or {}).get("density_schedule")
    if isinstance(sched, str):
        name = sched
    elif sched:
        name = "custom[" + ",".join(f"{float(v):g}" for v in sched) + "]"
    else:
        name = "none"
    parts = [f"warmup={name}"]
    if manifest.get("k_rule", "round") != "round":
        parts.append(f"k_rule={manifest['k_rule']}")
    parts += list(manifest.get("deviations") or [])
    return "; ".join(parts)


@dataclass(frozen=True)
class FoundRun:
    """A run folder and its manifest as read when it was found."""

    path: Path
    manifest: dict


def _run_folders(root: Path) -> list[Path]:
    """root itself if it is a run folder, else its run folders one level down (an experiment
    folder) or two (a results root: <experiment>/<run_id>/)."""
    if (root / MANIFEST).is_file():
        return [root]
    found = sorted(p.parent for p in root.glob(f"*/{MANIFEST}"))
    return found or sorted(p.parent for p in root.glob(f"*/*/{MANIFEST}"))


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


def find_runs(roots: str | Path | Iterable[str | Path], *, experiment: Any = None,
              profile: Any = None, sparsifier: Any = None, seed: Any = None,
              density: Any = None, condition: Any = None,
              status: Any = "complete") -> list[FoundRun]:
    """Every run folder under `roots` whose manifest matches, selected by manifest content only
    (never by folder name).

    Args:
        roots: run folders, experiment folders or results roots (``<experiment>/<run_id>/``),
            one or several; a root that does not exist holds no runs.
        experiment, profile, sparsifier, seed, density: manifest fields to match; each None
            (any), a value, or a tuple of allowed values.
        condition: matched against ``condition_of(manifest)`` (e.g. "warmup=paper").
        status: "complete" (default), a tuple such as ("interrupted", "failed"), or None (any).

    Returns:
        FoundRun(path, manifest) per match, sorted by path. A manifest that cannot be read is
        skipped with a one-line warning naming it.
    """
    if isinstance(roots, (str, Path)):
        roots = [roots]
    wanted = {"experiment": experiment, "profile": profile, "sparsifier": sparsifier,
              "seed": seed, "density": density, "status": status}
    out: dict[Path, FoundRun] = {}
    for root in roots:
        root = Path(root)
        if not root.is_dir():
            continue
        for folder in _run_folders(root):
            try:
                manifest = Manifest.load(folder)
            except (OSError, ValueError) as exc:
                warnings.warn(f"skipping {str(folder)!r}: unreadable manifest.json ({exc})",
                              stacklevel=2)
                continue
            if not isinstance(manifest, dict):
                warnings.warn(f"skipping {str(folder)!r}: manifest.json is not an object",
                              stacklevel=2)
                continue
            if all(_matches(manifest.get(k), v) for k, v in wanted.items()) and \
                    _matches(condition_of(manifest), condition):
                out[folder.resolve()] = FoundRun(folder, manifest)
    return sorted(out.values(), key=lambda r: str(r.path))
