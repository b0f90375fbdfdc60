"""The changes fixes record, made on a file's libcst tree.

Each change names its node by the span the summary recorded with `ast`; libcst's PositionProvider
gives the same spans for statements, expressions, arguments and comments (parentheses left out), so a
node is found by its span and kind. New statements are built with libcst in the module's own
indentation and line breaks; statements that share a line, a one-line body (`if x: llm.sleep(1)`) or a
`with` header are split over lines where code must go between them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

from cachelint.changes import (
    AddKeyword,
    AwaitCall,
    Change,
    InsertAfter,
    InsertBefore,
    NewStatement,
    RemoveStatement,
    ReplaceComment,
    ReplaceExpression,
    ReplaceKeyword,
    UnwrapIf,
)
from cachelint.codemod import regions
from cachelint.edits import apply_edits, diff_edits, line_starts, source_lines
from cachelint.finding import Edit, Fix, Span

NodeT = TypeVar("NodeT", bound=cst.CSTNode)
Key = tuple[int, int, int, int]
# Where an awaited call needs no parentheses: as a statement, an assigned or returned value, an argument
# or an element of a display.
_PLAIN_AWAIT_PARENTS = (
    cst.Expr,
    cst.Assign,
    cst.AnnAssign,
    cst.AugAssign,
    cst.Return,
    cst.Arg,
    cst.Element,
    cst.DictElement,
)


class RewriteError(Exception):
    """A change whose node is not where its span says (the file is not the one the change was made for)."""


class SourceTree:
    """One file's libcst tree with the positions of its nodes, rewritten by changes."""

    def __init__(self, module: cst.Module, positions: Mapping[cst.CSTNode, CodeRange]) -> None:
        self.module = module
        self.positions = positions
        self._code: str | None = None
        self.header = ""  # code above the file's, that the module starts with (see `regions`)
        self.start = 0  # where in the file's text the module's code (below its header) starts
        self._by_range: dict[Key, list[cst.CSTNode]] | None = None
        self._comments: dict[tuple[int, int], cst.Comment] = {}

    @classmethod
    def parse(cls, text: str, first_line: int = 1) -> SourceTree:
        """The tree of `text`, which starts at line `first_line` of its file (positions count the file's
        lines). Raises libcst.ParserSyntaxError (and RecursionError) for what libcst cannot parse."""
        module = cst.parse_module(text)
        positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        if first_line > 1:
            positions = {node: _moved_down(where, first_line - 1) for node, where in positions.items()}
        return cls(module, positions)

    @property
    def code(self) -> str:
        """The module's code before any change: the text parsed, but in a file whose line breaks are
        all a lone CR, where libcst drops the last."""
        if self._code is None:
            self._code = self.module.code
        return self._code

    def rewrite(self, changes: Sequence[Change]) -> cst.Module:
        """The module with every change made; RewriteError when a change's node is not found."""
        targets = _Targets(self.module.config_for_parsing)
        for change in changes:
            try:
                self._add(targets, change)
            except cst.ParserSyntaxError as error:
                raise RewriteError(f"the code a change adds does not parse: {error.message}") from error
        return self.module.visit(_Rewriter(targets, self.positions))

    def edits(self, path: str, changes: Sequence[Change]) -> list[Edit]:
        """The text edits the changes make (the rewritten module's code against the original)."""
        return diff_edits(path, self.code, self.rewrite(changes).code)

    def _add(self, targets: _Targets, change: Change) -> None:
        if isinstance(change, InsertAfter):
            anchor = self._node(change.statement, (cst.BaseSmallStatement, cst.With))
            targets.inserts[anchor].extend(targets.statement(new) for new in change.statements)
        elif isinstance(change, InsertBefore):
            anchor = self._node(change.statement, (cst.BaseSmallStatement, cst.If))
            targets.before[anchor].extend(targets.statement(new) for new in change.statements)
        elif isinstance(change, RemoveStatement):
            targets.removals.add(self._node(change.statement, cst.BaseSmallStatement))
        elif isinstance(change, ReplaceExpression):
            expression = self._node(change.span, cst.BaseExpression)
            targets.replacements[expression] = cst.parse_expression(change.code, targets.config)
        elif isinstance(change, AwaitCall):
            targets.awaits.add(self._node(change.span, cst.Call))
        elif isinstance(change, AddKeyword):
            argument = targets.keyword_argument(change.keyword, change.value)
            targets.keywords[self._node(change.call, cst.Call)].append(argument)
        elif isinstance(change, ReplaceKeyword):
            argument = targets.keyword_argument(change.keyword, change.value)
            targets.arguments[self._node(change.span, cst.Arg)] = argument
        elif isinstance(change, UnwrapIf):
            targets.unwraps.add(self._node(change.statement, cst.If))
        elif isinstance(change, ReplaceComment):
            targets.comments[self._comment(change.span)] = change.text
        else:
            raise RewriteError(f"unknown change {type(change).__name__}")
        targets.changes.append(change)

    def _index(self) -> dict[Key, list[cst.CSTNode]]:
        if self._by_range is None:
            by_range: dict[Key, list[cst.CSTNode]] = defaultdict(list)
            for node, where in self.positions.items():
                start, end = where.start, where.end
                by_range[(start.line, start.column + 1, end.line, end.column + 1)].append(node)
                if isinstance(node, cst.Comment):
                    self._comments[(start.line, start.column + 1)] = node
            self._by_range = by_range
        return self._by_range

    def _node(self, span: Span, kind: type[NodeT] | tuple[type[cst.CSTNode], ...]) -> Any:
        key = (span.line, span.col, span.end_line, span.end_col)
        for node in self._index().get(key, ()):
            if isinstance(node, kind):
                return node
        raise RewriteError(f"nothing to change at {span.line}:{span.col}-{span.end_line}:{span.end_col}")

    def _comment(self, span: Span) -> cst.Comment:
        self._index()
        comment = self._comments.get((span.line, span.col))
        if comment is None:
            raise RewriteError(f"no comment at {span.line}:{span.col}")
        return comment


