"""Invariants every fix must keep, checked for every finding a rule reports (engine.run_rules).

For each call a fix inserts (`receiver.method(...)`, read from the statements and expressions its
changes add, with `ast`):
- on a vLLM class, the method exists on every supported release, or a `hasattr(receiver, "method")`
  in the inserted code guards it; on an SGLang class (`Engine`, `TokenizerManager`), the same against
  the SGLang facts and the supported SGLang releases (a project subclass that defines the method
  answers for it);
- on a project class, the class (or a project base) defines the method; on an object of unknown class
  named like a client (`self.vllm_client`), some class of the project defines it (another library's
  client, TRL's `VLLMClient`, has no cache resets but the prefix one);
- never on another engine's object, and never vLLM's methods on SGLang's nor SGLang's on vLLM's;
- `await` only in an `async def`, and a coroutine method of vLLM's async engine awaited there;
- no reset the function already performs on the same receiver with nothing in between;
- where the help names a call of the same method, it names the same receiver.
A fix that breaks one is kept as a display-only suggestion, and its help says what is missing.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from dataclasses import dataclass

from packaging.version import Version

from cachelint import provenance
from cachelint.changes import Change, InsertAfter, InsertBefore, ReplaceExpression
from cachelint.facts import ApiFact, EngineClass
from cachelint.finding import Applicability, Finding, Fix
from cachelint.provenance import Kind
from cachelint.rules.base import Context
from cachelint.summary import SGLANG_METHODS, CallSite, FileSummary, FunctionSummary, ResetEvent
from cachelint.version_tests import dotted_name, string_value

VLLM_METHODS = frozenset(
    {"reset_prefix_cache", "reset_mm_cache", "reset_encoder_cache", "pause_generation", "sleep", "wake_up"}
)
CHECKED_METHODS = VLLM_METHODS | SGLANG_METHODS
_CODE = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class InsertedCall:
    receiver: str
    method: str
    awaited: bool
    guarded: bool  # inside `if hasattr(receiver, "method"):` in the inserted code


def inserted_calls(change: Change) -> list[InsertedCall]:
    """The method calls a change adds (statements after an anchor, or an expression), with their guards."""
    if isinstance(change, InsertAfter | InsertBefore):
        found = []
        for statement in change.statements:
            tested = _hasattr_tests(_parse(statement.guard)) if statement.guard else set()
            found += [
                dataclasses.replace(call, guarded=(call.receiver, call.method) in tested)
                for call in _calls(_parse(statement.code))
            ]
        return found
    if isinstance(change, ReplaceExpression):
        return _calls(_parse(change.code))
    return []


def _calls(tree: ast.AST | None) -> list[InsertedCall]:
    if tree is None:
        return []
    awaited = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Await)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            receiver = dotted_name(node.func.value)
            if receiver is not None and node.func.attr in CHECKED_METHODS:
                found.append(InsertedCall(receiver, node.func.attr, id(node) in awaited, False))
    return found


def _parse(code: str) -> ast.AST | None:
    """One statement or expression, read where `await` is allowed."""
    try:
        return ast.parse(f"async def _():\n    {code}\n")
    except SyntaxError:
        return None


def _hasattr_tests(tree: ast.AST | None) -> set[tuple[str, str]]:
    tests = set()
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Call) and dotted_name(node.func) == "hasattr" and len(node.args) == 2:
            receiver, name = dotted_name(node.args[0]), string_value(node.args[1])
            if receiver and name:
                tests.add((receiver, name))
    return tests


def violations(finding: Finding, context: Context) -> list[str]:
    """What the finding's fix breaks, as phrases for its help; empty when it keeps every invariant."""
    fix = finding.fix
    if fix is None or fix.applicability is Applicability.DISPLAY:
        return []
    problems: list[str] = []
    for change in fix.changes:
        file = context.project.files.get(change.path)
        at = change.where
        function = _enclosing_function(file, at.line) if file is not None else None
        if file is None or function is None:
            continue
        releases = _running_releases(change, function, context)
        replaced = _replaced_or_anchor(change, function)
        for call in inserted_calls(change):
            if any(event.consumed and event.span == at for event in replaced):
                call = dataclasses.replace(call, awaited=True)  # the replaced call was awaited or gathered
            problems.extend(_call_problems(call, change, file, function, releases, context))
    problems.extend(_help_problems(finding, fix))
    return list(dict.fromkeys(problems))


