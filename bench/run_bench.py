"""Time cachelint against its peers on corpora built on the fly; print one table, then the ratios.

Corpora (in the work folder, each with a pyproject.toml at its root, as a repository has):
  rl          the wheels of verl 0.9.1, trl 1.16.0 and openrlhf 0.11.2 (`pip download --no-deps`), unpacked;
  stdlib      the standard library of the running interpreter, without site-packages;
  vllm-verl   the Python files of the vLLM 0.11.1 wheel beside those of verl 0.9.1, in one project: a
              trainer with a vendored vLLM (the 400 MB wheel is deleted once its files are out);
  frameworks  the Python files of eleven RL framework wheels side by side, each a project of its own
              (FRAMEWORK_WHEELS): a monorepo.
Downloads and trees are kept in the work folder (`--work`) and reused.

For each corpus, repetitions interleaved so that a change in machine load hits every tool alike:
  cachelint cold (`--no-cache`), warm (cache filled, nothing changed), and one changed file as
  pre-commit runs it (`check --force-exclude FILE` from the corpus root, the rest of the cache warm,
  FILE given a new function each time), once for a file the rules analyse (also with the fix hook's
  `--fix`) and once for a file that holds no trigger word; Fixit with one trivial rule; `ruff check
  --no-cache --select ALL` (printing to /dev/null, and `--silent`) and `--select E9,F63,F7,F82`;
  libcst parsing every file (the floor of any libcst linter).
Before the timed runs, one `check --no-cache -v` run per corpus counts the files that hold a trigger word
and those summarized up front and on demand.
Wall time is measured around each command, peak RSS is the largest resident size of the command or
any of its subprocesses (`getrusage(RUSAGE_CHILDREN)` in a fresh wrapper process).

Fixit and ruff are installed into a virtual environment of their own (`--venv`), never into the
environment of cachelint, which is run with this interpreter (`python -m cachelint`).

Usage: python bench/run_bench.py [--repeat 3] [--corpus rl] [--corpus frameworks] [--skip fixit] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

RL_WHEELS = ("verl==0.9.1", "trl==1.16.0", "openrlhf==0.11.2")
VLLM_VERL_WHEELS = ("vllm==0.11.1", "verl==0.9.1")
FRAMEWORK_WHEELS = (
    "verl==0.9.1",
    "trl==1.16.0",
    "openrlhf==0.11.2",
    "areal==1.0.4",
    "skyrl==0.4.0",
    "skyrl-train==0.3.1",
    "openpipe-art==0.5.18",
    "unsloth==2025.12.1",
    "unsloth-zoo==2026.10.9",
    "rlinf==0.3.0",
    "siirl==0.2.0",
)
# The wheels are unpacked, never installed: they are the ones a user of this Python gets, whatever
# Python runs the benchmark (skyrl 0.4.0 requires Python 3.12 or newer).
WHEELS_PYTHON = "3.12"
CORPORA = ("rl", "stdlib", "vllm-verl", "frameworks")
PEERS = ("fixit==2.2.1", "ruff==0.17.6")
# The file pre-commit hands over in the one-changed-file runs: one the rules must analyse, and one
# that holds no trigger word (most commits touch only such files).
VERL_SERVER = "**/verl/workers/rollout/vllm_rollout/vllm_async_server.py"
VERL_PLAIN = "**/verl/utils/torch_functional.py"
CHANGED_FILE = {"stdlib": "asyncio/base_events.py"}
PLAIN_FILE = {"stdlib": "json/encoder.py"}
TOOLS = (
    "libcst",
    "ruff-e9",
    "ruff-all",
    "ruff-silent",
    "cold",
    "sarif",
    "warm",
    "changed",
    "fix-hook",
    "plain",
    "fixit",
)
SLOW = ("fixit", "libcst")  # repeated --slow-repeat times
# Runs of a tenth of a second, whose medians a few runs cannot pin to 5%: repeated --quick-repeat times.
QUICK = ("warm", "changed", "fix-hook", "plain")
# The trees of the scale targets, and the corpus their cold time's growth is measured from.
LARGE = ("vllm-verl", "frameworks")
# Each large tree's cold time at most this share of `ruff --select ALL --silent`. On the frameworks,
# parsing and visiting once the files that can matter already costs about 0.45x (bench/README.md,
# "What 0.5x would take").
SILENT_LIMITS = {"vllm-verl": 0.5, "frameworks": 0.8}
BASE = "rl"
LABELS = {
    "cold": "cachelint cold (--no-cache)",
    "sarif": "  the same, SARIF output (CI; fixes' edits made)",
    "warm": "cachelint warm (nothing changed)",
    "changed": "cachelint, one changed file (pre-commit)",
    "fix-hook": "  the same, the fix hook",
    "plain": "  the same, a file no rule can flag",
    "fixit": "Fixit, one trivial rule",
    "ruff-all": "ruff --no-cache --select ALL",
    "ruff-silent": "  the same, --silent",
    "ruff-e9": "ruff --no-cache --select E9,F63,F7,F82",
    "libcst": "libcst parses every file (floor)",
}
SHORT = {
    "cold": "cold",
    "sarif": "cold SARIF",
    "warm": "warm",
    "changed": "one changed file",
    "fix-hook": "fix hook",
    "plain": "no-rule file",
}
OURS = tuple(SHORT)
# With --baseline: the same commands run by another cachelint source tree (`base-cold`, ...).
LABELS.update({f"base-{tool}": f"  baseline: {short}" for tool, short in SHORT.items()})
TRIVIAL_RULE = '''\
import libcst as cst
from fixit import LintRule


class TrivialRule(LintRule):
    """Visits every name and reports nothing."""

    def visit_Name(self, node: cst.Name) -> None:
        pass
'''
LIBCST_FLOOR = """\
import pathlib, sys, libcst
for path in sorted(pathlib.Path(sys.argv[1]).rglob("*.py")):
    try:
        libcst.parse_module(path.read_bytes())
    except Exception:
        pass