@dataclass
class _Targets:
    """The nodes to change, by kind of change, with what they become."""

    config: cst.PartialParserConfig
    inserts: defaultdict[cst.CSTNode, list[cst.BaseStatement]] = field(default_factory=lambda: defaultdict(list))
    before: defaultdict[cst.CSTNode, list[cst.BaseStatement]] = field(default_factory=lambda: defaultdict(list))
    removals: set[cst.CSTNode] = field(default_factory=set)
    replacements: dict[cst.CSTNode, cst.BaseExpression] = field(default_factory=dict)
    awaits: set[cst.CSTNode] = field(default_factory=set)
    keywords: defaultdict[cst.CSTNode, list[cst.Arg]] = field(default_factory=lambda: defaultdict(list))
    arguments: dict[cst.CSTNode, cst.Arg] = field(default_factory=dict)
    unwraps: set[cst.CSTNode] = field(default_factory=set)
    comments: dict[cst.CSTNode, str] = field(default_factory=dict)
    changes: list[Change] = field(default_factory=list)

    def statement(self, new: NewStatement) -> cst.BaseStatement:
        line = cst.parse_statement(new.code, self.config)
        assert isinstance(line, cst.SimpleStatementLine)
        line = line.with_changes(leading_lines=(), trailing_whitespace=cst.TrailingWhitespace())
        if not new.guard:
            return line
        return cst.If(test=cst.parse_expression(new.guard, self.config), body=cst.IndentedBlock(body=[line]))

    def keyword_argument(self, keyword: str, value: str) -> cst.Arg:
        no_space = cst.SimpleWhitespace("")
        return cst.Arg(
            value=cst.parse_expression(value, self.config),
            keyword=cst.Name(keyword),
            equal=cst.AssignEqual(whitespace_before=no_space, whitespace_after=no_space),
        )

    def touches(self, small: cst.CSTNode) -> bool:
        return small in self.inserts or small in self.removals or small in self.before


