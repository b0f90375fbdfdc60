"""Positions and text of `ast` nodes: ast counts columns in UTF-8 bytes, spans count characters."""

from __future__ import annotations

import ast

from cachelint.edits import source_lines
from cachelint.finding import Span


class SourcePositions:
    """Positions and text of ast nodes (ast counts columns in UTF-8 bytes; spans count characters)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = source_lines(text)
        self._encoded: dict[int, bytes] = {}

    def _bytes(self, line: int) -> bytes:
        if line not in self._encoded:
            self._encoded[line] = self.lines[line - 1].encode() if 0 < line <= len(self.lines) else b""
        return self._encoded[line]

    def column(self, line: int, byte_offset: int) -> int:
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        if text.isascii():
            return byte_offset + 1
        return len(self._bytes(line)[:byte_offset].decode("utf-8", "replace")) + 1

    def span(self, node: ast.expr | ast.stmt | ast.keyword) -> Span:
        end_line = node.end_lineno or node.lineno
        end_offset = node.end_col_offset if node.end_col_offset is not None else node.col_offset
        return Span(
            node.lineno,
            self.column(node.lineno, node.col_offset),
            end_line,
            self.column(end_line, end_offset),
        )

    def name_span(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> Span:
        """Where a def's or class's name is (ast gives the keyword's position)."""
        text = self.lines[node.lineno - 1] if 0 < node.lineno <= len(self.lines) else ""
        keyword = "class" if isinstance(node, ast.ClassDef) else "def"
        at = text.find(keyword)
        name_at = text.find(node.name, at + len(keyword)) if at >= 0 else -1
        col = name_at + 1 if name_at >= 0 else self.column(node.lineno, node.col_offset)
        return Span(node.lineno, col, node.lineno, col + len(node.name))

    def segment(self, node: ast.expr) -> str:
        end_line = node.end_lineno or node.lineno
        end_offset = node.end_col_offset if node.end_col_offset is not None else node.col_offset
        if node.lineno == end_line:
            return self._bytes(node.lineno)[node.col_offset : end_offset].decode("utf-8", "replace")
        parts = [self._bytes(node.lineno)[node.col_offset :]]
        parts += [self._bytes(line) for line in range(node.lineno + 1, end_line)]
        parts.append(self._bytes(end_line)[:end_offset])
        return b"\n".join(parts).decode("utf-8", "replace")

    def starts_with(self, line: int, word: str) -> bool:
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return text.lstrip().startswith(word)
