"""The releases of an engine (vLLM, SGLang) a project supports: from `vllm =` / `--vllm` (`sglang =` /
`--sglang`), else read statically from the project: the union of its pins (pins.py says which files
count and how they combine), the releases its deployment files name (deployment.py) and, once its
files are summarized, the releases its own version tests name beyond those (`widen_by_code`); else
every release the facts know. The same code serves each distribution (`Distribution`)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from cachelint.facts import load_facts, load_sglang_facts

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

    from cachelint.deployment import Deployed
    from cachelint.facts import Facts
    from cachelint.pins import Alternative, Pin


class EmptyRangeError(ValueError):
    """A range that holds no release the facts know, nor any newer one: nothing could be checked.
    `source` says where the range was read (`requirements.txt`, `--sglang`)."""

    def __init__(self, message: str, source: str) -> None:
        super().__init__(message)
        self.source = source


@dataclass(frozen=True)
class Distribution:
    """An engine whose supported releases are read: its requirement name (also the setting and flag that
    set the range), how people write it, and its facts."""

    name: str
    label: str

    def facts(self) -> Facts:
        return load_facts() if self.name == "vllm" else load_sglang_facts()


VLLM = Distribution("vllm", "vLLM")
SGLANG = Distribution("sglang", "SGLang")


def known_releases(dist: Distribution = VLLM) -> tuple[Version, ...]:
    """The releases the shipped facts cover, oldest first."""
    return dist.facts().releases


def newest_known_release(dist: Distribution = VLLM) -> Version:
    """The newest release the facts cover (scripts/vllm_facts.py keeps it current)."""
    return known_releases(dist)[-1]


@dataclass(frozen=True)
class Evidence:
    """Releases a project runs on that a source other than its pins names: a deployment file, or the
    code's own version tests."""

    kind: str  # "deployment", "code"
    words: str  # for the summary: `docker/Dockerfile.stable.vllm 0.23.0`, `the code's gates up to 0.22.0`
    releases: tuple[Version, ...]  # the known releases it names (a deployment) or reaches (the code)
    added: tuple[Version, ...]  # those the range would not hold without it
    lines: tuple[str, ...]  # where: `docker/Dockerfile.stable.vllm:2: ARG VLLM_VERSION=0.23.0`

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "source": self.words,
            "releases": [str(release) for release in self.releases],
            "added": [str(release) for release in self.added],
            "where": list(self.lines),
        }


