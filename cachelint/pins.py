"""The requirements of an engine (vllm, sglang) a project declares, read statically, and how they combine.

Files read, in the project root unless said otherwise:
- `pyproject.toml` and alternative project files `pyproject.*.toml`: `[project]` `dependencies` and
  `optional-dependencies`, `[dependency-groups]` (PEP 735, `{include-group = ...}` followed),
  `[tool.uv]` `dev-dependencies`, `constraint-dependencies` and `override-dependencies`, and the
  requirement files `[tool.setuptools.dynamic]` names;
- `setup.py` (never run: see setup_py.py) and `setup.cfg`: `install_requires` and the extras;
- `requirements*.txt`, every `.txt` below `requirements/`, and `requirements*.txt` one folder down
  (not in a folder that is a project of its own, and not below a loose folder, where such a folder is
  a project of its own: see vllm_range.marks_project), following `-r` (requirements) and `-c`
  (constraints) includes; a file another one includes is not read on its own.

How they combine: requirements in one list all hold, except that requirements with an environment
marker are alternatives (markers are not evaluated): a list gives one alternative per marked
requirement, each with the list's unmarked ones, or one alternative of its unmarked ones. Extras and
dependency groups are installed on top of the dependencies: they count only when the dependencies do
not require the engine. Overrides (uv) replace a file's requirements; constraints (uv, `-c`) narrow them.
Each file is an alternative to the others. A direct reference takes its version from the wheel or
sdist file name (PEP 427, PEP 625); a requirement whose version cannot be told (a git URL, a local
folder) allows every release and is reported as such.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from cachelint.source import read_file
from cachelint.toml import load_toml
from cachelint.vllm_range import holds_project, marks_project

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

# Folders never searched for requirement files (as discovery never walks them).
_SKIPPED_FOLDERS = frozenset(
    {"node_modules", "site-packages", "venv", "build", "dist", "__pycache__", "__pypackages__"}
)


@dataclass(frozen=True)
class Pin:
    """One requirement of the engine as a project declares it."""

    file: Path  # absolute
    requirement: str  # as written
    where: str  # what declares it in the file: "dependencies", 'extra "vllm"', "" in a requirements file, ...
    specifier: SpecifierSet | None  # the releases it allows; None when that cannot be told
    marked: bool = False  # it has an environment marker
    narrows: bool = False  # a constraint: it narrows the requirements, it requires nothing


Alternative = tuple[Pin, ...]  # one way to install the project: every pin holds


@dataclass
class Declared:
    name: str = "vllm"  # the distribution whose requirements are read
    alternatives: list[Alternative] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)  # what could not be read statically, for people


def read_declared(root: Path, name: str = "vllm") -> Declared:
    """Every alternative way the project at `root` declares the distribution `name`, in the order of the
    files above."""
    root = Path(os.path.abspath(root))
    declared = Declared(name)
    requirement_files = _RequirementFiles(declared)
    project_files = [root / "pyproject.toml", *sorted(root.glob("pyproject.*.toml"))]
    for path in project_files:
        if path.is_file():
            declared.alternatives += _pyproject(path, requirement_files, declared)
    setup_py = root / "setup.py"
    if setup_py.is_file():
        declared.alternatives += _setup_py(setup_py, declared)
    setup_cfg = root / "setup.cfg"
    if setup_cfg.is_file():
        declared.alternatives += _setup_cfg(setup_cfg, declared)
    read = [(path, requirement_files.read(path)) for path in _requirement_files(root)]
    for path, (requirements, constraints) in read:
        if path.resolve() not in requirement_files.included:
            declared.alternatives += combine(requirements, [], constraints)
    return declared


def combine(
    requirements: list[Pin], optional: Iterable[list[Pin]], constraints: list[Pin], overrides: Iterable[Pin] = ()
) -> list[Alternative]:
    """The alternatives of one file: its requirements (else its extras and groups), replaced by its
    overrides, narrowed by its constraints."""
    alternatives = _alternatives(requirements) or [alt for pins in optional for alt in _alternatives(pins)]
    overriding = _alternatives(list(overrides))
    if overriding:
        alternatives = overriding
    return [(*alternative, *constraints) for alternative in alternatives]


def _alternatives(pins: list[Pin]) -> list[Alternative]:
    common = tuple(pin for pin in pins if not pin.marked)
    marked = [pin for pin in pins if pin.marked]
    if marked:
        return [(*common, pin) for pin in marked]
    return [common] if common else []


# -- one requirement ---------------------------------------------------------------------------------

# A requirement's name where what follows cannot be read: `vllm==${VERSION}` (not prose: `vllm is ...`).
_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:$|[\[<>=!~@;$(])")
_ARCHIVE = re.compile(r"[^/\\]+\.(whl|tar\.gz|zip)$")


def engine_pin(text: str, file: Path, where: str, narrows: bool = False, name: str = "vllm") -> Pin | None:
    """The pin `text` declares when it is a requirement of `name` (vllm by default), else None."""
    if name not in text.lower():
        return None
    from packaging.requirements import InvalidRequirement, Requirement  # slow to import: only when needed
    from packaging.utils import canonicalize_name

    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return _unparsed_pin(text, file, where, narrows, name)
    if canonicalize_name(requirement.name) != name:
        return None
    specifier: SpecifierSet | None = requirement.specifier
    if requirement.url:
        specifier = _archive_specifier(requirement.url, name)
    return Pin(file, text, where, specifier, requirement.marker is not None, narrows)


def _unparsed_pin(text: str, file: Path, where: str, narrows: bool, name: str) -> Pin | None:
    """A line pip takes that is no PEP 508 requirement: a URL or path to a wheel or sdist, or a
    requirement written in a way that cannot be read (`vllm==${VERSION}`)."""
    from packaging.utils import canonicalize_name

    location = text.split(";", 1)[0].strip()
    parts = urlsplit(location)
    if _ARCHIVE.search(parts.path or location):
        specifier = _archive_specifier(location, name)
        return None if specifier is None else Pin(file, text, where, specifier, ";" in text, narrows)
    egg = re.search(r"(?:^|&)egg=([^&]+)", parts.fragment)
    folder = parts.path.rstrip("/").rsplit("/", 1)[-1].split("@", 1)[0]
    match = _NAME.match(text)
    names = [egg.group(1) if egg else "", folder, match.group(1) if match else ""]
    if not any(found and canonicalize_name(found) == name for found in names):
        return None
    return Pin(file, text, where, None, False, narrows)


def _archive_specifier(url: str, name: str) -> SpecifierSet | None:
    """`==VERSION` from a wheel or sdist file name, when it is `name`'s; None when it cannot be told."""
    from packaging.specifiers import SpecifierSet
    from packaging.utils import (
        InvalidSdistFilename,
        InvalidWheelFilename,
        canonicalize_name,
        parse_sdist_filename,
        parse_wheel_filename,
    )

    file_name = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    try:
        if file_name.endswith(".whl"):
            project, version, *_ = parse_wheel_filename(file_name)
        else:
            project, version = parse_sdist_filename(file_name)
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None
    return SpecifierSet(f"=={version}") if canonicalize_name(project) == name else None


