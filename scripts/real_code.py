"""Precision of cachelint on released RL frameworks that drive vLLM, against a committed triage.

Downloads the released sources of each distribution version in CORPUS with pip (a wheel where one
exists for the interpreter tag given, else the sdist; the sdist alone for an entry marked `sdist=True`,
whose Dockerfiles, scripts and CI workflows a wheel leaves out), unpacks each into a folder of its own, runs
`python -m cachelint check --output-format json --no-cache .` in it as a user of that project would,
and compares every finding with tests/data/real_code_triage.tsv. Nothing downloaded is installed or
imported.

    python scripts/real_code.py                     # check; exit 1 on any new, vanished or untriaged finding
    python scripts/real_code.py --update            # also rewrite the triage: new findings as `untriaged`,
                                                    # vanished ones removed (review the diff)
    python scripts/real_code.py --fix               # also the fix pass (see below)
    python scripts/real_code.py --only verl         # a part of the corpus (name or name==version)

Downloads are kept in --downloads (default ~/.cache/cachelint-real-code) and reused; the unpacked
trees go to DOWNLOADS/trees, laid anew on every run.

The supported vLLM range. An sdist carries the project's own pyproject.toml / setup.py /
requirements files, which cachelint reads as it would in the project's repository. A wheel carries
its pins only as `Requires-Dist` in `*.dist-info/METADATA`; the script writes those lines verbatim
(markers such as `extra == "vllm"` included) to `requirements.txt` at the root of the unpacked wheel,
so cachelint reads the same pins an installer would. That file also marks the tree as a project
root. A wheel's `*.data/purelib` and `*.data/platlib` folders are moved to the root, where an
installer puts them.

The triage file: one line per finding, tab-separated, `#` lines are comments:

    distribution  path  line  column  code  verdict  fix  reason

- distribution `name==version` as in CORPUS (`name==version (sdist)` for an entry marked `sdist`);
  path relative to the unpacked tree; line and column 1-based, as cachelint reports them. Released
  files never change, so the key is stable; a rule change that moves or drops a finding shows as a
  vanished line (and a new one).
- verdict: `true` (a maintainer would accept it as a real bug, or a real risk on the project's
  supported vLLM range), `false`, `debatable`, or `untriaged` (which fails the run).
- fix: `-` when the finding has no fix that `--fix --unsafe-fixes` applies, else `VERDICT@ID` with
  VERDICT `ok`, `wrong` or `untriaged` and ID the first 8 hex digits of the SHA-256 of the fix's
  edits, so that a changed fix needs a new look.
- reason: one line, grounded in the vLLM facts (VLLM_CACHE_APIS.md); for a fix, after `fix:`.

Precision is true / (true + false) per rule and overall; debatable findings are counted apart.

The fix pass (--fix): on a fresh copy of each tree, `check --fix --unsafe-fixes`; then every changed
file must compile, a second run must change nothing, and every applied fix's diff (each fix applied
alone to the original file) goes to --report (default DOWNLOADS/fix-report.diff) for review.

Needs the network the first time (pip download); not part of the test suite.
"""

from __future__ import annotations

import argparse
import collections
import difflib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path

from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

REPO = Path(__file__).resolve().parent.parent
TRIAGE = REPO / "tests" / "data" / "real_code_triage.tsv"
DEFAULT_DOWNLOADS = Path.home() / ".cache" / "cachelint-real-code"
COLUMNS = ("distribution", "path", "line", "column", "code", "verdict", "fix", "reason")
VERDICTS = ("true", "false", "debatable", "untriaged")
FIX_VERDICTS = ("ok", "wrong", "untriaged")
# Never `python -m cachelint` from inside the tree checked without -P: the working folder comes first
# on sys.path, and a distribution may ship a module named like one cachelint imports.
if sys.version_info >= (3, 11):
    COMMAND = [sys.executable, "-P", "-m", "cachelint"]
else:  # pragma: no cover
    COMMAND = [str(Path(sys.executable).parent / "cachelint")]