"""
MEASURE = """\
import json, resource, subprocess, sys, time
command, cwd, env = json.loads(sys.argv[1])
start = time.perf_counter()
code = subprocess.call(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
wall = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps([wall, peak * (1 if sys.platform == "darwin" else 1024), code]))
"""


@dataclass
class Corpus:
    name: str
    root: Path
    files: int
    lines: int
    changed: Path
    plain: Path
    stages: dict[str, int] = field(default_factory=dict)  # files per stage, from `check -v`


@dataclass
class Runs:
    walls: list[float] = field(default_factory=list)
    peaks: list[int] = field(default_factory=list)
    codes: set[int] = field(default_factory=set)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each command (default 3)")
    parser.add_argument("--corpus", action="append", choices=CORPORA, help="default: all")
    parser.add_argument("--skip", action="append", choices=TOOLS, default=[], help="leave a command out")
    parser.add_argument(
        "--slow-repeat", type=int, help="timed runs of Fixit and the libcst floor (default: --repeat); they are slow"
    )
    parser.add_argument(
        "--quick-repeat",
        type=int,
        help="timed runs of the warm and one-file commands, baseline's too (default: 3x --repeat); they take "
        "a tenth of a second, so a few runs cannot tell 5%% from noise",
    )
    parser.add_argument("--work", type=Path, help="folder for the corpora (default: a temporary one)")
    parser.add_argument("--wheels", type=Path, help="take the wheels from here instead of downloading")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a cachelint source tree (e.g. a checkout of main) to time beside this one: its package is "
        "copied into the work folder and compiled there, and each cachelint command is run with it too",
    )
    parser.add_argument(
        "--venv",
        type=Path,
        default=Path(tempfile.gettempdir()) / "cachelint-bench-venv",
        help="virtual environment for Fixit and ruff, made when missing (default: %(default)s)",
    )
    options = parser.parse_args()
    work = options.work or Path(tempfile.mkdtemp(prefix="cachelint-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    venv = peers_venv(options.venv)
    rules = work / "fixit-rules"
    rules.mkdir(exist_ok=True)
    (rules / "bench_trivial_rule.py").write_text(TRIVIAL_RULE, encoding="utf-8")
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    precompile_cachelint()
    if options.baseline is not None:
        options.baseline = copy_baseline(options.baseline, work)
    results: dict[str, dict[str, Runs]] = {}
    corpora = []
    builders = {"rl": build_rl, "vllm-verl": build_vllm_verl, "frameworks": build_frameworks}
    for name in options.corpus or CORPORA:
        corpus = builders[name](work, venv, options.wheels) if name in builders else build_stdlib(work)
        corpora.append(corpus)
        log(f"{name}: {corpus.files} files, {corpus.lines} lines in {corpus.root}")
        corpus.stages = count_stages(corpus, environment)
        results[name] = run_corpus(corpus, venv, rules, environment, options)
    print_report(corpora, results)


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def venv_bin(venv: Path, name: str) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin") / name


def peers_venv(venv: Path) -> Path:
    if not (venv_bin(venv, "fixit").exists() and venv_bin(venv, "ruff").exists()):
        log(f"installing {', '.join(PEERS)} into {venv}")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv_bin(venv, "python")), "-m", "pip", "install", "-q", *PEERS], check=True)
    return venv


def copy_baseline(source: Path, work: Path) -> Path:
    """A fresh copy of the baseline's package, compiled, as a folder to put on PYTHONPATH."""
    target = work / "baseline-src"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source / "cachelint", target / "cachelint", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(target)], check=False)
    return target


