"""CL004 mm-processor-cache-desync: a cache-clearing pause on vLLM 0.17-0.21 without the processor-cache workaround."""

from __future__ import annotations

from collections.abc import Iterator

from packaging.version import Version

from cachelint.finding import Applicability, Finding, Fix
from cachelint.rules.base import Context, Rule, RuleInfo
from cachelint.rules.events import clears_caches, engine_reset_lines, is_engine_level
from cachelint.rules.insertions import insert_after, insertable_after
from cachelint.summary import FileSummary, FunctionSummary, ResetEvent, Workaround

DESYNC_FROM = Version("0.17.0")
DESYNC_FIXED = Version("0.22.0")


class MmProcessorCacheDesync(Rule):
    info = RuleInfo(
        code="CL004",
        name="mm-processor-cache-desync",
        summary="A cache-clearing pause or sleep that desyncs the multimodal processor cache on vLLM 0.17-0.21.",
        fixable="sometimes",
    )

    def check(self, file: FileSummary, context: Context) -> Iterator[Finding]:
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
                if (
                    clears_caches(event)
                    and _may_be_vllm_running(file, function, event)
                    and not _reset_after(function, event, context)
                ):
                    yield self.finding(
                        file,
                        event.span,
                        _message(event, context),
                        _HELP,
                        fix=_fix(file, event, context),
                        function=function.qualname,
                    )

    def _dropped_workarounds(
        self, file: FileSummary, context: Context, workarounds: list[tuple[FileSummary, Workaround]]
    ) -> Iterator[Finding]:
        """A subclass override of the method holding the workaround that does not call super()."""
        for _, workaround in workarounds:
            if not workaround.cls:
                continue
            method = workaround.function.rsplit(".", 1)[-1]
            for sub_file, sub in context.project.subclasses(workaround.cls):
                if sub_file.path != file.path:
                    continue
                override = file.function(f"{sub.name}.{method}")
                if override is not None and method not in override.super_calls:
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


def _may_be_vllm_running(file: FileSummary, function: FunctionSummary, event: ResetEvent) -> bool:
    """False for a call on an unknown receiver that cannot be vLLM's pause or sleep taking effect: a
    `pause_generation()` whose coroutine is dropped (before 0.22 only AsyncLLM and EngineClient have it,
    as a coroutine, so a plain call statement is some other object's method, or pauses nothing), and
    `self.name()` in a class that defines `name` itself (the project's own method, checked where it is)."""
    if event.receiver_class:
        return True
    if event.method == "pause_generation" and event.result_ignored and not (event.awaited or event.consumed):
        return False
    if event.receiver in ("self", "cls"):
        cls = function.qualname.split(".", 1)[0]
        return file.class_named(cls) is None or file.function(f"{cls}.{event.method}") is None
    return True


def _reset_after(function: FunctionSummary, pause: ResetEvent, context: Context) -> bool:
    """A front-end `reset_mm_cache()` later in the same function."""
    return any(
        event.method == "reset_mm_cache" and event.span > pause.span and is_engine_level(context.facts, event)
        for event in function.resets
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


_HELP = (
    'Disable the processor cache for vLLM < 0.22 (`engine_kwargs.setdefault("mm_processor_cache_gb", 0)`) '
    "or call `await engine.reset_mm_cache()` right after the pause"
)


def _fix(file: FileSummary, event: ResetEvent, context: Context) -> Fix:
    if event.via not in ("direct", "alias") or not insertable_after(event.anchor):
        return Fix(_HELP, Applicability.DISPLAY)
    lines = engine_reset_lines(event, "reset_mm_cache", context)
    edit = insert_after(file.path, event.anchor, lines)
    return Fix(f"Call `{lines[-1].strip()}` right after the pause", Applicability.UNSAFE, (edit,))