class _Rewriter(cst.CSTTransformer):
    def __init__(self, targets: _Targets, positions: Mapping[cst.CSTNode, CodeRange]) -> None:
        super().__init__()
        self.targets = targets
        self.positions = positions
        self.ancestors: list[cst.CSTNode] = []
        # Where the changed nodes are, to skip what holds none of them. A comment may sit in the lines
        # before a statement, outside the statement's own span: with comments to change, visit it all.
        self.spans = [change.where for change in targets.changes]
        self.everywhere = bool(targets.comments)

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.ancestors.append(node)
        if self.everywhere:
            return True
        where = self.positions.get(node)
        return where is None or any(_holds(where, span) for span in self.spans)

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        self.ancestors.pop()
        targets = self.targets
        if original_node in targets.replacements:
            return _with_parentheses_of(updated_node, targets.replacements[original_node])
        if original_node in targets.awaits:
            return self._awaited(updated_node)
        if original_node in targets.keywords:
            assert isinstance(updated_node, cst.Call)
            return _with_keywords(updated_node, targets.keywords[original_node])
        if original_node in targets.arguments:
            new = targets.arguments[original_node]
            return updated_node.with_changes(keyword=new.keyword, value=new.value)
        if original_node in targets.comments:
            text = targets.comments[original_node]
            return updated_node.with_changes(value=text) if text else cst.RemovalSentinel.REMOVE
        if isinstance(original_node, cst.TrailingWhitespace) and self._removed(original_node.comment):
            return updated_node.with_changes(whitespace=cst.SimpleWhitespace(""))
        if isinstance(original_node, cst.EmptyLine) and self._removed(original_node.comment):
            return cst.RemovalSentinel.REMOVE
        if isinstance(original_node, (cst.IndentedBlock, cst.Module)):
            assert isinstance(updated_node, (cst.IndentedBlock, cst.Module))
            return self._block(original_node, updated_node)
        if isinstance(original_node, cst.SimpleStatementSuite):
            assert isinstance(updated_node, cst.SimpleStatementSuite)
            return self._suite(original_node, updated_node)
        if isinstance(original_node, cst.With) and original_node in targets.inserts:
            assert isinstance(updated_node, cst.With)
            return updated_node.with_changes(body=_opened(updated_node.body, targets.inserts[original_node]))
        return updated_node

    def _removed(self, comment: cst.Comment | None) -> bool:
        return comment is not None and self.targets.comments.get(comment) == ""

    def _awaited(self, call: cst.CSTNode) -> cst.Await:
        assert isinstance(call, cst.Call)
        parent = self.ancestors[-1] if self.ancestors else None
        lpar, rpar = call.lpar, call.rpar
        if not lpar and not isinstance(parent, _PLAIN_AWAIT_PARENTS):
            lpar, rpar = [cst.LeftParen()], [cst.RightParen()]
        return cst.Await(expression=call.with_changes(lpar=[], rpar=[]), lpar=lpar, rpar=rpar)

    def _block(self, original: cst.IndentedBlock | cst.Module, updated: cst.IndentedBlock | cst.Module) -> Any:
        """The block's statements with lines split, removed and unwrapped; the comment lines above a
        removed statement stay, above the statement that follows it."""
        body: list[cst.BaseStatement] = []
        carried: list[cst.EmptyLine] = []
        for before, after in zip(original.body, updated.body, strict=True):
            if isinstance(before, cst.SimpleStatementLine) and any(map(self.targets.touches, before.body)):
                assert isinstance(after, cst.SimpleStatementLine)
                lines = self._split(before.body, after.body, after.leading_lines, after.trailing_whitespace)
                if not lines:
                    carried += after.leading_lines
            elif before in self.targets.unwraps:
                assert isinstance(after, cst.If)
                lines, footer = _unwrapped(after)
                carried += footer
            elif before in self.targets.before:  # an `if`: it keeps the comment lines above it
                lines = [*self.targets.before[before], after]
            else:
                lines = [after]
            if carried and lines:
                first = lines[0]
                assert isinstance(first, cst.SimpleStatementLine | cst.BaseCompoundStatement)
                lines[0] = first.with_changes(leading_lines=[*carried, *first.leading_lines])
                carried = []
            body += lines
        if isinstance(updated, cst.Module):
            return updated.with_changes(body=body, footer=[*carried, *updated.footer])
        if not body:
            return updated.with_changes(body=[cst.SimpleStatementLine([cst.Pass()], leading_lines=carried)])
        return updated.with_changes(body=body, footer=[*carried, *updated.footer])

    def _suite(self, original: cst.SimpleStatementSuite, updated: cst.SimpleStatementSuite) -> cst.BaseSuite:
        """A one-line body: statements removed from it, or made an indented block for statements to go
        between (the line's comment stays with the first statement)."""
        if not any(map(self.targets.touches, original.body)):
            return updated
        if not any(small in self.targets.inserts or small in self.targets.before for small in original.body):
            pairs = zip(original.body, updated.body, strict=True)
            kept = [after for before, after in pairs if before not in self.targets.removals]
            return updated.with_changes(body=_joined(kept) or [cst.Pass()])
        lines = self._split(original.body, updated.body, (), updated.trailing_whitespace)
        return cst.IndentedBlock(body=lines)

    def _split(
        self,
        before: Sequence[cst.BaseSmallStatement],
        after: Sequence[cst.BaseSmallStatement],
        leading_lines: Sequence[cst.EmptyLine],
        trailing: cst.TrailingWhitespace,
    ) -> list[cst.BaseStatement]:
        """Small statements that shared a line, without the removed ones, on as many lines as the new
        statements before and after them need; the first line keeps the original's comment lines (new
        code put before it takes them) and the first original line keeps its comment."""
        lines: list[cst.BaseStatement] = []
        current: list[cst.BaseSmallStatement] = []
        leading = list(leading_lines)
        comment = True

        def close() -> None:
            nonlocal current, leading, comment
            if current:
                ending = trailing if comment else cst.TrailingWhitespace()
                lines.append(cst.SimpleStatementLine(_joined(current), leading, ending))
                current, leading, comment = [], [], False

        for old, new in zip(before, after, strict=True):
            if old in self.targets.removals:
                continue
            if old in self.targets.before:
                close()
                added = list(self.targets.before[old])
                if leading:
                    first = added[0]
                    assert isinstance(first, cst.SimpleStatementLine | cst.BaseCompoundStatement)
                    added[0] = first.with_changes(leading_lines=leading)
                    leading = []
                lines += added
            current.append(new)
            if old in self.targets.inserts:
                close()
                lines += self.targets.inserts[old]
        close()
        return lines


