"""Applying fixes: non-overlapping fixes, re-analysis to a fixed point, validation, atomic writes.

Every round analyses the project with the edited files overlaid and picks the fixes the run allows
(safe; unsafe too with --unsafe-fixes). Each fix's changes are made on the libcst tree of the region
of each file they lie in (`cachelint.codemod`), parsed once a round, and read back as text edits; a
fix is kept if its edits do not overlap those of the fixes kept before, every file it touches still
parses and compiles with CPython, and libcst parses the statements it changed. Nothing is written
until the rounds end; then the changed files are written by `writing.replace_together`, the files
of a fix of several files all or none, with their encoding, BOM, line endings, mode, owner, group and
extended attributes, unless one changed on disk since it was read. A file outside the project
(reached through a symbolic link) or with several hard links is never fixed (`unwritable`);
--add-noqa writes through the same `write_files`. A fix that could not be applied is no longer
offered as fixable in the outcome's findings.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import os
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cachelint import interrupts
from cachelint.config import Settings
from cachelint.edits import Taken, apply_edits, lines_with_breaks
from cachelint.engine import Analysis, analyze
from cachelint.finding import Applicability, Edit, Finding, Fix
from cachelint.output.printable import printable
from cachelint.source import SourceError, SourceFile, decode_source, read_file
from cachelint.writing import Replacement, WriteError, replace_together, unwritable

if TYPE_CHECKING:
    from cachelint.codemod.transform import Rewriter

MAX_ROUNDS = 10


@dataclass
class FixedFile:
    path: Path  # absolute
    display: str
    source: SourceFile  # as first read
    original: bytes
    text: str  # current, with the applied edits


@dataclass
class FixOutcome:
    analysis: Analysis  # of the fixed code
    fixed: int = 0
    files: dict[Path, FixedFile] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    together: list[frozenset[Path]] = field(default_factory=list)  # the files of each fix of several

    @property
    def changed(self) -> list[FixedFile]:
        return [file for file in self.files.values() if file.text != file.source.text]


def allowed(fix: Fix, unsafe: bool) -> bool:
    if not fix.changes:
        return False
    return fix.applicability is Applicability.SAFE or (unsafe and fix.applicability is Applicability.UNSAFE)


def _absolute(display: str) -> Path:
    return Path(os.path.abspath(display))


def _parses(text: str, before: str) -> bool:
    """Whether CPython parses and compiles `text` (a fix must not bring `await` into a function that
    is not `async`, say) and libcst parses the top-level statements that changed from `before` (a fix
    changes nothing else)."""
    import libcst  # a tenth of a second: only when a fix is to be applied

    from cachelint.codemod.regions import changed_statements

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarnings concern the code's own checks
            module = ast.parse(text)
            compile(module, "<fixed>", "exec", dont_inherit=True)
        libcst.parse_module(changed_statements(before, text, module))
    except (SyntaxError, ValueError, RecursionError, MemoryError, libcst.ParserSyntaxError):
        return False
    return True


def _changes_only_comments(fix: Fix) -> bool:
    """Whether the fix only replaces or removes comments (CL100): its result tokenizes as before."""
    from cachelint.changes import ReplaceComment

    return all(
        isinstance(change, ReplaceComment)
        and (not change.text or (change.text.startswith("#") and "\n" not in change.text and "\r" not in change.text))
        for change in fix.changes
    )


class _Round:
    """One round: picks fixes greedily, keeping each only if all its files still parse."""

    def __init__(self, outcome: FixOutcome, failed: set[tuple[str, str, int, int]], only: Iterable[Path]) -> None:
        self.outcome = outcome
        self.failed = failed
        self.only = frozenset(only)  # when given, the only files a fix may touch
        self.edits: dict[Path, list[Edit]] = {}
        self.taken: dict[Path, Taken] = {}  # the same edits, to look up overlaps
        self.texts: dict[Path, str] = {}  # each file with the edits of the fixes kept so far
        self.applied = 0
        self.together: list[frozenset[Path]] = []
        self._rewriter: Rewriter | None = None

    @property
    def rewriter(self) -> Rewriter:
        """The files' libcst trees as the round found them, parsed when a fix first needs one."""
        if self._rewriter is None:
            from cachelint.codemod.transform import Rewriter

            def read(display: str) -> str | None:
                file = self.outcome.files.get(_absolute(display))
                return file.text if file is not None else None

            self._rewriter = Rewriter(read)
        return self._rewriter

    def offer(self, finding: Finding, fix: Fix) -> None:
        key = (finding.code, finding.path, finding.span.line, finding.span.col)
        if key in self.failed:
            return
        if self.only and any(_absolute(path) not in self.only for path in fix.paths):
            return
        if any(_absolute(path) not in self.outcome.files for path in fix.paths):
            return
        made = self.rewriter.edits(fix)
        if made is None:
            self._fail(finding, key, self.rewriter.why_not(fix))
            return
        by_file: dict[Path, list[Edit]] = {}
        for display, edits in made.items():
            by_file.setdefault(_absolute(display), []).extend(edits)
        for path, edits in by_file.items():
            taken = self.taken.get(path)
            if taken is not None and any(taken.overlaps(edit) for edit in edits):
                return
        # A change of comments alone leaves what CPython and libcst parse as it was: nothing to check.
        checked = not _changes_only_comments(fix)
        texts = {}
        for path, edits in by_file.items():
            newline = self.outcome.files[path].source.newline
            converted = [Edit(e.path, e.span, e.content.replace("\n", newline)) for e in edits]
            if checked:
                try:
                    text = apply_edits(self.outcome.files[path].text, [*self.edits.get(path, []), *converted])
                except ValueError:
                    return
                if not _parses(text, self._text(path)):  # what this fix changed, not the fixes kept before
                    self._fail(finding, key, "the result would not parse or compile")
                    return
                texts[path] = text
            by_file[path] = converted
        for path in by_file:
            self.texts.pop(path, None)
        self.texts.update(texts)
        for path, edits in by_file.items():
            for edit in edits:
                self.taken.setdefault(path, Taken()).add(edit)
        for path, edits in by_file.items():
            self.edits.setdefault(path, []).extend(edits)
        if len(by_file) > 1:
            self.together.append(frozenset(by_file))
        self.applied += 1

    def _text(self, path: Path) -> str:
        """The file with the edits of the fixes kept so far."""
        if path not in self.texts:
            self.texts[path] = apply_edits(self.outcome.files[path].text, self.edits.get(path, []))
        return self.texts[path]

    def _fail(self, finding: Finding, key: tuple[str, str, int, int], reason: str) -> None:
        self.failed.add(key)
        self.outcome.errors.append(
            f"{finding.path}:{finding.span.line}:{finding.span.col}: {finding.code} fix not applied: {reason}"
        )

    def commit(self) -> None:
        self.outcome.together += self.together
        for path, edits in self.edits.items():
            file = self.outcome.files[path]
            file.text = apply_edits(file.text, edits)