def _replaced_or_anchor(change: Change, function: FunctionSummary) -> list[ResetEvent]:
    """The events whose statement a change inserts after, or that it changes."""
    at = change.where
    if isinstance(change, InsertAfter):
        return [event for event in function.resets if event.anchor is not None and event.anchor.statement_span == at]
    return [
        event
        for event in (*function.resets, *function.lifecycle)
        if event.span.line <= at.end_line and at.line <= event.span.end_line
    ]


def _running_releases(change: Change, function: FunctionSummary, context: Context) -> list[Version]:
    """The supported releases on which the code at the edit runs: those that have the call it replaces
    or follows (and pass its version gates); all of them when that is not known."""
    from cachelint.rules.events import assumed_class, gates_allow

    releases = list(context.supported.releases)
    for event in _replaced_or_anchor(change, function):
        fact = (
            context.facts.worker_rpc(event.method)
            if event.via == "rpc"
            else context.facts.get(event.method, assumed_class(event))
        )
        releases = [
            release
            for release in releases
            if (fact is None or fact.exists_in(release)) and gates_allow(event.gates, release)
        ]
    return releases


def _enclosing_function(file: FileSummary, line: int) -> FunctionSummary | None:
    """The innermost function whose body holds `line` (the module when none does)."""
    best = None
    for function in file.functions:
        inside = function.qualname != "<module>" and function.span.line <= line <= function.end_line
        if inside and (best is None or function.span.line >= best.span.line):
            best = function
    return best or file.function("<module>")


def _known_item(function: FunctionSummary, receiver: str) -> ResetEvent | CallSite | None:
    """An item of the function on the same receiver text: its chain and class tell what it is."""
    items: list[ResetEvent | CallSite] = [*function.resets, *function.lifecycle, *function.calls]
    return next((item for item in items if item.receiver == receiver), None)


def _call_problems(
    call: InsertedCall,
    change: Change,
    file: FileSummary,
    function: FunctionSummary,
    releases: list[Version],
    context: Context,
) -> list[str]:
    problems = []
    if call.awaited and not function.is_async:
        problems.append(f"`await {call.receiver}.{call.method}()` in `{function.name}`, which is not async")
    chain = call.receiver.split(".")
    reached = provenance.chain_class(chain)
    item = _known_item(function, call.receiver)
    if reached is not None:
        found = provenance.Receiver(Kind.VLLM, "", reached)
    elif item is not None:
        found = provenance.receiver(context.project, file, function, item)
    else:
        found = provenance.Receiver(Kind.UNKNOWN, "")
    if found.kind is Kind.SGLANG:
        problems.extend(_sglang_problems(call, found, function, context))
    elif found.kind is Kind.OTHER_ENGINE or (found.kind is Kind.VLLM and call.method not in VLLM_METHODS):
        problems.append(f"`{call.receiver}` is not SGLang's: {found.why}" if found.why else f"no `{call.method}`")
    elif found.kind is Kind.PROJECT and found.project_class is not None and not found.by_name:
        cls = found.project_class.cls.name
        if not provenance.defines(context.project, cls, call.method):
            problems.append(f"`{cls}` has no `{call.method}`: add it to `{cls}` first")
    elif call.method not in VLLM_METHODS:
        pass  # SGLang's method on an object of unknown class: nothing says which class to check
    elif (
        found.kind is Kind.UNKNOWN
        and provenance.named_like_client(chain[-1])
        and provenance.defined_by_no_class(context.project, [call.method])
    ):
        problems.append(f"`{call.receiver}` is named like a client and no class of the project has `{call.method}`")
    else:
        cls = found.engine_class or provenance.likeliest_engine(chain, call.awaited)
        problems.extend(_vllm_problems(call, cls, function, releases, context))
    if isinstance(change, InsertAfter) and _repeats(call, change, function):
        problems.append(f"`{function.name}` already calls `{call.receiver}.{call.method}()` right before this point")
    return problems


