"""Suppression comments with ruff's semantics: `# noqa[: CODES]`, `# cachelint: ignore[CODES]` on a line,
`# cachelint: file-ignore[CODES]` on a line of its own, and `--add-noqa` edits. The unused ones (CL100)
are reported by `cachelint.rules.cl100_unused_suppression`."""

from __future__ import annotations

import functools
import io
import re
import tokenize
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from cachelint.edits import source_lines
from cachelint.finding import Edit, Finding, Span

# CL100's code and name, which the engine, the server and --add-noqa need without the rule's module.
UNUSED_SUPPRESSION_CODE = "CL100"
UNUSED_SUPPRESSION_NAME = "unused-suppression"

NOQA = "noqa"
IGNORE = "cachelint: ignore"
FILE_IGNORE = "cachelint: file-ignore"

_NOQA = re.compile(
    r"#\s*noqa(?![\w-])(?::[ \t]*(?P<codes>[A-Z]+[0-9]+(?:(?:[ \t]*,[ \t]*|[ \t]+)[A-Z]+[0-9]+)*))?",
    re.IGNORECASE,
)
_CACHELINT = re.compile(
    r"#\s*cachelint:[ \t]*(?P<kind>file-ignore|ignore)(?![\w-])(?:\[(?P<codes>[^\]]*)\])?", re.IGNORECASE
)
_CODE_SEPARATOR = re.compile(r"[\s,]+")
# Every directive holds this; files without it (nearly all) are not tokenized.
_MAY_HOLD_DIRECTIVE = re.compile(r"#\s*(?:noqa|cachelint:)", re.IGNORECASE)
_STRING_START = frozenset({"FSTRING_START", "TSTRING_START"})
_STRING_END = frozenset({"FSTRING_END", "TSTRING_END"})
_NOT_STATEMENT = frozenset(
    {tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING, tokenize.ENDMARKER}
)


@dataclass(frozen=True)
class Directive:
    """One suppression directive inside a comment. Columns are 1-based, end columns exclusive."""

    kind: str  # one of NOQA, IGNORE, FILE_IGNORE
    codes: tuple[str, ...]  # empty: every code
    line: int
    col: int
    end_col: int
    codes_cols: tuple[int, int] | None  # where the code list is, to rewrite it
    comment: str
    comment_col: int
    code_end_col: int  # where the code before the comment ends; 1 when the comment is on a line of its own
    has_line_break: bool
    statement: tuple[int, int]  # first and last line of the statement the comment belongs to

    @property
    def comment_end_col(self) -> int:
        return self.comment_col + len(self.comment)

    def covers(self, code: str) -> bool:
        return not self.codes or code in self.codes

    def applies_to(self, finding: Finding) -> bool:
        if not self.covers(finding.code):
            return False
        if self.kind == FILE_IGNORE:
            return True
        span = finding.span
        first, last = self.statement
        return span.line <= self.line <= span.end_line or first <= span.line <= last


@dataclass(frozen=True)
class Suppressions:
    directives: tuple[Directive, ...] = ()

    def matching(self, finding: Finding) -> list[Directive]:
        return [directive for directive in self.directives if directive.applies_to(finding)]


class SuppressionUse(NamedTuple):
    """`directive` in the file `path` suppressed a finding of `code`."""

    path: str
    directive: Directive
    code: str


@dataclass(frozen=True)
class SourceLayout:
    """What tokenizing tells about where comments may go and which lines form one statement."""

    comments: tuple[tokenize.TokenInfo, ...]
    statements: Mapping[int, tuple[int, int]]  # line -> first and last line of its multi-line statement
    lines_ending_in_string: frozenset[int]


def parse_suppressions(text: str | bytes) -> Suppressions:
    """Every directive in real comments of `text`; none when it cannot be decoded or tokenized."""
    if isinstance(text, bytes):
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(text).readline)
            text = text.decode(encoding)
        except (SyntaxError, UnicodeDecodeError, LookupError):
            return Suppressions()
    if not _MAY_HOLD_DIRECTIVE.search(text):
        return Suppressions()
    layout = scan_layout(text)
    if layout is None:
        return Suppressions()
    lines = source_lines(text)
    directives: list[Directive] = []
    for comment in layout.comments:
        line_number, start = comment.start
        line = lines[line_number - 1]
        directives += comment_directives(
            comment.string,
            line_number,
            comment_col=start + 1,
            code_end_col=len(line[:start].rstrip()) + 1,
            has_line_break=line_number < len(lines) or text.endswith(("\n", "\r")),
            statement=layout.statements.get(line_number, (line_number, line_number)),
        )
    return Suppressions(tuple(directives))


def may_be_reported_unused(text: str) -> bool:
    """Whether `text` may hold a directive CL100 can report in a file without findings: cachelint's own,
    or a `noqa` naming a CL code. Strings are not told from comments here, so the answer may be yes for
    a file whose comments hold none (never the other way round)."""
    if _CACHELINT.search(text):
        return True
    return any(
        code.upper().startswith("CL")
        for match in _NOQA.finditer(text)
        for code in _CODE_SEPARATOR.split(match.group("codes") or "")
    )