def _track(outcome: FixOutcome, analysis: Analysis, overlay: dict[Path, bytes], problems: dict[Path, str]) -> None:
    """Remember every file a fix may touch, as first read: the bytes the analysis decoded. A file
    that vanished or changed while it was analysed is left out this round, its problem noted."""
    for display, source in analysis.sources.items():
        path = _absolute(display)
        if path in outcome.files:
            continue
        refusal = unwritable(path, analysis.root)
        if refusal is not None:
            problems[path] = f"{display}: not fixed: {refusal}"
            continue
        try:
            original = overlay[path] if path in overlay else read_file(path)
            unchanged = decode_source(original).text == source.text
        except (OSError, SourceError) as error:
            problem = f"cannot read it again ({getattr(error, 'strerror', None) or error})"
        else:
            if unchanged:
                outcome.files[path] = FixedFile(path, display, source, original, source.text)
                problems.pop(path, None)
                continue
            problem = "it changed on disk while it was analysed"
        problems[path] = f"{display}: not fixed: {problem}"


def _load_extra(
    outcome: FixOutcome, paths: Sequence[str], problems: dict[Path, str], overlay: Mapping[Path, bytes]
) -> None:
    """Files outside the checked paths that a cross-file fix edits (the driver side of CL001); not a
    checked file `_track` left out (its fix was made for text it no longer holds)."""
    for display in paths:
        path = _absolute(display)
        if path in outcome.files or path in problems:
            continue
        refusal = unwritable(path, outcome.analysis.root)
        if refusal is not None:
            problems[path] = f"{display}: not fixed: {refusal}"
            continue
        try:
            original = overlay[path] if path in overlay else read_file(path)
            source = decode_source(original)
        except (OSError, SourceError):
            continue
        outcome.files[path] = FixedFile(path, display, source, original, source.text)


