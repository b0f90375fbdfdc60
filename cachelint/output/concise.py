"""One line per finding, then the summary."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from cachelint.finding import Finding
from cachelint.output.context import ReportContext
from cachelint.output.human import header, make_console, print_summary, statistics


def render_concise(findings: Sequence[Finding], out: TextIO, context: ReportContext) -> None:
    console = make_console(out, context.color)
    rows = statistics(findings, context) if context.statistics else [header(f, context) for f in findings]
    for row in rows:
        console.print(row)
    if not context.quiet:
        print_summary(console, findings, context)
