"""CL010 refit-without-cache-reset: a weight push with no reset on its way to the next generation."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from packaging.version import Version

from cachelint.facts import EngineClass, load_cache_effects
from cachelint.finding import Applicability, Finding, Fix
from cachelint.refit_cycle import (
    ENCODER,
    PREFIX,
    Cycle,
    Needs,
    Push,
    builds_engine,
    cycle,
    prefix_caching_setting,
    pushes,
    salts_prefix,
    stale_releases,
)
from cachelint.rules.base import Context, Rule, RuleInfo, where_run
from cachelint.rules.events import (
    awaits,
    describe_releases,
    engine_reset_help,
    engine_reset_statement,
    first_release,
    is_engine_level,
    route_since,
)
from cachelint.rules.insertions import insert_after, insertable_after
from cachelint.summary import FileSummary, ResetEvent

METHODS = {PREFIX: "reset_prefix_cache", ENCODER: "reset_encoder_cache"}


class RefitWithoutCacheReset(Rule):
    info = RuleInfo(
        code="CL010",
        name="refit-without-cache-reset",
        summary="A weight push into a running vLLM engine with no cache reset before it generates again.",
        fixable="sometimes",
        fix_kinds=("unsafe",),
    )

    def check(self, file: FileSummary, context: Context) -> Iterator[Finding]:
        return where_run(self._findings(file, context), file, context)

    def _findings(self, file: FileSummary, context: Context) -> Iterator[Finding]:
        own = [push for push in pushes(context.project, context.settings.all_refit_functions) if push.ref.file is file]
        if not own:
            return
        effects = load_cache_effects()
        for push in own:
            found = cycle(context.project, push, context.settings.all_refit_functions)
            releases = _releases_run(push, found, context)
            # The project's bytes and its multimodal evidence are read only when the most any project could
            # need is left stale.
            most = Needs(effects, True, multimodal=True, salted=False)
            if not stale_releases(found, most, context.facts, effects, releases):
                continue
            needs = _needs(context, file, found)
            stale = stale_releases(found, needs, context.facts, effects, releases)
            if ENCODER in stale and _resets_encoder_where_it_can(found, context):
                del stale[ENCODER]
            if not stale or (PREFIX not in stale and found.resets_prefix(context.facts)):
                continue  # a prefix reset that leaves the encoder cache is CL003's
            yield self.finding(
                file,
                push.call.span,
                _message(push, stale, context),
                _help(push, stale, context),
                fix=_fix(file, push, stale, context),
                function=push.ref.function.qualname,
                notes=_notes(push, needs),
            )


def _needs(context: Context, file: FileSummary, found: Cycle) -> Needs:
    """What the next generation needs: prefix caching as the pushing code's files set it (the push's, its
    cycle's), else, where they build no engine of their own, as the project sets it; encoder outputs where
    images reach the engine; a `cache_salt` counts where the pushing code's files hold it."""
    paths = {file.path, *(step.ref.file.path for step in found.steps)}
    own = [(path, raw) for path, raw in context.project_bytes() if path in paths]
    setting = prefix_caching_setting(own)
    if setting is None and not any(builds_engine(raw) for _, raw in own):
        setting = context.project.memoized(
            "refit:prefix-setting", lambda: prefix_caching_setting(context.project_bytes())
        )
    salted = salts_prefix(own)
    multimodal = bool(context.settings.multimodal) and context.multimodal_notes(file) is not None
    return Needs(load_cache_effects(), setting, multimodal, salted)


def _resets_encoder_where_it_can(found: Cycle, context: Context) -> bool:
    """An engine-level encoder reset on the cycle does what the engine allows: on the releases that lack
    it no engine-level API drops encoder outputs, and those are not reported again."""
    return any(
        step.event.method == METHODS[ENCODER] and is_engine_level(context.facts, step.event) for step in found.steps
    )


def _releases_run(push: Push, found: Cycle, context: Context) -> list[Version]:
    """The supported releases on which the push and the calls of its cycle made without a guard exist: an
    unguarded `pause_generation()` says the code runs only where the engine has it."""
    firsts = [
        first_release(context.facts, step.event)
        for step in found.steps
        if step.event.via in ("direct", "alias") and not step.event.hasattr_guarded and not step.event.gates
    ]
    if push.kind == "native" and push.engine_class is not None:
        firsts.append(context.facts.first_release(push.call.name, push.engine_class))
    known = [since for since in firsts if since is not None]
    return [release for release in context.supported.releases if all(release >= since for since in known)]


def _notes(push: Push, needs: Needs) -> tuple[str, ...]:
    notes = [push.why]
    if needs.salted:
        notes.append("the project's requests carry a `cache_salt`: it keeps prefix blocks apart, not encoder outputs")
    return tuple(notes)


def _stale_text(stale: dict[str, list[Version]], context: Context) -> str:
    parts = []
    if PREFIX in stale:
        parts.append(f"prefix KV blocks computed with the old weights on {describe_releases(stale[PREFIX])}")
    if ENCODER in stale:
        releases = stale[ENCODER]
        text = f"vision-encoder outputs of repeated images on {describe_releases(releases)}"
        since = _encoder_reset_since(context)
        if since is not None and releases[0] < since:
            text += f" (no engine-level API drops them before {since})"
        parts.append(text)
    return " and ".join(parts)