def fix_to_fixed_point(
    paths: Sequence[Path],
    settings: Settings,
    unsafe: bool,
    force_exclude: bool = False,
    project_root: Path | None = None,
    use_cache: bool = False,
    settings_for: Callable[[Path], Settings] | None = None,
    overlay: Mapping[Path, bytes] | None = None,
    workers: int | None = None,
) -> FixOutcome:
    """Apply every allowed fix, re-analysing after each round, until nothing changes (bounded).
    `use_cache`, `settings_for` (each file's settings, so each project's) and `workers` are passed to
    `analyze`. `overlay`: contents to use instead of the files' (absolute paths; source given on stdin,
    an editor's unsaved buffers): fixes then change those files only."""
    given = frozenset(overlay or ())
    contents: dict[Path, bytes] = dict(overlay or {})  # with the fixed files'
    failed: set[tuple[str, str, int, int]] = set()
    problems: dict[Path, str] = {}  # files that could not be tracked (yet)
    run = functools.partial(
        analyze,
        paths,
        settings,
        project_root=project_root,
        force_exclude=force_exclude,
        use_cache=use_cache,
        settings_for=settings_for,
        workers=workers,
    )
    analysis = run(overlay=contents)
    outcome = FixOutcome(analysis)
    for _ in range(MAX_ROUNDS):
        interrupts.check()
        _track(outcome, analysis, contents, problems)
        round_ = _Round(outcome, failed, given)
        for finding in analysis.findings:
            if finding.fix is not None and allowed(finding.fix, unsafe):
                _load_extra(outcome, finding.fix.paths, problems, contents)
                round_.offer(finding, finding.fix)
        if not round_.applied:
            break
        round_.commit()
        outcome.fixed += round_.applied
        for file in outcome.changed:
            contents[file.path] = file.source.encode(file.text)
        analysis = run(overlay=contents)
    outcome.analysis = _not_fixable(analysis, failed)
    outcome.errors += problems.values()
    return outcome


def _not_fixable(analysis: Analysis, failed: set[tuple[str, str, int, int]]) -> Analysis:
    """The analysis with the fixes that failed shown as suggestions: a fix that could not be applied
    is not offered as fixable (`[*]`) again."""
    if not failed:
        return analysis
    findings = [
        dataclasses.replace(finding, fix=Fix(finding.fix.message, Applicability.DISPLAY))
        if finding.fix is not None and (finding.code, finding.path, finding.span.line, finding.span.col) in failed
        else finding
        for finding in analysis.findings
    ]
    return dataclasses.replace(analysis, findings=findings)


def unified_diff(file: FixedFile) -> str:
    """The change as a unified diff; control characters in the file name and the lines are shown as
    the other outputs show them (`printable`), line breaks kept."""
    before = [_printable_line(line) for line in lines_with_breaks(file.source.text)]
    after = [_printable_line(line) for line in lines_with_breaks(file.text)]
    name = printable(file.display)
    return "".join(difflib.unified_diff(before, after, f"a/{name}", f"b/{name}"))


def _printable_line(line: str) -> str:
    body = line.rstrip("\r\n")
    return printable(body) + line[len(body) :]


def write_changes(outcome: FixOutcome) -> list[str]:
    """Write the changed files, the files of each fix together (`writing.replace_together`): all of
    them or none; returns one error message per set of files left unwritten."""
    return write_files(outcome.changed, outcome.analysis.root, outcome.together)


def write_files(files: Iterable[FixedFile], root: Path, together: Iterable[frozenset[Path]] = ()) -> list[str]:
    """Write each file's new text, unless cachelint must not write it (`unwritable`) or it changed on
    disk since it was read; the files of a set in `together` (and the names of one file) are written
    all or none. Returns one error message per set left unwritten, every file of it as it was."""
    errors = []
    for group in _groups(list(files), together):
        replacements = [Replacement(f.path, f.display, f.source.encode(f.text), f.original) for f in group]
        try:
            replace_together(replacements, root)
        except WriteError as error:
            others = [file.display for file in group if file.display != error.display]
            kept = "they were" if len(others) > 1 else "it was"
            errors.append(f"{error}; {' and '.join(others)}, changed with it, left as {kept}" if others else str(error))
    return errors


def _groups(files: list[FixedFile], together: Iterable[frozenset[Path]]) -> list[list[FixedFile]]:
    """The files in sets that must be written together: those a fix changed together, and the names
    of one file (a link inside the project)."""
    parent: dict[Path, Path] = {}

    def find(path: Path) -> Path:
        while parent.setdefault(path, path) != path:
            path = parent[path]
        return path

    def join(first: Path, second: Path) -> None:
        parent[find(first)] = find(second)

    for file in files:
        join(file.path, Path(os.path.realpath(file.path)))
    for paths in together:
        first, *rest = paths
        for path in rest:
            join(first, path)
    groups: dict[Path, list[FixedFile]] = {}
    for file in files:
        groups.setdefault(find(file.path), []).append(file)
    return list(groups.values())
