"""The pipeline: discover files, summarize the project once, run the rules, return the findings."""

from __future__ import annotations

import functools
import gc
import json
import os
import re
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from cachelint import parallel, vllm_range
from cachelint.cache import Cache, FileRecord
from cachelint.config import CONFIG_FILE_NAMES, ConfigError, Settings, gitignore_spec, selector_matches
from cachelint.discovery import Excludes, discover, take_warnings, walk_python_files
from cachelint.finding import INTERNAL_ERROR, INVALID_SYNTAX, IO_ERROR, Finding, Span
from cachelint.source import (
    SourceError,
    SourceFile,
    check_syntax,
    decode_source,
    file_signature,
    imports_sglang,
    module_name_for,
    parse_python,
    read_file,
    read_file_with_stat,
)
from cachelint.vllm_range import SGLANG, SupportedRange
from cachelint.word_search import WordSearch

if TYPE_CHECKING:  # the rest is imported when the findings are not in the cache
    from cachelint.multimodal import Evidence
    from cachelint.project import ProjectIndex
    from cachelint.rules import Context, Rule
    from cachelint.summary import FileSummary

# Bytes that any file the rules can use must contain, or else `def ` and the name of a weight-update
# function (`Triggers`). A file that only calls such a function, or a helper, is reached through the
# call graph and parsed on demand.
TRIGGER_WORDS = (
    b"reset_prefix_cache",
    b"reset_mm_cache",
    b"reset_encoder_cache",
    b"encoder_cache",
    b"pause_generation",
    b"collective_rpc",
    b"sleep(level",
    b"engine.sleep(",
    b"llm.sleep(",
    b"mm_processor_cache",
    b"disable_mm_preprocessor_cache",
    b"worker_extension_cls",
    b"reload_weights",
    # vLLM's API server routes that pause or sleep (requests sent to them, summary/calls.py)
    b"/pause",
    b"/sleep",
    # SGLang's flushes and memory release (CL201-CL204)
    b"flush_cache",
    b"release_memory_occupation",
)
# Words that count only where a pattern also matches (searched for only in files holding the word):
# - SGLang's weight updates called, defined or named as a route, not named in prose (a docstring's
#   ``update_weights_from_tensor``). A file that only imports or launches SGLang is parsed when a
#   finding asks for it (CL202's launch sites).
# - AsyncLLM and EngineClient, which make a receiver's coroutines judged (CL005), where the file also
#   names one of those coroutines that no other trigger word names (the weight-transfer steps too).
# - vLLM's or SGLang's version read (`vllm.__version__`, `version("sglang")`): its comparisons are
#   evidence of the releases the code runs on (vllm_range.widen_by_code) and may compare strings (CL011).
_OTHER_COROUTINES = re.compile(rb"sleep|wake_up|resume_generation|weight_update|update_weights|weight_transfer")
TRIGGER_PATTERNS = (
    (b"update_weights_from_", re.compile(rb"[./\"']update_weights_from_|def update_weights_from_")),
    (b"AsyncLLM", _OTHER_COROUTINES),
    (b"EngineClient", _OTHER_COROUTINES),
    (b"__version__", re.compile(rb"(?:vllm|sglang)\.__version__|from (?:vllm|sglang) import __version__")),
    (b"version(", re.compile(rb"version\(\s*[\"'](?:vllm|sglang)[\"']")),
    # vLLM's weight pushes (cachelint.refit_cycle): its weight-transfer methods, its weight-sync clients,
    # a worker's model runner loading weights.
    (b"weight_update", re.compile(rb"(?:start|finish|start_draft)_weight_update\(")),
    (b"WeightSyncClient", re.compile(rb"(?:HTTP|Ray)VLLMWeightSyncClient")),
    (b"load_weights", re.compile(rb"model_runner")),
)


# A word after `def ` or `class `, overlapping matches included (`undef foo` holds `def foo`): `def
# name\b` or `class name\b` matches for these words and no other ASCII word.
_DEFINED_WORD = re.compile(rb"def (?=(\w+))")
_CLASS_WORD = re.compile(rb"class (?=(\w+))")


def defined_in(raw: bytes) -> list[str]:
    """The words right after each `def ` and `class ` in `raw`, sorted."""
    return sorted({word.decode() for pattern in (_DEFINED_WORD, _CLASS_WORD) for word in pattern.findall(raw)})


_ASCII_WORD = re.compile(r"\w+", re.ASCII)
# TRIGGER_WORDS but those holding another (a file holding one holds the other anyway).
_FIXED_WORDS = tuple(
    word for word in TRIGGER_WORDS if not any(other != word and other in word for other in TRIGGER_WORDS)
)
# Parts that several trigger words share: a file without one is not searched for those words.
_SHARED_PARTS = (b"_cache", b"sleep(")


class Triggers:
    """Whether a file's bytes hold a trigger word: one of TRIGGER_WORDS or TRIGGER_PATTERNS, or `def NAME`
    for a weight-update function NAME. Rather than each `def NAME` being searched for (a pass over the bytes
    per name), the word after each `def ` is looked up by its prefixes among the names: one pass, and
    as fast for 50,000 names as for 20. Names that are not ASCII words are searched for as they are."""

    def __init__(self, refit_functions: Iterable[str]) -> None:
        names = set(refit_functions)
        words = {name for name in names if _ASCII_WORD.fullmatch(name)}
        searched = _FIXED_WORDS + tuple(sorted(f"def {name}".encode() for name in names - words))
        self.searched = WordSearch(searched, _SHARED_PARTS)
        self.names = frozenset(name.encode() for name in words)
        self.lengths = sorted({len(name) for name in self.names})

    def held_by(self, raw: bytes) -> bool:
        if self.searched.any_in(raw):
            return True
        if any(word in raw and pattern.search(raw) for word, pattern in TRIGGER_PATTERNS):
            return True
        if not self.names:
            return False
        names, lengths = self.names, self.lengths
        for word in _DEFINED_WORD.findall(raw):
            for length in lengths:
                if length > len(word):
                    break
                if word[:length] in names:
                    return True
        return False


def display_path(path: Path) -> str:
    """`path` relative to the working directory when below it, else absolute; POSIX separators."""
    absolute = os.path.abspath(path)
    return _below(absolute, str(Path.cwd())) or Path(absolute).as_posix()


def _changed_ns(signature: str) -> int:
    """When the file of `file_signature` last changed: its modification or change time, the later."""
    _, modified, changed, _ = signature.split(":")
    return max(int(modified), int(changed))


# A file that changed this recently before a run is read again by the next one: in the same tick of a
# coarse clock (one or two seconds on some file systems) a second change would not show in its times.
RECENT_NS = 2_000_000_000


def _now_ns() -> int:
    return time.time_ns()


def _absolute(path: str, cwd: str) -> str:
    """`os.path.abspath(path)` for the working folder `cwd`, without asking the system for it again."""
    return os.path.normpath(path if os.path.isabs(path) else os.path.join(cwd, path))  # noqa: PTH117, PTH118


def _below(path: str, folder: str) -> str | None:
    """`path` relative to `folder` (both absolute and normal) with "/" separators, "." for `folder`
    itself; None when `path` is not below it. What `Path.relative_to` does, ten times faster."""
    if path == folder:
        return "."
    head = folder if folder.endswith(os.sep) else folder + os.sep
    return path[len(head) :].replace(os.sep, "/") if path.startswith(head) else None


# Words looked for in a file's bytes in any case, all at once (one lowered copy serves them all): those
# of a suppression directive (see DIRECTIVE_WORDS) and SGLang's name (the SGLang rules' searches).
ANY_CASE_WORDS = (b"noqa", b"cachel", b"sglang")


def any_case_words(raw: bytes) -> frozenset[bytes]:
    """The words of ANY_CASE_WORDS that `raw` holds in any case."""
    lowered = raw.lower()
    return frozenset(word for word in ANY_CASE_WORDS if word in lowered)


