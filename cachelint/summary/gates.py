"""Gates: the conditions around each point of the walk, read as vLLM version tests.

An `if`/`elif`/`else` or a ternary whose test compares the installed vLLM version gates what runs in
it; an `if <version test>: return` guard clause gates the statements after it in its block; a kwargs
dict filled under a version test (`kwargs["reset_running_requests"] = True`) gates the calls it is
splatted into.
"""

from __future__ import annotations

import ast

from cachelint.summary.bindings import Bindings
from cachelint.summary.model import PAUSE_METHODS, RESET_METHODS, Gate, VersionComparison
from cachelint.summary.nodes import last_name
from cachelint.version_tests import dotted_name, string_value


class Gates(Bindings):
    """Version gates: if tests, guard clauses and kwargs filled under a test; and every comparison of
    vLLM's or SGLang's version, wherever it is (FileSummary.version_comparisons)."""

    def visit_Compare(self, node: ast.Compare) -> None:
        for reader in (self.frame.reader, self.frame.sglang_reader):
            found = reader.comparison(node)
            if found is not None:
                test, installed, literal = found
                self.summary.version_comparisons.append(
                    VersionComparison(
                        engine=reader.engine,
                        operator=test.operator,
                        threshold=str(test.threshold),
                        raw_string=test.raw_string,
                        text=self.source.segment(node),
                        span=self.source.span(node),
                        installed=self.source.segment(installed),
                        literal=self.source.segment(literal),
                        installed_span=self.source.span(installed),
                        literal_span=self.source.span(literal),
                        single=len(node.ops) == 1,
                    )
                )
                break
        self.generic_visit(node)

    def visit_If(self, node: ast.If) -> None:
        probes_before = len(self.pending_probes)
        self.visit(node.test)
        self.note_probe_branches(node, probes_before)
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
        self.note_probe_branches(node, probes_before)
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
            if positive and is_hasattr(test_node):
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
                    else_resets=isinstance(owner, ast.If) and positive and calls_reset(owner.orelse),
                    pure=isinstance(test_node, (ast.Compare, ast.Call)),
                )
            )
        for block in self.frame.guards:
            gates.extend(block)
        return gates, hasattr_guarded

    def kwargs_gate(self, name: str) -> Gate | None:
        for frame in reversed(self.frames):
            if name in frame.kwargs_gates:
                return frame.kwargs_gates[name]
        return None

    def note_kwargs_gate(self, name: str, target: ast.Subscript) -> None:
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

    def bind(self, target: ast.expr, value: ast.expr) -> None:
        super().bind(target, value)
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            self.note_kwargs_gate(target.value.id, target)


def is_hasattr(node: ast.expr) -> bool:
    if isinstance(node, ast.BoolOp):
        return any(is_hasattr(value) for value in node.values)
    return isinstance(node, ast.Call) and dotted_name(node.func) in ("hasattr", "callable")


def calls_reset(statements: list[ast.stmt]) -> bool:
    for statement in statements:
        for node in ast.walk(statement):
            if isinstance(node, ast.Call):
                name = last_name(node.func)
                if name in RESET_METHODS or name in PAUSE_METHODS or "cache" in name:
                    return True
    return False