def precompile_cachelint() -> None:
    """As an installed package has them: the bytecode of cachelint, so that no run pays to compile it."""
    import cachelint

    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(cachelint.__file__).parent)], check=False)


def build_rl(work: Path, venv: Path, wheels: Path | None) -> Corpus:
    root = work / "rl"
    if not root.exists():
        for wheel in find_wheels(RL_WHEELS, work, venv, wheels).values():
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(root / wheel.stem)
        mark_project(root, "rl-corpus")
    return describe("rl", root)


def build_vllm_verl(work: Path, venv: Path, wheels: Path | None) -> Corpus:
    """vLLM's own Python sources beside verl's, in one project: a trainer with a vendored vLLM."""
    root = work / "vllm-verl"
    if not root.exists():
        partial = work / "vllm-verl.partial"
        shutil.rmtree(partial, ignore_errors=True)
        for wheel in find_wheels(VLLM_VERL_WHEELS[1:], work, venv, wheels).values():
            extract_python(wheel, partial)
        # The vLLM wheel is large (about 400 MB): downloaded alone, its Python files kept, then deleted.
        found = find_wheels(VLLM_VERL_WHEELS[:1], work, venv, wheels)
        for wheel in found.values():
            extract_python(wheel, partial)
            if wheels is None:
                wheel.unlink()
        mark_project(partial, "vllm-verl")
        partial.rename(root)
    return describe("vllm-verl", root)


def build_frameworks(work: Path, venv: Path, wheels: Path | None) -> Corpus:
    """Eleven RL frameworks side by side, each a project of its own (a monorepo of them)."""
    root = work / "frameworks"
    if not root.exists():
        partial = work / "frameworks.partial"
        shutil.rmtree(partial, ignore_errors=True)
        for spec, wheel in find_wheels(FRAMEWORK_WHEELS, work, venv, wheels).items():
            name, version = spec.split("==")
            folder = partial / f"{name}-{version}"
            extract_python(wheel, folder)
            mark_project(folder, name)
        mark_project(partial, "frameworks")
        partial.rename(root)
    return describe("frameworks", root)


def find_wheels(specs: Sequence[str], work: Path, venv: Path, wheels: Path | None) -> dict[str, Path]:
    """The wheel of each `name==version` in `specs`: from `wheels` when given, else from the work
    folder's downloads, downloading those that are missing."""
    folder = wheels or work / "wheels"
    found = _wheels_in(folder, specs)
    missing = [spec for spec in specs if spec not in found]
    if missing and wheels is None:
        log(f"downloading {', '.join(missing)}")
        pip = [str(venv_bin(venv, "python")), "-m", "pip"]
        options = ["-q", "--no-deps", "--only-binary=:all:", "--python-version", WHEELS_PYTHON, "--dest", str(folder)]
        subprocess.run([*pip, "download", *options, *missing], check=True)
        found = _wheels_in(folder, specs)
    if len(found) < len(specs):
        raise SystemExit(f"no wheel in {folder} for {', '.join(spec for spec in specs if spec not in found)}")
    return found


def _wheels_in(folder: Path, specs: Sequence[str]) -> dict[str, Path]:
    from packaging.utils import canonicalize_name, parse_wheel_filename
    from packaging.version import Version

    wanted = {(canonicalize_name(spec.split("==")[0]), Version(spec.split("==")[1])): spec for spec in specs}
    found = {}
    for wheel in sorted(folder.rglob("*.whl")) if folder.is_dir() else ():
        name, version, _, _ = parse_wheel_filename(wheel.name)
        if (name, version) in wanted:
            found[wanted[name, version]] = wheel
    return found


def extract_python(wheel: Path, target: Path) -> None:
    """The `.py` files of `wheel` (its packages, not its metadata) under `target`."""
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            parts = member.split("/")
            if member.endswith(".py") and ".." not in parts and not parts[0].endswith(".dist-info"):
                archive.extract(member, target)


