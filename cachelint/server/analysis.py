"""One analysis of the open documents of a scope, with the engine, on the server's analysis thread.

The documents' texts are the engine's overlay, so unsaved changes are analysed, and the project's
persistent cache is read and written as by `cachelint check`, except for what is learnt about unsaved
buffers: those states are typed once and never seen again, so they stay in a small memory of the
server process instead of growing the cache's file.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cachelint.cache import Cache, FileRecord
from cachelint.engine import analyze
from cachelint.finding import Finding
from cachelint.server.documents import SourceText
from cachelint.server.projects import Scope
from cachelint.source import read_file
from cachelint.vllm_range import SupportedRange, marks_project

if TYPE_CHECKING:
    from cachelint.summary import FileSummary


@dataclass(frozen=True)
class OpenFile:
    """An open document as one analysis sees it."""

    uri: str
    path: Path
    version: int | None
    source: SourceText
    data: bytes  # the bytes a file holding the text would hold


@dataclass(frozen=True)
class Snapshot:
    """What one analysis of a scope works on: its open files as they were when it started."""

    scope: Scope
    files: tuple[OpenFile, ...]


@dataclass
class Outcome:
    snapshot: Snapshot
    findings: dict[str, list[Finding]]  # by document URI: every open file of the scope has an entry
    supported: SupportedRange
    warnings: list[str] = field(default_factory=list)


class BufferMemory:
    """What the analyses learnt about unsaved buffers: file records and run findings, the most
    recently used `size` of each; and the summaries the latest analysis took from the cache, decoded
    (the next analysis of the scope takes most of them again)."""

    def __init__(self, size: int = 16) -> None:
        self.size = size
        self.records: OrderedDict[str, FileRecord] = OrderedDict()
        self.runs: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        self.summaries: dict[str, FileSummary] = {}

    def get(self, table: OrderedDict[str, Any], key: str) -> Any:
        value = table.get(key)
        if value is not None:
            table.move_to_end(key)
        return value

    def put(self, table: OrderedDict[str, Any], key: str, value: Any) -> None:
        table[key] = value
        table.move_to_end(key)
        while len(table) > self.size:
            table.popitem(last=False)


class BufferCache(Cache):
    """The project's cache for one analysis, keeping entries for the bytes of unsaved buffers (and
    runs that read any) in a `BufferMemory` rather than in the file."""

    def __init__(self, root: Path, folder: Path, salt: str, unsaved: Collection[bytes], memory: BufferMemory) -> None:
        super().__init__(root, folder, salt)
        self.memory = memory
        self._unsaved = set(unsaved)
        self._unsaved_sizes = {len(data) for data in unsaved}
        self._unsaved_keys: set[str] = set()
        self.decoded_now: dict[str, FileSummary] = {}  # the summaries this analysis took from the cache

    @classmethod
    def for_buffers(cls, scope: Scope, unsaved: Collection[bytes], memory: BufferMemory) -> BufferCache:
        project = Cache.for_run(scope.settings, scope.root)
        return cls(project.root, project.folder, project.salt.decode(), unsaved, memory)

    def key(self, raw: bytes, module: str) -> str:
        key = super().key(raw, module)
        if len(raw) in self._unsaved_sizes and raw in self._unsaved:
            self._unsaved_keys.add(key)
        return key

    def get_many(self, keys: Iterable[str]) -> dict[str, FileRecord]:
        wanted = list(keys)
        found: dict[str, FileRecord] = {}
        for key in wanted:
            record = self.memory.get(self.memory.records, key)
            if record is not None:
                found[key] = record
        rest = [key for key in wanted if key not in found]
        if rest:
            found.update(super().get_many(rest))
        return found

    def put(self, key: str, record: FileRecord) -> None:
        if key in self._unsaved_keys:
            self.memory.put(self.memory.records, key, record)
        else:
            super().put(key, record)

    def decoded(self, key: str) -> FileSummary | None:
        summary = self.memory.summaries.get(key)
        if summary is not None:
            self.decoded_now[key] = summary
        return summary

    def keep_decoded(self, key: str, summary: FileSummary) -> None:
        if key not in self._unsaved_keys:  # typed once, never seen again
            self.decoded_now[key] = summary

    def get_run(self, key: str, file_keys: list[str]) -> list[dict[str, Any]] | None:
        remembered: list[dict[str, Any]] | None = self.memory.get(self.memory.runs, key)
        return remembered if remembered is not None else super().get_run(key, file_keys)

    def put_run(self, key: str, findings: list[dict[str, Any]]) -> None:
        if self._unsaved_keys:
            self.memory.put(self.memory.runs, key, findings)
        else:
            super().put_run(key, findings)


def run_analysis(snapshot: Snapshot, memory: BufferMemory) -> Outcome:
    """Analyse the snapshot's files within their project; findings are reported for them only."""
    scope = snapshot.scope
    overlay = {file.path: file.data for file in snapshot.files}
    unsaved = [file.data for file in snapshot.files if not _saved(file)]
    # A file in no project (a loose folder such as /etc, or one not on disk) gets no cache.
    cache = BufferCache.for_buffers(scope, unsaved, memory) if marks_project(scope.root) else None
    analysis = analyze(
        [file.path for file in snapshot.files],
        scope.settings,
        project_root=scope.root,
        force_exclude=True,  # as the pre-commit hooks: the project's excludes apply to open files too
        overlay=overlay,
        cache=cache,
        workers=1,  # no process pool forked from a process with threads
    )
    if cache is not None:
        memory.summaries = cache.decoded_now
    by_path: dict[Path, list[Finding]] = {}
    for finding in analysis.findings:
        by_path.setdefault(Path(os.path.abspath(finding.path)), []).append(finding)
    findings = {file.uri: by_path.get(file.path, []) for file in snapshot.files}
    return Outcome(snapshot, findings, analysis.supported, analysis.warnings)


def _saved(file: OpenFile) -> bool:
    try:
        return read_file(file.path) == file.data
    except OSError:
        return False
