"""The persistent cache and the process pool change nothing but speed: findings are identical with and
without the cache, cold and warm, serial and parallel; a broken or unwritable cache is reported once
and otherwise ignored; a changed setting or release never reads what an older run stored."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_runner import DEMO, NO_PIN_WARNING, cachelint, check, environment, write_tree
from fixture_cases import FIXTURES, Case, analyze_case, rule_cases

import cachelint as package
from cachelint import cache as cache_module
from cachelint import engine, parallel
from cachelint.cache import CACHEDIR_TAG, DATABASE, OWN_FILES, FileRecord
from cachelint.config import Settings
from cachelint.engine import recording
from cachelint.finding import Finding

CASES = [*rule_cases(), Case("demo", FIXTURES / "demo")]


def copy_demo(folder: Path) -> Path:
    project = folder / "demo"
    shutil.copytree(DEMO, project, ignore=shutil.ignore_patterns(".cachelint_cache"))
    return project


# The cache folder of these tests, below the project root as every cache folder is.
CACHE = "cache"
CACHED = Settings(cache_dir=CACHE)


def copy_case(case: Case, folder: Path) -> Case:
    """The case copied into `folder`: a run with the cache writes into the project it checks (a file
    of no project gets no cache, so a single-file case goes into a project that pins nothing)."""
    target = folder / case.path.name
    if case.path.is_dir():
        shutil.copytree(case.path, target, ignore=shutil.ignore_patterns(".cachelint_cache", "__pycache__"))
    else:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "pyproject.toml").write_text('[project]\nname = "case"\nversion = "0"\n', encoding="utf-8")
        shutil.copyfile(case.path, target)
    return Case(case.code, target)


def cache_of(case: Case) -> Path:
    return (case.path if case.path.is_dir() else case.path.parent) / CACHE


def forget_runs(folder: Path) -> None:
    """Drop the stored findings of whole runs, so that the next run rebuilds them from file entries."""
    with sqlite3.connect(folder / DATABASE) as connection:
        connection.execute("DELETE FROM entries WHERE key LIKE 'run:%'")
    connection.close()


def rows(folder: Path) -> dict[str, str]:
    with sqlite3.connect(folder / DATABASE) as connection:
        found = dict(connection.execute("SELECT key, value FROM entries"))
    connection.close()
    return found


def rewrite_file_entries(folder: Path, record: FileRecord) -> None:
    with sqlite3.connect(folder / DATABASE) as connection:
        connection.execute("UPDATE entries SET value = ? WHERE key NOT LIKE 'run:%'", (record.to_text(),))
        connection.execute("DELETE FROM entries WHERE key LIKE 'run:%'")
    connection.close()


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_findings_are_identical_with_and_without_cache_serial_and_parallel(
    case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = copy_case(case, tmp_path)
    expected = analyze_case(case, workers=1).findings
    assert analyze_case(case, workers=2).findings == expected, "parallel differs from serial"
    with monkeypatch.context() as patched:  # the pool also looks for the trigger words (a large project)
        patched.setattr(engine, "SCAN_POOL_BYTES", 0)
        assert analyze_case(case, workers=2).findings == expected, "looked at over the pool"
        assert analyze_case(case, CACHED, use_cache=True, workers=2).findings == expected, "cold cache (parallel)"
    assert analyze_case(case, CACHED, use_cache=True, workers=1).findings == expected, "warm cache (whole run)"
    forget_runs(cache_of(case))
    assert analyze_case(case, CACHED, use_cache=True, workers=1).findings == expected, "warm cache (file entries)"
    assert analyze_case(case, CACHED, use_cache=True, workers=1).warnings == []


def test_warm_run_reads_file_entries_instead_of_parsing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = CACHED
    demo = Case("demo", copy_demo(tmp_path))
    expected = analyze_case(demo, settings, use_cache=True).findings
    forget_runs(cache_of(demo))

    def no_parsing(tasks: object) -> list[object]:
        raise AssertionError(f"parsed although cached: {tasks}")

    monkeypatch.setattr("cachelint.engine.examine_files", no_parsing)
    assert analyze_case(demo, settings, use_cache=True).findings == expected


def test_cache_folder_is_tagged_and_ignored_by_git(tmp_path: Path) -> None:
    demo = Case("demo", copy_demo(tmp_path))
    analyze_case(demo, CACHED, use_cache=True)
    tag = (cache_of(demo) / "CACHEDIR.TAG").read_text(encoding="utf-8")
    assert tag.startswith("Signature: 8a477f597d28d172789f06886806bc55\n")
    assert tag == CACHEDIR_TAG
    assert (cache_of(demo) / ".gitignore").read_text(encoding="utf-8").splitlines()[-1] == "*"


def test_default_cache_folder_is_in_the_project_root(tmp_path: Path) -> None:
    project = copy_demo(tmp_path)
    first = check("--output-format", "concise", cwd=project)
    assert (project / ".cachelint_cache" / DATABASE).is_file()
    assert check("--output-format", "concise", cwd=project) == first


def test_no_cache_flag_neither_reads_nor_writes(tmp_path: Path) -> None:
    project = copy_demo(tmp_path)
    result = check("--no-cache", "--output-format", "concise", cwd=project)
    assert result.code == 1
    assert not (project / ".cachelint_cache").exists()


def project_files(project: Path) -> dict[str, bytes]:
    return {
        path.relative_to(project).as_posix(): path.read_bytes()
        for path in sorted(project.rglob("*"))
        if path.is_file() and ".cachelint_cache" not in path.parts
    }


@pytest.mark.parametrize("flags", [("--fix",), ("--fix", "--unsafe-fixes"), ("--add-noqa",)])
def test_writing_runs_with_a_warm_cache_write_what_runs_without_one_write(tmp_path: Path, flags: tuple[str]) -> None:
    uncached = copy_demo(tmp_path / "uncached")
    expected = check(*flags, "--no-cache", "--output-format", "concise", cwd=uncached)
    assert not (uncached / ".cachelint_cache").exists()
    cold = copy_demo(tmp_path / "cold")
    assert check(*flags, "--output-format", "concise", cwd=cold) == expected
    assert (cold / ".cachelint_cache" / DATABASE).is_file()
    warm = copy_demo(tmp_path / "warm")
    check("--output-format", "concise", cwd=warm)
    assert check(*flags, "--output-format", "concise", cwd=warm) == expected
    assert project_files(warm) == project_files(uncached) != project_files(DEMO)
    assert check("--output-format", "concise", cwd=warm) == check("--no-cache", "--output-format", "concise", cwd=warm)


def test_fix_parses_only_the_files_it_changed_when_the_cache_is_warm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cachelint import engine
    from cachelint.fixes import fix_to_fixed_point, write_changes

    project = copy_demo(tmp_path)
    monkeypatch.chdir(project)
    settings = CACHED
    analyze_case(Case("demo", project), settings, use_cache=True)
    parsed: list[bytes | str] = []
    examine_files = engine.examine_files

    def recording(tasks: list[engine.Task]) -> list[engine.Outcome]:
        parsed.extend(task[0] for task in tasks)
        return examine_files(tasks)

    monkeypatch.setattr(engine, "examine_files", recording)
    outcome = fix_to_fixed_point([Path()], settings, unsafe=True, use_cache=True)
    assert outcome.fixed > 0 and write_changes(outcome) == []
    fixed = {file.source.encode(file.text) for file in outcome.changed}
    assert parsed and all((text if isinstance(text, bytes) else text.encode()) in fixed for text in parsed)


def test_changed_setting_never_reads_entries_of_other_settings(tmp_path: Path) -> None:
    demo = Case("demo", copy_demo(tmp_path))
    folder = cache_of(demo)
    analyze_case(demo, CACHED, use_cache=True)
    rewrite_file_entries(folder, FileRecord(trigger=False))
    assert analyze_case(demo, CACHED, use_cache=True).findings == [], "the doctored entries are read"
    changed = dataclasses.replace(CACHED, extend_refit_functions=("some_other_refit",))
    assert analyze_case(demo, changed, use_cache=True).findings == analyze_case(demo, changed).findings != []


def test_settings_hash_covers_all_but_presentation() -> None:
    base = Settings()
    assert (
        dataclasses.replace(base, output_format="json", cache_dir="elsewhere").analysis_hash() == base.analysis_hash()
    )
    for change in ({"multimodal": False}, {"exclude": ("tests",)}, {"version_helpers": ("vllm_at_least",)}):
        assert dataclasses.replace(base, **change).analysis_hash() != base.analysis_hash(), change


def test_new_release_never_reads_entries_of_an_older_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    demo = Case("demo", copy_demo(tmp_path))
    folder = cache_of(demo)
    expected = analyze_case(demo).findings
    analyze_case(demo, CACHED, use_cache=True)
    rewrite_file_entries(folder, FileRecord(trigger=False))
    monkeypatch.setattr(package, "__version__", package.__version__ + ".post1")
    assert analyze_case(demo, CACHED, use_cache=True).findings == expected


def test_the_package_s_files_are_looked_up_once_for_every_project_of_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("first", "second"):
        copy_demo(tmp_path / name)
    looked_up: list[Path] = []

    def package_files(folder: Path) -> Any:
        looked_up.append(folder)
        return real(folder)

    real = cache_module._package_files
    monkeypatch.setattr(cache_module, "_package_files", package_files)
    cache_module._package_stamp.cache_clear()
    analysis = engine.analyze([tmp_path], CACHED, use_cache=True)
    assert {report.root.parent.name for report in analysis.projects} == {"first", "second"}
    assert looked_up.count(Path(cache_module.__file__).parent) == 1  # not once a project


def test_changed_file_is_analysed_again(tmp_path: Path) -> None:
    project = copy_demo(tmp_path)
    case = Case("demo", project)
    settings = CACHED
    before = analyze_case(case, settings, use_cache=True).findings
    changed = before[0].path
    (project / changed).write_text("\n\n" + (project / changed).read_text(encoding="utf-8"), encoding="utf-8")
    after = analyze_case(case, settings, use_cache=True).findings
    assert after == analyze_case(case).findings
    assert {(f.code, f.span.line - 2) for f in after if f.path == changed} == {
        (f.code, f.span.line) for f in before if f.path == changed
    }


def test_a_pin_that_names_an_oldest_release_is_a_new_run(tmp_path: Path) -> None:
    """`<0.5.21` and `>=0.4.6,<0.5.21` hold the same releases, from the same file, but only the second
    says the project runs on 0.4.6-0.5.3, which lack the method called."""
    rollout = (
        "import sglang as sgl\n\n\nclass Rollout:\n    def __init__(self, path):\n"
        "        self.engine = sgl.Engine(model_path=path)\n\n"
        "    def update_weights(self, handles):\n        self.engine.update_weights_from_ipc(handles)\n"
    )
    project = write_tree(tmp_path / "project", {"rollout.py": rollout, "requirements.txt": "sglang<0.5.21\n"})
    unsaid = engine.analyze([project], CACHED, use_cache=True)
    (project / "requirements.txt").write_text("sglang>=0.4.6,<0.5.21\n", encoding="utf-8")
    said = engine.analyze([project], CACHED, use_cache=True)
    ranges = [analysis.projects[0].sglang for analysis in (unsaid, said)]
    assert ranges[0] is not None and ranges[1] is not None and ranges[0].releases == ranges[1].releases
    assert [finding.code for finding in unsaid.findings] == []
    assert [finding.code for finding in said.findings] == ["CL204"]


def corrupt_database(folder: Path) -> None:
    (folder / DATABASE).write_bytes(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        (folder / (DATABASE + suffix)).unlink(missing_ok=True)


def test_corrupt_database_is_ignored_and_reported_once(tmp_path: Path) -> None:
    project = copy_demo(tmp_path)
    expected = check("--no-cache", "--output-format", "concise", cwd=project)
    check("--output-format", "concise", cwd=project)
    corrupt_database(project / ".cachelint_cache")
    result = check("--output-format", "concise", cwd=project)
    assert (result.code, result.stdout) == (expected.code, expected.stdout)
    assert len(result.stderr_lines) == 1
    assert result.stderr.startswith("cachelint: warning: ") and "the cache is off" in result.stderr


@pytest.mark.parametrize("column", ["value", "summary"])
def test_truncated_entry_is_ignored_reported_once_and_rewritten(tmp_path: Path, column: str) -> None:
    demo = Case("demo", copy_demo(tmp_path))
    folder = cache_of(demo)
    expected = analyze_case(demo, CACHED, use_cache=True).findings
    with sqlite3.connect(folder / DATABASE) as connection:
        connection.execute("DELETE FROM entries WHERE key LIKE 'run:%'")
        connection.execute(f"UPDATE entries SET {column} = substr({column}, 1, length({column}) / 2)")
    connection.close()
    damaged = analyze_case(demo, CACHED, use_cache=True)
    assert damaged.findings == expected
    assert len(damaged.warnings) == 1 and "corrupt" in damaged.warnings[0]
    forget_runs(folder)
    repaired = analyze_case(demo, CACHED, use_cache=True)
    assert (repaired.findings, repaired.warnings) == (expected, [])


def test_cache_folder_that_cannot_be_created_is_reported_once(tmp_path: Path) -> None:
    demo = Case("demo", copy_demo(tmp_path))
    (demo.path / "a-file").write_text("", encoding="utf-8")
    analysis = analyze_case(demo, Settings(cache_dir="a-file/cache"), use_cache=True)
    assert analysis.findings == analyze_case(demo).findings
    assert len(analysis.warnings) == 1 and "the cache is off" in analysis.warnings[0]


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write to read-only folders")
def test_read_only_cache_folder_is_reported_once(tmp_path: Path) -> None:
    project = copy_demo(tmp_path)
    check("--output-format", "concise", cwd=project)
    changed = next(project.rglob("*.py"))
    changed.write_text("\n" + changed.read_text(encoding="utf-8"), encoding="utf-8")
    expected = check("--no-cache", "--output-format", "concise", cwd=project)
    folder = project / ".cachelint_cache"
    modes = {path: path.stat().st_mode for path in [folder, *folder.iterdir()]}
    try:
        for path in modes:
            path.chmod(0o555 if path.is_dir() else 0o444)
        result = check("--output-format", "concise", cwd=project)
    finally:
        for path, mode in modes.items():
            path.chmod(mode)
    assert (result.code, result.stdout) == (expected.code, expected.stdout)
    assert len(result.stderr_lines) == 1 and "the cache is off" in result.stderr


def test_database_that_cannot_be_written_is_reported_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = copy_demo(tmp_path)
    case = Case("demo", project)
    settings = CACHED
    analyze_case(case, settings, use_cache=True)
    changed = next(project.rglob("*.py"))
    changed.write_text("\n" + changed.read_text(encoding="utf-8"), encoding="utf-8")
    connect = sqlite3.connect

    def read_only(database: Path, **options: object) -> sqlite3.Connection:
        return connect(f"{Path(database).as_uri()}?mode=ro", uri=True, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite3, "connect", read_only)
    analysis = analyze_case(case, settings, use_cache=True)
    assert analysis.findings == analyze_case(case).findings
    assert len(analysis.warnings) == 1 and "the cache is off" in analysis.warnings[0]


def test_concurrent_runs_share_one_cache(tmp_path: Path) -> None:
    project = copy_demo(tmp_path)
    expected = check("--no-cache", "--output-format", "concise", cwd=project)
    command = [sys.executable, "-m", "cachelint", "check", "--output-format", "concise"]
    runs = [
        subprocess.Popen(command, cwd=project, env=environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(6)
    ]
    outputs = []
    for process in runs:
        stdout, stderr = process.communicate(timeout=300)
        outputs.append((process.returncode, stdout.decode(), stderr.decode()))
    assert outputs == [(expected.code, expected.stdout, "")] * len(runs)
    with sqlite3.connect(project / ".cachelint_cache" / DATABASE) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    connection.close()
    assert check("--output-format", "concise", cwd=project) == expected


def test_clean_removes_the_cache_folder(tmp_path: Path) -> None:
    project = copy_demo(tmp_path)
    check("--output-format", "concise", cwd=project)
    result = cachelint("clean", cwd=project)
    assert result.code == 0
    assert result.stdout.startswith("Removed ") and result.stdout.rstrip().endswith(".cachelint_cache")
    assert not (project / ".cachelint_cache").exists()
    assert cachelint("clean", cwd=project).stdout.startswith("No cache to remove")


def test_clean_refuses_a_folder_that_is_not_a_cache(tmp_path: Path) -> None:
    project = copy_demo(tmp_path)
    (project / "pyproject.toml").write_text('[tool.cachelint]\ncache-dir = "demo_rl"\n', encoding="utf-8")
    result = cachelint("clean", cwd=project)
    assert result.code == 2
    assert "not removing" in result.stderr
    assert (project / "demo_rl").is_dir()


# -- the cache folder: one cachelint made, below the project root; `clean` removes only its files ----


def snapshot(root: Path) -> dict[str, bytes | str | None]:
    """Every entry under `root`: a file's bytes, a link's target (as text), None for a folder."""
    found: dict[str, bytes | str | None] = {}
    for folder, folders, files in os.walk(root):
        for name in [*folders, *files]:
            path = Path(folder, name)
            relative = path.relative_to(root).as_posix()
            if path.is_symlink():
                found[relative] = str(path.readlink())
            else:
                found[relative] = None if path.is_dir() else path.read_bytes()
    return found


def user_world(tmp_path: Path, cache_dir: str | None = None) -> tuple[Path, dict[str, str]]:
    """A git checkout of the demo below a home folder, with a folder beside it; the project and the
    environment (HOME set to that home folder) to run cachelint in."""
    home = tmp_path / "home"
    (home / "notes.txt").parent.mkdir(parents=True)
    (home / "notes.txt").write_text("mine\n", encoding="utf-8")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "data.txt").write_text("theirs\n", encoding="utf-8")
    project = copy_demo(home / "repo")
    (project / ".git").mkdir()
    (project / ".git" / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    if cache_dir is not None:
        table = f"[tool.cachelint]\ncache-dir = {json.dumps(cache_dir)}\n"
        (project / "pyproject.toml").write_text(PYPROJECT_PINS + table, encoding="utf-8")
    return project, {"HOME": str(home)}


PYPROJECT_PINS = '[project]\nname = "demo"\ndependencies = ["vllm>=0.16,<0.22"]\n'


@pytest.mark.parametrize(
    "cache_dir",
    [".", "", "~", "~/cache", "..", "../cache", "sub/../..", "OUTSIDE", "a\0b"],
    ids=["dot", "empty", "home", "in-home", "parent", "beside", "back-up", "absolute", "nul"],
)
def test_cache_dir_not_below_the_project_root_is_refused_and_nothing_is_written_or_removed(
    tmp_path: Path, cache_dir: str
) -> None:
    cache_dir = cache_dir.replace("OUTSIDE", str(tmp_path / "outside"))
    project, env = user_world(tmp_path, cache_dir)
    before = snapshot(tmp_path)
    expected = [
        f"cachelint: error: {project / 'pyproject.toml'}: `cache-dir` must be a folder path below the project root, "
        f"relative to it, got {cache_dir!r}"
    ]
    for command in (("check", "--output-format", "concise"), ("check", "--fix"), ("clean",)):
        result = cachelint(*command, cwd=project, env=env)
        assert (result.code, result.stderr_lines, result.stdout) == (2, expected, ""), command
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("link", ["cache-folder", "folder-on-the-way", "database", "dangling-database", "wal"])
def test_symbolic_links_in_the_cache_turn_it_off_and_nothing_outside_is_written_or_removed(
    tmp_path: Path, link: str
) -> None:
    project, env = user_world(tmp_path, "build/cache" if link == "folder-on-the-way" else None)
    outside = tmp_path / "outside"
    cache = project / ".cachelint_cache"
    expected = check("--no-cache", "--output-format", "concise", cwd=project, env=env)
    if link == "cache-folder":
        cache.symlink_to(outside, target_is_directory=True)
        problem = "it is a symbolic link"
    elif link == "folder-on-the-way":
        (project / "build").symlink_to(outside, target_is_directory=True)
        cache = project / "build" / "cache"
        problem = f"{project / 'build'} is a symbolic link"
    else:
        check("--output-format", "concise", cwd=project, env=env)  # a cache cachelint made
        name = {"wal": f"{DATABASE}-wal"}.get(link, DATABASE)
        (cache / name).unlink(missing_ok=True)
        (cache / name).symlink_to(outside / ("data.txt" if link != "dangling-database" else "new.sqlite3"))
        problem = f"its {name} is a symbolic link"
    before = snapshot(tmp_path)
    result = check("--output-format", "concise", cwd=project, env=env)
    assert (result.code, result.stdout) == (expected.code, expected.stdout)
    assert result.stderr_lines == [
        f"cachelint: warning: not using the cache in {cache}: {problem}; the cache is off for this run"
    ]
    assert snapshot(tmp_path) == before
    cleaned = cachelint("clean", cwd=project, env=env)
    assert snapshot(outside) == {"data.txt": b"theirs\n"}
    after = snapshot(tmp_path)
    if link in ("cache-folder", "folder-on-the-way"):
        assert cleaned.code == 2 and "not removing" in cleaned.stderr
        assert after == before
    else:  # cachelint's own files go; the link stays, and so the folder
        assert (cleaned.code, cleaned.stderr) == (0, "")
        assert sorted(path.name for path in cache.iterdir()) == [name]
        inside = cache.relative_to(tmp_path).as_posix() + "/"
        assert after == {
            key: value for key, value in before.items() if not key.startswith(inside) or key.endswith(name)
        }


def test_a_cache_folder_cachelint_did_not_make_is_neither_used_nor_removed(tmp_path: Path) -> None:
    project, env = user_world(tmp_path)
    (project / ".cachelint_cache").mkdir()
    (project / ".cachelint_cache" / "keep.txt").write_text("a file of the user's\n", encoding="utf-8")
    before = snapshot(tmp_path)
    result = check("--output-format", "concise", cwd=project, env=env)
    assert result.code == 1
    assert result.stderr_lines == [
        f"cachelint: warning: not using the cache in {project / '.cachelint_cache'}: cachelint did not create this "
        "folder (it has no CACHEDIR.TAG of cachelint's); the cache is off for this run"
    ]
    cleaned = cachelint("clean", cwd=project, env=env)
    assert cleaned.code == 2 and "not removing" in cleaned.stderr
    assert snapshot(tmp_path) == before


def test_clean_removes_only_the_files_cachelint_writes(tmp_path: Path) -> None:
    project, env = user_world(tmp_path)
    check("--output-format", "concise", cwd=project, env=env)
    cache = project / ".cachelint_cache"
    assert {path.name for path in cache.iterdir()} <= set(OWN_FILES)
    (cache / "notes.txt").write_text("put here by hand\n", encoding="utf-8")
    (cache / "sub").mkdir()
    (cache / "sub" / "more.txt").write_text("and here\n", encoding="utf-8")
    result = cachelint("clean", cwd=project, env=env)
    assert result.code == 0
    assert result.stdout == f"Removed the cache files in {cache}; the folder holds other files and stays\n"
    assert snapshot(cache) == {"notes.txt": b"put here by hand\n", "sub": None, "sub/more.txt": b"and here\n"}


@pytest.mark.parametrize("where", ["missing/deeper/server.py", "/nonexistent-cachelint-test/server.py"])
def test_stdin_filename_in_a_folder_that_does_not_exist_creates_nothing(tmp_path: Path, where: str) -> None:
    missing = Path(where).parent if where.startswith("/") else tmp_path / "missing"
    assert not missing.exists()
    top = sorted(Path("/").iterdir())
    source = (DEMO / "demo_rl" / "worker_extension.py").read_text(encoding="utf-8")
    result = check("--stdin-filename", where, "--output-format", "concise", cwd=tmp_path, stdin=source)
    assert result.code == 1, result.stderr
    # No project, so no pin, and no cache.
    assert result.stderr_lines == [NO_PIN_WARNING.replace("found:", f"found in {where.rsplit('/', 1)[0]}:")]
    assert not missing.exists()
    assert list(tmp_path.iterdir()) == []
    assert sorted(Path("/").iterdir()) == top


def test_a_file_in_no_project_gets_no_cache(tmp_path: Path) -> None:
    # A folder no project file, repository or requirements file marks (as /etc is): the file is
    # analysed, and nothing is created beside it, whether it is named, walked or read from stdin.
    loose = tmp_path / "etc"
    source = (DEMO / "demo_rl" / "worker_extension.py").read_text(encoding="utf-8")
    write_tree(loose, {"worker.py": source})
    for args, stdin in (
        (("--stdin-filename", loose / "x.py"), source),
        (("--stdin-filename", loose / "x.py", "-"), source),
        ((loose / "worker.py",), None),
        ((loose,), None),
    ):
        result = check(*args, "--output-format", "concise", cwd=tmp_path, stdin=stdin)
        assert result.code == 1, result.stderr
        assert ": CL001 " in result.stdout
        assert sorted(path.name for path in loose.iterdir()) == ["worker.py"], args
    assert sorted(path.name for path in tmp_path.iterdir()) == ["etc"]


def test_clean_of_a_missing_path_is_an_error(tmp_path: Path) -> None:
    # Its project would be the nearest folder that exists: `/` for /nonexistent.
    for missing in (tmp_path / "gone", Path("/nonexistent-cachelint-test/a.py")):
        result = cachelint("clean", missing, cwd=tmp_path)
        assert result.code == 2
        assert result.stdout == ""
        assert result.stderr_lines == [f"cachelint: error: {missing}: No such file or directory"]


def _report_pool_state(items: list[int]) -> list[tuple[int, bool]]:
    return [(item, parallel.can_start_pool()) for item in items]


def test_pool_keeps_item_order_and_never_nests() -> None:
    items = list(range(40))
    sizes = [(item * 7919) % 23 for item in items]
    with parallel.Workers(2) as workers:
        results = workers.map(_report_pool_state, items, sizes)
    assert results == [(item, False) for item in items]
    assert parallel.can_start_pool()


def told_progress(told: list[tuple[int, int]]) -> Any:
    return lambda done, total: told.append((done, total))


def test_a_large_project_is_looked_at_over_the_pool_as_in_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With enough bytes, the pool looks for trigger words and summarizes the files holding one on the
    way: the same findings, file records and counts as one process looking at every file."""
    project = copy_demo(tmp_path)
    (project / "broken_refit.py").write_text("def update_weights(self):\n    self.llm.reset_prefix_cache(\n")
    (project / "plain.py").write_text("def helper():\n    return 1\n")
    serial, pooled = Settings(cache_dir="serial"), Settings(cache_dir="pooled")
    with recording() as one_process:
        expected = analyze_case(Case("demo", project), serial, use_cache=True, workers=1)
    works: list[str] = []
    told: list[tuple[int, int]] = []
    told_while_looking: list[int] = []
    original = parallel.Workers.map

    def spied(self: parallel.Workers, work: Any, *rest: Any, **options: Any) -> Any:
        works.append(work.__name__)
        results = original(self, work, *rest, **options)
        if work.__name__ == "scan_files":
            told_while_looking.append(len(told))
        return results

    monkeypatch.setattr(parallel.Workers, "map", spied)
    monkeypatch.setattr(engine, "SCAN_POOL_BYTES", sum(len(path.read_bytes()) for path in project.rglob("*.py")))
    with recording() as over_the_pool:
        found = analyze_case(Case("demo", project), pooled, use_cache=True, workers=2, progress=told_progress(told))
    assert works[0] == "scan_files"
    files = len(list(project.rglob("*.py")))
    assert told_while_looking[0] > 0, "the bar moves on as the pool looks at the files"
    assert told[-1] == (files, files) and told == sorted(told)
    assert found.findings == expected.findings
    assert any(finding.code == "invalid-syntax" and finding.path == "broken_refit.py" for finding in found.findings)
    assert rows(project / "pooled") == rows(project / "serial")
    for name in ("trigger", "ruled"):
        assert getattr(over_the_pool, name) == getattr(one_process, name)
    assert over_the_pool.summarized == one_process.summarized


