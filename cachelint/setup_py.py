"""The requirements a setup.py passes to `setup()`, read without running it.

Module-scope names bound to literals are followed statement by statement, with Python's own values
(so `a = b` then `a += [...]` changes `b` too, as it would at run time): strings (f-strings and `+`
of known parts included), lists, tuples, dicts, `dict(...)`, concatenations, `+=`, `|`, item
assignment (`extras["vllm"] = [...]`) and `append` / `extend` / `insert` / `update` calls. A name
bound inside a compound statement (`if`, `try`, `for`, ...) may or may not be bound at run time, so it
becomes unknown; a mutation there is applied (it adds what some run adds). Anything else, a function
call or an imported name, is unknown: the caller reports it as not read. The evaluation is bounded
(`a = a + a` repeated doubles a value each line): a value larger than `MAX_SIZE` is unknown, and past
`MAX_WORK` items and characters made in all, or expressions nested too deep, nothing is read.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

# The value of an expression that cannot be known without running the file.
UNKNOWN: Any = type("Unknown", (), {"__repr__": lambda self: "<unknown>"})()

_MUTATORS = ("append", "extend", "insert", "update")

MAX_SIZE = 100_000  # items of a list or dict, characters of a string
MAX_WORK = 10_000_000  # items and characters the evaluation of one file makes


class _TooMuchWork(Exception):
    pass


@dataclass
class SetupRequirements:
    install_requires: list[str] = field(default_factory=list)
    extras_require: dict[str, list[str]] = field(default_factory=dict)
    unread: list[str] = field(default_factory=list)  # what could not be read, e.g. "`install_requires`"


def read_setup_requirements(source: bytes) -> SetupRequirements | None:
    """The requirements of the `setup(...)` calls in `source`; None when it does not parse or calls
    no `setup`."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and _is_setup(node.func)]
    if not calls:
        return None
    module = StaticModule()
    found = SetupRequirements()
    try:
        module.run(tree.body)
        for call in calls:
            arguments: dict[str, Any] = {}
            for keyword in call.keywords:
                value = module.evaluate(keyword.value)
                if keyword.arg is not None:
                    arguments[keyword.arg] = value
                elif isinstance(value, dict):
                    arguments.update(value)
                else:
                    found.unread.append("`setup(**...)`")
            _take(found, arguments)
    except (_TooMuchWork, RecursionError, MemoryError):
        return SetupRequirements(unread=["its requirements (too large or too deeply nested to evaluate)"])
    if module.oversized:
        found.unread.append(f"values of more than {MAX_SIZE:,} items or characters")
    return found


def _is_setup(func: ast.expr) -> bool:
    return (isinstance(func, ast.Name) and func.id == "setup") or (
        isinstance(func, ast.Attribute) and func.attr == "setup"
    )


def _take(found: SetupRequirements, arguments: dict[str, Any]) -> None:
    if "install_requires" in arguments:
        found.install_requires += _requirement_list(arguments["install_requires"], "`install_requires`", found)
    extras = arguments.get("extras_require")
    if extras is None:
        return
    if not isinstance(extras, dict):
        found.unread.append("`extras_require`")
        return
    for name, value in extras.items():
        found.extras_require.setdefault(str(name), []).extend(
            _requirement_list(value, f"`extras_require[{name!r}]`", found)
        )


def _requirement_list(value: Any, what: str, found: SetupRequirements) -> list[str]:
    """setuptools takes a list of strings or one string of lines."""
    if isinstance(value, str):
        return [line.strip() for line in value.splitlines() if line.strip()]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return list(value)
    found.unread.append(what)
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