def _pins(items: Any, file: Path, where: str, declared: Declared, narrows: bool = False) -> list[Pin]:
    if not isinstance(items, list):
        if items is not None:
            declared.unread.append(f"{file.name}: {where} is not a list")
        return []
    name = declared.name
    return [pin for item in items if isinstance(item, str) and (pin := engine_pin(item, file, where, narrows, name))]


# -- pyproject.toml ----------------------------------------------------------------------------------


def _pyproject(path: Path, requirement_files: _RequirementFiles, declared: Declared) -> list[Alternative]:
    try:
        data = load_toml(path)
    except ValueError:
        declared.unread.append(f"{path.name}: not valid TOML")
        return []
    project = _table(data, "project")
    tool = _table(data, "tool")
    uv = _table(tool, "uv")
    dynamic = _table(_table(tool, "setuptools"), "dynamic")
    requirements = _pins(project.get("dependencies"), path, "dependencies", declared)
    requirements += _dynamic_files(dynamic.get("dependencies"), path, "", requirement_files)
    optional = [
        _pins(items, path, f'extra "{name}"', declared)
        for name, items in _table(project, "optional-dependencies").items()
    ]
    for name, entry in _table(dynamic, "optional-dependencies").items():
        optional.append(_dynamic_files(entry, path, f'extra "{name}"', requirement_files))
    groups = _table(data, "dependency-groups")
    for name in groups:
        optional.append(_pins(_group(groups, name, ()), path, f'group "{name}"', declared))
    optional.append(_pins(uv.get("dev-dependencies"), path, "[tool.uv] dev-dependencies", declared))
    constraints = _pins(uv.get("constraint-dependencies"), path, "[tool.uv] constraint-dependencies", declared, True)
    overrides = _pins(uv.get("override-dependencies"), path, "[tool.uv] override-dependencies", declared)
    return combine(requirements, optional, constraints, overrides)


def _table(data: Any, key: str) -> dict[str, Any]:
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, dict) else {}


def _group(groups: dict[str, Any], name: str, seen: tuple[str, ...]) -> list[str]:
    """The requirements of dependency group `name`, its included groups' too (PEP 735); a cycle or a
    missing group adds nothing."""
    from packaging.utils import canonicalize_name

    wanted = canonicalize_name(name)
    if wanted in seen:
        return []
    items = next((value for key, value in groups.items() if canonicalize_name(key) == wanted), None)
    if not isinstance(items, list):
        return []
    found: list[str] = []
    for item in items:
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict) and isinstance(item.get("include-group"), str):
            found += _group(groups, item["include-group"], (*seen, wanted))
    return found


