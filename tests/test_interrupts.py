"""Ctrl-C at any moment of a run ends it promptly with exit 130: no traceback, no hang, no worker
process left behind, no half-written file and no temporary file or folder left.

The terminal sends SIGINT to the whole foreground process group (cachelint and its pool workers),
and so does this test, at delays spread over a `--fix` run large enough to start the process pool.
The delays count from the moment cachelint has taken over SIGINT (a pipe tells the test): before
that the interpreter is still starting, and a SIGINT then is Python's own business (a traceback).
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_runner import environment, write_tree

from cachelint import parallel
from cachelint.cache import OWN_FILES
from cachelint.engine import SUMMARY_COST

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table in /proc")

BUGGY = """\
import vllm


class Server{index}:
    def __init__(self, engine):
        self.engine = engine

    async def update_weights(self, meta):
        await self.engine.collective_rpc("update_weights_from_ipc", kwargs=meta)
        await self.engine.collective_rpc("reset_encoder_cache")
"""
HELPERS = "".join(
    f"\n\ndef helper_{k}(a, b):\n    values = [a * {k} + b for _ in range(3)]\n    return sum(values)\n"
    for k in range(90)
)
FILES = 24

# Runs `cachelint ARGS` as `python -m cachelint` does, after telling the test (through the file
# descriptor in argv[1]) that cachelint's SIGINT handling is in place.
LAUNCHER = """\
import os, sys
from cachelint import interrupts
interrupts.install()
os.write(int(sys.argv[1]), b"ready")
os.close(int(sys.argv[1]))
sys.argv = ["cachelint", *sys.argv[2:]]
from cachelint.__main__ import program
program()
"""
COMMAND = ("check", "--fix", "--unsafe-fixes", "--output-format", "concise", ".")


def make_project(root: Path) -> Path:
    files = {f"pkg/module_{index}.py": BUGGY.format(index=index) + HELPERS for index in range(FILES)}
    return write_tree(root, {"pyproject.toml": '[project]\nname = "big"\ndependencies = ["vllm>=0.18"]\n', **files})


def tree(root: Path) -> dict[str, bytes | None]:
    """Every file and folder under `root` (folders as None), by relative path."""
    return {path.relative_to(root).as_posix(): None if path.is_dir() else path.read_bytes() for path in root.rglob("*")}


def without_cache_bytes(files: dict[str, bytes | None]) -> dict[str, bytes | None]:
    """`files` with the cache's files named but not read: the cache keeps each source file's inode and
    times, which differ from one copy of a project to another."""
    return {name: None if name.startswith(".cachelint_cache/") else data for name, data in files.items()}


def group_members(group: int) -> list[int]:
    """The processes of the process group `group`, zombies included."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[2]) == group:
                members.append(int(entry.name))
    return members


def start(project: Path) -> tuple[subprocess.Popen[bytes], float]:
    """The command in a process group of its own (as a shell runs a foreground job), once it is ready."""
    ready, tell = os.pipe()
    process = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, str(tell), *COMMAND],
        cwd=project,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment(),
        pass_fds=(tell,),
        start_new_session=True,
    )
    os.close(tell)
    try:
        assert select.select([ready], [], [], 60)[0], "cachelint did not start"
        assert os.read(ready, 5) == b"ready"
    finally:
        os.close(ready)
    return process, time.monotonic()


def test_ctrl_c_at_any_moment_ends_the_run_with_exit_130(tmp_path: Path) -> None:
    original = make_project(tmp_path / "original")
    work = sum(len(path.read_bytes()) for path in original.rglob("*.py")) * SUMMARY_COST
    assert work >= parallel.MIN_PARALLEL_WORK, "the run must be large enough to start the pool"
    before = tree(original)

    # One run left alone: how long it takes and what it writes.
    fixed_project = tmp_path / "fixed"
    shutil.copytree(original, fixed_project)
    process, started = start(fixed_project)
    _, stderr = process.communicate(timeout=300)
    duration = time.monotonic() - started
    assert process.returncode == 0, stderr.decode()
    fixed = tree(fixed_project)
    assert all(fixed[name] != before[name] for name in before if name.endswith(".py")), "every file is fixed"

    delays = [duration * step / 10 for step in range(11)]
    interrupted = with_workers = 0
    for number, delay in enumerate(delays):
        outcome = interrupt(tmp_path / f"run{number}", original, before, fixed, delay)
        interrupted += outcome is not None
        with_workers += outcome is True
    assert interrupted >= len(delays) // 2, "too few runs were interrupted to mean anything"
    if parallel.available_cores() > 1:
        # On a busy machine the pool may start and end between two of the delays above: one more run
        # is interrupted as soon as its workers are seen.
        outcome = interrupt(tmp_path / "pooled", original, before, fixed, None)
        assert with_workers or outcome is True, "no run was interrupted while its pool was running"