def build_stdlib(work: Path) -> Corpus:
    root = work / "stdlib"
    if not root.exists():
        source = Path(sysconfig.get_paths()["stdlib"])
        for path in source.rglob("*.py*"):
            relative = path.relative_to(source)
            if path.suffix in (".py", ".pyi") and not {"site-packages", "__pycache__"} & set(relative.parts):
                (root / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, root / relative)
        mark_project(root, "stdlib-corpus")
    return describe("stdlib", root)


def mark_project(root: Path, name: str) -> None:
    (root / "pyproject.toml").write_text(f'[project]\nname = "{name}"\nversion = "0"\n', encoding="utf-8")


def describe(name: str, root: Path) -> Corpus:
    files = [path for path in root.rglob("*.py*") if path.suffix in (".py", ".pyi")]
    lines = sum(path.read_bytes().count(b"\n") for path in files)
    found = []
    for pattern in (CHANGED_FILE.get(name, VERL_SERVER), PLAIN_FILE.get(name, VERL_PLAIN)):
        matches = sorted(root.glob(pattern))
        if not matches:
            raise SystemExit(f"{name}: no file matches {pattern}")
        found.append(matches[0])
    return Corpus(name, root, len(files), lines, found[0], found[1])


def measure(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, int, int]:
    payload = json.dumps([command, str(cwd), env])
    output = subprocess.run([sys.executable, "-c", MEASURE, payload], capture_output=True, text=True, check=True)
    wall, peak, code = json.loads(output.stdout)
    return wall, peak, code


def run_corpus(
    corpus: Corpus, venv: Path, rules: Path, environment: dict[str, str], options: argparse.Namespace
) -> dict[str, Runs]:
    cachelint = [sys.executable, "-m", "cachelint", "check"]
    ruff = [str(venv_bin(venv, "ruff")), "check", "--no-cache"]
    fixit_env = {**environment, "PYTHONPATH": str(rules)}
    changed = corpus.changed.relative_to(corpus.root).as_posix()
    plain = corpus.plain.relative_to(corpus.root).as_posix()
    originals = {path: path.read_bytes() for path in (corpus.changed, corpus.plain)}
    commands: dict[str, tuple[list[str], dict[str, str]]] = {
        "libcst": ([sys.executable, "-c", LIBCST_FLOOR, "."], environment),
        "ruff-e9": ([*ruff, "--select", "E9,F63,F7,F82", "."], environment),
        "ruff-all": ([*ruff, "--select", "ALL", "."], environment),
        "ruff-silent": ([*ruff, "--select", "ALL", "--silent", "."], environment),
        "cold": ([*cachelint, "--no-cache", "."], environment),
        "sarif": ([*cachelint, "--no-cache", "--output-format", "sarif", "."], environment),
        "warm": ([*cachelint, "."], environment),
        "changed": ([*cachelint, "--force-exclude", changed], environment),
        "fix-hook": ([*cachelint, "--fix", "--force-exclude", "--exit-non-zero-on-fix", changed], environment),
        "plain": ([*cachelint, "--force-exclude", plain], environment),
        "fixit": ([str(venv_bin(venv, "fixit")), "--rules", "bench_trivial_rule", "lint", "."], fixit_env),
    }

    def fill_cache(rep: int) -> None:
        untimed([*cachelint, "."], corpus.root, environment)

    def edit(path: Path) -> Callable[[int], None]:
        def change(rep: int) -> None:  # a name never used before: no run of the cache saw these bytes
            name = f"_bench_edit_{os.getpid()}_{time.time_ns()}"
            path.write_bytes(originals[path] + f"\n\ndef {name}():\n    return {rep}\n".encode())

        return change

    prepare: dict[str, Callable[[int], None]] = {
        "warm": fill_cache,
        "changed": edit(corpus.changed),
        "fix-hook": edit(corpus.changed),
        "plain": edit(corpus.plain),
    }
    tools = [tool for tool in TOOLS if tool not in options.skip]
    if options.baseline is not None:
        baseline_env = {**environment, "PYTHONPATH": str(options.baseline)}
        for tool in OURS:
            if tool in tools:
                commands[f"base-{tool}"] = (commands[tool][0], baseline_env)
                tools.insert(tools.index(tool) + 1, f"base-{tool}")
        prepare.update({f"base-{tool}": prepare[tool] for tool in OURS if tool in prepare})
        prepare["base-warm"] = lambda rep: untimed([*cachelint, "."], corpus.root, baseline_env)
        untimed([*cachelint, "--no-cache", "."], corpus.root, baseline_env)
    untimed([*cachelint, "--no-cache", "."], corpus.root, environment)  # page cache and bytecode
    runs = {tool: Runs() for tool in tools}
    slow_repeat = options.slow_repeat if options.slow_repeat is not None else options.repeat
    quick_repeat = options.quick_repeat if options.quick_repeat is not None else 3 * options.repeat
    repeats = dict.fromkeys(runs, options.repeat)  # timed runs of each command
    for tool in runs:
        if tool.removeprefix("base-") in QUICK:
            repeats[tool] = quick_repeat
        elif tool in SLOW:
            repeats[tool] = min(slow_repeat, options.repeat)
    try:
        for rep in range(max(repeats.values())):
            for tool in round_order(list(runs), rep):
                if rep >= repeats[tool]:
                    continue
                if tool in prepare:
                    prepare[tool](rep)
                command, env = commands[tool]
                wall, peak, code = measure(command, corpus.root, env)
                log(f"{corpus.name} #{rep + 1} {LABELS[tool]}: {wall:.2f} s, {peak / 2**20:.0f} MB, exit {code}")
                runs[tool].walls.append(wall)
                runs[tool].peaks.append(peak)
                runs[tool].codes.add(code)
    finally:
        for path, original in originals.items():
            path.write_bytes(original)
    return runs


