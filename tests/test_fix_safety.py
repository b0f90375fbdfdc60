"""The fix invariants (cachelint/rules/fix_safety.py): every fix the fixtures produce keeps them, and a
fix that breaks one is shown, not applied, with help that says what is missing."""

from __future__ import annotations

import ast
import textwrap

import pytest
from fixture_cases import Case, analyze_case, rule_cases

from cachelint.changes import InsertAfter, NewStatement
from cachelint.config import Settings
from cachelint.facts import load_facts
from cachelint.finding import Applicability, Finding, Fix, Span
from cachelint.project import ProjectIndex
from cachelint.rules import Context, fix_safety
from cachelint.summary.positions import SourcePositions
from cachelint.summary.walk import summarize
from cachelint.vllm_range import SGLANG, from_specifier

CASES = rule_cases()


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_every_fixture_fix_keeps_the_invariants(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[tuple[Finding, list[str]]] = []
    real = fix_safety.violations

    def recording(finding: Finding, context: Context) -> list[str]:
        problems = real(finding, context)
        checked.append((finding, problems))
        return problems

    monkeypatch.setattr(fix_safety, "violations", recording)
    analysis = analyze_case(case)
    seen = {(finding.path, finding.span, finding.code): problems for finding, problems in checked}
    for finding in analysis.findings:
        if not finding.is_rule or finding.code == "CL100" or finding.fix is None:
            continue
        key = (finding.path, finding.span, finding.code)
        assert key in seen, f"{finding.code} at {finding.span} was not checked"
        if finding.fix.applicability is not Applicability.DISPLAY:
            assert seen[key] == [], f"{finding.code} at {finding.span}: {seen[key]}"


def context_for(source: str, vllm: str = ">=0.6", sglang: str = ">=0.4.6") -> tuple[Context, str]:
    text = textwrap.dedent(source)
    summary = summarize("pkg/mod.py", text, ast.parse(text), module_name="pkg.mod")
    index = ProjectIndex([summary])
    supported = from_specifier(sglang, "test", SGLANG)
    return Context(index, from_specifier(vllm, "test"), Settings(), load_facts(), sglang=supported), text


def insertion(line: int, *statements: str | NewStatement, help: str = "", code: str = "CL003") -> Finding:
    """A finding whose fix inserts `statements` after the statement on `line` of SOURCE."""
    text = textwrap.dedent(SOURCE)
    positions = SourcePositions(text)
    anchor = next(
        positions.span(node) for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Expr) and node.lineno == line
    )
    new = tuple(NewStatement(item) if isinstance(item, str) else item for item in statements)
    fix = Fix("insert", Applicability.UNSAFE, changes=(InsertAfter("pkg/mod.py", anchor, new),))
    return Finding("pkg/mod.py", Span(line, 9, line, 20), code, "rule", "message", help, fix)


SOURCE = """
    from vllm import LLM
    from vllm.v1.engine.async_llm import AsyncLLM
    from sglang import Engine


    class HttpClient:
        def reset_prefix_cache(self):
            self.session.post(f"{self.url}/reset_prefix_cache")


    class Trainer:
        def __init__(self):
            self.llm = LLM(model="m")
            self.client = HttpClient()
            self.sgl = Engine(model_path="m")
            self.engine = AsyncLLM.from_vllm_config(None)

        def refit(self):
            self.llm.reset_prefix_cache()
            self.client.reset_prefix_cache()
            self.sgl.flush_cache()

        async def refit_async(self):
            await self.engine.reset_prefix_cache()
            await self.engine.reset_mm_cache()
            await self.engine.collective_rpc("load")


    class HandedObjects:
        def __init__(self, **kwargs):
            self.vllm_client = kwargs.pop("client")
            self.rollout_llm = kwargs.pop("llm")

        def refit(self):
            self.rollout_llm.reset_prefix_cache()
            self.vllm_client.reset_prefix_cache()
"""


def test_a_method_missing_on_some_supported_release_needs_a_guard() -> None:
    context, _ = context_for(SOURCE, ">=0.8")
    bare = fix_safety.vetted(insertion(20, "self.llm.llm_engine.reset_encoder_cache()"), context)
    assert bare.fix is not None and bare.fix.applicability is Applicability.DISPLAY
    assert 'hasattr(self.llm.llm_engine, "reset_encoder_cache")' in bare.help
    guarded = NewStatement(
        "self.llm.llm_engine.reset_encoder_cache()", 'hasattr(self.llm.llm_engine, "reset_encoder_cache")'
    )
    kept = fix_safety.vetted(insertion(20, guarded), context)
    assert kept.fix is not None and kept.fix.applicability is Applicability.UNSAFE


def test_a_method_the_project_class_lacks_is_not_called() -> None:
    context, _ = context_for(SOURCE, ">=0.22")
    finding = fix_safety.vetted(insertion(21, "self.client.reset_mm_cache()"), context)
    assert finding.fix is not None and finding.fix.applicability is Applicability.DISPLAY
    assert "`HttpClient` has no `reset_mm_cache`" in finding.help


