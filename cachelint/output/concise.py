"""One line per finding, then the summary."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from cachelint.finding import Finding
from cachelint.output.context import ReportContext
from cachelint.output.human import Printer, header, print_summary, statistics


def render_concise(findings: Sequence[Finding], out: TextIO, context: ReportContext) -> None:
    printer = Printer(out, context.color)
    printer.print(*(statistics(findings, context) if context.statistics else [header(f, context) for f in findings]))
    if not context.quiet:
        print_summary(printer, findings, context)
