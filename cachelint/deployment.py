"""The releases of an engine (vllm, sglang) a project deploys, read statically from the files that build
or start it: one small reader per kind of file.

- Dockerfiles and Containerfiles (`Dockerfile`, `Dockerfile.*`, `*.Dockerfile`, `Containerfile*`):
  `FROM` an engine's image (`vllm/vllm-openai:v0.10.1`, `lmsysorg/sglang:v0.5.15.post1-cu126`, or a
  tag naming the engine's release, `verlai/verl:app-vllm0.9.1-mcore0.12`), `ARG` / `ENV` variables
  that name the engine's version (`VLLM_VERSION=0.23.0`, `SGLANG_IMAGE_TAG=v0.5.15.post1`), and the
  exact requirements that `pip install` / `uv pip install` in a `RUN` installs (`vllm==0.10.1`), with
  `${VAR}` taken from the `ARG` / `ENV` defaults above it (and the version variables a `RUN` sets);
- shell scripts (`*.sh`): the same variables, images and installs, line by line;
- compose files and CI workflows (`*.yml`, `*.yaml`): `image:` / `container:` values, variables
  set under `env:` / `environment:` and the installs in `run:` commands.

Only an exact release counts (`==`, an image tag, a variable's value): a deployment builds one release,
and `pip install vllm` or `vllm>=0.8` names none. A Dockerfile of another image that installs neither
engine says nothing. Files are looked for in the project's root, in its `.github/workflows/`, and in
the folders that hold deployment files by convention (DEPLOYMENT_FOLDERS) to two levels below the root.
Requirement files (`requirements/*.txt`, `docker/requirements*.txt`) are pins, read by pins.py.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from cachelint.pins import engine_pin
from cachelint.source import read_file
from cachelint.vllm_range import holds_project

# Folders below the root searched for deployment files (with their own subfolders).
DEPLOYMENT_FOLDERS = frozenset(
    {"docker", "dockerfiles", "docker-images", "container", "containers", "deploy", "deployment", "scripts", "ci"}
)
_SKIPPED_FOLDERS = frozenset({"node_modules", "site-packages", "venv", "build", "dist", "__pycache__"})
_LARGEST_FILE = 1_000_000  # bytes: a deployment file is small; a bigger one is not read
# The spellings of each engine in variable names and image tags.
_ENGINE_WORDS = {"vllm": ("VLLM",), "sglang": ("SGLANG", "SGL")}
_IMAGE_NAMES = {"vllm": ("vllm-openai", "vllm", "vllm-tpu", "vllm-cpu"), "sglang": ("sglang",)}


@dataclass(frozen=True)
class Deployed:
    """A release of the engine that a deployment file names."""

    file: Path  # absolute
    line: int  # 1-based
    text: str  # the line, as written (stripped)
    version: Version


def read_deployed(root: Path, name: str = "vllm") -> list[Deployed]:
    """Every release of the engine `name` that the deployment files of the project at `root` name, in
    the order of the files (sorted by path) and their lines."""
    found: list[Deployed] = []
    for path in deployment_files(Path(os.path.abspath(root))):
        try:
            raw = read_file(path)
        except OSError:
            continue
        if len(raw) > _LARGEST_FILE or name.encode() not in raw.lower():
            continue
        text = raw.decode("utf-8", errors="replace")
        reader = _READERS[_kind(path)]
        found += (
            Deployed(path, line, " ".join(written.split()), version) for line, written, version in reader(text, name)
        )
    return found


def deployment_files(root: Path) -> list[Path]:
    """The files of the kinds above at `root`, in `.github/workflows/`, and in DEPLOYMENT_FOLDERS up to
    two levels below the root, not in a folder that holds a project of its own."""
    found = [path for path in _entries(root) if _kind(path)]
    workflows = root / ".github" / "workflows"
    found += (path for path in _entries(workflows) if path.suffix in (".yml", ".yaml"))
    for folder in _entries(root):
        if folder.name in DEPLOYMENT_FOLDERS and folder.is_dir():
            for below in (folder, *(path for path in _entries(folder) if path.is_dir())):
                if below.name in _SKIPPED_FOLDERS or holds_project({path.name for path in _entries(below)}):
                    continue
                found += (path for path in _entries(below) if _kind(path))
    return sorted(path for path in dict.fromkeys(found) if path.is_file())


def _entries(folder: Path) -> list[Path]:
    try:
        with os.scandir(folder) as entries:
            return [Path(entry.path) for entry in entries if not entry.is_symlink()]
    except OSError:
        return []


def _kind(path: Path) -> str:
    """ "dockerfile", "shell", "yaml", or "" for a file of no deployment kind."""
    lower = path.name.lower()
    if lower.startswith(("dockerfile", "containerfile")) or lower.endswith((".dockerfile", ".containerfile")):
        return "dockerfile"
    if lower.endswith(".sh"):
        return "shell"
    if lower.endswith((".yml", ".yaml")):
        return "yaml"
    return ""


# -- what a line names -------------------------------------------------------------------------------

Found = tuple[int, str, Version]  # line, text, release


def _is_version_variable(variable: str, name: str) -> bool:
    """`VLLM_VERSION`, `SGLANG_IMAGE_TAG`, `SGL_VERSION`: a variable naming the engine and its version."""
    upper = variable.upper()
    parts = re.split(r"[^A-Z0-9]+", upper)
    return any(word in parts for word in _ENGINE_WORDS[name]) and ("VERSION" in parts or "TAG" in parts)


def release_in(text: str) -> Version | None:
    """The release a version or image tag names: `0.23.0`, `v0.10.1`, `v0.5.15.post1-cu126`."""
    candidate = text.strip().rstrip(";,)").strip("\"'").removeprefix("v").split("-", 1)[0]
    if not candidate[:1].isdigit() or "." not in candidate:
        return None
    try:
        return Version(candidate)
    except InvalidVersion:
        return None


def image_release(image: str, name: str) -> Version | None:
    """The release of the engine an image reference names: its tag when the image is the engine's own
    (`vllm/vllm-openai:v0.10.1`), else a part of the tag that names the engine and its release
    (`app-verl0.5-vllm0.9.1-mcore0.12`, `rocm6.3_vllm_0.8.5_20250521`)."""
    reference = image.strip().strip("\"'").split("@", 1)[0]
    repository, _, tag = reference.rpartition(":")
    if not repository or "/" in tag:
        return None
    if repository.rsplit("/", 1)[-1].lower() in _IMAGE_NAMES[name] and (release := release_in(tag)):
        return release
    parts = re.split(r"[-_]", tag)
    for index, part in enumerate(parts):
        if part.lower().startswith(name):
            rest = part[len(name) :] or (parts[index + 1] if index + 1 < len(parts) else "")
            if release := release_in(rest):
                return release
    return None


def _substitute(text: str, variables: dict[str, str]) -> str:
    """`${VAR}`, `${VAR:-default}` and `$VAR` replaced by their values where known."""

    def value(match: re.Match[str]) -> str:
        variable = match.group(1) or match.group(3)
        default = match.group(2)
        return variables.get(variable, default if default is not None else match.group(0))

    return _VARIABLE_USE.sub(value, text)


_VARIABLE_USE = re.compile(r"\$\{([A-Za-z_]\w*)(?::?-([^}]*))?\}|\$([A-Za-z_]\w*)")
_ASSIGNMENT = re.compile(r"(?:export\s+|ARG\s+|ENV\s+)?([A-Za-z_]\w*)(?:=|\s*:\s+)(\S+)")


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command, comments=True)
    except ValueError:  # an unclosed quote (a line of a longer command)
        return command.split()


def _installed(words: list[str], name: str) -> Iterator[Version]:
    """The exact releases of the engine that the `pip install` commands among `words` install (`pip`,
    `pip3`, `python -m pip`, `uv pip`)."""
    installing = False
    for index, word in enumerate(words):
        if word == "install" and index and words[index - 1] in ("pip", "pip3"):
            installing = True
        elif word in _SEPARATORS:
            installing = False
        elif installing and not word.startswith("-") and name in word.lower():
            pin = engine_pin(word.rstrip(";"), Path(), "", name=name)
            exact = (
                [clause for clause in pin.specifier if clause.operator in ("==", "===")]
                if pin and pin.specifier
                else []
            )
            if len(exact) == 1 and (release := release_in(exact[0].version)):
                yield release


_SEPARATORS = frozenset({"&&", "||", ";", "|"})


def _line_releases(line: str, name: str, variables: dict[str, str]) -> Iterator[Version]:
    """What one logical line of a script names: a version variable set, an image, an install."""
    for match in _ASSIGNMENT.finditer(line):
        if _is_version_variable(match.group(1), name):
            release = release_in(_substitute(match.group(2), variables))
            if release is not None:
                yield release
    words = _words(_substitute(line, variables))
    for word in words:
        if ":" in word and "/" in word and (release := image_release(word, name)):
            yield release
    yield from _installed(words, name)


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Lines joined across a trailing backslash, each with the number of its first line."""
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        yield start, (pending + line).strip()
        pending = ""
    if pending.strip():
        yield start, pending.strip()


