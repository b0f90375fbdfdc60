"""`FixCacheResets`: cachelint's fixes as a libcst codemod command.

    python -m libcst.tool codemod --no-format -x cachelint.codemod.FixCacheResets [--unsafe-fixes] PATHS

libcst's driver gathers the files, runs the command on each (in `-j` processes) and writes them back or,
with `-u`, prints a diff. The findings come from one analysis of all the files, run with cachelint's
cache before the processes start, through libcst's full-repository metadata (`ProjectFindings`): every
file's transform sees the whole project, and no process analyses it again. Without that metadata (code
on stdin, a test) the command analyses the file it is given, in its project.

A file the command would change is refused as `cachelint check --fix` refuses it (a symbolic link
to outside its project, a file with several hard links: libcst reports it skipped, with the reason),
and is written whole: libcst's driver writes a file in place, which a full disk leaves cut short, so
its writes of the files this command changed go through `writing.replace_together` (see the end).

The fixes are those `cachelint check --fix` makes in one round, but not a fix that changes two files
(CL001 moves a worker-side reset to the driver): libcst transforms each file on its own, so it cannot
make both halves or neither. Fixes that a first fix makes possible need a second run.
"""

from __future__ import annotations

import argparse
import ast
import io
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, cast

import libcst as cst
from libcst.codemod import CodemodCommand, CodemodContext, SkipFile
from libcst.metadata import BaseMetadataProvider, CodeRange, PositionProvider

from cachelint.changes import Change
from cachelint.codemod.transform import RewriteError, SourceTree
from cachelint.config import ConfigError
from cachelint.discovery import MissingPathError
from cachelint.edits import overlaps
from cachelint.finding import Edit, Finding
from cachelint.vllm_range import find_project_root
from cachelint.writing import Replacement, WriteError, replace_together, unwritable


class ProjectFindings(BaseMetadataProvider[Sequence[Finding]]):
    """The findings with a fix in a file, from one analysis of every file the driver was given."""

    @classmethod
    def gen_cache(
        cls, root_path: Path, paths: list[str], *, timeout: int | None = None, **kwargs: Any
    ) -> Mapping[str, object]:
        """Run by libcst's driver once, before it starts the processes that transform the files. A bad
        configuration stops the run with cachelint's one-line error and exit status 2."""
        try:
            return findings_by_file(paths, {})
        except CachelintInputError as error:
            print(f"cachelint: error: {error}", file=sys.stderr)
            raise SystemExit(2) from error

    def __init__(self, cache: object = None) -> None:
        # With no repository manager there is no cache: the command then analyses the file itself.
        super().__init__(cache if cache is not None else _NOT_ANALYSED)

    def _gen_impl(self, module: cst.Module) -> None:
        self.set_metadata(module, None if self.cache is _NOT_ANALYSED else self.cache)


_NOT_ANALYSED = object()
CachelintInputError = (ConfigError, MissingPathError)


def findings_by_file(paths: Sequence[str], sources: Mapping[str, str]) -> dict[str, tuple[Finding, ...]]:
    """Each path's findings that have a fix, keyed by the path as given; `sources`: texts to use instead
    of the files'. The driver gathers the paths itself, so cachelint's excludes (vendored vLLM, what git
    ignores, `exclude`) apply to each, as `--force-exclude` makes them."""
    from cachelint.api import analyze_paths

    analysis = analyze_paths(paths, dict(sources), None, True, force_exclude=True)
    spelled = {os.path.abspath(path): path for path in paths}
    found: dict[str, list[Finding]] = {path: [] for path in paths}
    for finding in analysis.findings:
        path = spelled.get(os.path.abspath(finding.path))
        if path is not None and finding.fix is not None and finding.fix.changes:
            found[path].append(finding)
    return {path: tuple(findings) for path, findings in found.items()}


