"""The pool's workers die with the process that started them, however it ends: a parent killed by
TERM, HUP or KILL cannot stop them itself, and they would otherwise live on under init."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# A parent with a live pool of two: each worker sleeps in its batch; the parent prints their pids.
PARENT = """
import os, sys, time
from cachelint import parallel

def nap(items):
    os.write(1, f"{os.getpid()}\\n".encode())  # one write: the two workers' lines never mix
    time.sleep(120)
    return items

with parallel.Workers(2) as workers:
    workers.map(nap, [1, 2], [1, 1], batches_per_worker=1)
"""
TIMEOUT = 30.0  # seconds, for the workers to report and then to be gone


def gone(pid: int) -> bool:
    """Whether the process has ended (a zombie that init has not reaped yet counts as ended)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return True
    return fields[0] in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
@pytest.mark.parametrize("kill", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL], ids=lambda s: s.name)
def test_workers_die_with_their_parent(kill: signal.Signals) -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    workers = [int(parent.stdout.readline()) for _ in range(2)]
    assert all(not gone(pid) for pid in workers)
    os.kill(parent.pid, kill)
    parent.wait(timeout=TIMEOUT)
    deadline = time.monotonic() + TIMEOUT
    while not all(gone(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = [pid for pid in workers if not gone(pid)]
    for pid in alive:  # leave nothing behind, even when the test fails
        os.kill(pid, signal.SIGKILL)
    assert alive == []


def test_a_worker_without_the_death_signal_watches_its_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    # The portable way, as where prctl is missing: a worker whose parent is gone ends.
    from cachelint import parallel

    monkeypatch.setattr(parallel, "_ask_for_death_signal", lambda: False)
    monkeypatch.setattr(parallel, "PARENT_CHECK_SECONDS", 0.05)
    read, write = os.pipe()
    middle = os.fork()
    if middle == 0:  # the parent of the worker: starts it, tells its pid, and ends
        worker = os.fork()
        if worker == 0:
            os.close(read)
            parallel._die_with(os.getppid())
            time.sleep(120)
            os._exit(0)
        os.write(write, f"{worker}\n".encode())
        time.sleep(0.5)  # the worker's watch has started
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as stream:
        worker = int(stream.readline())
    os.waitpid(middle, 0)
    deadline = time.monotonic() + TIMEOUT
    while not gone(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not gone(worker):
        os.kill(worker, signal.SIGKILL)
        pytest.fail("the worker outlived its parent")
