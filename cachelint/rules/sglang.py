"""Judging SGLang calls (CL201-CL204): what the receiver is, where the weight-update paths go, which
calls flush SGLang's cache, and which supported SGLang releases have a method (from the SGLang facts)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from packaging.version import Version

from cachelint import provenance
from cachelint.facts import SglangClass
from cachelint.finding import Span
from cachelint.project import FunctionRef, Reached
from cachelint.provenance import Kind, Receiver
from cachelint.rules.base import Context
from cachelint.summary import SGLANG_UPDATES, CallSite, FileSummary, FunctionSummary, ResetEvent

# Calls that clear SGLang's radix (KV) cache: a flush, or a weight update that flushes (the default).
FLUSH = "flush_cache"
MAX_CALLER_DEPTH = 3


@dataclass(frozen=True)
class SglangCall:
    """An SGLang call of the project, with why its receiver is taken for SGLang's."""

    ref: FunctionRef
    event: ResetEvent
    receiver: Receiver

    @property
    def note(self) -> str:
        return f"receiver: {self.receiver.why}"


def uses_sglang(context: Context) -> bool:
    """Whether the project uses SGLang: it pins SGLang (or sets its range), or one of its files imports it."""

    def find() -> bool:
        if not context.sglang_range.assumed:
            return True
        return any(file.imports_sglang for file in context.project.files.values()) or context.imports_sglang()

    return context.project.memoized("sglang:uses", find)


def sglang_receiver(
    context: Context, file: FileSummary, function: FunctionSummary, event: ResetEvent
) -> Receiver | None:
    """What makes `event` a call on SGLang, or None when it is not one: SGLang's object (`Engine`,
    `TokenizerManager`), a route of SGLang's server, a project class that subclasses SGLang's `Engine` or
    whose method of that name calls SGLang (a client or a wrapper), or, in a project that uses SGLang, an
    object of unknown class given one of SGLang's own method names (which vLLM lacks)."""
    if event.via == "http":
        return Receiver(Kind.SGLANG, f"`/{event.method}` is a route of SGLang's server", sglang_class=SglangClass.HTTP)
    head = event.chain[0] if event.chain else ""
    if head in file.imports and provenance.module_engine(file.imports[head]) != "sglang":
        return None  # a function of an imported module (`names.update_weights_from_disk(...)`)
    found = provenance.receiver(context.project, file, function, event)
    if found.kind is Kind.SGLANG:
        return found
    if found.kind is Kind.PROJECT and found.project_class is not None:
        cls = found.project_class.cls.name
        if subclasses_sglang(context, cls):
            why = f"{found.why}, a subclass of SGLang's Engine"
            return Receiver(Kind.SGLANG, why, project_class=found.project_class, sglang_class=SglangClass.ENGINE)
        if forwards(context, cls, event.method):
            why = f"{found.why}, whose `{event.method}` calls SGLang"
            return Receiver(Kind.PROJECT, why, project_class=found.project_class)
        return None
    sglang_module = file.engine != "vllm" or file.imports_sglang
    if found.kind is Kind.UNKNOWN and event.method != "pause_generation" and sglang_module and uses_sglang(context):
        shown = event.receiver or "self"
        return Receiver(
            Kind.UNKNOWN, f"`{shown}` is not known, but `{event.method}` is SGLang's and the project uses it"
        )
    return None


def subclasses_sglang(context: Context, cls: str) -> bool:
    """Whether the project class `cls` is SGLang's (its `Engine`) or derives from one."""
    project = context.project
    for name in (cls, *project.base_classes(cls)):
        for owner, summary in project.classes_by_name.get(name, []):
            if provenance.class_engine(owner, summary) == "sglang":
                return True
    return False


def forwards(context: Context, cls: str, method: str) -> bool:
    """Whether the project's `cls.method` calls SGLang (an SGLang method or route) in its body."""
    return any(ref.function.sglang for ref in provenance.methods(context.project, cls, method))


def sglang_calls(context: Context, methods: frozenset[str]) -> list[SglangCall]:
    """Every call of one of `methods` on SGLang in the project, in file and line order (once per run and
    set of methods)."""

    def find() -> list[SglangCall]:
        candidates = [
            (ref, event)
            for ref in context.project.functions()
            for event in ref.function.sglang
            if event.method in methods
        ]
        if not candidates or not uses_sglang(context):
            return []
        found = []
        for ref, event in candidates:
            receiver = sglang_receiver(context, ref.file, ref.function, event)
            if receiver is not None:
                found.append(SglangCall(ref, event, receiver))
        return sorted(found, key=lambda call: (call.ref.file.path, call.event.span))

    return context.project.memoized(f"sglang:calls:{','.join(sorted(methods))}", find)


