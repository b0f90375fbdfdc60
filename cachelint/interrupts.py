"""Ctrl-C: the run ends at once with exit 130, except inside the few steps that must finish whole.

After `install`, SIGINT ends the process (`interrupted`); inside `raising` (the command itself) it
raises KeyboardInterrupt instead, so that the pool's workers are stopped on the way up, and it is
remembered, so that an interrupt swallowed on its way up (raised inside a finalizer, say) still ends
the run: at the next `check` (between two batches, files or rounds of fixes), else once the command
returns. `deferred` holds SIGINT back while a file is written, the cache folder is made or the worker
pool is started or stopped, and delivers it when the step is done. Once Ctrl-C has come, a thread's
failure (the pool's own threads, as its killed workers are torn down) is not printed.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import NoReturn

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command ended by Ctrl-C

_received = False
_raising = False


def _on_interrupt(signum: int, frame: FrameType | None) -> None:
    global _received
    _received = True
    if not _raising:
        interrupted()
    raise KeyboardInterrupt


def install() -> None:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _on_interrupt)
        sys.unraisablehook = _unraisable
        threading.excepthook = _thread_failed


def _unraisable(unraisable: sys.UnraisableHookArgs) -> None:
    """Ctrl-C raised where Python cannot pass it on (a finalizer, the callback of the import system's
    module lock) is not printed as "Exception ignored": it is remembered, and ends the run with exit
    130 at the next `check`, else once the command returns (`received`)."""
    if _received and unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
        return
    sys.__unraisablehook__(unraisable)


def _thread_failed(failure: threading.ExceptHookArgs) -> None:
    """After Ctrl-C, the process pool's own threads may fail while its killed workers are torn down
    (a pipe closed under them); the run is ending with exit 130, and that is not printed. Before,
    a thread's failure is printed as Python prints it."""
    if not _received:
        threading.__excepthook__(failure)


@contextmanager
def raising() -> Iterator[None]:
    """Inside, Ctrl-C raises KeyboardInterrupt; outside, it ends the process at once."""
    global _raising
    _raising = True
    try:
        yield
    finally:
        _raising = False


def received() -> bool:
    return _received


def check() -> None:
    """Stop here for a Ctrl-C that Python swallowed (see `_unraisable`): raise its KeyboardInterrupt
    again, at a point between two steps of the work (a batch, a file, a round of fixes)."""
    if _received and _raising:
        raise KeyboardInterrupt


@contextmanager
def deferred() -> Iterator[None]:
    """Hold SIGINT back until the block ends, then deliver it. Processes forked inside the block
    inherit the holding handler, so that they cannot be interrupted before they set their own."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held:
            signal.raise_signal(signal.SIGINT)


def ignore_in_worker() -> None:
    """For a pool worker: Ctrl-C reaches the whole process group, and the parent stops the workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def interrupted() -> NoReturn:
    """End the process for Ctrl-C: one line on stderr, exit 130. The steps that must not be cut short
    are done by now (see `deferred`); `os._exit` spares the wait for threads a stopped pool may leave."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a second Ctrl-C ends it at once
    for stream, text in ((sys.stdout, ""), (sys.stderr, "cachelint: interrupted\n")):
        try:
            stream.write(text)
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(EXIT_INTERRUPTED)