@dataclass(frozen=True)
class SupportedRange:
    """The known releases of an engine a project may run on, and where that came from."""

    releases: tuple[Version, ...]
    source: str  # for people: 'setup.py, extra "vllm"', '--vllm ">=0.18"', ...
    pins: tuple[Pin, ...] = ()  # the requirements it was read from
    assumed: bool = False  # nothing said which releases: every known one is assumed
    beyond_known: bool = False  # it allows releases newer than the newest the facts know
    newer_only: bool = False  # it allows only those: the newest known release stands in for them
    # The project says which release is the oldest it runs on (a lower bound or an exact release); not
    # when the range is assumed or its requirements bound it only from above, or not at all.
    floor_declared: bool = True
    notes: tuple[str, ...] = ()  # what could not be read, and where the sources disagree: the warnings
    dist: Distribution = VLLM
    # Read from the project's files (pins, deployment), not set: the code's version tests may widen it.
    widenable: bool = False
    pinned: str = ""  # the releases the pins alone allow (`0.8.5-0.12.0`); "" without pins
    base: tuple[Version, ...] = ()  # the releases the pins allow, else those the deployment names
    evidence: tuple[Evidence, ...] = ()  # the sources beside the pins, each with what it added
    pins_source: str = ""  # the pins' own description (`source` adds what widened them)

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

    def label(self, dash: str = "\N{EN DASH}") -> str:
        """`0.18.0-0.33.0` (with an en dash by default); runs of known releases apart when the range
        has gaps (`0.17.0-0.18.1, 0.24.0`)."""
        return label_releases(self.releases, self.dist, dash)

    def describe(self) -> str:
        """The range as rule messages name it: `vLLM 0.16.0-0.21.0`."""
        return f"{self.dist.label} {self.label('-')}"

    def share(self, releases: list[Version]) -> str:
        """How `releases` stand within the range, for rule messages: `every supported release`, or
        `of the supported 0.16.0-0.21.0`."""
        if tuple(releases) == self.releases:
            return "every supported release"
        return f"of the supported {self.label('-')}"

    def summary(self) -> str:
        """The summary line's words: `vLLM 0.18.0-0.33.0 (setup.py, extra "vllm")`, with an en dash."""
        if not self.releases:
            return f"no {self.dist.label} release ({self.source}: its pins match none cachelint knows)"
        if self.newer_only:
            return f"{self.dist.label} {self.label()} (standing in for the newer releases of {self.source})"
        return f"{self.dist.label} {self.label()} ({self.source})"

    @property
    def newer(self) -> str:
        """What became of the releases newer than the newest the facts know: "excluded" (the range
        allows none), "unchecked" (it allows some beside known ones, which were checked) or
        "standing-in" (it allows only those: the newest known release was checked in their place)."""
        if self.newer_only:
            return "standing-in"
        return "unchecked" if self.beyond_known else "excluded"

    def to_json(self) -> dict[str, Any]:
        return {
            "range": self.label(),
            "releases": [str(release) for release in self.releases],
            "source": self.source,
            "newer": self.newer,
            "pins": [
                {"file": shown_path(pin.file), "requirement": pin.requirement, "where": pin.where} for pin in self.pins
            ],
            "evidence": [evidence.to_json() for evidence in self.evidence],
        }

    def warnings(self, project: Path) -> list[str]:
        """What the user should know about how the range was found (one line each)."""
        dist = self.dist
        every = _known_label(dist)
        if self.assumed:
            why = f" ({'; '.join(self.notes)})" if self.notes else ""
            return [
                f"no {dist.label} pin found{_in_project(project)}{why}: every known release ({every}) is assumed; "
                f'set the range with `[tool.cachelint] {dist.name} = ">=..."` or `--{dist.name}`'
            ]
        found = list(self.notes)
        newest = newest_known_release(dist)
        if self.newer_only:
            found.append(
                f"the supported range ({self.source}) holds only {dist.label} releases newer than {newest}, the "
                f"newest release cachelint knows: they are checked as {newest}, and findings particular to "
                "newer releases are not known"
            )
        elif self.beyond_known:
            found.append(
                f"the supported range ({self.source}) reaches past {dist.label} {newest}, the "
                "newest release cachelint knows: findings for newer releases are not known"
            )
        return found


def label_releases(releases: Iterable[Version], dist: Distribution, dash: str = "\N{EN DASH}") -> str:
    """`0.18.0-0.33.0`; runs of known releases apart when there are gaps (`0.17.0-0.18.1, 0.24.0`)."""
    known = {release: index for index, release in enumerate(known_releases(dist))}
    runs: list[list[Version]] = []
    for release in releases:
        if runs and known.get(release, -2) == known.get(runs[-1][-1], -4) + 1:
            runs[-1].append(release)
        else:
            runs.append([release])
    return ", ".join(f"{run[0]}" if len(run) == 1 else f"{run[0]}{dash}{run[-1]}" for run in runs) or "none"


def shown_path(path: Path) -> str:
    """`path` relative to the working directory when below it, else absolute; POSIX separators."""
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return absolute.as_posix()


def _in_project(project: Path | None) -> str:
    """` in a/b` naming a project, or nothing for the working directory's."""
    shown = shown_path(project) if project is not None else "."
    return "" if shown == "." else f" in {shown}"


def every_release(project: Path | None = None, notes: Iterable[str] = (), dist: Distribution = VLLM) -> SupportedRange:
    where = _in_project(project)
    source = f"no {dist.label} pin found{where}: every known release"
    return SupportedRange(
        known_releases(dist), source, assumed=True, notes=tuple(notes), dist=dist, floor_declared=False
    )