def round_order(tools: list[str], rep: int) -> list[str]:
    """The commands of round `rep`: each baseline command (`base-...`) right after its partner, and
    right before it in every other round, so that what ran just before the pair favours neither side."""
    order = list(tools)
    if rep % 2:
        for index, tool in enumerate(order):
            if tool.startswith("base-"):
                order[index - 1], order[index] = tool, order[index - 1]
    return order


STAGES = {
    "trigger": re.compile(r"cachelint: (\d+) files? holds? a trigger word"),
    "up front": re.compile(r"cachelint: summarized up front: (\d+) file"),
    "on demand": re.compile(r"cachelint: summarized on demand: (\d+) file"),
    "projects": re.compile(r"cachelint: found \d+ files? to check in (\d+) project"),
}


def count_stages(corpus: Corpus, env: dict[str, str]) -> dict[str, int]:
    """How many files each stage of a cold run touches (`check --no-cache -v`)."""
    command = [sys.executable, "-m", "cachelint", "check", "--no-cache", "-v", "."]
    output = subprocess.run(command, cwd=corpus.root, env=env, capture_output=True, text=True, check=False).stderr
    found = {}
    for stage, pattern in STAGES.items():
        match = pattern.search(output)
        if match is None:
            raise SystemExit(f"{corpus.name}: `check -v` printed no {stage} count:\n{output}")
        found[stage] = int(match.group(1))
    return found


def untimed(command: list[str], cwd: Path, env: dict[str, str]) -> None:
    subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def print_report(corpora: list[Corpus], results: dict[str, dict[str, Runs]]) -> None:
    print(f"Machine: {machine()}")
    print(f"Python {platform.python_version()}; load average (1, 5, 15 min) {START_LOAD} at start, {load()} at end")
    print()
    header = f"{'corpus':<8} {'command':<42} {'runs':>4} {'median s':>9} {'min-max s':>14} {'peak RSS MB':>12}"
    print(header)
    print("-" * len(header))
    for corpus in corpora:
        label = f"{corpus.name} ({corpus.files} files, {corpus.lines // 1000}k lines)"
        print(label)
        if not results[corpus.name]:
            continue
        for tool, runs in results[corpus.name].items():
            if not runs.walls:
                continue
            spread = f"{min(runs.walls):.2f}-{max(runs.walls):.2f}"
            peak = max(runs.peaks) / 2**20
            print(f"{'':<8} {LABELS[tool]:<42} {len(runs.walls):>4} {median(runs):>9.2f} {spread:>14} {peak:>12.0f}")
    print()
    print("Files each cold run touched (`check --no-cache -v`):")
    for corpus in corpora:
        stages = corpus.stages
        print(
            f"  {corpus.name}: {corpus.files} files in {stages['projects']} project(s); {stages['trigger']} hold a "
            f"trigger word; summarized {stages['up front']} up front, {stages['on demand']} on demand"
        )
    print()
    print("Ratios (medians of this run):")
    for corpus in corpora:
        found = results[corpus.name]
        if "cold" not in found:
            continue
        cold = median(found["cold"])
        for peer in ("fixit", "ruff-all", "ruff-silent", "ruff-e9", "libcst"):
            if peer in found and found[peer].walls:
                print(f"  {corpus.name}: cachelint cold / {LABELS[peer]} = {cold / median(found[peer]):.3f}")
    print()
    print("Targets:")
    for line in targets(corpora, results):
        print(f"  {line}")