@dataclass
class LoadedFile:
    path: str  # as `discover` names it
    display: str
    source: SourceFile | None = None  # decoded for targets only
    contents: bytes | None = None  # None: not read yet (keyed from an earlier run's record of it)
    read_late: bool = False  # keyed, then read when its bytes were asked for
    summary: FileSummary | None = None
    error: Finding | None = None
    module: str = ""
    target: bool = False
    record: FileRecord | None = None  # what is known about `raw`, from the cache or this run
    cache_key: str = ""
    signature: str = ""  # size, times and inode when read (`file_signature`), for the next run
    any_case: frozenset[bytes] | None = None  # those of ANY_CASE_WORDS `raw` holds in any case, once asked

    @property
    def raw(self) -> bytes:
        """The file's bytes, read on first use when the run keyed it without reading (empty when it
        can no longer be read)."""
        if self.contents is None:
            self.read_late = True
            try:
                self.contents = read_file(self.path)
            except OSError:
                self.contents = b""
        return self.contents

    @raw.setter
    def raw(self, contents: bytes) -> None:
        self.contents = contents

    def holds_any_case(self, word: bytes) -> bool:
        """Whether `raw` holds `word`, one of ANY_CASE_WORDS, in any case."""
        if self.any_case is None:
            self.any_case = any_case_words(self.raw)
        return word in self.any_case

    def decoded(self) -> SourceFile | None:
        """The text of `raw`, decoded on first use; None when it does not decode."""
        if self.source is None:
            try:
                self.source = decode_source(self.raw)
            except SourceError:
                return None
        return self.source


@dataclass
class Analysis:
    findings: list[Finding]
    sources: dict[str, SourceFile]
    files_checked: int
    supported: SupportedRange
    root: Path
    targets: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # for stderr: e.g. why the cache was not used
    projects: list[ProjectReport] = field(default_factory=list)  # each project checked, with its range

    def range_warnings(self) -> list[str]:
        """What the user should know about the supported ranges that mattered in this run."""
        found = (
            warning
            for p in self.projects
            if p.consulted
            for supported in (p.supported, p.sglang)
            if supported is not None
            for warning in supported.warnings(p.root)
        )
        return list(dict.fromkeys(found))

    def range_of(self) -> dict[str, SupportedRange]:
        """The supported range each checked file (by its shown path) was checked against."""
        return {target: project.supported for project in self.projects for target in project.targets}


UP_FRONT, ON_DEMAND, SYNTAX = "up front", "on demand", "syntax"