def from_specifier(spec: str, source: str, dist: Distribution = VLLM) -> SupportedRange:
    """A range from a specifier such as ">=0.18" or "==0.24.0" (a bare version means ==). Raises
    ValueError when it is not a specifier, EmptyRangeError when it holds no known release nor a newer
    one (see `newest_standing_in`)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    text = spec.strip()
    if text and text[0].isdigit():
        text = f"=={text}"
    try:
        specifier = SpecifierSet(text)
    except InvalidSpecifier as error:
        raise ValueError(f"invalid {dist.label} version specifier {shortened(spec)!r}") from error
    if not readable_versions(specifier):
        raise ValueError(f"invalid {dist.label} version specifier {shortened(spec)!r}: a version too long to read")
    releases = _releases([specifier], dist)
    beyond = _beyond_known(specifier, dist)
    if not releases and beyond:
        return newest_standing_in(source, (), dist)
    if not releases:
        raise EmptyRangeError(
            f"{spec!r} matches no {dist.label} release cachelint knows ({_known_label(dist)})", source
        )
    return SupportedRange(releases, source, beyond_known=beyond, dist=dist, floor_declared=bounds_below(specifier))


def readable_versions(specifier: SpecifierSet) -> bool:
    """Whether every version `specifier` names can be read (not one of 5,000 digits: more than Python
    turns into a number)."""
    for clause in specifier:
        if clause.operator != "===":  # `===` compares text
            try:
                Version(clause.version.removesuffix(".*"))
            except ValueError:
                return False
    return True


def shortened(text: str, length: int = 200) -> str:
    """`text` as messages show it: cut when very long (a version of 5,000 digits)."""
    return text if len(text) <= length else text[: length - 1] + "\N{HORIZONTAL ELLIPSIS}"


def bounds_below(specifier: SpecifierSet) -> bool:
    """Whether `specifier` names an oldest release: a clause other than `<`, `<=` and `!=`."""
    return any(clause.operator not in ("<", "<=", "!=") for clause in specifier)


def newest_standing_in(source: str, pins: tuple[Pin, ...], dist: Distribution) -> SupportedRange:
    """The range of requirements that allow only releases newer than the facts know (a project on a
    release of the engine newer than this cachelint): checked as the newest known release, the
    likeliest to behave as they do, with a warning, rather than refused until cachelint is updated."""
    return SupportedRange((newest_known_release(dist),), source, pins, beyond_known=True, newer_only=True, dist=dist)


def _known_label(dist: Distribution) -> str:
    return f"{known_releases(dist)[0]}\N{EN DASH}{newest_known_release(dist)}"


def _releases(specifiers: list[SpecifierSet], dist: Distribution) -> tuple[Version, ...]:
    return tuple(
        release
        for release in known_releases(dist)
        if any(specifier.contains(release, prereleases=True) for specifier in specifiers)
    )


def _beyond_known(specifier: SpecifierSet, dist: Distribution) -> bool:
    """Whether `specifier` allows a release newer than the newest known one (the next micro, minor or
    major release, a far one, or a newer one it names: what real specifiers can allow)."""
    newest = newest_known_release(dist)
    major, minor, micro = (*newest.release, 0, 0)[:3]
    probes = [f"{major}.{minor}.{micro + 1}", f"{major}.{minor + 1}.0", f"{major + 1}.0.0", "9999"]
    for clause in specifier:
        try:
            named = Version(clause.version.removesuffix(".*"))
        except InvalidVersion:  # `===` takes any text
            continue
        if named > newest:
            probes.append(str(named))
    return any(specifier.contains(probe, prereleases=True) for probe in probes)


# -- the project and its pins ------------------------------------------------------------------------


def is_project_folder(folder: Path) -> bool:
    """Whether `folder` holds its own project: a pyproject.toml, setup.cfg, a setup.py that is not a
    module of a package (no `__init__.py` beside it), or a git repository."""
    if (folder / ".git").exists() or (folder / "pyproject.toml").is_file() or (folder / "setup.cfg").is_file():
        return True
    return (folder / "setup.py").is_file() and not (folder / "__init__.py").is_file()


def holds_project(names: AbstractSet[str]) -> bool:
    """`is_project_folder` for a folder holding the entries `names` (as a walk lists them)."""
    return bool(names & _PROJECT_NAMES) or ("setup.py" in names and "__init__.py" not in names)


_PROJECT_NAMES = frozenset({".git", "pyproject.toml", "setup.cfg"})


def is_requirements_folder(folder: Path) -> bool:
    """Whether `folder` holds a requirements*.txt."""
    return any(folder.glob("requirements*.txt"))


def holds_requirements(names: AbstractSet[str]) -> bool:
    """`is_requirements_folder` for a folder holding the entries `names` (as a walk lists them)."""
    return any(name.startswith("requirements") and name.endswith(".txt") for name in names)


def marks_project(folder: Path) -> bool:
    """Whether `folder` is a project by what it holds (a project folder, or one holding a
    requirements*.txt), rather than a loose folder: the folder of a file that no project holds."""
    return is_project_folder(folder) or is_requirements_folder(folder)


def leaves_loose_folder(names: AbstractSet[str]) -> bool:
    """Whether the walk of a loose folder leaves out a folder below it holding the entries `names`: one
    that is not a package (a folder of scripts is not another's caches and temporary files) or that
    holds a project of its own."""
    return holds_project(names) or not names & _PACKAGE_NAMES


_PACKAGE_NAMES = frozenset({"__init__.py", "__init__.pyi"})


def find_project_root(start: Path) -> Path:
    """The project holding `start`: the nearest folder at or above it that holds a pyproject.toml,
    setup.cfg or setup.py (not a package's module of that name), not looking above its git repository;
    else that repository's top; else the nearest folder holding a requirements*.txt; else `start`'s
    folder, a loose folder (see `marks_project`)."""
    here = Path(os.path.abspath(start))  # as named: a symbolic link's target is in another project
    if not here.is_dir():
        here = here.parent
    folders = (here, *here.parents)
    for folder in folders:
        if is_project_folder(folder):
            return folder
    return next((folder for folder in folders if is_requirements_folder(folder)), here)


class ProjectRoots:
    """`find_project_root` for many files, each folder looked at once (folders as named, links kept)."""

    def __init__(self) -> None:
        self._nearest: dict[Path, Path | None] = {}  # folder -> the project folder at or above it

    def of(self, path: Path) -> Path:
        """The project root of the file (or folder) `path`."""
        absolute = Path(os.path.abspath(path))
        folder = absolute if absolute.is_dir() else absolute.parent
        found = self._project_folder(folder)
        return found if found is not None else find_project_root(absolute)

    def _project_folder(self, folder: Path) -> Path | None:
        passed: list[Path] = []
        current = folder
        while current not in self._nearest:
            passed.append(current)
            if is_project_folder(current):
                found: Path | None = current
                break
            if current.parent == current:
                found = None
                break
            current = current.parent
        else:
            found = self._nearest[current]
        self._nearest.update(dict.fromkeys(passed, found))
        return found


def read_supported_range(root: Path, dist: Distribution = VLLM) -> SupportedRange:
    """The union of the releases the project at `root` declares (the alternatives of its pins) and
    deploys (the releases its deployment files name: deployment.py), or every release (`assumed`)
    when it does neither. Pins that allow only releases newer than the facts know are checked as the
    newest known release (`newest_standing_in`). Pins that allow none, known or newer (an old pin),
    leave the range to the deployment files, else the oldest known vLLM release stands in (SGLang's
    range holds none: its rules that depend on releases stay silent); a warning says so: a project's
    stale pin never stops a run."""
    from cachelint.deployment import read_deployed
    from cachelint.pins import read_declared  # only when no `vllm` setting spares reading the pins

    declared = read_declared(root, dist.name)
    pinned = _pinned_range(declared.alternatives, dist) if declared.alternatives else None
    deployed, deployed_notes, deployed_newer = _deployment_evidence(read_deployed(root, dist.name), dist)
    if pinned is None and not deployed:
        return every_release(root, [*declared.unread, *deployed_notes], dist)
    known = known_releases(dist)
    allowed = set(pinned.releases) if pinned is not None else set()
    evidence: list[Evidence] = []
    notes = [*(pinned.notes if pinned is not None else ()), *deployed_notes]
    for words, releases, lines in deployed:
        added = tuple(release for release in releases if release not in allowed)
        evidence.append(Evidence("deployment", words, releases, added, lines))
        if pinned is not None and added:
            where, text = lines[0].split(": ", 1)
            notes.append(
                f"{where} (`{text}`) names {dist.label} {label_releases(added, dist)}, which the pins exclude "
                f"({pinned.source}: {_pinned_label(pinned)}): checked for both; the pins may be stale"
            )
    allowed |= {release for _, releases, _ in deployed for release in releases}
    oldest_standing_in = not allowed  # pins that allow no release, and nothing deployed
    if oldest_standing_in and dist is SGLANG and pinned is not None:  # SGLang's rules judge no release then
        note = f'{pinned.notes[0]}; set the range with `[tool.cachelint] {dist.name} = ">=..."` or `--{dist.name}`'
        return dataclasses.replace(pinned, notes=(note,))
    if pinned is not None and not pinned.releases:
        outcome = (
            f"{known[0]}, the oldest release it knows, stands in for them, and findings particular to older "
            f'releases are not known; set the range with `[tool.cachelint] {dist.name} = ">=..."` or `--{dist.name}`'
            if oldest_standing_in
            else "the deployment files decide"
        )
        notes.append(f"{pinned.notes[0]}: {outcome}")
        notes.remove(pinned.notes[0])
    if oldest_standing_in:
        allowed = {known[0]}
    ordered = tuple(release for release in known if release in allowed)
    base = pinned.releases if pinned is not None and pinned.releases else ordered
    pins_source = pinned.source if pinned is not None else ""
    return SupportedRange(
        ordered,
        _describe_sources(pins_source, _pinned_label(pinned) if pinned else "", tuple(evidence)),
        pinned.pins if pinned is not None else (),
        beyond_known=(pinned is not None and pinned.beyond_known) or deployed_newer,
        newer_only=(pinned.newer_only if pinned is not None else deployed_newer) and len(ordered) == 1,
        floor_declared=pinned.floor_declared if pinned is not None and not oldest_standing_in else True,
        notes=tuple(dict.fromkeys(notes)),
        dist=dist,
        widenable=True,
        pinned=_pinned_label(pinned) if pinned else "",
        base=base,
        evidence=tuple(evidence),
        pins_source=pins_source,
    )


def _pinned_label(pinned: SupportedRange | None) -> str:
    if pinned is None:
        return ""
    return pinned.label("-") if pinned.releases else "no release cachelint knows"


def _describe_sources(pins_source: str, pinned: str, evidence: tuple[Evidence, ...]) -> str:
    """`setup.py, extra "vllm" 0.8.5-0.12.0; widened by docker/Dockerfile.stable.vllm 0.23.0 and the
    code's gates up to 0.22.0`: the pins, then what widened them; without pins, the deployment files."""
    widening = [item.words for item in evidence if item.added and (pins_source or item.kind == "code")]
    if pins_source:
        return f"{pins_source} {pinned}; widened by {' and '.join(widening)}" if widening else pins_source
    deployed = "; ".join(item.words for item in evidence if item.kind == "deployment")
    return f"{deployed}; widened by {' and '.join(widening)}" if widening else deployed


def _pinned_range(alternatives: list[Alternative], dist: Distribution) -> SupportedRange:
    """The releases the alternatives of the pins allow; none (with a note) when they allow no known
    release nor a newer one."""
    from packaging.specifiers import SpecifierSet

    known = known_releases(dist)
    allowed: set[Version] = set()
    contributing: list[Alternative] = []
    beyond = False
    floor_declared = True
    for alternative in alternatives:
        specifier = SpecifierSet()
        for pin in alternative:
            specifier &= pin.specifier if pin.specifier is not None else SpecifierSet()
        releases = {release for release in known if specifier.contains(release, prereleases=True)}
        beyond = beyond or _beyond_known(specifier, dist)
        if releases:
            allowed |= releases
            contributing.append(alternative)
            floor_declared = floor_declared and bounds_below(specifier)
    pins = tuple(dict.fromkeys(pin for alternative in alternatives for pin in alternative))
    if not allowed and beyond:
        return newest_standing_in(describe_pins(pins), pins, dist)
    if not allowed:
        written = ", ".join(f"`{pin.requirement}`" for pin in pins)
        note = (
            f"{describe_pins(pins)}: the {dist.label} pins ({written}) match no release cachelint knows "
            f"({_known_label(dist)})"
        )
        return SupportedRange((), describe_pins(pins), pins, notes=(note,), dist=dist, floor_declared=False)
    used = tuple(dict.fromkeys(pin for alternative in contributing for pin in alternative))
    notes = tuple(
        f"{shown_path(pin.file)}: cannot tell which {dist.label} release `{pin.requirement}` installs: "
        "every known release is assumed for it"
        for pin in used
        if pin.specifier is None
    )
    ordered = tuple(release for release in known if release in allowed)
    return SupportedRange(
        ordered, describe_pins(used), used, beyond_known=beyond, notes=notes, dist=dist, floor_declared=floor_declared
    )


def _deployment_evidence(
    found: list[Deployed], dist: Distribution
) -> tuple[list[tuple[str, tuple[Version, ...], tuple[str, ...]]], list[str], bool]:
    """Per deployment file: its words for the summary, the known releases it names and where; the
    notes on releases it names that the facts do not know; whether one is newer than they know."""
    by_file: dict[Path, list[tuple[Version, str]]] = {}
    notes: list[str] = []
    newer = False
    for item in found:
        where = f"{shown_path(item.file)}:{item.line}"
        release, note = match_release(item.version, dist)
        newer = newer or Version(item.version.public) > known_releases(dist)[-1]
        if note:
            notes.append(f"{where}: {dist.label} {item.version}: {note}")
        if release is not None:
            by_file.setdefault(item.file, []).append((release, f"{where}: {item.text}"))
    evidence = []
    for file, named in by_file.items():
        releases = tuple(release for release in known_releases(dist) if any(release == r for r, _ in named))
        lines = tuple(dict.fromkeys(line for _, line in named))
        evidence.append((f"{shown_path(file)} {label_releases(releases, dist)}", releases, lines))
    return evidence, notes, newer


def match_release(version: Version, dist: Distribution) -> tuple[Version | None, str]:
    """The known release that `version` (as a deployment names it) is: itself; without its local label
    (`0.19.0+cu121`); the newest known post-release of its release at or before it (`0.5.15.post3` is
    checked as `0.5.15.post1`); the newest known release standing in for a newer one. None for a release
    older than any known one, or one between known ones that the facts lack; the note says why."""
    known = known_releases(dist)
    public = Version(version.public)
    if public in known:
        return public, ""
    if public > known[-1]:
        return known[-1], f"newer than {known[-1]}, the newest release cachelint knows, which stands in for it"
    same = [release for release in known if release.release == public.release and release <= public]
    if same:
        return same[-1], ""
    if public < known[0]:
        return None, f"older than any release cachelint knows ({_known_label(dist)}): not counted"
    return None, "a release cachelint does not know: not counted"


def widen_by_code(supported: SupportedRange, tests: Iterable[tuple[Version, str, str]]) -> SupportedRange:
    """`supported` widened by the project's own version tests (`tests`: each release compared with, the
    operator with the installed version on its left, and where, `path:line: text`): a test of a release
    newer than the newest the pins allow (else than the deployment names) means the code runs there, as
    a test of one older than the oldest does; the known releases between are added (up to the tested
    release's patch releases: a test names the first release of a behaviour, and `0.22.1` behaves as
    `0.22.0`; from the tested release, or after it for `> 0.8.5`), with a warning. A test inside that
    range changes nothing, and nothing is ever taken out. A range set by `vllm =` / `--vllm`, a vendored
    vLLM's or an assumed one is kept."""
    if not supported.widenable or not supported.base:
        return supported
    dist = supported.dist
    low, high = supported.base[0], supported.base[-1]
    tests = list(tests)
    above = [test for test in tests if test[0] > high]
    below = [test for test in tests if test[0] < low]
    top = max(above, key=lambda test: test[0]) if above else None
    bottom = min(below, key=lambda test: (test[0], test[1] == ">")) if below else None

    def reached_by(release: Version) -> bool:
        if top is not None and high < release and release.release[:2] <= top[0].release[:2]:
            return True
        if bottom is None or release >= low:
            return False
        return release > bottom[0] if bottom[1] == ">" else release >= bottom[0]

    reached = tuple(release for release in known_releases(dist) if reached_by(release))
    added = tuple(release for release in reached if release not in supported.releases)
    if not added:
        return supported
    reach = [f"down to {bottom[0]}"] if bottom else []
    reach += [f"up to {top[0]}"] if top else []
    lines = tuple(test[2] for test in (bottom, top) if test is not None)
    evidence = Evidence("code", "the code's gates " + " and ".join(reach), reached, added, lines)
    declared = (
        f"the pins ({supported.pins_source}: {supported.pinned})"
        if supported.pins_source
        else f"the deployment files ({supported.source})"
    )
    notes = [
        f"{where} (`{text}`): the code tests {dist.label} {test[0]}, outside {declared}: "
        f"{label_releases(added, dist)} checked too; the pins may be stale"
        for test in (bottom, top)
        if test is not None
        for where, text in (test[2].split(": ", 1),)
    ]
    all_evidence = (*supported.evidence, evidence)
    releases = tuple(release for release in known_releases(dist) if release in {*supported.releases, *added})
    return dataclasses.replace(
        supported,
        releases=releases,
        source=_describe_sources(supported.pins_source, supported.pinned, all_evidence),
        evidence=all_evidence,
        notes=tuple(dict.fromkeys((*supported.notes, *notes))),
        newer_only=False,
    )


def describe_pins(pins: Iterable[Pin]) -> str:
    """`setup.py, extra "vllm"`; `pyproject.toml, dependencies, narrowed by [tool.uv]
    constraint-dependencies`; `requirements.txt; requirements/gpu.txt, narrowed by constraints.txt`."""
    wheres: dict[str, list[str]] = {}
    narrowed: list[str] = []
    for pin in pins:
        file = shown_path(pin.file)
        if pin.narrows:
            if pin.where and file in wheres:
                narrowed.append(pin.where)
            else:
                narrowed.append(file + (f" {pin.where}" if pin.where else ""))
            continue
        wheres.setdefault(file, [])
        if pin.where and pin.where not in wheres[file]:
            wheres[file].append(pin.where)
    parts = [file + (", " + " and ".join(where) if where else "") for file, where in wheres.items()]
    text = "; ".join(parts)
    if narrowed:
        text += ", narrowed by " + " and ".join(dict.fromkeys(narrowed))
    return text


def resolve_range(spec: str | None, origin: str | None, root: Path, dist: Distribution = VLLM) -> SupportedRange:
    """The range for the project at `root`: the `vllm` (`sglang`) setting (from `origin`: a config file,
    or "--vllm"), else (for vLLM) the release of the vLLM vendored at its root, else the project's pins."""
    key = dist.name
    if spec:
        if origin == f"--{key}" or origin is None:
            return from_specifier(spec, f"--{key} {_quoted(spec)}" if origin else f"{key} = {_quoted(spec)}", dist)
        table = "[tool.cachelint] " if Path(origin).name == "pyproject.toml" else ""
        return from_specifier(spec, f"{shown_path(Path(origin))}, {table}{key} = {_quoted(spec)}", dist)
    vendored = vendored_range(root) if dist is VLLM else None
    return vendored or read_supported_range(root, dist)


def vendored_range(root: Path) -> SupportedRange | None:
    """The release of the vLLM package vendored at `root` (`root/vllm`), when it says one the facts
    know; the newest known release standing in for a newer one; None without such a package or when it
    says no release. An older release the facts do not know leaves the range to the pins, with a note
    that says so."""
    from cachelint.vendored import vendored_vllm_version

    found = vendored_vllm_version(root)
    if found is None:
        return None
    version, file = found
    release = Version(version.base_version)
    source = f"{shown_path(file)}, the vendored vLLM"
    if release in known_releases():
        return SupportedRange((release,), source)
    if release > newest_known_release():
        return newest_standing_in(f"{source} {version}", (), VLLM)
    pinned = read_supported_range(root)
    note = f"{shown_path(file)}: the vendored vLLM says {version}, a release cachelint does not know: the pins decide"
    return dataclasses.replace(pinned, notes=(*pinned.notes, note))


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