def _joined(statements: list[cst.BaseSmallStatement]) -> list[cst.BaseSmallStatement]:
    """The statements of one line: no semicolon after the last."""
    if statements:
        statements[-1] = statements[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
    return statements


def _opened(body: cst.BaseSuite, statements: list[cst.BaseStatement]) -> cst.IndentedBlock:
    """A `with` statement's body with `statements` first; a one-line body becomes a block, its comment
    staying on the header's line."""
    if isinstance(body, cst.IndentedBlock):
        return body.with_changes(body=[*statements, *body.body])
    assert isinstance(body, cst.SimpleStatementSuite)
    rest = cst.SimpleStatementLine(_joined(list(body.body)))
    return cst.IndentedBlock(body=[*statements, rest], header=body.trailing_whitespace)


def _unwrapped(statement: cst.If) -> tuple[list[cst.BaseStatement], list[cst.EmptyLine]]:
    """The `if` statement's body in its place (its comment lines first), and the comment lines that
    closed the body, for the statement after it."""
    body = statement.body
    if isinstance(body, cst.SimpleStatementSuite):
        line = cst.SimpleStatementLine(list(body.body), statement.leading_lines, body.trailing_whitespace)
        return [line], []
    assert isinstance(body, cst.IndentedBlock)
    lines = list(body.body)
    first = lines[0]
    assert isinstance(first, cst.SimpleStatementLine | cst.BaseCompoundStatement)
    lines[0] = first.with_changes(leading_lines=[*statement.leading_lines, *first.leading_lines])
    return lines, list(body.footer)


def _with_parentheses_of(old: cst.CSTNode, new: cst.BaseExpression) -> cst.BaseExpression:
    lpar = getattr(old, "lpar", ())
    return new.with_changes(lpar=lpar, rpar=getattr(old, "rpar", ())) if lpar else new


def _with_keywords(call: cst.Call, arguments: list[cst.Arg]) -> cst.Call:
    """The call with `arguments` after its own, laid out as they are: one per line when they are."""
    args = list(call.args)
    for argument in arguments:
        if not args:
            args = [argument]
            continue
        last = args[-1]
        separator = _argument_separator(call, args)
        if isinstance(last.comma, cst.Comma):
            closing = last.comma.whitespace_after
            after_last: cst.BaseParenthesizableWhitespace
            if isinstance(closing, cst.ParenthesizedWhitespace) and isinstance(separator, cst.ParenthesizedWhitespace):
                after_last = separator.with_changes(first_line=closing.first_line)
                closing = closing.with_changes(first_line=cst.TrailingWhitespace())
            else:
                after_last = cst.SimpleWhitespace(" ")
            args[-1] = last.with_changes(comma=last.comma.with_changes(whitespace_after=after_last))
            argument = argument.with_changes(comma=cst.Comma(whitespace_after=closing))
        else:
            comma = cst.Comma(whitespace_after=separator or cst.SimpleWhitespace(" "))
            args[-1] = last.with_changes(comma=comma, whitespace_after_arg=cst.SimpleWhitespace(""))
            argument = argument.with_changes(whitespace_after_arg=last.whitespace_after_arg)
        args.append(argument)
    return call.with_changes(args=args)


def _argument_separator(call: cst.Call, args: list[cst.Arg]) -> cst.BaseParenthesizableWhitespace | None:
    """What goes before an argument on its own line, when the call puts its arguments on lines."""
    before = args[-2].comma.whitespace_after if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) else None
    before = before or call.whitespace_before_args
    if isinstance(before, cst.ParenthesizedWhitespace):
        return before.with_changes(first_line=cst.TrailingWhitespace(), empty_lines=())
    return None