def _dynamic_files(entry: Any, path: Path, where: str, requirement_files: _RequirementFiles) -> list[Pin]:
    """The pins of the requirement files a `[tool.setuptools.dynamic]` entry names (`{file = ...}`)."""
    files = entry.get("file") if isinstance(entry, dict) else None
    names = [files] if isinstance(files, str) else files if isinstance(files, list) else []
    pins: list[Pin] = []
    for name in names:
        if isinstance(name, str):
            requirements, constraints = requirement_files.read(path.parent / name, where)
            pins += requirements + constraints
    return pins


# -- setup.py, setup.cfg -----------------------------------------------------------------------------


def _setup_py(path: Path, declared: Declared) -> list[Alternative]:
    from cachelint.setup_py import read_setup_requirements

    try:
        found = read_setup_requirements(read_file(path))
    except OSError:
        return []
    if found is None:
        return []
    declared.unread += [f"setup.py: {what} cannot be read without running it" for what in found.unread]
    requirements = _pins(found.install_requires, path, "install_requires", declared)
    optional = [_pins(items, path, f'extra "{name}"', declared) for name, items in found.extras_require.items()]
    return combine(requirements, optional, [])


def _setup_cfg(path: Path, declared: Declared) -> list[Alternative]:
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(read_file(path).decode("utf-8", errors="replace"), str(path))
    except (configparser.Error, OSError):
        declared.unread.append("setup.cfg: cannot be read")
        return []

    def lines(value: str) -> list[str]:
        return [text for line in value.splitlines() if (text := _COMMENT.sub("", line).strip())]

    requirements: list[Pin] = []
    if parser.has_option("options", "install_requires"):
        requirements = _pins(lines(parser.get("options", "install_requires")), path, "install_requires", declared)
    optional = []
    if parser.has_section("options.extras_require"):
        for name, value in parser.items("options.extras_require"):
            optional.append(_pins(lines(value), path, f'extra "{name}"', declared))
    return combine(requirements, optional, [])


# -- requirement files -------------------------------------------------------------------------------


def _requirement_files(root: Path) -> list[Path]:
    found = sorted(root.glob("requirements*.txt"))
    folder = root / "requirements"
    if folder.is_dir():
        found += sorted(folder.rglob("*.txt"))
    below = _entries(root) if marks_project(root) else []  # a loose folder's subfolders: projects of their own
    for entry in sorted(below, key=lambda entry: entry.name):
        if (
            entry.is_dir(follow_symlinks=False)
            and not entry.name.startswith(".")
            and entry.name not in _SKIPPED_FOLDERS
            and entry.name != "requirements"
        ):
            names = {inner.name for inner in _entries(entry.path)}
            if not holds_project(names):
                found += sorted(Path(entry.path, name) for name in names if fnmatch(name, "requirements*.txt"))
    return [path for path in found if path.is_file()]


def _entries(folder: str | Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except OSError:
        return []


_OPTION = re.compile(r"(-[rc]|--requirement|--constraint|-e|--editable)(?:\s*=\s*|\s+|(?<=-[rc])(?=\S))(\S.*)$")
_PER_REQUIREMENT_OPTION = re.compile(r"\s+--?[A-Za-z].*$")
_COMMENT = re.compile(r"(^|\s)#.*$")


class _RequirementFiles:
    """Reads requirement files as pip does (`-r`, `-c`, `-e`, comments, continued lines), remembering
    which files another one included."""

    def __init__(self, declared: Declared) -> None:
        self.declared = declared
        self.included: set[Path] = set()

    def read(
        self, path: Path, where: str = "", narrows: bool = False, chain: tuple[Path, ...] = ()
    ) -> tuple[list[Pin], list[Pin]]:
        """The requirements and the constraints `path` declares, its includes' too."""
        real = path.resolve()
        if real in chain:
            return [], []
        try:
            text = read_file(path).decode("utf-8", errors="replace")
        except OSError:
            self.declared.unread.append(f"{path.name}: cannot be read")
            return [], []
        requirements: list[Pin] = []
        constraints: list[Pin] = []
        for line in _logical_lines(text):
            option = _OPTION.match(line)
            if option is None:
                if line.startswith("-"):
                    continue  # --index-url and the like
                pin = engine_pin(_PER_REQUIREMENT_OPTION.sub("", line), path, where, narrows, self.declared.name)
                if pin is not None:
                    (constraints if narrows else requirements).append(pin)
                continue
            flag, value = option.groups()
            if flag in ("-e", "--editable"):
                name = self.declared.name
                pin = _unparsed_pin(value, path, where, narrows, name) if name in value.lower() else None
                if pin is not None:
                    requirements.append(pin)
                continue
            included = path.parent / value.strip()
            self.included.add(included.resolve())
            more, limits = self.read(included, where, narrows or flag in ("-c", "--constraint"), (*chain, real))
            requirements += more
            constraints += limits
        return requirements, constraints


def _logical_lines(text: str) -> Iterable[str]:
    pending = ""
    for raw in text.splitlines():
        line = _COMMENT.sub("", raw).rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = (pending + line).strip()
        pending = ""
        if line:
            yield line
    if pending.strip():
        yield pending.strip()
