"""Small readings of `ast` nodes that several parts of the walk share."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from cachelint.version_tests import dotted_name, string_value

# A name that says it holds a lock: `lock`, `_lock`, `vllm_lock`, `engine_lock_`, `engineLock`; not
# `block`, `clock` or `locks`.
_LOCK_NAME = re.compile(r"(?:^|_)lock(?:$|_)|[a-z0-9]Lock$")


def names_a_lock(name: str) -> bool:
    return _LOCK_NAME.search(name) is not None


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


def last_name(node: ast.expr) -> str:
    """The last part of a dotted name (`c` for `a.b.c`); "" when `node` is not one. As `dotted_name`
    reads it, without building the name: every call of a file asks."""
    base = node
    while isinstance(base, ast.Attribute):
        base = base.value
    if not isinstance(base, ast.Name):
        return ""
    return node.attr if isinstance(node, ast.Attribute) else base.id


def getattr_target(node: ast.expr) -> tuple[ast.expr, str] | None:
    """`getattr(obj, "name", default)` -> (obj, "name")."""
    if isinstance(node, ast.Call) and dotted_name(node.func) == "getattr" and len(node.args) >= 2:
        name = string_value(node.args[1])
        if name is not None:
            return node.args[0], name
    return None


def is_true(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def is_zero(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
        and node.value == 0
    )


def unawaited(node: ast.expr) -> ast.expr:
    return node.value if isinstance(node, ast.Await) else node


def rpc_name(node: ast.Call) -> str | None:
    """The method name given to `collective_rpc`-style dispatch."""
    for keyword in node.keywords:
        if keyword.arg == "method":
            return string_value(keyword.value)
    for arg in node.args:
        text = string_value(arg)
        if text is not None:
            return text
    return None


def string_parts(node: ast.expr) -> Iterator[str]:
    """The literal parts of a string, an f-string or a `+` of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.JoinedStr):
        for value in node.values:
            yield from string_parts(value)
    elif isinstance(node, ast.BinOp):
        yield from string_parts(node.left)
        yield from string_parts(node.right)
