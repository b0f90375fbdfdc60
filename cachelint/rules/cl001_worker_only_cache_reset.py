"""CL001 worker-only-cache-reset: a reset that reaches only vLLM's workers, not the scheduler."""

from __future__ import annotations

from collections.abc import Iterator

from cachelint.changes import Change, NewStatement, ReplaceExpression
from cachelint.facts import EngineClass, Scope
from cachelint.finding import Applicability, Finding, Fix
from cachelint.project import FunctionRef
from cachelint.rules.base import Context, Rule, RuleInfo
from cachelint.rules.events import is_engine_level
from cachelint.rules.insertions import insert_after, insertable_after, remove_statement
from cachelint.summary import CallSite, FileSummary, FunctionSummary, ResetEvent

WORKER_RESETS = ("reset_encoder_cache", "reset_mm_cache")


class WorkerOnlyCacheReset(Rule):
    info = RuleInfo(
        code="CL001",
        name="worker-only-cache-reset",
        summary="A cache reset that reaches only vLLM's workers and leaves the scheduler's record stale.",
        fixable="sometimes",
        fix_kinds=("unsafe",),
    )

    def check(self, file: FileSummary, context: Context) -> Iterator[Finding]:
        if file.engine == "other":
            return
        for function in file.functions:
            for event in function.resets:
                if self._is_worker_only(file, function, event, context):
                    yield self.finding(
                        file,
                        event.span,
                        _message(event, context),
                        _help(event),
                        fix=_fix(file, function, event, context),
                        function=function.qualname,
                    )

    def _is_worker_only(
        self, file: FileSummary, function: FunctionSummary, event: ResetEvent, context: Context
    ) -> bool:
        if function.name == _engine_method(event) and _in_worker_extension(file, function, context):
            return False  # the worker's own reset, which the engine-level reset runs on every worker
        if event.method == "clear":
            return _owner_is_worker(file, function, event.chain[:-1], context)
        if event.method not in WORKER_RESETS:
            return False
        if event.via == "rpc":
            fact = context.facts.worker_rpc(event.method)
            return fact is not None and fact.scope is Scope.WORKER_ONLY
        if event.via not in ("direct", "alias"):
            return False
        if event.receiver_class:
            fact = context.facts.get(event.method, event.receiver_class)
            return fact is not None and fact.scope is Scope.WORKER_ONLY
        return event.chain == ["self"] and _in_worker_extension(file, function, context)


def _in_worker_extension(file: FileSummary, function: FunctionSummary, context: Context) -> bool:
    cls = file.class_named(function.cls) if function.cls else None
    return cls is not None and context.project.is_worker_extension(cls)


def _owner_is_worker(file: FileSummary, function: FunctionSummary, chain: list[str], context: Context) -> bool:
    """Whether the object holding `encoder_cache` is a model runner or worker."""
    if chain == ["self"]:
        return _in_worker_extension(file, function, context)
    return bool(chain) and chain[-1] in ("model_runner", "driver_worker", "worker")


def _engine_prefix(event: ResetEvent) -> str | None:
    """`llm.llm_engine` in `llm.llm_engine.model_executor.driver_worker.model_runner`."""
    for name in ("llm_engine", "engine_core"):
        if name in event.chain:
            return ".".join(event.chain[: event.chain.index(name) + 1])
    return None


def _message(event: ResetEvent, context: Context) -> str:
    cache = "encoder" if event.method in ("reset_encoder_cache", "clear") else "multimodal"
    if event.via == "rpc":
        call = f'collective_rpc("{event.method}")'
    elif event.method == "clear":
        call = f"{'.'.join(event.chain)}.clear()"
    else:
        call = f"{event.receiver or 'self'}.{event.method}()"
    if cache == "encoder":
        return (
            f"`{call}` clears only the workers' encoder-output tensors; the scheduler keeps its record of "
            "the cached images, so the next request with the same image fails with 'Encoder cache miss'"
        )
    fact = context.facts.get("reset_mm_cache", EngineClass.MODEL_RUNNER)
    what = "a profiling cache" if fact is not None else "worker state"
    return (
        f"`{call}` clears only {what} on the workers; the multimodal processor caches (front-end and "
        "engine) keep items computed with the old weights"
    )


def _help(event: ResetEvent) -> str:
    method = "reset_encoder_cache" if event.method in ("reset_encoder_cache", "clear") else event.method
    prefix = _engine_prefix(event)
    if prefix and prefix.endswith("llm_engine"):
        return f"Call the engine-level reset instead: `{prefix}.{method}()`"
    if event.via == "rpc":
        awaited = "await " if event.awaited else ""
        return f"Call the engine-level reset instead: `{awaited}{_rpc_call(event, method)}`"
    return (
        f"Reset at engine level from the driver side: `await engine.{method}()` on an AsyncLLM, "
        f"`llm.llm_engine.{method}()` on a sync LLM"
    )


