"""`sarif`: SARIF 2.1.0 for code-scanning uploads, with fingerprints that survive code moving."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import quote

from cachelint.docs import RulePage, all_pages
from cachelint.finding import INTERNAL_ERROR, INVALID_SYNTAX, IO_ERROR, Edit, Finding, Fix, Span
from cachelint.output.context import ReportContext
from cachelint.output.locations import repo_relative, report_path

if TYPE_CHECKING:
    from cachelint.vllm_range import SupportedRange

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
SRCROOT = "%SRCROOT%"
FINGERPRINT_KEY = "cachelint/v1"
# Code-scanning tags (filters in GitHub's alert list): what kind of problem each code reports.
RULE_TAGS = ["correctness", "vllm"]
SGLANG_RULE_TAGS = ["correctness", "sglang"]  # CL2xx
UNUSED_SUPPRESSION_TAGS = ["maintainability", "suppression"]
# The diagnostics that are not rules, as reportingDescriptors: summary, description and tags.
NOT_RULES = {
    INVALID_SYNTAX: (
        "A file that CPython cannot parse.",
        "CPython rejects the file (the message and position are its parser's), so no rule can check it. "
        "A syntax error cannot be suppressed.",
        ["correctness", "syntax"],
    ),
    IO_ERROR: (
        "A file that cannot be read.",
        "The file could not be read (permissions, a broken link, not a regular file), so no rule checked it.",
        ["cachelint"],
    ),
    INTERNAL_ERROR: (
        "cachelint failed on a file.",
        "A rule failed on this file; the other rules and files were checked, but findings on this file may be "
        "missing. The message names the error.",
        ["cachelint"],
    ),
}


def render_sarif(findings: Sequence[Finding], out: TextIO, context: ReportContext) -> None:
    out.write(json.dumps(sarif_log(findings, context), indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def sarif_log(findings: Sequence[Finding], context: ReportContext) -> dict[str, Any]:
    """The SARIF document for `findings`, which must already be in `Finding.sort_key()` order."""
    pages = all_pages()
    descriptors = [rule_descriptor(page) for page in pages] + [
        not_rule_descriptor(code, *described) for code, described in NOT_RULES.items()
    ]
    rule_index = {descriptor["id"]: index for index, descriptor in enumerate(descriptors)}
    fingerprints = occurrence_fingerprints(findings, context.root)
    run = {
        "tool": {
            "driver": {
                "name": "cachelint",
                "version": context.tool_version,
                "rules": descriptors,
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
            "supportedVllm": [supported_range(root, supported, context.root) for root, supported in context.projects],
            **(
                {
                    "supportedSglang": [
                        supported_range(root, supported, context.root) for root, supported in context.sglang_projects
                    ]
                }
                if context.sglang_projects
                else {}
            ),
        },
    }
    return {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def supported_range(project_root: Path, supported: SupportedRange, root: Path) -> dict[str, Any]:
    """A project's range, its root and the files of its pins located as the results are (under
    %SRCROOT%), not relative to the working folder."""
    data = {"projectRoot": artifact_location(str(project_root), root), **supported.to_json()}
    data["pins"] = [
        {**shown, "file": artifact_location(str(pin.file), root)}
        for shown, pin in zip(data["pins"], supported.pins, strict=True)
    ]
    return data


def rule_descriptor(page: RulePage) -> dict[str, Any]:
    return {
        "id": page.code,
        "name": page.name,
        "shortDescription": {"text": page.summary},
        "fullDescription": {"text": page.sections.get("Why is this bad?", page.summary)},
        "help": {"text": page.text, "markdown": page.text},
        "defaultConfiguration": {"level": "error"},
        "properties": {"tags": _tags(page.code)},
    }


def not_rule_descriptor(code: str, summary: str, description: str, tags: list[str]) -> dict[str, Any]:
    return {
        "id": code,
        "name": code,
        "shortDescription": {"text": summary},
        "fullDescription": {"text": description},
        "help": {"text": description, "markdown": description},
        "defaultConfiguration": {"level": "error"},
        "properties": {"tags": tags},
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
    if finding.chain:
        entry["relatedLocations"] = [
            {"id": index, **described_location(step.path, step.span, step.message, root)}
            for index, step in enumerate(finding.chain)
        ]
        flow = [described_location(step.path, step.span, step.message, root) for step in finding.chain]
        flow.append(described_location(finding.path, finding.span, finding.message, root))
        entry["codeFlows"] = [{"threadFlows": [{"locations": [{"location": place} for place in flow]}]}]
    return entry


def described_location(path: str, span: Span, message: str, root: Path) -> dict[str, Any]:
    return {"physicalLocation": physical_location(path, span, root), "message": {"text": message}}


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


def _tags(code: str) -> list[str]:
    if code == "CL100":
        return UNUSED_SUPPRESSION_TAGS
    return SGLANG_RULE_TAGS if code.startswith("CL2") else RULE_TAGS
