"""The part of a file that libcst needs to see to make a fix: the methods or the top-level functions
and classes its changes lie in. libcst parses a line of code about fifteen times as slowly as `ast`,
and finding a node by its position costs more again, so a fix in one method of a 10,000-line file
parses that method, not the file.

A region is parsed as a module of its own: top-level definitions as they are, the methods (and other
definitions) of one class below a `class _:` line. It gives the same result as the whole file when
- every change lies inside a definition of the region (within its lines, decorators included): the
  changes then touch only nodes inside it, never the list of statements it belongs to or the comment
  lines between them; and
- the region's module takes the whole file's defaults for the code a fix adds: its indentation (that
  of the first indented block, as libcst reads it) and its line break (the first one); and
- libcst gives the region's code back as it read it (it drops the last line break of code whose line
  breaks are all a lone CR).
Otherwise the whole file is parsed (cachelint.codemod.transform.Rewriter checks).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from cachelint.edits import lines_with_breaks
from cachelint.finding import Span

# What libcst takes for a file's indentation and line break when it holds none (libcst._parser).
FALLBACK_INDENT = "    "
FALLBACK_NEWLINE = "\n"
_NEWLINE = re.compile(r"\r\n?|\n")
_DEFINITION = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class Definition:
    """A top-level function or class: its first line (its first decorator's) and last; for a class,
    those of the functions and classes in its body."""

    first: int
    last: int
    members: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class Region:
    """Lines `first` to `last` of a file; with `in_class`, lines of one class's body, parsed below a
    class statement of their own (`class _:`)."""

    first: int
    last: int
    in_class: bool = False


def _first_line(node: ast.stmt) -> int:
    """The statement's first line: its first decorator's, if it has any."""
    decorators: list[ast.expr] = getattr(node, "decorator_list", [])
    return min([node.lineno, *(decorator.lineno for decorator in decorators)])


def _lines(node: ast.stmt) -> tuple[int, int]:
    return _first_line(node), node.end_lineno or node.lineno


def definitions(text: str) -> list[Definition] | None:
    """The top-level functions and classes of `text`, in order; None when `ast` cannot parse it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarnings concern the code's own checks
            module = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    found = []
    for node in module.body:
        if isinstance(node, _DEFINITION):
            members = (
                tuple(_lines(member) for member in node.body if isinstance(member, _DEFINITION))
                if isinstance(node, ast.ClassDef)
                else ()
            )
            found.append(Definition(*_lines(node), members))
    return found


def region(spans: Sequence[Span], defined: Sequence[Definition]) -> Region | None:
    """The smallest region holding the spans: the functions and classes of one class's body that hold
    them, else the top-level definitions that do; None when a span is in none."""
    holders: list[Definition] = []
    members: list[tuple[int, int] | None] = []
    for span in spans:
        holder = next((item for item in defined if item.first <= span.line and span.end_line <= item.last), None)
        if holder is None:
            return None
        holders.append(holder)
        members.append(next((m for m in holder.members if m[0] <= span.line and span.end_line <= m[1]), None))
    if not holders:
        return None
    inside = [member for member in members if member is not None]
    if len(set(holders)) == 1 and len(inside) == len(members):
        return Region(min(first for first, _ in inside), max(last for _, last in inside), in_class=True)
    return Region(min(item.first for item in holders), max(item.last for item in holders))


def default_indent(text: str) -> str | None:
    """The indentation libcst takes as the file's default: that of its first indented block (the first
    INDENT token), else FALLBACK_INDENT; None when the tokenizer fails before finding it."""
    try:
        for token in tokenize.generate_tokens(io.StringIO(text, newline=None).readline):
            if token.type == tokenize.INDENT:
                return token.string
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None
    return FALLBACK_INDENT


def default_newline(text: str) -> str:
    """The line break libcst takes as the file's default: its first."""
    match = _NEWLINE.search(text)
    return match.group(0) if match else FALLBACK_NEWLINE


def changed_statements(before: str, after: str, module: ast.Module) -> str:
    """The lines of `after` (whose tree is `module`) from the last top-level statement that begins a
    line at or before the first line changed from `before`, to the line before the first such
    statement after the last changed line: top-level statements whole, a module of their own."""
    old, new = lines_with_breaks(before), lines_with_breaks(after)
    same_start = 0
    while same_start < min(len(old), len(new)) and old[same_start] == new[same_start]:
        same_start += 1
    same_end = 0
    while same_end < min(len(old), len(new)) - same_start and old[-1 - same_end] == new[-1 - same_end]:
        same_end += 1
    first, last = same_start + 1, max(same_start + 1, len(new) - same_end)
    starts = [_first_line(node) for node in module.body if node.col_offset == 0]
    begin = max((start for start in starts if start <= first), default=1)
    end = min((start - 1 for start in starts if start > last), default=len(new))
    return "".join(new[begin - 1 : end])