class FixCacheResets(CodemodCommand):
    DESCRIPTION = (
        "Apply cachelint's fixes for vLLM cache-reset bugs: the safe ones, and with --unsafe-fixes those that "
        "add or move resets. Use --no-format: the fixes keep the file's own layout."
    )
    METADATA_DEPENDENCIES = (ProjectFindings, PositionProvider)

    def __init__(self, context: CodemodContext, unsafe_fixes: bool = False) -> None:
        super().__init__(context)
        self.unsafe_fixes = unsafe_fixes

    @staticmethod
    def add_args(arg_parser: argparse.ArgumentParser) -> None:
        arg_parser.add_argument(
            "--unsafe-fixes", action="store_true", help="Also apply the unsafe fixes (they add or move resets)."
        )

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        findings: Sequence[Finding] | None = self.get_metadata(ProjectFindings, tree, None)
        if findings is None:
            path = self.context.filename or "-"
            try:
                findings = findings_by_file([path], {path: tree.code})[path]
            except CachelintInputError as error:
                print(f"cachelint: error: {error}", file=sys.stderr)  # libcst does not show why on stdin
                raise SkipFile(f"cachelint: error: {error}") from error
        source = SourceTree(tree, cast(Mapping[cst.CSTNode, CodeRange], self.metadata[PositionProvider]))
        changes = self._changes(source, findings)
        if not changes:
            return tree
        if self.context.filename is not None and self.context.filename != "-":
            target = Path(os.path.abspath(self.context.filename))
            refusal = unwritable(target, find_project_root(target))
            if refusal is not None:  # as `cachelint check --fix` refuses it, the diff of `-u` too
                raise SkipFile(f"cachelint: {self.context.filename}: not fixed: {refusal}")
        fixed = source.rewrite(changes)
        try:
            ast.parse(fixed.code)
        except SyntaxError as error:
            self.warn(f"no fix applied: together they would not parse ({error.msg}, line {error.lineno})")
            return tree
        if self.context.filename is not None and self.context.filename != "-":
            _plan_write(self.context.filename, tree.bytes)
        return fixed

    def _changes(self, source: SourceTree, findings: Sequence[Finding]) -> list[Change]:
        """The changes of every fix this run allows, but those that change another file too or overlap a
        fix taken before."""
        from cachelint.fixes import allowed

        changes: list[Change] = []
        taken: list[Edit] = []
        for finding in findings:
            fix = finding.fix
            if fix is None or not allowed(fix, self.unsafe_fixes):
                continue
            where = f"{finding.path}:{finding.span.line}:{finding.span.col}: {finding.code} fix not applied"
            if list(fix.paths) != [finding.path]:
                files = f"{', '.join(fix.paths[:-1])} and {fix.paths[-1]}" if len(fix.paths) > 1 else fix.paths[0]
                self.warn(f"{where}: it changes {files}; `cachelint check --fix` makes it")
                continue
            try:
                edits = source.edits(finding.path, fix.changes)
            except RewriteError as error:
                self.warn(f"{where}: {error}")
                continue
            if any(overlaps(edit, other) for edit in edits for other in taken):
                self.warn(f"{where}: it overlaps another fix; run the command again")
                continue
            changes += fix.changes
            taken += edits
        return changes


# libcst's driver writes a transformed file in place (`open(name, "wb")`), which a full disk or a crash
# leaves cut short. The files this command changes are written whole instead: the driver's `open` for
# writing, looked up in its module, hands back a buffer that `writing.replace_together` writes on close,
# only if the file still holds the bytes the command transformed. Any other use of `open` is the builtin.
_PLANNED: dict[str, bytes] = {}  # absolute path -> the bytes transformed


def _plan_write(filename: str, original: bytes) -> None:
    _PLANNED[os.path.abspath(filename)] = original


class _WholeFile(io.BytesIO):
    def __init__(self, path: str, original: bytes) -> None:
        super().__init__()
        self.path = path
        self.original = original

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if kind is None:
            self.write_through()
        super().__exit__(kind, error, trace)

    def write_through(self) -> None:
        path = Path(self.path)
        display = os.path.relpath(path) if path.is_relative_to(Path.cwd()) else self.path
        try:
            replace_together([Replacement(path, display, self.getvalue(), self.original)], find_project_root(path))
        except WriteError as error:
            # libcst reports it as a failure to codemod the file, and its exit status is 1
            raise OSError(f"cachelint: {error}; the file is as it was") from None


def _driver_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
    if mode == "wb" and isinstance(file, str) and not args and not kwargs:
        original = _PLANNED.pop(os.path.abspath(file), None)
        if original is not None:
            return _WholeFile(file, original)
    return open(file, mode, *args, **kwargs)  # noqa: PTH123 (the caller closes it)


def _write_whole_files() -> None:
    from libcst.codemod import _cli as driver

    driver.open = _driver_open  # type: ignore[attr-defined]


_write_whole_files()
