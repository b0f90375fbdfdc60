"""The libcst codemod command `cachelint.codemod.FixCacheResets`: every fixture's fixes through libcst's
CodemodTest, the command end to end through `python -m libcst.tool`, and one analysis per run."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fixture_cases import FIXTURES, Case, rule_cases
from libcst.codemod import CodemodContext, CodemodTest, parallel_exec_transform_with_prettyprint

from cachelint import api
from cachelint.codemod import FixCacheResets
from cachelint.engine import Analyzer

CASES = rule_cases()
# Fixes that change another file than the finding's, or several: the codemod leaves every file of them
# as it is, and says why (in the file of the finding).
CROSS_FILE = {
    "CL001/worker_extension_driver_side": (
        "rl_sync/worker_ext.py",
        "rl_sync/worker_ext.py:10:9: CL001 fix not applied: it changes rl_sync/worker_ext.py, "
        "rl_sync/async_driver.py and rl_sync/sync_driver.py; `cachelint check --fix` makes it",
    ),
    "CL202/launch_in_another_module": (
        "rl/trainer.py",
        "rl/trainer.py:16:9: CL202 fix not applied: it changes rl/launcher.py; `cachelint check --fix` makes it",
    ),
}
# What one run makes of a fixture whose fixed point takes two rounds (CL007's fix needs the await first).
FIRST_ROUND = {
    "CL007/unawaited_is_cl005.py": ("self.engine.reset_prefix_cache()", "await self.engine.reset_prefix_cache()")
}
COMMAND = [sys.executable, "-m", "libcst.tool", "codemod", "--no-format", "-x", "cachelint.codemod.FixCacheResets"]


class FixCacheResetsTest(CodemodTest):
    TRANSFORM = FixCacheResets


@pytest.fixture
def project(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The case as a project of its own in a temporary folder (a single file gets a pyproject.toml
    with the fixture's vLLM range), as the working folder."""
    if case.path.is_dir():
        root = tmp_path / case.path.name
        shutil.copytree(case.path, root, ignore=shutil.ignore_patterns("*.fixed", "__pycache__"))
    else:
        root = tmp_path
        vllm, sglang = case.vllm_range(), case.sglang_range()
        ranges = (f'vllm = "{vllm}"\n' if vllm else "") + (f'sglang = "{sglang}"\n' if sglang else "")
        config = f"\n[tool.cachelint]\n{ranges}" if ranges else ""
        (root / "pyproject.toml").write_text(f'[project]\nname = "case"\n{config}')
        shutil.copy(case.path, root / case.path.name)
    monkeypatch.chdir(root)
    yield root


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_each_fixture_fix_through_codemod_test(case: Case, project: Path) -> None:
    for original in case.python_files():
        relative = case.relative(original)
        fixed = original.with_name(original.name + ".fixed")
        before = original.read_text(encoding="utf-8")
        after = fixed.read_text(encoding="utf-8") if fixed.exists() else before
        warnings: list[str] = []
        if case.id in CROSS_FILE:
            after = before
            flagged, warning = CROSS_FILE[case.id]
            warnings = [warning] if relative == flagged else []
        if case.id in FIRST_ROUND:
            old, new = FIRST_ROUND[case.id]
            first = before.replace(old, new)
            FixCacheResetsTest().assertCodemod(
                before, first, unsafe_fixes=True, context_override=CodemodContext(filename=relative)
            )
            (project / relative).write_text(first, encoding="utf-8")
            before = first
        context = CodemodContext(filename=relative)
        FixCacheResetsTest().assertCodemod(before, after, unsafe_fixes=True, context_override=context)
        assert context.warnings == warnings


def test_safe_fixes_only_without_unsafe_fixes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    source = (FIXTURES / "CL005" / "unawaited_reset_in_async_server.py").read_text()
    (tmp_path / "server.py").write_text(source)
    fixed = (FIXTURES / "CL005" / "unawaited_reset_in_async_server.py.fixed").read_text()
    test = FixCacheResetsTest()
    test.assertCodemod(source, fixed, context_override=CodemodContext(filename="server.py"))  # CL005's fix is safe
    unsafe_only = (FIXTURES / "CL004" / "sleep_in_one_line_if_body.py").read_text()
    (tmp_path / "pyproject.toml").write_text('[tool.cachelint]\nvllm = ">=0.17,<0.22"\n')
    (tmp_path / "refit.py").write_text(unsafe_only)
    test.assertCodemod(unsafe_only, unsafe_only, context_override=CodemodContext(filename="refit.py"))


def test_unused_suppression_is_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    before = (
        "def refit(llm):\n    llm.reset_prefix_cache()  # noqa: CL001\n    # cachelint: ignore[CL002]\n    return 1\n"
    )
    (tmp_path / "refit.py").write_text(before)
    after = "def refit(llm):\n    llm.reset_prefix_cache()\n    return 1\n"
    FixCacheResetsTest().assertCodemod(before, after, context_override=CodemodContext(filename="refit.py"))


def _command_project(tmp_path: Path, name: str) -> Path:
    """CL001's driver-side case (a fix over three files) with a one-line `try:` body to fix beside it."""
    root = tmp_path / name
    shutil.copytree(FIXTURES / "CL001" / "worker_extension_driver_side", root, ignore=shutil.ignore_patterns("*.fixed"))
    shutil.copy(FIXTURES / "CL003" / "prefix_reset_in_one_line_try.py", root / "rl_sync" / "one_line_try.py")
    return root


