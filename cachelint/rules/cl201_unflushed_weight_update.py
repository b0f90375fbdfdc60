"""CL201 unflushed-weight-update: an SGLang weight update with `flush_cache=False` and no flush after it."""

from __future__ import annotations

from collections.abc import Iterator

from cachelint.changes import NewStatement
from cachelint.facts import SglangClass
from cachelint.finding import Applicability, Finding, Fix
from cachelint.project import FunctionRef
from cachelint.provenance import Kind, defines
from cachelint.rules.base import Context, Rule, RuleInfo
from cachelint.rules.insertions import insert_after, insertable_after
from cachelint.rules.sglang import FLUSH, SglangCall, flushed_later, sglang_calls
from cachelint.summary import SGLANG_UPDATES, FileSummary


class UnflushedWeightUpdate(Rule):
    info = RuleInfo(
        code="CL201",
        name="unflushed-weight-update",
        summary="An SGLang weight update with `flush_cache=False` and no `flush_cache()` after it: the radix "
        "cache keeps KV computed with the old weights.",
        fixable="sometimes",
        fix_kinds=("unsafe",),
    )

    def check(self, file: FileSummary, context: Context) -> Iterator[Finding]:
        for call in sglang_calls(context, SGLANG_UPDATES):
            event = call.event
            if call.ref.file.path != file.path or event.keywords.get("flush_cache") != "False":
                continue
            if radix_cache_off(call.ref) or flushed_later(context, call.ref, event.span):
                continue
            yield self.finding(
                file,
                event.span,
                f"`{_shown(call)}` updates SGLang's weights with `flush_cache=False`, and nothing flushes the "
                "cache after it on this weight-update path: the radix (prefix) cache keeps KV computed with the "
                "old weights, and requests that share a prefix with earlier ones reuse it",
                _help(call),
                fix=_fix(file, call, context),
                function=call.ref.function.qualname,
                notes=(call.note,),
            )


def radix_cache_off(ref: FunctionRef) -> bool:
    """Whether the engine the update goes to has no radix cache: the SGLang launches of its function, or
    else of its class, all turn it off (`sgl.Engine(..., disable_radix_cache=True)`)."""
    launches = [launch for launch in ref.file.launches if launch.function == ref.function.qualname]
    if not launches and ref.function.cls:
        prefix = ref.function.cls + "."
        launches = [launch for launch in ref.file.launches if launch.function.startswith(prefix)]
    return bool(launches) and all("disable_radix_cache" in launch.turned_off for launch in launches)


def _shown(call: SglangCall) -> str:
    event = call.event
    return f"POST /{event.method}" if event.via == "http" else f"{event.receiver}.{event.method}(...)"


def _flush_call(call: SglangCall) -> str:
    event = call.event
    return f"{'await ' if event.awaited else ''}{event.receiver}.{FLUSH}()"


def _help(call: SglangCall) -> str:
    if call.event.via == "http":
        return "Post to `/flush_cache` once the last update of the step is done (and check its status)"
    return f"Flush once the last update of the step is done: `{_flush_call(call)}`"


def _fix(file: FileSummary, call: SglangCall, context: Context) -> Fix:
    """`flush_cache()` on the same receiver right after the update, where the receiver is known to have it."""
    event = call.event
    message = _help(call)
    receiver = call.receiver
    known = receiver.kind is Kind.SGLANG and receiver.sglang_class in (
        SglangClass.ENGINE,
        SglangClass.TOKENIZER_MANAGER,
    )
    if receiver.kind is Kind.PROJECT and receiver.project_class is not None:
        known = defines(context.project, receiver.project_class.cls.name, FLUSH)
    if event.via == "http" or not known or not insertable_after(event.anchor):
        return Fix(message, Applicability.DISPLAY)
    change = insert_after(file.path, event.anchor, [NewStatement(_flush_call(call))])
    return Fix("Flush SGLang's cache after the weight update", Applicability.UNSAFE, changes=(change,))
