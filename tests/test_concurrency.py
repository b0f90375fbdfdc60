"""Two `cachelint check --fix --unsafe-fixes` processes on the same tree at once.

Whatever the interleaving, every file ends as it was or as one sequential run fixes it (never half
written, never a mix), each file still parses, no temporary file is left, and both processes exit
as documented without a traceback: 0 or 1, or 2 when the other run changed a file first (that fix
is then left out).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_runner import DEMO, check, environment

FIX = ("check", "--fix", "--unsafe-fixes", "--no-color", ".")


def _files(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and ".cachelint_cache" not in path.parts and "__pycache__" not in path.parts
    }


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """The demo project's files before and after one sequential fix run."""
    sequential = tmp_path_factory.mktemp("sequential") / "demo"
    shutil.copytree(DEMO, sequential)
    before = _files(sequential)
    result = check(*FIX[1:], cwd=sequential)
    assert result.code in (0, 1), result.stderr
    after = _files(sequential)
    assert after != before, "the demo must hold fixable findings for this test to mean anything"
    return before, after


@pytest.mark.parametrize("round_", range(3))
def test_two_fix_runs_at_once_leave_only_legitimate_files(
    tmp_path: Path, outcomes: tuple[dict[str, bytes], dict[str, bytes]], round_: int
) -> None:
    before, after = outcomes
    tree = tmp_path / "demo"
    shutil.copytree(DEMO, tree)
    processes = []
    for start in (0.0, 0.3 * round_):  # the second starts with the first, or while it analyses or writes
        time.sleep(start)
        processes.append(
            subprocess.Popen(
                [sys.executable, "-m", "cachelint", *FIX],
                cwd=tree,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=environment(),
            )
        )
    results = [(process.wait(timeout=300), *process.communicate()) for process in processes]
    for code, stdout, stderr in results:
        errors = [line for line in stderr.decode().splitlines() if line.startswith("cachelint: error:")]
        # A run whose files the other run changed first leaves those fixes out, says so and exits 2.
        assert code in (0, 1) or (code == 2 and errors), stderr.decode()
        assert all("not written: it changed on disk since it was read" in line for line in errors), errors
        assert b"Traceback" not in stderr + stdout
        assert b"internal error" not in stderr
    final = _files(tree)
    assert set(final) == set(before), "files appeared or disappeared (a temporary file left behind?)"
    for name, data in final.items():
        assert data in (before[name], after[name]), f"{name} is neither the original nor the fixed file"
        if name.endswith(".py"):
            ast.parse(data)
    # Between them the two runs fixed everything one run fixes; a third run finds nothing to do.
    assert final == after
    third = check(*FIX[1:], cwd=tree)
    assert third.code in (0, 1)
    assert _files(tree) == after
