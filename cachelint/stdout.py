"""Standard output of the command line, where a failed write is never lost or mistaken for a bug.

Python's own stdout, when unbuffered (PYTHONUNBUFFERED, `python -u`), ignores a short write: a pipe
whose reader leaves while a large report is being written (`--output-format sarif | head -c100`) takes
part of it and the rest is dropped without an error, so the run ended as if all had been printed. A
buffer between the text and the file retries a short write and so meets the closed pipe. A write that
fails for another reason (a full disk: `> /dev/full`) raises `OutputError`, which tells it from a
failure of anything else the run writes.
"""

from __future__ import annotations

import io
import sys


class OutputError(OSError):
    """Writing to standard output failed, and not because its reader left (BrokenPipeError)."""


class _Stdout(io.FileIO):
    def write(self, data: bytes) -> int:  # type: ignore[override]
        try:
            return super().write(data)
        except BrokenPipeError:
            raise
        except OSError as error:
            raise OutputError(error.errno, error.strerror) from error


def install() -> None:
    """Make `sys.stdout` write through a buffer into `_Stdout`, keeping its encoding, flushing each line
    when it did (a terminal, or unbuffered), and printing what cannot be encoded escaped (`caf\\udce9.py`,
    a file name that is not UTF-8, still valid JSON). A stdout that is no file is left as it is."""
    stream = sys.stdout
    if not isinstance(stream, io.TextIOWrapper):
        return
    try:
        descriptor = stream.fileno()
    except (OSError, ValueError):
        stream.reconfigure(errors="backslashreplace")
        return
    stream.flush()
    unbuffered = not isinstance(stream.buffer, io.BufferedIOBase)
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(_Stdout(descriptor, "wb", closefd=False)),
        encoding=stream.encoding,
        errors="backslashreplace",
        line_buffering=stream.line_buffering or unbuffered,
    )
