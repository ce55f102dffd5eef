"""comm.peers: how a DDP-hook rank tells what ended its peers — their own word (an end file of
this group), else their process on this host: gone without a word (SIGKILL), or a zombie whose
exit status /proc still holds — and a WorkerFailed that names the rank in the manifest."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time

import pytest

from topkscope.comm.peers import Peers
from topkscope.interrupts import WorkerFailed
from topkscope.manifest import Manifest


def group(folder, pids: list[int], me: int = 0) -> Peers:
    peers = Peers(folder, me, len(pids))
    host = socket.gethostname()
    peers.meet([{"host": host, "pid": pid, "token": "t0ken"} for pid in pids])
    return peers


def child(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code])


def wait_zombie(proc: subprocess.Popen) -> None:
    """Until proc has ended but is not reaped (its exit status still in /proc)."""
    for _ in range(200):
        try:
            state = open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            pytest.skip("no /proc")
        if state == "Z":
            return
        time.sleep(0.02)
    raise AssertionError("the child did not end")


def test_a_live_peer_is_no_failure_and_a_killed_one_is_named(tmp_path):
    alive = child("import time; time.sleep(30)")
    try:
        peers = group(tmp_path, [0, alive.pid])
        assert peers.failure() is None
        alive.send_signal(signal.SIGKILL)
        alive.wait()  # reaped, as torchrun does before it stops the others
        rank, how, entry, said = peers.failure()
        assert (rank, how, said) == (1, "was killed by SIGKILL", False)
        assert (entry["signal"], entry["exitcode"], entry["pid"]) == ("SIGKILL", -9, alive.pid)
    finally:
        alive.kill()


def test_a_peer_not_yet_reaped_gives_its_own_exit_status(tmp_path):
    exited = child("import sys; sys.exit(3)")
    killed = child("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    try:
        wait_zombie(exited)
        wait_zombie(killed)
        assert group(tmp_path, [0, exited.pid]).failure()[1] == "exited with status 3"
        assert group(tmp_path, [0, killed.pid]).failure()[1] == "was killed by SIGSEGV"
    finally:
        exited.wait()
        killed.wait()


def test_a_peers_own_word_counts_and_another_groups_is_ignored(tmp_path):
    alive = child("import time; time.sleep(30)")
    try:
        theirs = group(tmp_path, [0, alive.pid], me=1)
        theirs.ended("RuntimeError: boom", "failed")
        mine = group(tmp_path, [0, alive.pid])
        assert mine.failure()[:2] == (1, "failed: RuntimeError: boom")
        assert mine.failure()[3] is True  # it said so itself: nobody else prints a line
        stale = Peers(tmp_path, 0, 2)
        stale.meet([{"host": socket.gethostname(), "pid": p, "token": "another"}
                    for p in (0, alive.pid)])
        assert stale.failure() is None
        assert json.loads((tmp_path / ".ranks" / "rank-1.json").read_text())["status"] == \
            "failed"
    finally:
        alive.kill()
        alive.wait()


def test_a_worker_failed_ends_the_manifest_with_the_rank_and_how(tmp_path):
    manifest = Manifest(tmp_path)
    error = WorkerFailed("worker rank 1 was killed by SIGKILL",
                         {"worker_failures": [{"rank": 1, "signal": "SIGKILL"}]},
                         line="topkscope: worker rank 1 was killed by SIGKILL")
    manifest.stop(error)
    data = Manifest.load(tmp_path)
    assert (data["status"], data["error"]) == ("failed", "worker rank 1 was killed by SIGKILL")
    assert data["worker_failures"] == [{"rank": 1, "signal": "SIGKILL"}]
    assert data.get("signal") is None  # a failure, never an interruption
    assert error.code == "topkscope: worker rank 1 was killed by SIGKILL"  # the one line
    assert WorkerFailed("x").code == 1  # other ranks exit 1 without a word
