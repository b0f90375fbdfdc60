"""Text edits on source: lines and columns as spans count them (1-based, line breaks as libcst sees them)."""

from __future__ import annotations

import bisect
import difflib
import re
from collections.abc import Iterable

from cachelint.finding import Edit, Span

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


def overlaps(a: Edit, b: Edit) -> bool:
    """Whether two edits of one file touch the same text (two insertions at one point do)."""
    a_start, a_end = (a.span.line, a.span.col), (a.span.end_line, a.span.end_col)
    b_start, b_end = (b.span.line, b.span.col), (b.span.end_line, b.span.end_col)
    if a_start == a_end and b_start == b_end:
        return a_start == b_start
    return (a_start < b_end and b_start < a_end) or a_start == b_start


class Taken:
    """The edits of one file kept so far, none overlapping another, sorted by where they begin: whether
    a new edit overlaps one of them is looked up, not searched for (a round may keep thousands)."""

    def __init__(self) -> None:
        self._starts: list[tuple[int, int]] = []
        self._edits: list[Edit] = []

    def overlaps(self, edit: Edit) -> bool:
        start, end = (edit.span.line, edit.span.col), (edit.span.end_line, edit.span.end_col)
        # Kept edits do not overlap, so of those beginning before this one only the last reaches furthest.
        first = max(bisect.bisect_left(self._starts, start) - 1, 0)
        last = bisect.bisect_right(self._starts, end)
        return any(overlaps(edit, other) for other in self._edits[first:last])

    def add(self, edit: Edit) -> None:
        start = (edit.span.line, edit.span.col)
        index = bisect.bisect_left(self._starts, start)
        self._starts.insert(index, start)
        self._edits.insert(index, edit)


def diff_edits(path: str, before: str, after: str) -> list[Edit]:
    """The text edits that turn `before` into `after`: one per changed stretch, as small as it can be
    without cutting a name in two. Whole lines added or removed on their own are spelled from the end of
    the line before (`"\\n    new_call()"` after a statement). Line breaks in the content are `\\n`, as in
    every edit."""
    old, new = lines_with_breaks(before), lines_with_breaks(after)
    starts = line_starts(before)
    # The lines both begin and end with need no matching: difflib then sees only what changed, not
    # the whole file (its matching costs about the square of the lines it is given).
    same = 0
    while same < min(len(old), len(new)) and old[same] == new[same]:
        same += 1
    tail = 0
    while tail < min(len(old), len(new)) - same and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    pieces: list[tuple[int, str, str]] = []  # (offset in `before`, removed, added)
    for old_start, old_end, new_start, new_end in _changed_lines(
        old[same : len(old) - tail], new[same : len(new) - tail]
    ):
        line = same + old_start
        begin = starts[line] if line < len(starts) else len(before)
        removed = "".join(old[line : same + old_end])
        added = "".join(new[same + new_start : same + new_end])
        begin, removed, added = _trimmed(before, begin, removed, added)
        if not removed and not added:
            continue
        if pieces and pieces[-1][0] + len(pieces[-1][1]) == begin:  # touching: one edit
            last_begin, last_removed, last_added = pieces.pop()
            begin, removed, added = last_begin, last_removed + removed, last_added + added
        pieces.append((begin, removed, added))
    return [_edit(path, starts, *_placed(before, *piece)) for piece in pieces]


def _changed_lines(old: list[str], new: list[str]) -> list[tuple[int, int, int, int]]:
    """The stretches of lines that differ, as (old start, old end, new start, new end): a line that
    only moved in or out keeps its pair, and lines changed one for one are paired one by one."""
    stretches = []
    for tag, old_start, old_end, new_start, new_end in difflib.SequenceMatcher(
        None, old, new, autojunk=False
    ).get_opcodes():
        if tag != "replace":
            if tag != "equal":
                stretches.append((old_start, old_end, new_start, new_end))
            continue
        stripped = difflib.SequenceMatcher(
            None,
            [line.strip() for line in old[old_start:old_end]],
            [line.strip() for line in new[new_start:new_end]],
            autojunk=False,
        )
        for inner, a, b, c, d in stripped.get_opcodes():
            a, b, c, d = a + old_start, b + old_start, c + new_start, d + new_start
            if inner == "equal" or (inner == "replace" and b - a == d - c):
                stretches += [(a + i, a + i + 1, c + i, c + i + 1) for i in range(b - a)]
            else:
                stretches.append((a, b, c, d))
    return stretches


