"""SIGINT (Ctrl-C) and SIGTERM (what a cluster scheduler sends before it preempts a job) as a
clean stop: the run's files are flushed, its manifest says `interrupted`, and the process exits
with 128 + the signal number (130, 143), as a shell reports a process killed by that signal.

- `RunInterrupted`: the exception a stop raises; a KeyboardInterrupt, so `except Exception`
  never swallows it and code that already treats Ctrl-C as a stop treats SIGTERM the same.
- `WorkerFailed`: what ends a worker whose peer died (the DDP hook's SIGTERM handler, which
  torchrun's stop of the group calls): a failure naming the dead rank, never an interruption.
- `StopRequests`: the handler `topkscope run` installs for both signals. The first signal
  raises RunInterrupted at once in a single process (stopping anywhere is safe: what is past
  the last checkpoint is redone on resume), or is only noted under torchrun, where every rank
  must leave the collective steps together: the loop asks `agreed()` at each step boundary.
  Later signals are ignored, so the cleanup that follows the first one finishes.
- `ChildProcesses`: the handler of a parent that runs children (from any thread): the first
  signal is forwarded once to every running child, which stops cleanly on its own; no child
  starts after it; with no child running it raises RunInterrupted at once (or, for a parent
  that only waits for its child, nothing). Children run in sessions of their own when the
  handler is installed, so a Ctrl-C in the terminal reaches them only through the forwarding.
  The figures driver runs its `topkscope run`s and benchmarks through one.
- `run_child`: a parent process (the torchrun launcher of `topkscope run`) runs its one child
  through ChildProcesses and waits for it to finish its own cleanup.

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


class WorkerFailed(SystemExit):
    """A run ended because another worker of its group died or failed: `message` names the
    rank and how ("worker rank 1 was killed by SIGKILL"), `fields` go into the manifest
    (worker_failures). A SystemExit, so an uncaught one ends the process without a traceback:
    with `line` (the rank that reports the run's end) Python prints that one line and exits
    with status 1; without it, exits 1 silently."""

    def __init__(self, message: str, fields: dict[str, Any] | None = None,
                 line: str | None = None) -> None:
        super().__init__(line if line is not None else 1)
        self.message = message
        self.fields = dict(fields or {})

    def __str__(self) -> str:
        return self.message


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


class ChildProcesses:
    """The SIGINT/SIGTERM handler of a process that runs child processes, from the main thread
    or from worker threads (see the module docstring). `received`: the first signal, or None.

    raise_when_idle: the first signal raises RunInterrupted in the main thread when no child
    is running (the parent stops where it is); False: the parent goes on, e.g. to report.
    """

    def __init__(self, raise_when_idle: bool = True) -> None:
        self.raise_when_idle = raise_when_idle
        self.received: int | None = None
        self.own_session = False  # set True where the handler is installed (handling yields it)
        self._running: set[subprocess.Popen] = set()
        self._starting = 0  # children being started (the handler may run in their thread)
        self._lock = threading.RLock()  # re-entrant: the handler may interrupt its own thread

    def __call__(self, signum: int, frame: Any) -> None:
        with self._lock:
            if self.received is not None:
                return  # the first one is being handled; let the children's cleanup finish
            self.received = signum
            running, idle = list(self._running), not (self._running or self._starting)
        for proc in running:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signum)
        if idle and self.raise_when_idle:
            raise RunInterrupted(signum)

    def run(self, argv: Sequence[str], env: dict[str, str] | None = None) -> int:
        """Start argv and wait for it; its exit status. RunInterrupted (nothing started) when
        a signal came before it could start."""
        with self._lock:
            if self.received is not None:
                raise RunInterrupted(self.received, f"interrupted by "
                                     f"{signal_name(self.received)} before the child started")
            self._starting += 1
            try:
                proc = subprocess.Popen(list(argv), env=env, start_new_session=self.own_session)
                self._running.add(proc)
            finally:
                self._starting -= 1
            if self.received is not None:  # it came while the child was being started
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(self.received)
        try:
            return proc.wait()
        finally:
            with self._lock:
                self._running.discard(proc)


def run_child(argv: Sequence[str], env: dict[str, str] | None = None) -> tuple[int, int | None]:
    """Run argv and wait for it; the first SIGINT/SIGTERM this process gets is forwarded to the
    child once (later ones are ignored) and the child is waited for while it cleans up.

    The child gets a session of its own, so a Ctrl-C in the terminal reaches it only through
    this forwarding, never twice. Returns (the child's exit status, or 128 + the signal when
    it came before the child started; the signal forwarded or None). Outside the main thread
    the child shares this process's session and signals.
    """
    children = ChildProcesses(raise_when_idle=False)
    with handling(children) as installed:
        children.own_session = installed
        try:
            code = children.run(argv, env)
        except RunInterrupted as exc:
            code = exc.exit_status
    return code, children.received
