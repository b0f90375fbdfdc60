"""Text edits on source: lines and columns as spans count them (1-based, line breaks as libcst sees them)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from cachelint.finding import Edit

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def source_lines(text: str) -> list[str]:
    """The lines of `text` without their line breaks; a trailing line break opens no extra line."""
    lines = text.split("\n") if "\r" not in text else _LINE_BREAK.split(text)  # the same, faster
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return lines


def lines_with_breaks(text: str) -> list[str]:
    """The lines of `text` with their line breaks, split where Python splits source: unlike
    `str.splitlines`, not at form feeds, U+0085 or U+2028 (which a string literal may hold)."""
    starts = line_starts(text)
    return [text[start:end] for start, end in zip(starts, [*starts[1:], len(text)], strict=True) if start < end]


def line_starts(text: str) -> list[int]:
    """The offset where each line begins (line 1 at index 0), plus the offset after a final line break."""
    return [0, *(match.end() for match in _LINE_BREAK.finditer(text))]


def offset(starts: list[int], text: str, line: int, col: int) -> int:
    if not 1 <= line <= len(starts):
        raise ValueError(f"line {line} is outside the text")
    position = starts[line - 1] + col - 1
    line_end = starts[line] if line < len(starts) else len(text)
    if not starts[line - 1] <= position <= line_end:
        raise ValueError(f"column {col} is outside line {line}")
    return position


def apply_edits(text: str, edits: Iterable[Edit]) -> str:
    """`text` with every edit applied; ValueError if two edits overlap or one lies outside the text."""
    starts = line_starts(text)
    located = [(offset(starts, text, edit.span.line, edit.span.col), edit) for edit in edits]
    pieces: list[str] = []
    position = 0
    for start, edit in sorted(located, key=lambda item: item[0]):
        end = offset(starts, text, edit.span.end_line, edit.span.end_col)
        if start < position or end < start:
            raise ValueError(f"overlapping or inverted edit at line {edit.span.line}")
        pieces += [text[position:start], edit.content]
        position = end
    pieces.append(text[position:])
    return "".join(pieces)
