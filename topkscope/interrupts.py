"""SIGINT (Ctrl-C) and SIGTERM (what a cluster scheduler sends before it preempts a job) as a
clean stop: the run's files are flushed, its manifest says `interrupted`, and the process exits
with 128 + the signal number (130, 143), as a shell reports a process killed by that signal.

- `RunInterrupted`: the exception a stop raises; a KeyboardInterrupt, so `except Exception`
  never swallows it and code that already treats Ctrl-C as a stop treats SIGTERM the same.
- `StopRequests`: the handler `topkscope run` installs for both signals. The first signal
  raises RunInterrupted at once in a single process (stopping anywhere is safe: what is past
  the last checkpoint is redone on resume), or is only noted under torchrun, where every rank
  must leave the collective steps together: the loop asks `agreed()` at each step boundary.
  Later signals are ignored, so the cleanup that follows the first one finishes.
- `run_child`: a parent process (the torchrun launcher of `topkscope run`) runs its child in
  a session of its own and forwards the first signal it gets, exactly once, then waits for the
  child to finish its own cleanup.

Only the main thread may install signal handlers; elsewhere (a run started from a worker
thread) these helpers install nothing and signals keep Python's default behaviour.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by SIGINT or SIGTERM. `signum`; `exit_status` = 128 + signum."""

    def __init__(self, signum: int, message: str | None = None) -> None:
        self.signum = int(signum)
        super().__init__(message or f"interrupted by {signal_name(self.signum)}")

    @property
    def signal_name(self) -> str:
        return signal_name(self.signum)

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


def interruption_signal(error: BaseException | None) -> str | None:
    """The name of the signal that ended a run with `error`: RunInterrupted's own, SIGINT for
    any other KeyboardInterrupt (Python's own handler raises it), None for everything else."""
    if isinstance(error, RunInterrupted):
        return error.signal_name
    if isinstance(error, KeyboardInterrupt):
        return "SIGINT"
    return None


@contextlib.contextmanager
def handling(handler: Callable[[int, Any], None]) -> Iterator[bool]:
    """Install handler for SIGINT and SIGTERM, restore the previous handlers on exit. Yields
    whether it could (only the main thread may install signal handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield False
        return
    previous = {s: signal.signal(s, handler) for s in SIGNALS}
    try:
        yield True
    finally:
        for s, old in previous.items():  # None: a handler not set from Python, not restorable
            signal.signal(s, signal.SIG_DFL if old is None else old)


class StopRequests:
    """The SIGINT/SIGTERM handler of a run (see the module docstring). `received`: the first
    signal this process got, or None."""

    def __init__(self, raise_now: bool = True) -> None:
        self.raise_now = raise_now
        self.received: int | None = None

    def __call__(self, signum: int, frame: Any) -> None:
        if self.received is not None:
            return  # the first one is being handled; let its cleanup finish
        self.received = signum
        if self.raise_now:
            raise RunInterrupted(signum)

    def agreed(self, sum_over_ranks: Callable[[list[float]], list[float]]) -> None:
        """At a step boundary that every rank reaches: raise RunInterrupted on every rank when
        any rank got a signal. sum_over_ranks sums a small vector over the ranks (one
        all-reduce). A rank that got no signal itself names the one another rank got."""
        mine = [float(self.received == s) for s in SIGNALS]
        total = sum_over_ranks(mine)
        if any(total):
            signum = self.received or SIGNALS[max(range(len(SIGNALS)), key=lambda i: total[i])]
            self.received = signum
            raise RunInterrupted(signum)


def run_child(argv: Sequence[str], env: dict[str, str] | None = None) -> tuple[int, int | None]:
    """Run argv and wait for it; the first SIGINT/SIGTERM this process gets is forwarded to the
    child once (later ones are ignored) and the child is waited for while it cleans up.

    The child gets a session of its own, so a Ctrl-C in the terminal reaches it only through
    this forwarding, never twice. Returns (the child's exit status, the signal forwarded or
    None). Outside the main thread the child shares this process's session and signals.
    """
    forwarded: list[int] = []
    child: list[subprocess.Popen] = []

    def forward(signum: int, frame: Any) -> None:
        if forwarded:
            return
        forwarded.append(signum)
        if child:
            with contextlib.suppress(ProcessLookupError):
                child[0].send_signal(signum)

    with handling(forward) as installed:
        proc = subprocess.Popen(list(argv), env=env, start_new_session=installed)
        child.append(proc)
        if forwarded:  # a signal that came while the child was being started
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(forwarded[0])
        code = proc.wait()
    return code, (forwarded[0] if forwarded else None)
