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
  (constraints) includes, each file once however often or circularly it is included; a file another
  one includes is not read on its own (of files that include each other, the first is).

How they combine: requirements in one list all hold, except that requirements with an environment
marker are alternatives (markers are not evaluated): a list gives one alternative per marked
requirement, each with the list's unmarked ones, or one alternative of its unmarked ones. Extras and
dependency groups are installed on top of the dependencies: they count only when the dependencies do
not require the engine. Overrides (uv) replace a file's requirements; constraints (uv, `-c`) narrow them.
Each file is an alternative to the others. A direct reference takes its version from the wheel or
sdist file name (PEP 427, PEP 625); a local version label (`==0.19.0+cu121`, a wheel's `+cu126`) names a
build of the release, which is that release. A requirement whose version cannot be told (a git URL, a
local folder, a version of thousands of digits) allows every release and is reported as such. The
reading is bounded (`_MAX_DEPTH`, `_MAX_VISITS`, `_MAX_PINS`); what is left out is reported.
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
from cachelint.vllm_range import holds_project, marks_project, readable_versions, shortened

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

# Folders never searched for requirement files (as discovery never walks them).
_SKIPPED_FOLDERS = frozenset(
    {"node_modules", "site-packages", "venv", "build", "dist", "__pycache__", "__pypackages__"}
)

# Bounds on reading the requirement files of a project, whatever they hold.
_MAX_DEPTH = 100  # files within files, along one chain of includes
_MAX_VISITS = 100_000  # files entered, over every walk of a project's requirement files
_MAX_PINS = 200  # lines naming the distribution in one file or list


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
    read = {path.resolve(): requirement_files.read_alone(path) for path in _requirement_files(root)}
    for real in requirement_files.alone(list(read)):
        requirements, constraints = read[real]
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
    specifier: SpecifierSet | None = _without_local_labels(requirement.specifier)
    if requirement.url:
        specifier = _archive_specifier(requirement.url, name)
    return Pin(file, shortened(text), where, specifier, requirement.marker is not None, narrows)


def _without_local_labels(specifier: SpecifierSet) -> SpecifierSet | None:
    """`specifier` with `==0.19.0+cu121` read as `==0.19.0`: a local label names a build of the release
    (CUDA, ROCm), which behaves as the release does. None when a version in it cannot be read (5,000
    digits): the releases it allows cannot be told."""
    from packaging.specifiers import SpecifierSet

    if not readable_versions(specifier):
        return None
    if not any(clause.operator == "==" and "+" in clause.version for clause in specifier):
        return specifier
    clauses = [
        f"=={clause.version.split('+', 1)[0]}" if clause.operator == "==" else str(clause) for clause in specifier
    ]
    return SpecifierSet(",".join(clauses))


def _unparsed_pin(text: str, file: Path, where: str, narrows: bool, name: str) -> Pin | None:
    """A line pip takes that is no PEP 508 requirement: a URL or path to a wheel or sdist, or a
    requirement written in a way that cannot be read (`vllm==${VERSION}`)."""
    from packaging.utils import canonicalize_name

    location = text.split(";", 1)[0].strip()
    parts = urlsplit(location)
    if _ARCHIVE.search(parts.path or location):
        specifier = _archive_specifier(location, name)
        return None if specifier is None else Pin(file, shortened(text), where, specifier, ";" in text, narrows)
    egg = re.search(r"(?:^|&)egg=([^&]+)", parts.fragment)
    folder = parts.path.rstrip("/").rsplit("/", 1)[-1].split("@", 1)[0]
    match = _NAME.match(text)
    names = [egg.group(1) if egg else "", folder, match.group(1) if match else ""]
    if not any(found and canonicalize_name(found) == name for found in names):
        return None
    return Pin(file, shortened(text), where, None, False, narrows)


def _archive_specifier(url: str, name: str) -> SpecifierSet | None:
    """`==VERSION` from a wheel or sdist file name, when it is `name`'s (its release: the local label of
    `vllm-0.10.1.1+cu126-....whl` names a build); None when it cannot be told."""
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
    except (InvalidWheelFilename, InvalidSdistFilename, ValueError):  # ValueError: 5,000 digits
        return None
    return SpecifierSet(f"=={version.public}") if canonicalize_name(project) == name else None


def _pins(items: Any, file: Path, where: str, declared: Declared, narrows: bool = False) -> list[Pin]:
    if not isinstance(items, list):
        if items is not None:
            declared.unread.append(f"{file.name}: {where} is not a list")
        return []
    name = declared.name
    texts = list(dict.fromkeys(item for item in items if isinstance(item, str) and name in item.lower()))
    if len(texts) > _MAX_PINS:
        declared.unread.append(f"{file.name}: only the first {_MAX_PINS} {name} requirements of {where} are read")
    return [pin for text in texts[:_MAX_PINS] if (pin := engine_pin(text, file, where, narrows, name))]


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
        optional.append(_pins(_group(groups, name, set()), path, f'group "{name}"', declared))
    optional.append(_pins(uv.get("dev-dependencies"), path, "[tool.uv] dev-dependencies", declared))
    constraints = _pins(uv.get("constraint-dependencies"), path, "[tool.uv] constraint-dependencies", declared, True)
    overrides = _pins(uv.get("override-dependencies"), path, "[tool.uv] override-dependencies", declared)
    return combine(requirements, optional, constraints, overrides)


def _table(data: Any, key: str) -> dict[str, Any]:
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, dict) else {}


