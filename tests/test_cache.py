"""The persistent cache and the process pool change nothing but speed: findings are identical with and
without the cache, cold and warm, serial and parallel; a broken or unwritable cache is reported once
and otherwise ignored; a changed setting or release never reads what an older run stored."""

from __future__ import annotations

import dataclasses
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import DEMO, cachelint, check, environment
from fixture_cases import FIXTURES, Case, analyze_case, rule_cases

import cachelint as package
from cachelint import parallel
from cachelint.cache import CACHEDIR_TAG, DATABASE, FileRecord
from cachelint.config import Settings
from cachelint.finding import Finding

CASES = [*rule_cases(), Case("demo", FIXTURES / "demo")]


def copy_demo(folder: Path) -> Path:
    project = folder / "demo"
    shutil.copytree(DEMO, project, ignore=shutil.ignore_patterns(".cachelint_cache"))
    return project


def cached(folder: Path) -> Settings:
    return Settings(cache_dir=str(folder))


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
def test_findings_are_identical_with_and_without_cache_serial_and_parallel(case: Case, tmp_path: Path) -> None:
    expected = analyze_case(case, workers=1).findings
    assert analyze_case(case, workers=2).findings == expected, "parallel differs from serial"
    settings = cached(tmp_path / "cache")
    assert analyze_case(case, settings, use_cache=True, workers=2).findings == expected, "cold cache (parallel)"
    assert analyze_case(case, settings, use_cache=True, workers=1).findings == expected, "warm cache (whole run)"
    forget_runs(tmp_path / "cache")
    assert analyze_case(case, settings, use_cache=True, workers=1).findings == expected, "warm cache (file entries)"
    assert analyze_case(case, settings, use_cache=True, workers=1).warnings == []


def test_warm_run_reads_file_entries_instead_of_parsing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = cached(tmp_path / "cache")
    demo = Case("demo", DEMO)
    expected = analyze_case(demo, settings, use_cache=True).findings
    forget_runs(tmp_path / "cache")

    def no_parsing(tasks: object) -> list[object]:
        raise AssertionError(f"parsed although cached: {tasks}")

    monkeypatch.setattr("cachelint.engine.examine_files", no_parsing)
    assert analyze_case(demo, settings, use_cache=True).findings == expected


def test_cache_folder_is_tagged_and_ignored_by_git(tmp_path: Path) -> None:
    analyze_case(Case("demo", DEMO), cached(tmp_path / "cache"), use_cache=True)
    tag = (tmp_path / "cache" / "CACHEDIR.TAG").read_text(encoding="utf-8")
    assert tag.startswith("Signature: 8a477f597d28d172789f06886806bc55\n")
    assert tag == CACHEDIR_TAG
    assert (tmp_path / "cache" / ".gitignore").read_text(encoding="utf-8").splitlines()[-1] == "*"


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
    settings = cached(tmp_path / "cache")
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
    folder = tmp_path / "cache"
    demo = Case("demo", DEMO)
    analyze_case(demo, cached(folder), use_cache=True)
    rewrite_file_entries(folder, FileRecord(trigger=False))
    assert analyze_case(demo, cached(folder), use_cache=True).findings == [], "the doctored entries are read"
    changed = dataclasses.replace(cached(folder), extend_refit_functions=("some_other_refit",))
    assert analyze_case(demo, changed, use_cache=True).findings == analyze_case(demo, changed).findings != []


def test_settings_hash_covers_all_but_presentation() -> None:
    base = Settings()
    assert (
        dataclasses.replace(base, output_format="json", cache_dir="elsewhere").analysis_hash() == base.analysis_hash()
    )
    for change in ({"multimodal": False}, {"exclude": ("tests",)}, {"version_helpers": ("vllm_at_least",)}):
        assert dataclasses.replace(base, **change).analysis_hash() != base.analysis_hash(), change


def test_new_release_never_reads_entries_of_an_older_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "cache"
    demo = Case("demo", DEMO)
    expected = analyze_case(demo).findings
    analyze_case(demo, cached(folder), use_cache=True)
    rewrite_file_entries(folder, FileRecord(trigger=False))
    monkeypatch.setattr(package, "__version__", package.__version__ + ".post1")
    assert analyze_case(demo, cached(folder), use_cache=True).findings == expected


def test_changed_file_is_analysed_again(tmp_path: Path) -> None:
    project = copy_demo(tmp_path)
    case = Case("demo", project)
    settings = cached(tmp_path / "cache")
    before = analyze_case(case, settings, use_cache=True).findings
    changed = before[0].path
    (project / changed).write_text("\n\n" + (project / changed).read_text(encoding="utf-8"), encoding="utf-8")
    after = analyze_case(case, settings, use_cache=True).findings
    assert after == analyze_case(case).findings
    assert {(f.code, f.span.line - 2) for f in after if f.path == changed} == {
        (f.code, f.span.line) for f in before if f.path == changed
    }


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
    folder = tmp_path / "cache"
    demo = Case("demo", DEMO)
    expected = analyze_case(demo, cached(folder), use_cache=True).findings
    with sqlite3.connect(folder / DATABASE) as connection:
        connection.execute("DELETE FROM entries WHERE key LIKE 'run:%'")
        connection.execute(f"UPDATE entries SET {column} = substr({column}, 1, length({column}) / 2)")
    connection.close()
    damaged = analyze_case(demo, cached(folder), use_cache=True)
    assert damaged.findings == expected
    assert len(damaged.warnings) == 1 and "corrupt" in damaged.warnings[0]
    forget_runs(folder)
    repaired = analyze_case(demo, cached(folder), use_cache=True)
    assert (repaired.findings, repaired.warnings) == (expected, [])


def test_cache_folder_that_cannot_be_created_is_reported_once(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    demo = Case("demo", DEMO)
    analysis = analyze_case(demo, cached(blocker / "cache"), use_cache=True)
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
    settings = cached(tmp_path / "cache")
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


def _report_pool_state(items: list[int]) -> list[tuple[int, bool]]:
    return [(item, parallel.can_start_pool()) for item in items]


def test_pool_keeps_item_order_and_never_nests() -> None:
    items = list(range(40))
    sizes = [(item * 7919) % 23 for item in items]
    with parallel.Workers(2) as workers:
        results = workers.map(_report_pool_state, items, sizes)
    assert results == [(item, False) for item in items]
    assert parallel.can_start_pool()


def test_small_work_stays_in_this_process() -> None:
    assert parallel.worker_count(parallel.MIN_PARALLEL_WORK - 1) == 1
    assert parallel.worker_count(parallel.MIN_PARALLEL_WORK) == parallel.available_cores()


def test_findings_round_trip_through_json() -> None:
    findings = analyze_case(Case("demo", DEMO)).findings
    assert any(finding.chain for finding in findings)  # CL003's path from the weight update is kept too
    assert [Finding.from_json(finding.to_json()) for finding in findings] == findings
