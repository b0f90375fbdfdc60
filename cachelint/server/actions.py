"""Code actions: each finding's fix, a `# noqa` comment for its line, and every safe fix of a document."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types

from cachelint.edits import apply_edits
from cachelint.finding import Applicability, Edit, Finding, Fix
from cachelint.server.diagnostics import ClientFeatures, Texts, absolute
from cachelint.server.documents import SourceText
from cachelint.source import SourceError, parse_python
from cachelint.suppress import UNUSED_SUPPRESSION_CODE, add_noqa_edits
from cachelint.writing import unwritable

FIX_ALL = "source.fixAll.cachelint"


@dataclass(frozen=True)
class Entry:
    """A finding and the diagnostic published for it."""

    finding: Finding
    diagnostic: types.Diagnostic


@dataclass(frozen=True)
class Change:
    """A file's text before and after an edit, for the client to apply."""

    path: Path
    before: SourceText
    after: str


def wanted(kind: str, only: Iterable[str] | None) -> bool:
    """Whether the client asked for actions of `kind` (`only` names kinds or their parents)."""
    if only is None:
        return True
    return any(kind == asked or kind.startswith(f"{asked}.") for asked in only)


def fix_action(
    entry: Entry, features: ClientFeatures, texts: Texts, versions: Mapping[Path, int | None], root: Path
) -> types.CodeAction | None:
    """The finding's fix as a quick fix, when it has edits, every file it touches still parses and
    cachelint may write each of them in the project at `root` (`writing.unwritable`, as `--fix`)."""
    fix = with_edits(entry.finding, texts)
    if fix is None or not fix.edits or fix.applicability is Applicability.DISPLAY:
        return None
    if any(unwritable(absolute(path), root) is not None for path in fix.paths):
        return None
    changes = fixed_texts(fix, texts)
    if changes is None:
        return None
    unsafe = fix.applicability is Applicability.UNSAFE
    return types.CodeAction(
        title=f"{entry.finding.code}: {fix.message}{' (unsafe)' if unsafe else ''}",
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[entry.diagnostic],
        is_preferred=not unsafe,
        edit=workspace_edit(changes, features, texts, versions),
    )


def with_edits(finding: Finding, texts: Texts) -> Fix | None:
    """The finding's fix with its text edits, made on the texts the editor holds (libcst is imported
    only here, when a fix is asked for)."""
    if finding.fix is None or not finding.fix.changes or finding.fix.applicability is Applicability.DISPLAY:
        return None
    from cachelint import codemod

    def read(path: str) -> str | None:
        text = texts.get(absolute(path))
        return text.text if text is not None else None

    [made] = codemod.with_edits([finding], read)
    return made.fix


def fixed_texts(fix: Fix, texts: Texts) -> list[Change] | None:
    """Each file the fix edits, before and after; None when a file cannot be read, the edits do not
    apply, or a result would not parse."""
    by_file: dict[Path, list[Edit]] = {}
    for edit in fix.edits:
        by_file.setdefault(absolute(edit.path), []).append(edit)
    changes = []
    for path, edits in by_file.items():
        before = texts.get(path)
        if before is None:
            return None
        converted = [Edit(edit.path, edit.span, edit.content.replace("\n", before.newline)) for edit in edits]
        try:
            after = apply_edits(before.text, converted)
            parse_python(after)
        except (ValueError, SourceError):
            return None
        changes.append(Change(path, before, after))
    return changes


def noqa_action(
    entry: Entry, source: SourceText, features: ClientFeatures, texts: Texts, version: int | None
) -> types.CodeAction | None:
    """ "Disable CLxxx for this line": `# noqa: CLxxx` on the finding's line, as `--add-noqa` writes it."""
    finding = entry.finding
    if not finding.is_rule or finding.code == UNUSED_SUPPRESSION_CODE:
        return None
    edits, _ = add_noqa_edits(source.text, [finding])
    if not edits:
        return None
    path = absolute(finding.path)
    change = Change(path, source, apply_edits(source.text, edits))
    return types.CodeAction(
        title=f"Disable {finding.code} for this line",
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[entry.diagnostic],
        edit=workspace_edit([change], features, texts, {path: version}),
    )


def fix_all_action(edit: types.WorkspaceEdit | None = None, data: object = None) -> types.CodeAction:
    return types.CodeAction(title="cachelint: fix all safe problems", kind=FIX_ALL, edit=edit, data=data)


def has_safe_fix(findings: Iterable[Finding]) -> bool:
    return any(
        finding.fix is not None and finding.fix.changes and finding.fix.applicability is Applicability.SAFE
        for finding in findings
    )


def workspace_edit(
    changes: Iterable[Change], features: ClientFeatures, texts: Texts, versions: Mapping[Path, int | None]
) -> types.WorkspaceEdit:
    """One text edit per changed file, covering what changed; versioned when the client takes that."""
    by_uri: dict[str, list[types.TextEdit]] = {}
    identifiers: list[types.OptionalVersionedTextDocumentIdentifier] = []
    for change in changes:
        uri = texts.uri(change.path)
        by_uri[uri] = [smallest_edit(change.before, change.after, features.encoding)]
        identifiers.append(types.OptionalVersionedTextDocumentIdentifier(uri, versions.get(change.path)))
    if features.document_changes:
        return types.WorkspaceEdit(
            document_changes=[types.TextDocumentEdit(document, list(by_uri[document.uri])) for document in identifiers]
        )
    return types.WorkspaceEdit(changes=by_uri)


def smallest_edit(before: SourceText, after: str, encoding: str) -> types.TextEdit:
    """One edit turning `before` into `after`: the text between their common start and common end, so
    that the editor keeps the cursor, folds and marks elsewhere."""
    old = before.text
    start = 0
    limit = min(len(old), len(after))
    while start < limit and old[start] == after[start]:
        start += 1
    end = 0
    while end < limit - start and old[len(old) - 1 - end] == after[len(after) - 1 - end]:
        end += 1
    # Never split a \r\n pair: an edit starting or ending between the two would leave a lone break.
    if 0 < start < len(old) and old[start - 1] == "\r" and old[start] == "\n":
        start -= 1
    if end and old[len(old) - end - 1 : len(old) - end + 1] == "\r\n":
        end -= 1
    range_ = types.Range(before.position_at(start, encoding), before.position_at(len(old) - end, encoding))
    return types.TextEdit(range_, after[start : len(after) - end])
