"""CL002 version-gated-reset: a cache reset that runs only when a hard-coded vLLM version test passes."""

from __future__ import annotations

from collections.abc import Iterator

from packaging.version import Version

from cachelint.changes import ReplaceExpression, UnwrapIf
from cachelint.facts import EngineClass
from cachelint.finding import Applicability, Finding, Fix
from cachelint.rules.base import Context, Rule, RuleInfo
from cachelint.rules.events import assumed_class, clears_caches, first_release, is_worker_side
from cachelint.summary import RESET_METHODS, FileSummary, Gate, ResetEvent
from cachelint.version_tests import NEWER


class VersionGatedReset(Rule):
    info = RuleInfo(
        code="CL002",
        name="version-gated-reset",
        summary="A cache reset behind a hard-coded vLLM version test instead of a test for the method.",
        fixable="sometimes",
        fix_kinds=("safe", "unsafe"),
    )

    def check(self, file: FileSummary, context: Context) -> Iterator[Finding]:
        if file.engine == "other":
            return
        for function in file.functions:
            for event in function.resets:
                if not is_cache_reset(event):
                    continue
                for gate in event.gates:
                    message = _judge(event, gate, context)
                    if message:
                        fix = _fix(file, event, gate, context)
                        yield self.finding(
                            file, event.span, message, _help(event, gate), fix=fix, function=function.qualname
                        )
                        break


def is_cache_reset(event: ResetEvent) -> bool:
    """Whether CL002 judges the gates of `event` (CL011 leaves their string comparisons to it)."""
    if event.via not in ("direct", "alias") or is_worker_side(event):
        return False
    return event.method in RESET_METHODS or clears_caches(event)


def _releases_between(context: Context, low: Version, high: Version) -> str | None:
    """The supported releases in [low, high) as messages name them (`0.16.x`, `0.16.0-0.17.1`); None
    when no supported release is there (a message names no release the project does not run on)."""
    inside = [release for release in context.supported.releases if low <= release < high]
    if not inside:
        return None
    if all(release.release[:2] == inside[0].release[:2] for release in inside):
        return f"{inside[0].major}.{inside[0].minor}.x"
    return f"{inside[0]}-{inside[-1]}"


def _judge(event: ResetEvent, gate: Gate, context: Context) -> str | None:
    method = event.method
    test = gate.test
    if gate.kind == "kwargs":
        return _judge_keyword(event, gate, context)
    if gate.raw_string:
        return (
            f"`{method}` is gated on a string comparison of vLLM's version (`{gate.text}`): strings "
            'compare character by character ("0.10.0" < "0.9.0"), so the gate is wrong from vLLM 0.10 on'
        )
    if test.runs_when != NEWER:
        return None
    first = first_release(context.facts, event)
    cls = assumed_class(event)
    owner = cls.short if event.receiver_class else "vLLM's engine"
    if gate.kind == "guard":
        gated = f"`{method}` runs only when {test.describe()} (the guard clause `if {gate.text}:` returns before it)"
    else:
        gated = f"`{method}` runs only when {test.describe()} (`{gate.text}`)"
    if first is None:
        return f"{gated}, but {owner} has no `{method}` in any release"
    if gate.else_resets:
        return None
    if test.threshold > first:
        skipped = _releases_between(context, first, test.threshold)
        message = f"{gated}, but {owner} has had it since {first}"
        if skipped:
            message += f": the gate skips the reset on {skipped}, which has it"
    elif test.threshold < first:
        broken = _releases_between(context, test.threshold, first)
        message = f"{gated}, but {owner} gained it only in {first}"
        if broken:
            message += f": on {broken} the gated call raises AttributeError"
    else:
        message = (
            f"{gated}: a hard-coded release skips the reset on dev, rc and source builds that report a lower "
            f"version ({first}rc1, 'dev') and on backports; test for the method itself"
        )
    if context.supported.all_from(first):
        message += f"; every supported release has it ({context.supported.describe()}), so the gate can go"
    return message


def _judge_keyword(event: ResetEvent, gate: Gate, context: Context) -> str | None:
    fact = context.facts.get(event.method, assumed_class(event))
    since = fact.param_since(gate.keyword) if fact else None
    test = gate.test
    passed = f"`{gate.keyword}` is passed to `{event.method}` only when {test.describe()} (`{gate.text}`)"
    if gate.raw_string:
        return f'{passed}: strings compare character by character ("0.10.0" < "0.9.0"), so the gate is wrong'
    if since is None or test.runs_when != NEWER or test.threshold == since:
        return None
    if test.threshold > since:
        skipped = _releases_between(context, since, test.threshold)
        message = f"{passed}, but `{event.method}` takes it since {since}"
        return f"{message}: it is left out on {skipped}" if skipped else message
    broken = _releases_between(context, test.threshold, since)
    message = f"{passed}, but `{event.method}` takes it only from {since}"
    return f"{message}: on {broken} the call raises TypeError" if broken else message


def hasattr_target(event: ResetEvent) -> str:
    """What to test with hasattr: never a sync LLM for reset_encoder_cache (always False there)."""
    receiver = event.receiver or "engine"
    if event.receiver_class == EngineClass.LLM.value and event.method == "reset_encoder_cache":
        return f"{receiver}.llm_engine"
    return receiver


def _help(event: ResetEvent, gate: Gate) -> str:
    if gate.kind == "kwargs":
        return (
            f'Test the signature instead: `if "{gate.keyword}" in '
            f"inspect.signature({event.receiver or 'engine'}.{event.method}).parameters:`"
        )
    target = hasattr_target(event)
    return f'Test for the method instead: `if hasattr({target}, "{event.method}"):`'


def _fix(file: FileSummary, event: ResetEvent, gate: Gate, context: Context) -> Fix:
    probe = f'hasattr({hasattr_target(event)}, "{event.method}")'
    if gate.kind == "kwargs" or not gate.pure:
        return Fix(_help(event, gate), Applicability.DISPLAY)
    if gate.kind == "guard":
        change = ReplaceExpression(file.path, gate.test_span, f"not {probe}")
        return Fix(f"Replace the guard's version test with `not {probe}`", Applicability.UNSAFE, changes=(change,))
    if gate.kind not in ("if", "elif"):
        return Fix(f"Test `{probe}` instead of the version", Applicability.DISPLAY)
    # Other code in the branch, or an else branch, runs on other releases after the fix: unsafe.
    applicability = Applicability.SAFE if gate.only_reset and not gate.has_else else Applicability.UNSAFE
    first = first_release(context.facts, event)
    if gate.kind == "if" and gate.only_reset and first is not None and context.supported.all_from(first):
        dropped = " and its else branch" if gate.has_else else ""
        return Fix(
            f"Remove the version gate{dropped} (every supported release has the method)",
            applicability,
            changes=(UnwrapIf(file.path, gate.statement_span),),
        )
    change = ReplaceExpression(file.path, gate.test_span, probe)
    return Fix(f"Replace the version test with `{probe}`", applicability, changes=(change,))
