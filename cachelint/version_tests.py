"""Recognizing tests of the installed vLLM version (or SGLang's: `VersionTestReader("sglang")`), in every
spelling real frameworks use."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

# Which way a version test lets code run, after normalizing to `installed <op> threshold`.
NEWER = "newer"  # runs on the threshold and later releases (>=, >)
OLDER = "older"  # runs on earlier releases (<, <=)
EQUAL = "equal"
OTHER = "other"

_FLIP = {">=": "<=", ">": "<", "<=": ">=", "<": ">", "==": "==", "!=": "!="}
_OPERATORS: dict[type[ast.cmpop], str] = {
    ast.GtE: ">=",
    ast.Gt: ">",
    ast.LtE: "<=",
    ast.Lt: "<",
    ast.Eq: "==",
    ast.NotEq: "!=",
}

_VERSION_CONSTRUCTORS = ("parse", "Version", "LooseVersion", "StrictVersion")
_HELPER = re.compile(r"(?:^|_)(?:version_)?(ge|gt|le|lt|at_least|atleast|older_than|newer_than)$")
_HELPER_DIRECTION = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<", "at_least": ">=", "atleast": ">="}
_HELPER_DIRECTION |= {"older_than": "<", "newer_than": ">"}


@dataclass(frozen=True)
class VersionTest:
    """A comparison of the installed vLLM version with a literal release."""

    operator: str  # normalized so that the installed version is on the left
    threshold: Version
    raw_string: bool  # compares version strings lexicographically

    @property
    def runs_when(self) -> str:
        if self.operator in (">=", ">"):
            return NEWER
        if self.operator in ("<", "<="):
            return OLDER
        return EQUAL if self.operator == "==" else OTHER

    def negated(self) -> VersionTest:
        opposite = {">=": "<", ">": "<=", "<": ">=", "<=": ">", "==": "!=", "!=": "=="}[self.operator]
        return VersionTest(opposite, self.threshold, self.raw_string)

    def describe(self) -> str:
        return f"vLLM {self.operator} {self.threshold}"


def dotted_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def string_value(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _parse_version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _last(node: ast.expr) -> str:
    return (dotted_name(node) or "").rsplit(".", 1)[-1]


class VersionTestReader:
    """Knows the names bound to an engine's version in a module (vLLM's by default) and reads tests
    against it."""

    def __init__(self, extra_helpers: tuple[str, ...] = (), engine: str = "vllm") -> None:
        self.engine = engine
        self.version_names: set[str] = set()
        self.vllm_modules: set[str] = {engine}  # the names bound to the engine's package
        self.extra_helpers = set(extra_helpers)

    def copy(self) -> VersionTestReader:
        clone = VersionTestReader(engine=self.engine)
        clone.version_names = set(self.version_names)
        clone.vllm_modules = set(self.vllm_modules)
        clone.extra_helpers = self.extra_helpers
        return clone

    def note_import_from(self, module: str, name: str, alias: str) -> None:
        engine = self.engine
        if (module == engine or module.startswith(f"{engine}.")) and "version" in name.lower():
            self.version_names.add(alias)
        if module == engine and name == "version":
            self.vllm_modules.add(alias)

    def note_import(self, module: str, alias: str) -> None:
        if module == self.engine:
            self.vllm_modules.add(alias)

    def note_assignment(self, target: str, value: ast.expr) -> None:
        if self.is_version_value(value):
            self.version_names.add(target)
        else:
            self.version_names.discard(target)

    def is_version_value(self, node: ast.expr) -> bool:
        """Whether `node` evaluates to the installed vLLM version (string, Version or tuple)."""
        if isinstance(node, ast.Name):
            return node.id in self.version_names
        if isinstance(node, ast.Attribute):
            if node.attr in ("__version__", "__version_tuple__"):
                return dotted_name(node.value) in self.vllm_modules
            if node.attr in ("release", "base_version", "public", "major", "minor", "micro"):
                return self.is_version_value(node.value)
            return False
        if isinstance(node, ast.Subscript):
            return self.is_version_value(node.value)
        if isinstance(node, ast.Call):
            last = _last(node.func)
            args = node.args
            if last in ("parse", "Version", "LooseVersion", "StrictVersion", "str", "tuple") and args:
                return self.is_version_value(args[0])
            if last in ("version", "get_version", "get_package_version", "package_version", "_get_version"):
                return bool(args) and string_value(args[0]) == self.engine
        return False

    def literal_version(self, node: ast.expr) -> tuple[Version, bool] | None:
        """A literal release: "0.16.0", Version("0.16.0"), parse("0.16.0") or (0, 16). Bool: raw string."""
        text = string_value(node)
        if text is not None:
            parsed = _parse_version(text)
            return (parsed, True) if parsed else None
        if isinstance(node, ast.Call) and node.args and _last(node.func) in _VERSION_CONSTRUCTORS:
            inner = string_value(node.args[0])
            parsed = _parse_version(inner) if inner else None
            return (parsed, False) if parsed else None
        if isinstance(node, ast.Tuple) and node.elts:
            numbers = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, int)]
            if len(numbers) == len(node.elts):
                return Version(".".join(str(n) for n in numbers)), False
        return None

    def read(self, test: ast.expr) -> VersionTest | None:
        """The first comparison of the engine's version in `test` (through not/and/or)."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self.read(test.operand)
            return inner.negated() if inner else None
        if isinstance(test, ast.BoolOp):
            for value in test.values:
                found = self.read(value)
                if found:
                    return found
            return None
        if isinstance(test, ast.Compare):
            return self._comparison(test)
        if isinstance(test, ast.Call):
            return self._helper(test)
        return None

    def _comparison(self, node: ast.Compare) -> VersionTest | None:
        found = self.comparison(node)
        return found[0] if found else None

    def comparison(self, node: ast.Compare) -> tuple[VersionTest, ast.expr, ast.expr] | None:
        """The first comparison of the engine's version with a literal release in `node`, with its
        installed-version side and its literal side."""
        left = node.left
        for op, right in zip(node.ops, node.comparators, strict=False):
            operator = _OPERATORS.get(type(op))
            if operator is not None:
                found = self._pair(left, operator, right)
                if found:
                    return found
            left = right
        return None

    def _pair(self, left: ast.expr, operator: str, right: ast.expr) -> tuple[VersionTest, ast.expr, ast.expr] | None:
        if self.is_version_value(left):
            literal = self.literal_version(right)
            if literal:
                return VersionTest(operator, literal[0], literal[1] and self._is_raw_string(left)), left, right
        if self.is_version_value(right):
            literal = self.literal_version(left)
            if literal:
                return VersionTest(_FLIP[operator], literal[0], literal[1] and self._is_raw_string(right)), right, left
        return None

    def _is_raw_string(self, node: ast.expr) -> bool:
        """Whether the version side is a plain string (so `<` compares lexicographically)."""
        if isinstance(node, ast.Attribute):
            return node.attr in ("__version__", "base_version", "public")
        if isinstance(node, ast.Call):
            return _last(node.func) in (
                "version",
                "str",
                "get_version",
                "get_package_version",
                "package_version",
            )
        if isinstance(node, ast.Name):
            return node.id in self.version_names and "str" in node.id.lower()
        return False

    def _helper(self, node: ast.Call) -> VersionTest | None:
        name = _last(node.func)
        strings = [s for s in (string_value(arg) for arg in node.args) if s is not None]
        strings += [s for s in (string_value(k.value) for k in node.keywords) if s is not None]
        if name in self.extra_helpers:
            operator = ">="
        else:
            match = _HELPER.search(name)
            if not match or "version" not in name.lower():
                return None
            if self.engine not in name.lower() and self.engine not in strings:
                return None
            operator = _HELPER_DIRECTION[match.group(1)]
        for text in reversed(strings):
            parsed = _parse_version(text) if text != self.engine else None
            if parsed:
                return VersionTest(operator, parsed, False)
        return None
