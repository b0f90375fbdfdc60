"""CL005 unawaited-engine-coroutine: an AsyncLLM / EngineClient coroutine called without `await` never runs
(a cache reset, pause, resume, sleep or wake-up, or a step of vLLM's weight-transfer API)."""

from __future__ import annotations

from collections.abc import Iterator

from cachelint.changes import AwaitCall
from cachelint.facts import ApiFact, EngineClass
from cachelint.finding import Applicability, Finding, Fix
from cachelint.rules.base import Context, Rule, RuleInfo
from cachelint.rules.events import LOST_EFFECT
from cachelint.summary import FileSummary, FunctionSummary, ResetEvent


class UnawaitedEngineCoroutine(Rule):
    info = RuleInfo(
        code="CL005",
        name="unawaited-engine-coroutine",
        summary=(
            "An AsyncLLM coroutine (a cache reset, pause, resume, sleep, wake-up or weight-transfer step) called "
            "without `await`."
        ),
        fixable="sometimes",
        fix_kinds=("safe",),
    )

    def check(self, file: FileSummary, context: Context) -> Iterator[Finding]:
        if file.engine == "other":
            return
        for function in file.functions:
            events = sorted([*function.resets, *function.lifecycle], key=lambda event: event.span)
            for event in events:
                fact = _dropped_coroutine(file, function, event, context)
                if fact is not None:
                    yield self.finding(
                        file,
                        event.span,
                        _message(event, fact),
                        _help(event),
                        fix=_fix(file, event),
                        function=function.qualname,
                    )


def _dropped_coroutine(
    file: FileSummary, function: FunctionSummary, event: ResetEvent, context: Context
) -> ApiFact | None:
    """The facts record of the coroutine method when this call creates a coroutine and drops it."""
    if event.via not in ("direct", "alias") or event.awaited or event.consumed or not event.result_ignored:
        return None
    if event.receiver_class != EngineClass.ASYNC_LLM.value or event.method not in LOST_EFFECT:
        return None
    fact = context.facts.get(event.method, EngineClass.ASYNC_LLM)
    if fact is None or not fact.is_async:
        return None
    if event.chain == ["self"] and function.cls and _overridden_as_sync(function.cls, event.method, context):
        return None
    return fact


def _overridden_as_sync(cls: str, method: str, context: Context) -> bool:
    """An AsyncLLM subclass of the project that redefines the method as a plain function."""
    project = context.project
    for name in (cls, *project.base_classes(cls)):
        refs = project.methods_by_class.get((name, method), [])
        if refs:
            return not any(ref.function.is_async for ref in refs)
    return False


def _call_text(event: ResetEvent) -> str:
    arguments = "..." if event.keywords or event.positional or event.star_kwargs else ""
    return f"{event.receiver or 'self'}.{event.method}({arguments})"


def _message(event: ResetEvent, fact: ApiFact) -> str:
    since = f" (since vLLM {fact.first_release})" if fact.first_release else ""
    return (
        f"`{_call_text(event)}` is an AsyncLLM coroutine{since} called without `await`: the call only creates "
        f"a coroutine object that is never run, so {LOST_EFFECT[event.method]}"
    )


def _help(event: ResetEvent) -> str:
    if event.in_async:
        return f"Await it: `await {_call_text(event)}`"
    return (
        f"`{event.method}` must run on the engine's event loop: call it from an `async def` with "
        f"`await {_call_text(event)}`, or submit it with `asyncio.run_coroutine_threadsafe(..., loop).result()`"
    )


def _fix(file: FileSummary, event: ResetEvent) -> Fix:
    if not event.in_async:
        return Fix(_help(event), Applicability.DISPLAY)
    return Fix("Add `await`", Applicability.SAFE, changes=(AwaitCall(file.path, event.span),))