@dataclass(frozen=True)
class Dist:
    """A released distribution version; `python` is the interpreter version pip picks a wheel for;
    `sdist`: its source distribution even where a wheel exists, for the files a wheel leaves out
    (Dockerfiles, scripts, CI workflows: the deployment evidence of the supported range)."""

    name: str
    version: str
    python: str = "3.12"
    sdist: bool = False

    @property
    def spec(self) -> str:
        """The requirement pip downloads."""
        return f"{self.name}=={self.version}"

    @property
    def label(self) -> str:
        """The name in the triage file and the report: the spec, with ` (sdist)` for a source one."""
        return f"{self.spec} (sdist)" if self.sdist else self.spec

    @property
    def folder(self) -> str:
        return f"{canonicalize_name(self.name)}-{self.version}" + ("-sdist" if self.sdist else "")


# Versions chosen where the code that drives vLLM's caches changed, with releases before and after
# the upstream fixes (see docs/REAL_CODE.md for why each is here).
CORPUS = (
    Dist("verl", "0.4.1"),
    Dist("verl", "0.5.0"),
    Dist("verl", "0.6.1"),
    Dist("verl", "0.7.1"),
    Dist("verl", "0.8.0"),
    Dist("verl", "0.9.0"),
    Dist("verl", "0.9.1"),
    Dist("trl", "0.19.1"),
    Dist("trl", "0.23.1"),
    Dist("trl", "1.14.2"),
    Dist("trl", "1.16.0"),
    Dist("openrlhf", "0.8.11"),
    Dist("openrlhf", "0.9.5"),
    Dist("openrlhf", "0.9.10"),
    Dist("openrlhf", "0.10.4"),
    Dist("openrlhf", "0.11.2"),
    Dist("areal", "1.0.4"),
    Dist("skyrl-train", "0.1.0"),
    Dist("skyrl-train", "0.3.1"),
    Dist("skyrl", "0.2.0"),
    Dist("skyrl", "0.4.0"),
    Dist("openpipe-art", "0.5.10"),
    Dist("openpipe-art", "0.5.18"),
    Dist("ms-swift", "3.12.6"),
    Dist("ms-swift", "4.6.0"),
    Dist("cosmos-rl", "0.3.9"),
    Dist("cosmos-rl", "0.4.7"),
    # Source distributions that ship Dockerfiles or CI workflows naming a vLLM or SGLang release.
    Dist("cosmos-rl", "0.3.9", sdist=True),
    Dist("cosmos-rl", "0.4.7", sdist=True),
    Dist("siirl", "0.2.0", sdist=True),
    Dist("atroposlib", "0.4.0"),
    Dist("oat-llm", "0.2.4", python="3.10"),
    Dist("unsloth", "2025.12.1"),
    Dist("unsloth", "2026.10.9"),
    Dist("unsloth-zoo", "2026.10.9"),
    Dist("trinity-rft", "0.5.2"),
    Dist("trinity-rft", "0.6.0"),
    Dist("rlinf", "0.3.0"),
    Dist("siirl", "0.1.0.post1"),
    Dist("siirl", "0.2.0"),
    Dist("verifiers", "0.4.0"),
    Dist("torchrl", "0.13.3"),
    Dist("torchrl", "0.14.1"),
    Dist("axolotl", "0.19.0"),
    Dist("ray", "2.60.0"),
    # weight pushes: a driver worker's model_runner.model.load_weights with no reset after (trl 0.15.2's
    # GRPO and online DPO), verl 0.4.1's sharding managers (sleep in __exit__, load in __enter__; listed
    # with verl above), and weight-sync middleware loading through worker extensions and collective_rpc
    Dist("trl", "0.15.2"),
    Dist("checkpoint-engine", "0.4.2"),
    Dist("awex", "0.9.0"),
)


class Failure(Exception):
    """A step that cannot go on (a download, an archive, a cachelint crash): one line, exit 2."""


# ---------------------------------------------------------------------------------------------
# Download and unpack


def cached_archive(dist: Dist, downloads: Path) -> Path | None:
    """The wheel (preferred, unless `dist.sdist`) or sdist of `dist` already in `downloads`."""
    wanted = canonicalize_name(dist.name)
    version = Version(dist.version)
    sdist = None
    for path in sorted(downloads.iterdir()) if downloads.is_dir() else ():
        try:
            if path.name.endswith(".whl") and not dist.sdist:
                name, found, _, _ = parse_wheel_filename(path.name)
                if name == wanted and found == version:
                    return path
            elif path.name.endswith((".tar.gz", ".zip")):
                name, found = parse_sdist_filename(path.name)
                if name == wanted and found == version:
                    sdist = path
        except (ValueError, InvalidVersion):
            continue
    return sdist


