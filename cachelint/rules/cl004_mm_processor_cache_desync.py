"""CL004 mm-processor-cache-desync: a cache-clearing pause on vLLM 0.17-0.21 without the processor-cache workaround."""

from __future__ import annotations

from collections.abc import Iterator

from packaging.version import Version

from cachelint import provenance
from cachelint.finding import Applicability, Finding, Fix, Span
from cachelint.rules.base import Context, Rule, RuleInfo, multimodal_only
from cachelint.rules.events import (
    clears_caches,
    engine_reset_call,
    engine_reset_statement,
    is_engine_level,
    runs_like,
    vllm_note,
)
from cachelint.rules.insertions import insert_after, insertable_after
from cachelint.summary import (
    LIFECYCLE_METHODS,
    PAUSE_METHODS,
    RESET_METHODS,
    FileSummary,
    FunctionSummary,
    ResetEvent,
    Workaround,
)

DESYNC_FROM = Version("0.17.0")
DESYNC_FIXED = Version("0.22.0")
# Front-end (P0) processor-cache clears: the renderer's (and its predecessors') `clear_mm_cache`.
FRONT_END_CLEARS = frozenset({"clear_mm_cache", "clear_mm_cache_async"})
# Calls on the engine that cannot have generated anything (no cache entry can come from them).
QUIET_CALLS = RESET_METHODS | PAUSE_METHODS | LIFECYCLE_METHODS | FRONT_END_CLEARS | {"abort", "collective_rpc"}


class MmProcessorCacheDesync(Rule):
    info = RuleInfo(
        code="CL004",
        name="mm-processor-cache-desync",
        summary="A cache-clearing pause or sleep that desyncs the multimodal processor cache on vLLM 0.17-0.21.",
        fixable="sometimes",
        fix_kinds=("unsafe",),
    )

    def check(self, file: FileSummary, context: Context) -> Iterator[Finding]:
        return multimodal_only(self._findings(file, context), file, context)

    def _findings(self, file: FileSummary, context: Context) -> Iterator[Finding]:
        if not context.settings.multimodal or not context.supported.intersects(DESYNC_FROM, DESYNC_FIXED):
            return
        if file.engine == "other":
            return
        workarounds = _workarounds(context)
        yield from self._dropped_workarounds(file, context, workarounds)
        if workarounds:
            return
        for function in file.functions:
            for event in function.resets:
                if not clears_caches(event) or _dropped_coroutine(event):
                    continue
                note = vllm_note(context, file, function, event)
                if (
                    note is None
                    or _fresh_engine(file, function, event, context)
                    or _kept_in_step(function, event, context)
                ):
                    continue
                yield self.finding(
                    file,
                    event.span,
                    _message(event, context),
                    _help(event, context),
                    fix=_fix(file, event, context),
                    function=function.qualname,
                    notes=(note,) if note else (),
                )

    def _dropped_workarounds(
        self, file: FileSummary, context: Context, workarounds: list[tuple[FileSummary, Workaround]]
    ) -> Iterator[Finding]:
        """A subclass override of the method holding the workaround that neither calls super() nor disables
        the processor cache itself."""
        for _, workaround in workarounds:
            if not workaround.cls:
                continue
            method = workaround.function.rsplit(".", 1)[-1]
            for sub_file, sub in context.project.subclasses(workaround.cls):
                if sub_file.path != file.path:
                    continue
                override = file.function(f"{sub.name}.{method}")
                if override is None or method in override.super_calls:
                    continue
                if not any(own.function == override.qualname for own in file.workarounds):
                    yield self.finding(
                        file,
                        override.span,
                        f"`{sub.name}.{method}` overrides `{workaround.cls}.{method}` without calling super(), "
                        "dropping its processor-cache workaround (mm_processor_cache_gb=0) for vLLM 0.17-0.21",
                        "Call `super()." + method + "(...)` in the override, or disable the processor cache there too",
                        fix=Fix(f"Call `super().{method}(...)` in the override", Applicability.DISPLAY),
                        function=override.qualname,
                    )


def _workarounds(context: Context) -> list[tuple[FileSummary, Workaround]]:
    return [(file, workaround) for file in context.project.files.values() for workaround in file.workarounds]


def _dropped_coroutine(event: ResetEvent) -> bool:
    """A `pause_generation()` on an unknown receiver whose coroutine is dropped: before 0.22 only AsyncLLM
    and EngineClient have it, as a coroutine, so a plain call statement is some other object's method,
    or pauses nothing. An HTTP request's result is the response: it runs whether it is kept or not."""
    return (
        event.via != "http"
        and not event.receiver_class
        and event.method == "pause_generation"
        and event.result_ignored
        and not (event.awaited or event.consumed)
    )


