"""Compatibility code and configuration: capability probes (`hasattr`, `getattr` with a default),
what makes a point look like compatibility code (signature probes, tested strings, try/except), the
engine arguments named in code, and where the multimodal processor cache is turned off.
"""

from __future__ import annotations

import ast

from cachelint.facts import load_facts
from cachelint.summary.gates import Gates
from cachelint.summary.model import ArgumentUse, HasattrProbe, Workaround
from cachelint.summary.nodes import DISPATCH_HELPERS, RPC_METHODS, is_true, is_zero, last_name, rpc_name
from cachelint.version_tests import dotted_name, string_value

# Capability probes: a test of these means the code asks what the installed vLLM offers.
PROBE_CALLS = frozenset({"signature", "getfullargspec", "getargspec", "fields", "hasattr", "getattr"})
PROBE_ATTRIBUTES = frozenset({"parameters", "__dataclass_fields__", "model_fields", "__signature__"})
PROCESSOR_CACHE_SIZE = "mm_processor_cache_gb"
LEGACY_PROCESSOR_CACHE_SWITCH = "disable_mm_preprocessor_cache"


class Compat(Gates):
    """Probes, compatibility markers, engine arguments and processor-cache workarounds."""

    def visit_Try(self, node: ast.Try) -> None:
        """Calls in a `try` body (or its handlers) may be compatibility code: remember what is caught."""
        caught = [handler_names(handler) for handler in node.handlers]
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
                    name = last_name(child.func)
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

    def note_probe(self, node: ast.Call, kind: str) -> None:
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
        self.note_receiver(probe)

    def note_probe_branches(self, node: ast.If | ast.IfExp, start: int) -> None:
        """For the probes in this test: which way the test goes and what runs when the probe is false."""
        for probe, call in self.pending_probes[start:]:
            direction = polarity(node.test, call)
            probe.statement_span = self.source.span(node)
            probe.polarity = direction or "unclear"
            if not direction:
                continue
            if isinstance(node, ast.If):
                taken: list[ast.AST] = list(node.orelse if direction == "positive" else node.body)
            else:
                taken = [node.orelse if direction == "positive" else node.body]
            probe.fallback_calls = sorted(called_names(taken))

    def argument_use(
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

    def note_keywords(self, node: ast.Call) -> None:
        names = [keyword.arg for keyword in node.keywords if keyword.arg]
        for keyword in node.keywords:
            if keyword.arg in engine_argument_names():
                siblings = [name for name in names if name != keyword.arg]
                self.argument_use(keyword.arg, "keyword", last_name(node.func), keyword, keyword.value, siblings)
            if keyword.arg == PROCESSOR_CACHE_SIZE and is_zero(keyword.value):
                self.workaround("keyword")
            elif keyword.arg == LEGACY_PROCESSOR_CACHE_SWITCH and is_true(keyword.value):
                self.workaround("legacy")
            elif keyword.arg == "worker_extension_cls":
                text = string_value(keyword.value) or dotted_name(keyword.value)
                if text:
                    self.summary.worker_extension_refs.append(text.rsplit(".", 1)[-1])

    def workaround(self, kind: str) -> None:
        function = self.frame.function
        self.summary.workarounds.append(Workaround(function.qualname, function.cls, self.statement_span(), kind))

    def visit_Dict(self, node: ast.Dict) -> None:
        keys = [string_value(key) for key in node.keys if key is not None]
        for key, value in zip(node.keys, node.values, strict=False):
            if key is None:
                continue
            name = string_value(key)
            if name in engine_argument_names():
                siblings = [k for k in keys if k and k != name]
                self.argument_use(name, "dict", "", key, value, siblings)
            if name == PROCESSOR_CACHE_SIZE and is_zero(value):
                self.workaround("dict")
            elif name == LEGACY_PROCESSOR_CACHE_SWITCH and is_true(value):
                self.workaround("legacy")
        self.generic_visit(node)

    def bind(self, target: ast.expr, value: ast.expr) -> None:
        super().bind(target, value)
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            key = string_value(target.slice)
            if key in engine_argument_names():
                self.argument_use(key, "subscript", "", target.slice, value, [])
            if key == PROCESSOR_CACHE_SIZE and is_zero(value):
                self.workaround("subscript")


def is_processor_cache_setdefault(name: str, node: ast.Call) -> bool:
    """`kwargs.setdefault("mm_processor_cache_gb", 0)`."""
    if name != "setdefault" or len(node.args) < 2:
        return False
    return string_value(node.args[0]) == PROCESSOR_CACHE_SIZE and is_zero(node.args[1])


def engine_argument_names() -> frozenset[str]:
    return frozenset(load_facts().engine_arguments)


def handler_names(handler: ast.ExceptHandler) -> list[str]:
    """The exception names an except clause catches ("*" for a bare except)."""
    if handler.type is None:
        return ["*"]
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return [last_name(t) or "?" for t in types]


def polarity(test: ast.expr, target: ast.expr) -> str:
    """ "positive" when `test` is true only if `target` is truthy, "negative" when only if it is falsy,
    "" when it cannot be told (an `or`, a comparison with something else)."""
    if test is target:
        return "positive"
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = polarity(test.operand, target)
        return {"positive": "negative", "negative": "positive"}.get(inner, "")
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        for value in test.values:
            if any(child is target for child in ast.walk(value)):
                return polarity(value, target)
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


def called_names(nodes: list[ast.AST]) -> set[str]:
    """Every name called in `nodes`, and the method names given to collective_rpc-style dispatch."""
    names: set[str] = set()
    for root in nodes:
        for node in ast.walk(root):
            if isinstance(node, ast.Call):
                name = last_name(node.func)
                names.add(name)
                if name in RPC_METHODS or name in DISPATCH_HELPERS:
                    method = rpc_name(node)
                    if method:
                        names.add(method)
    return names