def _trimmed(text: str, begin: int, removed: str, added: str) -> tuple[int, str, str]:
    """The change of `removed` (at offset `begin` of `text`) into `added`, without the ends they share,
    but not cutting a name, nor a bracket or quote from its pair on the line. A change of indentation
    alone is at the start of the line."""
    indentation = removed.lstrip(" \t") == added.lstrip(" \t")
    for end_first in (indentation, not indentation):
        if end_first:
            same = 0
            while same < min(len(removed), len(added)) and removed[-1 - same] == added[-1 - same]:
                same += 1
            removed, added = removed[: len(removed) - same], added[: len(added) - same]
        else:
            same = 0
            while same < min(len(removed), len(added)) and removed[same] == added[same]:
                same += 1
            begin, removed, added = begin + same, removed[same:], added[same:]
    while begin > 0 and _in_name(text[begin - 1], removed[:1], added[:1]):
        begin, removed, added = begin - 1, text[begin - 1] + removed, text[begin - 1] + added
    end = begin + len(removed)
    while end < len(text) and _in_name(text[end], removed[-1:], added[-1:]):
        removed, added, end = removed + text[end], added + text[end], end + 1
    while not (_balanced(removed) and _balanced(added)) and end < len(text) and text[end] not in "\r\n":
        removed, added, end = removed + text[end], added + text[end], end + 1
    while not (_balanced(removed) and _balanced(added)) and begin > 0 and text[begin - 1] not in "\r\n":
        begin, removed, added = begin - 1, text[begin - 1] + removed, text[begin - 1] + added
    return begin, removed, added


def _balanced(piece: str) -> bool:
    """Whether `piece` closes every bracket it opens and every quote (an edit of a whole expression
    reads better than one that shares a closing `")` with what it replaces)."""
    return all(piece.count(opening) == piece.count(closing) for opening, closing in ("()", "[]", "{}")) and all(
        piece.count(quote) % 2 == 0 for quote in "\"'"
    )


def _placed(text: str, begin: int, removed: str, added: str) -> tuple[int, str, str]:
    """Where a pure insertion or deletion reads best: whole lines at a line start as the same lines
    after the line break before; anything else after the spaces it starts with, not inside them."""
    if removed and added:
        return begin, removed, added
    lines = removed or added
    if begin > 0 and text[begin - 1] in "\r\n":
        newline = "\r\n" if text[max(begin - 2, 0) : begin] == "\r\n" else text[begin - 1]
        if lines.endswith(newline):
            moved = newline + lines[: -len(newline)]
            return begin - len(newline), (moved if removed else ""), ("" if removed else moved)
    while lines[:1] in (" ", "\t") and begin + len(removed) < len(text) and text[begin + len(removed)] == lines[0]:
        lines = lines[1:] + lines[0]
        begin += 1
    return (begin, lines, "") if removed else (begin, "", lines)


def _in_name(outside: str, *inside: str) -> bool:
    """Whether `outside` and the chars `inside` next to it (empty: nothing there) are all in one name."""
    chars = [outside, *(char for char in inside if char)]
    return len(chars) > 1 and all(char.isalnum() or char == "_" for char in chars)


def _edit(path: str, starts: list[int], begin: int, removed: str, added: str) -> Edit:
    def position(at: int) -> tuple[int, int]:
        line = bisect.bisect_right(starts, at)
        return line, at - starts[line - 1] + 1

    line, col = position(begin)
    end_line, end_col = position(begin + len(removed))
    return Edit(path, Span(line, col, end_line, end_col), _LINE_BREAK.sub("\n", added))
