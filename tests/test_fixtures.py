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
    assert "resets the prefix cache but not the encoder cache: vision-encoder outputs" in finding.message
    assert "reset_encoder_cache()" in finding.help and "reset_mm_cache" not in finding.help


def test_an_update_missing_only_the_processor_cache_reset_is_not_reported() -> None:
    assert _cl003("encoder_reset_without_mm_reset.py") == []


def test_on_releases_without_an_encoder_reset_the_finding_says_so_and_has_no_fix() -> None:
    (finding,) = _cl003("range_010_to_015_no_encoder_api.py")
    assert "no engine-level API drops them on 0.10.2-0.15.1 (0.16.0 adds `reset_encoder_cache()`)" in finding.message
    assert finding.fix is not None and finding.fix.applicability.value == "display" and not finding.fix.changes
    assert "`reset_mm_cache()` does not" in finding.help


def test_an_installed_weight_update_is_named_by_its_own_function() -> None:
    findings = {finding.span.line: finding for finding in _cl003("installed_sync_weights.py")}
    assert set(findings) == {23, 25}
    assert all(
        finding.message.startswith("patched_sync_weights (installed_sync_weights.py:13)")
        for finding in findings.values()
    )


def test_a_client_of_unknown_class_gets_the_routes_not_calls_it_may_lack() -> None:
    findings = {finding.span.line: finding for finding in _cl003("installed_sync_weights.py")}
    client = findings[23]
    assert client.fix is not None and client.fix.applicability.value == "display" and not client.fix.changes
    assert "`self.vllm_client` is named like a client of a vLLM server, its class is not known here" in client.help
    assert "no class of the project has `reset_encoder_cache()`" in client.help
    assert "`/reset_encoder_cache`" in client.help and "reset_mm_cache" not in client.help
    colocated = findings[25]
    assert "`self.llm.llm_engine.reset_encoder_cache()`" in colocated.help
    (handed,) = _cl003("unknown_client_project_has_resets.py")
    assert handed.fix is not None and handed.fix.applicability.value == "unsafe" and handed.fix.changes


def test_a_client_that_has_the_other_resets_is_told_to_call_them() -> None:
    (finding,) = _cl003("http_client_method_has_other_resets")
    assert finding.help == (
        "`ServerClient` also has `reset_encoder_cache()`: call it where "
        "`Trainer.update_weights` calls `reset_prefix_cache()`"
    )