def _group(groups: dict[str, Any], name: str, seen: set[str]) -> list[str]:
    """The requirements of dependency group `name`, its included groups' too (PEP 735), each group once
    (`seen`: those already taken); a cycle or a missing group adds nothing."""
    from packaging.utils import canonicalize_name

    wanted = canonicalize_name(name)
    if wanted in seen:
        return []
    seen.add(wanted)
    items = next((value for key, value in groups.items() if canonicalize_name(key) == wanted), None)
    if not isinstance(items, list):
        return []
    found: list[str] = []
    for item in items:
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict) and isinstance(item.get("include-group"), str):
            found += _group(groups, item["include-group"], seen)
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


_Entry = tuple[bool, Pin] | tuple[Path, bool]  # (a constraint, the pin) | (an included file, it constrains)


class _RequirementFiles:
    """Reads requirement files as pip does (`-r`, `-c`, `-e`, comments, continued lines), each file once
    per walk however often (or circularly) it is included, remembering which files others include."""

    def __init__(self, declared: Declared) -> None:
        self.declared = declared
        self.included: set[Path] = set()  # included by the requirement files a project file names
        self.reached: dict[Path, set[Path]] = {}  # by file read alone: the files it includes, nested too
        self._entries: dict[tuple[Path, str, bool], list[_Entry]] = {}
        self._visits = 0

    def read(self, path: Path, where: str = "", narrows: bool = False) -> tuple[list[Pin], list[Pin]]:
        """The requirements and the constraints `path` (named by a project file) declares, its includes'
        too."""
        requirements, constraints, reached = self._read(path, where, narrows)
        self.included |= reached
        return requirements, constraints

    def read_alone(self, path: Path) -> tuple[list[Pin], list[Pin]]:
        """`read` for a requirement file found in the project."""
        requirements, constraints, reached = self._read(path, "", False)
        self.reached[path.resolve()] = reached
        return requirements, constraints

    def alone(self, files: list[Path]) -> list[Path]:
        """Of `files` (resolved, each read alone, in order) those that are an alternative of their own:
        not included by another one or by a project file's; of files that include each other, the
        first."""
        order = {real: index for index, real in enumerate(files)}
        reachers: dict[Path, list[Path]] = {}
        for other in files:
            for real in self.reached[other]:
                reachers.setdefault(real, []).append(other)
        return [
            real
            for real in files
            if real not in self.included
            and all(other in self.reached[real] and order[real] < order[other] for other in reachers.get(real, ()))
        ]

    def _read(self, path: Path, where: str, narrows: bool) -> tuple[list[Pin], list[Pin], set[Path]]:
        requirements: list[Pin] = []
        constraints: list[Pin] = []
        seen: set[tuple[Path, bool]] = set()
        self._walk(path, where, narrows, seen, (requirements, constraints), 0)
        real = path.resolve()
        return requirements, constraints, {file for file, _ in seen if file != real}

    def _walk(
        self,
        path: Path,
        where: str,
        narrows: bool,
        seen: set[tuple[Path, bool]],
        found: tuple[list[Pin], list[Pin]],
        depth: int,
    ) -> None:
        real = path.resolve()
        if (real, narrows) in seen:
            return
        if depth > _MAX_DEPTH or self._visits >= _MAX_VISITS:
            why = f"included more than {_MAX_DEPTH} files deep" if depth > _MAX_DEPTH else "past too many includes"
            note = f"{path.name}: not read, {why}"
            if note not in self.declared.unread:
                self.declared.unread.append(note)
            return
        seen.add((real, narrows))
        self._visits += 1
        for entry in self._file_entries(path, real, where, narrows):
            if isinstance(entry[0], bool):
                found[entry[0]].append(entry[1])  # into the constraints when it is one
            else:
                self._walk(entry[0], where, entry[1], seen, found, depth + 1)

    def _file_entries(self, path: Path, real: Path, where: str, narrows: bool) -> list[_Entry]:
        """The pins and the includes of one file, in order (read once)."""
        key = (real, where, narrows)
        if key in self._entries:
            return self._entries[key]
        entries: list[_Entry] = []
        self._entries[key] = entries
        try:
            text = read_file(path).decode("utf-8", errors="replace")
        except OSError:
            self.declared.unread.append(f"{path.name}: cannot be read")
            return entries
        name = self.declared.name
        requirements: set[str] = set()
        for line in _logical_lines(text):
            option = _OPTION.match(line)
            if option is None:
                if line.startswith("-") or name not in line.lower() or line in requirements:
                    continue  # --index-url and the like, another distribution, a repeated requirement
                if len(requirements) == _MAX_PINS:
                    self.declared.unread.append(f"{path.name}: only its first {_MAX_PINS} {name} requirements are read")
                    break
                requirements.add(line)
                pin = engine_pin(_PER_REQUIREMENT_OPTION.sub("", line), path, where, narrows, name)
                if pin is not None:
                    entries.append((narrows, pin))
                continue
            flag, value = option.groups()
            if flag in ("-e", "--editable"):
                pin = _unparsed_pin(value, path, where, narrows, name) if name in value.lower() else None
                if pin is not None:
                    entries.append((False, pin))
                continue
            entries.append((path.parent / value.strip(), narrows or flag in ("-c", "--constraint")))
        return entries


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
