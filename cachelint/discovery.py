"""Finding the Python files to check: .gitignore, default and configured excludes."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

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
    ".pytest_cache",
    ".pytype",
    ".ruff_cache",
    ".svn",
    ".tox",
    ".venv",
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


class MissingPathError(Exception):
    pass


@dataclass(frozen=True)
class Excludes:
    root: Path
    patterns: pathspec.GitIgnoreSpec

    @classmethod
    def build(cls, root: Path, patterns: Iterable[str]) -> Excludes:
        return cls(root, pathspec.GitIgnoreSpec.from_lines([*DEFAULT_EXCLUDES, *patterns]))

    def matches(self, path: Path) -> bool:
        try:
            relative = path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            relative = path.name
        if path.is_dir():
            relative += "/"
        return self.patterns.match_file(relative)


def _gitignore(folder: Path) -> pathspec.GitIgnoreSpec | None:
    ignore_file = folder / ".gitignore"
    try:
        lines = ignore_file.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return pathspec.GitIgnoreSpec.from_lines(lines)


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
    for parent in folder.resolve().parents:
        spec = _gitignore(parent)
        if spec is not None:
            specs.append((parent, spec))
        if (parent / ".git").exists():
            break
    return specs


def walk_python_files(folder: Path, excludes: Excludes) -> Iterator[Path]:
    """Python files under `folder`, skipping excluded and git-ignored paths; never follows links.

    Paths are yielded under `folder` as given (relative stays relative)."""
    root = folder.resolve()
    specs = _parent_gitignores(root)
    for current, dirs, files in os.walk(root, followlinks=False):
        current_path = Path(current)
        spec = _gitignore(current_path)
        if spec is not None:
            specs.append((current_path, spec))
        kept = []
        for name in sorted(dirs):
            child = current_path / name
            if child.is_symlink() or excludes.matches(child) or _ignored_by_git(child, specs, True):
                continue
            kept.append(name)
        dirs[:] = kept
        for name in sorted(files):
            child = current_path / name
            if not name.endswith(PYTHON_SUFFIXES) or excludes.matches(child):
                continue
            if not _ignored_by_git(child, specs, False):
                yield folder / child.relative_to(root)


def discover(paths: Iterable[Path], excludes: Excludes, force_exclude: bool = False) -> list[Path]:
    """Files to check. Files named directly are kept unless `force_exclude`; a missing path raises."""
    found: dict[Path, None] = {}
    for path in paths:
        if not path.exists() and not path.is_symlink():
            raise MissingPathError(f"{path}: No such file or directory")
        if path.is_dir():
            if force_exclude and excludes.matches(path):
                continue
            for child in walk_python_files(path, excludes):
                found[child] = None
        elif not force_exclude or not excludes.matches(path):
            found[path] = None
    return list(found)
