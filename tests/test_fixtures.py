"""Every fixture case: the findings of its rule are exactly the `# error:` expectations."""

from __future__ import annotations

import pytest
from fixture_cases import FIXTURES, Case, analyze_case, rule_cases

from cachelint.config import Settings

CASES = rule_cases()


def run_case(case: Case, settings: Settings | None = None) -> set[tuple[str, int, str]]:
    analysis = analyze_case(case, settings)
    return {(finding.path, finding.span.line, finding.code) for finding in analysis.findings}


def test_fixture_cases_exist_for_every_rule() -> None:
    from cachelint.rules import ALL_RULES

    codes_with_cases = {case.code for case in CASES}
    for rule in ALL_RULES:
        if rule.info.code != "CL100":
            assert rule.info.code in codes_with_cases, f"{rule.info.code} has no fixtures"


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_fixture(case: Case) -> None:
    found = {item for item in run_case(case) if item[2] == case.code}
    assert found == case.expected(case.code)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_fixture_reports_no_errors(case: Case) -> None:
    found = run_case(case)
    assert not [item for item in found if not item[2].startswith("CL")]


def test_demo_has_every_bug_class() -> None:
    demo = Case("demo", FIXTURES / "demo")
    expected = set()
    for line in (FIXTURES / "demo" / "expected_findings.txt").read_text(encoding="utf-8").splitlines():
        location, code = line.rsplit(": ", 1)
        path, line_number = location.rsplit(":", 1)
        expected.add((path, int(line_number), code))
    found = run_case(demo)
    assert found == expected
    assert {code for _, _, code in found} >= {"CL001", "CL002", "CL003", "CL004"}


def _cl003(name: str) -> list:
    analysis = analyze_case(Case("CL003", FIXTURES / "CL003" / name))
    return [finding for finding in analysis.findings if finding.code == "CL003"]


def test_a_reset_reached_by_two_updates_misses_what_either_misses() -> None:
    (finding,) = _cl003("two_updates_reach_one_reset.py")
    assert finding.message.startswith("update_weights (two_updates_reach_one_reset.py:30) -> _after_update")
    assert "the multimodal and encoder caches keep features" in finding.message
    assert "reset_mm_cache()" in finding.help and "reset_encoder_cache()" in finding.help


def test_the_message_names_the_caches_the_update_does_reset() -> None:
    (finding,) = _cl003("encoder_reset_without_mm_reset.py")
    assert "resets the prefix and encoder caches but not the multimodal cache, which keeps" in finding.message
    assert finding.fix is not None and finding.fix.message == "Reset the multimodal cache after the prefix cache"
