"""`json`: every finding as one object in a JSON array (ruff's field names)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TextIO

from cachelint.docs import help_uri
from cachelint.finding import Edit, Finding, Fix
from cachelint.output.context import ReportContext


def render_json(findings: Sequence[Finding], out: TextIO, context: ReportContext) -> None:
    objects = [finding_object(finding, context) for finding in findings]
    out.write(json.dumps(objects, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def finding_object(finding: Finding, context: ReportContext | None = None) -> dict[str, Any]:
    """ruff's fields, and `vllm_range`: the supported vLLM range the file was checked against and
    where it came from (null when not known)."""
    span = finding.span
    supported = context.ranges.get(finding.path) if context is not None else None
    return {
        "code": finding.code,
        "name": finding.name,
        "message": finding.message,
        "help": finding.help,
        "filename": finding.path,
        "location": {"row": span.line, "column": span.col},
        "end_location": {"row": span.end_line, "column": span.end_col},
        "fix": fix_object(finding.fix) if finding.fix else None,
        "url": help_uri(finding.code) if finding.is_rule else None,
        "vllm_range": {"range": supported.label(), "source": supported.source} if supported else None,
    }


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
