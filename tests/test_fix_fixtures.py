"""Fixable fixtures: `--fix --unsafe-fixes` turns each case into its `.fixed` files, and nothing else.

Each `x.py` that a fix changes has its expected result beside it as `x.py.fixed`; a file without one
must not change. Set CACHELINT_UPDATE_FIXTURES=1 to write the `.fixed` files from the current fixes.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from fixture_cases import Case, rule_cases

from cachelint.config import Settings
from cachelint.engine import analyze
from cachelint.fixes import fix_to_fixed_point, write_changes

UPDATE = os.environ.get("CACHELINT_UPDATE_FIXTURES") == "1"
CASES = rule_cases()


def _settings(case: Case) -> Settings:
    return case.settings()


def _copy(case: Case, tmp_path: Path) -> Path:
    target = tmp_path / case.path.name
    if case.path.is_dir():
        shutil.copytree(case.path, target, ignore=shutil.ignore_patterns("*.fixed", "__pycache__"))
    else:
        shutil.copy(case.path, target)
    return target


def _run(target: Path, settings: Settings) -> tuple[Path, set[tuple[str, int, str]]]:
    folder = target if target.is_dir() else target.parent
    os.chdir(folder)
    paths = [Path()] if target.is_dir() else [Path(target.name)]
    root = folder.resolve() if target.is_dir() else target
    outcome = fix_to_fixed_point(paths, settings, unsafe=True, project_root=root)
    assert not outcome.errors
    assert not write_changes(outcome)
    after = analyze(paths, settings, project_root=root)
    return folder, {(f.path, f.span.line, f.code) for f in after.findings}


def _python_files(case: Case, copy: Path) -> list[tuple[Path, Path]]:
    """(original fixture file, its copy) pairs."""
    if case.path.is_file():
        return [(case.path, copy)]
    return [(path, copy / path.relative_to(case.path)) for path in case.python_files()]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_fix_produces_expected_files(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = _settings(case)
    before = analyze([case.path], settings, project_root=case.path)
    copy = _copy(case, tmp_path)
    _, remaining = _run(copy, settings)
    for original, fixed in _python_files(case, copy):
        expected_path = original.with_name(original.name + ".fixed")
        result = fixed.read_bytes()
        if UPDATE:
            if result != original.read_bytes():
                expected_path.write_bytes(result)
            elif expected_path.exists():
                expected_path.unlink()
            continue
        expected = expected_path.read_bytes() if expected_path.exists() else original.read_bytes()
        assert result == expected, f"{fixed} differs from {expected_path.name}"
    unfixable = {
        f.code for f in before.findings if f.fix is None or not f.fix.edits or f.fix.applicability.value == "display"
    }
    assert {code for _, _, code in remaining} <= unfixable


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_fix_is_idempotent(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = _settings(case)
    copy = _copy(case, tmp_path)
    _run(copy, settings)
    first = {p: p.read_bytes() for p in sorted(copy.rglob("*.py")) + ([copy] if copy.is_file() else [])}
    _run(copy, settings)
    second = {p: p.read_bytes() for p in sorted(copy.rglob("*.py")) + ([copy] if copy.is_file() else [])}
    assert first == second
