"""What a fix changes: the `Change` records a rule decides on, located by the spans the summary
recorded; `cachelint.codemod` makes them on the file's libcst tree. They live apart from the finding
types because a run whose files hold no finding with a fix never needs them, and making these
dataclasses costs a few milliseconds of every run's start."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from cachelint.finding import Span


@dataclass(frozen=True)
class NewStatement:
    """A simple statement a fix adds; with a `guard`, it runs under `if <guard>:`."""

    code: str
    guard: str = ""


@dataclass(frozen=True)
class Change:
    """What a fix changes in the file at `path`, located by the positions the summary recorded; the
    changes are made on the file's libcst tree (`cachelint.codemod`)."""

    path: str

    @property
    def spans(self) -> list[Span]:
        """Every position the change names, `where` first."""
        return [
            value
            for value in (getattr(self, item.name) for item in dataclasses.fields(self))
            if isinstance(value, Span)
        ]

    @property
    def where(self) -> Span:
        """The statement the change adds code after or removes, or the code it changes."""
        return self.spans[0]

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": type(self).__name__}
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            if isinstance(value, Span):
                value = value.to_json()
            elif item.name == "statements":
                value = [[statement.code, statement.guard] for statement in value]
            data[item.name] = value
        return data

    @staticmethod
    def from_json(data: dict[str, Any]) -> Change:
        kind = CHANGE_KINDS[data["kind"]]
        values: dict[str, Any] = {}
        for item in dataclasses.fields(kind):
            value = data[item.name]
            if item.type == "Span":
                value = Span.from_json(value)
            elif item.name == "statements":
                value = tuple(NewStatement(code, guard) for code, guard in value)
            values[item.name] = value
        return kind(**values)


@dataclass(frozen=True)
class InsertAfter(Change):
    """Run `statements` right after the statement at `statement`: a simple statement, or a `with`
    statement whose header holds the call (they then open its body)."""

    statement: Span
    statements: tuple[NewStatement, ...]


@dataclass(frozen=True)
class InsertBefore(Change):
    """Run `statements` right before the simple statement (or `if` statement) at `statement`."""

    statement: Span
    statements: tuple[NewStatement, ...]


@dataclass(frozen=True)
class RemoveStatement(Change):
    """Remove the simple statement at `statement` (the last one of a block leaves `pass`)."""

    statement: Span


@dataclass(frozen=True)
class ReplaceExpression(Change):
    span: Span
    code: str


@dataclass(frozen=True)
class AwaitCall(Change):
    """Await the call at `span`."""

    span: Span


@dataclass(frozen=True)
class AddKeyword(Change):
    """Pass `keyword=value` to the call at `call`."""

    call: Span
    keyword: str
    value: str


@dataclass(frozen=True)
class ReplaceKeyword(Change):
    """The keyword argument at `span` becomes `keyword=value`."""

    span: Span
    keyword: str
    value: str


@dataclass(frozen=True)
class UnwrapIf(Change):
    """The `if` statement at `statement` becomes its body; an `else` branch goes with the test."""

    statement: Span


@dataclass(frozen=True)
class ReplaceComment(Change):
    """The comment that starts at `span` becomes `text`; an empty text removes it, and its line when
    the comment has the line to itself."""

    span: Span
    text: str


CHANGE_KINDS: dict[str, type[Change]] = {
    kind.__name__: kind
    for kind in (
        InsertAfter,
        InsertBefore,
        RemoveStatement,
        ReplaceExpression,
        AwaitCall,
        AddKeyword,
        ReplaceKeyword,
        UnwrapIf,
        ReplaceComment,
    )
}
