"""The result types every stage shares: source spans, text edits, the changes fixes make, fixes and
findings. All are frozen dataclasses (the public API returns them)."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, order=True)
class Span:
    """A source range. Lines and columns are 1-based; the end column is exclusive."""

    line: int
    col: int
    end_line: int
    end_col: int

    def to_json(self) -> list[int]:
        return [self.line, self.col, self.end_line, self.end_col]

    def contains(self, other: Span) -> bool:
        return (self.line, self.col) <= (other.line, other.col) and (other.end_line, other.end_col) <= (
            self.end_line,
            self.end_col,
        )

    @classmethod
    def from_json(cls, data: list[int]) -> Span:
        return cls(*data)


class Applicability(str, enum.Enum):
    SAFE = "safe"
    UNSAFE = "unsafe"
    DISPLAY = "display"


@dataclass(frozen=True)
class Edit:
    """Replace the text in `span` of `path` with `content` (an empty span inserts)."""

    path: str
    span: Span
    content: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "span": self.span.to_json(), "content": self.content}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Edit:
        return cls(data["path"], Span.from_json(data["span"]), data["content"])


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


@dataclass(frozen=True)
class Fix:
    """A fix: the `changes` a rule decided on, and the text `edits` they make, derived from the
    rewritten files (`cachelint.codemod.with_edits`; empty until then). A display-only fix has none."""

    message: str
    applicability: Applicability
    edits: tuple[Edit, ...] = ()
    changes: tuple[Change, ...] = ()

    @property
    def paths(self) -> list[str]:
        """The files the fix changes, in the order its changes name them."""
        return list(dict.fromkeys(change.path for change in self.changes))

    def to_json(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "applicability": self.applicability.value,
            "edits": [edit.to_json() for edit in self.edits],
            "changes": [change.to_json() for change in self.changes],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Fix:
        return cls(
            data["message"],
            Applicability(data["applicability"]),
            tuple(Edit.from_json(edit) for edit in data["edits"]),
            tuple(Change.from_json(change) for change in data.get("changes", ())),
        )


@dataclass(frozen=True)
class ChainStep:
    """One place on the way to a finding (for CL003, a function on the weight-update path)."""

    path: str
    span: Span
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "span": self.span.to_json(), "message": self.message}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ChainStep:
        return cls(data["path"], Span.from_json(data["span"]), data["message"])


INVALID_SYNTAX = "invalid-syntax"
INTERNAL_ERROR = "internal-error"
IO_ERROR = "io-error"


@dataclass(frozen=True)
class Finding:
    """One diagnostic. `code` is a rule code (CL001) or invalid-syntax / internal-error."""

    path: str
    span: Span
    code: str
    name: str
    message: str
    help: str = ""
    fix: Fix | None = None
    function: str = ""
    notes: tuple[str, ...] = field(default=())
    chain: tuple[ChainStep, ...] = ()  # the places, in order, that lead to the finding's location

    @property
    def is_rule(self) -> bool:
        return self.code.startswith("CL")

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.span.line, self.span.col, self.code)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "span": self.span.to_json(),
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "help": self.help,
            "fix": self.fix.to_json() if self.fix else None,
            "function": self.function,
            "notes": list(self.notes),
            "chain": [step.to_json() for step in self.chain],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        return cls(
            path=data["path"],
            span=Span.from_json(data["span"]),
            code=data["code"],
            name=data["name"],
            message=data["message"],
            help=data["help"],
            fix=Fix.from_json(data["fix"]) if data["fix"] else None,
            function=data["function"],
            notes=tuple(data["notes"]),
            chain=tuple(ChainStep.from_json(step) for step in data["chain"]),
        )
