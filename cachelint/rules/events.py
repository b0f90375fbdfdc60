"""Judging reset events against the vLLM facts: which class, which scope, what a pause clears (the
judgements of cachelint.refit_cycle, re-exported for the rules), and the resets fixes write."""

from __future__ import annotations

from packaging.version import Version

from cachelint import provenance
from cachelint.changes import NewStatement
from cachelint.facts import EngineClass, Facts
from cachelint.provenance import Kind, Receiver
from cachelint.refit_cycle import (
    ENGINE_LEVEL_CLASSES,
    argument,
    assumed_class,
    clears_caches,
    gates_allow,
    is_engine_level,
    is_false,
    is_worker_side,
    looks_like_engine,
    route,
)
from cachelint.rules import insertions
from cachelint.rules.base import Context
from cachelint.summary import FileSummary, FunctionSummary, ResetEvent

# What does not happen, per engine method, when its call never runs.
LOST_EFFECT = {
    "reset_prefix_cache": "the prefix cache is never reset",
    "reset_mm_cache": "the multimodal caches are never reset",
    "reset_encoder_cache": "the encoder cache is never reset",
    "pause_generation": "generation is never paused and nothing is cleared",
    "resume_generation": "generation stays paused",
    "sleep": "the engine never sleeps: no memory is freed and no cache is cleared",
    "wake_up": "the engine stays asleep",
    "init_weight_transfer_engine": "the weight-transfer channel is never set up and the updates that follow fail",
    "start_weight_update": "no weight update is opened: the `update_weights` that follows fails",
    "start_draft_weight_update": "no draft-model weight update is opened: the `update_weights` that follows fails",
    "update_weights": "the new weights are never loaded: generation goes on with the old ones",
    "finish_weight_update": (
        "the weight update is never closed: weights sent in checkpoint format are never finalized, and the "
        "next `start_weight_update` fails while the update stays open"
    ),
}

__all__ = [
    "ENGINE_LEVEL_CLASSES",
    "argument",
    "assumed_class",
    "clears_caches",
    "gates_allow",
    "is_engine_level",
    "is_false",
    "is_worker_side",
    "looks_like_engine",
    "route",
]


def first_release(facts: Facts, event: ResetEvent, method: str | None = None) -> Version | None:
    """When the receiver gained the method; for an unknown receiver, the earliest engine class."""
    name = method or event.method
    if event.receiver_class:
        return facts.first_release(name, event.receiver_class)
    releases = [facts.first_release(name, cls) for cls in ENGINE_LEVEL_CLASSES]
    known = [release for release in releases if release is not None]
    return min(known) if known else None


def style_call(event: ResetEvent, method: str) -> str:
    """`method` called on the event's receiver in the event's style (await, sync or .remote())."""
    receiver = event.receiver or "engine"
    call = f"{receiver}.{method}()"
    return f"await {call}" if event.awaited else call


def awaits(event: ResetEvent) -> bool:
    """Whether code added next to the event must await: its coroutine is awaited, now or later."""
    return event.awaited or (event.in_async and assumed_class(event) is EngineClass.ASYNC_LLM)


def handed_on(event: ResetEvent) -> bool:
    """Whether the call's result, a coroutine unless the receiver is known to be a sync engine, is handed
    to another call (`loop.run_until_complete(engine.reset_prefix_cache())`): a call added next to it must
    be run the same way."""
    return event.passed_on and not event.awaited and event.receiver_class in ("", EngineClass.ASYNC_LLM.value)


def runs_like(event: ResetEvent) -> bool:
    """Whether `engine_reset_call` can write a call that runs as the event's call does: it is not handed
    on, or handed alone to a call that is a statement of its own (the call is then handed to it too)."""
    return not handed_on(event) or bool(event.runner)


def engine_reset_call(event: ResetEvent, method: str, context: Context) -> tuple[str, str, bool]:
    """The engine-level `method` on the event's receiver, in its style: (receiver, call, whether it needs
    a `hasattr` guard: some supported release on which the event's own call runs lacks it).

    A sync `vllm.LLM` goes through `llm.llm_engine` where it lacks the method."""
    facts = context.facts
    cls = assumed_class(event)
    receiver = event.receiver or "engine"
    llm_since = facts.first_release(method, EngineClass.LLM)
    if cls is EngineClass.LLM and (llm_since is None or context.supported.includes_before(llm_since)):
        receiver, cls = f"{receiver}.llm_engine", EngineClass.LLM_ENGINE
    if handed_on(event) and event.runner:
        call = f"{event.runner}({receiver}.{method}())"
    else:
        call = f"{'await ' if awaits(event) else ''}{receiver}.{method}()"
    runs_from = facts.first_release(event.method, assumed_class(event))
    releases = [r for r in context.supported.releases if runs_from is None or r >= runs_from]
    first = facts.first_release(method, cls)
    return receiver, call, first is None or any(release < first for release in releases)


def engine_reset_statement(event: ResetEvent, method: str, context: Context) -> NewStatement:
    """`engine_reset_call` as a statement to insert after the event, behind `hasattr` when needed."""
    receiver, call, needs_guard = engine_reset_call(event, method, context)
    return insertions.guarded(receiver, method, call) if needs_guard else NewStatement(call)


def engine_reset_help(event: ResetEvent, methods: list[str], context: Context) -> str:
    """The calls `engine_reset_statement` inserts, as help text: the same calls, with the same guard."""
    calls = [engine_reset_call(event, method, context) for method in methods]
    text = " and ".join(f"`{call}`" for _, call, _ in calls)
    guarded = [(receiver, method) for (receiver, _, guard), method in zip(calls, methods, strict=True) if guard]
    if guarded:
        tests = ", ".join(f'`hasattr({receiver}, "{method}")`' for receiver, method in guarded)
        text += f" (behind {tests}: some supported release lacks it)"
    return text


def describe_releases(releases: list[Version]) -> str:
    """`0.32.0-0.33.0`, or the one release."""
    if not releases:
        return "no release"
    return str(releases[0]) if len(releases) == 1 else f"{releases[0]}-{releases[-1]}"


def receiver_of(context: Context, file: FileSummary, function: FunctionSummary, event: ResetEvent) -> Receiver:
    return provenance.receiver(context.project, file, function, event)


def vllm_note(
    context: Context, file: FileSummary, function: FunctionSummary, event: ResetEvent, path_evidence: str = ""
) -> str | None:
    """Why the event is taken for a call on vLLM, as a note for the finding; None when it is not one:
    its receiver is a project object (its method is judged where it calls vLLM) or another engine's,
    or nothing says vLLM is the engine (`path_evidence`: what the caller knows, e.g. a refit path that
    reaches a vLLM module)."""
    if event.via == "http":
        return f"`{route(event.method)}` is a route of vLLM's API server"
    if event.via in ("rpc", "dispatch"):
        return ""
    found = receiver_of(context, file, function, event)
    if found.kind is Kind.VLLM:
        return f"receiver: {found.why}"
    if found.kind is not Kind.UNKNOWN:
        return None
    evidence = provenance.vllm_evidence(context.project, file, function) or path_evidence
    if not evidence:
        return None
    return f"receiver: `{event.receiver or 'self'}` is not known to be vLLM's, but {evidence}"


def route_since(facts: Facts, method: str) -> Version | None:
    fact = facts.get(f"POST {route(method)}", "OpenAI API server route")
    return fact.first_release if fact is not None else None