def test_what_waits_for_the_pool_is_loaded_once_while_it_works() -> None:
    loaded: list[int] = []

    def load() -> None:
        loaded.append(os.getpid())

    parallel.load_while_waiting(load)
    parallel.load_while_waiting(load)  # asked twice, loaded once
    items = list(range(8))
    with parallel.Workers(2) as workers:
        assert workers.map(_report_pool_state, items, [1] * len(items)) == [(item, False) for item in items]
        assert loaded == [os.getpid()]
        workers.map(_report_pool_state, items, [1] * len(items))
    assert loaded == [os.getpid()]


@pytest.mark.skipif(parallel.available_cores() < 2, reason="one core: no pool")
def test_a_running_pool_takes_smaller_batches() -> None:
    """Starting a pool pays only for MIN_PARALLEL_WORK; once it runs, MIN_POOLED_WORK is enough."""
    items = list(range(4))

    def in_workers(work: int) -> bool:
        results = workers.map(_report_pool_state, items, [work // len(items)] * len(items))
        return not any(can_start for _, can_start in results)  # a worker may start no pool

    with parallel.Workers() as workers:
        assert not in_workers(parallel.MIN_PARALLEL_WORK - 4), "no pool started for this little"
        assert in_workers(parallel.MIN_PARALLEL_WORK)
        assert in_workers(parallel.MIN_POOLED_WORK)
        assert not in_workers(parallel.MIN_POOLED_WORK - 4)


def test_small_work_stays_in_this_process() -> None:
    assert parallel.worker_count(parallel.MIN_PARALLEL_WORK - 1) == 1
    assert parallel.worker_count(parallel.MIN_PARALLEL_WORK) == parallel.available_cores()


def test_findings_round_trip_through_json() -> None:
    findings = analyze_case(Case("demo", DEMO)).findings
    assert any(finding.chain for finding in findings)  # CL003's path from the weight update is kept too
    assert [Finding.from_json(finding.to_json()) for finding in findings] == findings
