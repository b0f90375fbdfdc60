"""The persistent cache: what each file's bytes hold (trigger words, syntax, summary), in sqlite3.

An entry is keyed by a digest of the file's bytes, the module name it is summarized under, the settings
that change the analysis and the cachelint code itself, so a changed file, setting or release never
reads a stale entry. Entries are JSON text, never pickles. Any problem with the cache (a corrupt
database or entry, a folder that cannot be written) turns it off or skips the entry, leaving one warning
for the caller to print; the analysis never depends on it.

The cache folder is one cachelint made, below the project root, reached through no symbolic link
(`open_folder`); `remove_cache` (`cachelint clean`) removes only the files cachelint writes there.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import stat
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cachelint import interrupts
from cachelint.finding import Span

if TYPE_CHECKING:
    import sqlite3

    from cachelint.config import Settings
    from cachelint.summary import FileSummary

DATABASE = "cache.sqlite3"
# https://bford.info/cachedir/: backup and archiving tools skip a folder holding this file.
CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by cachelint.\n"
    "# For information about cache directory tags, see:\n"
    "#\thttps://bford.info/cachedir/\n"
)
GITIGNORE = "# Automatically created by cachelint.\n*\n"
# Every file cachelint writes in its cache folder (sqlite adds the last three beside the database):
# `cachelint clean` removes these and nothing else.
OWN_FILES = ("CACHEDIR.TAG", ".gitignore", DATABASE, f"{DATABASE}-wal", f"{DATABASE}-shm", f"{DATABASE}-journal")
BUSY_TIMEOUT_SECONDS = 10.0
# Entries not read or written for this many days are dropped when the cache is next written.
KEEP_DAYS = 30
_QUERY_CHUNK = 500


class CacheError(Exception):
    pass


@dataclass
class FileRecord:
    """What a file's bytes are known to hold, as far as a run needed: what the cache stores per file.

    `syntax` is None while the file has not been parsed, "ok" when it parses, else the message, line
    and column of the first error. `defined` holds the words after each `def ` or `class ` in the
    bytes, once a run looked for them. `multimodal` is, once a run looked for it, the first evidence
    that the file sends multimodal input to vLLM (cachelint.multimodal), as `[word, line]`, or `[]` when
    it holds none. `quiesce` and `sglang` tell, once a run asked, whether the bytes hold a word naming a
    pause, drain, sleep or abort (CL007's callers are searched for among such files) and whether they
    import SGLang. `summary` is the JSON of the file's `FileSummary` (with an empty path), stored apart
    and decoded only when a run needs it."""

    trigger: bool
    syntax: str | tuple[str, int, int] | None = None
    defined: list[str] | None = None
    summary: str | None = None
    multimodal: list[str | int] | None = None
    quiesce: bool | None = None
    sglang: bool | None = None

    def to_text(self) -> str:
        """Everything but the summary, as JSON."""
        fields = [self.trigger, self.syntax, self.defined, self.multimodal, self.quiesce, self.sglang]
        return json.dumps(fields, separators=(",", ":"))

    @classmethod
    def from_text(cls, text: str, summary: str | None = None) -> FileRecord:
        trigger, syntax, defined, multimodal, quiesce, sglang = json.loads(text)
        if not isinstance(trigger, bool) or not (summary is None or isinstance(summary, str)):
            raise ValueError("malformed cache entry")
        if not all(value is None or isinstance(value, bool) for value in (quiesce, sglang)):
            raise ValueError("malformed cache entry")
        if defined is not None and not (isinstance(defined, list) and all(isinstance(d, str) for d in defined)):
            raise ValueError("malformed cache entry")
        if multimodal is not None and not (isinstance(multimodal, list) and _is_evidence(multimodal)):
            raise ValueError("malformed cache entry")
        if syntax is not None and syntax != "ok":
            message, line, col = syntax
            if not (isinstance(message, str) and isinstance(line, int) and isinstance(col, int)):
                raise ValueError("malformed cache entry")
            syntax = (message, line, col)
        return cls(trigger, syntax, defined, summary, multimodal, quiesce, sglang)


def _is_evidence(value: list[Any]) -> bool:
    """`[]`, or a word and a line number."""
    return not value or (len(value) == 2 and isinstance(value[0], str) and type(value[1]) is int)


def plain(value: Any) -> Any:
    """Dataclasses as dicts of their fields (`dataclasses.asdict` copies deeply and is much slower), or
    as the row their `as_row` gives; spans as their four numbers."""
    if isinstance(value, Span):
        return value.to_json()
    if hasattr(value, "as_row"):
        return value.as_row()
    if hasattr(value, "__dataclass_fields__"):
        return {name: getattr(value, name) for name in value.__dataclass_fields__}
    raise TypeError(f"cannot store {type(value).__name__} in the cache")


def code_fingerprint() -> str:
    """The cachelint release, the size and time of every file of the package and the Python version
    (its parser decides what is a syntax error): a changed cachelint (an upgrade, an edited development
    checkout) or interpreter never reads entries written by another."""
    import hashlib

    from cachelint import __version__

    digest = hashlib.sha256(f"{__version__}\0{sys.version}".encode())
    digest.update(_package_stamp().encode())
    return digest.hexdigest()[:16]


@functools.cache
def _package_stamp() -> str:
    """The path, size and time of every file of the package, looked up once a process (once for all
    the projects of a run): the code that runs is the code this process loaded."""
    package = Path(__file__).parent
    return "".join(f"\0{path}\0{info.st_size}\0{info.st_mtime_ns}" for path, info in sorted(_package_files(package)))


def _package_files(folder: Path) -> Iterator[tuple[str, os.stat_result]]:
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name != "__pycache__":
                    yield from _package_files(Path(entry.path))
            elif not entry.name.endswith(".pyc"):
                yield entry.path, entry.stat()


def cache_folder(settings: Settings, root: Path) -> Path:
    """Where the cache of the project at `root` lives: `cache-dir`, a folder below the project root."""
    from cachelint.config import ConfigError, cache_dir_below_root

    relative = cache_dir_below_root(settings.cache_dir)
    if relative is None:
        raise ConfigError(f"`cache-dir` must be a folder path below the project root, got {settings.cache_dir!r}")
    return root / relative


class Cache:
    """The cache of one project for one run. Lookups and writes never raise; see `warning`."""

    def __init__(self, root: Path, folder: Path, salt: str) -> None:
        self.root = root
        self.folder = folder
        self.salt = salt.encode()
        self.warning: str | None = None
        self._connection: sqlite3.Connection | None = None
        self._state = "closed"  # then "open", or "off" for the rest of the run
        self._pending: dict[str, tuple[str, str | None]] = {}
        self._touched: list[str] = []
        self._today = int(time.time() // 86400)

    @classmethod
    def for_run(cls, settings: Settings, root: Path) -> Cache:
        return cls(root, cache_folder(settings, root), f"{code_fingerprint()}\0{settings.analysis_hash()}")

    def key(self, raw: bytes, module: str) -> str:
        import hashlib  # here: a run without the cache never needs it

        # surrogateescape: names from file names that are not UTF-8 (os.fsdecode) hash as their bytes
        digest = hashlib.sha256(self.salt + b"\0" + module.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(raw)
        return digest.hexdigest()

    def get_many(self, keys: Iterable[str]) -> dict[str, FileRecord]:
        """The records stored under `keys`; a corrupt record is left out (and noted)."""
        connection = self._connect()
        if connection is None:
            return {}
        wanted = list(dict.fromkeys(keys))
        found: dict[str, FileRecord] = {}
        try:
            for start in range(0, len(wanted), _QUERY_CHUNK):
                chunk = wanted[start : start + _QUERY_CHUNK]
                marks = ",".join("?" * len(chunk))
                query = f"SELECT key, value, summary, used FROM entries WHERE key IN ({marks})"
                for key, value, summary, used in connection.execute(query, chunk):
                    try:
                        found[key] = FileRecord.from_text(value, summary)
                    except (ValueError, TypeError):
                        self.note_corrupt_entry()
                        continue
                    if used != self._today:
                        self._touched.append(key)
        except Exception as error:  # sqlite3.Error, or whatever else a damaged file provokes
            self._turn_off("cannot read", error)
            return {}
        return found

    def run_key(self, inputs: str) -> str:
        import hashlib

        data = inputs.encode("utf-8", "surrogateescape")  # it may name files whose names are not UTF-8
        return "run:" + hashlib.sha256(self.salt + b"\0run\0" + data).hexdigest()

    def _entry(self, key: str) -> tuple[str, int] | None:
        """The value and last-used day of the entry `key` (a run's kind), if any."""
        connection = self._connect()
        if connection is None:
            return None
        try:
            row = connection.execute("SELECT value, used FROM entries WHERE key = ?", (key,)).fetchone()
        except Exception as error:
            self._turn_off("cannot read", error)
            return None
        return None if row is None else (row[0], row[1])

    def get_run(self, key: str, file_keys: list[str]) -> list[dict[str, Any]] | None:
        """The findings stored under the run `key`. When first read on a day, the entries of
        `file_keys` count as used that day too (they must outlive the run entry)."""
        row = self._entry(key)
        if row is None:
            return None
        try:
            findings = json.loads(row[0])
            if not isinstance(findings, list) or not all(isinstance(item, dict) for item in findings):
                raise ValueError("malformed cache entry")
        except ValueError:
            self.note_corrupt_entry()
            return None
        if row[1] != self._today:
            self._touched.extend([key, *file_keys])
        return findings

    def get_text(self, key: str) -> str | None:
        """The text stored under `key` by `put_text`, if any."""
        row = self._entry(key)
        if row is None:
            return None
        if row[1] != self._today:
            self._touched.append(key)
        return str(row[0])

    def put_text(self, key: str, text: str) -> None:
        """Store `text` under `key` (a key of `run_key`'s kind, never a file's)."""
        if self._state != "off":
            self._pending[key] = (text, None)

    def put_run(self, key: str, findings: list[dict[str, Any]]) -> None:
        if self._state != "off":
            self._pending[key] = (json.dumps(findings, separators=(",", ":")), None)

    def note_corrupt_entry(self) -> None:
        self._warn(f"ignored a corrupt entry of the cache in {self.folder} (it is rewritten)")

    def put(self, key: str, record: FileRecord) -> None:
        if self._state != "off":
            self._pending[key] = (record.to_text(), record.summary)

    def decoded(self, key: str) -> FileSummary | None:
        """The summary an earlier run of this process decoded from the entry `key` (see `keep_decoded`),
        if any."""
        return None

    def keep_decoded(self, key: str, summary: FileSummary) -> None:
        """Keep the summary decoded from the entry `key` for a later run of this process (the language
        server's next analysis; a run of the command line has none). Summaries are not changed once
        made, but for their path."""

    def flush(self) -> None:
        """Write what this run learnt, drop long-unused entries, close the database."""
        if not self._pending and not self._touched:
            self.close()
            return
        connection = self._connect()
        if connection is None:
            return
        try:
            with connection:
                connection.execute("BEGIN IMMEDIATE")
                connection.executemany(
                    "INSERT OR REPLACE INTO entries (key, value, summary, used) VALUES (?, ?, ?, ?)",
                    [(key, value, summary, self._today) for key, (value, summary) in self._pending.items()],
                )
                connection.executemany(
                    "UPDATE entries SET used = ? WHERE key = ?", [(self._today, key) for key in self._touched]
                )
                connection.execute("DELETE FROM entries WHERE used < ?", (self._today - KEEP_DAYS,))
        except Exception as error:
            self._turn_off("cannot write", error)
        finally:
            self._pending.clear()
            self._touched.clear()
            self.close()

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        if self._state == "open":
            self._state = "closed"

    def _connect(self) -> sqlite3.Connection | None:
        if self._state != "closed":
            return self._connection
        try:
            open_folder(self.root, self.folder)
        except FileNotFoundError:  # no project folder (a --stdin-filename of a file not on disk): no cache
            self._state = "off"
            return None
        except CacheError as error:
            self._state = "off"
            self._warn(f"not using the cache in {self.folder}: {error}; the cache is off for this run")
            return None
        except OSError as error:
            self._turn_off("cannot create", error)
            return None
        import sqlite3

        try:
            connection = sqlite3.connect(self.folder / DATABASE, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
        except Exception as error:
            self._turn_off("cannot open", error)
            return None
        try:
            _set_up(connection)
        except Exception as error:
            connection.close()
            self._turn_off("cannot use", error)
            return None
        self._connection = connection
        self._state = "open"
        return connection

    def _turn_off(self, failure: str, error: BaseException) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        self._state = "off"
        self._pending.clear()
        self._touched.clear()
        self._warn(f"{failure} the cache in {self.folder} ({_reason(error)}); the cache is off for this run")

    def _warn(self, message: str) -> None:
        if self.warning is None:
            self.warning = message


def _set_up(connection: sqlite3.Connection) -> None:
    """WAL mode and the table. Switching a new database to WAL can fail at once with "database is
    locked" while another process creates it (sqlite does not wait there), so that step is retried."""
    import sqlite3

    for attempt in range(SETUP_ATTEMPTS):
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute(
                "CREATE TABLE IF NOT EXISTS entries"
                " (key TEXT PRIMARY KEY, value TEXT NOT NULL, summary TEXT, used INTEGER NOT NULL)"
            )
            # Dropping old entries then reads the index, not every row (whose summary may span pages).
            connection.execute("CREATE INDEX IF NOT EXISTS entries_used ON entries (used)")
            return
        except sqlite3.OperationalError:
            if attempt == SETUP_ATTEMPTS - 1:
                raise
            time.sleep(0.05)


SETUP_ATTEMPTS = 40


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__


def open_folder(root: Path, folder: Path) -> None:
    """Make sure the cache folder `folder` below the project `root` is one cachelint may use, creating
    it (with its CACHEDIR.TAG and .gitignore) when it is missing. CacheError when it, or a folder on
    the way from the root, is a symbolic link, or it was not made by cachelint, or one of the files
    cachelint writes there is not a regular file; FileNotFoundError when the root is missing."""
    if not root.is_dir():
        raise FileNotFoundError(errno.ENOENT, "no such folder", str(root))
    _check_path(root, folder, create=True)
    if not _is_tagged(folder):
        raise CacheError("cachelint did not create this folder (it has no CACHEDIR.TAG of cachelint's)")
    for name in OWN_FILES:
        kind = _kind(folder / name)
        if kind is not None and not stat.S_ISREG(kind):
            raise CacheError(f"its {name} is {'a symbolic link' if stat.S_ISLNK(kind) else 'not a regular file'}")
    if _kind(folder / ".gitignore") is None:
        with contextlib.suppress(FileExistsError):
            _write_new(folder / ".gitignore", GITIGNORE)


def _check_path(root: Path, folder: Path, create: bool) -> bool:
    """Whether `folder` exists, each folder from `root` to it being a real folder (not a link); with
    `create`, the missing ones are made on the way (the last one with its tag, see `_create`)."""
    current = root
    parts = folder.relative_to(root).parts
    for index, part in enumerate(parts):
        current = current / part
        kind = _kind(current)
        if kind is None:
            if not create:
                return False
            if index == len(parts) - 1:
                _create(current)
            else:
                with contextlib.suppress(FileExistsError):
                    current.mkdir()
            kind = _kind(current)
        if kind is not None and stat.S_ISLNK(kind):
            raise CacheError(f"{current} is a symbolic link" if current != folder else "it is a symbolic link")
        if kind is None or not stat.S_ISDIR(kind):
            raise CacheError(f"{current} is not a folder" if current != folder else "it is not a folder")
    return True


def _kind(path: Path) -> int | None:
    """The file type bits of `path` itself (a link is not followed); None when there is nothing."""
    try:
        return stat.S_IFMT(os.lstat(path).st_mode)
    except FileNotFoundError:
        return None


def _create(folder: Path) -> None:
    """Make the cache folder with its tag and .gitignore in one step: they are written in a new folder
    beside it, which is then renamed, so that no run ever sees the folder without its tag. When another
    run made it first, theirs is kept."""
    import secrets

    temporary = folder.with_name(f".{folder.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    with interrupts.deferred():
        temporary.mkdir()
        try:
            _write_new(temporary / "CACHEDIR.TAG", CACHEDIR_TAG)
            _write_new(temporary / ".gitignore", GITIGNORE)
            try:
                temporary.rename(folder)
            except OSError as error:
                if error.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise
        finally:
            if _kind(temporary) is not None:
                for name in ("CACHEDIR.TAG", ".gitignore"):
                    (temporary / name).unlink(missing_ok=True)
                temporary.rmdir()


def _write_new(path: Path, content: str) -> None:
    """Write a file that must not exist yet (never through a link), whole: a full disk leaves none,
    never a .gitignore cut before its `*`."""
    from cachelint.writing import create_file  # only when the cache folder is made

    create_file(path, content.encode("utf-8"))


def _is_tagged(folder: Path) -> bool:
    """Whether `folder` holds cachelint's CACHEDIR.TAG, a regular file (never read through a link)."""
    path = folder / "CACHEDIR.TAG"
    if _kind(path) != stat.S_IFREG:
        return False
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return False
    with os.fdopen(descriptor, "rb") as stream:
        tag = stream.read(4096)
    return tag.startswith(CACHEDIR_TAG.split("\n", 1)[0].encode()) and b"cachelint" in tag


def remove_cache(root: Path, folder: Path) -> str:
    """Remove the files cachelint writes in the cache folder, then the folder if nothing else is left
    in it; never a tree. Returns "removed", "kept-folder" (it holds other files) or "none". CacheError,
    and nothing removed, when the folder is not one cachelint made or a link is on the way to it."""
    try:
        if not root.is_dir() or not _check_path(root, folder, create=False):
            return "none"
    except CacheError as error:
        raise CacheError(f"not removing {folder}: {error}") from error
    if not _is_tagged(folder):
        raise CacheError(f"{folder} has no CACHEDIR.TAG written by cachelint; not removing it")
    for name in OWN_FILES:
        path = folder / name
        if _kind(path) == stat.S_IFREG:
            path.unlink(missing_ok=True)
    try:
        folder.rmdir()
    except OSError as error:
        if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
        return "kept-folder"
    return "removed"
