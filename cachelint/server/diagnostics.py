"""Findings as LSP diagnostics and hovers."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types
from pygls.uris import from_fs_path

from cachelint.docs import load_page, page_uri
from cachelint.finding import Finding
from cachelint.server.documents import UTF16, SourceText, read_text
from cachelint.suppress import UNUSED_SUPPRESSION_CODE
from cachelint.vllm_range import SupportedRange

SOURCE = "cachelint"


@dataclass(frozen=True)
class ClientFeatures:
    """What the client said it supports, as far as the server's answers depend on it."""

    encoding: str = UTF16
    related_information: bool = False
    code_description: bool = False
    tags: bool = False
    document_changes: bool = False
    markdown: bool = False
    resolve_edit: bool = False
    watch_files: bool = False

    @classmethod
    def of(cls, capabilities: types.ClientCapabilities, encoding: str) -> ClientFeatures:
        document = capabilities.text_document
        publish = document.publish_diagnostics if document else None
        hover = document.hover if document else None
        action = document.code_action if document else None
        workspace = capabilities.workspace
        edit = workspace.workspace_edit if workspace else None
        watched = workspace.did_change_watched_files if workspace else None
        resolve = action.resolve_support if action else None
        return cls(
            encoding=encoding,
            related_information=bool(publish and publish.related_information),
            code_description=bool(publish and publish.code_description_support),
            tags=bool(publish and publish.tag_support),
            document_changes=bool(edit and edit.document_changes),
            markdown=bool(hover and hover.content_format and types.MarkupKind.Markdown in hover.content_format),
            resolve_edit=bool(resolve and "edit" in resolve.properties),
            watch_files=bool(watched and watched.dynamic_registration),
        )


class Texts:
    """The texts of files by absolute path: the open documents' as the editor has them, the others'
    as the analysis read them from disk (read when first asked for)."""

    def __init__(self, open_texts: dict[Path, tuple[str, SourceText]]) -> None:
        self._open = open_texts
        self._read: dict[Path, SourceText | None] = {}

    def get(self, path: Path) -> SourceText | None:
        if path in self._open:
            return self._open[path][1]
        if path not in self._read:
            self._read[path] = read_text(path)
        return self._read[path]

    def uri(self, path: Path) -> str:
        if path in self._open:
            return self._open[path][0]
        return from_fs_path(str(path)) or path.as_uri()


def absolute(display: str) -> Path:
    """The absolute path of a finding's or an edit's path (relative ones are to the working folder)."""
    return Path(os.path.abspath(display))


def diagnostic(finding: Finding, source: SourceText, features: ClientFeatures, texts: Texts) -> types.Diagnostic:
    span = finding.span
    encoding = features.encoding
    message = f"{finding.message}\nhelp: {finding.help}" if finding.help else finding.message
    result = types.Diagnostic(
        range=source.range(span.line, span.col, span.end_line, span.end_col, encoding),
        message=message,
        severity=types.DiagnosticSeverity.Warning if finding.is_rule else types.DiagnosticSeverity.Error,
        code=finding.code,
        source=SOURCE,
    )
    if finding.is_rule and features.code_description:
        result.code_description = types.CodeDescription(href=page_uri(finding.code))
    if finding.code == UNUSED_SUPPRESSION_CODE and features.tags:
        result.tags = [types.DiagnosticTag.Unnecessary]
    if features.related_information:
        result.related_information = related_information(finding, encoding, texts) or None
    return result


def related_information(finding: Finding, encoding: str, texts: Texts) -> list[types.DiagnosticRelatedInformation]:
    """The places that lead to the finding (CL003: the weight-update root and each call on the way)."""
    related = []
    for step in finding.chain:
        path = absolute(step.path)
        text = texts.get(path)
        if text is None:
            continue
        span = step.span
        location = types.Location(texts.uri(path), text.range(span.line, span.col, span.line, span.col, encoding))
        related.append(types.DiagnosticRelatedInformation(location, step.message))
    return related


def contains(range_: types.Range, position: types.Position) -> bool:
    start, end = range_.start, range_.end
    after_start = (position.line, position.character) >= (start.line, start.character)
    return after_start and (position.line, position.character) <= (end.line, end.character)


def overlaps(a: types.Range, b: types.Range) -> bool:
    """Whether two ranges share a position (touching counts: a cursor at a range's end is in it)."""
    a_start, a_end = (a.start.line, a.start.character), (a.end.line, a.end.character)
    b_start, b_end = (b.start.line, b.start.character), (b.end.line, b.end.character)
    return a_start <= b_end and b_start <= a_end


def depends_on_releases(code: str) -> bool:
    """Whether the rule's verdict depends on the supported vLLM releases: its page lists the `vllm`
    option."""
    page = load_page(code)
    return page is not None and "`vllm`" in page.sections.get("Options", "")


def hover_text(findings: list[Finding], supported: SupportedRange, markdown: bool) -> str:
    """For each finding: the rule's one-line summary and page, and the vLLM releases the verdict used."""
    parts = []
    for finding in findings:
        page = load_page(finding.code)
        summary = page.summary if page is not None else finding.name
        if markdown:
            lines = [f"**{finding.code}** `{finding.name}`: {summary} ([rule page]({page_uri(finding.code)}))"]
        else:
            lines = [f"{finding.code} {finding.name}: {summary} ({page_uri(finding.code)})"]
        if depends_on_releases(finding.code):
            lines.append(f"Checked against {supported.summary()}.")
        parts.append("\n\n".join(lines))
    return "\n\n---\n\n".join(parts) if markdown else "\n\n".join(parts)