def test_a_client_of_unknown_class_gets_no_method_no_project_class_has() -> None:
    context, _ = context_for(SOURCE, ">=0.22")
    finding = fix_safety.vetted(insertion(37, "self.vllm_client.reset_mm_cache()"), context)
    assert finding.fix is not None and finding.fix.applicability is Applicability.DISPLAY
    assert "`self.vllm_client` is named like a client and no class of the project has `reset_mm_cache`" in finding.help
    kept = fix_safety.vetted(insertion(36, "self.vllm_client.reset_prefix_cache()"), context)
    assert kept.fix is not None and kept.fix.applicability is Applicability.UNSAFE


def test_an_unknown_sync_receiver_named_like_an_llm_is_checked_as_one() -> None:
    context, _ = context_for(SOURCE, ">=0.22")
    bare = fix_safety.vetted(insertion(36, "self.rollout_llm.reset_encoder_cache()"), context)
    assert bare.fix is not None and bare.fix.applicability is Applicability.DISPLAY
    assert "has no `reset_encoder_cache`" in bare.help
    engine = fix_safety.vetted(insertion(36, "self.rollout_llm.llm_engine.reset_encoder_cache()"), context)
    assert engine.fix is not None and engine.fix.applicability is Applicability.UNSAFE


def test_nothing_is_called_on_another_engine() -> None:
    context, _ = context_for(SOURCE, ">=0.22")
    finding = fix_safety.vetted(insertion(22, "self.sgl.reset_mm_cache()"), context)
    assert finding.fix is not None and finding.fix.applicability is Applicability.DISPLAY
    assert "not vLLM's" in finding.help


def test_sync_code_gets_sync_calls_and_coroutines_are_awaited() -> None:
    context, _ = context_for(SOURCE, ">=0.22")
    awaited_in_sync = fix_safety.vetted(insertion(20, "await self.llm.reset_mm_cache()"), context)
    assert awaited_in_sync.fix is not None and awaited_in_sync.fix.applicability is Applicability.DISPLAY
    assert "not async" in awaited_in_sync.help
    dropped = fix_safety.vetted(insertion(27, "self.engine.reset_encoder_cache()"), context)
    assert dropped.fix is not None and dropped.fix.applicability is Applicability.DISPLAY
    assert "coroutine: await it" in dropped.help


def test_a_reset_right_after_the_same_reset_is_not_inserted() -> None:
    context, _ = context_for(SOURCE, ">=0.22")
    repeated = fix_safety.vetted(insertion(26, "await self.engine.reset_mm_cache()"), context)
    assert repeated.fix is not None and repeated.fix.applicability is Applicability.DISPLAY
    assert "already calls `self.engine.reset_mm_cache()`" in repeated.help
    after_other_work = fix_safety.vetted(insertion(27, "await self.engine.reset_mm_cache()"), context)
    assert after_other_work.fix is not None and after_other_work.fix.applicability is Applicability.UNSAFE


def test_help_that_names_another_call_than_the_fix_makes_is_caught() -> None:
    context, _ = context_for(SOURCE, ">=0.22")
    content = "self.llm.llm_engine.reset_encoder_cache()"
    wrong = fix_safety.vetted(insertion(20, content, help="Call `self.llm.reset_encoder_cache()`"), context)
    assert wrong.fix is not None and wrong.fix.applicability is Applicability.DISPLAY
    assert "the help names `self.llm.reset_encoder_cache()`" in wrong.help
    right = fix_safety.vetted(insertion(20, content, help="Call `self.llm.llm_engine.reset_encoder_cache()`"), context)
    assert right.fix is not None and right.fix.applicability is Applicability.UNSAFE


def test_sglang_calls_are_checked_against_the_sglang_facts() -> None:
    context, _ = context_for(SOURCE, ">=0.22", ">=0.5.4")
    flush = fix_safety.vetted(insertion(22, "self.sgl.flush_cache()"), context)
    assert flush.fix is not None and flush.fix.applicability is Applicability.UNSAFE
    awaited = fix_safety.vetted(insertion(22, "await self.sgl.flush_cache()"), context)
    assert awaited.fix is not None and awaited.fix.applicability is Applicability.DISPLAY
    assert "not a coroutine" in awaited.help
    session = fix_safety.vetted(insertion(22, "self.sgl.begin_weight_update()"), context)
    assert session.fix is not None and session.fix.applicability is Applicability.DISPLAY
    assert "exists only from SGLang 0.5.21" in session.help
    newer, _ = context_for(SOURCE, ">=0.22", ">=0.5.21")
    kept = fix_safety.vetted(insertion(22, "self.sgl.begin_weight_update()"), newer)
    assert kept.fix is not None and kept.fix.applicability is Applicability.UNSAFE


def test_sglang_methods_are_never_inserted_on_vllm_objects() -> None:
    context, _ = context_for(SOURCE, ">=0.22")
    finding = fix_safety.vetted(insertion(20, "self.llm.flush_cache()"), context)
    assert finding.fix is not None and finding.fix.applicability is Applicability.DISPLAY
    assert "not SGLang's" in finding.help