def _engine_method(event: ResetEvent) -> str:
    return "reset_encoder_cache" if event.method in ("reset_encoder_cache", "clear") else event.method


def _fix(file: FileSummary, function: FunctionSummary, event: ResetEvent, context: Context) -> Fix | None:
    method = _engine_method(event)
    prefix = _engine_prefix(event)
    if prefix and prefix.endswith("llm_engine"):
        span = event.span if event.method == "clear" else event.callee_span
        code = f"{prefix}.{method}()" if event.method == "clear" else f"{prefix}.{method}"
        change = ReplaceExpression(file.path, span, code)
        return Fix(f"Call `{prefix}.{method}()`", Applicability.UNSAFE, changes=(change,))
    if event.via == "rpc":
        return _rpc_fix(file, event, method)
    return _driver_side_fix(file, function, event, context, method)


def _rpc_call(event: ResetEvent, method: str) -> str:
    """The engine-level call that replaces `collective_rpc("<method>")`: on the engine that ran it (a sync
    `LLM` through `llm.llm_engine`, an engine-core client through its engine)."""
    receiver_class = event.receiver_class
    receiver = event.receiver
    if event.chain and event.chain[-1] == "engine_core" and "()" not in event.chain:
        receiver = ".".join(event.chain[:-1])
        receiver_class = EngineClass.ASYNC_LLM.value if event.consumed else EngineClass.LLM_ENGINE.value
    if receiver_class == EngineClass.LLM.value or (not receiver_class and not event.consumed):
        return f"{receiver}.llm_engine.{method}()"
    return f"{receiver}.{method}()"


def _rpc_fix(file: FileSummary, event: ResetEvent, method: str) -> Fix:
    call = _rpc_call(event, method)
    if event.positional or event.keywords or event.star_kwargs:
        return Fix(f"Call `{call}` instead", Applicability.DISPLAY)
    return Fix(f"Call `{call}`", Applicability.UNSAFE, changes=(ReplaceExpression(file.path, event.span, call),))


def _driver_reset(ref: FunctionRef, site: CallSite, method: str) -> str | None:
    """The engine-level reset on the object that ran `collective_rpc`, in its style; None when the
    rpc's coroutine is awaited elsewhere (the reset must wait for it, so no single place is right)."""
    if site.awaited:
        return f"await {site.receiver}.{method}()"
    if ref.function.is_async and site.receiver_class != EngineClass.LLM.value:
        return None
    if site.receiver_class in (EngineClass.LLM_ENGINE.value, EngineClass.ENGINE_CORE.value):
        return f"{site.receiver}.{method}()"
    return f"{site.receiver}.llm_engine.{method}()"


def _driver_sites(function: FunctionSummary, context: Context) -> list[tuple[FunctionRef, CallSite]]:
    """The `collective_rpc("<this method>")` calls that run this worker-extension method."""
    sites = context.project.memoized("CL001-rpc-sites", lambda: _rpc_sites_by_name(context))
    return list(sites.get(function.name, []))


def _rpc_sites_by_name(context: Context) -> dict[str, list[tuple[FunctionRef, CallSite]]]:
    """Indexed once per run: one scan of the project per finding is quadratic."""
    by_name: dict[str, list[tuple[FunctionRef, CallSite]]] = {}
    for ref in context.project.functions():
        for call in ref.function.calls:
            if call.via == "rpc" and call.anchor is not None:
                by_name.setdefault(call.name, []).append((ref, call))
    return by_name


def _already_resets(ref: FunctionRef, site: CallSite, method: str, context: Context) -> bool:
    assert site.anchor is not None
    end = site.anchor.statement_span.end_line
    return any(
        event.method == method and end < event.span.line <= end + 3 and is_engine_level(context.facts, event)
        for event in ref.function.resets
    )


def _driver_side_fix(
    file: FileSummary, function: FunctionSummary, event: ResetEvent, context: Context, method: str
) -> Fix:
    sites = _driver_sites(function, context)
    where = f'right after the `collective_rpc("{function.name}")` call that runs `{function.qualname}`'
    advice = f"Remove this call and reset at engine level on the driver side, {where}"
    anchor = event.anchor
    if not sites or anchor is None:
        return Fix(f"{advice}: `await engine.{method}()` on an AsyncLLM", Applicability.DISPLAY)
    changes: list[Change] = [remove_statement(file.path, anchor)]
    for ref, site in sites:
        assert site.anchor is not None
        reset = _driver_reset(ref, site, method)
        if reset is None or not insertable_after(site.anchor):
            where = f"{ref.file.path}:{site.span.line}"
            return Fix(f"{advice} ({where}), once its coroutine has been awaited", Applicability.DISPLAY)
        if not _already_resets(ref, site, method, context):
            changes.append(insert_after(ref.file.path, site.anchor, [NewStatement(reset)]))
    return Fix(advice, Applicability.UNSAFE, changes=tuple(changes))