def refit_reached(context: Context) -> dict[tuple[str, str], Reached]:
    """Every function on a weight-update path (reachable from a refit root), with its shortest path."""

    def find() -> dict[tuple[str, str], Reached]:
        shortest: dict[tuple[str, str], Reached] = {}
        for root in context.project.refit_roots(context.settings.all_refit_functions):
            for reached in context.project.reachable(root):
                known = shortest.get(reached.ref.key)
                if known is None or len(reached.path) < len(known.path):
                    shortest[reached.ref.key] = reached
        return shortest

    return context.project.memoized("sglang:refit", find)


def on_refit_path(context: Context, ref: FunctionRef) -> bool:
    """A function a refit root reaches, or one that updates SGLang's weights itself."""
    return ref.key in refit_reached(context) or any(e.method in SGLANG_UPDATES for e in ref.function.sglang)


def is_flush(event: ResetEvent) -> bool:
    """A flush of SGLang's radix cache: `flush_cache()`, or a weight update that flushes (the default)."""
    if event.method == FLUSH:
        return True
    return event.method in SGLANG_UPDATES and event.keywords.get("flush_cache", "True") != "False"


def flushes(context: Context, ref: FunctionRef) -> bool:
    """Whether calling `ref` flushes SGLang's cache: it, or a function it reaches, does."""

    def find() -> bool:
        return any(
            any(is_flush(event) for event in reached.ref.function.sglang)
            or any(call.name == FLUSH for call in reached.ref.function.calls)
            for reached in context.project.reachable(ref)
        )

    return context.project.memoized(f"sglang:flushes:{ref.key}", find)


def _after(item: ResetEvent | CallSite, point: Span) -> bool:
    return (item.span.line, item.span.col) > (point.end_line, point.end_col)


def flushed_later(context: Context, ref: FunctionRef, point: Span, depth: int = 0) -> bool:
    """Whether SGLang's cache is flushed after the call at `point` (in `ref`) on its path: later in the
    same function (a flush, or a call that flushes), anywhere else on a weight-update path through `ref`
    (the order of the functions of a path is not known: they count), or in a caller after its call of
    `ref`."""
    function = ref.function
    if any(_after(other, point) and is_flush(other) for other in function.sglang):
        return True
    for call in function.calls:
        if _after(call, point) and (
            call.name == FLUSH
            or any(flushes(context, target) for target in context.project.resolve(ref.file, function, call))
        ):
            return True
    if depth == 0 and ref.key in refit_reached(context) and _path_flushes(context, ref):
        return True
    if depth >= MAX_CALLER_DEPTH:
        return False
    return any(flushed_later(context, caller, call.span, depth + 1) for caller, call in callers(context, ref))


def _path_flushes(context: Context, ref: FunctionRef) -> bool:
    """Whether some refit root that reaches `ref` reaches a flush in another function."""
    for root in context.project.refit_roots(context.settings.all_refit_functions):
        reached = list(context.project.reachable(root))
        if any(item.ref.key == ref.key for item in reached) and any(
            item.ref.key != ref.key and any(is_flush(event) for event in item.ref.function.sglang) for item in reached
        ):
            return True
    return False


def callers(context: Context, ref: FunctionRef) -> Iterator[tuple[FunctionRef, CallSite]]:
    """The project's calls that may run `ref`, with the function making each."""
    name = ref.function.name
    for caller in context.project.functions():
        for call in caller.function.calls:
            if call.name == name and any(
                target.key == ref.key for target in context.project.resolve(caller.file, caller.function, call)
            ):
                yield caller, call


def stated_releases(context: Context, releases: list[Version], since: Version | None) -> list[Version]:
    """Those of `releases` (supported releases a call fails on) that the project says it runs on: all of
    them, but those before `since` (the release that added what the call needs) when the project names no
    oldest release, for code that makes the call unguarded says it needs `since` or later."""
    if since is None or context.sglang_range.floor_declared:
        return releases
    return [release for release in releases if release >= since]


def describe(releases: list[Version]) -> str:
    """`0.4.6-0.5.3`, or the one release."""
    return str(releases[0]) if len(releases) == 1 else f"{releases[0]}-{releases[-1]}"
