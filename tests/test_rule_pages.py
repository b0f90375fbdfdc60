"""Every registered rule has a page and every page a rule; each page's examples behave as they say."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cachelint.config import Settings
from cachelint.docs import all_pages, load_page
from cachelint.engine import analyze
from cachelint.rules import ALL_RULES

SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead", "Fix safety", "Options", "References")
CODES = [rule.info.code for rule in ALL_RULES]


def test_every_rule_has_a_page_and_every_page_a_rule() -> None:
    assert {page.code for page in all_pages()} == set(CODES)


@pytest.mark.parametrize("code", CODES)
def test_page_has_every_section_and_matching_title(code: str) -> None:
    page = load_page(code)
    assert page is not None
    rule = next(rule for rule in ALL_RULES if rule.info.code == code)
    assert page.title == f"{code} {rule.info.name}"
    assert list(page.sections) == list(SECTIONS)


def _codes_found(source: str, tmp_path: Path, name: str) -> list[str]:
    path = tmp_path / name
    path.write_text(source, encoding="utf-8")
    old = Path.cwd()
    os.chdir(tmp_path)
    try:
        analysis = analyze([Path(name)], Settings(), project_root=Path(name).resolve())
    finally:
        os.chdir(old)
    return [finding.code for finding in analysis.findings]


@pytest.mark.parametrize("code", [code for code in CODES if code != "CL100"])
def test_example_is_flagged_and_use_instead_is_not(code: str, tmp_path: Path) -> None:
    page = load_page(code)
    assert page is not None and page.example_code and page.use_instead_code
    assert code in _codes_found(page.example_code, tmp_path, "example.py")
    assert code not in _codes_found(page.use_instead_code, tmp_path, "use_instead.py")


def test_unused_suppression_page_examples(tmp_path: Path) -> None:
    page = load_page("CL100")
    assert page is not None and page.example_code and page.use_instead_code
    assert "CL100" in _codes_found(page.example_code, tmp_path, "example.py")
    assert "CL100" not in _codes_found(page.use_instead_code, tmp_path, "use_instead.py")