def _python_files(root: Path) -> dict[str, str]:
    return {path.relative_to(root).as_posix(): path.read_text() for path in sorted(root.rglob("*.py"))}


def test_command_end_to_end(tmp_path: Path) -> None:
    by_command = _command_project(tmp_path, "by_command")
    by_check = _command_project(tmp_path, "by_check")
    original = _python_files(by_command)
    run = subprocess.run(
        [*COMMAND, "--unsafe-fixes", "-j", "2", "--hide-progress", "."],
        cwd=by_command,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert "fix not applied: it changes rl_sync/worker_ext.py, rl_sync/async_driver.py and" in run.stderr
    checked = subprocess.run(
        [sys.executable, "-m", "cachelint", "check", "--fix", "--unsafe-fixes", "."], cwd=by_check, capture_output=True
    )
    assert checked.returncode == 0, checked.stderr
    after_command, after_check = _python_files(by_command), _python_files(by_check)
    assert after_command["rl_sync/one_line_try.py"] == after_check["rl_sync/one_line_try.py"]
    assert after_command["rl_sync/one_line_try.py"] != original["rl_sync/one_line_try.py"]
    for name in ("rl_sync/worker_ext.py", "rl_sync/async_driver.py", "rl_sync/sync_driver.py"):
        assert after_command[name] == original[name]  # the cross-file fix: all or nothing
        assert after_check[name] != original[name]
    again = subprocess.run([*COMMAND, "--unsafe-fixes", "--hide-progress", "."], cwd=by_command, capture_output=True)
    assert again.returncode == 0
    assert _python_files(by_command) == after_command


def test_command_diff_writes_nothing_and_safe_is_the_default(tmp_path: Path) -> None:
    root = _command_project(tmp_path, "project")
    original = _python_files(root)
    diff = subprocess.run(
        [*COMMAND, "--unsafe-fixes", "-u", "1", "--hide-progress", "rl_sync/one_line_try.py"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert diff.returncode == 0, diff.stderr
    assert "+            await self.engine.reset_encoder_cache()" in diff.stdout
    assert _python_files(root) == original
    safe = subprocess.run([*COMMAND, "--hide-progress", "."], cwd=root, capture_output=True, text=True)
    assert safe.returncode == 0, safe.stderr
    assert _python_files(root) == original  # every fix here is unsafe


def test_command_on_stdin(tmp_path: Path) -> None:
    source = (FIXTURES / "CL004" / "sleep_in_one_line_if_body.py").read_text()
    (tmp_path / "pyproject.toml").write_text('[tool.cachelint]\nvllm = ">=0.17,<0.22"\n')
    run = subprocess.run([*COMMAND, "--unsafe-fixes", "-"], cwd=tmp_path, input=source, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.rstrip("\n") == (FIXTURES / "CL004" / "sleep_in_one_line_if_body.py.fixed").read_text().rstrip(
        "\n"
    )


@pytest.mark.skipif(multiprocessing.get_start_method() != "fork", reason="counts calls in forked workers")
def test_the_project_is_analysed_once_per_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _command_project(tmp_path, "project")
    monkeypatch.chdir(root)
    log = tmp_path / "analyses.log"  # a worker's calls land here too
    real = api.analyze_paths

    def counted(*args: Any, **kwargs: Any) -> Any:
        with log.open("a") as stream:
            stream.write(f"{os.getpid()}\n")
        return real(*args, **kwargs)

    stored: list[bool] = []
    real_stored = Analyzer.stored_findings

    def recorded(self: Analyzer, *args: Any) -> Any:
        findings = real_stored(self, *args)
        stored.append(findings is not None)
        return findings

    monkeypatch.setattr(api, "analyze_paths", counted)
    monkeypatch.setattr(Analyzer, "stored_findings", recorded)
    files = sorted(str(path.relative_to(root)) for path in root.rglob("*.py"))
    for diff in (1, None):  # first a diff, which writes nothing: the second run has the same input
        result = parallel_exec_transform_with_prettyprint(
            FixCacheResets,
            files,
            jobs=2,
            unified_diff=diff,
            repo_root=str(root),
            codemod_args={"unsafe_fixes": True},
            hide_progress=True,
        )
        assert result.failures == 0
    assert log.read_text().splitlines() == [str(os.getpid())] * 2  # in this process, before the workers
    assert stored == [False, True]  # the second run's findings came from cachelint's cache
    assert "+            await self.engine.reset_encoder_cache()" in capsys.readouterr().out
    assert "await self.engine.reset_encoder_cache()" in (root / "rl_sync" / "one_line_try.py").read_text()


def test_command_stops_on_a_bad_configuration(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "CL004" / "sleep_in_one_line_if_body.py", tmp_path / "refit.py")
    (tmp_path / "cachelint.toml").write_text('selct = ["CL"]\n')
    run = subprocess.run([*COMMAND, "--hide-progress", "."], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 2
    assert "cachelint: error: " in run.stderr and "unknown key `selct`" in run.stderr
    assert "Traceback" not in run.stderr
    on_stdin = subprocess.run([*COMMAND, "-"], cwd=tmp_path, input="x = 1\n", capture_output=True, text=True)
    assert on_stdin.returncode == 1
    assert "unknown key `selct`" in on_stdin.stderr and "Traceback" not in on_stdin.stderr
