"""A project checked whole whose files did not change since the last run is answered from the cache
without reading them: their sizes, modification and change times and inodes are those the last run
recorded. Any change to a file shows in one of them; a file changed in the last two seconds before a
run is not recorded (a coarse clock would not show a second change in the same tick)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from cli_runner import CLEAN, DEMO, PYPROJECT, WORKER, tiny_project
from fixture_cases import FIXTURES

from cachelint import engine
from cachelint.config import Settings
from cachelint.engine import Analysis, RunStats, analyze, recording

# The same size as WORKER, without the worker-only reset (CL001).
CLEAN_WORKER = WORKER.replace("self.model_runner.reset_encoder_cache()", "self.model_runner.reset_encoder_tally()")


def run(root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], RunStats]:
    monkeypatch.chdir(root)
    with recording() as stats:
        analysis = analyze([Path()], Settings(), use_cache=True)
    return [f"{finding.path}:{finding.span.line} {finding.code}" for finding in analysis.findings], stats


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A small project whose runs start a minute after its files were written."""
    monkeypatch.setattr(engine, "_now_ns", lambda: time.time_ns() + 60 * 10**9)
    return tiny_project(tmp_path)


def test_an_unchanged_project_is_answered_without_reading_it(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cold, first = run(project, monkeypatch)
    warm, second = run(project, monkeypatch)
    assert cold == warm == ["tiny_rl/worker.py:4 CL001"]
    assert (first.read, first.stored) == (3, 0)
    assert (second.read, second.stored) == (0, 1)


def test_a_change_that_keeps_size_and_modification_time_is_seen(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run(project, monkeypatch)
    worker = project / "tiny_rl" / "worker.py"
    before = worker.stat()
    assert len(CLEAN_WORKER) == len(WORKER)
    worker.write_text(CLEAN_WORKER, encoding="utf-8")
    os.utime(worker, ns=(before.st_atime_ns, before.st_mtime_ns))  # as `touch -r` or a careless tool does
    assert (worker.stat().st_size, worker.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    found, stats = run(project, monkeypatch)
    assert found == []
    assert stats.read == 3


def test_files_changed_just_before_a_run_are_read_again(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "_now_ns", time.time_ns)
    run(project, monkeypatch)
    _, stats = run(project, monkeypatch)
    assert (stats.read, stats.stored) == (3, 1)  # read, then answered by the stored findings


def test_a_changed_file_alone_is_read_when_the_findings_are_stored(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An edit, a run right after it (which stores the findings but cannot trust the edited file's
    times), then another run: it reads the edited file alone."""
    monkeypatch.setattr(engine, "_now_ns", time.time_ns)
    monkeypatch.setattr(engine, "RECENT_NS", 200_000_000)  # a clock with a tick of 0.2 s
    time.sleep(0.3)
    run(project, monkeypatch)
    worker = project / "tiny_rl" / "worker.py"
    worker.write_text(CLEAN_WORKER, encoding="utf-8")
    found, stats = run(project, monkeypatch)
    assert (found, stats.read, stats.stored) == ([], 3, 0)
    found, stats = run(project, monkeypatch)
    assert (found, stats.read, stats.stored) == ([], 1, 1)


def test_an_unchanged_project_still_names_its_sglang_range(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whether a file imports SGLang (which shows the project's SGLang range) is recorded with the files,
    so a run that reads none of them still knows it."""
    (project / "tiny_rl" / "rollout.py").write_text("import sglang\n", encoding="utf-8")

    def sglang_ranges() -> tuple[list[bool], int]:
        monkeypatch.chdir(project)
        with recording() as stats:
            analysis = analyze([Path()], Settings(), use_cache=True)
        return [p.sglang is not None for p in analysis.projects], stats.read

    assert sglang_ranges() == ([True], 4)
    assert sglang_ranges() == ([True], 0)
    (project / "tiny_rl" / "rollout.py").write_text("import vllm\n", encoding="utf-8")
    assert sglang_ranges()[0] == [False]
    assert sglang_ranges() == ([False], 0)


PINS_SGLANG = PYPROJECT.replace('"vllm>=0.18,<=0.33.0"', '"vllm>=0.18,<=0.33.0", "sglang>=0.5.2"')
PINNED = "pyproject.toml, dependencies"
ASSUMED = "no SGLang pin found: every known release"


def sglang_ranges(project: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], int]:
    """Where each project's SGLang range comes from ("" when none is shown), and how many files were read."""
    monkeypatch.chdir(project)
    with recording() as stats:
        analysis = analyze([Path()], Settings(), use_cache=True)
    return [p.sglang.source if p.sglang else "" for p in analysis.projects], stats.read


def test_a_project_that_pins_sglang_is_answered_without_reading_it(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the SGLang range pinned no file is searched for an SGLang import; the files are recorded all
    the same."""
    (project / "pyproject.toml").write_text(PINS_SGLANG, encoding="utf-8")
    assert sglang_ranges(project, monkeypatch) == ([PINNED], 3)
    assert sglang_ranges(project, monkeypatch) == ([PINNED], 0)


def test_unpinned_again_the_sglang_range_shows_as_the_files_say(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run under a pinned range does not record whether a file imports SGLang: the next run under the
    assumed range reads the files to know, though it finds its findings stored."""
    (project / "tiny_rl" / "rollout.py").write_text("import sglang\n", encoding="utf-8")
    assert sglang_ranges(project, monkeypatch) == ([ASSUMED], 4)
    (project / "pyproject.toml").write_text(PINS_SGLANG, encoding="utf-8")
    assert sglang_ranges(project, monkeypatch) == ([PINNED], 4)
    (project / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    assert sglang_ranges(project, monkeypatch) == ([ASSUMED], 4)
    assert sglang_ranges(project, monkeypatch) == ([ASSUMED], 0)


def run_on(root: Path, target: str, monkeypatch: pytest.MonkeyPatch, **options: object) -> tuple[Analysis, RunStats]:
    monkeypatch.chdir(root)
    with recording() as stats:
        analysis = analyze([Path(target)], Settings(), force_exclude=True, **options)  # type: ignore[arg-type]
    return analysis, stats


def test_a_run_on_a_changed_file_reads_the_rest_of_the_project_only_where_asked(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As pre-commit runs it: the changed file alone is given. The project's other files, unchanged
    since the last run of the whole project, are known by their records (trigger word, definitions,
    imports) and read only when a search asks for their bytes; the findings are a cold run's."""
    for number in range(20):
        helper = project / "tiny_rl" / f"helper_{number}.py"
        helper.write_text(CLEAN.replace("add", f"add_{number}"), encoding="utf-8")
    run(project, monkeypatch)
    worker = project / "tiny_rl" / "worker.py"
    worker.write_text("\n" + WORKER, encoding="utf-8")
    warm, stats = run_on(project, "tiny_rl/worker.py", monkeypatch, use_cache=True)
    cold, _ = run_on(project, "tiny_rl/worker.py", monkeypatch)
    assert [(f.path, f.span.line, f.code) for f in warm.findings] == [("tiny_rl/worker.py", 5, "CL001")]
    assert warm.findings == cold.findings
    assert stats.read == 1


def test_runs_on_changed_files_alone_record_the_project_for_the_next(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pre-commit hands over the changed files and never the whole project: the first such run reads
    every file and records them as a run of the whole project does, the next reads what changed, and a
    run on the same text again (answered by the stored findings) reads only its target."""
    (project / "tiny_rl" / "rollout.py").write_text("import sglang\n", encoding="utf-8")
    worker = project / "tiny_rl" / "worker.py"
    seen = []
    for text in ("\n" + WORKER, "\n\n" + WORKER, "\n\n" + WORKER):
        worker.write_text(text, encoding="utf-8")
        analysis, stats = run_on(project, "tiny_rl/worker.py", monkeypatch, use_cache=True)
        assert [(f.path, f.code) for f in analysis.findings] == [("tiny_rl/worker.py", "CL001")]
        seen.append((stats.read, [report.sglang is not None for report in analysis.projects]))
    assert seen == [(4, [True]), (1, [True]), (1, [True])]


def test_a_file_changed_since_the_last_run_of_the_whole_project_is_read(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Here a file that starts importing SGLang after the last run: the run on another file sees it."""
    run(project, monkeypatch)
    (project / "tiny_rl" / "clean.py").write_text("import sglang\n", encoding="utf-8")
    analysis, stats = run_on(project, "tiny_rl/worker.py", monkeypatch, use_cache=True)
    assert [report.sglang is not None for report in analysis.projects] == [True]
    assert stats.read == 2  # the target, and the file that changed


def test_the_callers_of_a_refit_are_searched_for_only_in_files_that_name_a_pause_or_abort(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CL007 asks which files call a refit root after a pause or an abort: each file's record keeps
    whether it names one, so a run on a changed file reads only the files that do."""
    monkeypatch.setattr(engine, "_now_ns", lambda: time.time_ns() + 60 * 10**9)
    project = tmp_path / "project"
    shutil.copytree(FIXTURES / "CL007" / "caller_aborts_first", project)
    for number in range(20):
        (project / "rollout" / f"helper_{number}.py").write_text(f"def update_{number}(a):\n    return a\n")
    run(project, monkeypatch)
    server = project / "rollout" / "server.py"
    server.write_text(server.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    warm, stats = run_on(project, "rollout/server.py", monkeypatch, use_cache=True)
    cold, _ = run_on(project, "rollout/server.py", monkeypatch)
    assert warm.findings == cold.findings == []  # the manager aborts first
    assert stats.read == 2  # the changed file, and the manager that aborts


def test_each_round_of_a_fix_on_a_changed_file_reads_only_that_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fix hook: after each round of fixes the file is analysed again with its fixed text, and the
    rest of the project is still known from the last run of the whole project."""
    from cachelint.fixes import fix_to_fixed_point, write_changes

    monkeypatch.setattr(engine, "_now_ns", lambda: time.time_ns() + 60 * 10**9)
    project = tmp_path / "demo"
    shutil.copytree(DEMO, project, ignore=shutil.ignore_patterns(".cachelint_cache"))
    run(project, monkeypatch)
    server = project / "demo_rl" / "rollout_server.py"
    server.write_text(server.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    with recording() as stats:
        outcome = fix_to_fixed_point([Path("demo_rl/rollout_server.py")], Settings(), unsafe=True, use_cache=True)
    assert outcome.fixed == 4 and write_changes(outcome) == []
    # Two analyses (the second finds nothing left to fix), each reading the file (then its fixed text)
    # and the one file the on-demand search looks into; not the other four.
    assert (stats.projects, stats.read) == (2, 4)
