"""`github`: GitHub Actions workflow commands, one `::error` annotation per finding."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from cachelint.finding import Finding
from cachelint.output.context import ReportContext
from cachelint.output.locations import report_path
from cachelint.output.printable import printable


def render_github(findings: Sequence[Finding], out: TextIO, context: ReportContext) -> None:
    for finding in findings:
        span = finding.span
        properties = {
            "title": f"cachelint ({finding.code})",
            "file": report_path(finding.path, context.root),
            "line": span.line,
            "col": span.col,
            "endLine": span.end_line,
            "endColumn": span.end_col,
        }
        joined = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items())
        text = f"{finding.code} {finding.message}"
        if finding.help:  # on a line of its own in the annotation, as ruff prints it
            text += f"\n  help: {finding.help}"
        out.write(f"::error {joined}::{escape_data(text)}\n")


def escape_data(text: str) -> str:
    """Line breaks as GitHub decodes them; other control characters (from the analysed code) shown as
    pictures, so that they cannot drive the log viewer."""
    return printable(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")
