"""CL009 removed-engine-argument: an argument that vLLM removed, passed where a supported release lacks it."""

from __future__ import annotations

from collections.abc import Iterator

from packaging.version import Version

from cachelint.changes import ReplaceExpression, ReplaceKeyword
from cachelint.facts import ApiFact, EngineArgumentFact
from cachelint.finding import Applicability, Finding, Fix
from cachelint.rules.base import Context, Rule, RuleInfo
from cachelint.rules.events import LOST_EFFECT, assumed_class, describe_releases, gates_allow
from cachelint.summary import ArgumentUse, FileSummary, FunctionSummary, Gate, ResetEvent

# A removed keyword of an engine method with a direct replacement: the new keyword and the value that
# replaces each literal value. The releases (when the old one went, when the new one came) are the facts'.
KEYWORD_REPLACEMENTS: dict[tuple[str, str], tuple[str, dict[str, str]]] = {
    ("pause_generation", "wait_for_inflight_requests"): ("mode", {"True": '"wait"', "False": '"abort"'}),
}
# Calls whose keywords are engine arguments: a direct TypeError when one is unknown...
ENGINE_ARGUMENT_CALLS = frozenset({"EngineArgs", "AsyncEngineArgs", "LLM"})
# ... and containers the project fills for later (its own code may read the key back).
ARGUMENT_CONTAINERS = frozenset({"Namespace", "SimpleNamespace", "dict", "update"})


class RemovedEngineArgument(Rule):
    info = RuleInfo(
        code="CL009",
        name="removed-engine-argument",
        summary="An engine argument or method keyword that vLLM removed, passed where a supported release lacks it.",
        fixable="sometimes",
        fix_kinds=("safe", "unsafe"),
    )

    def check(self, file: FileSummary, context: Context) -> Iterator[Finding]:
        if file.engine == "other":
            return
        for function in file.functions:
            for event in sorted([*function.resets, *function.lifecycle], key=lambda e: e.span):
                yield from self._check_keywords(file, function, event, context)
        for use in file.engine_arguments:
            yield from self._check_engine_argument(file, use, context)

    def _check_keywords(
        self, file: FileSummary, function: FunctionSummary, event: ResetEvent, context: Context
    ) -> Iterator[Finding]:
        fact = _method_fact(file, event, context)
        if fact is None:
            return
        for keyword in event.keywords:
            broken = [
                release
                for release in context.supported.releases
                if fact.drops_param(keyword, release) and gates_allow(event.gates, release)
            ]
            if not broken or _is_compat_code(event.compat_guards, _parameters(fact)):
                continue
            yield self.finding(
                file,
                event.keyword_spans.get(keyword, event.span),
                _keyword_message(event, fact, keyword, broken, context),
                _keyword_help(event, fact, keyword, context),
                fix=_keyword_fix(file, event, fact, keyword, context),
                function=function.qualname,
            )

    def _check_engine_argument(self, file: FileSummary, use: ArgumentUse, context: Context) -> Iterator[Finding]:
        fact = context.facts.engine_argument(use.name)
        if fact is None or fact.removed_in is None:
            return
        if use.kind == "keyword" and use.callee not in ENGINE_ARGUMENT_CALLS | ARGUMENT_CONTAINERS:
            return  # a keyword of the project's own function: what it does with it is not known here
        removed = fact.removed_in
        broken = [
            release
            for release in context.supported.releases
            if release >= removed and not fact.exists_in(release) and gates_allow(use.gates, release)
        ]
        names = {use.name, fact.replaced_by} - {""}
        if not broken or _is_compat_code(use.compat_guards, names):
            return
        yield self.finding(
            file,
            use.span,
            _argument_message(use, fact, broken, context),
            _argument_help(use, fact),
            fix=_argument_fix(file, use, fact, context),
            function=use.function,
        )


# -- method keywords ------------------------------------------------------------------------------------


def _method_fact(file: FileSummary, event: ResetEvent, context: Context) -> ApiFact | None:
    """The facts of the called method on the receiver's class (known, or an engine for an unknown receiver
    in a vLLM module that the project does not define a method of that name for)."""
    if event.via not in ("direct", "alias") or not event.keywords:
        return None
    if event.receiver_class:
        return context.facts.get(event.method, event.receiver_class)
    if file.engine != "vllm":
        return None
    if any(ref.function.cls for ref in context.project.functions_by_name.get(event.method, [])):
        return None
    return context.facts.get(event.method, assumed_class(event))


def _parameters(fact: ApiFact) -> set[str]:
    return {param for signature in fact.signatures for param in signature.params}


def _is_compat_code(guards: list[str], names: set[str]) -> bool:
    """Code that asks what the installed vLLM takes: a signature probe, a test naming the parameter (or
    its replacement), or a `try` that catches the TypeError."""
    for guard in guards:
        if guard == "signature" or (guard.startswith("str:") and guard.removeprefix("str:") in names):
            return True
        if guard.startswith(("try:", "except:")) and "TypeError" in guard.split(":", 1)[1].split(","):
            return True
    return False


def _call(event: ResetEvent) -> str:
    return f"{event.receiver or 'self'}.{event.method}(...)"


def _owner(fact: ApiFact) -> str:
    return fact.cls.split(" ")[0]


