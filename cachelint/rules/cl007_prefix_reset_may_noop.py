"""CL007 prefix-reset-may-noop: a refit's prefix reset that does nothing while requests still hold KV blocks."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

from packaging.version import Version

from cachelint.changes import AddKeyword
from cachelint.facts import EngineClass
from cachelint.finding import Applicability, Finding, Fix, Span
from cachelint.project import FunctionRef, ProjectIndex, Reached
from cachelint.rules.base import Context, Rule, RuleInfo, where_run
from cachelint.rules.events import argument, gates_allow, is_false
from cachelint.summary import CallSite, FileSummary, ResetEvent
from cachelint.summary.nodes import names_a_lock

FORCE = "reset_running_requests"
# Calls after which no request holds KV blocks: a pause (not mode="keep", which keeps the requests and
# their blocks), an abort of every request, a drain, an engine sleep, or the wake-up that ends one (the
# engine was idle while asleep).
QUIESCE_PREFIXES = ("pause", "drain", "sleep", "wake_up", "wait_for_requests_to_drain", "wait_for_engine_idle")
SINGLE_ABORTS = frozenset({"abort", "abort_request", "abort_requests"})
# What a lock's name holds (`engine_lock`, `_weight_sync_lock`, `vllm_lock`; see `names_a_lock`).
LOCK_WORD = "lock"
# Bytes a file holds when it calls something named like a quiesce or takes a lock: one that may pause
# before it calls a refit root, which the engine then parses even when it holds no trigger word.
QUIESCE_WORDS = tuple(prefix.encode() for prefix in (*QUIESCE_PREFIXES, "abort", LOCK_WORD))
NOT_ENGINES = frozenset({"asyncio", "time", "trio", "anyio", "gevent", "eventlet"})
KEEP_MODE = ('"keep"', "'keep'")
MAX_WRAPPER_DEPTH = 3


# A function taking a lock: its key (file, qualname) and its class.
Taker = tuple[tuple[str, str], str]


@dataclass(frozen=True)
class NoopRisk:
    reached: Reached
    event: ResetEvent


class PrefixResetMayNoop(Rule):
    info = RuleInfo(
        code="CL007",
        name="prefix-reset-may-noop",
        summary="A refit's `reset_prefix_cache()` that silently does nothing while requests still hold KV blocks.",
        fixable="sometimes",
        fix_kinds=("unsafe",),
    )

    def check(self, file: FileSummary, context: Context) -> Iterator[Finding]:
        return where_run(self._findings(file, context), file, context)

    def _findings(self, file: FileSummary, context: Context) -> Iterator[Finding]:
        for risk in noop_risks(context):
            if risk.reached.ref.file.path != file.path:
                continue
            yield self.finding(
                file,
                risk.event.span,
                _message(risk, context),
                _help(context),
                fix=_fix(file, risk.event, context),
                function=risk.reached.ref.function.qualname,
            )


def noop_risks(context: Context) -> list[NoopRisk]:
    """Every flagged prefix reset in the project, computed once per run."""
    return context.project.memoized("CL007", lambda: list(_find(context)))


def _find(context: Context) -> Iterator[NoopRisk]:
    """Each flagged reset once, with the shortest path from a refit root."""
    shortest: dict[tuple[str, int, int], NoopRisk] = {}
    for root in context.project.refit_roots(context.settings.all_refit_functions):
        for reached in context.project.reachable(root):
            if reached.ref.file.engine == "other":
                continue
            for event in reached.ref.function.resets:
                if not may_noop(event, context.project) or _quiesced_before(reached, event, context):
                    continue
                key = (reached.ref.file.path, event.span.line, event.span.col)
                known = shortest.get(key)
                if known is None or len(reached.path) < len(known.reached.path):
                    shortest[key] = NoopRisk(reached, event)
    yield from sorted(shortest.values(), key=lambda risk: (risk.reached.ref.file.path, risk.event.span))


def may_noop(event: ResetEvent, project: ProjectIndex) -> bool:
    """An awaited AsyncLLM prefix reset, not forced, whose result nobody reads (an unawaited one never runs
    at all: CL005)."""
    if event.method != "reset_prefix_cache" or event.via not in ("direct", "alias") or not event.result_ignored:
        return False
    if not event.awaited:
        return False
    if event.positional or event.star_kwargs or event.keywords.get(FORCE, "False") != "False":
        return False
    if event.receiver_class:
        return event.receiver_class == EngineClass.ASYNC_LLM.value
    # An unknown awaited receiver is taken for an AsyncLLM, unless the project has a method of that name
    # (a wrapper, judged where its own reset is).
    return not any(ref.function.cls for ref in project.functions_by_name.get(event.method, []))


def _named_like_quiesce(file: FileSummary, call: CallSite) -> bool:
    if call.via == "rpc" or (call.chain and call.chain[0] in NOT_ENGINES):
        return False
    if not call.chain and file.imports.get(call.name, "").split(".")[0] in NOT_ENGINES:
        return False  # `from asyncio import sleep`
    if call.name.startswith("abort"):
        return call.name not in SINGLE_ABORTS
    return call.name.startswith(QUIESCE_PREFIXES)


def _call_quiesces(ref: FunctionRef, call: CallSite, context: Context, depth: int = 0) -> bool:
    """A pause, abort-all, drain or sleep; a project wrapper of one counts when its body does one."""
    if not _named_like_quiesce(ref.file, call):
        return False
    for event in ref.function.resets:
        if event.span == call.span and event.method == "pause_generation" and event.via in ("direct", "alias"):
            return _pause_quiesces(event, context)
    targets = context.project.resolve(ref.file, ref.function, call)
    if not targets:
        return True
    if depth >= MAX_WRAPPER_DEPTH:
        return False
    return any(
        _call_quiesces(target, inner, context, depth + 1) for target in targets for inner in target.function.calls
    )


def _pause_quiesces(pause: ResetEvent, context: Context) -> bool:
    """A pause that aborts or waits leaves no request holding blocks. A `mode="keep"` pause keeps the
    requests and their blocks; its cache clear (`clear_cache`, on by default) resets the prefix cache with
    the running requests preempted only from the release whose engine does so (`EngineCore._reset_caches`,
    per the facts), so it counts only when every supported release has that."""
    if (argument(pause, "mode") or "") not in KEEP_MODE:
        return True
    clear_cache = argument(pause, "clear_cache")
    if clear_cache is not None and is_false(clear_cache):
        return False
    since = context.facts.first_release("_reset_caches", EngineClass.ENGINE_CORE)
    return since is not None and context.supported.all_from(since)


def _quiesces_before(ref: FunctionRef, span: Span, context: Context) -> bool:
    if any(call.span < span and _call_quiesces(ref, call, context) for call in ref.function.calls):
        return True
    # the takers are asked for only once a lock is held
    return any(_taken_elsewhere(ref, name, _lock_takers(context)) for name in _locks_held_at(ref, span))


def _taken_elsewhere(ref: FunctionRef, name: str, takers: dict[str, set[Taker]]) -> bool:
    """Whether a function other than `ref` takes the lock `name`. A lock named only `lock` (`self._lock`)
    is any class's own: only a function of the same class (of the same module) counts."""
    own = name.strip("_").lower() == LOCK_WORD
    return any(
        key != ref.key and (not own or (key[0] == ref.file.path and cls == ref.function.cls))
        for key, cls in takers.get(name, ())
    )


