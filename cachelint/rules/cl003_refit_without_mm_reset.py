"""CL003 refit-without-mm-reset: a weight update that resets the prefix cache but not the mm/encoder caches."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from packaging.version import Version

from cachelint import provenance
from cachelint.facts import EngineClass
from cachelint.finding import Applicability, ChainStep, Finding, Fix
from cachelint.project import FunctionRef, Reached
from cachelint.provenance import Kind
from cachelint.rules.base import Context, Rule, RuleInfo, multimodal_only
from cachelint.rules.events import (
    awaits,
    clears_caches,
    engine_reset_help,
    engine_reset_statement,
    is_engine_level,
    receiver_of,
    route,
    route_since,
    runs_like,
    style_call,
    vllm_note,
)
from cachelint.rules.insertions import insert_after, insertable_after
from cachelint.summary import FileSummary, ResetEvent

MM_RESET_SINCE = Version("0.9.0")
ENCODER_RESET_SINCE = Version("0.16.0")


@dataclass(frozen=True)
class StalePrefixReset:
    """A prefix reset on a refit path that never resets the multimodal or encoder caches."""

    reached: Reached
    event: ResetEvent
    missing: tuple[str, ...]
    note: str  # why the reset is taken for vLLM's
    also_reset: tuple[str, ...] = ()  # the other caches the path resets at engine level


class RefitWithoutMmReset(Rule):
    info = RuleInfo(
        code="CL003",
        name="refit-without-mm-reset",
        summary="A weight update that resets the prefix cache but leaves the multimodal and encoder caches stale.",
        fixable="sometimes",
        fix_kinds=("unsafe",),
    )

    def check(self, file: FileSummary, context: Context) -> Iterator[Finding]:
        return multimodal_only(self._findings(file, context), file, context)

    def _findings(self, file: FileSummary, context: Context) -> Iterator[Finding]:
        if not context.settings.multimodal:
            return
        for stale in stale_prefix_resets(context):
            if stale.reached.ref.file.path != file.path:
                continue
            yield self.finding(
                file,
                stale.event.span,
                _message(stale),
                _help(stale, context),
                fix=_fix(file, stale, context),
                function=stale.reached.ref.function.qualname,
                notes=(stale.note,) if stale.note else (),
                chain=_chain(stale.reached),
            )


def stale_prefix_resets(context: Context) -> list[StalePrefixReset]:
    """Every flagged prefix reset in the project, computed once per run."""
    return context.project.memoized("CL003", lambda: list(_find(context)))


def _find(context: Context) -> Iterator[StalePrefixReset]:
    """Each flagged prefix reset once: missing the caches that any path reaching it misses, with the chain
    of a path that misses the most of them (the shortest such chain)."""
    found: dict[tuple[str, int, int], list[StalePrefixReset]] = {}
    for root in context.project.refit_roots(context.settings.all_refit_functions):
        for stale in _check_root(root, context):
            key = (stale.reached.ref.file.path, stale.event.span.line, stale.event.span.col)
            found.setdefault(key, []).append(stale)
    for paths in found.values():
        missing = tuple(cache for cache in METHODS if any(cache in stale.missing for stale in paths))
        shown = min(paths, key=lambda stale: (-len(stale.missing), len(stale.reached.path)))
        also_reset = tuple(cache for cache in shown.also_reset if cache not in missing)
        yield replace(shown, missing=missing, also_reset=also_reset)


def _check_root(root: FunctionRef, context: Context) -> Iterator[StalePrefixReset]:
    facts = context.facts
    reached_all = list(context.project.reachable(root))
    path_evidence = next(
        (
            f"the weight-update path reaches a vLLM module ({reached.ref.file.path.rsplit('/', 1)[-1]})"
            for reached in reached_all
            if reached.ref.file.engine == "vllm"
        ),
        "",
    )
    events: list[tuple[Reached, ResetEvent, str]] = []
    clients: set[tuple[str, str]] = set()  # methods of HTTP clients whose call sites stand for their posts
    for reached in reached_all:
        if reached.ref.file.engine == "other":
            continue
        for event in reached.ref.function.resets:
            note = vllm_note(context, reached.ref.file, reached.ref.function, event, path_evidence)
            if note is None:
                note = _client_note(context, reached, event, clients)
            if note is not None:
                events.append((reached, event, note))
    prefix = [
        (reached, event, note)
        for reached, event, note in events
        if event.method == "reset_prefix_cache"
        and (is_engine_level(facts, event) or note.startswith(CLIENT_NOTE))
        and not any(step.key in clients for step in reached.path)
    ]
    if not prefix:
        return
    pauses = [event for _, event, _ in events if clears_caches(event)]
    clears_from = context.facts.first_release("pause_generation", EngineClass.ASYNC_LLM)
    assert clears_from is not None

    def cleared_implicitly(release: Version) -> bool:
        """A pause or engine sleep on the path clears every cache from 0.12.0 on (per the facts); a
        path that calls pause_generation cannot run on earlier releases, which lack it."""
        if not pauses:
            return False
        return release >= clears_from or any(event.method == "pause_generation" for event in pauses)

    missing = []
    also_reset = []
    for cache, method, since in (
        ("multimodal", "reset_mm_cache", MM_RESET_SINCE),
        ("encoder", "reset_encoder_cache", ENCODER_RESET_SINCE),
    ):
        if _resets(events, method, context):
            also_reset.append(cache)
            continue
        if any(release >= since and not cleared_implicitly(release) for release in context.supported.releases):
            missing.append(cache)
    if not missing:
        return
    for reached, event, note in prefix:
        yield StalePrefixReset(reached, event, tuple(missing), note, tuple(also_reset))


CLIENT_NOTE = "receiver: an HTTP client of vLLM's server"


def _client_note(context: Context, reached: Reached, event: ResetEvent, clients: set[tuple[str, str]]) -> str | None:
    """A reset called on a project HTTP client whose method posts to vLLM's route: the call site stands
    for the post (where the refit is), and the client's method is not reported again."""
    found = receiver_of(context, reached.ref.file, reached.ref.function, event)
    target = found.project_class
    if found.kind is not Kind.PROJECT or found.by_name or target is None:
        return None
    if provenance.behaviour(context.project, target.cls.name, event.method) is not provenance.Behaviour.POSTS:
        return None
    clients.update(ref.key for ref in provenance.methods(context.project, target.cls.name, event.method))
    return f"{CLIENT_NOTE}: {found.why}, whose `{event.method}` posts to `{route(event.method)}`"


