"""The pieces the human formats (full, concise) share: console, header line, statistics and summary."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TextIO

from rich.console import Console
from rich.text import Text

from cachelint.finding import INTERNAL_ERROR, INVALID_SYNTAX, Applicability, Finding
from cachelint.output import ALL_PASSED
from cachelint.output.context import ReportContext
from cachelint.output.printable import printable


def make_console(out: TextIO, color: bool) -> Console:
    return Console(
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


def is_fixable(finding: Finding, context: ReportContext) -> bool:
    """Whether `--fix` in this run would apply the finding's fix (safe, or unsafe under --unsafe-fixes)."""
    if finding.fix is None or not finding.fix.changes:
        return False
    allowed = {Applicability.SAFE, Applicability.UNSAFE} if context.unsafe_fixes else {Applicability.SAFE}
    return finding.fix.applicability in allowed


def header(finding: Finding, context: ReportContext) -> Text:
    """`path:line:col: CODE [*] message`, or the SyntaxError / internal error spelling."""
    if finding.code == INTERNAL_ERROR:
        line, col = 1, 1
    else:
        line, col = finding.span.line, finding.span.col
    text = Text()
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


def summary(findings: Sequence[Finding], context: ReportContext) -> list[Text]:
    lines: list[Text] = []
    if context.fixed_count:
        lines.append(Text(f"Fixed {plural(context.fixed_count, 'problem')}."))
    if findings:
        files = len({finding.path for finding in findings})
        lines.append(Text(f"Found {plural(len(findings), 'problem')} in {plural(files, 'file')}."))
    else:
        lines.append(Text(ALL_PASSED, style="bold green"))
    fixable = sum(is_fixable(finding, context) for finding in findings)
    if fixable:
        line = Text()
        line.append("[*]", style="cyan")
        line.append(f" {fixable} fixable with the --fix option.")
        lines.append(line)
    if context.unsafe_fixable_hidden:
        hidden = plural(context.unsafe_fixable_hidden, "hidden fix", "hidden fixes")
        lines.append(Text(f"({hidden} can be enabled with the --unsafe-fixes option.)", style="dim"))
    return lines


def statistics(findings: Sequence[Finding], context: ReportContext) -> list[Text]:
    """One row per code, most frequent first: count, code, name and `[*]` when any of them is fixable."""
    counts = Counter(finding.code for finding in findings)
    names = {finding.code: finding.name or finding.code for finding in findings}
    fixable_codes = {finding.code for finding in findings if is_fixable(finding, context)}
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    count_width = max((len(str(count)) for _, count in rows), default=1)
    code_width = max((len(code) for code, _ in rows), default=1)
    name_width = max((len(names[code]) for code, _ in rows), default=1)
    lines: list[Text] = []
    for code, count in rows:
        line = Text(f"{count:>{count_width}}  ")
        line.append(f"{code:<{code_width}}", style="bold red")
        line.append(f"  {names[code]:<{name_width}}")
        if code in fixable_codes:
            line.append("  ")
            line.append("[*]", style="cyan")
        line.rstrip()
        lines.append(line)
    return lines


def print_summary(console: Console, findings: Sequence[Finding], context: ReportContext) -> None:
    for line in summary(findings, context):
        console.print(line)