def interrupt(
    project: Path,
    original: Path,
    before: dict[str, bytes | None],
    fixed: dict[str, bytes | None],
    delay: float | None,
) -> bool | None:
    """Run the command on a copy of `original` and send SIGINT to its process group `delay` seconds
    into the run, or (None) as soon as it has pool workers; check how it ended. None when the run
    ended before the signal, else whether it had workers when the signal came."""
    shutil.copytree(original, project)
    process, started = start(project)
    if delay is not None:
        time.sleep(max(0.0, started + delay - time.monotonic()))
    else:
        while len(group_members(process.pid)) < 2 and process.poll() is None:
            time.sleep(0.001)
        delay = time.monotonic() - started
    members = group_members(process.pid)
    if process.poll() is not None:
        process.communicate()
        return None  # it ended before the signal could reach it
    os.killpg(process.pid, signal.SIGINT)  # as the terminal does: cachelint and its workers
    try:
        _, stderr = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"still running 60 s after Ctrl-C ({delay:.2f} s into the run)")
    deadline = time.monotonic() + 5
    while group_members(process.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert group_members(process.pid) == [], f"processes left behind ({delay:.2f} s into the run)"
    message = stderr.decode()
    assert "Traceback" not in message and "Exception ignored" not in message, message
    if process.returncode == 0:  # the signal came as it was exiting, its work done
        assert without_cache_bytes(tree(project)) == without_cache_bytes(fixed)
        return None
    # 130 as cachelint ends it; killed by SIGINT (which a shell also reports as 130) when the
    # signal came after cachelint had finished and the interpreter was exiting.
    assert process.returncode in (130, -signal.SIGINT), (delay, process.returncode, message)
    if process.returncode == 130:
        assert message.splitlines()[-1] == "cachelint: interrupted", message
    after = tree(project)
    assert set(after) - set(before) <= {".cachelint_cache", *(f".cachelint_cache/{name}" for name in OWN_FILES)}
    for name, data in before.items():
        assert after.get(name) in (data, fixed[name]), f"{name} is neither the original nor the fixed file"
    return len(members) > 1


SWALLOWED = """
import signal, weakref
from cachelint import interrupts

class Lock:
    pass

def dropped(_):
    signal.raise_signal(signal.SIGINT)  # Ctrl-C raised inside the callback, where Python swallows it

interrupts.install()
with interrupts.raising():
    lock = Lock()
    reference = weakref.ref(lock, dropped)
    del lock
    print("the command went on")
if interrupts.received():  # as cachelint.__main__ does once the command returns
    interrupts.interrupted()
"""


def test_ctrl_c_that_python_swallows_ends_the_run_with_exit_130_and_no_traceback() -> None:
    """Ctrl-C raised inside a callback that Python cannot pass an exception on from (the import
    system's module lock has one) is not printed as "Exception ignored", and still ends the run."""
    result = subprocess.run([sys.executable, "-c", SWALLOWED], capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stderr) == (130, "cachelint: interrupted\n")


SWALLOWED_BEFORE_WORK = """
import signal, weakref
from cachelint import interrupts, parallel

class Lock:
    pass

def dropped(_):
    signal.raise_signal(signal.SIGINT)

def work(items):
    print("worked on", items, flush=True)
    return items

interrupts.install()
try:
    with interrupts.raising():
        lock = Lock()
        reference = weakref.ref(lock, dropped)
        del lock
        parallel.Workers(1).map(work, [1, 2, 3], [1, 1, 1])
        print("the command went on")
except KeyboardInterrupt:
    interrupts.interrupted()
"""


def test_ctrl_c_that_python_swallows_stops_the_work_at_the_next_step() -> None:
    """Not only once the command returns: the work in hand stops before its next file or batch."""
    result = subprocess.run([sys.executable, "-c", SWALLOWED_BEFORE_WORK], capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (130, "", "cachelint: interrupted\n")


THREAD_FAILS = """
import signal, threading
from cachelint import interrupts

def fail():
    raise OSError("handle is closed")

def in_a_thread():
    thread = threading.Thread(target=fail)
    thread.start()
    thread.join()

interrupts.install()
in_a_thread()
try:
    with interrupts.raising():
        signal.raise_signal(signal.SIGINT)
except KeyboardInterrupt:
    in_a_thread()  # as the pool's threads may fail while its killed workers are torn down
    interrupts.interrupted()
"""


def test_a_thread_that_fails_after_ctrl_c_prints_nothing_and_one_that_fails_before_is_printed() -> None:
    result = subprocess.run([sys.executable, "-c", THREAD_FAILS], capture_output=True, text=True, timeout=60)
    assert result.returncode == 130
    assert result.stderr.count("Traceback") == result.stderr.count("OSError: handle is closed") == 1
    assert result.stderr.endswith("OSError: handle is closed\ncachelint: interrupted\n")