def _fresh_engine(file: FileSummary, function: FunctionSummary, event: ResetEvent, context: Context) -> bool:
    """A sleep or pause of an engine built earlier in the same function (by a vLLM class, or assigned what
    a call named for building returns: `self.engine = self._prepare_vllm_engine()` for a sleep of
    `self.engine.engine`), with no call on it in between: nothing has been generated yet, so nothing is
    cached."""
    receiver = event.receiver
    built = [
        (where, text)
        for text, where in function.built
        if where < event.span and (receiver == text or receiver.startswith(f"{text}."))
    ]
    constructed = _constructed_at(file, function, event, context)
    if constructed is not None:
        built.append((constructed, receiver))
    if not built:
        return False
    built_at, text = max(built)
    return not _engine_used_between(function, event, built_at, event.span, text)


def _constructed_at(file: FileSummary, function: FunctionSummary, event: ResetEvent, context: Context) -> Span | None:
    """Where a vLLM class built the event's receiver, earlier in the same function."""
    origin, _ = provenance.find_origin(context.project, file, function, event.chain)
    _, built = provenance.origin_class_name(origin)
    if not origin.startswith("call:") or built not in provenance.CONSTRUCTORS:
        return None
    constructors = [
        call.span
        for call in function.calls
        if call.span < event.span
        and (
            (call.name == built and not call.chain)
            or (call.name.startswith("from_") and call.chain[-1:] == [built])
            or (call.name == built and call.chain[-1:] == ["vllm"])
        )
    ]
    return max(constructors) if constructors else None


def _kept_in_step(function: FunctionSummary, pause: ResetEvent, context: Context) -> bool:
    """The processor caches are cleared on both sides next to the pause: an engine-level `reset_mm_cache()`
    (or a front-end `clear_mm_cache()`) after it, or right before it with nothing generated in between."""
    clears = [
        event.span
        for event in function.resets
        if event.method == "reset_mm_cache" and is_engine_level(context.facts, event)
    ]
    clears += [call.span for call in function.calls if call.name in FRONT_END_CLEARS]
    if any(span > pause.span for span in clears):
        return True
    before = [span for span in clears if span < pause.span]
    return bool(before) and not _engine_used_between(function, pause, max(before), pause.span)


def _engine_used_between(function: FunctionSummary, event: ResetEvent, start: Span, end: Span, built: str = "") -> bool:
    """Whether something may have generated between the two points: a call on the event's receiver (or on
    `built`, the object it is reached from) that may generate (anything but a reset, a pause, a sleep, a
    wake-up or an abort), or an awaited call (other requests run while it waits)."""
    owners = {event.receiver, built} - {""}
    return any(
        (call.span.line, call.span.col) > (start.end_line, start.end_col)
        and call.span < end
        and call.name not in QUIET_CALLS
        and (call.awaited or any(call.receiver == owner or call.receiver.startswith(f"{owner}.") for owner in owners))
        for call in function.calls
    )


def _message(event: ResetEvent, context: Context) -> str:
    call = f"{event.method}(...)" if event.keywords or event.positional else f"{event.method}()"
    versions = [r for r in context.supported.releases if DESYNC_FROM <= r < DESYNC_FIXED]
    return (
        f"`{call}` clears the engine's multimodal processor cache but not the front-end's on vLLM "
        f"{versions[0]}-{versions[-1]} ({context.supported.share(versions)}): the mirrored caches "
        "desync and the next request with "
        "a repeated image fails with 'Expected a cached item for mm_hash'"
    )


WORKAROUND = 'disable the processor cache for vLLM < 0.22 (`engine_kwargs.setdefault("mm_processor_cache_gb", 0)`)'


def _help(event: ResetEvent, context: Context) -> str:
    if event.via not in ("direct", "alias"):
        return f"{WORKAROUND[0].upper()}{WORKAROUND[1:]}, or reset the multimodal cache right after the pause"
    _, call, needs_guard = engine_reset_call(event, "reset_mm_cache", context)
    guard = " (behind `hasattr`: some supported release lacks it)" if needs_guard else ""
    return f"{WORKAROUND[0].upper()}{WORKAROUND[1:]}, or call `{call}` right after the pause{guard}"


def _fix(file: FileSummary, event: ResetEvent, context: Context) -> Fix:
    if event.via not in ("direct", "alias") or not insertable_after(event.anchor):
        return Fix(_help(event, context), Applicability.DISPLAY)
    if not runs_like(event):
        return Fix(f"{_help(event, context)}, run the way the pause's result is", Applicability.DISPLAY)
    statement = engine_reset_statement(event, "reset_mm_cache", context)
    change = insert_after(file.path, event.anchor, [statement])
    return Fix(f"Call `{statement.code}` right after the pause", Applicability.UNSAFE, changes=(change,))
