"""How the other ranks of a torchrun group ended, for a DDP-hook run whose peer died.

When a worker dies (SIGKILL, a crash), torchrun stops the others with SIGTERM — rank 0 often
first, before its own collective fails — and a plain script dies on SIGTERM without a word, so
its manifest kept saying `running`. The hook's state therefore turns SIGTERM into a stop that
first looks at its peers (`failure`):

* at the hook's first step every rank learns every rank's host and process id (the all-gather
  that agrees on the superseded/ folder, `meet`) and starts a file of its own for a crash report
  (`.ranks/rank-<r>.fault`, Python's faulthandler, unless the script enabled it already);
* a rank that ends writes how (`.ranks/rank-<r>.json`: complete, interrupted by a signal,
  failed with its error), with the group's token so that files of an earlier group are never
  read as this one's;
* a peer that wrote no end: on this host, its process is looked up (/proc); one gone without a
  word or a crash report was killed by SIGKILL (nothing else ends a Python process without any
  cleanup), one not yet reaped gives its own exit status; on another host it is taken as alive.

A dead peer makes the run end `failed` naming it (`interrupts.WorkerFailed`: the rank, how, and
`worker_failures` in the manifest), whichever rank torchrun stopped first; a SIGTERM while every
peer is alive is a stop (`interrupted`).
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import socket
from pathlib import Path
from typing import Any

from topkscope.io import write_json_atomic

RANKS = ".ranks"


def _status_of(pid: int) -> tuple[bool, int | None]:
    """(ended, wait status or None) of a process on this host: ended when it is gone or a
    zombie (whose exit status /proc still holds until its parent reaps it)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return True, None
    except OSError:  # no /proc: ask the kernel whether it exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True, None
        except PermissionError:
            pass
        return False, None
    if fields[0] not in ("Z", "X"):
        return False, None
    return True, int(fields[49]) if len(fields) > 49 else None


def _how(wait_status: int | None) -> tuple[str, dict[str, Any]]:
    """'was killed by SIGKILL' / 'exited with status 1' and the worker_failures fields."""
    if wait_status is None or wait_status & 0x7F:
        signum = signal.SIGKILL if wait_status is None else wait_status & 0x7F
        name = signal.Signals(signum).name
        return f"was killed by {name}", {"signal": name, "exitcode": -int(signum)}
    code = (wait_status >> 8) & 0xFF
    return f"exited with status {code}", {"signal": None, "exitcode": code}


class Peers:
    """The other ranks of this process's group, as far as this rank can tell (module doc)."""

    def __init__(self, folder: Path | None, rank: int, world: int) -> None:
        self.folder, self.rank, self.world = folder, rank, world
        self.members: list[dict[str, Any]] = []
        self.token: str | None = None
        self._fault = None  # the open crash-report file faulthandler writes into

    @staticmethod
    def me() -> dict[str, Any]:
        """What this rank tells the others at `meet`."""
        return {"host": socket.gethostname(), "pid": os.getpid(), "token": os.urandom(8).hex()}

    def _path(self, rank: int, suffix: str) -> Path | None:
        return None if self.folder is None else self.folder / RANKS / f"rank-{rank}.{suffix}"

    def meet(self, members: list[dict[str, Any]]) -> None:
        """Every rank's me() in rank order (from the hook's first all-gather); rank 0's token
        names the group."""
        self.members, self.token = members, members[0]["token"]
        path = self._path(self.rank, "fault")
        if path is not None and not faulthandler.is_enabled():
            path.parent.mkdir(exist_ok=True)
            self._fault = open(path, "w")  # noqa: SIM115 - open while the process lives
            faulthandler.enable(self._fault)

    def ended(self, how: str, status: str) -> None:
        """Write how this rank ended (status: complete, interrupted, failed), for its peers."""
        path = self._path(self.rank, "json")
        if path is None or self.token is None:
            return
        try:
            write_json_atomic(path, {"rank": self.rank, "token": self.token, "status": status,
                                     "how": how})
        except OSError:
            pass  # a rank that cannot say how it ended is looked up like one that died
        if self._fault is not None:
            faulthandler.disable()
            self._fault.close()
            self._fault = None

    def _said(self, rank: int) -> dict[str, Any] | None:
        path = self._path(rank, "json")
        try:
            found = json.loads(path.read_text()) if path is not None else None
        except (OSError, ValueError):
            return None
        return found if isinstance(found, dict) and found.get("token") == self.token else None

    def _crash(self, rank: int) -> str | None:
        path = self._path(rank, "fault")
        try:
            text = path.read_text().strip() if path is not None else ""
        except OSError:
            return None
        return text.splitlines()[0] if text else None

    def failure(self) -> tuple[int, str, dict[str, Any], bool] | None:
        """The lowest rank of the others that failed or died: (rank, how in words, its
        worker_failures entry, whether it said so itself); None when every peer is alive,
        stopped or unknown."""
        me = socket.gethostname()
        for rank, member in enumerate(self.members):
            if rank == self.rank:
                continue
            said = self._said(rank)
            if said is not None:
                if said.get("status") == "failed":
                    return rank, f"failed: {said.get('how')}", {
                        "rank": rank, "exitcode": 1, "signal": None, "pid": member["pid"]}, True
                continue
            if member.get("host") != me:
                continue  # another host: its process cannot be looked up from here
            ended, wait_status = _status_of(member["pid"])
            if not ended:
                continue
            crash = self._crash(rank)
            if crash is not None and wait_status is None:
                return rank, f"crashed ({crash})", {"rank": rank, "exitcode": None,
                                                   "signal": None, "pid": member["pid"]}, False
            how, fields = _how(wait_status)
            return rank, how, {"rank": rank, **fields, "pid": member["pid"]}, False
        return None

    def reporter(self, dead: int) -> bool:
        """Whether this rank writes and says the run's end: rank 0, or the lowest rank
        other than a dead rank 0."""
        return self.rank == (1 if dead == 0 else 0)
