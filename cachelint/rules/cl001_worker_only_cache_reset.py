"""CL001 worker-only-cache-reset: a reset that reaches only vLLM's workers, not the scheduler."""

from __future__ import annotations

from collections.abc import Iterator

from cachelint.facts import EngineClass, Scope
from cachelint.finding import Finding
from cachelint.rules.base import Context, Rule, RuleInfo
from cachelint.summary import FileSummary, FunctionSummary, ResetEvent

WORKER_RESETS = ("reset_encoder_cache", "reset_mm_cache")


class WorkerOnlyCacheReset(Rule):
    info = RuleInfo(
        code="CL001",
        name="worker-only-cache-reset",
        summary="A cache reset that reaches only vLLM's workers and leaves the scheduler's record stale.",
        fixable="sometimes",
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
                        function=function.qualname,
                    )

    def _is_worker_only(
        self, file: FileSummary, function: FunctionSummary, event: ResetEvent, context: Context
    ) -> bool:
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
        return f"Call the engine-level reset instead: `{awaited}{event.receiver}.{method}()`"
    return (
        f"Reset at engine level from the driver side: `await engine.{method}()` on an AsyncLLM, "
        f"`llm.llm_engine.{method}()` on a sync LLM"
    )
