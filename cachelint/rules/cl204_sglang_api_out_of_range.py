"""CL204 sglang-api-out-of-range: an SGLang call that some supported SGLang release does not take."""

from __future__ import annotations

from collections.abc import Iterator

from packaging.version import Version

from cachelint import provenance
from cachelint.changes import ReplaceExpression
from cachelint.facts import ApiFact, SglangClass
from cachelint.finding import Applicability, Finding, Fix
from cachelint.provenance import Kind
from cachelint.rules.base import Context, Rule, RuleInfo
from cachelint.rules.sglang import (
    SglangCall,
    describe,
    sglang_calls,
    stated_releases,
    subclasses_sglang,
    uses_sglang,
)
from cachelint.summary import RESET_METHODS, SGLANG_METHODS, FileSummary, FunctionSummary, ResetEvent

CHECKED = SGLANG_METHODS | {"pause_generation"}
SESSION_UPDATES = frozenset({"update_weights_from_tensor", "update_weights_from_distributed"})
BEGIN = "begin_weight_update"
# What a call that a release lacks does there.
FAILURES = {
    SglangClass.HTTP: "404 Not Found",
    SglangClass.ENGINE: "AttributeError",
    SglangClass.TOKENIZER_MANAGER: "AttributeError",
}
VLLM_RESETS = {"reset_prefix_cache": "flush_cache"}  # vLLM's reset -> SGLang's call that does its job


class SglangApiOutOfRange(Rule):
    info = RuleInfo(
        code="CL204",
        name="sglang-api-out-of-range",
        summary="An SGLang method, argument or route that a supported SGLang release lacks, or vLLM's reset "
        "called on an SGLang engine.",
        fixable="sometimes",
        fix_kinds=("unsafe",),
    )

    def check(self, file: FileSummary, context: Context) -> Iterator[Finding]:
        for call in sglang_calls(context, CHECKED):
            if call.ref.file.path == file.path and call.receiver.kind is Kind.SGLANG:
                yield from self._judge(file, call, context)
        yield from self._vllm_resets(file, context)

    def _judge(self, file: FileSummary, call: SglangCall, context: Context) -> Iterator[Finding]:
        event = call.event
        cls = call.receiver.sglang_class
        if cls is None or cls not in FAILURES or event.hasattr_guarded:
            return
        if _project_defines(context, call):  # the project's own signature; what it calls needs a session
            if event.method in SESSION_UPDATES:
                yield from self._session(file, call, context)
            return
        fact = _fact(context, event.method, cls)
        supported = list(context.sglang_range.releases)
        shown = _shown(event)
        first = fact.first_release if fact is not None else None
        lacking = [release for release in supported if fact is None or not fact.exists_in(release)]
        if fact is not None:
            lacking = stated_releases(context, lacking, first)
        if lacking:
            since = f"only from SGLang {first}" if first else "in no release"
            yield self._finding(
                file,
                call,
                f"`{shown}`: SGLang's {cls.value} has `{event.method}` {since}, so on {_share(lacking, supported)} "
                f"it fails with {FAILURES[cls]}",
                f"Keep the call to releases that have it (`hasattr`, or a supported range from {fact.first_release})"
                if fact is not None and fact.first_release
                else "Use an SGLang call that exists (see the SGLang facts)",
            )
            return
        assert fact is not None
        if cls is not SglangClass.HTTP:
            yield from self._arguments(file, call, fact, supported, context)
        if event.method in SESSION_UPDATES and not _forwarded_for_callers(context, call):
            yield from self._session(file, call, context)

    def _arguments(
        self, file: FileSummary, call: SglangCall, fact: ApiFact, supported: list[Version], context: Context
    ) -> Iterator[Finding]:
        """Keywords (or a request's `mode`) the signature of a supported release does not take."""
        event = call.event
        cls = call.receiver.sglang_class
        assert cls is not None
        if event.star_kwargs:
            return
        if cls is SglangClass.TOKENIZER_MANAGER:
            # TokenizerManager methods take a request object; `pause_generation` took none before `obj`.
            if event.method == "pause_generation" and (event.positional or "mode" in event.keywords):
                since = fact.param_since("obj")
                lacking = [release for release in supported if not fact.takes_param("obj", release)]
                lacking = stated_releases(context, lacking, since)
                if lacking:
                    yield self._finding(
                        file,
                        call,
                        f"`{_shown(event)}` passes a pause request (a mode), but TokenizerManager.pause_generation "
                        f"takes one only from SGLang {since}: on {_share(lacking, supported)} it raises TypeError",
                        f"Pause without a request there, or support SGLang {since}+ only",
                    )
            return
        for keyword in event.keyword_spans:
            since = fact.param_since(keyword)
            lacking = [release for release in supported if not fact.takes_param(keyword, release)]
            lacking = stated_releases(context, lacking, since)
            if not lacking:
                continue
            taken = f"takes `{keyword}` only from SGLang {since}" if since else f"never takes `{keyword}`"
            yield self._finding(
                file,
                call,
                f"`{_shown(event)}`: SGLang's {cls.value}.{event.method} {taken}: on {_share(lacking, supported)} "
                "it raises TypeError",
                _keyword_help(event, keyword, since),
            )

    def _session(self, file: FileSummary, call: SglangCall, context: Context) -> Iterator[Finding]:
        """A tensor or distributed update on releases that need a weight-update session, with none opened."""
        begin = context.sglang_facts.get(BEGIN, SglangClass.ENGINE.value)
        if begin is None or begin.first_release is None or _opens_session(context):
            return
        supported = list(context.sglang_range.releases)
        needing = [release for release in supported if release >= begin.first_release]
        if not needing:
            return
        event = call.event
        unseen = ", and its result is ignored: the update silently does nothing" if event.result_ignored else ""
        yield self._finding(
            file,
            call,
            f"`{_shown(event)}` runs outside a weight-update session: from SGLang {begin.first_release} on "
            f"(on {_share(needing, supported)}) it returns success=False and loads nothing unless `{BEGIN}()` "
            f"opened one{unseen}",
            f"Open a session around the step's updates: `{BEGIN}()` before the first, `end_weight_update()` "
            "after the last (check each `success`)",
        )

    def _vllm_resets(self, file: FileSummary, context: Context) -> Iterator[Finding]:
        """vLLM's reset methods called on an SGLang engine: it has none of them."""
        if not uses_sglang(context):
            return
        for function in file.functions:
            for event in function.resets:
                if event.method not in RESET_METHODS or event.via not in ("direct", "alias"):
                    continue
                found = provenance.receiver(context.project, file, function, event)
                if found.kind is not Kind.SGLANG or found.sglang_class not in FAILURES:
                    continue
                yield self.finding(
                    file,
                    event.span,
                    f"`{event.receiver}.{event.method}()` is vLLM's reset; SGLang's {found.sglang_class.value} has no "
                    f"`{event.method}`: it raises AttributeError",
                    _reset_help(event),
                    fix=_reset_fix(file, function, event),
                    function=function.qualname,
                    notes=(f"receiver: {found.why}",),
                )

    def _finding(self, file: FileSummary, call: SglangCall, message: str, help: str) -> Finding:
        return self.finding(
            file, call.event.span, message, help, function=call.ref.function.qualname, notes=(call.note,)
        )