def _moved_down(where: CodeRange, lines: int) -> CodeRange:
    start, end = where.start, where.end
    return CodeRange(CodePosition(start.line + lines, start.column), CodePosition(end.line + lines, end.column))


def _holds(where: CodeRange, span: Span) -> bool:
    start, end = where.start, where.end
    return (start.line, start.column + 1) <= (span.line, span.col) and (span.end_line, span.end_col) <= (
        end.line,
        end.column + 1,
    )


WHOLE_FILE = regions.Region(1, 0)  # how Rewriter.trees keys a file's whole tree


class Rewriter:
    """Makes fixes on files read once each (`read(path)`: the text a fix's changes were made for, None
    when it cannot be had); a file libcst cannot parse gets no fix. libcst parses only the region of a
    file that a fix's changes lie in, where that gives the same result (see `regions`)."""

    def __init__(self, read: Callable[[str], str | None]) -> None:
        self.read = read
        self.texts: dict[str, str | None] = {}
        self.trees: dict[tuple[str, regions.Region], SourceTree | None] = {}
        self.unparsed: dict[str, str] = {}  # why libcst could not parse a file
        self._definitions: dict[str, list[regions.Definition] | None] = {}
        self._defaults: dict[str, tuple[str | None, str]] = {}

    def text(self, path: str) -> str | None:
        if path not in self.texts:
            self.texts[path] = self.read(path)
        return self.texts[path]

    def tree(self, path: str, region: regions.Region | None = None) -> SourceTree | None:
        """The tree of the file, or of its `region` when that gives the same result; None when libcst
        cannot parse the file."""
        text = self.text(path)
        if text is None:
            return None
        if region is not None:
            tree = self._region_tree(path, text, region)
            if tree is not None:
                return tree
        key = (path, WHOLE_FILE)
        if key not in self.trees:
            try:
                self.trees[key] = SourceTree.parse(text)
            except cst.ParserSyntaxError as error:
                self.trees[key] = None
                reason = error.message.splitlines()[-1] if error.message else "a syntax error"
                self.unparsed[path] = f"libcst cannot parse {path} ({reason})"
            except RecursionError:
                self.trees[key] = None
                self.unparsed[path] = f"{path} is nested too deeply for libcst"
        return self.trees[key]

    def _region_tree(self, path: str, text: str, region: regions.Region) -> SourceTree | None:
        """The tree of the file's `region`, None when it would not do for the whole file's."""
        key = (path, region)
        if key not in self.trees:
            indent, newline = self._file_defaults(path, text)
            starts = line_starts(text)
            start = starts[region.first - 1]
            code = text[start : starts[region.last] if region.last < len(starts) else len(text)]
            header = f"class _:{newline}" if region.in_class else ""
            try:
                tree: SourceTree | None = SourceTree.parse(header + code, region.first - len(header.splitlines()))
            except (cst.ParserSyntaxError, RecursionError):
                tree = None
            if tree is not None:
                tree.header, tree.start = header, start
                defaults = (tree.module.default_indent, tree.module.default_newline)
                if defaults != (indent, newline) or tree.code != header + code:
                    tree = None
            self.trees[key] = tree
        return self.trees[key]

    def _file_defaults(self, path: str, text: str) -> tuple[str | None, str]:
        if path not in self._defaults:
            self._defaults[path] = (regions.default_indent(text), regions.default_newline(text))
        return self._defaults[path]

    def _region(self, path: str, changes: Sequence[Change]) -> regions.Region | None:
        """The region of the file that the changes need parsed (see `regions`), None for all of it."""
        if path not in self._definitions:
            text = self.text(path)
            self._definitions[path] = regions.definitions(text) if text is not None else None
        defined = self._definitions[path]
        return regions.region([span for change in changes for span in change.spans], defined) if defined else None

    def why_not(self, fix: Fix) -> str:
        """Why `edits(fix)` gave None."""
        return next(
            (self.unparsed[path] for path in fix.paths if path in self.unparsed), "it could not be made on this code"
        )

    def edits(self, fix: Fix) -> dict[str, list[Edit]] | None:
        """The fix's text edits by file, derived from the rewritten modules; None when it cannot be made."""
        edits = {}
        for path in fix.paths:
            changes = [change for change in fix.changes if change.path == path]
            text = self.text(path)
            if text is not None and all(isinstance(change, ReplaceComment) for change in changes):
                made = comment_edits(path, text, [change for change in changes if isinstance(change, ReplaceComment)])
                if made is None:
                    return None
                edits[path] = made
                continue
            tree = self.tree(path, self._region(path, changes))
            if tree is None or text is None:
                return None
            try:
                rewritten = tree.rewrite(changes).code
            except RewriteError:
                return None
            header, start = tree.header, tree.start
            if not rewritten.startswith(header):
                return None
            end = start + len(tree.code) - len(header)
            edits[path] = diff_edits(path, text, text[:start] + rewritten[len(header) :] + text[end:])
        return edits


