"""The pipeline: discover files, summarize the project once, run the rules, return the findings."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from cachelint.config import Settings
from cachelint.discovery import Excludes, discover, walk_python_files
from cachelint.facts import load_facts
from cachelint.finding import INTERNAL_ERROR, INVALID_SYNTAX, IO_ERROR, Finding, Span
from cachelint.project import GENERIC_NAMES, ProjectIndex
from cachelint.rules import ALL_RULES, Context, Rule
from cachelint.rules.cl100_unused_suppression import UnusedSuppression
from cachelint.source import SourceError, SourceFile, decode_source, parse_python
from cachelint.summary import FileSummary, module_name_for, summarize
from cachelint.suppress import UNUSED_SUPPRESSION_CODE, apply, parse_suppressions
from cachelint.vllm_range import SupportedRange, find_project_root, from_specifier, read_supported_range

# Bytes that any file the rules or the call graph can use must contain.
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
    b"update_weight",
    b"sync_weight",
    b"broadcast_to",
    b"_move_model_to_vllm",
    b"refit",
    b"load_states",
    b"reload_weights",
)


def has_trigger(raw: bytes, extra: Iterable[bytes] = ()) -> bool:
    return any(word in raw for word in TRIGGER_WORDS) or any(word in raw for word in extra)


def display_path(path: Path) -> str:
    """`path` relative to the working directory when below it, else absolute; POSIX separators."""
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return absolute.as_posix()


@dataclass
class LoadedFile:
    path: Path
    display: str
    source: SourceFile | None = None
    raw: bytes = b""
    summary: FileSummary | None = None
    error: Finding | None = None


@dataclass
class Analysis:
    findings: list[Finding]
    sources: dict[str, SourceFile]
    files_checked: int
    supported: SupportedRange
    root: Path
    targets: list[str] = field(default_factory=list)


def syntax_error_finding(display: str, error: SourceError) -> Finding:
    return Finding(display, error.span, INVALID_SYNTAX, INVALID_SYNTAX, error.message)


def internal_error_finding(display: str, error: BaseException) -> Finding:
    message = f"cachelint failed on this file: {type(error).__name__}: {error}"
    return Finding(display, Span(1, 1, 1, 1), INTERNAL_ERROR, INTERNAL_ERROR, message)


class Analyzer:
    """One run over one project root."""

    def __init__(self, settings: Settings, root: Path, rules: Sequence[Rule] = ALL_RULES) -> None:
        self.settings = settings
        self.root = root
        self.rules = [rule for rule in rules if settings.is_enabled(rule.info.code) and rule.info.code != "CL100"]
        self.loaded: dict[Path, LoadedFile] = {}
        self.refit_words = tuple(name.encode() for name in settings.all_refit_functions)
        self.root_folder = root if root.is_dir() else root.parent

    def load(self, path: Path, parse_always: bool) -> LoadedFile:
        key = Path(os.path.abspath(path))
        if key in self.loaded:
            return self.loaded[key]
        loaded = LoadedFile(path, display_path(path))
        self.loaded[key] = loaded
        try:
            raw = path.read_bytes()
        except OSError as error:
            message = f"cannot read file: {error.strerror or error}"
            loaded.error = Finding(loaded.display, Span(1, 1, 1, 1), IO_ERROR, IO_ERROR, message)
            return loaded
        loaded.raw = raw
        try:
            loaded.source = decode_source(raw)
        except SourceError as error:
            loaded.error = syntax_error_finding(loaded.display, error)
            return loaded
        if not has_trigger(raw, self.refit_words) and not parse_always:
            return loaded
        self._summarize(loaded)
        return loaded

    def _summarize(self, loaded: LoadedFile) -> None:
        assert loaded.source is not None
        text = loaded.source.text
        try:
            tree = parse_python(text)
        except SourceError as error:
            loaded.error = syntax_error_finding(loaded.display, error)
            return
        try:
            loaded.summary = summarize(
                loaded.display, text, tree, self.settings.version_helpers, self._module_name(loaded.path)
            )
        except RecursionError:
            loaded.error = syntax_error_finding(loaded.display, SourceError("too deeply nested to analyse"))
        except Exception as error:  # one odd file must not stop the run
            loaded.error = internal_error_finding(loaded.display, error)

    def _module_name(self, path: Path) -> str:
        try:
            relative = Path(os.path.abspath(path)).relative_to(Path(os.path.abspath(self.root)))
        except ValueError:
            relative = Path(path.name)
        return module_name_for(relative.as_posix())

    def syntax_check(self, loaded: LoadedFile) -> None:
        """Files the rules skip still get an invalid-syntax diagnostic when CPython rejects them."""
        if loaded.summary is None and loaded.error is None and loaded.source is not None:
            try:
                parse_python(loaded.source.text)
            except SourceError as error:
                loaded.error = syntax_error_finding(loaded.display, error)

    def project_files(self, targets: Sequence[Path]) -> list[Path]:
        if self.root.is_file():
            return [self.root]
        excludes = Excludes.build(self.root, (*self.settings.exclude, *self.settings.extend_exclude))
        return [*walk_python_files(self.root, excludes), *targets]

    def load_on_demand(self, index_files: list[LoadedFile], unparsed: list[Path]) -> None:
        """Parse the files that define what the refit paths call but the index lacks, and the files
        that override a method holding a processor-cache workaround."""
        for _ in range(4):
            index = ProjectIndex([loaded.summary for loaded in index_files if loaded.summary])
            wanted = self._unresolved_refit_calls(index) | {
                workaround.function.rsplit(".", 1)[-1]
                for summary in index.files.values()
                for workaround in summary.workarounds
                if workaround.cls
            }
            if not wanted:
                return
            pattern = re.compile(rb"def (?:" + b"|".join(re.escape(w.encode()) for w in sorted(wanted)) + rb")\b")
            added = []
            for path in unparsed:
                loaded = self.loaded.get(Path(os.path.abspath(path)))
                if loaded is None or loaded.summary or loaded.error or loaded.source is None:
                    continue
                if pattern.search(loaded.raw):
                    self._summarize(loaded)
                    if loaded.summary is not None:
                        added.append(loaded)
            if not added:
                return
            index_files.extend(added)

    def _unresolved_refit_calls(self, index: ProjectIndex) -> set[str]:
        roots = self.settings.all_refit_functions
        wanted: set[str] = set()
        for ref in index.functions():
            if ref.function.name not in roots:
                continue
            for reached in index.reachable(ref):
                for call in reached.ref.function.calls:
                    if not call.receiver_class and not index.resolve(reached.ref.file, reached.ref.function, call):
                        wanted.add(call.name)
        return wanted - GENERIC_NAMES


def resolve_range(settings: Settings, root: Path) -> SupportedRange:
    if settings.vllm:
        return from_specifier(settings.vllm, "set by configuration")
    return read_supported_range(root if root.is_dir() else root.parent)


def analyze(
    paths: Sequence[Path],
    settings: Settings,
    project_root: Path | None = None,
    force_exclude: bool = False,
) -> Analysis:
    """Check `paths` (reporting only on them) within the project that holds them."""
    root = project_root or find_project_root(paths[0] if paths else Path.cwd())
    excludes = Excludes.build(root if root.is_dir() else root.parent, (*settings.exclude, *settings.extend_exclude))
    targets = discover(paths, excludes, force_exclude)
    analyzer = Analyzer(settings, root)
    supported = resolve_range(settings, root)
    target_files = [analyzer.load(path, parse_always=False) for path in targets]
    project = [analyzer.load(path, parse_always=False) for path in analyzer.project_files(targets)]
    index_files = [loaded for loaded in {id(f): f for f in [*target_files, *project]}.values() if loaded.summary]
    analyzer.load_on_demand(index_files, [f.path for f in project])
    index = ProjectIndex(
        [loaded.summary for loaded in index_files if loaded.summary],
        settings.worker_extension_classes,
    )
    context = Context(index, supported, settings, load_facts())
    findings: list[Finding] = []
    clean: list[LoadedFile] = []
    for loaded in target_files:
        analyzer.syntax_check(loaded)
        if loaded.error is not None:
            findings.append(loaded.error)
            continue
        clean.append(loaded)
        if loaded.summary is not None:
            findings.extend(run_rules(analyzer.rules, loaded.summary, context))
    findings = apply_suppressions(findings, clean, settings, analyzer.root_folder)
    sources = {loaded.display: loaded.source for loaded in target_files if loaded.source is not None}
    return Analysis(
        findings=sorted(set(findings), key=Finding.sort_key),
        sources=sources,
        files_checked=len(target_files),
        supported=supported,
        root=root if root.is_dir() else root.parent,
        targets=[loaded.display for loaded in target_files],
    )


def apply_suppressions(
    findings: list[Finding], clean: list[LoadedFile], settings: Settings, root: Path
) -> list[Finding]:
    """Drop suppressed findings, then per-file-ignores; report unused suppressions (CL100)."""
    suppressions = {
        loaded.display: parse_suppressions(loaded.source.text) for loaded in clean if loaded.source is not None
    }
    kept, used = apply(findings, suppressions)
    kept = [finding for finding in kept if not _ignored_for_file(finding, settings, root)]
    if settings.is_enabled(UNUSED_SUPPRESSION_CODE):
        unused = UnusedSuppression().unused(suppressions, used, settings.is_enabled)
        kept.extend(finding for finding in unused if not _ignored_for_file(finding, settings, root))
    return kept


def _ignored_for_file(finding: Finding, settings: Settings, root: Path) -> bool:
    if not settings.per_file_ignores or not finding.is_rule:
        return False
    absolute = Path(os.path.abspath(finding.path))
    try:
        relative = absolute.relative_to(Path(os.path.abspath(root))).as_posix()
    except ValueError:
        relative = finding.path
    for pattern, codes in settings.per_file_ignores:
        spec = pathspec.GitIgnoreSpec.from_lines([pattern])
        if spec.match_file(relative) and any(finding.code.startswith(code) for code in codes):
            return True
    return False


def run_rules(rules: Iterable[Rule], summary: FileSummary, context: Context) -> list[Finding]:
    findings: list[Finding] = []
    for rule in rules:
        try:
            findings.extend(rule.check(summary, context))
        except Exception as error:  # a rule bug is reported against the file, the run goes on
            findings.append(internal_error_finding(summary.path, error))
    return findings