def _fact(context: Context, method: str, cls: SglangClass) -> ApiFact | None:
    name = f"POST /{method}" if cls is SglangClass.HTTP else method
    return context.sglang_facts.get(name, cls.value)


def _project_defines(context: Context, call: SglangCall) -> bool:
    """Whether the method called is the project's own (a subclass of SGLang's Engine that overrides it)."""
    method = call.event.method
    target = call.receiver.project_class
    if target is not None and provenance.defines(context.project, target.cls.name, method):
        return True
    own = call.ref.function.cls
    return call.event.chain == ["self"] and bool(own) and provenance.defines(context.project, own, method)


def _forwarded_for_callers(context: Context, call: SglangCall) -> bool:
    """Whether `call` is how a project method of the same name forwards the update (siirl's
    `AsyncEngine.update_weights_from_tensor`, of a subclass of SGLang's Engine, awaiting
    `tokenizer_manager.update_weights_from_tensor`) and the project calls that method on an object of
    that class, or on SGLang's Engine when the class derives from it: a session belongs around those
    calls, where it is reported."""
    method = call.event.method
    cls = call.ref.function.cls
    if call.ref.function.name != method or not cls:
        return False
    engine_like = subclasses_sglang(context, cls)
    for other in sglang_calls(context, SESSION_UPDATES):
        if other is call or other.event.method != method or other.receiver.kind is not Kind.SGLANG:
            continue  # calls on other receivers are not judged: they report nothing
        target = other.receiver.project_class
        if target is None:
            if engine_like and other.receiver.sglang_class is SglangClass.ENGINE:
                return True
        elif any(ref.key == call.ref.key for ref in provenance.methods(context.project, target.cls.name, method)):
            return True
    return False


def _opens_session(context: Context) -> bool:
    return bool(sglang_calls(context, frozenset({BEGIN})))


def _shown(event: ResetEvent) -> str:
    return f"POST /{event.method}" if event.via == "http" else f"{event.receiver}.{event.method}(...)"


def _share(releases: list[Version], supported: list[Version]) -> str:
    if releases == supported:
        return "every supported release"
    return f"{describe(releases)} of the supported {describe(supported)}"


def _keyword_help(event: ResetEvent, keyword: str, since: Version | None) -> str:
    if keyword == "flush_cache" and event.method == "update_weights_from_disk":
        return (
            f"Drop `{keyword}=`: `Engine.update_weights_from_disk` always flushes; call `flush_cache()` yourself "
            "when you need it"
        )
    if since is not None:
        return f"Pass `{keyword}` only on SGLang {since}+, or support SGLang {since}+ only"
    return f"Drop `{keyword}=`"


def _reset_help(event: ResetEvent) -> str:
    if event.method in VLLM_RESETS:
        return f"Use SGLang's `{event.receiver}.{VLLM_RESETS[event.method]}()`, which flushes its radix (prefix) cache"
    return (
        "SGLang has no API for it: its multimodal embedding cache is turned off with SGLANG_VLM_CACHE_SIZE_MB=0 "
        "where it is launched"
    )


def _reset_fix(file: FileSummary, function: FunctionSummary, event: ResetEvent) -> Fix:
    """`x.reset_prefix_cache()` becomes `x.flush_cache()` (a call without arguments only)."""
    replacement = VLLM_RESETS.get(event.method)
    if replacement is None or event.positional or event.keywords or event.star_kwargs:
        return Fix(_reset_help(event), Applicability.DISPLAY)
    change = ReplaceExpression(file.path, event.callee_span, f"{event.receiver}.{replacement}")
    return Fix(f"Call SGLang's `{replacement}()` instead", Applicability.UNSAFE, changes=(change,))