@dataclass
class RunStats:
    """How many files each stage of a run touched, and how long it took: what `-v` prints."""

    projects: int = 0
    files: int = 0  # files to check
    read: int = 0
    read_bytes: int = 0
    trigger: int = 0  # files holding a trigger word, among those whose record the run looked at
    summarized: Counter[str] = field(default_factory=Counter)  # by stage: parsed and summarized
    cached: Counter[str] = field(default_factory=Counter)  # by stage: summaries decoded from the cache
    rounds: int = 0  # rounds of loading on demand
    ruled: int = 0  # files the rules ran over
    stored: int = 0  # projects whose findings came from the cache
    seconds: dict[str, float] = field(default_factory=dict)

    def add_time(self, stage: str, started: float) -> None:
        self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - started

    def add(self, other: RunStats) -> None:
        for name in ("projects", "files", "read", "read_bytes", "trigger", "rounds", "ruled", "stored"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.summarized.update(other.summarized)
        self.cached.update(other.cached)
        for stage, seconds in other.seconds.items():
            self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds

    def lines(self) -> list[str]:
        """One line per stage, for people and scripts (`-v`): `stage: N files ...: S s`."""
        seconds = Counter(self.seconds)
        trigger = "holds" if self.trigger == 1 else "hold"
        projects = _count(self.projects, "project")
        found = [
            f"found {_count(self.files, 'file')} to check in {projects}: {seconds['find']:.3f} s",
            f"read {_count(self.read, 'file')} ({self.read_bytes / 1e6:.1f} MB): {seconds['read']:.3f} s",
            f"{_count(self.trigger, 'file')} {trigger} a trigger word",
        ]
        for stage in (UP_FRONT, ON_DEMAND):
            files = _count(self.summarized[stage] + self.cached[stage], "file")
            rounds = f" in {_count(self.rounds, 'round')}" if stage == ON_DEMAND else ""
            cached = f"({self.cached[stage]} from the cache)"
            found.append(f"summarized {stage}: {files}{rounds} {cached}: {seconds[stage]:.3f} s")
        syntax = _count(self.summarized[SYNTAX] + self.cached[SYNTAX], "file")
        found.append(f"syntax-checked {syntax} no rule needs: {seconds[SYNTAX]:.3f} s")
        found.append(f"rules over {_count(self.ruled, 'file')}: {seconds['rules']:.3f} s")
        found.append(f"findings from the cache for {self.stored} of {projects}")
        return found


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


_recording: list[RunStats] = []


@contextmanager
def recording() -> Iterator[RunStats]:
    """The stats of every `analyze` run inside the block, added up (for `-v`)."""
    stats = RunStats()
    _recording.append(stats)
    try:
        yield stats
    finally:
        _recording.remove(stats)


def syntax_error_finding(display: str, error: SourceError) -> Finding:
    return Finding(display, error.span, INVALID_SYNTAX, INVALID_SYNTAX, error.message)


def internal_error_finding(display: str, error: BaseException | str) -> Finding:
    described = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    message = f"cachelint failed on this file: {described}"
    return Finding(display, Span(1, 1, 1, 1), INTERNAL_ERROR, INTERNAL_ERROR, message)


# What a worker is asked: the file's bytes (or its text, once decoded), its module name, the version
# helpers, whether to summarize it (else only check its syntax) and whether to encode the summary for
# the cache; and what it answers: the syntax as FileRecord keeps it, the summary and its JSON, or why
# summarizing failed.
Task = tuple["bytes | str", str, tuple[str, ...], bool, bool]
# To parse and summarize a file costs about this many times as much as to check its syntax.
SUMMARY_COST = 4
Outcome = tuple["str | tuple[str, int, int]", "FileSummary | None", "str | None", "str | None"]


def examine_files(tasks: list[Task]) -> list[Outcome]:
    """The per-file work, run in this process or in a pool worker."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarnings and the like concern the file's own checks
        return [examine_file(*task) for task in tasks]


# What a worker is asked to look at: the file's bytes, its module name, the version helpers, whether to
# encode a summary for the cache, and what makes the file worth summarizing.
ScanTask = tuple[bytes, str, tuple[str, ...], bool, "Triggers"]
# Below this many bytes to look at, this process looks at them alone (a pool takes 15 ms to start; a
# core looks at about 250 MB/s), and starts one only when there is enough to parse.
SCAN_POOL_BYTES = 4 * 1024 * 1024
# Which files hold a trigger word is known only once looked at: more, smaller batches even the load.
SCAN_BATCHES_PER_WORKER = 12


def scan_files(tasks: list[ScanTask]) -> list[tuple[Outcome | None, frozenset[bytes]]]:
    """For each file, what examining it found (None when it holds no trigger word) and which words of
    ANY_CASE_WORDS it holds (every run asks, for the suppression directives)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # as in examine_files
        return [
            (
                examine_file(raw, module, helpers, True, encode) if triggers.held_by(raw) else None,
                any_case_words(raw),
            )
            for raw, module, helpers, encode, triggers in tasks
        ]


def examine_file(
    source: bytes | str, module: str, helpers: tuple[str, ...], want_summary: bool, encode: bool
) -> Outcome:
    try:
        text = decode_source(source).text if isinstance(source, bytes) else source
        if not want_summary:
            check_syntax(text)
            return "ok", None, None, None
        tree = parse_python(text)
    except SourceError as error:
        return (error.message, error.line, error.col), None, None, None
    from cachelint.summary.walk import summarize

    try:
        summary = summarize("", text, tree, helpers, module)
    except RecursionError:
        return ("too deeply nested to analyse", 1, 1), None, None, None
    except Exception as error:  # one odd file must not stop the run
        return "ok", None, None, f"{type(error).__name__}: {error}"
    return "ok", summary, summary.encode() if encode else None, None


class Analyzer:
    """One run over one project root."""

    def __init__(
        self,
        settings: Settings,
        root: Path,
        rules: Sequence[Rule] | None = None,
        overlay: Mapping[Path, bytes] | None = None,
        cache: Cache | None = None,
        workers: int | None = None,
        pool: parallel.Workers | None = None,
    ) -> None:
        self.overlay = overlay or {}
        self.settings = settings
        self.root = root
        self._rules = rules
        self.loaded: dict[str, LoadedFile] = {}  # by absolute path
        self.triggers = Triggers(settings.all_refit_functions)
        self.root_folder = root.parent if root.is_file() else root
        self.cache = cache
        self.workers = pool if pool is not None else parallel.Workers(workers)
        self.stats = RunStats()
        self._progress: Callable[[int, int], None] | None = None
        self._finished: set[str] = set()
        self._defined_sets: dict[str, frozenset[str]] = {}
        self._absolute_root = Path(os.path.abspath(root))
        self._root_text = os.fspath(self._absolute_root)
        self._cwd_text = str(Path.cwd())
        self._overlay = {os.path.abspath(path): raw for path, raw in self.overlay.items()}

    @functools.cached_property
    def rules(self) -> list[Rule]:
        """The enabled rules (all of them by default) but CL100, which `apply_suppressions` reports."""
        if self._rules is None:
            from cachelint.rules import ALL_RULES

            self._rules = ALL_RULES
        return [rule for rule in self._rules if self.settings.is_enabled(rule.info.code) and rule.info.code != "CL100"]

    def read(self, path: str, target: bool = False) -> LoadedFile:
        """The file's bytes; what they hold is filled in by `examine`."""
        absolute, loaded, new = self._entry(path, target)
        if not new:
            return loaded
        started = time.perf_counter()
        try:
            overlaid = self._overlay.get(absolute)
            if overlaid is not None:
                loaded.raw = overlaid
            else:
                status, loaded.raw = read_file_with_stat(path)
                loaded.signature = file_signature(status)
        except OSError as error:
            loaded.raw = b""
            message = f"cannot read file: {error.strerror or error}"
            loaded.error = Finding(loaded.display, Span(1, 1, 1, 1), IO_ERROR, IO_ERROR, message)
            return loaded
        if self.cache is not None:
            loaded.cache_key = self.cache.key(loaded.raw, loaded.module)
        self.stats.read += 1
        self.stats.read_bytes += len(loaded.raw)
        self.stats.add_time("read", started)
        return loaded

    def _entry(self, path: str, target: bool) -> tuple[str, LoadedFile, bool]:
        """The file's absolute path and entry, and whether the entry is new (its bytes not read yet)."""
        absolute = _absolute(path, self._cwd_text)
        loaded = self.loaded.get(absolute)
        if loaded is not None:
            loaded.target = loaded.target or target
            return absolute, loaded, False
        display = _below(absolute, self._cwd_text) or Path(absolute).as_posix()
        relative = _below(absolute, self._root_text)
        module = module_name_for(relative if relative is not None else absolute.rpartition(os.sep)[2])
        loaded = self.loaded[absolute] = LoadedFile(path, display, module=module, target=target)
        return absolute, loaded, True

    def keyed(
        self, paths: Sequence[str], manifest: Mapping[str, list[str]], target: bool = True
    ) -> tuple[list[LoadedFile], int]:
        """The files at `paths` (the targets, or other files of the project), keyed without reading them
        when their size, times and inode are those `manifest` (absolute path -> [signature, cache key])
        recorded, else read; and how many were read. The bytes of a file keyed are read when asked for."""
        found = []
        read = 0
        for path in paths:
            absolute, loaded, new = self._entry(path, target=target)
            recorded = manifest.get(absolute)
            try:
                signature = file_signature(os.stat(loaded.path))  # noqa: PTH116 (a path as text: no Path made)
            except OSError:
                signature = ""
            if new and recorded is not None and recorded[0] == signature and absolute not in self._overlay:
                loaded.cache_key, loaded.signature = recorded[1], signature
            elif new:
                del self.loaded[absolute]
                loaded = self.read(path, target=target)
                read += 1
            found.append(loaded)
        return found, read

    def manifest(self, started_ns: int) -> dict[str, list[str]]:
        """The signature and cache key of every file read, but those that changed within RECENT_NS
        before `started_ns`."""
        return {
            absolute: [loaded.signature, loaded.cache_key]
            for absolute, loaded in self.loaded.items()
            if loaded.signature and loaded.cache_key and _changed_ns(loaded.signature) < started_ns - RECENT_NS
        }

    def any_holds_trigger(self, files: list[LoadedFile]) -> bool:
        """Whether one of `files` holds a trigger word (known from the cache when it saw their bytes)."""
        self._give_records(files)
        return any(loaded.record.trigger for loaded in files if loaded.record is not None)

    def _give_records(self, files: list[LoadedFile], summarize: bool = False) -> None:
        """Give each readable file without a record one: the cache's for its bytes, or else a new one
        telling whether it holds a trigger word. With `summarize`, when there are enough bytes to look
        at, the pool looks at them and summarizes the files holding a trigger word on the way."""
        missing = [loaded for loaded in files if loaded.error is None and loaded.record is None]
        keys = [loaded.cache_key for loaded in missing if loaded.cache_key]
        known = self.cache.get_many(keys) if self.cache is not None and keys else {}
        unknown = []
        for loaded in missing:
            loaded.record = known.get(loaded.cache_key)
            if loaded.record is None:
                unknown.append(loaded)
        if summarize and self._scan_in_pool(unknown):
            return
        for loaded in unknown:
            loaded.record = FileRecord(self.triggers.held_by(loaded.raw))
            self._remember(loaded)

    def _scan_in_pool(self, unknown: list[LoadedFile]) -> bool:
        """Look for trigger words in `unknown` over the pool, summarizing the files that hold one; False
        when there are too few bytes for a pool to pay (see SCAN_POOL_BYTES)."""
        sizes = [len(loaded.raw) for loaded in unknown]
        if sum(sizes) < SCAN_POOL_BYTES or parallel.worker_count(sum(sizes), self.workers.requested) <= 1:
            return False
        import cachelint.summary.walk  # noqa: F401 (once here, not again in each forked worker)

        helpers, encode = self.settings.version_helpers, self.cache is not None
        tasks: list[ScanTask] = [(loaded.raw, loaded.module, helpers, encode, self.triggers) for loaded in unknown]

        def done(indexes: list[int]) -> None:
            self._finished.update(unknown[index].display for index in indexes)
            self._report_progress()

        told = done if self._progress is not None else None
        outcomes = self.workers.map(scan_files, tasks, sizes, told, SCAN_BATCHES_PER_WORKER)
        for loaded, (outcome, words) in zip(unknown, outcomes, strict=True):
            loaded.any_case = words
            loaded.record = FileRecord(outcome is not None)
            if outcome is None:
                self._remember(loaded)
            else:
                self.stats.summarized[UP_FRONT] += 1
                self._take_outcome(loaded, outcome)
        return True

    def examine(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Summarize the files holding a trigger word. `progress(done, total)` is told as files are
        done with, through `load_on_demand` and `check_syntax`."""
        started = time.perf_counter()
        files = list(self.loaded.values())
        self._progress = progress
        self._give_records(files, summarize=True)
        wanted: list[tuple[LoadedFile, bool]] = []
        for loaded in files:
            if loaded.error is not None or loaded.record is None or loaded.summary is not None:
                self._finished.add(loaded.display)
            elif loaded.record.trigger:
                wanted.append((loaded, True))
            elif not loaded.target:
                self._finished.add(loaded.display)
        self._fulfil(wanted, UP_FRONT)
        self.stats.add_time(UP_FRONT, started)

    def run_key(
        self,
        targets: list[LoadedFile],
        project: list[LoadedFile],
        supported: tuple[SupportedRange, SupportedRange],
        named: AbstractSet[str],
    ) -> str | None:
        """What the findings of this run depend on beyond settings and code: every file's path and
        bytes (and module name), which targets were named, the project root and the supported vLLM
        releases. None without a cache, or when a file could not be read."""
        if self.cache is None or not all(loaded.cache_key for loaded in (*targets, *project)):
            return None
        inputs = {
            "root": str(self._absolute_root),
            "supported": [
                [[str(version) for version in each.releases], each.source, each.floor_declared] for each in supported
            ],
            "targets": [[loaded.display, loaded.cache_key] for loaded in targets],
            "named": sorted(named),
            "project": [[loaded.display, loaded.cache_key] for loaded in project],
        }
        return self.cache.run_key(json.dumps(inputs))

    def stored_findings(self, run_key: str | None, progress: Callable[[int, int], None] | None) -> list[Finding] | None:
        """The findings a run with the same inputs stored, if any."""
        if self.cache is None or run_key is None:
            return None
        stored = self.cache.get_run(run_key, [loaded.cache_key for loaded in self.loaded.values()])
        if stored is None:
            return None
        try:
            findings = [Finding.from_json(item) for item in stored]
        except (KeyError, TypeError, ValueError, AttributeError):
            self.cache.note_corrupt_entry()
            return None
        if progress is not None:
            progress(len(self.loaded), len(self.loaded))
        return findings

    def store_findings(self, run_key: str | None, findings: list[Finding]) -> None:
        if self.cache is not None and run_key is not None:
            self.cache.put_run(run_key, [finding.to_json() for finding in findings])

    def check_syntax(self, named: AbstractSet[str]) -> None:
        """Parse the files named on the command line (`named`: absolute paths) that no rule needed:
        they still get an invalid-syntax diagnostic when CPython rejects them. A file found by walking
        a folder that holds no trigger word cannot matter, and is not parsed."""
        started = time.perf_counter()
        requests: list[tuple[LoadedFile, bool]] = []
        for absolute, loaded in self.loaded.items():
            if loaded.target and loaded.record is not None and loaded.summary is None and loaded.error is None:
                if absolute in named:
                    requests.append((loaded, False))
                else:
                    self._finished.add(loaded.display)
        self._fulfil(requests, SYNTAX)
        self.stats.add_time(SYNTAX, started)

    def _fulfil(self, requests: Sequence[tuple[LoadedFile, bool]], stage: str) -> None:
        """Give each file its summary (when asked for) or its syntax verdict, from its record when it
        holds them, else by parsing: over a process pool when there is enough to parse. `stage` names
        the stage of the run for the stats."""
        work: list[tuple[LoadedFile, bool]] = []
        for loaded, want_summary in requests:
            record = loaded.record
            assert record is not None
            if isinstance(record.syntax, tuple):
                loaded.error = syntax_error_finding(loaded.display, SourceError(*record.syntax))
            elif want_summary and record.summary is not None and self._take_summary(loaded, record.summary):
                pass
            elif want_summary or record.syntax is None:
                if record.summary is not None and self.cache is not None:
                    self.cache.note_corrupt_entry()
                record.summary = None
                work.append((loaded, want_summary))
                continue
            self._finished.add(loaded.display)
            self.stats.cached[stage] += 1  # known from the record
        self.stats.summarized[stage] += len(work)
        self._report_progress()
        helpers = self.settings.version_helpers
        encode = self.cache is not None
        tasks: list[Task] = [
            (loaded.source.text if loaded.source else loaded.raw, loaded.module, helpers, want, encode)
            for loaded, want in work
        ]

        def done(indexes: list[int]) -> None:
            self._finished.update(work[index][0].display for index in indexes)
            self._report_progress()

        if any(want for _, want in work):
            import cachelint.summary.walk  # noqa: F401 (once here, not again in each forked worker)
        sizes = [len(loaded.raw) * (SUMMARY_COST if want else 1) for loaded, want in work]
        outcomes = self.workers.map(examine_files, tasks, sizes, done)
        for (loaded, _), outcome in zip(work, outcomes, strict=True):
            self._take_outcome(loaded, outcome)

    def _take_outcome(self, loaded: LoadedFile, outcome: Outcome) -> None:
        """Keep what examining the file found in its record (and the cache), and on the file."""
        syntax, summary, encoded, failure = outcome
        record = loaded.record
        assert record is not None
        record.syntax = syntax
        record.summary = encoded
        if failure is not None:
            loaded.error = internal_error_finding(loaded.display, failure)
        elif isinstance(syntax, tuple):
            loaded.error = syntax_error_finding(loaded.display, SourceError(*syntax))
        elif summary is not None:
            summary.path = loaded.display
            loaded.summary = summary
        self._remember(loaded)

    def _report_progress(self) -> None:
        if self._progress is not None:
            self._progress(len(self._finished), len(self.loaded))

    def _take_summary(self, loaded: LoadedFile, text: str) -> bool:
        from cachelint.summary import FileSummary

        summary = self.cache.decoded(loaded.cache_key) if self.cache is not None else None
        if summary is None or summary.path != loaded.display:
            try:
                summary = FileSummary.from_json(json.loads(text))
            except (KeyError, TypeError, ValueError, AttributeError):
                return False
            summary.path = loaded.display
            if self.cache is not None:
                self.cache.keep_decoded(loaded.cache_key, summary)
        loaded.summary = summary
        return True

    def _remember(self, loaded: LoadedFile) -> None:
        if self.cache is not None and loaded.cache_key and loaded.record is not None:
            self.cache.put(loaded.cache_key, loaded.record)

    def project_files(self) -> list[str]:
        """The files of the project (not below a project of its own; in a loose folder, its own and its
        packages')."""
        if self.root.is_file():
            return [os.fspath(self.root)]
        excludes = Excludes.build(self.root, (*self.settings.exclude, *self.settings.extend_exclude))
        stop = vllm_range.holds_project if vllm_range.marks_project(self.root) else vllm_range.leaves_loose_folder
        return list(walk_python_files(self.root, excludes, stop=stop))

    def load_on_demand(
        self, index_files: list[LoadedFile], project: list[LoadedFile]
    ) -> tuple[ProjectIndex, Callable[[], None]]:
        """Index the summarized files, then summarize the project files that the refit paths may reach
        (cachelint.on_demand says which). Return the index of them all, and a function that grows it by
        the files that may pause before they call a refit root (CL007 asks), and by what the refit
        paths reach then."""
        from cachelint import on_demand
        from cachelint.project import ProjectIndex

        started = time.perf_counter()
        files = {id(loaded): loaded for loaded in (*index_files, *project)}.values()
        index = ProjectIndex(
            [loaded.summary for loaded in index_files if loaded.summary],
            self.settings.worker_extension_classes,
            {part for loaded in files for part in loaded.module.split(".")},
        )
        search = on_demand.Search(files, self.defined_words, self.names_after_quiesce_word)

        def summarize(chosen: list[LoadedFile]) -> None:
            self._fulfil([(loaded, True) for loaded in chosen], ON_DEMAND)

        def grow(callers: bool, started: float) -> None:
            _, rounds = on_demand.grow(index, search, summarize, self.settings.all_refit_functions, callers)
            self.stats.rounds += rounds
            self.stats.add_time(ON_DEMAND, started)

        grow(False, started)
        # The analyzer keeps no reference to `grow`, which holds it: such a cycle would keep every run's
        # index alive until the garbage collector's rare full pass (the language server's memory grew).
        return index, lambda: grow(True, time.perf_counter())

    def defined_words(self, loaded: LoadedFile) -> frozenset[str]:
        """The words after `def ` or `class ` in the file's bytes (`def name\\b` or `class name\\b`
        matches for these and no other ASCII word)."""
        record = loaded.record
        assert record is not None
        if record.defined is None:
            record.defined = defined_in(loaded.raw)
            self._remember(loaded)
        if loaded.display not in self._defined_sets:
            self._defined_sets[loaded.display] = frozenset(record.defined)
        return self._defined_sets[loaded.display]

    def project_bytes(self, naming_sglang: bool = False) -> Iterator[tuple[str, bytes]]:
        """Each readable file of the project (by its shown path, in order) with its bytes, or with
        `naming_sglang` each whose bytes name SGLang in any case: for the SGLang rules' searches, run
        only when one has something to report."""
        for loaded in sorted(self.loaded.values(), key=lambda loaded: loaded.display):
            if loaded.error is None and (not naming_sglang or loaded.holds_any_case(b"sglang")):
                yield loaded.display, loaded.raw

    @functools.cached_property
    def imports_sglang(self) -> bool:
        """Whether a file of the project imports SGLang (each file's answer is kept in its record; a run
        answered by stored findings takes the records from the cache instead of reading every file)."""
        files = list(self.loaded.values())
        self._give_records(files)
        return any(self._imports_sglang(loaded) for loaded in files)

    def _imports_sglang(self, loaded: LoadedFile) -> bool:
        record = loaded.record
        if record is None:
            return imports_sglang(loaded.raw)
        if record.sglang is None:
            record.sglang = imports_sglang(loaded.raw)
            self._remember(loaded)
        return record.sglang

    def names_after_quiesce_word(self, loaded: LoadedFile, names: Sequence[bytes]) -> bool:
        """Whether the file's bytes hold one of `names` and a word naming a pause, drain, sleep or abort.
        With a cache the second is looked for first and kept in the file's record, so that a later run
        need not read the file; without one, only in the files holding a name."""
        record = loaded.record
        assert record is not None
        if record.quiesce is None and self.cache is not None:
            self._note_quiesce_word(loaded, record)
        if record.quiesce is False or not any(name in loaded.raw for name in names):
            return False
        return record.quiesce or self._note_quiesce_word(loaded, record)

    def _note_quiesce_word(self, loaded: LoadedFile, record: FileRecord) -> bool:
        from cachelint.rules.cl007_prefix_reset_may_noop import QUIESCE_WORDS

        record.quiesce = any(word in loaded.raw for word in QUIESCE_WORDS)
        self._remember(loaded)
        return record.quiesce

    def multimodal_evidence(self) -> tuple[Evidence, ...]:
        """Where the files of the project, by path, show that they send multimodal input to vLLM; what
        each file holds is kept in its record, so a warm run looks at no bytes."""
        from cachelint.multimodal import Evidence, find_evidence

        found = []
        for loaded in sorted(self.loaded.values(), key=lambda loaded: loaded.display):
            record = loaded.record
            if record is None:
                continue
            if record.multimodal is None:
                record.multimodal = list(find_evidence(loaded.raw) or ())
                self._remember(loaded)
            if record.multimodal:
                word, line = record.multimodal
                found.append(Evidence(loaded.display, int(line), str(word), self.defined_words(loaded)))
        return tuple(found)

    def summaries_where(self, holds: Callable[[str, bytes], bool]) -> list[FileSummary]:
        """The summaries of the project's files whose shown path and bytes `holds` accepts, parsing
        those not summarized yet (cachelint.text_only asks for few: a folder's, a hierarchy's)."""
        wanted = [
            loaded
            for loaded in self.loaded.values()
            if loaded.error is None and loaded.record is not None and holds(loaded.display, loaded.raw)
        ]
        with collector_paused():
            self._fulfil([(loaded, True) for loaded in wanted if loaded.summary is None], "on demand")
        return [loaded.summary for loaded in wanted if loaded.summary is not None]


# Every suppression directive holds one of these words in lower case ("cachel", not "cachelint": the
# directive's IGNORECASE lets i match two more letters).
DIRECTIVE_WORDS = r"noqa|cachel"


@contextmanager
def collector_paused() -> Iterator[None]:
    """Parsing and summarizing build and drop millions of objects without reference cycles; the
    cyclic garbage collector would only walk them again and again (a quarter of the parse time)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def resolve_range(settings: Settings, root: Path) -> SupportedRange:
    """The supported range of the project at `root` under `settings`; ConfigError when it is empty."""
    try:
        return vllm_range.resolve_range(settings.vllm, settings.vllm_origin, root.parent if root.is_file() else root)
    except vllm_range.EmptyRangeError as error:
        raise ConfigError(str(error)) from error


def resolve_sglang_range(settings: Settings, root: Path) -> SupportedRange:
    """The supported SGLang range of the project at `root`. Pins that allow no SGLang release, known or
    newer, give a range without releases (the SGLang rules that depend on releases then stay silent, and
    a warning says why) rather than an error: a project's vLLM checks must not fail on its SGLang pins.
    An empty `sglang` setting was refused when the configuration was read."""
    folder = root.parent if root.is_file() else root
    try:
        return vllm_range.resolve_range(settings.sglang, settings.sglang_origin, folder, SGLANG)
    except vllm_range.EmptyRangeError as error:
        return SupportedRange((), error.source, notes=(str(error),), dist=SGLANG)


@dataclass
class ProjectPlan:
    """One project of a run: its root, its settings and the files to check in it."""

    root: Path
    settings: Settings
    targets: list[str] = field(default_factory=list)  # as `discover` names them
    walked: bool = False  # the targets are every file of the project: its folder was walked whole

    @functools.cached_property
    def excludes(self) -> Excludes:
        folder = self.root.parent if self.root.is_file() else self.root
        return Excludes.build(folder, (*self.settings.exclude, *self.settings.extend_exclude))


@dataclass(frozen=True)
class ProjectReport:
    """What one project of a run was checked against."""

    root: Path
    supported: SupportedRange
    targets: tuple[str, ...]
    consulted: bool  # the whole project was checked, or some file to check could be flagged
    sglang: SupportedRange | None = None  # the supported SGLang range, when the project uses SGLang


def plan_projects(
    paths: Sequence[Path],
    settings_for: Callable[[Path], Settings],
    force_exclude: bool = False,
    virtual: AbstractSet[Path] = frozenset(),
) -> list[ProjectPlan]:
    """The files to check, grouped by project: each file belongs to its nearest project root and takes
    its own settings (`settings_for(file)`), as ruff resolves configuration per file. A folder is
    walked with its own project's excludes; a file found in it that belongs to another project is
    also left out when that project's excludes cover it. A plan is `walked` when its targets are all
    the files of its project: its root is in a walked folder, no other plan shares the root and the
    walk left out nothing the project's own excludes would not."""
    roots = vllm_range.ProjectRoots()
    plans: dict[tuple[Path, int], ProjectPlan] = {}

    def plan_of(path: Path) -> ProjectPlan:
        settings = settings_for(path)
        key = (roots.of(path), id(settings))
        if key not in plans:
            plans[key] = ProjectPlan(key[0], settings)
        return plans[key]

    by_folder: dict[str, ProjectPlan] = {}
    listing: dict[str, frozenset[str]] = {}  # the entries of each walked folder

    def plan_of_folder(folder: str, walked_from: str) -> ProjectPlan:
        """The plan of the files in `folder` (absolute): its parent folder's when the walk saw that it
        holds no project or config file of its own, else looked up."""
        if folder not in by_folder:
            names = listing.get(folder)
            parent = folder.rpartition(os.sep)[0] or os.sep
            if folder == walked_from or names is None or parent not in listing or _may_differ(names):
                by_folder[folder] = plan_of(Path(folder))
            else:
                by_folder[folder] = plan_of_folder(parent, walked_from)
        return by_folder[folder]

    seen: set[str] = set()
    cwd = str(Path.cwd())
    whole: dict[int, bool] = {}  # by plan: whether every file of its walks came from walking its root
    for path in paths:
        own = plan_of(path)
        walked = path.is_dir()
        walked_from = os.path.abspath(path)
        own_excludes = bool(own.settings.exclude or own.settings.extend_exclude)
        judged: set[int] = set()
        for file in discover([path], own.excludes, force_exclude, virtual, listing):
            absolute = _absolute(file, cwd)
            if absolute in seen:
                continue
            plan = plan_of_folder(absolute.rpartition(os.sep)[0], walked_from) if walked else own
            configured = plan.settings.exclude or plan.settings.extend_exclude
            if plan is not own and configured and plan.excludes.matches(Path(file)):
                continue
            seen.add(absolute)
            plan.targets.append(file)
            if id(plan) not in judged:  # the same for every file of the plan from this path
                judged.add(id(plan))
                inside = walked and _below(os.fspath(plan.root), walked_from) is not None
                whole[id(plan)] = whole.get(id(plan), True) and inside and (plan is own or not own_excludes)
    found = [plan for plan in plans.values() if plan.targets]
    shared = Counter(plan.root for plan in found)
    for plan in found:
        plan.walked = whole.get(id(plan), False) and shared[plan.root] == 1
    return found or [plan_of(paths[0] if paths else Path.cwd())]


def _may_differ(names: frozenset[str]) -> bool:
    """Whether a folder holding the entries `names` may have another project or config than its parent
    (a requirements file makes a project of a folder in a loose folder)."""
    return vllm_range.holds_project(names) or bool(names & _CONFIG_NAMES) or vllm_range.holds_requirements(names)


_CONFIG_NAMES = frozenset(CONFIG_FILE_NAMES)


def analyze(
    paths: Sequence[Path],
    settings: Settings,
    project_root: Path | None = None,
    force_exclude: bool = False,
    overlay: Mapping[Path, bytes] | None = None,
    progress: Callable[[int, int], None] | None = None,
    use_cache: bool = False,
    workers: int | None = None,
    settings_for: Callable[[Path], Settings] | None = None,
    cache: Cache | None = None,
    with_edits: bool = False,
) -> Analysis:
    """Check `paths` (reporting only on them) within the projects that hold them.

    Each file belongs to its nearest project (see `plan_projects`), with the settings
    `settings_for(file)` gives (default: `settings` for every file); each project is indexed on its
    own, with its own supported vLLM range, and the results are merged. `project_root` makes every
    path part of that one project, with `settings`.

    `overlay` maps absolute paths to contents to use instead of what is on disk (fixes in progress,
    source given on stdin); such paths need not exist. `progress(done, total)` is called as files
    are analysed. `use_cache` reads and writes each project's persistent cache; `cache`, when given with
    `project_root`, is used in its place (the language server keeps unsaved buffers out of the file).
    `workers` fixes the number of processes (1: none); by default every core is used when there is
    enough to parse. `with_edits`: give each fix its text edits (made with libcst), for the outputs
    that show them."""
    started = time.perf_counter()
    virtual = frozenset(overlay or ())
    if project_root is not None:
        plan = ProjectPlan(project_root, settings)
        plan.targets = discover(paths, plan.excludes, force_exclude, virtual=virtual)
        plans = [plan]
    else:
        plans = plan_projects(paths, settings_for or (lambda _: settings), force_exclude, virtual)
    named = {os.path.abspath(path) for path in paths if not path.is_dir()}
    stats = RunStats(projects=len(plans), files=sum(len(plan.targets) for plan in plans))
    tasks: list[ProjectTask] = [
        (plan, _whole(plan, paths, force_exclude), named, _overlay_of(plan, overlay), use_cache, with_edits)
        for plan in plans
    ]
    stats.add_time("find", started)
    analyses: dict[int, Analysis] = {}
    done = [0]

    def told() -> Callable[[int, int], None] | None:
        return _offset(progress, done[0])

    with parallel.Workers(workers) as pool:  # one pool for every project of the run
        parallel.load_while_waiting(_import_analysis)
        prepared: dict[int, ProjectRun] = {}
        if use_cache and len(plans) > 1 and all(plan.walked for plan in plans):
            # First what the caches answer, here: an unchanged project needs no process of its own.
            for index, task in enumerate(tasks):
                if _has_cache(task[0]):
                    run = prepared[index] = ProjectRun(*task, pool, stats)
                    findings = run.stored(told(), unread_only=True)
                    if findings is not None:
                        analyses[index] = run.report(findings)
                        done[0] += analyses[index].files_checked
        left = [index for index in range(len(tasks)) if index not in analyses]
        sizes = _side_by_side([plans[index] for index in left], overlay or {}, workers)
        if sizes:

            def finished(indexes: list[int]) -> None:
                done[0] += sum(len(plans[left[index]].targets) for index in indexes)
                if progress is not None:
                    progress(done[0], stats.files)

            for run in prepared.values():
                run.close()
            _import_analysis()
            outcomes = pool.map(analyze_projects, [tasks[index] for index in left], sizes, finished)
            for index, (analysis, project_stats) in zip(left, outcomes, strict=True):
                analyses[index] = analysis
                stats.add(project_stats)
        else:
            for index in left:
                run = prepared.get(index) or ProjectRun(*tasks[index], pool, stats, cache=cache)
                analyses[index] = run.answer(told())
                done[0] += analyses[index].files_checked
    for recorder in _recording:
        recorder.add(stats)
    ordered = [analyses[index] for index in range(len(tasks))]
    result = ordered[0] if len(ordered) == 1 else _merged(ordered)
    result.warnings = [*take_warnings(), *result.warnings]  # .gitignore lines the walks could not read
    return result


ProjectTask = tuple[ProjectPlan, bool, AbstractSet[str], "Mapping[Path, bytes] | None", bool, bool]


def analyze_projects(tasks: list[ProjectTask]) -> list[tuple[Analysis, RunStats]]:
    """Whole projects, one after the other, each in this process alone (in a pool worker)."""
    results = []
    for task in tasks:
        stats = RunStats()
        with parallel.Workers(1) as pool:
            results.append((ProjectRun(*task, pool, stats).answer(None), stats))
    return results


def _import_analysis() -> None:
    """Import (and load the facts of) what analysing a project needs, once here rather than again in
    each forked worker, or while the pool summarizes."""
    import cachelint.on_demand
    import cachelint.project
    import cachelint.summary.walk  # noqa: F401
    from cachelint.facts import load_facts, load_sglang_facts
    from cachelint.rules import ALL_RULES  # noqa: F401

    load_facts()
    load_sglang_facts()


def _has_cache(plan: ProjectPlan) -> bool:
    """Whether the project's cache exists: whether its findings may be stored."""
    from cachelint.cache import DATABASE, cache_folder

    folder = plan.root.parent if plan.root.is_file() else plan.root
    return (cache_folder(plan.settings, folder) / DATABASE).is_file()


def _whole(plan: ProjectPlan, paths: Sequence[Path], force_exclude: bool) -> bool:
    """Whether the run checks the whole project: its root is the one path given."""
    return len(paths) == 1 and not force_exclude and os.path.abspath(paths[0]) == os.path.abspath(plan.root)


def _overlay_of(plan: ProjectPlan, overlay: Mapping[Path, bytes] | None) -> Mapping[Path, bytes] | None:
    """The part of `overlay` below the plan's root."""
    if not overlay:
        return overlay
    root = os.path.abspath(plan.root)
    return {path: raw for path, raw in overlay.items() if _below(os.fspath(path), root) is not None}


def _may_go_side_by_side(plans: list[ProjectPlan], workers: int | None) -> bool:
    """Several projects, each walked whole (its files are its targets, so their size is its work),
    and more than one core to run them on."""
    return len(plans) > 1 and all(plan.walked for plan in plans) and parallel.worker_count(1 << 40, workers) > 1


def _side_by_side(plans: list[ProjectPlan], overlay: Mapping[Path, bytes], workers: int | None) -> list[int]:
    """The size in bytes of each project, when the projects are best analysed side by side, each in a
    process of its own; else nothing. They are when they may (`_may_go_side_by_side`), no project
    outweighs the others together, and the work deserves a pool."""
    if not _may_go_side_by_side(plans, workers):
        return []
    sizes = [sum(_size(path, overlay) for path in plan.targets) for plan in plans]
    if max(sizes) * 2 > sum(sizes) or parallel.worker_count(sum(sizes), workers) <= 1:
        return []
    return sizes


def _size(path: str, overlay: Mapping[Path, bytes]) -> int:
    raw = overlay.get(Path(os.path.abspath(path))) if overlay else None
    if raw is not None:
        return len(raw)
    try:
        return os.stat(path).st_size  # noqa: PTH116
    except OSError:
        return 0


def _offset(progress: Callable[[int, int], None] | None, before: int) -> Callable[[int, int], None] | None:
    """`progress` for a project analysed after others that held `before` files."""
    if progress is None or not before:
        return progress
    report = progress
    return lambda done, total: report(before + done, before + total)


class ProjectRun:
    """One project of a run: its files keyed (from their sizes, times and inodes when an earlier run
    recorded them, else read), its findings taken from the cache when a run with the same inputs
    stored them, else found; then reported."""

    def __init__(
        self,
        plan: ProjectPlan,
        whole: bool,
        named: AbstractSet[str],
        overlay: Mapping[Path, bytes] | None,
        use_cache: bool,
        with_edits: bool,
        pool: parallel.Workers,
        stats: RunStats,
        cache: Cache | None = None,
    ) -> None:
        root, settings = plan.root, plan.settings
        self.with_edits = with_edits
        self.plan, self.whole, self.named, self.overlay, self.stats = plan, whole, named, overlay, stats
        self.started_ns = _now_ns()
        self.folder = root.parent if root.is_file() else root
        started = time.perf_counter()
        self.supported = resolve_range(settings, root)  # before the code's tests of vLLM's version
        self.checked = self.supported  # after them (vllm_range.widen_by_code)
        self.sglang = resolve_sglang_range(settings, root)
        if cache is None and use_cache and vllm_range.marks_project(self.folder):
            # A file in no project (a loose folder such as /etc, or one not on disk) gets no cache.
            cache = Cache.for_run(settings, self.folder)
        self.cache = cache
        stats.add_time("find", started)
        self.analyzer = Analyzer(settings, root, overlay=overlay, cache=self.cache, pool=pool)
        self.walked = (whole or plan.walked) and root.is_dir()
        self.target_files: list[LoadedFile] = []
        self.project: list[LoadedFile] = []
        self.consulted = whole or self.walked
        self.run_key: str | None = None
        self.unread = False  # answered from the cache without reading the files
        self.imports_sglang = False  # a file imports SGLang (looked for when no SGLang range is pinned or set)
        self.recorded: dict[str, Any] | None = None  # what the last run recorded of the project's files
        self.covers_project = False  # the files of a run on some files were those of a whole run

    def read(self) -> None:
        """Read the targets and, when the range can matter (a whole project is checked, or a target
        could be flagged; else no rule can flag a target), the rest of the project."""
        analyzer, targets = self.analyzer, self.plan.targets
        self.target_files = [analyzer.read(path, target=True) for path in targets]
        self.consulted = self.consulted or analyzer.any_holds_trigger(self.target_files)
        if self.walked:
            self.project = self.target_files
        elif self.consulted:
            manifest = self.recorded = self._manifest()
            found = analyzer.project_files()
            paths = [*found, *targets]
            if manifest is None:
                self.project = [analyzer.read(path) for path in paths]
            else:  # the files unchanged since the last run that recorded them are read only if asked for
                self.project, _ = analyzer.keyed(paths, manifest["files"], target=False)
            # Nothing else is loaded yet (by absolute path): no entry beyond the project's files means the
            # targets are among them, and the files of this run are those of a whole run.
            self.covers_project = len(analyzer.loaded) == len(found)
        self.run_key = analyzer.run_key(self.target_files, self.project, self.ranges, self.named)

    def stored(self, progress: Callable[[int, int], None] | None, unread_only: bool = False) -> list[Finding] | None:
        """The findings a run with the same inputs stored, if any; `unread_only`: only when the files'
        sizes, times and inodes tell that nothing changed."""
        findings = self._stored_unread(progress)
        if findings is None and not unread_only:
            self.read()
            findings = self.analyzer.stored_findings(self.run_key, progress)
        if findings is not None:
            self.analyzer.stats.stored += 1
        return findings

    def _stored_unread(self, progress: Callable[[int, int], None] | None) -> list[Finding] | None:
        manifest = self.recorded = self._manifest() if self.walked and not self.overlay else None
        if manifest is None:
            return None
        if self.sglang.assumed and not isinstance(manifest.get("imports sglang"), bool):
            return None  # recorded under a pinned SGLang range: no file was searched for an SGLang import
        started = time.perf_counter()
        files, read = self.analyzer.keyed(self.plan.targets, manifest["files"])
        self.stats.add_time("read", started)
        run_key = self.analyzer.run_key(files, files, self.ranges, self.named)
        findings = self.analyzer.stored_findings(run_key, progress)
        if findings is None:
            self.analyzer.loaded.clear()
            self.analyzer.stats.read -= read  # read again below
            return None
        self.imports_sglang = manifest.get("imports sglang") is True
        if read:  # the files read now are recorded too
            self._put_manifest()
        self.target_files = self.project = files
        self.run_key, self.unread = run_key, True
        return findings

    def _manifest(self) -> dict[str, Any] | None:
        """What the last run that keyed or read every file of the project recorded of them (see
        `_put_manifest`), if any."""
        if self.cache is None:
            return None
        text = self.cache.get_text(self._manifest_key())
        try:
            manifest = json.loads(text) if text else None
        except ValueError:
            return None
        if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
            return None
        return manifest

    def _put_manifest(self) -> None:
        """Record the signature and cache key of each file read, and whether one imports SGLang, for
        the next run to answer from them without reading."""
        assert self.cache is not None
        manifest: dict[str, Any] = {"files": self.analyzer.manifest(self.started_ns)}
        if self.sglang.assumed:  # else no file was searched for an SGLang import
            manifest["imports sglang"] = self.imports_sglang
        if manifest != self.recorded:
            self.cache.put_text(self._manifest_key(), json.dumps(manifest))

    @property
    def ranges(self) -> tuple[SupportedRange, SupportedRange]:
        return self.supported, self.sglang

    def _manifest_key(self) -> str:
        assert self.cache is not None
        return self.cache.run_key(json.dumps({"files of": os.path.abspath(self.folder)}))

    def answer(self, progress: Callable[[int, int], None] | None) -> Analysis:
        """The stored findings, else those found now (and stored)."""
        findings = self.stored(progress)
        if findings is None:
            findings, tests = _find(self.analyzer, self.target_files, self.project, self.ranges, self.named, progress)
            self.analyzer.store_findings(self.run_key, findings)
            self._put_code_tests(tests)
        else:
            tests = self._code_tests()
        self.checked = vllm_range.widen_by_code(self.supported, tests)
        return self.report(findings)

    def _code_tests_key(self) -> str | None:
        if self.cache is None or self.run_key is None:
            return None
        return self.cache.run_key(json.dumps({"code tests of": self.run_key}))

    def _put_code_tests(self, tests: list[tuple[Version, str, str]]) -> None:
        """Keep the project's tests of vLLM's version beside its findings (they widened its range), as a
        run entry of their own: a run over unsaved editor buffers keeps them out of the file as it keeps
        its findings. None is kept when there are none."""
        key = self._code_tests_key()
        if key is not None and self.cache is not None and tests:
            entries = [
                {"release": str(release), "operator": operator, "where": where} for release, operator, where in tests
            ]
            self.cache.put_run(key, entries)

    def _code_tests(self) -> list[tuple[Version, str, str]]:
        key = self._code_tests_key()
        entries = self.cache.get_run(key, []) if key is not None and self.cache is not None else None
        try:
            return [(Version(item["release"]), item["operator"], item["where"]) for item in entries or ()]
        except (KeyError, TypeError, ValueError):
            return []

    def close(self) -> None:
        """Let the cache go, for another process to answer."""
        if self.cache is not None:
            self.cache.flush()

    def report(self, findings: list[Finding]) -> Analysis:
        if not self.unread:
            if self.sglang.assumed:  # a pinned or set SGLang range is shown anyway
                self.imports_sglang = self.analyzer.imports_sglang
            if self.cache is not None and (self.walked or self.covers_project) and not self.overlay:
                self._put_manifest()
        analyzer = self.analyzer
        analyzer.stats.trigger = sum(1 for file in analyzer.loaded.values() if file.record and file.record.trigger)
        late = [loaded for loaded in analyzer.loaded.values() if loaded.read_late]
        analyzer.stats.read += len(late)
        analyzer.stats.read_bytes += sum(len(loaded.raw) for loaded in late)
        self.stats.add(analyzer.stats)
        with_findings = {finding.path for finding in findings}
        sources = {
            loaded.display: source
            for loaded in self.target_files
            if (loaded.display in with_findings or loaded.source is not None) and (source := loaded.decoded())
        }
        if self.with_edits:
            # Made with libcst, once: the stored findings keep the edits for the next run that shows them.
            from cachelint import codemod

            if any(codemod.lacks_edits(finding) for finding in findings):
                findings = codemod.with_edits(findings, codemod.reader(sources))
                analyzer.store_findings(self.run_key, findings)
        uses_sglang = not self.sglang.assumed or self.imports_sglang
        self.close()
        shown = [loaded.display for loaded in self.target_files]
        return Analysis(
            findings=sorted(set(findings), key=Finding.sort_key),
            sources=sources,
            files_checked=len(self.plan.targets),
            supported=self.checked,
            root=self.folder,
            targets=shown,
            warnings=[self.cache.warning] if self.cache is not None and self.cache.warning else [],
            projects=[
                ProjectReport(
                    self.folder, self.checked, tuple(shown), self.consulted, self.sglang if uses_sglang else None
                )
            ],
        )


def _merged(analyses: list[Analysis]) -> Analysis:
    """One report for the projects of a run: findings sorted as in one, the roots' common folder."""
    findings = [finding for analysis in analyses for finding in analysis.findings]
    return Analysis(
        findings=sorted(set(findings), key=Finding.sort_key),
        sources={path: source for analysis in analyses for path, source in analysis.sources.items()},
        files_checked=sum(analysis.files_checked for analysis in analyses),
        supported=analyses[0].supported,
        root=Path(os.path.commonpath([os.path.abspath(analysis.root) for analysis in analyses])),
        targets=[target for analysis in analyses for target in analysis.targets],
        warnings=list(dict.fromkeys(warning for analysis in analyses for warning in analysis.warnings)),
        projects=sorted((project for analysis in analyses for project in analysis.projects), key=lambda p: p.root),
    )


def _find(
    analyzer: Analyzer,
    target_files: list[LoadedFile],
    project: list[LoadedFile],
    supported: tuple[SupportedRange, SupportedRange],
    named: AbstractSet[str],
    progress: Callable[[int, int], None] | None,
) -> tuple[list[Finding], list[tuple[Version, str, str]]]:
    """The findings, and the project's tests of vLLM's version that widen its range (`widen_by_code`)."""
    settings = analyzer.settings
    tests: list[tuple[Version, str, str]] = []
    with collector_paused():
        analyzer.examine(progress)
        index_files = [loaded for loaded in {id(f): f for f in [*target_files, *project]}.values() if loaded.summary]
        grown = analyzer.load_on_demand(index_files, project) if index_files else None
        analyzer.check_syntax(named)
    started = time.perf_counter()
    context = None
    if grown is not None and any(loaded.summary for loaded in target_files):
        index, load_callers = grown
        tests = _version_tests(index)
        supported = (vllm_range.widen_by_code(supported[0], tests), supported[1])
        context = _rules_context(analyzer, index, supported)
        if _callers_may_matter(analyzer, context, target_files):
            loading = time.perf_counter()
            with collector_paused():
                load_callers()
            started += time.perf_counter() - loading  # on-demand time, not the rules'
    findings = [loaded.error for loaded in target_files if loaded.error is not None]
    clean = [loaded for loaded in target_files if loaded.error is None]
    summaries = [loaded.summary for loaded in clean if loaded.summary is not None]
    if summaries and context is not None:
        for summary in summaries:
            findings.extend(run_rules(analyzer.rules, summary, context))
        analyzer.stats.ruled += len(summaries)
    kept = apply_suppressions(findings, clean, settings, analyzer.root_folder)
    analyzer.stats.add_time("rules", started)
    return kept, tests


def _version_tests(index: ProjectIndex) -> list[tuple[Version, str, str]]:
    """Each comparison of vLLM's version with a release in the indexed files: the release, the operator
    (the installed version on its left) and where it is."""
    return [
        (
            Version(comparison.threshold),
            comparison.operator,
            f"{path}:{comparison.span.line}: {' '.join(comparison.text.split())}",
        )
        for path, summary in sorted(index.files.items())
        for comparison in summary.version_comparisons
        if comparison.engine == "vllm"
    ]


def _rules_context(
    analyzer: Analyzer, index: ProjectIndex, supported: tuple[SupportedRange, SupportedRange]
) -> Context:
    from cachelint.facts import load_facts, load_sglang_facts
    from cachelint.rules import Context

    vllm, sglang = supported
    return Context(
        index,
        vllm,
        analyzer.settings,
        load_facts(),
        analyzer.multimodal_evidence,
        sglang=sglang,
        sglang_facts=load_sglang_facts(),
        project_bytes=analyzer.project_bytes,
        sglang_bytes=functools.partial(analyzer.project_bytes, naming_sglang=True),
        imports_sglang=lambda: analyzer.imports_sglang,
        summaries_where=analyzer.summaries_where,
    )


def _callers_may_matter(analyzer: Analyzer, context: Context, target_files: list[LoadedFile]) -> bool:
    """Whether CL007 would flag a reset in `target_files` on the index as it is. A reset it flags may
    yet be spared by a function anywhere in the project that pauses before it calls the refit root: the
    files of such callers are summarized only then (most projects' resets are not flagged at all)."""
    if not any(rule.info.code == "CL007" for rule in analyzer.rules):
        return False
    from cachelint.rules.cl007_prefix_reset_may_noop import noop_risks

    paths = {loaded.summary.path for loaded in target_files if loaded.summary is not None}
    try:
        return any(risk.reached.ref.file.path in paths for risk in noop_risks(context))
    except Exception:  # a rule bug: the rule's own run reports it
        return True


def apply_suppressions(
    findings: list[Finding], clean: list[LoadedFile], settings: Settings, root: Path
) -> list[Finding]:
    """Drop suppressed findings, then per-file-ignores; report unused suppressions (CL100).

    Only files that can matter are tokenized: those with findings and a possible directive, and those
    with a directive that can be unused (cachelint's own, or a `noqa` naming a CL code)."""
    from cachelint.suppress import UNUSED_SUPPRESSION_CODE, apply, may_be_reported_unused, parse_suppressions

    with_findings = {finding.path for finding in findings}
    report_unused = settings.is_enabled(UNUSED_SUPPRESSION_CODE)
    suppressions = {}
    for loaded in clean:
        has_findings = loaded.display in with_findings
        if not (report_unused or has_findings) or not _may_hold_directive(loaded):
            continue
        source = loaded.decoded()
        if source is None:
            continue
        if _holds(DIRECTIVE_WORDS, source.text) if has_findings else may_be_reported_unused(source.text):
            suppressions[loaded.display] = parse_suppressions(source.text)
    kept, used = apply(findings, suppressions)
    kept = [finding for finding in kept if not _ignored_for_file(finding, settings, root)]
    if settings.is_enabled(UNUSED_SUPPRESSION_CODE) and suppressions:
        from cachelint.rules.cl100_unused_suppression import UnusedSuppression

        unused = UnusedSuppression().unused(suppressions, used, settings.is_enabled)
        kept.extend(finding for finding in unused if not _ignored_for_file(finding, settings, root))
    return kept


def _may_hold_directive(loaded: LoadedFile) -> bool:
    """Whether the file's bytes may hold a directive: a quick test, as a directive's words are ASCII and
    Python source encodings are ASCII-compatible (not "cachelint": IGNORECASE lets i match two more)."""
    return loaded.holds_any_case(b"noqa") or loaded.holds_any_case(b"cachel")


def _holds(words: str, text: str) -> bool:
    """Whether `words` (a lower-case pattern of the letters a, c, l, n, o, q) matches in `text` ignoring
    case. No other letter lower-cases to one of these, so lower-casing the text is as good as IGNORECASE,
    and much faster."""
    return re.search(words, text.lower()) is not None


def _ignored_for_file(finding: Finding, settings: Settings, root: Path) -> bool:
    if not settings.per_file_ignores or not finding.is_rule:
        return False
    absolute = Path(os.path.abspath(finding.path))
    try:
        relative = absolute.relative_to(Path(os.path.abspath(root))).as_posix()
    except ValueError:
        relative = finding.path
    for pattern, codes in settings.per_file_ignores:
        spec, unreadable = gitignore_spec([pattern])
        if unreadable:  # the settings files are checked as they are read: this came from the API
            raise ConfigError(f"`per-file-ignores`: {pattern!r} is not a gitignore-style pattern cachelint can read")
        if spec.match_file(relative) and any(selector_matches(code, finding.code) for code in codes):
            return True
    return False


def run_rules(rules: Iterable[Rule], summary: FileSummary, context: Context) -> list[Finding]:
    from cachelint.rules.fix_safety import vetted

    findings: list[Finding] = []
    for rule in rules:
        try:
            findings.extend(vetted(finding, context) for finding in rule.check(summary, context))
        except Exception as error:  # a rule bug is reported against the file, the run goes on
            findings.append(internal_error_finding(summary.path, error))
    return findings