def pip_download(dist: Dist, downloads: Path, binary: str) -> None:
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", str(downloads)]
    if binary == "wheel":
        # --python-version picks the wheel a user of that interpreter gets (some distributions
        # publish wheels only for some versions); pip needs --only-binary with it.
        command += ["--only-binary=:all:", "--python-version", dist.python]
    else:
        # pip prepares an sdist's metadata with its build backend (in an isolated build env).
        command += ["--no-binary=:all:"]
    subprocess.run([*command, dist.spec], capture_output=True, text=True, check=False)


def download(dist: Dist, downloads: Path) -> Path:
    downloads.mkdir(parents=True, exist_ok=True)
    for binary in ("sdist",) if dist.sdist else ("wheel", "sdist"):
        archive = cached_archive(dist, downloads)
        if archive is not None:
            return archive
        print(f"downloading {dist.spec} ({binary})", file=sys.stderr)
        pip_download(dist, downloads, binary)
    archive = cached_archive(dist, downloads)
    if archive is None:
        raise Failure(f"pip could not download {dist.spec} (neither a wheel for Python {dist.python} nor an sdist)")
    return archive


def safe_members(names: Iterable[str], archive: Path) -> None:
    for name in names:
        parts = Path(name).parts
        if name.startswith(("/", "\\")) or ".." in parts:
            raise Failure(f"{archive.name}: refusing the archive member {name!r}")


def unpack_wheel(archive: Path, target: Path) -> None:
    with zipfile.ZipFile(archive) as wheel:
        safe_members(wheel.namelist(), archive)
        wheel.extractall(target)
    for data in target.glob("*.data"):
        for scheme in ("purelib", "platlib"):
            folder = data / scheme
            if folder.is_dir():  # merged into the root file by file: a package may be in both places
                for item in sorted(folder.rglob("*")):
                    if item.is_file():
                        destination = target / item.relative_to(folder)
                        destination.parent.mkdir(parents=True, exist_ok=True)
                        item.replace(destination)
                shutil.rmtree(folder)
    write_pins(target, archive)


def write_pins(target: Path, archive: Path) -> None:
    """The wheel's Requires-Dist lines as `requirements.txt`, where cachelint reads pins."""
    metadata = next(target.glob("*.dist-info/METADATA"), None)
    if metadata is None:
        raise Failure(f"{archive.name}: no .dist-info/METADATA")
    message = Parser().parsestr(metadata.read_text(encoding="utf-8"))
    requirements = message.get_all("Requires-Dist") or []
    pins = target / "requirements.txt"
    if pins.exists():
        raise Failure(f"{archive.name}: the wheel ships a requirements.txt at its root; pins cannot be written")
    header = f"# Requires-Dist of {archive.name}, written by scripts/real_code.py\n"
    pins.write_text(header + "".join(f"{line}\n" for line in requirements), encoding="utf-8")


def unpack_sdist(archive: Path, target: Path) -> None:
    """The sdist's single top folder becomes `target`."""
    staging = target.with_name(target.name + ".unpacking")
    shutil.rmtree(staging, ignore_errors=True)
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as sdist:
            safe_members(sdist.namelist(), archive)
            sdist.extractall(staging)
    else:
        with tarfile.open(archive) as sdist:
            members = [m for m in sdist.getmembers() if m.isfile() or m.isdir()]  # no links, no devices
            safe_members((m.name for m in members), archive)
            sdist.extractall(staging, members=members)
    tops = list(staging.iterdir())
    if len(tops) != 1 or not tops[0].is_dir():
        raise Failure(f"{archive.name}: expected one top folder in the sdist")
    tops[0].rename(target)
    staging.rmdir()


def unpack(archive: Path, target: Path) -> None:
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    if archive.name.endswith(".whl"):
        unpack_wheel(archive, target)
    else:
        unpack_sdist(archive, target)


# ---------------------------------------------------------------------------------------------
# Running cachelint


