"""Corpus run: cachelint over CPython's standard library and a fresh venv with the test extras.

Not part of the test suite (it takes minutes). Run it from the repository with the venv that has
cachelint installed:

    python scripts/corpus_check.py            # creates a temporary venv, pip-installs '.[test]'
    python scripts/corpus_check.py --venv DIR  # reuses a venv made earlier (e.g. with --keep)

Checks, per corpus root (the stdlib without its site-packages, the venv's site-packages and the
repository's fixtures, which hold real bugs for the fixer):
  1. `cachelint check --output-format json ROOT`, then every file named on the command line (a
     walked file that holds no trigger word is not parsed; a named one always is), including those its
     default excludes skip, e.g. stdlib `venv/` and pip's `operations/build/`: no internal error, no
     traceback, exit 0 or 1; the files with an `invalid-syntax` diagnostic are exactly the files
     `ast.parse` rejects (computed here, independently).
  2. On a copy: `check --fix --unsafe-fixes`; every file it wrote parses (ast and libcst), a second
     run changes nothing, and no file without a finding changed by a single byte.
Prints one table and exits 1 when any check fails.
"""

from __future__ import annotations

import argparse
import ast
import collections
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SUFFIXES = (".py", ".pyi")
# Non-Python files that change what cachelint does (project root, settings, vLLM pins): copied too.
CONFIG_NAMES = ("pyproject.toml", "setup.cfg", "cachelint.toml", ".cachelint.toml", ".gitignore")
CHUNK = 200  # files named per command line
# Never `python -m cachelint` from the folder checked: a site-packages holds a `cachelint` of its own,
# and the working folder comes first on sys.path (-P, Python 3.11+, leaves it out; the script does not).
if sys.version_info >= (3, 11):
    COMMAND = [sys.executable, "-P", "-m", "cachelint"]
else:  # pragma: no cover
    COMMAND = [str(Path(sys.executable).parent / "cachelint")]


@dataclass
class Run:
    code: int
    findings: list[dict[str, object]]
    stderr: str


@dataclass
class RootReport:
    name: str
    root: Path
    files: list[str] = field(default_factory=list)  # relative POSIX paths
    lines: int = 0
    rejected: set[str] = field(default_factory=set)  # what ast.parse rejects
    diagnostics: collections.Counter[str] = field(default_factory=collections.Counter)
    internal_errors: int = 0
    files_fixed: int = 0
    reparse_failures: int = 0
    fixes_refused: int = 0
    problems: list[str] = field(default_factory=list)


def python_files(root: Path, skip: Sequence[Path]) -> list[str]:
    """Every .py/.pyi under `root` (links neither followed nor listed, `skip` folders left out), relative,
    sorted."""
    found = []
    for current, dirs, files in os.walk(root):
        here = Path(current)
        dirs[:] = [name for name in dirs if name != "__pycache__" and here / name not in skip]
        found += [
            (here / name).relative_to(root).as_posix()
            for name in files
            if name.endswith(SUFFIXES) and not (here / name).is_symlink()
        ]
    return sorted(found)


def ast_rejects(data: bytes) -> bool:
    try:
        ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True
    return False


def parses(data: bytes) -> bool:
    import libcst

    if ast_rejects(data):
        return False
    try:
        libcst.parse_module(data)
    except Exception:
        return False
    return True