def _note_variables(line: str, variables: dict[str, str]) -> None:
    for match in _ASSIGNMENT.finditer(line):
        variables[match.group(1)] = _substitute(match.group(2), variables).strip("\"'")


# -- the readers -------------------------------------------------------------------------------------


def read_dockerfile(text: str, name: str) -> Iterator[Found]:
    """`FROM` images, version `ARG` / `ENV` values, and what `RUN` installs, `${VAR}` substituted."""
    variables: dict[str, str] = {}
    for number, line in _logical_lines(text):
        instruction, _, rest = line.partition(" ")
        keyword = instruction.upper()
        if keyword in ("ARG", "ENV"):
            assignments = rest if "=" in rest else rest.strip().replace(" ", "=", 1)  # `ENV KEY value`
            releases: Iterable[Version] = list(_line_releases(assignments, name, variables))
            _note_variables(assignments, variables)
        elif keyword == "FROM":
            image = next((word for word in rest.split() if not word.startswith("--")), "")
            image = _substitute(image, variables)
            releases = [release] if (release := image_release(image, name)) else []
        elif keyword == "RUN":  # a shell command: its version variables, images and installs
            releases = list(_line_releases(rest, name, variables))
            _note_variables(rest, variables)
        else:
            continue
        yield from ((number, line, release) for release in releases)