def _vllm_problems(
    call: InsertedCall, cls: EngineClass, function: FunctionSummary, releases: list[Version], context: Context
) -> list[str]:
    fact = context.facts.get(call.method, cls)
    if fact is None or fact.first_release is None:  # a fact without a first release: never added
        return [f"vLLM's {cls.short} has no `{call.method}`"]
    return _fact_problems(call, fact, f"{cls.short}.{call.method}", "vLLM", releases, function)


def _sglang_problems(
    call: InsertedCall, found: provenance.Receiver, function: FunctionSummary, context: Context
) -> list[str]:
    """An SGLang receiver: its class must have the method on every supported SGLang release (unless a
    `hasattr` guards it), awaited exactly when it is a coroutine; a project subclass that defines the
    method answers for it."""
    target = found.project_class
    if target is not None and provenance.defines(context.project, target.cls.name, call.method):
        return []
    cls = found.sglang_class
    fact = context.sglang_facts.get(call.method, cls.value) if cls is not None else None
    name = cls.value if cls is not None else "object"
    if fact is None and call.method in VLLM_METHODS:
        return [f"`{call.receiver}` is not vLLM's: {found.why}"]
    if fact is None:
        return [f"SGLang's {name} has no `{call.method}`"]
    releases = list(context.sglang_range.releases)
    return _fact_problems(call, fact, f"SGLang's {name}.{call.method}", "SGLang", releases, function)


def _fact_problems(
    call: InsertedCall, fact: ApiFact, method: str, engine: str, releases: list[Version], function: FunctionSummary
) -> list[str]:
    """What the facts of the inserted call's method (`method`, as people name it, of `engine`) say
    against it: a release of `releases` without it and no `hasattr` guard, a coroutine not awaited in
    a coroutine, an await of a plain method."""
    problems = []
    lacking = [release for release in releases if not fact.exists_in(release)]
    if lacking and not call.guarded:
        problems.append(
            f"{method} exists only from {engine} {fact.first_release}: guard it with "
            f'`if hasattr({call.receiver}, "{call.method}"):`'
        )
    if fact.is_async and function.is_async and not call.awaited:
        problems.append(f"`{call.receiver}.{call.method}()` is a coroutine: await it")
    if not fact.is_async and call.awaited:
        problems.append(f"{method} is not a coroutine: do not await it")
    return problems


def _repeats(call: InsertedCall, change: InsertAfter, function: FunctionSummary) -> bool:
    """An inserted reset that the same reset on the same receiver ends right before: nothing awaited and
    nothing else called on the receiver in between."""
    at = (change.statement.end_line, change.statement.end_col)
    earlier = [
        event.statement_span
        for event in function.resets
        if event.method == call.method
        and event.receiver == call.receiver
        and (event.span.end_line, event.span.end_col) <= at
    ]
    if not earlier:
        return False
    start = max(earlier)
    return not any(
        (start.end_line, start.end_col) < (item.span.line, item.span.col) < at
        and item.name != call.method
        and (item.awaited or item.receiver == call.receiver)
        for item in function.calls
    )


def _help_problems(finding: Finding, fix: Fix) -> list[str]:
    """A help that names calls of a method the fix inserts, none of them on a receiver the fix uses,
    contradicts the fix."""
    inserted: dict[str, set[str]] = {}
    for change in fix.changes:
        for call in inserted_calls(change):
            inserted.setdefault(call.method, set()).add(call.receiver)
    named: dict[str, set[str]] = {}
    for code in _CODE.findall(finding.help):
        for call in _calls(_parse(code)):
            named.setdefault(call.method, set()).add(call.receiver)
    problems = []
    for method, receivers in named.items():
        if method in inserted and not receivers & inserted[method]:
            theirs = ", ".join(f"`{receiver}.{method}()`" for receiver in sorted(receivers))
            ours = ", ".join(f"`{receiver}.{method}()`" for receiver in sorted(inserted[method]))
            problems.append(f"the help names {theirs} but the fix calls {ours}")
    return problems


def vetted(finding: Finding, context: Context) -> Finding:
    """The finding, with its fix downgraded to a display-only suggestion when it breaks an invariant."""
    problems = violations(finding, context)
    if not problems or finding.fix is None:
        return finding
    reason = "; ".join(problems)
    fix = Fix(f"{finding.fix.message} (not applied: {reason})", Applicability.DISPLAY)
    return dataclasses.replace(finding, fix=fix, help=f"{finding.help} ({reason})")
