"""`sarif`: SARIF 2.1.0 for code-scanning uploads, with fingerprints that survive code moving."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from cachelint.docs import RulePage, all_pages, help_uri
from cachelint.finding import Edit, Finding, Fix, Span
from cachelint.output.context import ReportContext
from cachelint.output.locations import repo_relative, report_path

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/cachelint/cachelint"
SRCROOT = "%SRCROOT%"
FINGERPRINT_KEY = "cachelint/v1"


def render_sarif(findings: Sequence[Finding], out: TextIO, context: ReportContext) -> None:
    out.write(json.dumps(sarif_log(findings, context), indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def sarif_log(findings: Sequence[Finding], context: ReportContext) -> dict[str, Any]:
    """The SARIF document for `findings`, which must already be in `Finding.sort_key()` order."""
    pages = all_pages()
    rule_index = {page.code: index for index, page in enumerate(pages)}
    fingerprints = occurrence_fingerprints(findings, context.root)
    run = {
        "tool": {
            "driver": {
                "name": "cachelint",
                "version": context.tool_version,
                "informationUri": INFORMATION_URI,
                "rules": [rule_descriptor(page) for page in pages],
            }
        },
        "originalUriBaseIds": {SRCROOT: {"uri": root_uri(context.root)}},
        "columnKind": "unicodeCodePoints",
        "results": [
            result(finding, rule_index.get(finding.code), fingerprint, context.root)
            for finding, fingerprint in zip(findings, fingerprints, strict=True)
        ],
        "properties": {
            "filesChecked": context.files_checked,
            "supportedVllm": [
                {"projectRoot": artifact_location(str(root), context.root), **supported.to_json()}
                for root, supported in context.projects
            ],
        },
    }
    return {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def rule_descriptor(page: RulePage) -> dict[str, Any]:
    return {
        "id": page.code,
        "name": page.name,
        "shortDescription": {"text": page.summary},
        "fullDescription": {"text": page.sections.get("Why is this bad?", page.summary)},
        "help": {"text": page.text, "markdown": page.text},
        "helpUri": help_uri(page.code),
        "defaultConfiguration": {"level": "error"},
    }


def result(finding: Finding, rule_index: int | None, fingerprint: str, root: Path) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "ruleId": finding.code,
        "level": "error",
        "message": {"text": finding.message},
        "locations": [{"physicalLocation": physical_location(finding.path, finding.span, root)}],
        "partialFingerprints": {FINGERPRINT_KEY: fingerprint},
    }
    if rule_index is not None:
        entry["ruleIndex"] = rule_index
    if finding.fix and finding.fix.edits:
        entry["fixes"] = [sarif_fix(finding.fix, root)]
    return entry


def occurrence_fingerprints(findings: Sequence[Finding], root: Path) -> list[str]:
    """sha256 of `code|path|function|occurrence`: the n-th finding of a code in a function, not its line."""
    seen: Counter[tuple[str, str, str]] = Counter()
    fingerprints = []
    for finding in findings:
        key = (finding.code, report_path(finding.path, root), finding.function)
        data = "|".join((*key, str(seen[key]))).encode("utf-8", "surrogateescape")  # file names need not be UTF-8
        fingerprints.append(hashlib.sha256(data).hexdigest())
        seen[key] += 1
    return fingerprints


def physical_location(path: str, span: Span, root: Path) -> dict[str, Any]:
    return {"artifactLocation": artifact_location(path, root), "region": region(span)}


def artifact_location(path: str, root: Path) -> dict[str, Any]:
    """Relative to %SRCROOT% when the file is under the root, else an absolute file URI."""
    relative = repo_relative(path, root)
    if relative is None:
        return {"uri": Path(path).absolute().as_uri()}
    return {"uri": quote(relative, errors="surrogateescape"), "uriBaseId": SRCROOT}


def region(span: Span) -> dict[str, int]:
    return {
        "startLine": span.line,
        "startColumn": span.col,
        "endLine": span.end_line,
        "endColumn": span.end_col,
    }


def sarif_fix(fix: Fix, root: Path) -> dict[str, Any]:
    edits_by_path: dict[str, list[Edit]] = {}
    for edit in sorted(fix.edits, key=lambda edit: (edit.path, edit.span)):
        edits_by_path.setdefault(edit.path, []).append(edit)
    return {
        "description": {"text": fix.message},
        "artifactChanges": [
            {
                "artifactLocation": artifact_location(path, root),
                "replacements": [
                    {"deletedRegion": region(edit.span), "insertedContent": {"text": edit.content}} for edit in edits
                ],
            }
            for path, edits in edits_by_path.items()
        ],
        "properties": {"applicability": fix.applicability.value},
    }


def root_uri(root: Path) -> str:
    uri = root.absolute().as_uri()
    return uri if uri.endswith("/") else uri + "/"
