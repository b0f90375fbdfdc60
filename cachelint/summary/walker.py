"""The walk's machinery: one pass over a file's statements, with the per-function state every part of
the summary reads (frames, the statement and block being visited, where code can be inserted).

What each node contributes is extracted by the layers built on `Walker` (bindings.py, gates.py,
compat.py, calls.py), composed into one visitor in walk.py, so the file is still walked once.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cachelint.finding import Span
from cachelint.summary.model import (
    Anchor,
    CallSite,
    ClassSummary,
    FileSummary,
    FunctionSummary,
    Gate,
    HasattrProbe,
    Request,
    ResetEvent,
)
from cachelint.summary.nodes import last_name, names_a_lock
from cachelint.summary.positions import SourcePositions
from cachelint.version_tests import VersionTestReader

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
# Fields that never hold a node the walk visits: names, flags, operators and expression contexts.
_PLAIN_FIELDS = frozenset(
    {"ctx", "op", "ops", "id", "attr", "arg", "asname", "name", "names", "conversion", "is_async", "kind"}
    | {"level", "module", "simple", "tag", "type_comment", "type_ignores", "kwd_attrs", "n", "s"}
)
# ast.NodeVisitor.visit_Constant only calls the deprecated visit_Num and the like, which we do not have.
_COMPATIBILITY_SHIM = getattr(ast.NodeVisitor, "visit_Constant", None)

Condition = tuple[ast.expr, bool, str, "ast.If | ast.IfExp"]
# A recorded item whose receiver is classified when the walk ends: the item, the binding scopes that
# were open around it (innermost last) and the class it is in.
Pending = tuple["ResetEvent | CallSite | HasattrProbe | Request", list[dict[str, str]], "ClassSummary | None"]


def _handler(visitor: type[ast.NodeVisitor], kind: type[ast.AST]) -> Callable[[Any, Any], Any] | None:
    """The method `visitor` runs on a node of `kind`; None when visiting one can do nothing: no
    method of its own and nothing inside (expression contexts, operators, names, constants)."""
    method = getattr(visitor, f"visit_{kind.__name__}", None)
    if method is None or method is _COMPATIBILITY_SHIM:
        if not kind._fields or issubclass(kind, _LEAF_NODES):
            return None
        method = visitor.generic_visit
    return method


@dataclass
class Frame:
    """Per-function state while walking."""

    function: FunctionSummary
    reader: VersionTestReader  # vLLM's version
    sglang_reader: VersionTestReader  # SGLang's
    aliases: dict[str, list[str]] = field(default_factory=dict)
    method_aliases: dict[str, tuple[list[str], str, str]] = field(default_factory=dict)
    conditions: list[Condition] = field(default_factory=list)
    guards: list[list[Gate]] = field(default_factory=lambda: [[]])
    kwargs_gates: dict[str, Gate] = field(default_factory=dict)
    stored_calls: dict[str, list[ResetEvent]] = field(default_factory=dict)
    handlers: list[str] = field(default_factory=list)  # enclosing try/except context, see compat_guards
    routes: dict[str, str] = field(default_factory=dict)  # locals holding a URL of a cache route -> method
    sglang_routes: dict[str, str] = field(default_factory=dict)  # locals holding a URL of SGLang's route -> method
    # What each local name was assigned, as (field, value): field is "" for the name itself, else the
    # key or attribute stored into (`payload["features"] = value`); read by the requests layer.
    values: dict[str, list[tuple[str, ast.expr]]] = field(default_factory=dict)
    arguments: ast.arguments | None = None  # the function's parameters
    parameters: frozenset[str] | None = None  # those that may hold media, once the requests layer asked
    requests: dict[str, dict[str, str]] = field(default_factory=dict)  # locals holding a request's fields
    sglang_commands: set[str] = field(default_factory=set)  # locals holding a command that names SGLang


class Walker(ast.NodeVisitor):
    """Traversal, frames, classes and functions; the layers above add what they extract."""

    if TYPE_CHECKING:  # provided by the layers (bindings.py, gates.py, compat.py)

        def chain(self, node: ast.expr) -> list[str]: ...
        def receiver_text(self, node: ast.expr) -> str: ...
        def bind_parameters(self, node: ast.FunctionDef | ast.AsyncFunctionDef, function: FunctionSummary) -> None: ...
        def bind_class_attributes(self, node: ast.ClassDef, summary: ClassSummary) -> None: ...
        def current_gates(self, statement: ast.stmt | None) -> tuple[list[Gate], bool]: ...
        def compat_guards(self) -> list[str]: ...
        def note_probe_branches(self, node: ast.If | ast.IfExp, start: int) -> None: ...

    def __init__(self, summary: FileSummary, source: SourcePositions, helpers: tuple[str, ...]) -> None:
        self.summary = summary
        self.source = source
        module_function = FunctionSummary("<module>", "<module>", "", False, Span(1, 1, 1, 1))
        summary.functions.append(module_function)
        self.frames = [Frame(module_function, VersionTestReader(helpers), VersionTestReader(engine="sglang"))]
        self.classes: list[ClassSummary] = []
        self.awaited: set[int] = set()
        self.consumed: set[int] = set()
        self.statements: list[ast.stmt] = []
        self.headers: list[ast.With | ast.AsyncWith] = []
        self.pending: list[Pending] = []
        self.pending_probes: list[tuple[HasattrProbe, ast.Call]] = []  # probes whose if test is being read
        self.handlers: dict[type[ast.AST], Callable[[Any, Any], Any] | None] = {}
        self.node_fields: dict[type[ast.AST], tuple[str, ...]] = {}
        self.elifs: set[int] = set()  # `if` nodes spelled `elif`
        self.decorators: dict[int, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef] = {}  # what each decorates
        # Functions stored into an attribute, as (attribute, name, scopes innermost first, whether `name`
        # is a factory whose returned local function is the one stored); resolved when the walk ends.
        self.installs: list[tuple[str, str, tuple[str, ...], bool]] = []
        self.returned: dict[str, set[str]] = {}  # the local names each function returns, by qualname
        self.imports_vllm = False
        self.imports_other = False
        self.imports_sglang = False

    @property
    def frame(self) -> Frame:
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
        kind = node.__class__
        fields = self.node_fields.get(kind)
        if fields is None:
            fields = self.node_fields[kind] = tuple(name for name in kind._fields if name not in _PLAIN_FIELDS)
        for name in fields:
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
        for statement in statements:
            if isinstance(statement, ast.Raise):
                self.frame.function.raises = True
            self.visit(statement)
        self.frame.guards.pop()

    def statement(self) -> ast.stmt | None:
        """The simple statement being visited."""
        return self.statements[-1] if self.statements else None

    def statement_span(self) -> Span:
        return self.source.span(self.statements[-1]) if self.statements else Span(1, 1, 1, 1)

    def header(self) -> ast.With | ast.AsyncWith | None:
        """The `with` statement whose header is being visited (code after its calls opens its body)."""
        return self.headers[-1] if self.headers else None

    def anchor(self, statement: ast.stmt | None) -> Anchor | None:
        if statement is None:
            return None
        return Anchor(
            statement_span=self.source.span(statement),
            leaves_block=isinstance(statement, (ast.Return, ast.Raise, ast.Break, ast.Continue)),
        )

    def note_receiver(self, item: ResetEvent | CallSite | HasattrProbe | Request) -> None:
        """Classify the item's receiver when the walk ends, in the scopes open now."""
        current = self.classes[-1] if self.classes else None
        self.pending.append((item, [frame.function.bindings for frame in self.frames], current))

    # -- classes and functions -----------------------------------------------------------------------

    def visit_decorators(self, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for decorator in node.decorator_list:
            self.decorators[id(decorator)] = node
            self.visit(decorator)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.visit_decorators(node)
        bases = [self.receiver_text(base) for base in node.bases]
        summary = ClassSummary(node.name, bases, self.source.name_span(node), "", False)
        self.summary.classes.append(summary)
        self.bind_class_attributes(node, summary)
        self.classes.append(summary)
        self.visit_block(node.body)
        self.classes.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.visit_decorators(node)
        qualname, cls = self.qualname_for(node.name)
        if cls:
            self.classes[-1].methods.append(node.name)
        is_async = isinstance(node, ast.AsyncFunctionDef)
        function = FunctionSummary(node.name, qualname, cls, is_async, self.source.name_span(node))
        function.end_line = node.end_lineno or node.lineno
        function.abstract = abstract_kind(node) if cls else ""
        self.summary.functions.append(function)
        self.bind_parameters(node, function)
        arguments = node.args
        for default in (*arguments.defaults, *arguments.kw_defaults):
            if default is not None:
                self.visit(default)
        frame = self.frame
        self.frames.append(Frame(function, frame.reader.copy(), frame.sglang_reader.copy(), arguments=node.args))
        self.visit_block(node.body)
        self.frames.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def qualname_for(self, name: str) -> tuple[str, str]:
        """The qualified name of a function `name` defined in the scope open now, and its class ("" if none)."""
        outer = self.frame.function
        in_class = bool(self.classes) and (outer.qualname == "<module>" or outer.cls != self.classes[-1].name)
        if in_class:
            cls = self.classes[-1].name
            return f"{cls}.{name}", cls
        if outer.qualname != "<module>":
            return f"{outer.qualname}.<locals>.{name}", ""
        return name, ""

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        self.headers.append(node)
        for item in node.items:
            self._note_lock(item.context_expr, node.body)
            self.visit(item)
        self.headers.pop()
        self.visit_block(node.body)

    visit_AsyncWith = visit_With

    def _note_lock(self, held: ast.expr, body: list[ast.stmt]) -> None:
        name = last_name(held)
        if names_a_lock(name):
            first, last = self.source.span(body[0]), self.source.span(body[-1])
            self.frame.function.locks.append((name, Span(first.line, first.col, last.end_line, last.end_col)))


def abstract_kind(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """How a method leaves itself to subclasses (FunctionSummary.abstract)."""
    for decorator in node.decorator_list:
        name = decorator.attr if isinstance(decorator, ast.Attribute) else getattr(decorator, "id", "")
        if name == "abstractmethod":
            return "abstractmethod"
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    if len(body) == 1 and isinstance(body[0], ast.Raise) and body[0].exc is not None:
        raised = body[0].exc.func if isinstance(body[0].exc, ast.Call) else body[0].exc
        if isinstance(raised, ast.Name) and raised.id == "NotImplementedError":
            return "raise"
    return ""
