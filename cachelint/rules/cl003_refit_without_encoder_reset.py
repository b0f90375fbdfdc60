"""CL003 refit-without-encoder-reset: a weight update that resets the prefix cache but not the encoder cache."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from packaging.version import Version

from cachelint import provenance
from cachelint.facts import EngineClass, load_cache_effects
from cachelint.finding import Applicability, ChainStep, Finding, Fix
from cachelint.project import FunctionRef, Reached
from cachelint.provenance import Kind
from cachelint.refit_cycle import ENCODER, clears
from cachelint.rules.base import Context, Rule, RuleInfo, multimodal_only
from cachelint.rules.events import (
    awaits,
    describe_releases,
    engine_reset_help,
    engine_reset_statement,
    first_release,
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


@dataclass(frozen=True)
class StalePrefixReset:
    """A prefix reset on a refit path that leaves the encoder cache stale on some supported release."""

    reached: Reached
    event: ResetEvent
    stale: tuple[Version, ...]  # the supported releases on which encoder outputs of the old weights survive
    note: str  # why the reset is taken for vLLM's


class RefitWithoutEncoderReset(Rule):
    info = RuleInfo(
        code="CL003",
        name="refit-without-encoder-reset",
        summary="A weight update that resets the prefix cache but leaves encoder outputs of the old weights cached.",
        fixable="sometimes",
        former_names=("refit-without-mm-reset",),
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
                _message(stale, context),
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
    """Each flagged prefix reset once: stale on the releases any path reaching it leaves stale, with the
    chain of a path that leaves the most of them (the shortest such chain)."""
    found: dict[tuple[str, int, int], list[StalePrefixReset]] = {}
    for root in context.project.refit_roots(context.settings.all_refit_functions):
        for stale in _check_root(root, context):
            key = (stale.reached.ref.file.path, stale.event.span.line, stale.event.span.col)
            found.setdefault(key, []).append(stale)
    for paths in found.values():
        releases = tuple(sorted({release for path in paths for release in path.stale}))
        shown = min(paths, key=lambda path: (-len(path.stale), len(path.reached.path)))
        yield replace(shown, stale=releases)


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
    effects = load_cache_effects()
    outlives_from = effects.stale_cache(ENCODER).since
    # An encoder reset on the path does what the engine allows: the releases before it has the method
    # (where no engine-level API can drop encoder outputs) are not reported again.
    runs_from = [
        since
        for _, event, _ in events
        if event.method == ENCODER_RESET
        and is_engine_level(facts, event)
        and (since := first_release(facts, event)) is not None
    ]
    stale = tuple(
        release
        for release in context.supported.releases
        if release >= outlives_from
        and not any(release < since for since in runs_from)
        and not any(ENCODER in clears(event, facts, effects, release) for _, event, _ in events)
    )
    if not stale:
        return
    for reached, event, note in prefix:
        yield StalePrefixReset(reached, event, stale, note)


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


def _message(stale: StalePrefixReset, context: Context) -> str:
    releases = list(stale.stale)
    text = (
        f"{stale.reached.describe_path()} resets the prefix cache but not the encoder cache: vision-encoder "
        f"outputs computed with the old weights are reused for repeated images on {describe_releases(releases)} "
        f"({context.supported.share(releases)})"
    )
    since = encoder_reset_since(context)
    before = [release for release in releases if since is not None and release < since]
    if before:
        text += f"; no engine-level API drops them on {describe_releases(before)} ({since} adds `{ENCODER_RESET}()`)"
    return text


def encoder_reset_since(context: Context) -> Version | None:
    """The first release with an engine-level encoder reset."""
    return context.facts.first_release(ENCODER_RESET, EngineClass.ASYNC_LLM)


def _fixable(stale: StalePrefixReset, context: Context) -> bool:
    """Whether some release on which the encoder cache stays stale has the engine-level reset."""
    since = encoder_reset_since(context)
    return since is not None and stale.stale[-1] >= since


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


ENCODER_RESET = "reset_encoder_cache"


def _help(stale: StalePrefixReset, context: Context) -> str:
    if not _fixable(stale, context):
        since = encoder_reset_since(context)
        return (
            f"No engine-level API drops encoder outputs on {describe_releases(list(stale.stale))}: vLLM {since} adds "
            "`reset_encoder_cache()` (call it right after the prefix reset there); until then only eviction or a new "
            "engine drops them. `reset_mm_cache()` does not: the processor cache it clears holds no model output"
        )
    methods = [ENCODER_RESET]
    event = stale.event
    if event.via == "http":
        return _http_help(stale, methods, context)
    if stale.note.startswith(CLIENT_NOTE):
        return _client_help(stale, methods, context)
    if _unknown_client(stale, context):
        return _unknown_client_help(stale, methods, context)
    if event.via in ("direct", "alias"):
        return f"Reset it at engine level right after the prefix reset: {engine_reset_help(event, methods, context)}"
    calls = " and ".join(f"`{style_call(event, method)}`" for method in methods)
    return f"Reset it at engine level right after the prefix reset: {calls}"


def _http_help(stale: StalePrefixReset, methods: list[str], context: Context) -> str:
    """What to add when the prefix reset is a post to vLLM's server: the routes vLLM offers for the other
    resets, and client methods that post to them (or the client's own, when it has them)."""
    cls = stale.reached.ref.function.cls
    names = " and ".join(f"`{method}()`" for method in methods)
    if cls and len(stale.reached.path) > 1 and all(provenance.defines(context.project, cls, m) for m in methods):
        caller = stale.reached.path[-2].function.qualname
        return f"`{cls}` also has {names}: call it where `{caller}` calls `{stale.reached.ref.function.name}()`"
    text = (
        f"Post to {_routes(methods, context)} right after `/reset_prefix_cache` (vLLM's API server has it in "
        "development mode, like the prefix reset; a server of the project's own needs it added)"
    )
    if cls:
        text += f": add {names} to `{cls}` posting to it, and call it after the prefix reset"
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
        return f"Reset it through the client right after the prefix reset: {calls}"
    routes = " and ".join(f"`{route(method)}`" for method in lacking)
    names = " and ".join(f"`{method}()`" for method in lacking)
    return (
        f"`{cls}` has no {names}: add it, posting to {routes} (vLLM's API server has it in development "
        "mode, like `/reset_prefix_cache`; a server of the project's own needs it added), and call it "
        f"right after `{event.receiver}.reset_prefix_cache()`"
    )


def _unknown_client(stale: StalePrefixReset, context: Context) -> bool:
    """A prefix reset called on a receiver named like a client, of a class not known where it is called,
    when no class of the project has some of the other resets (its own client would have them)."""
    event = stale.event
    if event.via not in ("direct", "alias") or event.receiver_class or not event.chain:
        return False
    methods = [ENCODER_RESET]
    return provenance.named_like_client(event.chain[-1]) and bool(
        provenance.defined_by_no_class(context.project, methods)
    )


def _unknown_client_help(stale: StalePrefixReset, methods: list[str], context: Context) -> str:
    """What to add when the prefix reset is called on a client whose class is not known where it is called."""
    event = stale.event
    lacking = " or ".join(f"`{method}()`" for method in provenance.defined_by_no_class(context.project, methods))
    return (
        f"`{event.receiver}` is named like a client of a vLLM server, its class is not known here, and no class "
        f"of the project has {lacking}: right after `{event.receiver}.reset_prefix_cache()`, reset it through "
        f"the route of its server ({_routes(methods, context)}), adding a client method that posts to it"
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
    if not _fixable(stale, context) or stale.note.startswith(CLIENT_NOTE) or _unknown_client(stale, context):
        return Fix(help_text, Applicability.DISPLAY)
    if event.via not in ("direct", "alias") or not insertable_after(event.anchor):
        return Fix(help_text, Applicability.DISPLAY)
    if awaits(event) and not event.awaited:
        return Fix(f"{help_text}, once the stored coroutine has been awaited", Applicability.DISPLAY)
    if not runs_like(event):
        return Fix(f"{help_text}, each run the way the prefix reset's result is", Applicability.DISPLAY)
    change = insert_after(file.path, event.anchor, [engine_reset_statement(event, ENCODER_RESET, context)])
    return Fix("Reset the encoder cache after the prefix cache", Applicability.UNSAFE, changes=(change,))