def _lock_call(call: CallSite, method: str) -> str:
    """The last name of the lock that `call` acquires or releases (`self.engine_lock.acquire()`, through
    Ray `self.engine_lock.acquire.remote()`), else ""."""
    if call.name == method and call.chain and names_a_lock(call.chain[-1]):
        return call.chain[-1]
    return ""


def _locks_held_at(ref: FunctionRef, span: Span) -> set[str]:
    """The locks that the function holds at `span`: in the body of a `with` of the lock, or acquired
    before it and not released in between."""
    held = {name for name, body in ref.function.locks if body.contains(span)}
    for call in sorted(ref.function.calls, key=lambda call: call.span):
        if not call.span < span:
            break
        if acquired := _lock_call(call, "acquire"):
            held.add(acquired)
        elif released := _lock_call(call, "release"):
            held.discard(released)
    return held


def _lock_takers(context: Context) -> dict[str, set[Taker]]:
    """The functions of the project, weight-update roots aside, that take each lock, by the lock's last
    name. A lock is a pause when such a function, generation presumably, takes it too: one that only
    refits take stops nothing."""

    def takers() -> dict[str, set[Taker]]:
        roots = {root.key for root in context.project.refit_roots(context.settings.all_refit_functions)}
        found: dict[str, set[Taker]] = {}
        for ref in context.project.functions():
            if ref.key in roots:
                continue
            names = [name for name, _ in ref.function.locks]
            names += [name for call in ref.function.calls if (name := _lock_call(call, "acquire"))]
            for name in names:
                found.setdefault(name, set()).add((ref.key, ref.function.cls))
        return found

    return context.project.memoized("CL007-locks", takers)