def comment_edits(path: str, text: str, changes: Sequence[ReplaceComment]) -> list[Edit] | None:
    """The edits of changes to comments alone, made on the text as on the tree: a comment runs to the
    end of its line; a removed one takes the spaces before it, and its line when it has the line to
    itself. Only the lines around the comments are compared, so a fix costs the same in a file of any
    size (thousands of module-level `noqa` comments are not each a rewrite of the whole file). None
    when a change's span holds no comment."""
    starts = line_starts(text)
    count = len(starts) - (text.endswith(("\n", "\r")))  # lines
    numbers = [change.span.line for change in changes]
    if not changes or min(numbers) < 1 or max(numbers) > count:
        return None
    first, last = max(min(numbers) - 1, 1), min(max(numbers) + 1, count)
    window = text[starts[first - 1] : starts[last] if last < len(starts) else len(text)]
    window_starts = line_starts(window)
    lines = source_lines(window)
    raw = []
    for change in changes:
        number, col = change.span.line - first + 1, change.span.col
        line = lines[number - 1]
        if line[col - 1 : col] != "#":
            return None
        before = line[: col - 1]
        if change.text:
            raw.append(Edit(path, Span(number, col, number, len(line) + 1), change.text))
        elif before.strip(" \t\f"):
            raw.append(Edit(path, Span(number, len(before.rstrip(" \t\f")) + 1, number, len(line) + 1), ""))
        elif number < len(window_starts):  # the line and its line break
            raw.append(Edit(path, Span(number, 1, number + 1, 1), ""))
        else:  # the last line of the file, with no line break
            raw.append(Edit(path, Span(number, 1, number, len(line) + 1), ""))
    try:
        changed = apply_edits(window, raw)
    except ValueError:
        return None
    shift = first - 1
    return [
        Edit(
            path,
            Span(edit.span.line + shift, edit.span.col, edit.span.end_line + shift, edit.span.end_col),
            edit.content,
        )
        for edit in diff_edits(path, window, changed)
    ]