def _resets(events: list[tuple[Reached, ResetEvent, str]], method: str, context: Context) -> bool:
    return any(event.method == method and is_engine_level(context.facts, event) for _, event, _ in events)


def _message(stale: StalePrefixReset) -> str:
    caches = " and ".join(stale.missing)
    if stale.also_reset:
        reset = " and ".join(("prefix", *stale.also_reset))
        return (
            f"{stale.reached.describe_path()} resets the {reset} caches but not the {caches} cache, which keeps "
            "features computed with the old weights after every weight update"
        )
    plural = "caches keep" if len(stale.missing) > 1 else "cache keeps"
    return (
        f"{stale.reached.describe_path()} resets the prefix cache only: the {caches} {plural} features "
        "computed with the old weights after every weight update"
    )


def _chain(reached: Reached) -> tuple[ChainStep, ...]:
    """The weight-update root and each function called on the way to the one holding the reset."""
    steps = []
    for index, ref in enumerate(reached.path):
        function = ref.function
        if index == 0:
            message = f"the weight update starts in `{function.qualname}`"
        else:
            message = f"`{reached.path[index - 1].function.qualname}` calls `{function.qualname}`"
        steps.append(ChainStep(ref.file.path, function.span, message))
    return tuple(steps)


METHODS = {"multimodal": "reset_mm_cache", "encoder": "reset_encoder_cache"}


def _help(stale: StalePrefixReset, context: Context) -> str:
    methods = [METHODS[cache] for cache in stale.missing]
    event = stale.event
    if event.via == "http":
        return _http_help(stale, methods, context)
    if stale.note.startswith(CLIENT_NOTE):
        return _client_help(stale, methods, context)
    if _unknown_client(stale, context):
        return _unknown_client_help(stale, methods, context)
    if event.via in ("direct", "alias"):
        return f"Reset them at engine level right after the prefix reset: {engine_reset_help(event, methods, context)}"
    calls = " and ".join(f"`{style_call(event, method)}`" for method in methods)
    return f"Reset them at engine level right after the prefix reset: {calls}"


