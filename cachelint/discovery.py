"""Finding the Python files to check: .gitignore, default and configured excludes."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cachelint.config import ConfigError, gitignore_spec
from cachelint.source import read_file
from cachelint.vendored import inside_engine_source, is_engine_source

if TYPE_CHECKING:  # imported when a pattern is more than a name, or a .gitignore is found
    import pathspec

DEFAULT_EXCLUDES = (
    ".bzr",
    ".direnv",
    ".eggs",
    ".git",
    ".git-rewrite",
    ".hg",
    ".ipynb_checkpoints",
    ".mypy_cache",
    ".nox",
    ".pants.d",
    ".pyenv",
    ".pytest_cache",
    ".pytype",
    ".ruff_cache",
    ".svn",
    ".tox",
    ".venv",
    ".vscode",
    "venv",
    "__pypackages__",
    "_build",
    "buck-out",
    "build",
    "dist",
    "node_modules",
    "site-packages",
    "__pycache__",
    ".cachelint_cache",
)
PYTHON_SUFFIXES = (".py", ".pyi")
_PLAIN_NAME = re.compile(r"(?!\.+$)[\w.-]+", re.ASCII)


class MissingPathError(Exception):
    pass


@dataclass(frozen=True)
class Excludes:
    root: Path
    lines: tuple[str, ...]  # gitignore syntax

    @classmethod
    def build(cls, root: Path, patterns: Iterable[str]) -> Excludes:
        return cls(root, (*DEFAULT_EXCLUDES, *patterns))

    @functools.cached_property
    def resolved_root(self) -> Path:
        return Path(os.path.realpath(self.root))

    @functools.cached_property
    def spec(self) -> pathspec.GitIgnoreSpec:
        spec, unreadable = gitignore_spec(self.lines)
        if unreadable:  # the settings files are checked as they are read: these came from the API
            raise ConfigError(f"`exclude`: {unreadable[0]!r} is not a gitignore-style pattern cachelint can read")
        return spec

    def matches(self, path: Path) -> bool:
        return self.matches_resolved(Path(os.path.realpath(path)), path.is_dir())

    def matches_resolved(self, path: Path, is_dir: bool) -> bool:
        """`matches` for an absolute path whose folders are resolved, as a folder walk yields them."""
        try:
            relative = path.relative_to(self.resolved_root).as_posix()
        except ValueError:
            relative = path.name
        return self.matches_relative(relative, is_dir)

    def matches_relative(self, relative: str, is_dir: bool) -> bool:
        """`matches` for a path given relative to the root, with "/" separators."""
        if self.plain_names is not None:
            return not self.plain_names.isdisjoint(relative.split("/"))
        return self.spec.match_file(relative + "/" if is_dir else relative)

    @functools.cached_property
    def plain_names(self) -> frozenset[str] | None:
        """When every pattern is a plain name (as the defaults are), those names: a path matches when
        one of its parts is one of them. None when any pattern is more than a name."""
        names = set()
        for line in self.lines:
            if not line or line.startswith("#"):
                continue
            if not _PLAIN_NAME.fullmatch(line):
                return None
            names.add(line)
        return frozenset(names)


# What the walks could not read in .gitignore files, until `take_warnings` hands it to a report.
_warnings: dict[str, None] = {}


def take_warnings() -> list[str]:
    """The warnings about .gitignore lines the walks since the last call ignored, each once."""
    found = list(_warnings)
    _warnings.clear()
    return found


def _gitignore(folder: Path) -> pathspec.GitIgnoreSpec | None:
    ignore_file = folder / ".gitignore"
    try:
        lines = read_file(ignore_file).decode("utf-8", errors="replace").splitlines()
    except OSError:
        return None
    spec, unreadable = gitignore_spec(lines)
    if unreadable:
        from cachelint.vllm_range import shown_path

        for line in unreadable:
            message = f"{shown_path(ignore_file)}: `{line}` is not a pattern cachelint can read: the line is ignored"
            _warnings[message] = None
    return spec


def _ignored_by_git(path: Path, specs: list[tuple[Path, pathspec.GitIgnoreSpec]], is_dir: bool) -> bool:
    for base, spec in specs:
        try:
            relative = path.relative_to(base).as_posix()
        except ValueError:
            continue
        if spec.match_file(relative + ("/" if is_dir else "")):
            return True
    return False


def _parent_gitignores(folder: Path) -> list[tuple[Path, pathspec.GitIgnoreSpec]]:
    """The .gitignore files of the enclosing repository above `folder`."""
    specs: list[tuple[Path, pathspec.GitIgnoreSpec]] = []
    for parent in Path(os.path.realpath(folder)).parents:
        spec = _gitignore(parent)
        if spec is not None:
            specs.append((parent, spec))
        if (parent / ".git").exists():
            break
    return specs


def walk_python_files(
    folder: Path,
    excludes: Excludes,
    stop: Callable[[AbstractSet[str]], bool] | None = None,
    listing: dict[str, frozenset[str]] | None = None,
) -> Iterator[str]:
    """Python files under `folder`, skipping excluded and git-ignored paths and the inference engines'
    source below it (cachelint.vendored); never follows links. Each is named as `str(folder / relative)`
    names it, without the cost of making a Path of every file.

    `stop(names)`: whether a folder below `folder` holding the entries `names` is left out with all it
    holds. `listing` is given each walked folder's entry names, by its absolute path as the yielded
    paths name it (`os.path.abspath`). Paths are yielded under `folder` as given (relative stays
    relative)."""
    root = Path(os.path.realpath(folder))
    # A folder named explicitly is walked even when it, or a folder above it, is excluded or
    # git-ignored (as ruff and ripgrep do: `check build/`, a git-ignored pyenv or venv): then only
    # what matches below it is skipped.
    if excludes.matches_resolved(root, True):
        excludes = Excludes(root, excludes.lines)
    specs = [item for item in _parent_gitignores(root) if not _ignored_by_git(root, [item], True)]
    root_text = os.fspath(root)
    excludes_root = os.fspath(excludes.resolved_root)
    shown_root = os.path.abspath(folder)
    given = os.fspath(folder)
    head = "" if given == "." else given if given.endswith(os.sep) else given + os.sep
    # Paths as strings below: this loop runs for every file of the project, and pathlib is slow.
    for current, dirs, files in os.walk(root, followlinks=False):
        below = _prefix(current, root_text) or ""
        names = frozenset((*dirs, *files))
        if below and is_engine_source(current, names):
            dirs[:] = []  # an engine's own source, vendored: the library, not the project
            continue
        if stop is not None or listing is not None:
            if stop is not None and below and stop(names):
                dirs[:] = []
                continue
            if listing is not None:
                listing[f"{shown_root}{os.sep}{below[:-1]}" if below else shown_root] = names
        spec = _gitignore(Path(current)) if ".gitignore" in names else None
        if spec is not None:
            specs.append((Path(current), spec))
        ignores = [(prefix, spec) for base, spec in specs if (prefix := _prefix(current, os.fspath(base))) is not None]
        level = (_prefix(current, excludes_root), excludes, ignores)
        dirs[:] = [name for name in sorted(dirs) if not _skipped(name, True, level)]  # links: os.walk never enters
        named_below = head + below.replace("/", os.sep)
        for name in sorted(files):
            if name.endswith(PYTHON_SUFFIXES) and not _skipped(name, False, level):
                yield named_below + name


_Level = tuple[str | None, Excludes, list[tuple[str, "pathspec.GitIgnoreSpec"]]]


def _skipped(name: str, is_dir: bool, level: _Level) -> bool:
    """Whether the entry `name` of a walked folder is excluded or git-ignored; `level` holds the folder
    relative to the excludes' root and to each .gitignore's folder (see `_prefix`)."""
    excluded_prefix, excludes, ignores = level
    if excludes.matches_relative(name if excluded_prefix is None else excluded_prefix + name, is_dir):
        return True
    return any(spec.match_file(prefix + name + ("/" if is_dir else "")) for prefix, spec in ignores)


def _prefix(folder: str, base: str) -> str | None:
    """`folder` below `base` (both absolute and normal) with "/" separators and a final "/"; "" when
    they are the same, None when `folder` is not below `base`."""
    if folder == base:
        return ""
    head = base if base.endswith(os.sep) else base + os.sep
    if not folder.startswith(head):
        return None
    return folder[len(head) :].replace(os.sep, "/") + "/"


def discover(
    paths: Iterable[Path],
    excludes: Excludes,
    force_exclude: bool = False,
    virtual: AbstractSet[Path] = frozenset(),
    listing: dict[str, frozenset[str]] | None = None,
) -> list[str]:
    """Files to check, each named as the path given or `walk_python_files` names it. Files named
    directly are kept unless `force_exclude`; a missing path raises unless its absolute form is in
    `virtual` (its source comes from elsewhere, e.g. stdin). `listing`: as `walk_python_files` takes it,
    for the folders walked."""
    found: dict[str, None] = {}
    for path in paths:
        if force_exclude and inside_engine_source(path):
            continue
        if Path(os.path.abspath(path)) in virtual:
            if not force_exclude or not excludes.matches(path):
                found[os.fspath(path)] = None
            continue
        if not path.exists() and not path.is_symlink():
            raise MissingPathError(f"{path}: No such file or directory")
        if path.is_dir():
            if force_exclude and excludes.matches(path):
                continue
            found.update(dict.fromkeys(walk_python_files(path, excludes, listing=listing)))
        elif not force_exclude or not excludes.matches(path):
            found[os.fspath(path)] = None
    return list(found)
