"""Inference engines' own source inside a project: a vendored vLLM (or a fork of it), or SGLang.

Such source is the library the project calls, not the project's code: a walk leaves it out as it
leaves out an excluded folder (nothing in it is read, summarized or reported on), and calls into it
resolve by import path to the engine's classes, as calls into an installed engine do. Left out:

- an engine's package: `vllm/` holding `__init__.py`, `engine/` and one of `v1/`, `entrypoints/`,
  `version.py`, `_version.py`; `sglang/` holding `__init__.py` and `srt/`;
- an engine's repository (a fork checked out beside the trainer): a folder whose `pyproject.toml`
  names the project `vllm` (or `sglang`) and that holds that package, with its tests, examples and
  benchmarks.

A vendored vLLM at the project root also says which release the project runs: its `_version.py`,
`version.py` or `__init__.py` (read as text, never imported).
"""

from __future__ import annotations

import ast
import os
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import TYPE_CHECKING

from cachelint.source import read_file

if TYPE_CHECKING:  # imported when a vendored vLLM is found: every walk imports this module
    from packaging.version import Version

# Package name -> (entries it must hold, entries of which it must hold one, if any).
ENGINE_PACKAGES: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "vllm": (frozenset({"__init__.py", "engine"}), frozenset({"v1", "entrypoints", "version.py", "_version.py"})),
    "sglang": (frozenset({"__init__.py", "srt"}), frozenset()),
}
VERSION_FILES = ("_version.py", "version.py", "__init__.py")
VERSION_NAMES = frozenset({"__version__", "version"})


def is_engine_source(folder: str, entries: AbstractSet[str]) -> bool:
    """Whether the folder at `folder` (a path) holding `entries` (its file and folder names) is an
    engine's package or repository (see the module's doc)."""
    name = folder.rpartition(os.sep)[2]
    if name in ENGINE_PACKAGES and _package_shape(name, entries):
        return True
    if "pyproject.toml" not in entries or entries.isdisjoint(ENGINE_PACKAGES):
        return False
    named = _project_name(Path(folder, "pyproject.toml"))
    return named in ENGINE_PACKAGES and named in entries and is_engine_folder(Path(folder, named))


def is_engine_folder(folder: Path) -> bool:
    """`is_engine_source` for a folder on disk."""
    try:
        entries = frozenset(entry.name for entry in os.scandir(folder))
    except OSError:
        return False
    return is_engine_source(os.path.abspath(folder), entries)


def inside_engine_source(path: Path) -> bool:
    """Whether `path` is an engine's package or repository, or lies in one."""
    absolute = Path(os.path.abspath(path))
    return any(is_engine_folder(folder) for folder in (absolute, *absolute.parents) if _may_be_engine(folder))


def vendored_vllm_version(root: Path) -> tuple[Version, Path] | None:
    """The release a vLLM package at the project root says it is, and the file that says it; None
    when there is no such package or none of its files names a release (a source checkout's
    `version.py` says "dev" until it is built)."""
    folder = root / "vllm"
    try:
        entries = frozenset(entry.name for entry in os.scandir(folder))
    except OSError:
        return None
    if not _package_shape("vllm", entries):
        return None
    from packaging.version import InvalidVersion, Version

    for name in VERSION_FILES:
        path = folder / name
        try:
            tree = ast.parse(read_file(path))
        except (OSError, SyntaxError, ValueError):
            continue
        for text in _assigned_versions(tree.body):
            try:
                return Version(text), path
            except InvalidVersion:
                continue
    return None


def _package_shape(name: str, entries: AbstractSet[str]) -> bool:
    required, one_of = ENGINE_PACKAGES[name]
    return required <= entries and (not one_of or not one_of.isdisjoint(entries))


def _may_be_engine(folder: Path) -> bool:
    """A quick test before listing a folder: named like an engine's package, or holding one."""
    return folder.name in ENGINE_PACKAGES or any((folder / name).is_dir() for name in ENGINE_PACKAGES)


def _project_name(pyproject: Path) -> str:
    from cachelint.toml import load_toml

    try:
        project = load_toml(pyproject).get("project", {})
    except ValueError:
        return ""
    name = project.get("name") if isinstance(project, dict) else None
    return name.lower() if isinstance(name, str) else ""


def _assigned_versions(body: list[ast.stmt]) -> list[str]:
    """The strings the statements assign to `__version__` or `version` (`__version__ = version =
    "0.11.1"`), also in their `if`, `try` and `with` blocks but not in functions or classes, in order."""
    found = []
    for node in body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            if isinstance(node, (ast.If, ast.Try, ast.With)):
                blocks = [getattr(node, name, []) for name in ("body", "orelse", "finalbody")]
                blocks += [handler.body for handler in getattr(node, "handlers", [])]
                for block in blocks:
                    found.extend(_assigned_versions(block))
            continue
        named = any(isinstance(target, ast.Name) and target.id in VERSION_NAMES for target in targets)
        if named and isinstance(value, ast.Constant) and isinstance(value.value, str):
            found.append(value.value)
    return found
