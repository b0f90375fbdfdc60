"""CL006 hasattr-never-true: a hasattr probe on vLLM's sync `LLM` for a method only its engine has."""

from __future__ import annotations

import re
from collections.abc import Iterator

from packaging.version import Version

from cachelint.changes import ReplaceExpression
from cachelint.facts import EngineClass
from cachelint.finding import Applicability, Finding, Fix
from cachelint.rules.base import Context, Rule, RuleInfo
from cachelint.rules.events import describe_releases
from cachelint.summary import FileSummary, FunctionSummary, HasattrProbe

# A receiver `.llm_engine` can be appended to without parentheses.
_PLAIN_RECEIVER = re.compile(r"^[A-Za-z_][\w.]*(\(\))?$")


class HasattrNeverTrue(Rule):
    info = RuleInfo(
        code="CL006",
        name="hasattr-never-true",
        summary="A hasattr test on a sync vLLM `LLM` for a method only `llm.llm_engine` has, so the reset never runs.",
        fixable="sometimes",
        fix_kinds=("unsafe",),
    )

    def check(self, file: FileSummary, context: Context) -> Iterator[Finding]:
        if file.engine == "other":
            return
        for function in file.functions:
            for probe in function.probes:
                missing = _releases_without(probe, function, context)
                if missing:
                    yield self.finding(
                        file,
                        probe.span,
                        _message(probe, missing, context),
                        _help(probe),
                        fix=_fix(file, function, probe),
                        function=function.qualname,
                    )


def _releases_without(probe: HasattrProbe, function: FunctionSummary, context: Context) -> list[Version]:
    """The supported releases on which `LLM` lacks the attribute while `llm.llm_engine` has it."""
    if probe.receiver_class != EngineClass.LLM.value or probe.polarity == "unclear":
        return []
    if probe.attribute in probe.fallback_calls:
        return []  # the branch taken when the probe is false does the same call some other way
    if probe.chain == ["self"] and function.cls and _defined_in_project(function.cls, probe.attribute, context):
        return []
    facts = context.facts
    if facts.get(probe.attribute, EngineClass.LLM_ENGINE) is None:
        return []
    return [
        release
        for release in context.supported.releases
        if not facts.exists(probe.attribute, EngineClass.LLM, release)
        and facts.exists(probe.attribute, EngineClass.LLM_ENGINE, release)
    ]


def _defined_in_project(cls: str, attribute: str, context: Context) -> bool:
    project = context.project
    return any(project.methods_by_class.get((name, attribute)) for name in (cls, *project.base_classes(cls)))


def _probe_text(probe: HasattrProbe) -> str:
    if probe.kind == "getattr":
        return f'getattr({probe.receiver}, "{probe.attribute}", ...)'
    return f'hasattr({probe.receiver}, "{probe.attribute}")'


def _message(probe: HasattrProbe, missing: list[Version], context: Context) -> str:
    facts = context.facts
    engine_since = facts.first_release(probe.attribute, EngineClass.LLM_ENGINE)
    llm_since = facts.first_release(probe.attribute, EngineClass.LLM)
    getattr_probe = probe.kind == "getattr"
    if llm_since is None:
        verdict = "always returns the default" if getattr_probe else "is always False"
        lead = (
            f"`{_probe_text(probe)}` {verdict}: vLLM's sync `LLM` has no `{probe.attribute}` in any release "
            f"(through {facts.releases[-1]})"
        )
    else:
        verdict = "returns the default" if getattr_probe else "is False"
        lead = (
            f"`{_probe_text(probe)}` {verdict} on vLLM {describe_releases(missing)} "
            f"({context.supported.share(missing)}): `LLM` "
            f"gained `{probe.attribute}` only in {llm_since}"
        )
    return (
        f"{lead}, while `{probe.receiver}.llm_engine.{probe.attribute}()` exists since {engine_since}: "
        "the guarded reset silently never runs there"
    )


def _help(probe: HasattrProbe) -> str:
    return (
        f'Probe and call the engine: `hasattr({probe.receiver}.llm_engine, "{probe.attribute}")` and '
        f"`{probe.receiver}.llm_engine.{probe.attribute}()`"
    )


def _fix(file: FileSummary, function: FunctionSummary, probe: HasattrProbe) -> Fix:
    if not _PLAIN_RECEIVER.match(probe.receiver):
        return Fix(_help(probe), Applicability.DISPLAY)
    engine = f"{probe.receiver}.llm_engine"
    changes = [ReplaceExpression(file.path, probe.object_span, engine)]
    for event in function.resets:
        if event.method != probe.attribute or event.chain != probe.chain or event.via != "direct":
            continue
        if probe.statement_span.contains(event.span) or (
            probe.polarity == "negative" and event.span.line > probe.statement_span.end_line
        ):
            changes.append(ReplaceExpression(file.path, event.callee_span, f"{engine}.{probe.attribute}"))
    return Fix(f"Use `{engine}` in the probe and the guarded call", Applicability.UNSAFE, changes=tuple(changes))
