"""Applying fixes: non-overlapping fixes, re-analysis to a fixed point, validation, atomic writes.

Every round analyses the project with the edited files overlaid and picks the fixes the run allows
(safe; unsafe too with --unsafe-fixes). Each fix's changes are made on the libcst tree of the region
of each file they lie in (`cachelint.codemod`), parsed once a round, and read back as text edits; a
fix is kept if its edits do not overlap those of the fixes kept before, every file it touches still
parses and compiles with CPython, and libcst parses the statements it changed. Nothing is written
until the rounds end; then each changed file is written
atomically (temporary file in the same folder + os.replace) with its encoding, BOM, line endings,
mode, owner and group, unless it changed on disk since it was read. A file outside the project
(reached through a symbolic link) or with several hard links is never fixed (`unwritable`);
--add-noqa writes through the same `write_files`.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import functools
import os
import tempfile
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
    outcome.analysis = analysis
    outcome.errors += problems.values()
    return outcome


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


def unwritable(path: Path, root: Path) -> str | None:
    """Why cachelint must not write the file at `path` (absolute), or None. It never writes outside the
    project (through a symbolic link, named or found by walking, the project may reach shared or system
    files), nor a file with several hard links (writing a new file would split them, writing in place
    would change the other names' file, wherever they are)."""
    real = Path(os.path.realpath(path))
    if not real.is_relative_to(os.path.realpath(root)):
        if real == Path(os.path.abspath(path)):
            return "it is outside the project"
        return f"it is a symbolic link to {real}, outside the project"
    try:
        links = real.stat().st_nlink
    except OSError:
        return None  # reading it fails next, with its own message
    if links > 1:
        return f"it has {links} hard links, and cachelint writes no file that has more than one name"
    return None


def write_changes(outcome: FixOutcome) -> list[str]:
    """Write each changed file; returns one error message per file left unwritten (see `write_files`)."""
    return write_files(outcome.changed, outcome.analysis.root)


def write_files(files: Iterable[FixedFile], root: Path) -> list[str]:
    """Write each file's new text atomically, unless cachelint must not write it (`unwritable`) or it
    changed on disk since it was read; returns one error message per file left unwritten. A file
    reached through two names is written once. Ctrl-C waits until the files are written."""
    errors = []
    written: set[Path] = set()
    with interrupts.deferred():
        for file in files:
            real = Path(os.path.realpath(file.path))
            if real in written:
                continue
            refusal = unwritable(file.path, root)
            if refusal is not None:
                errors.append(f"{file.display}: not written: {refusal}")
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
    """Replace `path` with `data` in one step, keeping its mode and, where this process may set them,
    its owner and group; on any error the original stays as it was."""
    target = Path(os.path.realpath(path))
    original = target.stat()
    handle, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".cachelint")
    temporary = Path(name)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        _keep_owner(temporary, original)
        temporary.chmod(original.st_mode & 0o7777)  # after chown, which clears the set-id bits
        temporary.replace(target)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise


def _keep_owner(path: Path, original: os.stat_result) -> None:
    """Give `path` the owner and group of `original` (root may; others may set a group of theirs)."""
    if not hasattr(os, "chown"):
        return
    current = path.stat()
    if (current.st_uid, current.st_gid) == (original.st_uid, original.st_gid):
        return
    try:
        os.chown(path, original.st_uid, original.st_gid)
    except PermissionError:
        with contextlib.suppress(PermissionError):
            os.chown(path, -1, original.st_gid)