class StaticModule:
    """The names of a module's top level that are bound to values known without running it."""

    def __init__(self) -> None:
        self.names: dict[str, Any] = {}
        self.work = 0  # items and characters made so far
        self.oversized = False  # a value was too large to make: it is unknown

    def _made(self, value: Any) -> Any:
        """`value`, newly made, counted against MAX_WORK."""
        self.work += _size(value)
        if self.work > MAX_WORK:
            raise _TooMuchWork
        return value

    def _fits(self, *parts: Any) -> bool:
        """Whether a value made of `parts` is at most MAX_SIZE large (else it is not made)."""
        if sum(_size(part) for part in parts) <= MAX_SIZE:
            return True
        self.oversized = True
        return False

    def _combine(self, left: Any, op: ast.operator, right: Any, in_place: bool) -> Any:
        if not self._fits(left, right):
            return UNKNOWN
        return self._made(_combined(left, op, right, in_place))

    def run(self, body: list[ast.stmt], conditional: bool = False) -> None:
        for statement in body:
            self._statement(statement, conditional)

    def _statement(self, statement: ast.stmt, conditional: bool) -> None:
        if isinstance(statement, ast.Assign):
            value = self.evaluate(statement.value)
            for target in statement.targets:
                self._assign(target, value, conditional)
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            self._assign(statement.target, self.evaluate(statement.value), conditional)
        elif isinstance(statement, ast.AugAssign):
            self._augment(statement)
        elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            self._mutate(statement.value)
        elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.names[statement.name] = UNKNOWN
        elif isinstance(statement, (ast.Import, ast.ImportFrom)):
            for alias in statement.names:
                self.names[(alias.asname or alias.name).split(".")[0]] = UNKNOWN
        else:
            for name in ("body", "orelse", "finalbody"):
                self.run(getattr(statement, name, []), conditional=True)
            for handler in getattr(statement, "handlers", []):
                self.run(handler.body, conditional=True)
            for case in getattr(statement, "cases", []):
                self.run(case.body, conditional=True)
            if isinstance(statement, (ast.For, ast.AsyncFor)):
                self._assign(statement.target, UNKNOWN, True)
            for item in getattr(statement, "items", []):  # with ... as name
                if item.optional_vars is not None:
                    self._assign(item.optional_vars, UNKNOWN, True)

    def _assign(self, target: ast.expr, value: Any, conditional: bool) -> None:
        if isinstance(target, ast.Name):
            self.names[target.id] = UNKNOWN if conditional else value
        elif isinstance(target, ast.Subscript):
            container = self.evaluate(target.value)
            key = self.evaluate(target.slice)
            if isinstance(container, dict) and isinstance(key, str):
                container[key] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._assign(element.value if isinstance(element, ast.Starred) else element, UNKNOWN, conditional)

    def _augment(self, statement: ast.AugAssign) -> None:
        value = self.evaluate(statement.value)
        target = statement.target
        if isinstance(target, ast.Name):
            current = self.names.get(target.id, UNKNOWN)
            self.names[target.id] = self._combine(current, statement.op, value, in_place=True)
        elif isinstance(target, ast.Subscript):
            container = self.evaluate(target.value)
            key = self.evaluate(target.slice)
            if isinstance(container, dict) and isinstance(key, str):
                container[key] = self._combine(container.get(key, UNKNOWN), statement.op, value, in_place=True)

    def _mutate(self, call: ast.Call) -> None:
        func = call.func
        if not isinstance(func, ast.Attribute) or func.attr not in _MUTATORS or call.keywords:
            return
        receiver = self.evaluate(func.value)
        arguments = [self.evaluate(argument) for argument in call.args]
        if not self._fits(receiver, *arguments):
            return
        for argument in arguments:
            self._made(argument)
        if isinstance(receiver, dict) and func.attr == "update" and arguments and isinstance(arguments[0], dict):
            receiver.update(arguments[0])
        elif isinstance(receiver, list):
            if func.attr == "append" and len(arguments) == 1:
                receiver.append(arguments[0])
            elif func.attr == "extend" and len(arguments) == 1:
                receiver.extend(arguments[0] if isinstance(arguments[0], list) else [UNKNOWN])
            elif func.attr == "insert" and len(arguments) == 2:
                receiver.append(arguments[1])  # where does not matter for requirements
        elif (
            isinstance(receiver, dict)
            and func.attr == "update"
            and len(arguments) == 1
            and isinstance(arguments[0], dict)
        ):
            receiver.update(arguments[0])

    def evaluate(self, node: ast.expr) -> Any:
        """The value of `node`, or UNKNOWN. Sequences are lists; their unknown items are UNKNOWN."""
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.names.get(node.id, UNKNOWN)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items: list[Any] = []
            for element in node.elts:
                if isinstance(element, ast.Starred):
                    inner = self.evaluate(element.value)
                    if not self._fits(items, inner):
                        return UNKNOWN
                    items.extend(inner if isinstance(inner, list) else [UNKNOWN])
                else:
                    items.append(self.evaluate(element))
            return self._made(items)
        if isinstance(node, ast.Dict):
            return self._dict(node)
        if isinstance(node, ast.JoinedStr):
            return self._f_string(node)
        if isinstance(node, ast.BinOp):
            return self._combine(self.evaluate(node.left), node.op, self.evaluate(node.right), in_place=False)
        if isinstance(node, ast.Subscript):
            container = self.evaluate(node.value)
            key = self.evaluate(node.slice)
            if isinstance(container, dict) and isinstance(key, str):
                return container.get(key, UNKNOWN)
            return UNKNOWN
        if isinstance(node, ast.Call):
            return self._call(node)
        return UNKNOWN

    def _dict(self, node: ast.Dict) -> Any:
        result: dict[str, Any] = {}
        for key_node, value_node in zip(node.keys, node.values, strict=True):
            value = self.evaluate(value_node)
            if key_node is None:  # {**other}
                if not isinstance(value, dict) or not self._fits(result, value):
                    return UNKNOWN
                result.update(self._made(value))
                continue
            key = self.evaluate(key_node)
            if isinstance(key, str):
                result[key] = value
        return result

    def _f_string(self, node: ast.JoinedStr) -> Any:
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                parts.append(value.value)
                continue
            if not isinstance(value, ast.FormattedValue) or value.conversion != -1 or value.format_spec:
                return UNKNOWN
            inner = self.evaluate(value.value)
            if not isinstance(inner, (str, int, float)) or isinstance(inner, bool):
                return UNKNOWN
            parts.append(str(inner))
        if not self._fits(*parts):
            return UNKNOWN
        return self._made("".join(parts))

    def _call(self, node: ast.Call) -> Any:
        func = node.func
        arguments = [self.evaluate(argument) for argument in node.args]
        if isinstance(func, ast.Name) and func.id in ("list", "tuple") and len(arguments) == 1 and not node.keywords:
            return self._made(list(arguments[0])) if isinstance(arguments[0], list) else UNKNOWN
        if isinstance(func, ast.Name) and func.id == "dict" and len(arguments) <= 1:
            result: dict[str, Any] = {}
            if arguments:
                if not isinstance(arguments[0], dict):
                    return UNKNOWN
                result.update(self._made(arguments[0]))
            for keyword in node.keywords:
                value = self.evaluate(keyword.value)
                if keyword.arg is not None:
                    result[keyword.arg] = value
                elif isinstance(value, dict) and self._fits(result, value):
                    result.update(self._made(value))
                else:
                    return UNKNOWN
            return result
        if isinstance(func, ast.Attribute) and func.attr == "copy" and not node.args and not node.keywords:
            receiver = self.evaluate(func.value)
            return self._made(receiver.copy()) if isinstance(receiver, (list, dict)) else UNKNOWN
        return UNKNOWN


def _combined(left: Any, op: ast.operator, right: Any, in_place: bool) -> Any:
    """`left op right` for the known cases (`+` of lists or strings, `|` of dicts), else UNKNOWN. With
    `in_place` (`+=`, `|=`) a list or dict is changed in place, as Python does."""
    if isinstance(op, ast.Add):
        if isinstance(left, list) and isinstance(right, list):
            if in_place:
                left.extend(right)
                return left
            return left + right
        if isinstance(left, str) and isinstance(right, str):
            return left + right
    if isinstance(op, ast.BitOr) and isinstance(left, dict) and isinstance(right, dict):
        if in_place:
            left.update(right)
            return left
        return {**left, **right}
    return UNKNOWN


def _size(value: Any) -> int:
    return len(value) if isinstance(value, (str, list, dict)) else 1
