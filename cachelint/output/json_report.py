"""`json`: every finding as one object in a JSON array (ruff's field names)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from cachelint.edits import source_lines
from cachelint.finding import Edit, Finding, Fix
from cachelint.output.context import ReportContext


def render_json(findings: Sequence[Finding], out: TextIO, context: ReportContext) -> None:
    if context.statistics:
        from cachelint.output.statistics import rule_counts

        objects = [row.to_json() for row in rule_counts(findings, context)]
    else:
        objects = finding_objects(findings, context)
    out.write(json.dumps(objects, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def finding_objects(findings: Sequence[Finding], context: ReportContext) -> list[dict[str, Any]]:
    rows = noqa_rows(findings, context.sources)
    return [finding_object(finding, row, context) for finding, row in zip(findings, rows, strict=True)]


def finding_object(finding: Finding, noqa_row: int | None, context: ReportContext | None = None) -> dict[str, Any]:
    """ruff's fields, and `vllm_range`: the supported vLLM range the file was checked against, where it
    came from and what became of the releases newer than cachelint knows (null when not known)."""
    span = finding.span
    supported = context.ranges.get(finding.path) if context is not None else None
    return {
        "cell": None,  # ruff's notebook cell; cachelint checks no notebooks
        "code": finding.code,
        "name": finding.name,
        "message": finding.message,
        "help": finding.help,
        "filename": finding.path,
        "location": {"row": span.line, "column": span.col},
        "end_location": {"row": span.end_line, "column": span.end_col},
        "noqa_row": noqa_row,
        "severity": "error",
        "fix": fix_object(finding.fix) if finding.fix else None,
        "notes": list(finding.notes),
        "url": None,  # no published page: ruff writes null for a rule without one
        "vllm_range": {"range": supported.label(), "source": supported.source, "newer": supported.newer}
        if supported
        else None,
    }


def noqa_rows(findings: Sequence[Finding], sources: Mapping[str, str]) -> list[int | None]:
    """ruff's `noqa_row` of each finding: the line where `# noqa: CODE` suppresses it. That is the
    finding's line, unless the line ends inside a string or continues with a backslash: then the last
    line of its statement (a directive on any line of the statement counts). None for what cannot be
    suppressed (invalid-syntax, io-error, internal-error)."""
    from cachelint.suppress import scan_layout

    movable: dict[str, tuple[frozenset[int], Mapping[int, tuple[int, int]]]] = {}
    rows: list[int | None] = []
    for finding in findings:
        line = finding.span.line
        text = sources.get(finding.path)
        if not finding.is_rule or text is None:
            rows.append(line if finding.is_rule else None)
            continue
        if finding.path not in movable:
            layout = scan_layout(text)
            if layout is None:
                movable[finding.path] = (frozenset(), {})
            else:
                commented = {comment.start[0] for comment in layout.comments}
                continued = {
                    number
                    for number, content in enumerate(source_lines(text), start=1)
                    if content.endswith("\\") and number not in commented
                }
                movable[finding.path] = (layout.lines_ending_in_string | continued, layout.statements)
        lines, statements = movable[finding.path]
        rows.append(statements.get(line, (line, line))[1] if line in lines else line)
    return rows


def fix_object(fix: Fix) -> dict[str, Any]:
    return {
        "message": fix.message,
        "applicability": fix.applicability.value,
        "edits": [edit_object(edit) for edit in fix.edits],
    }


def edit_object(edit: Edit) -> dict[str, Any]:
    return {
        "filename": edit.path,
        "location": {"row": edit.span.line, "column": edit.span.col},
        "end_location": {"row": edit.span.end_line, "column": edit.span.end_col},
        "content": edit.content,
    }