def _quiesced_before(reached: Reached, event: ResetEvent, context: Context) -> bool:
    """A pause, drain or sleep earlier in the function, in a caller on the path before it calls on, or
    before a call of the refit root itself (found by name: refits are often started through Ray)."""
    if _quiesces_before(reached.ref, event.span, context):
        return True
    path = reached.path
    for caller, callee in itertools.pairwise(path):
        sites = [call.span for call in caller.function.calls if _calls(caller, call, callee, context)]
        if sites and _quiesces_before(caller, min(sites), context):
            return True
    return _root_callers_quiesce(path[0], context)


def _calls(caller: FunctionRef, call: CallSite, callee: FunctionRef, context: Context) -> bool:
    return any(target.key == callee.key for target in context.project.resolve(caller.file, caller.function, call))


def _root_callers_quiesce(root: FunctionRef, context: Context) -> bool:
    """Some function of the project pauses (aborts, drains, sleeps) before it calls a function named
    like this root: refits are layered under one name (trainer -> actor -> server `update_weights`) and
    the layers are often linked through Ray or string dispatch, which the call graph cannot follow."""
    names = root.function.called_as()
    return context.project.memoized(
        f"CL007-root:{','.join(names)}",
        lambda: any(
            call.name in names and call.via != "rpc" and _quiesces_before(ref, call.span, context)
            for ref in context.project.functions()
            for call in ref.function.calls
        ),
    )


def _force_since(context: Context) -> Version | None:
    fact = context.facts.get("reset_prefix_cache", EngineClass.ASYNC_LLM)
    return fact.param_since(FORCE) if fact else None


def _message(risk: NoopRisk, context: Context) -> str:
    event = risk.event
    call = f"{'await ' if event.awaited else ''}{event.receiver}.reset_prefix_cache({_arguments(event)})"
    since = _force_since(context)
    force = f" unless called with `{FORCE}=True` (vLLM {since}+)" if since else ""
    keep = ""
    if any(
        e.method == "pause_generation" and e.span < event.span and not _pause_quiesces(e, context)
        for e in risk.reached.ref.function.resets
    ):
        keep = ' (a `mode="keep"` pause keeps the paused requests and their blocks)'
    return (
        f"`{call}` on the refit path {risk.reached.describe_path()} runs with no pause, abort, sleep or drain "
        f"before it{keep}: while any request still holds KV blocks vLLM returns False and resets nothing{force}, "
        "and the result is ignored here, so later requests reuse prefix blocks computed with the old weights"
    )


def _arguments(event: ResetEvent) -> str:
    return ", ".join(f"{name}={value}" for name, value in event.keywords.items())


def _help(context: Context) -> str:
    since = _force_since(context)
    force = f"pass `{FORCE}=True` (vLLM {since}+), or " if since else ""
    return (
        f"Make the reset effective: {force}pause generation first (`await engine.pause_generation()`) or wait "
        "for in-flight requests to drain, and check the returned bool"
    )


def _fix(file: FileSummary, event: ResetEvent, context: Context) -> Fix:
    since = _force_since(context)
    running = [release for release in context.supported.releases if gates_allow(event.gates, release)]
    if since is None or not running or any(release < since for release in running):
        return Fix(_help(context), Applicability.DISPLAY)
    change = AddKeyword(file.path, event.span, FORCE, "True")
    return Fix(f"Pass `{FORCE}=True`", Applicability.UNSAFE, changes=(change,))
