"""The vLLM releases a project supports, read statically from its dependency pins."""

from __future__ import annotations

import ast
import configparser
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from cachelint.facts import load_facts
from cachelint.source import read_file
from cachelint.toml import load_toml


@dataclass(frozen=True)
class SupportedRange:
    """The known vLLM releases a project may run on, and where that came from."""

    releases: tuple[Version, ...]
    source: str

    @property
    def oldest(self) -> Version:
        return self.releases[0]

    @property
    def newest(self) -> Version:
        return self.releases[-1]

    def includes_before(self, version: Version) -> bool:
        return bool(self.releases) and self.oldest < version

    def includes_from(self, version: Version) -> bool:
        return bool(self.releases) and self.newest >= version

    def all_from(self, version: Version) -> bool:
        return bool(self.releases) and self.oldest >= version

    def intersects(self, low: Version, high: Version) -> bool:
        """Whether any supported release lies in [low, high)."""
        return any(low <= release < high for release in self.releases)

    def describe(self) -> str:
        if not self.releases:
            return f"no known vLLM release, {self.source}"
        return f"vLLM {self.oldest} to {self.newest}, {self.source}"


def every_release() -> SupportedRange:
    return SupportedRange(load_facts().releases, "every release in the facts table")


def from_specifier(spec: str, source: str) -> SupportedRange:
    """A range from a specifier such as ">=0.18" or "==0.24.0"; raises ValueError when invalid."""
    text = spec.strip()
    if text and text[0].isdigit():
        text = f"=={text}"
    try:
        specifier = SpecifierSet(text)
    except InvalidSpecifier as error:
        raise ValueError(f"invalid vLLM version specifier {spec!r}") from error
    return _from_specifiers([specifier], source)


def _from_specifiers(specifiers: list[SpecifierSet], source: str) -> SupportedRange:
    releases = tuple(
        release
        for release in load_facts().releases
        if any(specifier.contains(release, prereleases=True) for specifier in specifiers)
    )
    return SupportedRange(releases, source)


_REQUIREMENT_FILES = ("requirements*.txt", "requirements/*.txt")
_PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


def find_project_root(start: Path) -> Path:
    """The nearest folder at or above `start` that holds a project marker, else `start`'s folder."""
    here = Path(os.path.abspath(start))  # as named: a symbolic link's target is in another project
    if not here.is_dir():
        here = here.parent
    for folder in (here, *here.parents):
        if any((folder / marker).exists() for marker in _PROJECT_MARKERS):
            return folder
        if any(folder.glob("requirements*.txt")):
            return folder
    return here


def read_supported_range(root: Path) -> SupportedRange:
    """The union of every vllm requirement the project at `root` declares, or every release."""
    specifiers: list[SpecifierSet] = []
    sources: list[str] = []
    for source, requirement_text in _declared_requirements(root):
        specifier = _vllm_specifier(requirement_text)
        if specifier is not None:
            specifiers.append(specifier)
            if source not in sources:
                sources.append(source)
    if not specifiers:
        return every_release()
    return _from_specifiers(specifiers, "pinned in " + ", ".join(sources))


def _vllm_specifier(text: str) -> SpecifierSet | None:
    if "vllm" not in text.lower():
        return None
    from packaging.requirements import InvalidRequirement, Requirement  # slow to import: only when needed

    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return None
    if requirement.name.lower().replace("_", "-") != "vllm":
        return None
    return requirement.specifier


def _declared_requirements(root: Path) -> Iterable[tuple[str, str]]:
    yield from _pyproject_requirements(root / "pyproject.toml")
    yield from _setup_py_requirements(root / "setup.py")
    yield from _setup_cfg_requirements(root / "setup.cfg")
    for pattern in _REQUIREMENT_FILES:
        for path in sorted(root.glob(pattern)):
            yield from _requirements_txt(path, root)


def _pyproject_requirements(path: Path) -> Iterable[tuple[str, str]]:
    if not path.is_file():
        return
    try:
        data = load_toml(path)
    except ValueError:
        return
    project = data.get("project", {})
    if not isinstance(project, dict):
        return
    for item in project.get("dependencies", []) or []:
        yield path.name, str(item)
    extras = project.get("optional-dependencies", {}) or {}
    if isinstance(extras, dict):
        for items in extras.values():
            for item in items or []:
                yield path.name, str(item)


def _setup_py_requirements(path: Path) -> Iterable[tuple[str, str]]:
    """Literal install_requires / extras_require of a setup() call; nothing is executed."""
    if not path.is_file():
        return
    try:
        tree = ast.parse(path.read_bytes())
    except (SyntaxError, ValueError, OSError):
        return
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        for keyword in node.keywords:
            if keyword.arg not in ("install_requires", "extras_require"):
                continue
            for constant in ast.walk(keyword.value):
                if isinstance(constant, ast.Constant) and isinstance(constant.value, str):
                    yield path.name, constant.value


def _setup_cfg_requirements(path: Path) -> Iterable[tuple[str, str]]:
    if not path.is_file():
        return
    parser = configparser.ConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError, OSError):
        return
    values: list[str] = []
    if parser.has_option("options", "install_requires"):
        values.append(parser.get("options", "install_requires"))
    if parser.has_section("options.extras_require"):
        values.extend(value for _, value in parser.items("options.extras_require"))
    for value in values:
        for line in value.splitlines():
            if line.strip():
                yield path.name, line.strip()


_COMMENT = re.compile(r"\s+#.*$")


def _requirements_txt(path: Path, root: Path) -> Iterable[tuple[str, str]]:
    try:
        lines = read_file(path).decode("utf-8", errors="replace").splitlines()
    except OSError:
        return
    for line in lines:
        text = _COMMENT.sub("", line).strip()
        if text and not text.startswith(("#", "-")):
            yield path.relative_to(root).as_posix(), text
