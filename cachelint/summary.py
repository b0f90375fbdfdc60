"""One walk over a file's syntax tree, reduced to a serializable summary: the one model every rule reads.

The summary holds each function's calls (for the project call graph) and its cache-reset events
(which cache, on what receiver, under which version gates), plus the project-level facts the rules
need (worker-extension classes, processor-cache workarounds), with the positions fixes need.

It is built from CPython's `ast`, which parses and walks about 15 times faster than libcst and records
exact positions; libcst is kept for the files that get fixes (see fixes.py).
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from cachelint.edits import source_lines
from cachelint.facts import EngineClass, load_facts
from cachelint.finding import Span
from cachelint.source import module_name_for
from cachelint.version_tests import VersionTest, VersionTestReader, dotted_name, string_value

RESET_METHODS = frozenset({"reset_prefix_cache", "reset_mm_cache", "reset_encoder_cache"})
PAUSE_METHODS = frozenset({"pause_generation", "sleep"})
# Engine coroutines with no cache effect, recorded (as FunctionSummary.lifecycle) for the await checks.
LIFECYCLE_METHODS = frozenset({"resume_generation", "wake_up"})
# Capability probes: a test of these means the code asks what the installed vLLM offers.
PROBE_CALLS = frozenset({"signature", "getfullargspec", "getargspec", "fields", "hasattr", "getattr"})
PROBE_ATTRIBUTES = frozenset({"parameters", "__dataclass_fields__", "model_fields", "__signature__"})
RPC_METHODS = frozenset({"collective_rpc", "collective_rpc_async"})
DISPATCH_HELPERS = frozenset(
    {
        "run_all_workers",
        "_run_all_workers",
        "batch_engine_call",
        "batch_vllm_engine_call",  # OpenRLHF: batch_vllm_engine_call(engines, "pause_generation")
        "_execute_method",
        "execute_method",
    }
)
AWAITING_WRAPPERS = frozenset(
    {"gather", "create_task", "ensure_future", "wait_for", "wait", "run", "shield", "get", "as_completed"}
)
WORKER_BASES = frozenset({"Worker", "WorkerBase", "WorkerWrapperBase", "GPUWorker", "WorkerExtension"})
ENGINE_BASES = {
    "AsyncLLM": EngineClass.ASYNC_LLM,
    "LLM": EngineClass.LLM,
    "LLMEngine": EngineClass.LLM_ENGINE,
}
CONSTRUCTORS = {
    "AsyncLLM": EngineClass.ASYNC_LLM,
    "AsyncLLMEngine": EngineClass.ASYNC_LLM,
    "LLM": EngineClass.LLM,
    "LLMEngine": EngineClass.LLM_ENGINE,
    "EngineCore": EngineClass.ENGINE_CORE,
    "EngineCoreProc": EngineClass.ENGINE_CORE,
}
ANNOTATIONS = CONSTRUCTORS | {
    "EngineClient": EngineClass.ASYNC_LLM,
    "AsyncEngineClient": EngineClass.ASYNC_LLM,
}
CHAIN_CLASSES = {
    "model_runner": EngineClass.MODEL_RUNNER,
    "driver_worker": EngineClass.WORKER,
    "worker": EngineClass.WORKER,
    "model_executor": EngineClass.EXECUTOR,
    "executor": EngineClass.EXECUTOR,
    "llm_engine": EngineClass.LLM_ENGINE,
    "scheduler": EngineClass.SCHEDULER,
    "encoder_cache_manager": EngineClass.ENCODER_CACHE_MANAGER,
}
OTHER_ENGINES = ("tensorrt_llm", "sglang", "lmdeploy")
HTTP_ROUTE = re.compile(r"/(reset_prefix_cache|reset_mm_cache|reset_encoder_cache|pause)(?:\b|$)")
PROCESSOR_CACHE_SIZE = "mm_processor_cache_gb"
LEGACY_PROCESSOR_CACHE_SWITCH = "disable_mm_preprocessor_cache"


@dataclass
class Gate:
    """A version test that must pass for an event to run."""

    kind: str  # if, elif, else, ternary, guard, kwargs
    operator: str
    threshold: str
    raw_string: bool
    text: str
    test_span: Span
    statement_span: Span  # the whole if statement (or the kwargs assignment)
    only_reset: bool = False  # the gated branch holds nothing but this reset
    has_else: bool = False
    else_resets: bool = False
    keyword: str = ""  # for kwargs gates: the keyword filled under the test
    pure: bool = False  # the test is the version comparison alone (no and/or/not around it)

    @property
    def test(self) -> VersionTest:
        from packaging.version import Version

        return VersionTest(self.operator, Version(self.threshold), self.raw_string)


@dataclass
class Anchor:
    """The simple statement holding a call: where a fix inserts code after it or removes it."""

    statement_span: Span
    indent: str
    line_end_col: int  # the column just past the end of the statement's last line
    own_lines: bool  # the statement starts its line and nothing but a comment follows it
    sole_statement: bool  # the only statement of its block (removing it needs a `pass`)
    previous_line_end_col: int  # the column just past the end of the line before the statement
    leaves_block: bool = False  # a return, raise, break or continue: nothing after it in the block runs


@dataclass
class CallSite:
    name: str
    receiver: str  # source of the receiver, "" for a bare call
    chain: list[str]  # receiver as names: ["self", "server_handle"]; "()" marks a call
    via: str  # direct, remote, rpc, dispatch
    span: Span
    awaited: bool
    receiver_class: str = ""  # an EngineClass value when the receiver is a known vLLM object
    anchor: Anchor | None = None  # where code can be inserted after it (collective_rpc calls only)

    def as_row(self) -> list[Any]:
        """The fields in order: summaries hold thousands of calls, and a row decodes faster than a dict."""
        return [
            self.name,
            self.receiver,
            self.chain,
            self.via,
            self.span,
            self.awaited,
            self.receiver_class,
            self.anchor,
        ]


@dataclass
class ResetEvent:
    """A call that resets (or may reset) a vLLM cache: a reset method, a pause, a sleep or a clear."""

    method: str  # reset_prefix_cache, reset_mm_cache, reset_encoder_cache, pause_generation, sleep, clear
    receiver: str
    chain: list[str]
    receiver_class: str  # an EngineClass value, or "" when unknown
    via: str  # direct, remote, rpc, dispatch, http, alias
    awaited: bool
    in_async: bool
    span: Span  # the call expression
    callee_span: Span  # the called expression (`x.reset_encoder_cache`)
    statement_span: Span  # the simple statement holding the call
    indent: str
    anchor: Anchor | None = None
    keywords: dict[str, str] = field(default_factory=dict)
    positional: list[str] = field(default_factory=list)
    star_kwargs: list[str] = field(default_factory=list)
    gates: list[Gate] = field(default_factory=list)
    hasattr_guarded: bool = False
    consumed: bool = False  # awaited (now or later), gathered or scheduled
    result_ignored: bool = False  # the call (or its await) is a statement of its own
    keyword_spans: dict[str, Span] = field(default_factory=dict)  # `name=value` of each keyword
    compat_guards: list[str] = field(default_factory=list)  # see _Summarizer.compat_guards


@dataclass
class HasattrProbe:
    """`hasattr(<object>, "<attribute>")`, or `getattr(<object>, "<attribute>", <default>)`."""

    attribute: str
    receiver: str  # source of the object
    chain: list[str]
    receiver_class: str
    kind: str  # hasattr, getattr
    span: Span  # the call
    object_span: Span  # its first argument
    statement_span: Span  # the if statement whose test holds it, else the simple statement
    polarity: str = ""  # in an if test: "positive" (body runs when it is true), "negative", or "" (unclear)
    fallback_calls: list[str] = field(default_factory=list)  # what the branch taken when it is false calls


@dataclass
class ArgumentUse:
    """An engine argument named in code: a call keyword, a dict key, a subscript key or a setdefault key."""

    name: str
    kind: str  # keyword, dict, subscript, setdefault
    callee: str  # the called name for keywords and setdefault (EngineArgs, LLM, Namespace, dict, ...)
    function: str  # qualname of the enclosing function
    span: Span  # the keyword (`name=value`) or the key's string literal
    key_text: str  # source of the key literal (with its quotes); "" for keywords
    value: str  # source of the value
    value_span: Span
    siblings: list[str] = field(default_factory=list)  # the other names in the same call or dict
    gates: list[Gate] = field(default_factory=list)
    compat_guards: list[str] = field(default_factory=list)


@dataclass
class FunctionSummary:
    name: str
    qualname: str
    cls: str  # enclosing class name, "" for functions
    is_async: bool
    span: Span  # the def line's name
    calls: list[CallSite] = field(default_factory=list)
    resets: list[ResetEvent] = field(default_factory=list)
    super_calls: list[str] = field(default_factory=list)
    lifecycle: list[ResetEvent] = field(default_factory=list)  # resume_generation, wake_up (no cache effect)
    probes: list[HasattrProbe] = field(default_factory=list)


@dataclass
class ClassSummary:
    name: str
    bases: list[str]
    span: Span
    engine_class: str  # AsyncLLM etc. when it subclasses a vLLM engine, else ""
    worker_like: bool  # subclasses a vLLM worker class or is named like a worker extension
    methods: list[str] = field(default_factory=list)


@dataclass
class Workaround:
    """Where the processor cache is disabled (mm_processor_cache_gb=0 or the legacy switch)."""

    function: str
    cls: str
    span: Span
    kind: str


@dataclass
class FileSummary:
    path: str
    module: str
    engine: str  # vllm, other, unknown
    imports: dict[str, str] = field(default_factory=dict)
    functions: list[FunctionSummary] = field(default_factory=list)
    classes: list[ClassSummary] = field(default_factory=list)
    worker_extension_refs: list[str] = field(default_factory=list)
    workarounds: list[Workaround] = field(default_factory=list)
    engine_arguments: list[ArgumentUse] = field(default_factory=list)

    def encode(self) -> str:
        """The JSON text the cache keeps; `from_json(json.loads(text))` reads it back."""
        from cachelint.cache import plain

        return json.dumps(self, default=plain)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FileSummary:
        def span(raw: Any) -> Span:
            return Span(**raw) if isinstance(raw, dict) else Span(*raw)

        def gate(raw: dict[str, Any]) -> Gate:
            return Gate(**{**raw, "test_span": span(raw["test_span"]), "statement_span": span(raw["statement_span"])})

        def anchor(raw: dict[str, Any] | None) -> Anchor | None:
            return Anchor(**{**raw, "statement_span": span(raw["statement_span"])}) if raw else None

        def event(raw: dict[str, Any]) -> ResetEvent:
            spans = {k: span(raw[k]) for k in ("span", "callee_span", "statement_span")}
            gates = [gate(g) for g in raw["gates"]]
            keyword_spans = {k: span(v) for k, v in raw.get("keyword_spans", {}).items()}
            return ResetEvent(
                **{**raw, **spans, "gates": gates, "anchor": anchor(raw["anchor"]), "keyword_spans": keyword_spans}
            )

        def probe(raw: dict[str, Any]) -> HasattrProbe:
            spans = {k: span(raw[k]) for k in ("span", "object_span", "statement_span")}
            return HasattrProbe(**{**raw, **spans})

        def argument(raw: dict[str, Any]) -> ArgumentUse:
            spans = {k: span(raw[k]) for k in ("span", "value_span")}
            return ArgumentUse(**{**raw, **spans, "gates": [gate(g) for g in raw["gates"]]})

        def call(raw: list[Any]) -> CallSite:
            name, receiver, chain, via, where, awaited, receiver_class, at = raw
            return CallSite(name, receiver, chain, via, Span(*where), awaited, receiver_class, anchor(at))

        def function(raw: dict[str, Any]) -> FunctionSummary:
            return FunctionSummary(
                **{
                    **raw,
                    "span": span(raw["span"]),
                    "calls": [call(c) for c in raw["calls"]],
                    "resets": [event(e) for e in raw["resets"]],
                    "lifecycle": [event(e) for e in raw.get("lifecycle", [])],
                    "probes": [probe(h) for h in raw.get("probes", [])],
                }
            )

        return cls(
            path=data["path"],
            module=data["module"],
            engine=data["engine"],
            imports=data["imports"],
            functions=[function(f) for f in data["functions"]],
            classes=[ClassSummary(**{**c, "span": span(c["span"])}) for c in data["classes"]],
            worker_extension_refs=data["worker_extension_refs"],
            workarounds=[Workaround(**{**w, "span": span(w["span"])}) for w in data["workarounds"]],
            engine_arguments=[argument(a) for a in data.get("engine_arguments", [])],
        )

    def function(self, qualname: str) -> FunctionSummary | None:
        for function in self.functions:
            if function.qualname == qualname:
                return function
        return None

    def class_named(self, name: str) -> ClassSummary | None:
        for summary in self.classes:
            if summary.name == name:
                return summary
        return None


SIMPLE_STATEMENTS = (
    ast.Expr,
    ast.Assign,
    ast.AnnAssign,
    ast.AugAssign,
    ast.Return,
    ast.Raise,
    ast.Pass,
    ast.Break,
    ast.Continue,
    ast.Import,
    ast.ImportFrom,
    ast.Global,
    ast.Nonlocal,
    ast.Delete,
    ast.Assert,
)
FUNCTION_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SIMPLE_STATEMENT_SET = frozenset(SIMPLE_STATEMENTS)
# Nodes whose fields hold nothing but plain values and expression contexts (Load, Store, Del).
_LEAF_NODES = (ast.Name, ast.Constant)
# ast.NodeVisitor.visit_Constant only calls the deprecated visit_Num and the like, which we do not have.
_COMPATIBILITY_SHIM = getattr(ast.NodeVisitor, "visit_Constant", None)


def _handler(visitor: type[ast.NodeVisitor], kind: type[ast.AST]) -> Callable[[Any, Any], Any] | None:
    """The method `visitor` runs on a node of `kind`; None when visiting one can do nothing: no
    method of its own and nothing inside (expression contexts, operators, names, constants)."""
    method = getattr(visitor, f"visit_{kind.__name__}", None)
    if method is None or method is _COMPATIBILITY_SHIM:
        if not kind._fields or issubclass(kind, _LEAF_NODES):
            return None
        method = visitor.generic_visit
    return method


def _last_name(node: ast.expr) -> str:
    dotted = dotted_name(node)
    return dotted.rsplit(".", 1)[-1] if dotted else ""


def _getattr_target(node: ast.expr) -> tuple[ast.expr, str] | None:
    """`getattr(obj, "name", default)` -> (obj, "name")."""
    if isinstance(node, ast.Call) and dotted_name(node.func) == "getattr" and len(node.args) >= 2:
        name = string_value(node.args[1])
        if name is not None:
            return node.args[0], name
    return None


def _is_true(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _is_zero(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
        and node.value == 0
    )


def _annotation_class(node: ast.expr) -> EngineClass | None:
    """The vLLM class named by an annotation (`AsyncLLM`, `"AsyncLLM"`, `AsyncLLM | None`, ...)."""
    for child in ast.walk(node):
        name = ""
        if isinstance(child, (ast.Name, ast.Attribute)):
            name = _last_name(child)
        elif isinstance(child, ast.Constant) and isinstance(child.value, str):
            name = child.value.rsplit(".", 1)[-1]
        if name in ANNOTATIONS:
            return ANNOTATIONS[name]
    return None


class _Source:
    """Positions and text of ast nodes (ast counts columns in UTF-8 bytes; spans count characters)."""

    def __init__(self, text: str) -> None:
        self.lines = source_lines(text)
        self._encoded: dict[int, bytes] = {}

    def _bytes(self, line: int) -> bytes:
        if line not in self._encoded:
            self._encoded[line] = self.lines[line - 1].encode() if 0 < line <= len(self.lines) else b""
        return self._encoded[line]

    def column(self, line: int, byte_offset: int) -> int:
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        if text.isascii():
            return byte_offset + 1
        return len(self._bytes(line)[:byte_offset].decode("utf-8", "replace")) + 1

    def span(self, node: ast.expr | ast.stmt | ast.keyword) -> Span:
        end_line = node.end_lineno or node.lineno
        end_offset = node.end_col_offset if node.end_col_offset is not None else node.col_offset
        return Span(
            node.lineno,
            self.column(node.lineno, node.col_offset),
            end_line,
            self.column(end_line, end_offset),
        )

    def name_span(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> Span:
        """Where a def's or class's name is (ast gives the keyword's position)."""
        text = self.lines[node.lineno - 1] if 0 < node.lineno <= len(self.lines) else ""
        keyword = "class" if isinstance(node, ast.ClassDef) else "def"
        at = text.find(keyword)
        name_at = text.find(node.name, at + len(keyword)) if at >= 0 else -1
        col = name_at + 1 if name_at >= 0 else self.column(node.lineno, node.col_offset)
        return Span(node.lineno, col, node.lineno, col + len(node.name))

    def segment(self, node: ast.expr) -> str:
        end_line = node.end_lineno or node.lineno
        end_offset = node.end_col_offset if node.end_col_offset is not None else node.col_offset
        if node.lineno == end_line:
            return self._bytes(node.lineno)[node.col_offset : end_offset].decode("utf-8", "replace")
        parts = [self._bytes(node.lineno)[node.col_offset :]]
        parts += [self._bytes(line) for line in range(node.lineno + 1, end_line)]
        parts.append(self._bytes(end_line)[:end_offset])
        return b"\n".join(parts).decode("utf-8", "replace")

    def indent(self, line: int) -> str:
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return text[: len(text) - len(text.lstrip())]

    def line_end_col(self, line: int) -> int:
        return len(self.lines[line - 1]) + 1 if 0 < line <= len(self.lines) else 1

    def owns_lines(self, span: Span) -> bool:
        """Nothing but indentation before the span and nothing but a comment after it."""
        before = self.lines[span.line - 1][: span.col - 1] if 0 < span.line <= len(self.lines) else ""
        after = self.lines[span.end_line - 1][span.end_col - 1 :] if 0 < span.end_line <= len(self.lines) else ""
        return not before.strip() and (not after.strip() or after.strip().startswith("#"))

    def starts_with(self, line: int, word: str) -> bool:
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return text.lstrip().startswith(word)


Condition = tuple[ast.expr, bool, str, "ast.If | ast.IfExp"]


@dataclass
class _Frame:
    """Per-function state while walking."""

    function: FunctionSummary
    reader: VersionTestReader
    locals: dict[str, EngineClass] = field(default_factory=dict)
    aliases: dict[str, list[str]] = field(default_factory=dict)
    method_aliases: dict[str, tuple[list[str], str, str]] = field(default_factory=dict)
    conditions: list[Condition] = field(default_factory=list)
    guards: list[list[Gate]] = field(default_factory=lambda: [[]])
    kwargs_gates: dict[str, Gate] = field(default_factory=dict)
    stored_calls: dict[str, list[ResetEvent]] = field(default_factory=dict)
    handlers: list[str] = field(default_factory=list)  # enclosing try/except context, see compat_guards


class _Summarizer(ast.NodeVisitor):
    def __init__(self, summary: FileSummary, source: _Source, helpers: tuple[str, ...]) -> None:
        self.summary = summary
        self.source = source
        module_function = FunctionSummary("<module>", "<module>", "", False, Span(1, 1, 1, 1))
        summary.functions.append(module_function)
        self.frames = [_Frame(module_function, VersionTestReader(helpers))]
        self.classes: list[ClassSummary] = []
        self.class_attrs: dict[str, dict[str, EngineClass]] = {}
        self.awaited: set[int] = set()
        self.consumed: set[int] = set()
        self.elifs: set[int] = set()
        self.statements: list[ast.stmt] = []
        self.blocks: list[list[ast.stmt]] = []
        self.unclassified: list[
            tuple[ResetEvent | CallSite | HasattrProbe, list[dict[str, EngineClass]], ClassSummary | None]
        ] = []
        self.pending_probes: list[tuple[HasattrProbe, ast.Call]] = []
        self.imports_vllm = False
        self.imports_other = False
        self.handlers: dict[type[ast.AST], Callable[[Any, Any], Any] | None] = {}

    # -- walking -------------------------------------------------------------------------------------

    @property
    def frame(self) -> _Frame:
        return self.frames[-1]

    def visit(self, node: ast.AST) -> Any:
        kind = node.__class__
        if kind in self.handlers:
            handler = self.handlers[kind]
        else:
            handler = self.handlers[kind] = _handler(type(self), kind)
        if handler is None:
            return None
        if kind not in _SIMPLE_STATEMENT_SET:
            return handler(self, node)
        assert isinstance(node, ast.stmt)
        self.statements.append(node)
        try:
            return handler(self, node)
        finally:
            self.statements.pop()

    def generic_visit(self, node: ast.AST) -> None:
        handlers = self.handlers  # a node whose handler is known to be None is not worth a call
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, list):
                if value and isinstance(value[0], ast.stmt):
                    self.visit_block(value)
                else:
                    for item in value:
                        if isinstance(item, ast.AST) and handlers.get(item.__class__, self) is not None:
                            self.visit(item)
            elif isinstance(value, ast.AST) and handlers.get(value.__class__, self) is not None:
                self.visit(value)

    def visit_block(self, statements: list[ast.stmt]) -> None:
        """A block of statements: guard clauses in it gate the statements after them."""
        self.frame.guards.append([])
        self.blocks.append(statements)
        for statement in statements:
            self.visit(statement)
        self.blocks.pop()
        self.frame.guards.pop()

    def anchor(self, statement: ast.stmt | None) -> Anchor | None:
        if statement is None:
            return None
        span = self.source.span(statement)
        sole = bool(self.blocks) and len(self.blocks[-1]) == 1 and self.blocks[-1][0] is statement
        return Anchor(
            statement_span=span,
            indent=self.source.indent(span.line),
            line_end_col=self.source.line_end_col(span.end_line),
            own_lines=self.source.owns_lines(span),
            sole_statement=sole,
            previous_line_end_col=self.source.line_end_col(span.line - 1),
            leaves_block=isinstance(statement, (ast.Return, ast.Raise, ast.Break, ast.Continue)),
        )

    def finish(self) -> None:
        for item, scopes, current in self.unclassified:
            kind = self.classify(item.chain, scopes, current)
            item.receiver_class = kind.value if kind else ""
        if self.imports_vllm:
            self.summary.engine = "vllm"
        elif self.imports_other:
            self.summary.engine = "other"

    # -- receivers -----------------------------------------------------------------------------------

    def chain(self, node: ast.expr) -> list[str]:
        """The receiver as a list of names, following aliases and getattr with a literal name."""
        if isinstance(node, ast.Name):
            alias = self.frame.aliases.get(node.id)
            return list(alias) if alias is not None else [node.id]
        if isinstance(node, ast.Attribute):
            return [*self.chain(node.value), node.attr]
        target = _getattr_target(node)
        if target is not None:
            return [*self.chain(target[0]), target[1]]
        if isinstance(node, ast.Call):
            return [*self.chain(node.func), "()"]
        if isinstance(node, ast.Subscript):
            return [*self.chain(node.value), "[]"]
        return ["?"]

    def receiver_text(self, node: ast.expr) -> str:
        dotted = dotted_name(node)
        return dotted if dotted is not None else self.source.segment(node)

    def classify(
        self,
        chain: list[str],
        scopes: list[dict[str, EngineClass]] | None = None,
        current: ClassSummary | None = None,
    ) -> EngineClass | None:
        """Which vLLM class a receiver is, judged by how it was built, annotated or reached."""
        if scopes is None:
            scopes = [frame.locals for frame in self.frames]
            current = self.classes[-1] if self.classes else None
        if not chain:
            return None
        last = chain[-1]
        if last == "engine_core":
            inner = len(chain) >= 2 and chain[-2] == "engine_core"
            return EngineClass.ENGINE_CORE if inner else EngineClass.ENGINE_CORE_CLIENT
        if last in CHAIN_CLASSES:
            return CHAIN_CLASSES[last]
        if len(chain) == 1:
            if last == "self" and current is not None:
                if current.engine_class:
                    return EngineClass(current.engine_class)
                return EngineClass.WORKER if current.worker_like else None
            for scope in reversed(scopes):
                if last in scope:
                    return scope[last]
            return None
        if len(chain) == 2 and chain[0] == "self" and current is not None:
            return self.class_attrs.get(current.name, {}).get(last)
        return None

    def constructed_class(self, value: ast.expr) -> EngineClass | None:
        """`AsyncLLM(...)`, `AsyncLLM.from_vllm_config(...)`, `LLM(...)` and the like."""
        if isinstance(value, ast.Await):
            return self.constructed_class(value.value)
        if not isinstance(value, ast.Call):
            return None
        parts = (dotted_name(value.func) or "").split(".")
        if parts[-1] in CONSTRUCTORS:
            return CONSTRUCTORS[parts[-1]]
        if len(parts) >= 2 and parts[-2] in CONSTRUCTORS and parts[-1].startswith("from_"):
            return CONSTRUCTORS[parts[-2]]
        return None

    # -- imports -------------------------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._note_module(alias.name)
            name = alias.asname or alias.name.split(".")[0]
            self.summary.imports[name] = alias.name if alias.asname else alias.name.split(".")[0]
            self.frame.reader.note_import(alias.name, name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            base = self.summary.module.split(".")
            base = base[: len(base) - node.level] if node.level <= len(base) else []
            module = ".".join([*base, module] if module else base)
        self._note_module(module)
        for alias in node.names:
            if alias.name == "*":
                continue
            local = alias.asname or alias.name
            self.summary.imports[local] = f"{module}.{alias.name}"
            self.frame.reader.note_import_from(module, alias.name, local)
            if module == "vllm" and alias.name == "version":
                self.frame.reader.vllm_modules.add(local)

    def _note_module(self, module: str) -> None:
        top = module.split(".")[0]
        if top == "vllm" or top.startswith("vllm_"):
            self.imports_vllm = True
        elif top in OTHER_ENGINES:
            self.imports_other = True

    # -- classes and functions -----------------------------------------------------------------------

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for decorator in node.decorator_list:
            self.visit(decorator)
        bases = [self.receiver_text(base) for base in node.bases]
        last_bases = [base.rsplit(".", 1)[-1] for base in bases]
        engine = next((ENGINE_BASES[b].value for b in last_bases if b in ENGINE_BASES), "")
        worker_like = any(b in WORKER_BASES for b in last_bases) or node.name.endswith("WorkerExtension")
        summary = ClassSummary(node.name, bases, self.source.name_span(node), engine, worker_like)
        self.summary.classes.append(summary)
        attrs = self.class_attrs.setdefault(node.name, {})
        for statement in node.body:
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                kind = _annotation_class(statement.annotation)
                if kind:
                    attrs[statement.target.id] = kind
        self.classes.append(summary)
        self.visit_block(node.body)
        self.classes.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for decorator in node.decorator_list:
            self.visit(decorator)
        outer = self.frame.function
        in_class = bool(self.classes) and (outer.qualname == "<module>" or outer.cls != self.classes[-1].name)
        cls = self.classes[-1].name if in_class else ""
        if cls:
            qualname = f"{cls}.{node.name}"
            self.classes[-1].methods.append(node.name)
        elif outer.qualname != "<module>":
            qualname = f"{outer.qualname}.<locals>.{node.name}"
        else:
            qualname = node.name
        is_async = isinstance(node, ast.AsyncFunctionDef)
        function = FunctionSummary(node.name, qualname, cls, is_async, self.source.name_span(node))
        self.summary.functions.append(function)
        frame = _Frame(function, self.frame.reader.copy())
        arguments = node.args
        for arg in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
            if arg.annotation is not None:
                kind = _annotation_class(arg.annotation)
                if kind:
                    frame.locals[arg.arg] = kind
        for default in (*arguments.defaults, *arguments.kw_defaults):
            if default is not None:
                self.visit(default)
        self.frames.append(frame)
        self.visit_block(node.body)
        self.frames.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    # -- conditions ----------------------------------------------------------------------------------

    def visit_If(self, node: ast.If) -> None:
        probes_before = len(self.pending_probes)
        self.visit(node.test)
        self._note_probe_branches(node, probes_before)
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            nested = node.orelse[0]
            if self.source.starts_with(nested.lineno, "elif"):
                self.elifs.add(id(nested))
        self.frame.conditions.append((node.test, True, "if", node))
        self.visit_block(node.body)
        self.frame.conditions.pop()
        if node.orelse:
            self.frame.conditions.append((node.test, False, "else", node))
            self.visit_block(node.orelse)
            self.frame.conditions.pop()
        self._note_guard(node)

    def visit_IfExp(self, node: ast.IfExp) -> None:
        probes_before = len(self.pending_probes)
        self.visit(node.test)
        self._note_probe_branches(node, probes_before)
        self.frame.conditions.append((node.test, True, "ternary", node))
        self.visit(node.body)
        self.frame.conditions.pop()
        self.frame.conditions.append((node.test, False, "ternary", node))
        self.visit(node.orelse)
        self.frame.conditions.pop()

    def _note_guard(self, node: ast.If) -> None:
        """An `if <test>: return` guard gates the statements after it in the same block."""
        if node.orelse or not node.body or not isinstance(node.body[-1], (ast.Return, ast.Raise, ast.Continue)):
            return
        test = self.frame.reader.read(node.test)
        if test is None:
            return
        negated = test.negated()
        self.frame.guards[-1].append(
            Gate(
                kind="guard",
                operator=negated.operator,
                threshold=str(negated.threshold),
                raw_string=negated.raw_string,
                text=self.source.segment(node.test),
                test_span=self.source.span(node.test),
                statement_span=self.source.span(node),
                pure=isinstance(node.test, (ast.Compare, ast.Call)),
            )
        )

    def current_gates(self, statement: ast.stmt | None) -> tuple[list[Gate], bool]:
        """The version gates around the current point, and whether a hasattr test guards it."""
        gates: list[Gate] = []
        hasattr_guarded = False
        for test_node, positive, kind, owner in self.frame.conditions:
            if positive and _is_hasattr(test_node):
                hasattr_guarded = True
            test = self.frame.reader.read(test_node)
            if test is None:
                continue
            if not positive:
                test = test.negated()
            gate_kind = "elif" if kind == "if" and id(owner) in self.elifs else kind
            branch: list[ast.stmt] | None = None
            if isinstance(owner, ast.If):
                branch = owner.body if positive else owner.orelse
            gates.append(
                Gate(
                    kind=gate_kind,
                    operator=test.operator,
                    threshold=str(test.threshold),
                    raw_string=test.raw_string,
                    text=self.source.segment(test_node),
                    test_span=self.source.span(test_node),
                    statement_span=self.source.span(owner),
                    only_reset=branch is not None and len(branch) == 1 and branch[0] is statement,
                    has_else=isinstance(owner, ast.If) and bool(owner.orelse),
                    else_resets=isinstance(owner, ast.If) and positive and _calls_reset(owner.orelse),
                    pure=isinstance(test_node, (ast.Compare, ast.Call)),
                )
            )
        for block in self.frame.guards:
            gates.extend(block)
        return gates, hasattr_guarded

    # -- assignments: bindings, aliases, version names, kwargs gates --------------------------------

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._bind(target, node.value)
        self.visit(node.value)
        for target in node.targets:
            self.visit(target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        kind = _annotation_class(node.annotation)
        if kind is not None:
            self._bind_class(node.target, kind)
        elif node.value is not None:
            self._bind(node.target, node.value)
        if node.value is not None:
            self.visit(node.value)

    def _bind(self, target: ast.expr, value: ast.expr) -> None:
        kind = self.constructed_class(value)
        if kind is None and isinstance(value, (ast.Name, ast.Attribute)):
            kind = self.classify(self.chain(value))
        if kind is not None:
            self._bind_class(target, kind)
        if isinstance(target, ast.Name):
            self.frame.reader.note_assignment(target.id, value)
            if isinstance(value, (ast.Name, ast.Attribute)) or _getattr_target(value):
                chain = self.chain(value)
                if chain and chain[-1] in RESET_METHODS | PAUSE_METHODS and isinstance(value, ast.Attribute):
                    receiver = self.receiver_text(value.value)
                    self.frame.method_aliases[target.id] = (chain[:-1], chain[-1], receiver)
                elif len(chain) > 1:
                    self.frame.aliases[target.id] = chain
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            self._note_kwargs_gate(target.value.id, target)
            key = string_value(target.slice)
            if key in _engine_argument_names():
                self._argument_use(key, "subscript", "", target.slice, value, [])
            if string_value(target.slice) == PROCESSOR_CACHE_SIZE and _is_zero(value):
                self._workaround("subscript")

    def _bind_class(self, target: ast.expr, kind: EngineClass) -> None:
        if isinstance(target, ast.Name):
            self.frame.locals[target.id] = kind
        elif (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
            and self.classes
        ):
            self.class_attrs.setdefault(self.classes[-1].name, {})[target.attr] = kind

    def _note_kwargs_gate(self, name: str, target: ast.Subscript) -> None:
        key = string_value(target.slice)
        if key is None:
            return
        gates, _ = self.current_gates(None)
        if not gates:
            return
        gate = gates[-1]
        gate.kind = "kwargs"
        gate.keyword = key
        gate.statement_span = self.statement_span()
        self.frame.kwargs_gates[name] = gate
        self.frames[0].kwargs_gates.setdefault(name, gate)

    def statement_span(self) -> Span:
        return self.source.span(self.statements[-1]) if self.statements else Span(1, 1, 1, 1)

    def _workaround(self, kind: str) -> None:
        function = self.frame.function
        self.summary.workarounds.append(Workaround(function.qualname, function.cls, self.statement_span(), kind))

    def visit_Dict(self, node: ast.Dict) -> None:
        keys = [string_value(key) for key in node.keys if key is not None]
        for key, value in zip(node.keys, node.values, strict=False):
            if key is None:
                continue
            name = string_value(key)
            if name in _engine_argument_names():
                siblings = [k for k in keys if k and k != name]
                self._argument_use(name, "dict", "", key, value, siblings)
            if name == PROCESSOR_CACHE_SIZE and _is_zero(value):
                self._workaround("dict")
            elif name == LEGACY_PROCESSOR_CACHE_SWITCH and _is_true(value):
                self._workaround("legacy")
        self.generic_visit(node)

    # -- awaiting ------------------------------------------------------------------------------------

    def visit_Await(self, node: ast.Await) -> None:
        self.awaited.add(id(node.value))
        if isinstance(node.value, ast.Name):
            for event in self.frame.stored_calls.pop(node.value.id, []):
                event.consumed = True
        self.generic_visit(node)

    # -- calls ---------------------------------------------------------------------------------------

    def visit_Call(self, node: ast.Call) -> None:
        self._record_call(node)
        self.generic_visit(node)

    def _record_call(self, node: ast.Call) -> None:
        func = node.func
        name = _last_name(func)
        if name in AWAITING_WRAPPERS or name == "to_thread":
            for arg in node.args:
                self._mark_consumed(arg)
        if name == "super":
            return
        self._note_keywords(node)
        if _is_processor_cache_setdefault(name, node):
            self._workaround("setdefault")
        if name == "setdefault" and len(node.args) >= 2 and string_value(node.args[0]) in _engine_argument_names():
            key = string_value(node.args[0])
            assert key is not None
            self._argument_use(key, "setdefault", "setdefault", node.args[0], node.args[1], [])
        if isinstance(func, ast.Name) and func.id in ("hasattr", "getattr"):
            self._note_probe(node, func.id)
        if name in ("to_thread", "run_in_executor"):
            self._note_callable_argument(node)
        self._note_super_call(node)
        self._note_http_route(node)

        if isinstance(func, ast.Attribute):
            if func.attr == "remote" and isinstance(func.value, ast.Attribute):
                self._call(node, func.value.attr, func.value.value, "remote", record_reset=False)
            elif func.attr in RPC_METHODS:
                method = _rpc_name(node)
                if method:
                    self._call(node, method, func.value, "rpc")
            else:
                self._call(node, func.attr, func.value, "direct")
        elif isinstance(func, ast.Name):
            alias = self.frame.method_aliases.get(func.id)
            if alias is not None:
                chain, method, receiver_text = alias
                self._reset(node, method, receiver_text, chain, "alias")
            elif func.id in DISPATCH_HELPERS:
                method = _rpc_name(node)
                if method:
                    self._call(node, method, None, "dispatch")
            else:
                self._call(node, func.id, None, "direct")

    def _mark_consumed(self, value: ast.expr) -> None:
        if isinstance(value, ast.Call):
            self.consumed.add(id(value))
        elif isinstance(value, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            self._mark_consumed(value.elt)
        elif isinstance(value, ast.Starred):
            self._mark_consumed(value.value)
        elif isinstance(value, (ast.List, ast.Tuple)):
            for element in value.elts:
                self._mark_consumed(element)

    def _note_keywords(self, node: ast.Call) -> None:
        names = [keyword.arg for keyword in node.keywords if keyword.arg]
        for keyword in node.keywords:
            if keyword.arg in _engine_argument_names():
                siblings = [name for name in names if name != keyword.arg]
                self._argument_use(keyword.arg, "keyword", _last_name(node.func), keyword, keyword.value, siblings)
            if keyword.arg == PROCESSOR_CACHE_SIZE and _is_zero(keyword.value):
                self._workaround("keyword")
            elif keyword.arg == LEGACY_PROCESSOR_CACHE_SWITCH and _is_true(keyword.value):
                self._workaround("legacy")
            elif keyword.arg == "worker_extension_cls":
                text = string_value(keyword.value) or dotted_name(keyword.value)
                if text:
                    self.summary.worker_extension_refs.append(text.rsplit(".", 1)[-1])

    def _note_callable_argument(self, node: ast.Call) -> None:
        for arg in node.args:
            if isinstance(arg, (ast.Name, ast.Attribute)):
                receiver = arg.value if isinstance(arg, ast.Attribute) else None
                self._call(node, _last_name(arg), receiver, "direct", record_reset=False)
                return

    def _note_super_call(self, node: ast.Call) -> None:
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Call)
            and dotted_name(func.value.func) == "super"
        ):
            self.frame.function.super_calls.append(func.attr)

    def _note_http_route(self, node: ast.Call) -> None:
        for arg in (*node.args, *(keyword.value for keyword in node.keywords)):
            for text in _string_parts(arg):
                match = HTTP_ROUTE.search(text)
                if match:
                    method = "pause_generation" if match.group(1) == "pause" else match.group(1)
                    self._reset(node, method, "", [], "http")
                    return

    def _call(
        self,
        node: ast.Call,
        name: str,
        receiver: ast.expr | None,
        via: str,
        record_reset: bool = True,
    ) -> None:
        chain = self.chain(receiver) if receiver is not None else []
        receiver_text = self.receiver_text(receiver) if receiver is not None else ""
        call_site = CallSite(name, receiver_text, chain, via, self.source.span(node), id(node) in self.awaited)
        if via == "rpc":
            call_site.anchor = self.anchor(self.statements[-1] if self.statements else None)
        self.frame.function.calls.append(call_site)
        if chain:
            current = self.classes[-1] if self.classes else None
            self.unclassified.append((call_site, [frame.locals for frame in self.frames], current))
        if not record_reset:
            return
        if name in RESET_METHODS or name in PAUSE_METHODS or name == "reload_weights":
            self._reset(node, name, receiver_text, chain, via)
        elif name == "clear" and chain and chain[-1] == "encoder_cache":
            self._reset(node, "clear", receiver_text, chain, via)
        elif name == "reset" and chain and chain[-1] == "encoder_cache_manager":
            self._reset(node, "reset", receiver_text, chain, via)
        elif name in LIFECYCLE_METHODS:
            self._reset(node, name, receiver_text, chain, via)

    def _reset(self, node: ast.Call, method: str, receiver: str, chain: list[str], via: str) -> None:
        statement = self.statements[-1] if self.statements else None
        statement_span = self.source.span(statement) if statement is not None else self.source.span(node)
        gates, hasattr_guarded = self.current_gates(statement)
        keywords: dict[str, str] = {}
        star_kwargs: list[str] = []
        for keyword in node.keywords:
            if keyword.arg is not None:
                keywords[keyword.arg] = self.source.segment(keyword.value)
            else:
                star_kwargs.append(self.source.segment(keyword.value))
                if isinstance(keyword.value, ast.Name):
                    gate = self._kwargs_gate(keyword.value.id)
                    if gate is not None:
                        gates.append(gate)
        arguments = list(node.args)
        if via == "rpc":
            keywords.pop("method", None)
            if arguments and string_value(arguments[0]) is not None:
                arguments = arguments[1:]
        awaited = id(node) in self.awaited
        event = ResetEvent(
            method=method,
            receiver=receiver,
            chain=chain,
            receiver_class="",
            via=via,
            awaited=awaited,
            in_async=self.frame.function.is_async,
            span=self.source.span(node),
            callee_span=self.source.span(node.func),
            statement_span=statement_span,
            indent=self.source.indent(statement_span.line),
            anchor=self.anchor(statement),
            keywords=keywords,
            positional=[self.source.segment(arg) for arg in arguments if not isinstance(arg, ast.Starred)],
            star_kwargs=star_kwargs,
            gates=gates,
            hasattr_guarded=hasattr_guarded,
            consumed=awaited or id(node) in self.consumed,
            result_ignored=isinstance(statement, ast.Expr) and _unawaited(statement.value) is node,
            keyword_spans={k.arg: self.source.span(k) for k in node.keywords if k.arg is not None},
            compat_guards=self.compat_guards(),
        )
        if method in LIFECYCLE_METHODS:
            self.frame.function.lifecycle.append(event)
        else:
            self.frame.function.resets.append(event)
        current = self.classes[-1] if self.classes else None
        self.unclassified.append((event, [frame.locals for frame in self.frames], current))
        if not event.consumed and isinstance(statement, ast.Assign) and statement.value is node:
            targets = statement.targets
            if len(targets) == 1 and isinstance(targets[0], ast.Name):
                self.frame.stored_calls.setdefault(targets[0].id, []).append(event)

    def _kwargs_gate(self, name: str) -> Gate | None:
        for frame in reversed(self.frames):
            if name in frame.kwargs_gates:
                return frame.kwargs_gates[name]
        return None

    # -- capability probes, compatibility code, engine arguments ------------------------------------

    def visit_Try(self, node: ast.Try) -> None:
        """Calls in a `try` body (or its handlers) may be compatibility code: remember what is caught."""
        caught = [_handler_names(handler) for handler in node.handlers]
        self.frame.handlers.append("try:" + ",".join(sorted({name for names in caught for name in names})))
        self.visit_block(node.body)
        self.frame.handlers.pop()
        for handler, names in zip(node.handlers, caught, strict=False):
            if handler.type is not None:
                self.visit(handler.type)
            self.frame.handlers.append("except:" + ",".join(names))
            self.visit_block(handler.body)
            self.frame.handlers.pop()
        if node.orelse:
            self.visit_block(node.orelse)
        if node.finalbody:
            self.visit_block(node.finalbody)

    visit_TryStar = visit_Try

    def compat_guards(self) -> list[str]:
        """What makes the current point look like compatibility code, as markers:
        `signature` (an enclosing test inspects a signature or dataclass fields), `hasattr` (it probes
        an attribute), `str:<text>` (a string literal in an enclosing test, e.g. a parameter name),
        `try:<caught>` (inside a try body whose handlers catch <caught>), `except:<caught>` (in a handler).
        """
        markers: list[str] = []
        for test_node, _, _, _ in self.frame.conditions:
            for child in ast.walk(test_node):
                marker = ""
                if isinstance(child, ast.Call):
                    name = _last_name(child.func)
                    if name in ("hasattr", "getattr"):
                        marker = "hasattr"
                    elif name in PROBE_CALLS:
                        marker = "signature"
                elif isinstance(child, ast.Attribute) and child.attr in PROBE_ATTRIBUTES:
                    marker = "signature"
                elif isinstance(child, ast.Constant) and isinstance(child.value, str) and child.value.isidentifier():
                    marker = f"str:{child.value}"
                if marker and marker not in markers:
                    markers.append(marker)
        markers.extend(self.frame.handlers)
        return markers

    def _note_probe(self, node: ast.Call, kind: str) -> None:
        """`hasattr(x, "name")`, or `getattr(x, "name", default)` (without a default it raises instead)."""
        if len(node.args) < 2 or (kind == "getattr" and len(node.args) < 3):
            return
        attribute = string_value(node.args[1])
        if attribute is None:
            return
        target = node.args[0]
        statement = self.statements[-1] if self.statements else None
        probe = HasattrProbe(
            attribute=attribute,
            receiver=self.receiver_text(target),
            chain=self.chain(target),
            receiver_class="",
            kind=kind,
            span=self.source.span(node),
            object_span=self.source.span(target),
            statement_span=self.source.span(statement) if statement is not None else self.source.span(node),
        )
        self.frame.function.probes.append(probe)
        self.pending_probes.append((probe, node))
        current = self.classes[-1] if self.classes else None
        self.unclassified.append((probe, [frame.locals for frame in self.frames], current))

    def _note_probe_branches(self, node: ast.If | ast.IfExp, start: int) -> None:
        """For the probes in this test: which way the test goes and what runs when the probe is false."""
        for probe, call in self.pending_probes[start:]:
            polarity = _polarity(node.test, call)
            probe.statement_span = self.source.span(node)
            probe.polarity = polarity or "unclear"
            if not polarity:
                continue
            if isinstance(node, ast.If):
                taken: list[ast.AST] = list(node.orelse if polarity == "positive" else node.body)
            else:
                taken = [node.orelse if polarity == "positive" else node.body]
            probe.fallback_calls = sorted(_called_names(taken))

    def _argument_use(
        self,
        name: str,
        kind: str,
        callee: str,
        key: ast.expr | ast.keyword,
        value: ast.expr,
        siblings: list[str],
    ) -> None:
        statement = self.statements[-1] if self.statements else None
        gates, _ = self.current_gates(statement)
        self.summary.engine_arguments.append(
            ArgumentUse(
                name=name,
                kind=kind,
                callee=callee,
                function=self.frame.function.qualname,
                span=self.source.span(key),
                key_text="" if isinstance(key, ast.keyword) else self.source.segment(key),
                value=self.source.segment(value),
                value_span=self.source.span(value),
                siblings=siblings,
                gates=gates,
                compat_guards=self.compat_guards(),
            )
        )


def _is_processor_cache_setdefault(name: str, node: ast.Call) -> bool:
    """`kwargs.setdefault("mm_processor_cache_gb", 0)`."""
    if name != "setdefault" or len(node.args) < 2:
        return False
    return string_value(node.args[0]) == PROCESSOR_CACHE_SIZE and _is_zero(node.args[1])


def _unawaited(node: ast.expr) -> ast.expr:
    return node.value if isinstance(node, ast.Await) else node


def _rpc_name(node: ast.Call) -> str | None:
    for keyword in node.keywords:
        if keyword.arg == "method":
            return string_value(keyword.value)
    for arg in node.args:
        text = string_value(arg)
        if text is not None:
            return text
    return None


def _string_parts(node: ast.expr) -> Iterator[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.JoinedStr):
        for value in node.values:
            yield from _string_parts(value)
    elif isinstance(node, ast.BinOp):
        yield from _string_parts(node.left)
        yield from _string_parts(node.right)


def _is_hasattr(node: ast.expr) -> bool:
    if isinstance(node, ast.BoolOp):
        return any(_is_hasattr(value) for value in node.values)
    return isinstance(node, ast.Call) and dotted_name(node.func) in ("hasattr", "callable")


def _engine_argument_names() -> frozenset[str]:
    return frozenset(load_facts().engine_arguments)


def _handler_names(handler: ast.ExceptHandler) -> list[str]:
    """The exception names an except clause catches ("*" for a bare except)."""
    if handler.type is None:
        return ["*"]
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return [_last_name(t) or "?" for t in types]


def _polarity(test: ast.expr, target: ast.expr) -> str:
    """ "positive" when `test` is true only if `target` is truthy, "negative" when only if it is falsy,
    "" when it cannot be told (an `or`, a comparison with something else)."""
    if test is target:
        return "positive"
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _polarity(test.operand, target)
        return {"positive": "negative", "negative": "positive"}.get(inner, "")
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        for value in test.values:
            if any(child is target for child in ast.walk(value)):
                return _polarity(value, target)
    if isinstance(test, ast.Call) and dotted_name(test.func) == "callable" and test.args and test.args[0] is target:
        return "positive"
    if (
        isinstance(test, ast.Compare)
        and test.left is target
        and len(test.ops) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        if isinstance(test.ops[0], ast.IsNot):
            return "positive"
        if isinstance(test.ops[0], ast.Is):
            return "negative"
    return ""


def _called_names(nodes: list[ast.AST]) -> set[str]:
    """Every name called in `nodes`, and the method names given to collective_rpc-style dispatch."""
    names: set[str] = set()
    for root in nodes:
        for node in ast.walk(root):
            if isinstance(node, ast.Call):
                name = _last_name(node.func)
                names.add(name)
                if name in RPC_METHODS or name in DISPATCH_HELPERS:
                    method = _rpc_name(node)
                    if method:
                        names.add(method)
    return names


def _calls_reset(statements: list[ast.stmt]) -> bool:
    for statement in statements:
        for node in ast.walk(statement):
            if isinstance(node, ast.Call):
                name = _last_name(node.func)
                if name in RESET_METHODS or name in PAUSE_METHODS or "cache" in name:
                    return True
    return False


def summarize(
    path: str,
    text: str,
    tree: ast.Module,
    helpers: tuple[str, ...] = (),
    module_name: str | None = None,
) -> FileSummary:
    """Walk `tree` (parsed from `text`) once and return its summary."""
    name = module_name if module_name is not None else module_name_for(path)
    summary = FileSummary(path=path, module=name, engine="unknown")
    summarizer = _Summarizer(summary, _Source(text), helpers)

    def walk() -> None:
        summarizer.visit_block(tree.body)
        summarizer.finish()

    _walk_with_headroom(walk)
    return summary


# Before Python 3.11 every Python call also takes C stack: on 3.10 a walk to ten times the default
# recursion limit needed between 1 and 2 MiB (running out is a crash, not a RecursionError), whatever
# the main thread has left; the walk gets a stack of its own with room to spare.
_WALK_STACK_BYTES = 64 * 1024 * 1024


def _walk_with_headroom(walk: Callable[[], None]) -> None:
    """Run `walk` with room for any tree `ast.parse` builds at the current recursion limit.

    CPython builds trees up to about 3 times the limit deep (e.g. 1,000 nested brackets or calls);
    the walk takes up to 3 frames per level, so the limit is raised tenfold meanwhile. From Python
    3.11 on, Python-to-Python calls use no C stack; before, the walk runs in a thread whose stack
    holds that many frames."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * limit))
    try:
        if sys.version_info >= (3, 11):
            walk()
        else:
            _run_in_thread(walk, _WALK_STACK_BYTES)
    finally:
        sys.setrecursionlimit(limit)


def _run_in_thread(function: Callable[[], None], stack_bytes: int) -> None:
    """Call `function` in a new thread with a stack of `stack_bytes`; raise what it raises."""
    import threading

    raised: list[BaseException] = []

    def run() -> None:
        try:
            function()
        except BaseException as error:
            raised.append(error)

    previous = threading.stack_size(stack_bytes)
    try:
        thread = threading.Thread(target=run, name="cachelint-summary")
        thread.start()
    finally:
        threading.stack_size(previous)
    thread.join()
    if raised:
        raise raised[0]