def cachelint(tree: Path, *args: str) -> list[dict[str, object]]:
    env = {**os.environ, "NO_COLOR": "1", "PYTHONUTF8": "1"}
    env.pop("CACHELINT_DEBUG", None)
    result = subprocess.run(
        [*COMMAND, "check", "--output-format", "json", "--no-cache", *args, "."],
        cwd=tree,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if result.returncode not in (0, 1) or "Traceback" in result.stderr:
        raise Failure(f"cachelint exited {result.returncode} in {tree}: {result.stderr.strip()[-2000:]}")
    findings: list[dict[str, object]] = json.loads(result.stdout or "[]")
    return findings


@dataclass(frozen=True)
class Key:
    distribution: str
    path: str
    line: int
    column: int
    code: str

    def show(self) -> str:
        return f"{self.distribution} {self.path}:{self.line}:{self.column} {self.code}"


def location(finding: dict[str, object], field: str = "location") -> tuple[int, int]:
    place = finding[field]
    assert isinstance(place, dict)
    return int(place["row"]), int(place["column"])


def key_of(dist: Dist, finding: dict[str, object]) -> Key:
    line, column = location(finding)
    path = Path(str(finding["filename"])).as_posix()
    return Key(dist.label, path, line, column, str(finding["code"]))


def applied_fix(finding: dict[str, object]) -> dict[str, object] | None:
    """The fix `--fix --unsafe-fixes` applies for this finding, if any."""
    fix = finding.get("fix")
    if isinstance(fix, dict) and fix.get("applicability") in ("safe", "unsafe") and fix.get("edits"):
        return fix
    return None


def fix_id(fix: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(fix["edits"], sort_keys=True).encode()).hexdigest()[:8]


# ---------------------------------------------------------------------------------------------
# The triage file


@dataclass
class Entry:
    key: Key
    verdict: str
    fix: str  # "-" or "VERDICT@ID"
    reason: str

    @property
    def fix_verdict(self) -> str | None:
        return None if self.fix == "-" else self.fix.split("@", 1)[0]

    @property
    def fix_id(self) -> str | None:
        return None if self.fix == "-" else self.fix.split("@", 1)[-1]

    def row(self) -> list[str]:
        k = self.key
        return [k.distribution, k.path, str(k.line), str(k.column), k.code, self.verdict, self.fix, self.reason]


def read_triage(path: Path) -> tuple[list[str], list[Entry]]:
    """The comment lines at the top, and the entries."""
    if not path.exists():
        return [], []
    header: list[str] = []
    entries: list[Entry] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        if line.startswith("#") or not line.strip():
            if not entries:
                header.append(line)
            continue
        fields = line.split("\t")
        if fields == list(COLUMNS):
            continue
        if len(fields) != len(COLUMNS):
            raise Failure(f"{path}:{number}: expected {len(COLUMNS)} tab-separated fields, got {len(fields)}")
        dist, file, row, column, code, verdict, fix, reason = fields
        fix_verdict = fix.split("@", 1)[0]
        if verdict not in VERDICTS or (fix != "-" and ("@" not in fix or fix_verdict not in FIX_VERDICTS)):
            raise Failure(f"{path}:{number}: bad verdict {verdict!r} or fix {fix!r}")
        entries.append(Entry(Key(dist, file, int(row), int(column), code), verdict, fix, reason))
    return header, entries


def write_triage(path: Path, header: list[str], entries: list[Entry]) -> None:
    entries = sorted(entries, key=lambda e: (e.key.distribution, e.key.path, e.key.line, e.key.column, e.key.code))
    temporary = path.with_suffix(".tmp")
    lines = [*header, "\t".join(COLUMNS), *("\t".join(entry.row()) for entry in entries)]
    temporary.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    temporary.replace(path)


# ---------------------------------------------------------------------------------------------
# Comparing


@dataclass
class Found:
    key: Key
    finding: dict[str, object]

    @property
    def fix(self) -> dict[str, object] | None:
        return applied_fix(self.finding)


def compare(found: list[Found], entries: list[Entry], dists: set[str]) -> tuple[list[str], list[Entry]]:
    """Problems (one line each) and the triage as it should read after --update."""
    problems: list[str] = []
    by_key: dict[Key, list[Entry]] = collections.defaultdict(list)
    for entry in entries:
        by_key[entry.key].append(entry)
    updated = [entry for entry in entries if entry.key.distribution not in dists]
    for item in found:
        candidates = by_key.get(item.key)
        fix = item.fix
        if not candidates:
            problems.append(f"new: {item.key.show()}: {item.finding['message']}")
            fix_field = "-" if fix is None else f"untriaged@{fix_id(fix)}"
            updated.append(Entry(item.key, "untriaged", fix_field, ""))
            continue
        entry = candidates.pop(0)
        if entry.verdict == "untriaged":
            problems.append(f"untriaged: {item.key.show()}: {item.finding['message']}")
        if fix is None and entry.fix != "-":
            problems.append(f"fix vanished: {item.key.show()} (triaged {entry.fix})")
            entry.fix = "-"
        elif fix is not None and entry.fix_id != fix_id(fix):
            problems.append(f"new or changed fix: {item.key.show()} {fix_id(fix)}: {fix['message']}")
            entry.fix = f"untriaged@{fix_id(fix)}"
        elif entry.fix_verdict == "untriaged":
            problems.append(f"untriaged fix: {item.key.show()}")
        updated.append(entry)
    for remaining in by_key.values():
        for entry in remaining:
            if entry.key.distribution in dists:
                lost = " (a true finding lost)" if entry.verdict == "true" else ""
                problems.append(f"vanished: {entry.key.show()} [{entry.verdict}]{lost}: {entry.reason}")
    return problems, updated


def precision(true: int, false: int) -> str:
    return f"{100 * true / (true + false):.0f}%" if true + false else "n/a"


def print_precision(entries: list[Entry]) -> None:
    table: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    fixes: collections.Counter[str] = collections.Counter()
    for entry in entries:
        table[entry.key.code][entry.verdict] += 1
        table["all"][entry.verdict] += 1
        if entry.fix_verdict:
            fixes[entry.fix_verdict] += 1
    print(f"\n{'rule':<6} {'findings':>8} {'true':>5} {'false':>5} {'debatable':>9} {'untriaged':>9} {'precision':>9}")
    for code in [*sorted(c for c in table if c != "all"), "all"]:
        counts = table[code]
        total = sum(counts.values())
        print(
            f"{code:<6} {total:>8} {counts['true']:>5} {counts['false']:>5} {counts['debatable']:>9} "
            f"{counts['untriaged']:>9} {precision(counts['true'], counts['false']):>9}"
        )
    total_fixes = sum(fixes.values())
    print(
        f"\nfixes applied by --fix --unsafe-fixes: {total_fixes}; ok {fixes['ok']}, wrong {fixes['wrong']}, "
        f"untriaged {fixes['untriaged']} (fix precision {precision(fixes['ok'], fixes['wrong'])})"
    )


# ---------------------------------------------------------------------------------------------
# The fix pass


def offset(starts: list[int], line: int, column: int) -> int:
    return starts[line - 1] + column - 1


def line_starts(text: str) -> list[int]:
    starts = [0]
    for index, char in enumerate(text):
        if char == "\n" or (char == "\r" and text[index + 1 : index + 2] != "\n"):
            starts.append(index + 1)
    return starts


def apply_alone(text: str, edits: list[dict[str, object]]) -> str:
    """`text` with these edits of one fix applied (1-based rows and columns, end exclusive)."""
    starts = line_starts(text)
    spans = sorted(
        (offset(starts, *location(edit)), offset(starts, *location(edit, "end_location")), str(edit["content"]))
        for edit in edits
    )
    pieces, position = [], 0
    for start, end, content in spans:
        pieces += [text[position:start], content]
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


def fix_diffs(tree: Path, found: list[Found]) -> list[str]:
    """Each fix's diff, applied alone to the original files, for the report."""
    out = []
    for item in found:
        fix = item.fix
        if fix is None:
            continue
        edits = fix["edits"]
        assert isinstance(edits, list)
        by_file: dict[str, list[dict[str, object]]] = collections.defaultdict(list)
        for edit in edits:
            by_file[Path(str(edit.get("filename") or item.key.path)).as_posix()].append(edit)
        out.append(f"### {item.key.show()} [{fix['applicability']}] fix {fix_id(fix)}: {fix['message']}\n")
        for name, file_edits in sorted(by_file.items()):
            before = (tree / name).read_text(encoding="utf-8")
            after = apply_alone(before, file_edits)
            diff = difflib.unified_diff(
                before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{name}", f"b/{name}", n=4
            )
            out.append("".join(diff))
        out.append("\n")
    return out


def snapshot(tree: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in sorted(tree.rglob("*.py"))}


def fix_pass(dist: Dist, tree: Path, fixed: Path, found: list[Found]) -> tuple[list[str], list[str], int]:
    """Problems, report text and the number of fixes applied on a copy of `tree`."""
    shutil.rmtree(fixed, ignore_errors=True)
    shutil.copytree(tree, fixed)
    before = snapshot(fixed)
    remaining = cachelint(fixed, "--fix", "--unsafe-fixes")
    after = snapshot(fixed)
    problems: list[str] = []
    report = [f"## {dist.label}\n\n"]
    changed = [path for path in after if after[path] != before.get(path)]
    for path in changed:
        name = path.relative_to(fixed).as_posix()
        try:
            compile(after[path], name, "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as error:
            problems.append(f"{dist.label} {name}: the fixed file does not compile: {error}")
    again = cachelint(fixed, "--fix", "--unsafe-fixes")
    if snapshot(fixed) != after:
        problems.append(f"{dist.label}: a second --fix --unsafe-fixes run changed files again")
    if [key_of(dist, f) for f in again] != [key_of(dist, f) for f in remaining]:
        problems.append(f"{dist.label}: the second fix run reported other findings than the first")
    left = {key_of(dist, f) for f in remaining}
    applied = [item for item in found if item.fix is not None and item.key not in left]
    for item in found:
        if item.fix is not None and item.key in left:
            problems.append(f"{dist.label}: the fix for {item.key.show()} was not applied")
    report += fix_diffs(tree, applied)
    for path in changed:
        name = path.relative_to(fixed).as_posix()
        diff = difflib.unified_diff(
            before[path].decode("utf-8").splitlines(keepends=True),
            after[path].decode("utf-8").splitlines(keepends=True),
            f"a/{name}",
            f"b/{name}",
            n=3,
        )
        report.append(f"### whole-file diff after --fix --unsafe-fixes: {name}\n{''.join(diff)}\n")
    return problems, report, len(applied)


# ---------------------------------------------------------------------------------------------


def select(only: Sequence[str]) -> list[Dist]:
    if not only:
        return list(CORPUS)
    chosen = [d for d in CORPUS if any(want in (d.spec, d.label, d.name, canonicalize_name(d.name)) for want in only)]
    if not chosen:
        raise Failure(f"--only {' '.join(only)} matches nothing in the corpus")
    return chosen


def run(options: argparse.Namespace) -> int:
    downloads: Path = options.downloads.expanduser().resolve()
    trees = downloads / "trees"
    dists = select(options.only)
    header, entries = read_triage(options.triage)
    found: list[Found] = []
    problems: list[str] = []
    report: list[str] = []
    applied = 0
    for dist in dists:
        archive = download(dist, downloads)
        tree = trees / dist.folder
        unpack(archive, tree)
        findings = [Found(key_of(dist, f), f) for f in cachelint(tree, "--unsafe-fixes")]
        codes = collections.Counter(item.key.code for item in findings)
        summary = ", ".join(f"{code} {count}" for code, count in sorted(codes.items())) or "none"
        print(f"{dist.label:<28} {archive.name:<58} {len(findings):>3} findings ({summary})")
        found += findings
        if options.fix:
            fix_problems, fix_report, count = fix_pass(dist, tree, trees / "fixed" / dist.folder, findings)
            problems += fix_problems
            report += fix_report
            applied += count
    compared, updated = compare(found, entries, {d.label for d in dists})
    problems = compared + problems
    if options.update:
        options.triage.parent.mkdir(parents=True, exist_ok=True)
        write_triage(options.triage, header, updated)
        print(f"\nwrote {options.triage}")
    if options.fix:
        report_path = options.report or downloads / "fix-report.diff"
        report_path.write_text("".join(report), encoding="utf-8")
        print(f"\n{applied} fixes applied; each fix's diff is in {report_path}")
    print_precision([e for e in updated if e.key.distribution in {d.label for d in dists}])
    for problem in problems:
        print(f"FAIL {problem}")
    chosen = {d.label for d in dists}
    still_open = any(e.key.distribution in chosen and "untriaged" in (e.verdict, e.fix_verdict) for e in updated)
    return 1 if problems or still_open else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--downloads", type=Path, default=DEFAULT_DOWNLOADS, help="download cache (reused)")
    parser.add_argument("--triage", type=Path, default=TRIAGE, help="the triage file (default: %(default)s)")
    parser.add_argument("--update", action="store_true", help="write new findings as untriaged, drop vanished ones")
    parser.add_argument("--fix", action="store_true", help="also run the fix pass on a copy of each tree")
    parser.add_argument("--report", type=Path, help="where the fix pass writes each fix's diff")
    parser.add_argument("--only", nargs="+", default=[], metavar="DIST", help="only these (name or name==version)")
    options = parser.parse_args()
    try:
        return run(options)
    except Failure as error:
        print(f"real_code: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
