"""`gitlab`: a GitLab Code Quality report (`artifacts: reports: codequality:`), a JSON array of issues
with the fields GitLab requires: description, check_name, fingerprint, severity, location.path and
location.lines.begin. Paths are relative to the repository, as GitLab matches them to the diff."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TextIO

from cachelint.finding import Finding
from cachelint.output.context import ReportContext
from cachelint.output.locations import report_path
from cachelint.output.sarif import occurrence_fingerprints

UNUSED_SUPPRESSION = "CL100"  # cachelint.suppress's code, named here as the SARIF tags name it


def render_gitlab(findings: Sequence[Finding], out: TextIO, context: ReportContext) -> None:
    fingerprints = occurrence_fingerprints(findings, context.root)
    issues = [issue(finding, fingerprint, context) for finding, fingerprint in zip(findings, fingerprints, strict=True)]
    out.write(json.dumps(issues, indent=2, ensure_ascii=False) + "\n")


def issue(finding: Finding, fingerprint: str, context: ReportContext) -> dict[str, Any]:
    span = finding.span
    return {
        "description": f"{finding.code} {finding.message}",
        "check_name": finding.code,
        "fingerprint": fingerprint,
        "severity": severity(finding),
        "location": {
            "path": report_path(finding.path, context.root),
            "lines": {"begin": span.line, "end": span.end_line},
        },
    }


def severity(finding: Finding) -> str:
    """GitLab's scale is info, minor, major, critical, blocker: a rule's finding is a bug (major), an
    unused suppression a nuisance (minor), a file that could not be checked critical."""
    if finding.code == UNUSED_SUPPRESSION:
        return "minor"
    return "major" if finding.is_rule else "critical"