def _keyword_message(event: ResetEvent, fact: ApiFact, keyword: str, broken: list[Version], context: Context) -> str:
    removed = fact.param_removed_in(keyword)
    effect = LOST_EFFECT.get(event.method, "the call never happens")
    return (
        f"`{_call(event)}` passes `{keyword}`, which `{_owner(fact)}.{event.method}` no longer takes from vLLM "
        f"{removed} ({describe_releases(broken)}, {context.supported.share(broken)}): the call raises "
        f"TypeError there, so {effect}"
    )


def _replacement(event: ResetEvent, fact: ApiFact, keyword: str) -> tuple[str, str | None, Version | None] | None:
    """(new keyword, new value source or None, release that added the new keyword)."""
    entry = KEYWORD_REPLACEMENTS.get((event.method, keyword))
    if entry is None:
        return None
    new, values = entry
    return new, values.get(event.keywords[keyword]), fact.param_since(new)


def _keyword_help(event: ResetEvent, fact: ApiFact, keyword: str, context: Context) -> str:
    replacement = _replacement(event, fact, keyword)
    if replacement is None:
        removed = fact.param_removed_in(keyword)
        return f"Drop `{keyword}=`: `{_owner(fact)}.{event.method}` does not take it from {removed}"
    new, value, since = replacement
    entry = KEYWORD_REPLACEMENTS[(event.method, keyword)]
    if value is None:
        choices = " / ".join(f"`{keyword}={old}` -> `{new}={repl}`" for old, repl in entry[1].items())
        return f"Pass `{new}=` instead (vLLM {since}+): {choices}"
    return f"Pass `{new}={value}` instead (vLLM {since}+)"


def _keyword_fix(file: FileSummary, event: ResetEvent, fact: ApiFact, keyword: str, context: Context) -> Fix:
    help_text = _keyword_help(event, fact, keyword, context)
    replacement = _replacement(event, fact, keyword)
    span = event.keyword_spans.get(keyword)
    if replacement is None or span is None:
        return Fix(help_text, Applicability.DISPLAY)
    new, value, since = replacement
    if value is None or since is None or new in event.keywords or not _runs_only_from(event.gates, since, context):
        return Fix(help_text, Applicability.DISPLAY)
    return Fix(f"Pass `{new}={value}`", Applicability.SAFE, changes=(ReplaceKeyword(file.path, span, new, value),))


def _runs_only_from(gates: list[Gate], since: Version, context: Context) -> bool:
    """Every supported release the code runs on (after its version gates) is `since` or later."""
    running = [release for release in context.supported.releases if gates_allow(gates, release)]
    return bool(running) and all(release >= since for release in running)


# -- engine arguments -----------------------------------------------------------------------------------


def _argument_message(use: ArgumentUse, fact: EngineArgumentFact, broken: list[Version], context: Context) -> str:
    where = {
        "keyword": f"`{use.callee}({use.name}=...)`",
        "dict": f'the key "{use.name}"',
        "subscript": f'the key "{use.name}"',
        "setdefault": f'the key "{use.name}"',
    }[use.kind]
    if use.kind == "keyword" and use.callee in ENGINE_ARGUMENT_CALLS:
        outcome = "the call raises TypeError (unexpected keyword argument)"
    elif use.callee in ("Namespace", "SimpleNamespace"):
        outcome = "`EngineArgs.from_cli_args` ignores the attribute"
    else:
        outcome = "splatted into EngineArgs or LLM it raises TypeError (unexpected keyword argument)"
    purpose = ""
    if use.name == "disable_mm_preprocessor_cache":
        purpose = ", and the multimodal processor cache it meant to turn off stays on"
    return (
        f"{where}: vLLM removed the engine argument `{use.name}` in {fact.removed_in} ({describe_releases(broken)}, "
        f"{context.supported.share(broken)}): {outcome}{purpose}"
    )


def _new_argument(use: ArgumentUse, fact: EngineArgumentFact) -> str | None:
    return fact.replacement_value(use.value) if fact.replaced_by else None


def _argument_help(use: ArgumentUse, fact: EngineArgumentFact) -> str:
    value = _new_argument(use, fact)
    if fact.replaced_by and value is not None:
        return f"Use `{fact.replaced_by}={value}` instead"
    if fact.replaced_by:
        return f"Remove `{use.name}` (use `{fact.replaced_by}` to configure what it did)"
    return f"Remove `{use.name}`"


def _argument_fix(file: FileSummary, use: ArgumentUse, fact: EngineArgumentFact, context: Context) -> Fix:
    help_text = _argument_help(use, fact)
    value = _new_argument(use, fact)
    replacement = context.facts.engine_argument(fact.replaced_by) if fact.replaced_by else None
    since = replacement.since if replacement is not None else None
    if value is None or fact.replaced_by in use.siblings:
        return Fix(help_text, Applicability.DISPLAY)
    if since is not None and not _runs_only_from(use.gates, since, context):
        return Fix(help_text, Applicability.DISPLAY)
    message = f"Use `{fact.replaced_by}={value}`"
    if use.kind == "keyword":
        change = ReplaceKeyword(file.path, use.span, fact.replaced_by, value)
        safe = use.callee in ENGINE_ARGUMENT_CALLS
        return Fix(message, Applicability.SAFE if safe else Applicability.UNSAFE, changes=(change,))
    key = use.key_text.replace(use.name, fact.replaced_by)
    changes = (ReplaceExpression(file.path, use.span, key), ReplaceExpression(file.path, use.value_span, value))
    return Fix(message, Applicability.UNSAFE, changes=changes)
