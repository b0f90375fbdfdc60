"""CL003 refit-without-mm-reset: a weight update that resets the prefix cache but not the mm/encoder caches."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from packaging.version import Version

from cachelint.facts import EngineClass
from cachelint.finding import Applicability, ChainStep, Finding, Fix
from cachelint.project import FunctionRef, Reached
from cachelint.rules.base import Context, Rule, RuleInfo
from cachelint.rules.events import awaits, clears_caches, engine_reset_lines, is_engine_level, style_call
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


class RefitWithoutMmReset(Rule):
    info = RuleInfo(
        code="CL003",
        name="refit-without-mm-reset",
        summary="A weight update that resets the prefix cache but leaves the multimodal and encoder caches stale.",
        fixable="sometimes",
    )

    def check(self, file: FileSummary, context: Context) -> Iterator[Finding]:
        if not context.settings.multimodal:
            return
        for stale in stale_prefix_resets(context):
            if stale.reached.ref.file.path != file.path:
                continue
            yield self.finding(
                file,
                stale.event.span,
                _message(stale),
                _help(stale),
                fix=_fix(file, stale, context),
                function=stale.reached.ref.function.qualname,
                chain=_chain(stale.reached),
            )


def stale_prefix_resets(context: Context) -> list[StalePrefixReset]:
    """Every flagged prefix reset in the project, computed once per run."""
    return context.project.memoized("CL003", lambda: list(_find(context)))


def _find(context: Context) -> Iterator[StalePrefixReset]:
    """Each flagged prefix reset once, with the shortest chain from any root that reaches it."""
    shortest: dict[tuple[str, int, int], StalePrefixReset] = {}
    for root in context.project.refit_roots(context.settings.all_refit_functions):
        for stale in _check_root(root, context):
            key = (stale.reached.ref.file.path, stale.event.span.line, stale.event.span.col)
            known = shortest.get(key)
            if known is None or len(stale.reached.path) < len(known.reached.path):
                shortest[key] = stale
    yield from shortest.values()


def _check_root(root: FunctionRef, context: Context) -> Iterator[StalePrefixReset]:
    facts = context.facts
    events: list[tuple[Reached, ResetEvent]] = [
        (reached, event)
        for reached in context.project.reachable(root)
        if reached.ref.file.engine != "other"
        for event in reached.ref.function.resets
    ]
    prefix = [
        (reached, event)
        for reached, event in events
        if event.method == "reset_prefix_cache" and is_engine_level(facts, event)
    ]
    if not prefix:
        return
    pauses = [event for _, event in events if clears_caches(event)]
    clears_from = context.facts.first_release("pause_generation", EngineClass.ASYNC_LLM)
    assert clears_from is not None

    def cleared_implicitly(release: Version) -> bool:
        """A pause or engine sleep on the path clears every cache from 0.12.0 on (per the facts); a
        path that calls pause_generation cannot run on earlier releases, which lack it."""
        if not pauses:
            return False
        return release >= clears_from or any(event.method == "pause_generation" for event in pauses)

    missing = []
    for cache, method, since in (
        ("multimodal", "reset_mm_cache", MM_RESET_SINCE),
        ("encoder", "reset_encoder_cache", ENCODER_RESET_SINCE),
    ):
        if _resets(events, method, context):
            continue
        if any(release >= since and not cleared_implicitly(release) for release in context.supported.releases):
            missing.append(cache)
    if not missing:
        return
    for reached, event in prefix:
        yield StalePrefixReset(reached, event, tuple(missing))


def _resets(events: list[tuple[Reached, ResetEvent]], method: str, context: Context) -> bool:
    return any(event.method == method and is_engine_level(context.facts, event) for _, event in events)


def _message(stale: StalePrefixReset) -> str:
    caches = " and ".join(stale.missing)
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


def _help(stale: StalePrefixReset) -> str:
    methods = {"multimodal": "reset_mm_cache", "encoder": "reset_encoder_cache"}
    calls = " and ".join(f"`{style_call(stale.event, methods[cache])}`" for cache in stale.missing)
    return f"Reset them at engine level right after the prefix reset: {calls}"


def _fix(file: FileSummary, stale: StalePrefixReset, context: Context) -> Fix:
    event = stale.event
    if event.via not in ("direct", "alias") or not insertable_after(event.anchor):
        return Fix(_help(stale), Applicability.DISPLAY)
    if awaits(event) and not event.awaited:
        return Fix(f"{_help(stale)}, once the stored coroutine has been awaited", Applicability.DISPLAY)
    methods = {"multimodal": "reset_mm_cache", "encoder": "reset_encoder_cache"}
    lines = [line for cache in stale.missing for line in engine_reset_lines(event, methods[cache], context)]
    edit = insert_after(file.path, event.anchor, lines)
    caches = " and ".join(stale.missing)
    return Fix(f"Reset the {caches} caches after the prefix cache", Applicability.UNSAFE, (edit,))