def median(runs: Runs) -> float:
    return statistics.median(runs.walls)


def targets(corpora: list[Corpus], results: dict[str, dict[str, Runs]]) -> list[str]:
    lines = []

    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT MET"

    for corpus in corpora:
        runs = results[corpus.name]

        def value(tool: str, runs: dict[str, Runs] = runs) -> float | None:
            return median(runs[tool]) if tool in runs and runs[tool].walls else None

        cold, fixit, ruff_all = value("cold"), value("fixit"), value("ruff-all")
        if corpus.name == "rl" and cold and fixit:
            lines.append(f"rl cold at least 50x faster than Fixit: {fixit / cold:.1f}x, {verdict(fixit / cold >= 50)}")
        if cold and ruff_all and corpus.name not in LARGE:
            limit = 3 if corpus.name == "rl" else 5
            ratio = cold / ruff_all
            lines.append(f"{corpus.name} cold at most {limit}x ruff ALL: {ratio:.2f}x, {verdict(ratio <= limit)}")
        warm, changed = value("warm"), value("changed")
        if corpus.name == "rl" and warm is not None:
            lines.append(f"rl warm under 0.5 s: {warm:.2f} s, {verdict(warm < 0.5)}")
        if corpus.name == "rl" and changed is not None:
            lines.append(f"rl one changed file under 0.4 s: {changed:.2f} s, {verdict(changed < 0.4)}")
        silent = value("ruff-silent")
        if corpus.name in LARGE and cold and silent:
            ratio, limit = cold / silent, SILENT_LIMITS[corpus.name]
            lines.append(
                f"{corpus.name} cold at most {limit}x ruff ALL --silent: {ratio:.2f}x, {verdict(ratio <= limit)}"
            )
        if corpus.name in LARGE and warm is not None:
            lines.append(f"{corpus.name} warm under 0.2 s: {warm:.2f} s, {verdict(warm < 0.2)}")
        peaks = [max(runs[tool].peaks) for tool in OURS if tool in runs and runs[tool].peaks]
        if peaks:
            peak = max(peaks) / 2**20
            lines.append(f"{corpus.name} cachelint peak RSS under 300 MB: {peak:.0f} MB, {verdict(peak < 300)}")
    lines.extend(growth(corpora, results, verdict))
    for corpus in corpora:
        runs = results[corpus.name]
        for tool in OURS:
            base = f"base-{tool}"
            if tool == "sarif":  # shown, not judged: an older baseline (64358da) makes no fix edits there
                continue
            if tool in runs and base in runs and runs[tool].walls and runs[base].walls:
                ratio = median(runs[tool]) / median(runs[base])
                lines.append(
                    f"{corpus.name} {SHORT[tool]} no slower than the baseline (5% for noise): "
                    f"{ratio:.2f}x, {verdict(ratio <= 1.05)}"
                )
    return lines


def growth(corpora: list[Corpus], results: dict[str, dict[str, Runs]], verdict: Callable[[bool], str]) -> list[str]:
    """Whether the cold time grows from the base corpus to the largest tree no faster than the number of
    files that hold a trigger word."""
    by_name = {corpus.name: corpus for corpus in corpora}
    large = [corpus for corpus in corpora if corpus.name in LARGE and "cold" in results[corpus.name]]
    if BASE not in by_name or "cold" not in results[BASE] or not large:
        return []
    base, largest = by_name[BASE], max(large, key=lambda corpus: corpus.files)
    time_growth = median(results[largest.name]["cold"]) / median(results[BASE]["cold"])
    trigger_growth = largest.stages["trigger"] / base.stages["trigger"]
    return [
        f"cold time from {BASE} to {largest.name} grows no faster than the files holding a trigger word: "
        f"time x{time_growth:.2f}, trigger files x{trigger_growth:.2f} ({base.stages['trigger']} to "
        f"{largest.stages['trigger']}), {verdict(time_growth <= trigger_growth)}"
    ]


def machine() -> str:
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model}, {cores} cores usable, {platform.system()} {platform.release()}"


def load() -> str:
    if hasattr(os, "getloadavg"):
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    return "unknown"


START_LOAD = load()

if __name__ == "__main__":
    started = time.perf_counter()
    main()
    log(f"done in {time.perf_counter() - started:.0f} s")