def _message(push: Push, stale: dict[str, list[Version]], context: Context) -> str:
    every = sorted({release for releases in stale.values() for release in releases})
    return (
        f"`{push.shown}` pushes new weights into the engine, and nothing on the way to its next generation "
        f"resets its caches: it keeps serving {_stale_text(stale, context)} "
        f"({context.supported.share(every)})"
    )


def _encoder_reset_since(context: Context) -> Version | None:
    return context.facts.first_release(METHODS[ENCODER], EngineClass.ASYNC_LLM)


def _methods(stale: dict[str, list[Version]], context: Context) -> list[str]:
    """The resets to add: the prefix reset, and the encoder reset where some stale release has it."""
    methods = []
    if PREFIX in stale:
        methods.append(METHODS[PREFIX])
    since = _encoder_reset_since(context)
    if ENCODER in stale and since is not None and stale[ENCODER][-1] >= since:
        methods.append(METHODS[ENCODER])
    return methods


def _event(push: Push) -> ResetEvent:
    """The push as the event the shared fix writers read: a call on the engine, in the push's style."""
    call = push.call
    return ResetEvent(
        method=call.name if push.kind == "native" else "",
        receiver=push.engine,
        chain=push.engine.split(".") if push.engine else [],
        receiver_class=push.engine_class.value if push.engine_class else "",
        via="direct",
        awaited=call.awaited,
        in_async=push.ref.function.is_async,
        span=call.span,
        callee_span=call.span,
        statement_span=call.anchor.statement_span if call.anchor else call.span,
        anchor=call.anchor,
    )


def _help(push: Push, stale: dict[str, list[Version]], context: Context) -> str:
    methods = _methods(stale, context)
    encoder_only = ENCODER in stale and METHODS[ENCODER] not in methods
    tail = ""
    if encoder_only:
        since = _encoder_reset_since(context)
        tail = f"; no engine-level API drops stale encoder outputs before vLLM {since}: upgrade to reset them"
    if not methods:
        if not tail:
            return "Reset the engine's caches after each weight push"
        text = tail.removeprefix("; ")
        return text[0].upper() + text[1:]
    if push.engine and push.kind in ("native", "rpc", "driver-worker"):
        return f"Reset the caches right after the push: {engine_reset_help(_event(push), methods, context)}{tail}"
    routes = []
    for method in methods:
        since = route_since(context.facts, method)
        newer = f", vLLM {since}+" if since is not None and context.supported.includes_before(since) else ""
        routes.append(f"`/{method}`{newer}")
    return (
        f"After the push, reset the server's caches: add client methods posting to {' and '.join(routes)} "
        "(vLLM's API server has them in development mode, `VLLM_SERVER_DEV_MODE=1`; a server of the project's "
        f"own needs them added) and call them right after `{push.shown}`{tail}"
    )


_PREEMPTING = "reset_prefix_cache(reset_running_requests=True)"


def _preempts_everywhere(push: Push, context: Context) -> bool:
    """Whether the async engine's prefix reset takes `reset_running_requests` on every supported release on
    which the push runs."""
    cls = push.engine_class or EngineClass.ASYNC_LLM
    fact = context.facts.get(METHODS[PREFIX], cls)
    since = fact.param_since("reset_running_requests") if fact is not None else None
    runs_from = context.facts.first_release(push.call.name, cls) if push.kind == "native" else None
    releases = [release for release in context.supported.releases if runs_from is None or release >= runs_from]
    return since is not None and all(release >= since for release in releases)


def _fix(file: FileSummary, push: Push, stale: dict[str, list[Version]], context: Context) -> Fix:
    help_text = _help(push, stale, context)
    methods = _methods(stale, context)
    call = push.call
    if not methods or not push.engine or push.kind not in ("native", "rpc", "driver-worker"):
        return Fix(help_text, Applicability.DISPLAY)
    if call.anchor is None or not insertable_after(call.anchor):
        return Fix(help_text, Applicability.DISPLAY)
    if push.ref.function.is_async and push.engine_class is EngineClass.ASYNC_LLM and not call.awaited:
        return Fix(f"{help_text}, once the push has been awaited", Applicability.DISPLAY)
    event = _event(push)
    statements = [engine_reset_statement(event, method, context) for method in methods]
    if METHODS[PREFIX] in methods and awaits(event):
        # An awaited prefix reset does nothing while requests hold blocks (CL007), unless it preempts them.
        if not _preempts_everywhere(push, context):
            return Fix(f"{help_text}, with `reset_running_requests=True` or after pausing", Applicability.DISPLAY)
        prefix = statements[0]
        statements[0] = replace(prefix, code=prefix.code.replace("reset_prefix_cache()", _PREEMPTING))
    change = insert_after(file.path, call.anchor, statements)
    return Fix("Reset the engine's caches after the weight push", Applicability.UNSAFE, changes=(change,))