def count_lines(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def cachelint(args: Sequence[str], cwd: Path) -> Run:
    env = {**os.environ, "PYTHONUTF8": "1", "NO_COLOR": "1"}
    env.pop("CACHELINT_DEBUG", None)
    completed = subprocess.run(
        [*COMMAND, "check", "--output-format", "json", *args],
        cwd=cwd,
        capture_output=True,
        env=env,
        check=False,
    )
    stdout = completed.stdout.decode("utf-8", "replace")
    try:
        findings = json.loads(stdout) if stdout.strip() else []
    except json.JSONDecodeError:
        findings = []
    return Run(completed.returncode, findings, completed.stderr.decode("utf-8", "replace"))


def discovered(root: Path) -> set[str]:
    """The files cachelint's own walk from `root` reaches (the rest are named explicitly)."""
    from cachelint.config import load_settings
    from cachelint.discovery import Excludes, discover
    from cachelint.vllm_range import find_project_root

    settings = load_settings(root)
    project = find_project_root(root)
    excludes = Excludes.build(project, (*settings.exclude, *settings.extend_exclude))
    return {path.resolve().relative_to(root.resolve()).as_posix() for path in discover([root], excludes)}


def check_all(
    report: RootReport, root: Path, extra_args: Sequence[str] = (), name_every_file: bool = False
) -> list[Run]:
    """cachelint over `root` as a folder, then files named explicitly: those its walk skips, or (with
    `name_every_file`) all of them, so that each gets a syntax verdict (a walked file that holds no
    trigger word is not parsed)."""
    runs = [cachelint([*extra_args, "."], root)]
    named = sorted(report.files) if name_every_file else sorted(set(report.files) - discovered(root))
    for start in range(0, len(named), CHUNK):
        runs.append(cachelint([*extra_args, *named[start : start + CHUNK]], root))
    for run in runs:
        if run.code not in (0, 1) or "Traceback" in run.stderr:
            report.internal_errors += 1
            report.problems.append(f"exit {run.code}: {run.stderr.strip()[-2000:]}")
    return runs


def analyse(report: RootReport, skip: Sequence[Path]) -> None:
    report.files = python_files(report.root, skip)
    for relative in report.files:
        data = (report.root / relative).read_bytes()
        report.lines += count_lines(data)
        if ast_rejects(data):
            report.rejected.add(relative)
    runs = check_all(report, report.root, name_every_file=True)
    invalid = set()
    seen = set()  # a file of the folder run is named again: count each finding once
    for run in runs:
        for finding in run.findings:
            key = json.dumps([finding["filename"], finding["code"], finding.get("location")])
            if key in seen:
                continue
            seen.add(key)
            code = str(finding["code"])
            report.diagnostics[code] += 1
            if code == "internal-error":
                report.internal_errors += 1
                report.problems.append(f"internal error: {finding['filename']}: {finding['message']}")
            if code == "invalid-syntax":
                invalid.add(Path(str(finding["filename"])).as_posix())
    for path in sorted(report.rejected - invalid):
        report.problems.append(f"ast.parse rejects {path} but cachelint reported no invalid-syntax")
    for path in sorted(invalid - report.rejected):
        report.problems.append(f"cachelint reported invalid-syntax for {path} but ast.parse accepts it")


def copy_corpus(source: Path, target: Path, skip: Sequence[Path]) -> None:
    def ignore(folder: str, names: list[str]) -> set[str]:
        here = Path(folder)
        kept = set()
        for name in names:
            path = here / name
            wanted_folder = path.is_dir() and name != "__pycache__" and path not in skip
            wanted_file = name.endswith(SUFFIXES) or name in CONFIG_NAMES or name.startswith("requirements")
            if not path.is_symlink() and (wanted_folder or wanted_file):
                kept.add(name)
        return set(names) - kept

    shutil.copytree(source, target, ignore=ignore)
    if not any((target / marker).exists() for marker in ("pyproject.toml", "setup.py", "setup.cfg", ".git")):
        (target / ".git").mkdir()  # the copy is a project of its own, whatever lies above it


def digests(root: Path, files: Iterable[str]) -> dict[str, str]:
    return {relative: hashlib.sha256((root / relative).read_bytes()).hexdigest() for relative in files}


def fix(report: RootReport, copy: Path) -> None:
    before_runs = check_all(report, copy)
    may_change = set()  # the files with a finding, and the files their fixes edit (CL001 driver side)
    for run in before_runs:
        for finding in run.findings:
            may_change.add(Path(str(finding["filename"])).as_posix())
            fix = finding.get("fix")
            edits = fix.get("edits", []) if isinstance(fix, dict) else []
            may_change.update(Path(str(edit["filename"])).as_posix() for edit in edits)
    before = digests(copy, report.files)
    runs = check_all(report, copy, ("--fix", "--unsafe-fixes"))
    report.fixes_refused = sum(run.stderr.count("fix not applied") for run in runs)
    after = digests(copy, report.files)
    changed = [relative for relative in report.files if before[relative] != after[relative]]
    report.files_fixed = len(changed)
    for relative in changed:
        if not parses((copy / relative).read_bytes()):
            report.reparse_failures += 1
            report.problems.append(f"fixed file does not parse: {relative}")
        if relative not in may_change:
            report.problems.append(f"file without findings changed: {relative}")
    check_all(report, copy, ("--fix", "--unsafe-fixes"))
    again = digests(copy, report.files)
    for relative in report.files:
        if again[relative] != after[relative]:
            report.problems.append(f"second --fix run changed {relative}")


def make_venv(folder: Path) -> Path:
    print(f"creating a venv in {folder} and installing {REPO}[test] ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    pip = folder / "bin" / "pip"
    subprocess.run([str(pip), "install", "--quiet", f"{REPO}[test]"], check=True)
    return folder


def purelib(venv: Path) -> Path:
    python = venv / "bin" / "python"
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.strip())


def print_table(reports: Sequence[RootReport]) -> None:
    kinds = sorted({kind for report in reports for kind in report.diagnostics})
    header = ["root", "files", "lines", *kinds, "internal errors", "files fixed", "re-parse failures"]
    rows = []
    for report in reports:
        rows.append(
            [
                report.name,
                str(len(report.files)),
                str(report.lines),
                *(str(report.diagnostics[kind]) for kind in kinds),
                str(report.internal_errors),
                str(report.files_fixed),
                str(report.reparse_failures),
            ]
        )
    totals = ["total"]
    for column in range(1, len(header)):
        totals.append(str(sum(int(row[column]) for row in rows)))
    rows.append(totals)
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return " | ".join(cell.ljust(widths[0]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(cells))

    print(line(header))
    print("-+-".join("-" * width for width in widths))
    for row in rows:
        if row is totals:
            print("-+-".join("-" * width for width in widths))
        print(line(row))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--venv", type=Path, help="reuse this venv instead of creating one")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (venv and copies)")
    parser.add_argument("--no-fixtures", action="store_true", help="leave the repository's fixtures out")
    parser.add_argument("--extra", type=Path, action="append", default=[], help="another corpus root (repeatable)")
    options = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="cachelint-corpus-"))
    started = time.monotonic()
    try:
        venv = options.venv or make_venv(work / "venv")
        stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
        roots = [
            ("stdlib", stdlib, [stdlib / "site-packages"]),  # installed packages are not the stdlib
            ("venv site-packages", purelib(venv).resolve(), []),
        ]
        if not options.no_fixtures:
            roots.append(("cachelint fixtures", REPO / "fixtures", []))
        roots += [(str(extra), extra.resolve(), []) for extra in options.extra]
        reports = []
        for index, (name, root, skip) in enumerate(roots):
            print(f"analysing {name}: {root}", file=sys.stderr)
            report = RootReport(name, root)
            analyse(report, skip)
            copy = work / "copies" / f"{index}"
            copy_corpus(root, copy, skip)
            print(f"fixing a copy of {name}: {copy}", file=sys.stderr)
            fix(report, copy)
            reports.append(report)
    finally:
        if options.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)

    print()
    print_table(reports)
    rejected = sum(len(report.rejected) for report in reports)
    refused = sum(report.fixes_refused for report in reports)
    print()
    mismatch = any("ast.parse" in problem for report in reports for problem in report.problems)
    same = "not the same files (see below)" if mismatch else "exactly those files"
    print(f"ast.parse rejects {rejected} files; cachelint reported invalid-syntax for {same}.")
    print(f"fixes refused by validation (the result would not parse): {refused}")
    print(f"took {time.monotonic() - started:.0f}s")
    problems = [f"{report.name}: {problem}" for report in reports for problem in report.problems]
    for problem in problems:
        print(f"FAIL {problem}")
    print("OK" if not problems else f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
