"""CL203 ignored-flush-result: an SGLang `flush_cache()` on a weight-update path whose refusal goes unseen."""

from __future__ import annotations

from collections.abc import Iterator

from cachelint import provenance
from cachelint.finding import Finding, Span
from cachelint.project import FunctionRef
from cachelint.provenance import Kind
from cachelint.rules.base import Context, Rule, RuleInfo
from cachelint.rules.sglang import FLUSH, SglangCall, callers, on_refit_path, refit_reached, sglang_calls
from cachelint.summary import FileSummary, ResetEvent

PAUSES = frozenset({"pause_generation"})
# The pause mode that keeps the paused requests running in the scheduler: flush_cache then refuses on
# every release (per the facts). A "retract" pause moves them to the waiting queue, which a paused
# engine's flush ignores from 0.5.21: not counted, as the facts give that release only in prose.
KEEPING_MODES = ("in_place",)
# Calls after which no request is left to refuse a flush: an abort of every request, a release of the
# engine's memory (SGLang asserts it is idle), a sleep.
STOPS = ("abort", "release_memory_occupation", "sleep")
MAX_CALLER_DEPTH = 3


class IgnoredFlushResult(Rule):
    info = RuleInfo(
        code="CL203",
        name="ignored-flush-result",
        summary="An SGLang `flush_cache()` on a weight-update path whose result is ignored, where requests may "
        "still be waiting or running: it refuses and flushes nothing, unseen.",
        fixable="never",
    )

    def check(self, file: FileSummary, context: Context) -> Iterator[Finding]:
        for call in sglang_calls(context, frozenset({FLUSH})):
            event = call.event
            if call.ref.file.path != file.path or not event.result_ignored or not on_refit_path(context, call.ref):
                continue
            if _checked_by_wrapper(context, call):
                continue
            why = _may_be_busy(context, call)
            if not why:
                continue
            shown = "GET/POST /flush_cache" if event.via == "http" else f"{event.receiver}.flush_cache()"
            yield self.finding(
                file,
                event.span,
                f"`{shown}` refuses and flushes nothing while any request is waiting or running ({why}), and its "
                "result is ignored: the weight update goes on with the old weights' KV in the radix cache",
                "Check the result (`success`, or the HTTP status: 400 when busy) and retry or fail; or abort the "
                'requests first (`pause_generation(mode="abort")`)',
                function=call.ref.function.qualname,
                notes=(call.note,),
            )


def _checked_by_wrapper(context: Context, call: SglangCall) -> bool:
    """Whether the flush is a project wrapper's that checks SGLang's answer itself (`r = requests.get(
    f"{url}/flush_cache")`, a test of `r`, a retry, then a raise): each of its `flush_cache` methods
    raises, and keeps every answer of SGLang's without handing it back (`return self.engine.flush_cache()`).
    A wrapper that turns the answer into a value it returns (`return r.status_code == 200`) leaves the
    check to its caller."""
    target = call.receiver.project_class
    if call.receiver.kind is not Kind.PROJECT or target is None:
        return False
    wrappers = provenance.methods(context.project, target.cls.name, FLUSH)
    flushes = [event for ref in wrappers for event in ref.function.sglang if event.method == FLUSH]
    return (
        bool(flushes)
        and all(ref.function.raises for ref in wrappers)
        and all(
            not event.result_ignored and not (event.anchor is not None and event.anchor.leaves_block)
            for event in flushes
        )
    )


def _may_be_busy(context: Context, call: SglangCall) -> str:
    """Why requests may be in the scheduler at the flush; "" when nothing says so."""
    pauses = [
        other
        for other in sglang_calls(context, PAUSES)
        if other.ref.key == call.ref.key and _before(other.event, call.event.span)
    ]
    for pause in pauses:
        mode = _mode(pause.event)
        if mode in KEEPING_MODES:
            return f'generation was paused with mode="{mode}", which keeps the paused requests'
    if _stopped_before(context, call.ref, call.event.span) or _layer_stops(context, call.ref):
        return ""
    serving = sglang_calls(context, PAUSES)
    if serving:
        first = serving[0]
        return (
            f"the project pauses SGLang's generation elsewhere ({first.ref.file.path}:{first.event.span.line}), "
            "so rollouts run while weights are synced, and nothing before this flush aborts them"
        )
    return ""


def _mode(event: ResetEvent) -> str:
    value = event.keywords.get("mode", "")
    return value.strip("\"'")


def _before(event: ResetEvent, point: Span) -> bool:
    return (event.span.end_line, event.span.end_col) <= (point.line, point.col)


def _layer_stops(context: Context, ref: FunctionRef) -> bool:
    """Whether some function of the project stops generation and then calls a function named like the
    refit root that reaches `ref`: refits are layered under one name (trainer -> manager -> rollout),
    linked through Ray or worker groups, which the call graph cannot follow."""
    reached = refit_reached(context).get(ref.key)
    if reached is None:
        return False
    names = reached.path[0].function.called_as()

    def find() -> bool:
        for caller in context.project.functions():
            calls = caller.function.calls
            stops = [item.span for item in calls if item.name.startswith(STOPS) and item.name not in names]
            if stops and any(
                item.name in names and any(_before_span(stop, item.span) for stop in stops)
                for item in caller.function.calls
            ):
                return True
        return False

    return context.project.memoized(f"CL203:layer:{','.join(names)}", find)


def _before_span(first: Span, second: Span) -> bool:
    return (first.end_line, first.end_col) <= (second.line, second.col)


def _stopped_before(context: Context, ref: FunctionRef, point: Span, depth: int = 0) -> bool:
    """Whether something before `point` in `ref`, or in a caller before its call of `ref`, aborts every
    request, pauses with mode="abort", releases the engine's memory or sleeps."""
    function = ref.function
    for event in function.sglang:
        if _before(event, point) and (
            event.method == "release_memory_occupation"
            or (event.method == "pause_generation" and _mode(event) not in KEEPING_MODES)
        ):
            return True
    for item in function.calls:
        if (item.span.end_line, item.span.end_col) <= (point.line, point.col) and item.name.startswith(STOPS):
            return True
    if depth >= MAX_CALLER_DEPTH:
        return False
    return any(_stopped_before(context, caller, site.span, depth + 1) for caller, site in callers(context, ref))
