"""The default human format: each finding with a code frame, its help, optionally its fix as a diff."""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Sequence
from typing import TextIO

from cachelint.edits import apply_edits, line_starts, source_lines
from cachelint.finding import INTERNAL_ERROR, INVALID_SYNTAX, Applicability, Edit, Finding, Span
from cachelint.output.context import ReportContext
from cachelint.output.human import Printer, Row, header, print_summary, statistics
from cachelint.output.printable import printable

TAB_SIZE = 4
# A source line longer than this (minified or generated code) is shown as a window around the finding.
MAX_SHOWN = 320
SHOWN_BEFORE = 80

_APPLICABILITY_LABELS = {
    Applicability.SAFE: "safe",
    Applicability.UNSAFE: "unsafe",
    Applicability.DISPLAY: "display only",
}


def render_full(findings: Sequence[Finding], out: TextIO, context: ReportContext) -> None:
    printer = Printer(out, context.color)
    if context.statistics:
        printer.print(*statistics(findings, context))
        if findings and not context.quiet:
            printer.print(Row())
    else:
        for finding in findings:
            printer.print(*finding_block(finding, context), Row())
    if not context.quiet:
        print_summary(printer, findings, context)


def finding_block(finding: Finding, context: ReportContext) -> list[Row]:
    rows = [header(finding, context)]
    source = None if finding.code == INTERNAL_ERROR else context.sources.get(finding.path)
    lines = split_lines(source) if source is not None else []
    shown = shown_line_numbers(finding.span, len(lines))
    width = len(str(shown[-1] if shown else finding.span.line))
    if shown:
        rows += code_frame(finding, lines, shown, width)
    indent = " " * (width + 1)
    if finding.help:
        rows.append(annotation(indent, "help", finding.help))
    if context.show_fixes:  # the notes say why the finding holds (the receiver's provenance)
        rows += [annotation(indent, "note", note) for note in finding.notes]
    if context.show_fixes and source is not None:
        rows += fix_diff(finding, source, indent)
    return rows


@functools.lru_cache(maxsize=4)
def split_lines(source: str) -> list[str]:
    """`source_lines`, once per file rather than once per finding in it (findings come sorted by file;
    a string keeps its hash, so a lookup costs nothing once the file's text has been hashed)."""
    return source_lines(source)


def shown_line_numbers(span: Span, line_count: int) -> range:
    """The span's lines and one line of context each side (empty if the span is not in the text)."""
    if not 1 <= span.line <= line_count:
        return range(0)
    end = min(max(span.end_line, span.line), line_count)
    return range(max(1, span.line - 1), min(line_count, end + 1) + 1)


def code_frame(finding: Finding, lines: list[str], shown: range, width: int) -> list[Row]:
    empty_gutter = gutter(width)
    frame = [empty_gutter]
    for number in shown:
        line, cut = clip(lines[number - 1], finding.span.col - 1 if number == finding.span.line else 0)
        line = printable(line)
        row = gutter(width, number)
        row.append(f" {line.expandtabs(TAB_SIZE)}".rstrip())
        frame.append(row)
        if number == finding.span.line:
            frame.append(marker(finding, line, width, cut))
    frame.append(empty_gutter)
    return frame


def gutter(width: int, number: int | None = None) -> Row:
    """A row of the code frame up to its `|`: the line number, if any, right-aligned in `width`. Only
    the gutter is styled, as in ruff; what follows it is printed in the terminal's own colour."""
    row = Row()
    row.append(f"{'' if number is None else number:>{width}} |", style="bold blue")
    return row


def clip(line: str, column: int) -> tuple[str, int]:
    """`line`, or when it is too long a window of it around `column` (0-based) with an ellipsis for
    each cut end; and the index in `line` where the shown text starts, less its ellipsis."""
    if len(line) <= MAX_SHOWN:
        return line, 0
    start = max(0, min(column - SHOWN_BEFORE, len(line) - MAX_SHOWN))
    prefix = "\u2026" if start else ""
    suffix = "\u2026" if start + MAX_SHOWN < len(line) else ""
    return prefix + line[start : start + MAX_SHOWN] + suffix, start - len(prefix)


def marker(finding: Finding, line: str, width: int, cut: int = 0) -> Row:
    """The carets under `line`, which starts `cut` characters into the source line (see `clip`)."""
    span = finding.span
    start_index = min(max(span.col - 1 - cut, 0), len(line))
    end_index = span.end_col - 1 - cut if span.end_line == span.line else len(line.rstrip())
    end_index = min(max(end_index, start_index), len(line))
    start_cells = cells(line[:start_index].expandtabs(TAB_SIZE))
    end_cells = cells(line[:end_index].expandtabs(TAB_SIZE))
    row = gutter(width)
    row.append(" " + " " * start_cells)
    row.append("^" * max(1, end_cells - start_cells), style="bold red")
    if finding.code != INVALID_SYNTAX:
        row.append(f" {finding.code}", style="bold red")
    return row


def cells(text: str) -> int:
    """The terminal columns `text` takes (wide characters take two)."""
    if text.isascii():
        return len(text)
    from rich.cells import cell_len

    return cell_len(text)


def annotation(indent: str, label: str, message: str) -> Row:
    row = Row(indent)
    row.append(f"= {label}:", style="bold cyan")
    row.append(f" {printable(message)}")
    return row


def fix_diff(finding: Finding, source: str, indent: str) -> list[Row]:
    """The fix's edits to this finding's own file as a unified diff with one line of context; a
    display-only fix without edits (a suggestion) as its message alone."""
    fix = finding.fix
    edits = [edit for edit in fix.edits if edit.path == finding.path] if fix else []
    if fix is None or not (edits or fix.applicability is Applicability.DISPLAY):
        return []
    rows = [annotation(indent, f"fix ({_APPLICABILITY_LABELS[fix.applicability]})", fix.message)]
    if not edits:
        return rows
    # Only the edited lines and one line each side are diffed: the whole file for each finding would
    # make --show-fixes quadratic in a file with many fixes.
    starts = line_starts_of(source)
    first = max(min(edit.span.line for edit in edits) - 1, 1)
    last = min(max(edit.span.end_line for edit in edits) + 1, len(starts))
    region = source[starts[first - 1] : starts[last] if last < len(starts) else len(source)]
    moved = [
        Edit(e.path, Span(e.span.line - first + 1, e.span.col, e.span.end_line - first + 1, e.span.end_col), e.content)
        for e in edits
    ]
    try:
        fixed = apply_edits(region, moved)
    except ValueError:
        return rows
    diff = difflib.unified_diff(source_lines(region), source_lines(fixed), n=1, lineterm="")
    for line in list(diff)[2:]:
        if line.startswith("@@"):
            line = _HUNK_START.sub(lambda match: f"{match[1]}{int(match[2]) + first - 1}", line)
        style = {"@": "cyan", "-": "red", "+": "green"}.get(line[:1], "")
        rows.append(Row(f"{indent}  {line[:1]}{printable(line[1:]).expandtabs(TAB_SIZE)}".rstrip(), style=style))
    return rows


# The first line number of each side in a hunk header, `@@ -3,2 +3,4 @@`.
_HUNK_START = re.compile(r"([-+])(\d+)")


@functools.lru_cache(maxsize=4)
def line_starts_of(source: str) -> list[int]:
    return line_starts(source)
