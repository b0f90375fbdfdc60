"""The result types every stage shares: source spans, text edits, fixes and findings (the changes a
fix makes are in `cachelint.changes`). All are frozen dataclasses (the public API returns them)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cachelint.changes import Change


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
        from cachelint.changes import Change

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
