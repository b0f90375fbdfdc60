"""The pieces the human formats (full, concise) share: rows, header line, statistics and summary.

A row is printed through rich, with its styles, only in colour. Without colour it is written as its
plain text, which is what rich prints then, and rich is not imported (most runs, in CI and hooks)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from cachelint.finding import INTERNAL_ERROR, INVALID_SYNTAX, Finding
from cachelint.output import ALL_PASSED
from cachelint.output.context import ReportContext
from cachelint.output.printable import printable
from cachelint.output.statistics import is_fixable, rule_counts

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text


class Row:
    """A line of output as pieces of text, each with a rich style ("" for none), over the row's own
    style (as `rich.text.Text(text, style)`: the pieces appended take it too, under their own)."""

    __slots__ = ("pieces", "style")

    def __init__(self, text: str = "", style: str = "") -> None:
        self.pieces = [(text, "")] if text else []
        self.style = style

    def append(self, text: str, style: str = "") -> None:
        self.pieces.append((text, style))

    @property
    def plain(self) -> str:
        return "".join(text for text, _ in self.pieces)

    def rstrip(self) -> None:
        """Drop the trailing whitespace."""
        while self.pieces:
            text, style = self.pieces[-1]
            if text.rstrip():
                self.pieces[-1] = (text.rstrip(), style)
                return
            self.pieces.pop()

    def text(self) -> Text:
        from rich.text import Text

        return Text.assemble(*self.pieces, style=self.style)


class Printer:
    """Prints rows: through rich in colour, else as plain text."""

    def __init__(self, out: TextIO, color: bool) -> None:
        self.out = out
        self.console = make_console(out, color) if color else None

    def print(self, *rows: Row) -> None:
        """`rows`, a line each, in one write (rich's cost is mostly per call)."""
        if not rows:
            return
        if self.console is None and not any("\t" in piece for row in rows for piece, _ in row.pieces):
            self.out.write("".join(f"{row.plain}\n" for row in rows))
            return
        console = self.console or make_console(self.out, False)  # rich expands a tab (in a path, a message)
        console.print(*(row.text() for row in rows), sep="\n")


def make_console(out: TextIO, color: bool) -> Console:
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            """Leave a closed stdout to the command line, which stops as it does for every format (rich
            would exit 1 here, the status of a run with findings)."""
            raise BrokenPipeError

    return _Console(
        file=out,
        color_system="standard" if color else None,
        force_terminal=color,
        no_color=not color,
        highlight=False,
        markup=False,
        emoji=False,
        soft_wrap=True,
        legacy_windows=False,
        force_jupyter=False,
        force_interactive=False,
        width=10_000,
    )


def header(finding: Finding, context: ReportContext) -> Row:
    """`path:line:col: CODE [*] message`, or the SyntaxError / internal error spelling."""
    if finding.code == INTERNAL_ERROR:
        line, col = 1, 1
    else:
        line, col = finding.span.line, finding.span.col
    text = Row()
    text.append(printable(finding.path), style="bold")
    text.append(f":{line}:{col}:", style="cyan")
    text.append(" ")
    if finding.code == INVALID_SYNTAX:
        text.append("SyntaxError:", style="bold red")
    elif finding.code == INTERNAL_ERROR:
        text.append("internal error:", style="bold red")
    else:
        text.append(finding.code, style="bold red")
        if is_fixable(finding, context):
            text.append(" ")
            text.append("[*]", style="cyan")
    text.append(" ")
    text.append(printable(finding.message))
    return text


def plural(count: int, singular: str, plural_form: str | None = None) -> str:
    return f"{count} {singular if count == 1 else plural_form or singular + 's'}"


def summary(findings: Sequence[Finding], context: ReportContext) -> list[Row]:
    lines: list[Row] = []
    if context.fixed_count:
        lines.append(Row(f"Fixed {plural(context.fixed_count, 'problem')}."))
    if findings:
        files = len({finding.path for finding in findings})
        lines.append(Row(f"Found {plural(len(findings), 'problem')} in {plural(files, 'file')}."))
    else:
        lines.append(Row(ALL_PASSED, style="bold green"))
    fixable = sum(is_fixable(finding, context) for finding in findings)
    if fixable:
        line = Row()
        line.append("[*]", style="cyan")
        line.append(f" {fixable} fixable with the --fix option.")
        lines.append(line)
    if context.unsafe_fixable_hidden:
        hidden = plural(context.unsafe_fixable_hidden, "hidden fix", "hidden fixes")
        lines.append(Row(f"({hidden} can be enabled with the --unsafe-fixes option.)", style="dim"))
    lines += [Row(printable(line)) for line in context.range_lines()]
    return lines


def statistics(findings: Sequence[Finding], context: ReportContext) -> list[Row]:
    """One row per code, most frequent first: count, code, name and `[*]` when any of them is fixable."""
    rows = rule_counts(findings, context)
    count_width = max((len(str(row.count)) for row in rows), default=1)
    code_width = max((len(row.code) for row in rows), default=1)
    name_width = max((len(row.name) for row in rows), default=1)
    lines: list[Row] = []
    for row in rows:
        line = Row(f"{row.count:>{count_width}}  ")
        line.append(f"{row.code:<{code_width}}", style="bold red")
        line.append(f"  {row.name:<{name_width}}")
        if row.fixable_count:
            line.append("  ")
            line.append("[*]", style="cyan")
        line.rstrip()
        lines.append(line)
    return lines


def print_summary(printer: Printer, findings: Sequence[Finding], context: ReportContext) -> None:
    printer.print(*summary(findings, context))
