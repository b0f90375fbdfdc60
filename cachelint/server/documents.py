"""Text as the editor has it, and positions in the editor's units.

LSP positions are 0-based lines and columns counted in the negotiated encoding's code units (UTF-16 by
default); cachelint's spans are 1-based lines and columns counted in code points. Lines break where
both Python and LSP break them: at \\r\\n, \\r and \\n (not at the form feeds or U+2028 that
`str.splitlines` also splits at).
"""

from __future__ import annotations

import bisect
import functools
import io
import tokenize
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types

from cachelint.edits import line_starts, source_lines
from cachelint.source import SourceError, decode_source, read_file

UTF8 = types.PositionEncodingKind.Utf8.value
UTF16 = types.PositionEncodingKind.Utf16.value
UTF32 = types.PositionEncodingKind.Utf32.value


def code_units(text: str, encoding: str) -> int:
    """The length of `text` in the encoding's code units."""
    if encoding == UTF32:
        return len(text)
    if encoding == UTF8:
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def column_from_units(line: str, count: int, encoding: str) -> int:
    """The index in `line` of the character `count` code units in (at most the line's length)."""
    if encoding == UTF32:
        return min(count, len(line))
    seen = 0
    for index, char in enumerate(line):
        if seen >= count:
            return index
        seen += code_units(char, encoding)
    return len(line)


@dataclass(frozen=True)
class SourceText:
    """One state of a file's text; never changes, so the analysis thread may read it."""

    text: str

    @functools.cached_property
    def lines(self) -> list[str]:
        return source_lines(self.text)

    @functools.cached_property
    def starts(self) -> list[int]:
        return line_starts(self.text)

    @functools.cached_property
    def newline(self) -> str:
        if "\r\n" in self.text:
            return "\r\n"
        return "\r" if "\r" in self.text and "\n" not in self.text else "\n"

    @functools.cached_property
    def line_count(self) -> int:
        """len(self.lines), from `starts` (which holds the end of a final line break too)."""
        return len(self.starts) - self.text.endswith(("\n", "\r"))

    def line(self, index: int) -> str:
        """self.lines[index] (0-based), without splitting the whole text into lines."""
        start = self.starts[index]
        end = self.starts[index + 1] if index + 1 < len(self.starts) else len(self.text)
        return self.text[start:end].rstrip("\r\n")

    def position(self, line: int, col: int, encoding: str) -> types.Position:
        """The LSP position of a 1-based line and code-point column."""
        if line < 1:
            return types.Position(0, 0)
        if line > self.line_count:
            return types.Position(self.line_count, 0)
        text = self.line(line - 1)
        return types.Position(line - 1, code_units(text[: max(col - 1, 0)], encoding))

    def range(self, line: int, col: int, end_line: int, end_col: int, encoding: str) -> types.Range:
        return types.Range(self.position(line, col, encoding), self.position(end_line, end_col, encoding))

    def position_at(self, offset: int, encoding: str) -> types.Position:
        """The LSP position of an index in the text."""
        line = bisect.bisect_right(self.starts, offset) - 1
        if line >= self.line_count:
            return types.Position(self.line_count, 0)
        return types.Position(line, code_units(self.text[self.starts[line] : offset], encoding))

    def offset(self, position: types.Position, encoding: str) -> int:
        """The index in the text of an LSP position (clamped to the text)."""
        if position.line >= len(self.starts):
            return len(self.text)
        start = self.starts[position.line]
        line = self.line(position.line) if position.line < self.line_count else ""
        return start + column_from_units(line, position.character, encoding)

    def changed(self, change: types.TextDocumentContentChangeEvent, encoding: str) -> SourceText:
        """The text after one `didChange` content change (a range's replacement, or the whole text).
        The new text's line starts are those of this one, moved, except around the change: a keystroke
        in a large file costs no walk over all its lines."""
        if not isinstance(change, types.TextDocumentContentChangePartial):
            return SourceText(change.text)
        start = self.offset(change.range.start, encoding)
        end = max(start, self.offset(change.range.end, encoding))
        changed = SourceText(self.text[:start] + change.text + self.text[end:])
        # From the line before the change (a lone CR there may pair with a LF it inserts) to the end of
        # the line it ends in; the lines after it keep their starts, moved by what the change added.
        first = max(bisect.bisect_right(self.starts, start) - 2, 0)
        after = bisect.bisect_right(self.starts, end)
        low = self.starts[first]
        high = self.starts[after] if after < len(self.starts) else len(self.text)
        moved = len(change.text) - (end - start)
        tail = [at + moved for at in self.starts[after:]]
        window = [low + at for at in line_starts(changed.text[low : high + moved])]
        if tail:
            window = [at for at in window if at < tail[0]]
        changed.__dict__["starts"] = [*self.starts[:first], *window, *tail]
        return changed


@dataclass
class Document:
    """A document the editor has open."""

    uri: str
    path: Path  # absolute, as the editor names it
    source: SourceText
    version: int | None
    language: str


def buffer_bytes(text: str) -> bytes:
    """The bytes a file holding `text` would hold: in the encoding its coding cookie names (PEP 263),
    else UTF-8, so that the analysis decodes back exactly this text."""
    data = text.encode("utf-8", "surrogatepass")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:  # an unknown encoding: the analysis reports it as it would for the file
        return data
    if encoding in ("utf-8", "utf-8-sig"):
        return data
    try:
        return text.encode(encoding)
    except (LookupError, UnicodeEncodeError):
        return data


def read_text(path: Path) -> SourceText | None:
    """The text of a file that is not open, as the analysis decodes it; None when it cannot be read."""
    try:
        return SourceText(decode_source(read_file(path)).text)
    except (OSError, SourceError):
        return None
