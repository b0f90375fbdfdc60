"""The statement changes fixes share: code after a recorded anchor, a statement removed, a guarded call."""

from __future__ import annotations

from typing import TypeGuard

from cachelint.changes import InsertAfter, NewStatement, RemoveStatement
from cachelint.summary import Anchor


def insertable_after(anchor: Anchor | None) -> TypeGuard[Anchor]:
    """Whether statements added after the anchor's statement run right after it: it does not leave the
    block (`return engine.pause_generation()`)."""
    return anchor is not None and not anchor.leaves_block


def insert_after(path: str, anchor: Anchor, statements: list[NewStatement]) -> InsertAfter:
    """`statements` right after the anchor's statement (for a call in a `with` header: first in its body)."""
    return InsertAfter(path, anchor.statement_span, tuple(statements))


def remove_statement(path: str, anchor: Anchor) -> RemoveStatement:
    return RemoveStatement(path, anchor.statement_span)


def guarded(receiver: str, method: str, call: str) -> NewStatement:
    """`call` behind `if hasattr(receiver, "method"):`."""
    return NewStatement(call, f'hasattr({receiver}, "{method}")')
