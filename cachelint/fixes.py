"""Applying fixes: non-overlapping fixes, re-analysis to a fixed point, validation, atomic writes.

Every round analyses the project with the edited files overlaid and picks the fixes the run allows
(safe; unsafe too with --unsafe-fixes). Each fix's changes are made on the libcst tree of the files it
touches (`cachelint.codemod`), parsed once a round, and read back as text edits; a fix is kept if its
edits do not overlap those of the fixes kept before and every file it touches still parses with both
CPython and libcst. Nothing is written until the rounds end; then each changed file is written
atomically (temporary file in the same folder + os.replace) with its encoding, BOM, line endings and
mode, unless it changed on disk since it was read.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import functools
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cachelint.config import Settings
from cachelint.edits import apply_edits, lines_with_breaks, overlaps
from cachelint.engine import Analysis, analyze
from cachelint.finding import Applicability, Edit, Finding, Fix
from cachelint.source import SourceError, SourceFile, decode_source, read_file

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

    @property
    def changed(self) -> list[FixedFile]:
        return [file for file in self.files.values() if file.text != file.source.text]


def allowed(fix: Fix, unsafe: bool) -> bool:
    if not fix.changes:
        return False
    return fix.applicability is Applicability.SAFE or (unsafe and fix.applicability is Applicability.UNSAFE)


def _absolute(display: str) -> Path:
    return Path(os.path.abspath(display))


def _parses(text: str) -> bool:
    import libcst  # a tenth of a second: only when a fix is to be applied

    try:
        ast.parse(text)
        libcst.parse_module(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError, libcst.ParserSyntaxError):
        return False
    return True


class _Round:
    """One round: picks fixes greedily, keeping each only if all its files still parse."""

    def __init__(self, outcome: FixOutcome, failed: set[tuple[str, str, int, int]], only: Iterable[Path]) -> None:
        self.outcome = outcome
        self.failed = failed
        self.only = frozenset(only)  # when given, the only files a fix may touch
        self.edits: dict[Path, list[Edit]] = {}
        self.applied = 0
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
            self._fail(finding, key, "it could not be made on this code")
            return
        by_file: dict[Path, list[Edit]] = {}
        for display, edits in made.items():
            by_file.setdefault(_absolute(display), []).extend(edits)
        for path, edits in by_file.items():
            taken = self.edits.get(path, [])
            if any(overlaps(edit, other) for edit in edits for other in taken):
                return
        for path, edits in by_file.items():
            newline = self.outcome.files[path].source.newline
            converted = [Edit(e.path, e.span, e.content.replace("\n", newline)) for e in edits]
            try:
                text = apply_edits(self.outcome.files[path].text, [*self.edits.get(path, []), *converted])
            except ValueError:
                return
            if not _parses(text):
                self._fail(finding, key, "the result would not parse")
                return
            by_file[path] = converted
        for path, edits in by_file.items():
            self.edits.setdefault(path, []).extend(edits)
        self.applied += 1

    def _fail(self, finding: Finding, key: tuple[str, str, int, int], reason: str) -> None:
        self.failed.add(key)
        self.outcome.errors.append(
            f"{finding.path}:{finding.span.line}:{finding.span.col}: {finding.code} fix not applied: {reason}"
        )

    def commit(self) -> None:
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
    overlay: Mapping[Path, bytes] | None = None,
) -> FixOutcome:
    """Apply every allowed fix, re-analysing after each round, until nothing changes (bounded).
    `use_cache`: read and write the project's cache, as `analyze` does. `overlay`: contents to use
    instead of the files' (absolute paths; source given on stdin): fixes then change those files only."""
    given = frozenset(overlay or ())
    contents: dict[Path, bytes] = dict(overlay or {})  # with the fixed files'
    failed: set[tuple[str, str, int, int]] = set()
    problems: dict[Path, str] = {}  # files that could not be tracked (yet)
    run = functools.partial(
        analyze, paths, settings, project_root=project_root, force_exclude=force_exclude, use_cache=use_cache
    )
    analysis = run(overlay=contents)
    outcome = FixOutcome(analysis)
    for _ in range(MAX_ROUNDS):
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
    outcome.analysis = analysis
    outcome.errors += problems.values()
    return outcome


def unified_diff(file: FixedFile) -> str:
    before = lines_with_breaks(file.source.text)
    after = lines_with_breaks(file.text)
    return "".join(difflib.unified_diff(before, after, f"a/{file.display}", f"b/{file.display}"))


def write_changes(outcome: FixOutcome) -> list[str]:
    """Write each changed file atomically; returns one error message per file left unwritten.

    A file reached through a symbolic link that points outside the project is never written (the
    project may hold links to shared or system files); one reached through two names is written once."""
    errors = []
    root = Path(os.path.realpath(outcome.analysis.root))
    written: set[Path] = set()
    for file in outcome.changed:
        real = Path(os.path.realpath(file.path))
        if real != file.path and not real.is_relative_to(root):
            errors.append(f"{file.display}: not written: it is a symbolic link to {real}, outside the project")
            continue
        if real in written:
            continue
        try:
            current = read_file(file.path)
        except OSError as error:
            errors.append(f"{file.display}: not written: cannot read it back ({error.strerror or error})")
            continue
        if current != file.original:
            errors.append(f"{file.display}: not written: it changed on disk since it was read")
            continue
        try:
            write_atomically(file.path, file.source.encode(file.text))
        except OSError as error:
            errors.append(f"{file.display}: not written: {error.strerror or error}")
        else:
            written.add(real)
    return errors


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data` in one step; on any error the original stays as it was."""
    target = Path(os.path.realpath(path))
    mode = target.stat().st_mode
    handle, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".cachelint")
    temporary = Path(name)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        temporary.chmod(mode & 0o7777)
        temporary.replace(target)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
