"""Fixes made with libcst: the changes a rule records are made on the libcst tree of each file that
gets a fix (transform.py), and the text edits reported for a fix are read off the rewritten module.
`FixCacheResets` (command.py) runs the same fixes as a libcst codemod:

    python -m libcst.tool codemod --no-format -x cachelint.codemod.FixCacheResets [--unsafe-fixes] PATHS

libcst is imported only when a fix is made (this package itself does not import it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cachelint.finding import Applicability, Edit, Finding, Fix
from cachelint.source import SourceError, SourceFile, read_source

if TYPE_CHECKING:
    from cachelint.codemod.command import FixCacheResets

__all__ = ["EDIT_FORMATS", "FixCacheResets", "lacks_edits", "reader", "with_edits"]

# The output formats that print each fix's edits (`full` does with --show-fixes).
EDIT_FORMATS = frozenset({"json", "json-lines", "sarif"})


def reader(sources: Mapping[str, SourceFile]) -> Callable[[str], str | None]:
    """The text of a file as analysed: from `sources` (an analysis's), else as it is on disk."""

    def read(path: str) -> str | None:
        if path in sources:
            return sources[path].text
        try:
            return read_source(Path(path)).text
        except SourceError:
            return None

    return read


def lacks_edits(finding: Finding) -> bool:
    """Whether the finding's fix changes code but its text edits are not made yet."""
    return finding.fix is not None and bool(finding.fix.changes) and not finding.fix.edits


def with_edits(findings: Sequence[Finding], read: Callable[[str], str | None]) -> list[Finding]:
    """The findings with each fix's text edits, derived from the rewritten files (`read(path)`: the
    text of a file as analysed) where they are not yet. A fix that cannot be made becomes a
    display-only suggestion."""
    fixable = [finding for finding in findings if lacks_edits(finding)]
    if not fixable:
        return list(findings)
    from cachelint.codemod.transform import Rewriter

    rewriter = Rewriter(read)
    made: dict[int, Fix] = {}
    for finding in fixable:
        fix = finding.fix
        assert fix is not None
        edits = rewriter.edits(fix)
        if edits is None:
            made[id(finding)] = Fix(fix.message, Applicability.DISPLAY)
        else:
            ordered: tuple[Edit, ...] = tuple(edit for path in fix.paths for edit in edits[path])
            made[id(finding)] = dataclasses.replace(fix, edits=ordered)
    return [dataclasses.replace(f, fix=made[id(f)]) if id(f) in made else f for f in findings]


def __getattr__(name: str) -> Any:
    if name == "FixCacheResets":  # libcst.tool's `-x cachelint.codemod.FixCacheResets` looks it up here
        from cachelint.codemod.command import FixCacheResets

        return FixCacheResets
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
