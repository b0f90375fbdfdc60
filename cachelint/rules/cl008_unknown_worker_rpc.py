"""CL008 unknown-worker-rpc: `collective_rpc("<name>")` for a method no vLLM worker of the supported range has."""

from __future__ import annotations

from collections.abc import Iterator

from cachelint.changes import ReplaceExpression
from cachelint.facts import ApiFact, EngineClass
from cachelint.finding import Applicability, Finding, Fix
from cachelint.rules.base import Context, Rule, RuleInfo
from cachelint.rules.events import describe_releases
from cachelint.summary import CallSite, FileSummary, FunctionSummary

# Where `collective_rpc("<name>")` looks the name up: the worker wrapper, then the worker (with any
# worker extension mixed in).
WORKER_CLASSES = ("WorkerWrapperBase", "WorkerBase", EngineClass.WORKER.value)
ENGINE_CLASSES = (EngineClass.ASYNC_LLM, EngineClass.LLM, EngineClass.LLM_ENGINE)


class UnknownWorkerRpc(Rule):
    info = RuleInfo(
        code="CL008",
        name="unknown-worker-rpc",
        summary="A `collective_rpc` of a method that no vLLM worker in the supported range defines.",
        fixable="sometimes",
        fix_kinds=("unsafe",),
    )

    def check(self, file: FileSummary, context: Context) -> Iterator[Finding]:
        if file.engine == "other":
            return
        for function in file.functions:
            for call in function.calls:
                if call.via != "rpc":
                    continue
                known = _worker_facts(call.name, context)
                if not known or _exists_somewhere(known, context) or _project_defines(file, function, call, context):
                    continue
                yield self.finding(
                    file,
                    call.span,
                    _message(call, known, context),
                    _help(call, context),
                    fix=_fix(file, function, call, context),
                    function=function.qualname,
                )


def _worker_facts(name: str, context: Context) -> list[ApiFact]:
    """What the facts say about `name` on vLLM's workers; empty when they do not know the name."""
    facts = context.facts
    candidates = [facts.worker_rpc(name), *(facts.get(name, cls) for cls in WORKER_CLASSES)]
    return [fact for fact in candidates if fact is not None]


def _exists_somewhere(known: list[ApiFact], context: Context) -> bool:
    return any(fact.exists_in(release) for fact in known for release in context.supported.releases)


def _project_defines(file: FileSummary, function: FunctionSummary, call: CallSite, context: Context) -> bool:
    """A worker extension of the project defines the method (or a class named like one does: it may be
    configured where cachelint cannot see, e.g. in a YAML file)."""
    project = context.project
    if project.resolve(file, function, call):
        return True
    for ref in project.functions_by_name.get(call.name, []):
        name = ref.function.cls.lower()
        if "worker" in name or "extension" in name:
            return True
    return False


def _message(call: CallSite, known: list[ApiFact], context: Context) -> str:
    rpc = f'collective_rpc("{call.name}")'
    firsts = sorted(fact.first_release for fact in known if fact.first_release is not None)
    supported = list(context.supported.releases)
    if not firsts:
        reason = f"no vLLM worker defines `{call.name}` in any release through {context.facts.releases[-1]}"
        note = next((fact.notes for fact in known if fact.notes.startswith("Always an error:")), "")
        if note:
            reason += f" ({note.split('.')[0].removeprefix('Always an error: ')})"
    elif firsts[0] > supported[-1]:
        reason = (
            f"vLLM's workers define `{call.name}` only from {firsts[0]}, later than every supported release "
            f"({describe_releases(supported)})"
        )
    else:
        reason = f"no supported release ({describe_releases(supported)}) defines `{call.name}` on vLLM's workers"
    return (
        f"`{rpc}` fails at run time: {reason}, and no worker extension of this project defines it, so the "
        "workers' lookup of the method raises"
    )


def _engine_class(call: CallSite) -> EngineClass | None:
    if call.receiver_class:
        cls = EngineClass(call.receiver_class)
        return cls if cls in ENGINE_CLASSES else None
    return EngineClass.ASYNC_LLM if call.awaited else EngineClass.LLM


def _engine_method(call: CallSite, context: Context) -> str | None:
    """`engine.<name>()` when the engine itself has the method (in some supported release: the rpc fails
    in all of them)."""
    cls = _engine_class(call)
    fact = context.facts.get(call.name, cls) if cls is not None else None
    if fact is None or not any(fact.exists_in(release) for release in context.supported.releases):
        return None
    return f"{call.receiver}.{call.name}()"


def _help(call: CallSite, context: Context) -> str:
    replacement = _engine_method(call, context)
    if replacement is not None:
        return f"Call the engine's own method instead: `{'await ' if call.awaited else ''}{replacement}`"
    facts = context.facts
    if any(facts.get(call.name, cls) for cls in ENGINE_CLASSES):
        return (
            f"`{call.name}` is an engine method, not a worker one: call `await engine.{call.name}()` on an "
            f"AsyncLLM or `llm.{call.name}()` on an LLM"
        )
    return f"Define `{call.name}` on a worker extension (`worker_extension_cls=`) or call an engine method"


def _fix(file: FileSummary, function: FunctionSummary, call: CallSite, context: Context) -> Fix:
    replacement = _engine_method(call, context)
    event = next((e for e in function.resets if e.via == "rpc" and e.span == call.span), None)
    extra_arguments = event is None or event.positional or event.keywords or event.star_kwargs
    if replacement is None or extra_arguments:
        return Fix(_help(call, context), Applicability.DISPLAY)
    change = ReplaceExpression(file.path, call.span, replacement)
    return Fix(f"Call `{replacement}`", Applicability.UNSAFE, changes=(change,))