def read_shell(text: str, name: str) -> Iterator[Found]:
    """Version variables set, images named and installs, line by line (variables kept as set)."""
    variables: dict[str, str] = {}
    for number, line in _logical_lines(text):
        if line.startswith("#"):
            continue
        yield from ((number, line, release) for release in _line_releases(line, name, variables))
        _note_variables(line, variables)


def read_yaml(text: str, name: str) -> Iterator[Found]:
    """Compose files and CI workflows: `image:` / `container:` values, version variables under `env:`
    or `environment:` (`VLLM_VERSION: 0.10.1`, `- SGLANG_IMAGE_TAG=v0.5.15`) and the installs in
    commands, line by line (a `run: |` block's lines are read as the shell lines they are)."""
    variables: dict[str, str] = {}
    for number, raw in _logical_lines(text):
        line = raw.removeprefix("- ").strip()
        if not line or line.startswith("#"):
            continue
        key, colon, value = line.partition(":")
        if colon and key.strip().lower() in ("image", "container") and value.strip():
            release = image_release(value.split("#", 1)[0], name)
            if release is not None:
                yield number, raw, release
            continue
        if colon and key.strip().lower() == "run":
            line = value
        yield from ((number, raw, release) for release in _line_releases(line, name, variables))
        _note_variables(line, variables)


_READERS = {"dockerfile": read_dockerfile, "shell": read_shell, "yaml": read_yaml}
