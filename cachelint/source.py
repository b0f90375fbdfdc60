"""Reading a Python file as text, remembering how to write it back (encoding, BOM, newlines)."""

from __future__ import annotations

import ast
import errno
import io
import os
import re
import stat
import symtable
import tokenize
from dataclasses import dataclass
from pathlib import Path

from cachelint.finding import Span


class SourceError(Exception):
    """A file that cannot be read, decoded or parsed; carries the position when there is one."""

    def __init__(self, message: str, line: int = 1, col: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.col = col

    @property
    def span(self) -> Span:
        return Span(self.line, self.col, self.line, self.col)


@dataclass(frozen=True)
class SourceFile:
    text: str
    encoding: str
    bom: bool
    newline: str

    def encode(self, text: str) -> bytes:
        """`text` as the bytes this file should hold (its encoding and BOM; line breaks are kept as given)."""
        data = text.encode(self.encoding)
        return (b"\xef\xbb\xbf" + data) if self.bom else data


def decode_source(raw: bytes) -> SourceFile:
    """Decode per PEP 263 (coding cookie, BOM); raise SourceError at the first bad byte."""
    first = raw.find(b"\n")
    second = raw.find(b"\n", first + 1) if first >= 0 else -1
    if not raw.startswith(b"\xef\xbb\xbf") and b"coding" not in (raw[:second] if second >= 0 else raw):
        try:  # no BOM, no cookie: what detect_encoding finds once the bytes decode as UTF-8
            return _source_file(raw.decode("utf-8"), "utf-8", bom=False)
        except UnicodeDecodeError:
            pass
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as error:
        raise SourceError(f"cannot detect the encoding: {error.msg}", error.lineno or 1) from error
    bom = encoding == "utf-8-sig"
    if bom:
        encoding = "utf-8"
        raw = raw[3:]
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        col = error.start - (raw.rfind(b"\n", 0, error.start) + 1) + 1
        raise SourceError(f"invalid {encoding} byte sequence: {error.reason}", line, col) from error
    except LookupError as error:
        raise SourceError(f"unknown encoding {encoding!r}") from error
    return _source_file(text, encoding, bom)


def _source_file(text: str, encoding: str, bom: bool) -> SourceFile:
    if "\0" in text:
        offset = text.index("\0")
        line = text.count("\n", 0, offset) + 1
        raise SourceError("source code cannot contain null bytes", line, offset - text.rfind("\n", 0, offset))
    if "\r\n" in text:
        newline = "\r\n"
    elif "\r" in text and "\n" not in text:  # classic Mac OS line breaks, which CPython reads too
        newline = "\r"
    else:
        newline = "\n"
    return SourceFile(text, encoding, bom, newline)


_NOT_REGULAR = {
    stat.S_IFIFO: "a named pipe",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
}


def read_file(path: str | Path) -> bytes:
    """The bytes of the regular file at `path` (links followed); OSError for anything else, which
    could block forever (a named pipe) or never end (/dev/zero)."""
    return read_file_with_stat(path)[1]


def read_file_with_stat(path: str | Path) -> tuple[os.stat_result, bytes]:
    """`read_file`, and the file's status taken before it was read."""
    status = os.stat(path)  # noqa: PTH116 (a path as text too: making a Path of each costs)
    kind = stat.S_IFMT(status.st_mode)
    if kind != stat.S_IFREG:
        raise OSError(errno.EINVAL, f"not a regular file but {_NOT_REGULAR.get(kind, 'a special file')}", str(path))
    with open(path, "rb") as file:  # noqa: PTH123
        return status, file.read()


def file_signature(status: os.stat_result) -> str:
    """What tells a file's bytes changed without reading them: its size, modification and change
    times (the change time moves on every write, even one that sets the modification time back) and
    inode (a file replaced by another)."""
    return f"{status.st_size}:{status.st_mtime_ns}:{status.st_ctime_ns}:{status.st_ino}"


def read_source(path: Path) -> SourceFile:
    try:
        raw = read_file(path)
    except OSError as error:
        raise SourceError(f"cannot read file: {error.strerror or error}") from error
    return decode_source(raw)


def check_syntax(text: str) -> None:
    """Raise what `parse_python` raises, about twice as fast: `symtable` runs CPython's parser without
    building AST objects. It also rejects what only the compiler rejects (`nonlocal` at module level);
    for those `parse_python` gives the verdict, but for code too deeply nested to compile, which the
    parser of Python 3.10 accepts."""
    try:
        symtable.symtable(text, "<unknown>", "exec")
    except (RecursionError, MemoryError) as error:
        # CPython cannot compile it (Python 3.10's parser accepts deeper code than its compiler does)
        raise SourceError("too deeply nested to parse") from error
    except (SyntaxError, ValueError):
        parse_python(text)


def parse_python(text: str) -> ast.Module:
    """Parse with CPython's parser; raise SourceError with its message and position."""
    try:
        return ast.parse(text)
    except SyntaxError as error:
        return_error = SourceError(error.msg, error.lineno or 1, max(error.offset or 1, 1))
        raise return_error from error
    except (RecursionError, MemoryError) as error:
        raise SourceError("too deeply nested to parse") from error
    except ValueError as error:
        raise SourceError(str(error)) from error


def module_name_for(path: str) -> str:
    """The dotted module name of a file at `path` (relative to the project root)."""
    parts = path.replace("\\", "/").removesuffix(".pyi").removesuffix(".py").split("/")
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(part for part in parts if part and part != ".")


_SGLANG_IMPORT = re.compile(rb"^[ \t]*(?:from|import)[ \t]+sglang\b", re.MULTILINE)


def imports_sglang(raw: bytes) -> bool:
    """Whether a file's bytes import SGLang (which makes its project an SGLang user)."""
    return b"sglang" in raw and _SGLANG_IMPORT.search(raw) is not None
