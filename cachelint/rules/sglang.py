"""Judging SGLang calls (CL201-CL204): what the receiver is, where the weight-update paths go, which
calls flush SGLang's cache, and which supported SGLang releases have a method (from the SGLang facts).

The refit cycle, as the SGLang rules see it: around a call on a weight-update path, the steps that run
before it and after it before the engine generates again, in its function and in its callers around
their call of it (MAX_CALLER_DEPTH up). A step is a call that flushes SGLang's radix cache, releases the
engine's memory (SGLang flushes on release) or resumes it (the cache comes back empty), made directly or
through a project function that reaches one (resolved by the call graph, else, one call away, by the
name of the project functions it may run). `cycle(context, ref, point)` gives them; the vLLM refit cycle
can take the same shape (`Step`, `Cycle`) when the two are unified.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from packaging.version import Version

from cachelint import provenance
from cachelint.facts import SglangClass
from cachelint.finding import Span
from cachelint.overridden import never_named, never_runs
from cachelint.project import GENERIC_NAMES, FunctionRef, Reached
from cachelint.provenance import Kind, ProjectClass, Receiver
from cachelint.rules.base import Context
from cachelint.summary import SGLANG_UPDATES, CallSite, FileSummary, FunctionSummary, ResetEvent

# Calls that clear SGLang's radix (KV) cache: a flush, or a weight update that flushes (the default).
FLUSH = "flush_cache"
RELEASE = "release_memory_occupation"
RESUME = "resume_memory_occupation"
MAX_CALLER_DEPTH = 3
# An import of an engine other than SGLang, at the start of a line.
OTHER_ENGINE_IMPORT = re.compile(rb"^[ \t]*(?:from|import)[ \t]+(?:vllm|lmdeploy|tensorrt_llm)\b", re.MULTILINE)
OTHER_ENGINE_WORDS = (b"vllm", b"lmdeploy", b"tensorrt_llm")


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
        found = provenance.route_receiver(file, function, event.method, sole_engine(context))
        return found if found.kind is Kind.SGLANG else None
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
    outer = function.qualname.split(".")[0]
    enclosing = file.class_named(outer)
    if found.kind is Kind.UNKNOWN and event.chain[:1] == ["self"] and enclosing is not None:
        # `self` of the method a nested function (a route handler, a callback) is defined in
        if forwards(context, outer, event.method):
            why = f"`self` is the project's `{outer}`, whose `{event.method}` calls SGLang"
            return Receiver(Kind.PROJECT, why, project_class=ProjectClass(file, enclosing))
        if provenance.defines(context.project, outer, event.method):
            return None
    sglang_module = file.engine != "vllm" or file.imports_sglang
    if found.kind is Kind.UNKNOWN and event.method != "pause_generation" and sglang_module and uses_sglang(context):
        shown = event.receiver or "self"
        return Receiver(
            Kind.UNKNOWN, f"`{shown}` is not known, but `{event.method}` is SGLang's and the project uses it"
        )
    return None


def sole_engine(context: Context) -> bool:
    """Whether SGLang is the only engine the project uses: it uses SGLang, and no file imports vLLM,
    LMDeploy or TensorRT-LLM (a server it posts to is then SGLang's)."""

    def find() -> bool:
        if not uses_sglang(context):
            return False
        return not any(
            any(word in raw for word in OTHER_ENGINE_WORDS) and OTHER_ENGINE_IMPORT.search(raw) is not None
            for _, raw in context.project_bytes()
        )

    return context.project.memoized("sglang:sole-engine", find)


def runs(context: Context, ref: FunctionRef) -> bool:
    """Whether some object may run `ref`: not a method of a class the project never names outside its
    own `class` statement, comments and imports (a backend left out of the registry), nor one that no
    object runs (cachelint.overridden)."""
    cls = ref.function.cls.split(".")[0]
    if cls and never_named(context.project, cls, context.project_bytes):
        return False
    return not never_runs(context.project, ref.file, ref.function, context.summaries_where)


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
            if receiver is not None and runs(context, ref):
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


@dataclass(frozen=True)
class Step:
    """A call of the refit cycle: what it does to SGLang (FLUSH, RELEASE or RESUME) and where it is made."""

    does: str
    ref: FunctionRef
    span: Span


@dataclass
class Cycle:
    """The steps before and after a call on a weight-update path (see the module doc)."""

    before: list[Step] = field(default_factory=list)
    after: list[Step] = field(default_factory=list)

    def flushed_after(self) -> bool:
        """The cache is flushed after the call, or it ran while the engine's memory was released (released
        before, resumed after: the engine comes back with an empty cache)."""
        if any(step.does == FLUSH for step in self.after):
            return True
        return any(step.does == RESUME for step in self.after) and any(
            step.does in (FLUSH, RELEASE) for step in self.before
        )


def _own_effects(function: FunctionSummary) -> set[str]:
    found = {FLUSH for event in function.sglang if is_flush(event)}
    found.update(call.name for call in function.calls if call.name in (FLUSH, RELEASE, RESUME))
    return found


def effects(context: Context, ref: FunctionRef) -> frozenset[str]:
    """What calling `ref` does to SGLang (FLUSH, RELEASE, RESUME): it, or a function it reaches, does it."""

    def find() -> frozenset[str]:
        found: set[str] = set()
        for reached in context.project.reachable(ref):
            found |= _own_effects(reached.ref.function)
        return frozenset(found)

    return context.project.memoized(f"sglang:effects:{ref.key}", find)


def flushes(context: Context, ref: FunctionRef) -> bool:
    """Whether calling `ref` flushes SGLang's cache: it, or a function it reaches, does."""
    return FLUSH in effects(context, ref)


def call_effects(context: Context, ref: FunctionRef, call: CallSite) -> frozenset[str]:
    """What a call made in `ref` does to SGLang: by the name of SGLang's call, else through the project
    functions it resolves to, else (the call graph cannot follow it: a Ray handle, a worker group) through
    the project's methods of that name."""
    if call.name in (FLUSH, RELEASE, RESUME):
        return frozenset({call.name})
    targets = context.project.resolve(ref.file, ref.function, call)
    if not targets and call.chain and call.name not in GENERIC_NAMES:
        targets = [other for other in context.project.functions_by_name.get(call.name, []) if other.function.cls]
    found: set[str] = set()
    for target in targets:
        found |= effects(context, target)
    return frozenset(found)


def _before(item: ResetEvent | CallSite, point: Span) -> bool:
    return (item.span.end_line, item.span.end_col) <= (point.line, point.col)


def _after(item: ResetEvent | CallSite, point: Span) -> bool:
    return (item.span.line, item.span.col) > (point.end_line, point.end_col)


def cycle(context: Context, ref: FunctionRef, point: Span) -> Cycle:
    """The refit cycle around the call at `point` in `ref` (see the module doc)."""
    found = Cycle()
    _collect(context, ref, point, found, 0, {ref.key})
    return found


def _collect(
    context: Context, ref: FunctionRef, point: Span, found: Cycle, depth: int, seen: set[tuple[str, str]]
) -> None:
    function = ref.function
    for event in function.sglang:
        if is_flush(event) or event.method == RELEASE:
            steps = found.after if _after(event, point) else found.before if _before(event, point) else None
            if steps is not None:
                steps.append(Step(FLUSH if is_flush(event) else RELEASE, ref, event.span))
    events = {event.span for event in function.sglang}
    for call in function.calls:
        if call.span in events:  # counted as the SGLang call it is
            continue
        steps = found.after if _after(call, point) else found.before if _before(call, point) else None
        if steps is not None:
            steps.extend(Step(does, ref, call.span) for does in sorted(call_effects(context, ref, call)))
    if depth >= MAX_CALLER_DEPTH:
        return
    for caller, site in [*callers(context, ref), *callers_elsewhere(context, ref)]:
        if caller.key not in seen:
            seen.add(caller.key)
            _collect(context, caller, site.span, found, depth + 1, seen)


def flushed_later(context: Context, ref: FunctionRef, point: Span) -> bool:
    """Whether SGLang's cache is flushed after the call at `point` (in `ref`) before the engine generates
    again: on its refit cycle (`cycle`), or anywhere else on a weight-update path through `ref` (the
    order of the functions of a path is not known: they count)."""
    if cycle(context, ref, point).flushed_after():
        return True
    return ref.key in refit_reached(context) and _path_flushes(context, ref)


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


def callers_elsewhere(context: Context, ref: FunctionRef) -> list[tuple[FunctionRef, CallSite]]:
    """The calls that may run `ref` in the project's files the run did not summarize (a pipeline that
    calls the rollout's methods holds no trigger word of its own), found by the function's name in their
    bytes and parsed then."""
    name = ref.function.name
    if name in GENERIC_NAMES or name.startswith("__"):
        return []

    def find() -> list[FileSummary]:
        word = name.encode()
        indexed = context.project.files
        return [
            summary
            for summary in context.summaries_where(lambda path, raw: word in raw and path not in indexed)
            if summary.path not in indexed
        ]

    found = []
    for summary in context.project.memoized(f"sglang:callers-elsewhere:{name}", find):
        for function in summary.functions:
            for call in function.calls:
                if call.name == name and any(
                    target.key == ref.key for target in context.project.resolve(summary, function, call)
                ):
                    found.append((FunctionRef(summary, function), call))
    return found


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
