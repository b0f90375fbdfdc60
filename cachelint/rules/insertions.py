"""Edits that add or remove whole statements next to a recorded anchor, in the file's own indentation."""

from __future__ import annotations

from typing import TypeGuard

from cachelint.finding import Edit, Span
from cachelint.summary import Anchor


def indent_unit(anchor: Anchor) -> str:
    return "\t" if "\t" in anchor.indent else "    "


def insertable_after(anchor: Anchor | None) -> TypeGuard[Anchor]:
    """Whether lines added after the anchor's statement run right after it: the statement has its lines
    to itself and does not leave the block (`return engine.pause_generation()`)."""
    return anchor is not None and anchor.own_lines and not anchor.leaves_block


def insert_after(path: str, anchor: Anchor, lines: list[str]) -> Edit:
    """New lines after the anchor's statement, at its indentation (`lines` indent relative to it)."""
    at = Span(anchor.statement_span.end_line, anchor.line_end_col, anchor.statement_span.end_line, anchor.line_end_col)
    return Edit(path, at, "".join(f"\n{anchor.indent}{line}" for line in lines))


def remove_statement(path: str, anchor: Anchor) -> Edit:
    """Delete the anchor's statement with its lines; the only statement of a block becomes `pass`."""
    span = anchor.statement_span
    if anchor.sole_statement:
        return Edit(path, span, "pass")
    removed = Span(span.line - 1, anchor.previous_line_end_col, span.end_line, anchor.line_end_col)
    return Edit(path, removed, "")


def guarded(receiver: str, method: str, call: str, anchor: Anchor) -> list[str]:
    """`call` behind `if hasattr(receiver, "method"):`, as lines relative to the anchor's indentation."""
    return [f'if hasattr({receiver}, "{method}"):', f"{indent_unit(anchor)}{call}"]
