"""The walk: one pass over a file's syntax tree, with every part of the summary extracted on the way.

It is built from CPython's `ast`, which parses and walks about 15 times faster than libcst and records
exact positions; libcst is kept for the files that get fixes (see fixes.py).
"""

from __future__ import annotations

import ast
import contextlib
import sys
from collections.abc import Iterator

from cachelint.source import module_name_for
from cachelint.summary.calls import Calls
from cachelint.summary.model import FileSummary
from cachelint.summary.positions import SourcePositions


class Summarizer(Calls):
    """Every layer of the walk in one visitor: bindings, gates, compatibility code, calls."""


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
    with _recursion_headroom():
        summarizer.visit_block(tree.body)
        summarizer.finish()
    return summary


@contextlib.contextmanager
def _recursion_headroom() -> Iterator[None]:
    """Room for the walk over any tree `ast.parse` builds at the current recursion limit.

    CPython builds trees up to about 3 times the limit deep (e.g. 1,000 nested brackets or calls);
    the walk takes up to 3 frames per level. From Python 3.11 on, Python-to-Python calls use no C
    stack, so a higher limit is safe; on 3.10 such files stay "too deeply nested to analyse"."""
    limit = sys.getrecursionlimit()
    if sys.version_info < (3, 11):  # pragma: no cover
        yield
        return
    sys.setrecursionlimit(max(limit, 10 * limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)
