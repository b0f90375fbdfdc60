"""The walk: one pass over a file's syntax tree, with every part of the summary extracted on the way.

It is built from CPython's `ast`, which parses and walks about 15 times faster than libcst and records
exact positions; libcst is kept for the files that get fixes (see fixes.py).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable

from cachelint.source import module_name_for
from cachelint.summary.launches import Launches
from cachelint.summary.model import FileSummary
from cachelint.summary.positions import SourcePositions


class Summarizer(Launches):
    """Every layer of the walk in one visitor: bindings, gates, compatibility code, calls, requests,
    launches."""


def summarize(
    path: str,
    text: str,
    tree: ast.Module,
    helpers: tuple[str, ...] = (),
    module_name: str | None = None,
) -> FileSummary:
    """Walk `tree` (parsed from `text`) once and return its summary."""
    name = module_name if module_name is not None else module_name_for(path)
    summary = FileSummary(path=path, module=name, engine="unknown")
    summarizer = Summarizer(summary, SourcePositions(text), helpers)

    def walk() -> None:
        summarizer.visit_block(tree.body)
        summarizer.finish()

    _walk_with_headroom(walk)
    return summary


# Before Python 3.11 every Python call also takes C stack: on 3.10 a walk to ten times the default
# recursion limit needed between 1 and 2 MiB (running out is a crash, not a RecursionError), whatever
# the main thread has left; the walk gets a stack of its own with room to spare.
_WALK_STACK_BYTES = 64 * 1024 * 1024


def _walk_with_headroom(walk: Callable[[], None]) -> None:
    """Run `walk` with room for any tree `ast.parse` builds at the current recursion limit.

    CPython builds trees up to about 3 times the limit deep (e.g. 1,000 nested brackets or calls);
    the walk takes up to 3 frames per level, so the limit is raised tenfold meanwhile. From Python
    3.11 on, Python-to-Python calls use no C stack; before, the walk runs in a thread whose stack
    holds that many frames."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * limit))
    try:
        if sys.version_info >= (3, 11):
            walk()
        else:
            _run_in_thread(walk, _WALK_STACK_BYTES)
    finally:
        sys.setrecursionlimit(limit)


def _run_in_thread(function: Callable[[], None], stack_bytes: int) -> None:
    """Call `function` in a new thread with a stack of `stack_bytes`; raise what it raises."""
    import threading

    raised: list[BaseException] = []

    def run() -> None:
        try:
            function()
        except BaseException as error:
            raised.append(error)

    previous = threading.stack_size(stack_bytes)
    try:
        thread = threading.Thread(target=run, name="cachelint-summary")
        thread.start()
    finally:
        threading.stack_size(previous)
    thread.join()
    if raised:
        raise raised[0]
