"""The Python API: `cachelint.check` and `cachelint.fix` return what the command prints, the README's
example runs as shown, and code calling the API type-checks with `mypy --strict`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cli_runner import DEMO, REPO, check

import cachelint
from cachelint.output.json_report import finding_object


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    """A copy of the demo project at fixtures/demo below `tmp_path`, which is returned."""
    shutil.copytree(DEMO, tmp_path / "fixtures" / "demo", ignore=shutil.ignore_patterns(".cachelint_cache"))
    return tmp_path


def test_readme_example_prints_what_the_readme_shows(demo: Path) -> None:
    section = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    shown = re.search(r"prints:\n\n```text\n(.*?)```", section, re.DOTALL)
    assert code is not None and shown is not None
    run = subprocess.run([sys.executable, "-c", code.group(1)], cwd=demo, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout == shown.group(1)
    assert (demo / "fixtures" / "demo" / "demo_rl" / "rollout_server.py").read_text() == (
        DEMO / "demo_rl" / "rollout_server.py"
    ).read_text()  # fix() writes nothing unless asked


def test_check_returns_what_the_command_prints(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    printed = check("--output-format", "json", "fixtures/demo", cwd=demo)
    monkeypatch.chdir(demo)
    result = cachelint.check("fixtures/demo")
    shown = ("code", "filename", "location", "end_location", "message", "help", "fix", "notes", "url")
    printed_findings = [{key: item[key] for key in shown} for item in json.loads(printed.stdout)]
    returned = [finding_object(finding, None) for finding in result.findings]
    assert [{key: item[key] for key in shown} for item in returned] == printed_findings
    assert result.files_checked == len(list((demo / "fixtures" / "demo").rglob("*.py")))
    assert [bool(finding.fix.edits) for finding in result.findings if finding.fix] == [True] * 4 + [False]


def test_fix_on_sources_and_on_disk(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(demo)
    server = Path("fixtures/demo/demo_rl/rollout_server.py")
    original = server.read_text()
    unsaved = original.replace('logger.info("rollout engine asleep")', 'logger.info("asleep")')
    in_memory = cachelint.fix([server], sources={server: unsaved}, unsafe_fixes=True, write=True)
    assert [file.path for file in in_memory.files] == [server.as_posix()]
    assert in_memory.files[0].before == unsaved
    assert 'logger.info("asleep")' in in_memory.files[0].after
    assert "await self.engine.reset_mm_cache()" in in_memory.files[0].after
    assert server.read_text() == original  # a file given in `sources` is never written
    on_disk = cachelint.fix(["fixtures/demo"], unsafe_fixes=True, write=True)
    assert on_disk.fixed == 4 and on_disk.errors == ()
    assert server.read_text() == on_disk.files[0].after
    assert [finding.code for finding in on_disk.findings] == ["CL001"]
    assert cachelint.fix(["fixtures/demo"], unsafe_fixes=True).files == ()  # nothing left to fix


def test_errors_are_the_command_line_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(cachelint.MissingPathError):
        cachelint.check(["missing.py"])
    Path("cachelint.toml").write_text('select = "CL001"\n')
    with pytest.raises(cachelint.ConfigError):
        cachelint.check(["."])


USER_CODE = """
from __future__ import annotations

from pathlib import Path

import cachelint
from cachelint import Applicability, Finding


def safe_findings(paths: list[Path]) -> list[Finding]:
    result = cachelint.check(paths, settings=cachelint.Settings(vllm=">=0.17"))
    return [f for f in result.findings if f.fix is not None and f.fix.applicability is Applicability.SAFE]


def fixed_sources(paths: list[str], unsaved: dict[str, str]) -> dict[str, str]:
    result = cachelint.fix(paths, sources=unsaved, unsafe_fixes=True)
    return {file.path: file.after for file in result.files}


def first_edit_line(finding: Finding) -> int:
    return finding.fix.edits[0].span.line if finding.fix and finding.fix.edits else finding.span.line
"""
MISUSED = """
import cachelint

count: int = cachelint.check(["src"])
cachelint.fix(["src"], unsafe=True)
"""


def test_user_code_type_checks_with_mypy_strict(tmp_path: Path) -> None:
    (tmp_path / "user.py").write_text(textwrap.dedent(USER_CODE))
    (tmp_path / "misused.py").write_text(textwrap.dedent(MISUSED))
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), "user.py", "misused.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    errors = [line.split(": error: ", 1)[1] for line in run.stdout.splitlines() if ": error: " in line]
    assert [line.split(":")[0] for line in run.stdout.splitlines() if ": error: " in line] == ["misused.py"] * 2
    assert errors[0].startswith('Incompatible types in assignment (expression has type "CheckResult"')
    assert errors[1].startswith('Unexpected keyword argument "unsafe" for "fix"')


def test_import_cachelint_imports_nothing_else() -> None:
    code = (
        "import sys, cachelint; print(sorted(name for name in sys.modules if name.startswith(('cachelint', 'libcst'))))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.stdout.strip() == "['cachelint']"
