"""`junit`: JUnit XML, the test report Jenkins, Azure Pipelines and GitLab (`reports: junit:`) read. One
test suite per file and one failing test case per finding (an error for a file that could not be
checked), as ruff writes it; a run without findings is one passing test case."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from typing import TextIO
from xml.etree import ElementTree

from cachelint.finding import Finding
from cachelint.output.context import ReportContext
from cachelint.output.locations import report_path
from cachelint.output.printable import printable

PACKAGE = "cachelint"


def render_junit(findings: Sequence[Finding], out: TextIO, context: ReportContext) -> None:
    failures = sum(1 for finding in findings if finding.is_rule)
    suites = ElementTree.Element(
        "testsuites",
        name=PACKAGE,
        tests=str(max(len(findings), 1)),
        failures=str(failures),
        errors=str(len(findings) - failures),
    )
    if not findings:
        suite = _element(suites, "testsuite", name=PACKAGE, tests="1", failures="0", errors="0")
        _element(suite, "testcase", name="No errors found", classname=PACKAGE)
    for path, in_file in groupby(findings, key=lambda finding: finding.path):
        cases = list(in_file)
        shown = report_path(path, context.root)
        failed = sum(1 for finding in cases if finding.is_rule)
        suite = _element(
            suites,
            "testsuite",
            name=shown,
            tests=str(len(cases)),
            failures=str(failed),
            errors=str(len(cases) - failed),
            package=PACKAGE,
        )
        for finding in cases:
            span = finding.span
            case = _element(
                suite,
                "testcase",
                name=f"{PACKAGE}.{finding.code}",
                classname=shown,
                file=shown,
                line=str(span.line),
            )
            outcome = _element(case, "failure" if finding.is_rule else "error", message=finding.message)
            outcome.set("type", finding.code)
            lines = [f"line {span.line}, col {span.col}, {finding.message}"]
            if finding.help:
                lines.append(f"help: {finding.help}")
            outcome.text = "\n".join(map(printable, lines))
    ElementTree.indent(suites)
    out.write('<?xml version="1.0" encoding="UTF-8"?>\n')
    out.write(ElementTree.tostring(suites, encoding="unicode") + "\n")


def _element(parent: ElementTree.Element, tag: str, **attributes: str) -> ElementTree.Element:
    """A child element; control characters in the values (from file names or code), which XML 1.0
    cannot hold, are shown as pictures."""
    return ElementTree.SubElement(parent, tag, {key: printable(value) for key, value in attributes.items()})