def comment_directives(
    comment: str,
    line: int,
    comment_col: int,
    code_end_col: int,
    has_line_break: bool,
    statement: tuple[int, int],
) -> list[Directive]:
    directives = []
    matches = sorted([*_NOQA.finditer(comment), *_CACHELINT.finditer(comment)], key=lambda m: m.start())
    for match in matches:
        if match.re is _NOQA:
            kind = NOQA
        else:
            kind = FILE_IGNORE if match.group("kind").lower() == "file-ignore" else IGNORE
        if kind == FILE_IGNORE and code_end_col != 1:
            continue
        raw_codes = match.group("codes") or ""
        codes = tuple(code.upper() for code in _CODE_SEPARATOR.split(raw_codes) if code)
        codes_start, codes_end = match.span("codes")
        directives.append(
            Directive(
                kind=kind,
                codes=codes,
                line=line,
                col=comment_col + match.start(),
                end_col=comment_col + match.end(),
                codes_cols=(comment_col + codes_start, comment_col + codes_end) if codes_start >= 0 else None,
                comment=comment,
                comment_col=comment_col,
                code_end_col=code_end_col,
                has_line_break=has_line_break,
                statement=statement,
            )
        )
    return directives


def scan_layout(text: str) -> SourceLayout | None:
    """Comments, multi-line statements and lines ending inside a string; None if `text` does not tokenize."""
    comments: list[tokenize.TokenInfo] = []
    statements: dict[int, tuple[int, int]] = {}
    in_string: set[int] = set()
    open_strings: list[int] = []
    statement_start: int | None = None
    try:
        # Fed line by line as `source_lines` splits them, so line numbers agree with spans even for "\r".
        readline = functools.partial(next, iter([f"{line}\n" for line in source_lines(text)]), "")
        for token in tokenize.generate_tokens(readline):
            name = tokenize.tok_name[token.type]
            if token.type == tokenize.COMMENT:
                comments.append(token)
            elif token.type == tokenize.STRING:
                in_string.update(range(token.start[0], token.end[0]))
            elif name in _STRING_START:
                open_strings.append(token.start[0])
            elif name in _STRING_END and open_strings:
                in_string.update(range(open_strings.pop(), token.end[0]))
            if token.type == tokenize.NEWLINE and statement_start is not None:
                first, last = statement_start, token.start[0]
                if last > first:
                    statements.update(dict.fromkeys(range(first, last + 1), (first, last)))
                statement_start = None
            elif token.type not in _NOT_STATEMENT and statement_start is None:
                statement_start = token.start[0]
    except (tokenize.TokenError, SyntaxError):
        return None
    return SourceLayout(tuple(comments), statements, frozenset(in_string))


def apply(
    findings: Iterable[Finding], suppressions_by_path: Mapping[str, Suppressions]
) -> tuple[list[Finding], set[SuppressionUse]]:
    """The findings no directive suppresses, and which directives suppressed which codes.

    invalid-syntax and internal-error findings are never suppressed."""
    kept: list[Finding] = []
    used: set[SuppressionUse] = set()
    for finding in findings:
        suppressions = suppressions_by_path.get(finding.path)
        matching = suppressions.matching(finding) if suppressions and finding.is_rule else []
        used.update(SuppressionUse(finding.path, directive, finding.code) for directive in matching)
        if not matching:
            kept.append(finding)
    return kept, used


def add_noqa_edits(text: str, findings: Iterable[Finding]) -> tuple[list[Edit], int]:
    """Edits adding `  # noqa: CODES` to each finding's start line (merged into an existing `# noqa: ...`),
    and how many findings were skipped because their line ends inside a string or continues with `\\`."""
    by_line: defaultdict[int, list[Finding]] = defaultdict(list)
    for finding in findings:
        if finding.is_rule:
            by_line[finding.span.line].append(finding)
    layout = scan_layout(text)
    if layout is None:
        return [], sum(map(len, by_line.values()))
    lines = source_lines(text)
    noqa_by_line = {d.line: d for d in reversed(parse_suppressions(text).directives) if d.kind == NOQA}
    commented_lines = {comment.start[0] for comment in layout.comments}
    edits: list[Edit] = []
    skipped = 0
    for number, group in sorted(by_line.items()):
        path = group[0].path
        codes = sorted({finding.code for finding in group})
        line = lines[number - 1] if number <= len(lines) else None
        continued = line is not None and line.endswith("\\") and number not in commented_lines
        if line is None or continued or number in layout.lines_ending_in_string:
            skipped += len(group)
            continue
        existing = noqa_by_line.get(number)
        if existing is None:
            content_end = len(line.rstrip()) + 1
            span = Span(number, content_end, number, len(line) + 1)
            edits.append(Edit(path, span, f"  # noqa: {', '.join(codes)}"))
        elif existing.codes and existing.codes_cols and not set(codes) <= set(existing.codes):
            first, last = existing.codes_cols
            merged = ", ".join(sorted({*existing.codes, *codes}))
            edits.append(Edit(path, Span(number, first, number, last), merged))
    return edits, skipped