def _http_help(stale: StalePrefixReset, methods: list[str], context: Context) -> str:
    """What to add when the prefix reset is a post to vLLM's server: the routes vLLM offers for the other
    resets, and client methods that post to them (or the client's own, when it has them)."""
    cls = stale.reached.ref.function.cls
    names = " and ".join(f"`{method}()`" for method in methods)
    if cls and len(stale.reached.path) > 1 and all(provenance.defines(context.project, cls, m) for m in methods):
        caller = stale.reached.path[-2].function.qualname
        return f"`{cls}` also has {names}: call them where `{caller}` calls `{stale.reached.ref.function.name}()`"
    text = (
        f"Post to {_routes(methods, context)} right after `/reset_prefix_cache` (vLLM's API server has them in "
        "development mode, like it; a server of the project's own needs them added)"
    )
    if cls:
        text += f": add {names} to `{cls}` posting to them, and call them after the prefix reset"
    return text


def _client_help(stale: StalePrefixReset, methods: list[str], context: Context) -> str:
    """The client's own methods for the other resets, when it has them; else what to add to it."""
    event = stale.event
    found = receiver_of(context, stale.reached.ref.file, stale.reached.ref.function, event)
    assert found.project_class is not None
    cls = found.project_class.cls.name
    lacking = [method for method in methods if not provenance.defines(context.project, cls, method)]
    if not lacking:
        calls = " and ".join(f"`{style_call(event, method)}`" for method in methods)
        return f"Reset them through the client right after the prefix reset: {calls}"
    routes = " and ".join(f"`{route(method)}`" for method in lacking)
    names = " and ".join(f"`{method}()`" for method in lacking)
    return (
        f"`{cls}` has no {names}: add them, posting to {routes} (vLLM's API server has them in development "
        "mode, like `/reset_prefix_cache`; a server of the project's own needs them added), and call them "
        f"right after `{event.receiver}.reset_prefix_cache()`"
    )


def _unknown_client(stale: StalePrefixReset, context: Context) -> bool:
    """A prefix reset called on a receiver named like a client, of a class not known where it is called,
    when no class of the project has some of the other resets (its own client would have them)."""
    event = stale.event
    if event.via not in ("direct", "alias") or event.receiver_class or not event.chain:
        return False
    methods = [METHODS[cache] for cache in stale.missing]
    return provenance.named_like_client(event.chain[-1]) and bool(
        provenance.defined_by_no_class(context.project, methods)
    )


def _unknown_client_help(stale: StalePrefixReset, methods: list[str], context: Context) -> str:
    """What to add when the prefix reset is called on a client whose class is not known where it is called."""
    event = stale.event
    lacking = " or ".join(f"`{method}()`" for method in provenance.defined_by_no_class(context.project, methods))
    return (
        f"`{event.receiver}` is named like a client of a vLLM server, its class is not known here, and no class "
        f"of the project has {lacking}: right after `{event.receiver}.reset_prefix_cache()`, reset them through "
        f"the routes of its server ({_routes(methods, context)}), adding client methods that post to them"
    )


def _routes(methods: list[str], context: Context) -> str:
    """vLLM's routes for `methods`, each with the release that added it where some supported one lacks it."""
    routes = []
    for method in methods:
        since = route_since(context.facts, method)
        newer = f", vLLM {since}+" if since is not None and context.supported.includes_before(since) else ""
        routes.append(f"`{route(method)}`{newer}")
    return " and ".join(routes)


def _fix(file: FileSummary, stale: StalePrefixReset, context: Context) -> Fix:
    event = stale.event
    help_text = _help(stale, context)
    if stale.note.startswith(CLIENT_NOTE) or _unknown_client(stale, context):
        return Fix(help_text, Applicability.DISPLAY)
    if event.via not in ("direct", "alias") or not insertable_after(event.anchor):
        return Fix(help_text, Applicability.DISPLAY)
    if awaits(event) and not event.awaited:
        return Fix(f"{help_text}, once the stored coroutine has been awaited", Applicability.DISPLAY)
    if not runs_like(event):
        return Fix(f"{help_text}, each run the way the prefix reset's result is", Applicability.DISPLAY)
    statements = [engine_reset_statement(event, METHODS[cache], context) for cache in stale.missing]
    change = insert_after(file.path, event.anchor, statements)
    caches = " and ".join(stale.missing)
    noun = "caches" if len(stale.missing) > 1 else "cache"
    return Fix(f"Reset the {caches} {noun} after the prefix cache", Applicability.UNSAFE, changes=(change,))
