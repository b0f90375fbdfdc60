"""The Python API: `check` and `fix` do what `cachelint check` and `cachelint check --fix` do, and return
the findings the command prints as frozen dataclasses (cachelint.finding)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cachelint.config import Settings, SettingsFinder
from cachelint.finding import Finding

if TYPE_CHECKING:
    from cachelint.engine import Analysis

PathLike = str | os.PathLike[str]
# Texts to use instead of the files' (Mapping's key type is invariant: each spelling is named).
Sources = Mapping[str, str] | Mapping[Path, str] | Mapping[PathLike, str]


@dataclass(frozen=True)
class CheckResult:
    findings: tuple[Finding, ...]  # sorted by file and position; each fix with its text edits
    files_checked: int
    warnings: tuple[str, ...] = ()  # what `cachelint check` prints as warnings (e.g. the cache was not used)


@dataclass(frozen=True)
class FixedSource:
    path: str  # as findings name it: relative to the working folder when below it
    before: str
    after: str


@dataclass(frozen=True)
class FixResult:
    findings: tuple[Finding, ...]  # what is left to report after the fixes
    fixed: int  # how many findings the fixes removed
    files: tuple[FixedSource, ...]  # the files the fixes changed, before and after
    errors: tuple[str, ...] = ()  # fixes not applied, files not fixed or not written, and why
    warnings: tuple[str, ...] = ()


def check(
    paths: PathLike | Iterable[PathLike],
    *,
    sources: Sources | None = None,
    settings: Settings | None = None,
    cache: bool = True,
) -> CheckResult:
    """Check `paths` (files or folders) within the project that holds them, as `cachelint check` does.

    `sources` gives the text of files to use instead of what is on disk (an editor's buffers; the file
    need not exist). `settings` replaces the configuration files (default: the nearest
    `[tool.cachelint]`, `cachelint.toml` or `.cachelint.toml`, as the command reads them). `cache`:
    read and write the project's cache folder, as the command does unless given `--no-cache`.
    Raises cachelint.ConfigError for a bad configuration, cachelint.MissingPathError for a path that
    does not exist."""
    from cachelint.codemod import reader, with_edits

    analysis = analyze_paths(paths, sources, settings, cache, with_edits=True)
    findings = with_edits(analysis.findings, reader(analysis.sources))
    return CheckResult(tuple(findings), analysis.files_checked, _warnings(analysis))


def fix(
    paths: PathLike | Iterable[PathLike],
    *,
    sources: Sources | None = None,
    settings: Settings | None = None,
    cache: bool = True,
    unsafe_fixes: bool = False,
    write: bool = False,
) -> FixResult:
    """Apply the fixes `cachelint check --fix` applies (with `unsafe_fixes`, `--unsafe-fixes` too) to a
    fixed point, and return the changed files and the findings left. Nothing is written unless `write`
    is true; then each changed file is written as `--fix` writes it (files given in `sources` are
    never written). The other arguments are those of `check`."""
    from cachelint.codemod import reader, with_edits
    from cachelint.fixes import FixOutcome, fix_to_fixed_point, write_changes

    targets, overlay, resolved, settings_for = _inputs(paths, sources, settings)
    outcome = fix_to_fixed_point(
        targets, resolved, unsafe_fixes, use_cache=cache, settings_for=settings_for, overlay=overlay
    )
    errors = list(outcome.errors)
    if write:
        on_disk = {path: file for path, file in outcome.files.items() if path not in overlay}
        errors += write_changes(FixOutcome(outcome.analysis, outcome.fixed, on_disk, together=outcome.together))
    analysis = outcome.analysis
    changed = tuple(FixedSource(file.display, file.source.text, file.text) for file in outcome.changed)
    findings = with_edits(analysis.findings, reader(analysis.sources))
    return FixResult(tuple(findings), outcome.fixed, changed, tuple(errors), _warnings(analysis))


def analyze_paths(
    paths: PathLike | Iterable[PathLike],
    sources: Sources | None,
    settings: Settings | None,
    cache: bool,
    force_exclude: bool = False,
    with_edits: bool = False,
) -> Analysis:
    """The analysis `check` reports; `force_exclude` as `--force-exclude`; `with_edits`: each fix with
    its text edits."""
    from cachelint.engine import analyze

    targets, overlay, resolved, settings_for = _inputs(paths, sources, settings)
    return analyze(
        targets,
        resolved,
        overlay=overlay,
        use_cache=cache,
        settings_for=settings_for,
        force_exclude=force_exclude,
        with_edits=with_edits,
    )


def _warnings(analysis: Analysis) -> tuple[str, ...]:
    return (*analysis.warnings, *analysis.range_warnings())


def _inputs(
    paths: PathLike | Iterable[PathLike], sources: Sources | None, settings: Settings | None
) -> tuple[list[Path], dict[Path, bytes], Settings, Callable[[Path], Settings]]:
    """The paths, the overlay, the first path's settings and each file's (its nearest configuration's,
    as the command resolves them, unless `settings` is given for every file)."""
    targets = [Path(paths)] if isinstance(paths, (str, os.PathLike)) else [Path(path) for path in paths]
    targets = targets or [Path()]
    overlay = {Path(os.path.abspath(path)): text.encode("utf-8") for path, text in (sources or {}).items()}
    if settings is not None:
        given = settings
        return targets, overlay, given, lambda _: given
    finder = SettingsFinder()
    return targets, overlay, finder(targets[0]), finder
