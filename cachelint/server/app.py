"""The language server: open documents in; diagnostics, code actions and hovers out.

Every open Python file belongs to a scope (its project root and settings, `projects.resolve_scope`).
A change to a file of a scope analyses all the open files of that scope together, with their unsaved
texts as the engine's overlay, on one analysis thread; the diagnostics of each of them are published
again when they changed, so that a cross-file finding (CL003) appears or vanishes in the file it is
reported in when the other file is edited.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidRequest
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method
from pygls.uris import from_fs_path, to_fs_path

from cachelint import __version__
from cachelint.config import ConfigError
from cachelint.discovery import PYTHON_SUFFIXES
from cachelint.fixes import fix_to_fixed_point
from cachelint.server.actions import (
    FIX_ALL,
    Change,
    Entry,
    fix_action,
    fix_all_action,
    has_safe_fix,
    noqa_action,
    wanted,
    workspace_edit,
)
from cachelint.server.analysis import BufferMemory, OpenFile, Outcome, Snapshot, run_analysis
from cachelint.server.diagnostics import SOURCE, ClientFeatures, Texts, contains, diagnostic, hover_text, overlaps
from cachelint.server.documents import Document, SourceText, buffer_bytes
from cachelint.server.projects import (
    PROJECT_FILE_PATTERNS,
    Scope,
    broken_config_file,
    client_overrides,
    is_project_file,
    resolve_scope,
)
from cachelint.server.scheduler import Scheduler
from cachelint.vllm_range import SupportedRange

DEFAULT_DEBOUNCE_MS = 150
# How long a code action or hover waits for the analysis of the latest text before answering anyway.
SETTLE_TIMEOUT_SECONDS = 10.0

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConfigProblem:
    """Why a file's scope could not be resolved: an invalid configuration file."""

    message: str
    config_file: Path | None


@dataclass(frozen=True)
class Analysed:
    """The findings of one analysis, each with its diagnostic, by document URI."""

    outcome: Outcome
    entries: dict[str, list[Entry]]


@dataclass(frozen=True)
class Published:
    """What the client was last told about one document."""

    version: int | None
    entries: list[Entry]
    supported: SupportedRange


class Protocol(LanguageServerProtocol):
    """pygls's protocol, except that a request after `shutdown` gets the InvalidRequest error the LSP
    asks for (pygls leaves it unanswered, and the client waits)."""

    def handle_message(self, message: Any) -> None:
        method = getattr(message, "method", None)
        if self._shutdown and method not in (None, types.EXIT) and getattr(message, "id", None) is not None:
            error = JsonRpcInvalidRequest(f"{method}: the server was shut down").to_response_error()
            self._send_response(message.id, error=error)
            return
        super().handle_message(message)

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams) -> Any:
        """The server's own handler only: pygls would also apply each change to a copy of the document
        it keeps (and cachelint never reads), splitting the whole text into lines at every keystroke."""
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None


class CachelintServer:
    def __init__(self) -> None:
        self.ls = LanguageServer(
            "cachelint",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            protocol_cls=Protocol,
        )
        self.shut_down = False
        self.reload_timer: asyncio.TimerHandle | None = None  # a reload waiting for changes to pause
        self.features = ClientFeatures()
        self.debounce = DEFAULT_DEBOUNCE_MS / 1000
        self.overrides: dict[str, Any] = {}  # the editor's settings (`client_overrides`)
        self.documents: dict[str, Document] = {}
        self.scopes: dict[Path, Scope | ConfigProblem] = {}  # by document path, until a project file changes
        self.published: dict[str, Published] = {}
        self.config_diagnostics: dict[Path, str] = {}  # the configuration files with a diagnostic, and its message
        self.memory = BufferMemory()
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cachelint-analysis")
        self.scheduler: Scheduler[Scope, Analysed] = Scheduler(self.executor, self.prepare, self.deliver, self.failed)
        self._register()

    def _register(self) -> None:
        handlers: Sequence[tuple[str, Callable[..., Any], Any]] = (
            (types.INITIALIZE, self.initialize, None),
            (types.INITIALIZED, self.initialized, None),
            (types.SHUTDOWN, self.shutdown, None),
            (types.TEXT_DOCUMENT_DID_OPEN, self.did_open, None),
            (types.TEXT_DOCUMENT_DID_CHANGE, self.did_change, None),
            (types.TEXT_DOCUMENT_DID_SAVE, self.did_save, types.SaveOptions(include_text=False)),
            (types.TEXT_DOCUMENT_DID_CLOSE, self.did_close, None),
            (types.WORKSPACE_DID_CHANGE_WATCHED_FILES, self.did_change_watched_files, None),
            (types.WORKSPACE_DID_CHANGE_CONFIGURATION, self.did_change_configuration, None),
            (types.TEXT_DOCUMENT_HOVER, self.hover, None),
            (
                types.TEXT_DOCUMENT_CODE_ACTION,
                self.code_action,
                types.CodeActionOptions(
                    code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL],
                    resolve_provider=True,
                ),
            ),
            (types.CODE_ACTION_RESOLVE, self.resolve_code_action, None),
        )
        for method, handler, options in handlers:
            self.ls.feature(method, options)(_function(handler))

    # Lifecycle

    def initialize(self, params: types.InitializeParams) -> None:
        encoding = self.ls.workspace.position_encoding or types.PositionEncodingKind.Utf16
        name = encoding.value if isinstance(encoding, types.PositionEncodingKind) else encoding
        self.features = ClientFeatures.of(params.capabilities, name)
        options = params.initialization_options
        if isinstance(options, dict):
            debounce = options.get("debounceMs")
            if isinstance(debounce, (int, float)) and not isinstance(debounce, bool) and debounce >= 0:
                self.debounce = debounce / 1000
        self.take_settings(options)

    async def initialized(self, params: types.InitializedParams) -> None:
        if not self.features.watch_files:
            return
        patterns = (*PROJECT_FILE_PATTERNS, *(f"*{suffix}" for suffix in PYTHON_SUFFIXES))
        watchers = [types.FileSystemWatcher(glob_pattern=f"**/{pattern}") for pattern in patterns]
        registration = types.Registration(
            id="cachelint-watched-files",
            method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers=watchers),
        )
        try:
            await self.ls.client_register_capability_async(types.RegistrationParams([registration]))
        except Exception as error:  # the client refused: settings are still reloaded when saved here
            self.log(f"could not watch project files: {error}", types.MessageType.Warning)

    def shutdown(self, params: None) -> None:
        self.shut_down = True
        self.executor.shutdown(wait=False, cancel_futures=True)

    # Documents

    def did_open(self, params: types.DidOpenTextDocumentParams) -> None:
        item = params.text_document
        path = _path(item.uri)
        if path is None or not (item.language_id == "python" or path.suffix in PYTHON_SUFFIXES):
            return
        self.documents[item.uri] = Document(item.uri, path, SourceText(item.text), item.version, item.language_id)
        self.changed(self.documents[item.uri], 0)

    def did_change(self, params: types.DidChangeTextDocumentParams) -> None:
        document = self.documents.get(params.text_document.uri)
        if document is None:
            return
        for change in params.content_changes:
            document.source = document.source.changed(change, self.features.encoding)
        document.version = params.text_document.version
        self.changed(document, self.debounce)

    def did_save(self, params: types.DidSaveTextDocumentParams) -> None:
        path = _path(params.text_document.uri)
        if path is not None and is_project_file(path):
            self.reload_soon()
        elif (document := self.documents.get(params.text_document.uri)) is not None:
            self.changed(document, 0)

    def did_close(self, params: types.DidCloseTextDocumentParams) -> None:
        document = self.documents.pop(params.text_document.uri, None)
        if document is None:
            return
        self.published.pop(document.uri, None)
        self.publish(document.uri, [], None)
        scope = self.scopes.pop(document.path, None)
        if not isinstance(scope, Scope):
            return
        if scope in self.open_scopes():  # the others may have depended on its unsaved text
            self.scheduler.request(scope, 0)
        else:
            self.scheduler.forget(scope)

    def did_change_watched_files(self, params: types.DidChangeWatchedFilesParams) -> None:
        paths = [path for change in params.changes if (path := _path(change.uri)) is not None]
        if any(is_project_file(path) for path in paths):
            self.reload_soon()
            return
        changed = [path for path in paths if path.suffix in PYTHON_SUFFIXES]
        for scope in self.open_scopes():
            if any(path.is_relative_to(scope.root) for path in changed):
                self.scheduler.request(scope, self.debounce)

    def did_change_configuration(self, params: types.DidChangeConfigurationParams) -> None:
        if self.take_settings(params.settings):
            self.reload()

    def take_settings(self, options: Any) -> bool:
        """Use the editor's settings, checked as the command line's are; a bad one is reported and the
        settings stay as they were. Whether they changed."""
        try:
            overrides = client_overrides(options)
        except ConfigError as error:
            self.ls.window_show_message(types.ShowMessageParams(types.MessageType.Error, f"cachelint: {error}"))
            return False
        changed = overrides != self.overrides
        self.overrides = overrides
        return changed

    def changed(self, document: Document, delay: float) -> None:
        scope = self.scope_of(document)
        if isinstance(scope, Scope):
            self.scheduler.request(scope, delay)

    # Scopes and configuration

    def scope_of(self, document: Document) -> Scope | ConfigProblem:
        scope = self.scopes.get(document.path)
        if scope is None:
            try:
                scope = resolve_scope(document.path, self.overrides)
            except ConfigError as error:
                scope = ConfigProblem(str(error), broken_config_file(document.path))
                self.report_config_problem(scope)
            self.scopes[document.path] = scope
        return scope

    def open_scopes(self) -> set[Scope]:
        return {scope for document in self.documents.values() if isinstance(scope := self.scope_of(document), Scope)}

    def reload_soon(self) -> None:
        """A configuration or project file changed: `reload` once the changes pause for the debounce
        delay, so that a burst of them (a checkout, a tool rewriting pyproject.toml) costs one reload."""
        if self.reload_timer is not None:
            self.reload_timer.cancel()
        self.reload_timer = asyncio.get_running_loop().call_later(self.debounce, self.reload)

    def reload(self) -> None:
        """A configuration or project file changed: resolve every document's scope again, re-check all."""
        if self.reload_timer is not None:
            self.reload_timer.cancel()
            self.reload_timer = None
        before = set(self.scopes.values())
        self.scopes.clear()
        fixed = dict(self.config_diagnostics)
        for document in list(self.documents.values()):
            scope = self.scope_of(document)
            if isinstance(scope, ConfigProblem):
                if scope.config_file is not None:
                    fixed.pop(scope.config_file, None)
                if self.published.pop(document.uri, None) is not None:
                    self.publish(document.uri, [], document.version)
        for path in fixed:
            del self.config_diagnostics[path]
            self.publish(_uri(path), [], None)
        scopes = self.open_scopes()
        for scope in before:
            if isinstance(scope, Scope) and scope not in scopes:
                self.scheduler.forget(scope)
        for scope in scopes:
            self.scheduler.request(scope, 0)

    def report_config_problem(self, problem: ConfigProblem) -> None:
        """Say it once: a diagnostic on the configuration file, and a message."""
        known = self.config_diagnostics.get(problem.config_file) if problem.config_file else None
        if known == problem.message:
            return
        self.ls.window_show_message(types.ShowMessageParams(types.MessageType.Error, f"cachelint: {problem.message}"))
        if problem.config_file is None:
            return
        self.config_diagnostics[problem.config_file] = problem.message
        start = types.Position(0, 0)
        config_diagnostic = types.Diagnostic(
            range=types.Range(start, start),
            message=problem.message,
            severity=types.DiagnosticSeverity.Error,
            source=SOURCE,
        )
        self.publish(_uri(problem.config_file), [config_diagnostic], None)

    # Analysis: `prepare` on the event loop, the job on the analysis thread, `deliver` on the event loop

    def prepare(self, scope: Scope) -> Callable[[], Analysed] | None:
        documents = [
            (document.uri, document.path, document.version, document.source)
            for document in self.documents.values()
            if self.scope_of(document) == scope
        ]
        if not documents:
            return None
        features = self.features
        memory = self.memory

        def job() -> Analysed:  # the texts are encoded here, on the analysis thread, not on the event loop
            files = tuple(OpenFile(*document, buffer_bytes(document[3].text)) for document in documents)
            return analyse(Snapshot(scope, files), memory, features)

        return job

    def open_files(self, scope: Scope) -> tuple[OpenFile, ...]:
        return tuple(
            OpenFile(document.uri, document.path, document.version, document.source, buffer_bytes(document.source.text))
            for document in self.documents.values()
            if self.scope_of(document) == scope
        )

    def deliver(self, scope: Scope, analysed: Analysed) -> None:
        for warning in analysed.outcome.warnings:
            self.log(warning, types.MessageType.Warning)
        for file in analysed.outcome.snapshot.files:
            document = self.documents.get(file.uri)
            if document is None or document.version != file.version:
                continue
            entries = analysed.entries[file.uri]
            previous = self.published.get(file.uri)
            self.published[file.uri] = Published(file.version, entries, analysed.outcome.supported)
            diagnostics = [entry.diagnostic for entry in entries]
            if previous is None or [entry.diagnostic for entry in previous.entries] != diagnostics:
                self.publish(file.uri, diagnostics, file.version)

    def failed(self, scope: Scope, error: BaseException) -> None:
        self.log(f"analysis of {scope.root} failed: {type(error).__name__}: {error}", types.MessageType.Error)

    def publish(self, uri: str, diagnostics: list[types.Diagnostic], version: int | None) -> None:
        self.ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri, diagnostics, version))

    def log(self, message: str, kind: types.MessageType) -> None:
        self.ls.window_log_message(types.LogMessageParams(kind, f"cachelint: {message}"))

    async def current(self, uri: str) -> tuple[Document, Scope, Published] | None:
        """The document, its scope and its findings for its current text, once analysed."""
        document = self.documents.get(uri)
        if document is None:
            return None
        if self.reload_timer is not None:  # answer with the settings as they are now
            self.reload()
        scope = self.scope_of(document)
        if not isinstance(scope, Scope):
            return None
        await self.scheduler.settled(scope, SETTLE_TIMEOUT_SECONDS)
        published = self.published.get(uri)
        if published is None or published.version != document.version or self.documents.get(uri) is not document:
            return None
        return document, scope, published

    # Features

    async def hover(self, params: types.HoverParams) -> types.Hover | None:
        found = await self.current(params.text_document.uri)
        if found is None:
            return None
        _, _, published = found
        hits = [
            entry
            for entry in published.entries
            if entry.finding.is_rule and contains(entry.diagnostic.range, params.position)
        ]
        if not hits:
            return None
        markdown = self.features.markdown
        text = hover_text([entry.finding for entry in hits], published.supported, markdown)
        kind = types.MarkupKind.Markdown if markdown else types.MarkupKind.PlainText
        return types.Hover(contents=types.MarkupContent(kind, text), range=hits[0].diagnostic.range)

    async def code_action(self, params: types.CodeActionParams) -> list[types.CodeAction] | None:
        found = await self.current(params.text_document.uri)
        if found is None:
            return None
        document, scope, published = found
        only = params.context.only
        files = self.open_files(scope)
        features = self.features
        source, version = document.source, document.version  # as analysed; the document may change meanwhile

        def actions() -> list[types.CodeAction]:
            texts = Texts({file.path: (file.uri, file.source) for file in files})
            versions = {file.path: file.version for file in files}
            result: list[types.CodeAction] = []
            here = [entry for entry in published.entries if overlaps(entry.diagnostic.range, params.range)]
            if wanted(types.CodeActionKind.QuickFix, only):
                for entry in here:
                    fix = fix_action(entry, features, texts, versions, scope.root)
                    noqa = noqa_action(entry, source, features, texts, version)
                    result += [action for action in (fix, noqa) if action is not None]
            if wanted(FIX_ALL, only) and has_safe_fix(entry.finding for entry in published.entries):
                if features.resolve_edit:
                    result.append(fix_all_action(data={"uri": document.uri, "version": version}))
                else:
                    result.append(fix_all_action(fix_all(scope, document.path, files, features)))
            return result

        return await asyncio.get_running_loop().run_in_executor(self.executor, actions)

    async def resolve_code_action(self, action: types.CodeAction) -> types.CodeAction:
        data = action.data
        if action.kind != FIX_ALL or action.edit is not None or not isinstance(data, dict):
            return action
        found = await self.current(str(data.get("uri")))
        if found is None:
            return action
        document, scope, _ = found
        if document.version != data.get("version"):
            return action
        files = self.open_files(scope)
        features = self.features
        action.edit = await asyncio.get_running_loop().run_in_executor(
            self.executor, lambda: fix_all(scope, document.path, files, features)
        )
        return action


def analyse(snapshot: Snapshot, memory: BufferMemory, features: ClientFeatures) -> Analysed:
    outcome = run_analysis(snapshot, memory)
    texts = Texts({file.path: (file.uri, file.source) for file in snapshot.files})
    entries = {
        file.uri: [
            Entry(finding, diagnostic(finding, file.source, features, texts)) for finding in outcome.findings[file.uri]
        ]
        for file in snapshot.files
    }
    return Analysed(outcome, entries)


def fix_all(
    scope: Scope, path: Path, files: tuple[OpenFile, ...], features: ClientFeatures
) -> types.WorkspaceEdit | None:
    """Every safe fix of the file at `path`, applied to a fixed point as `cachelint check --fix` applies
    them, to the open files' texts."""
    outcome = fix_to_fixed_point(
        [path],
        scope.settings,
        unsafe=False,
        force_exclude=True,
        project_root=scope.root,
        use_cache=True,
        overlay={file.path: file.data for file in files},
        workers=1,
    )
    texts = Texts({file.path: (file.uri, file.source) for file in files})
    changes = []
    for fixed in outcome.changed:
        before = texts.get(fixed.path)
        if before is not None and before.text == fixed.source.text:
            changes.append(Change(fixed.path, before, fixed.text))
    if not changes:
        return None
    return workspace_edit(changes, features, texts, {file.path: file.version for file in files})


def _function(handler: Callable[..., Any]) -> Callable[..., Any]:
    """A plain function calling `handler` (pygls marks what it registers, which a bound method cannot take)."""
    if asyncio.iscoroutinefunction(handler):

        async def call_async(params: Any) -> Any:
            return await handler(params)

        return call_async

    def call(params: Any) -> Any:
        return handler(params)

    return call


def _path(uri: str) -> Path | None:
    """The absolute path of a `file:` URI; None for other schemes (unsaved `untitled:` buffers)."""
    if not uri.startswith("file:"):
        return None
    path = to_fs_path(uri)
    return Path(path) if path else None


def _uri(path: Path) -> str:
    return from_fs_path(str(path)) or path.as_uri()


def serve() -> int:
    """Serve one client over stdin and stdout until it says exit (or stdin ends); the exit status the
    LSP asks for: 0 after a shutdown request, else 1."""
    logging.basicConfig(level=logging.WARNING, format="cachelint server: %(levelname)s %(name)s: %(message)s")
    server = CachelintServer()
    # pygls closes the stream it writes to on exit: a copy of stdout, so that stdout is still open
    # when the program ends and flushes it.
    with os.fdopen(os.dup(sys.stdout.fileno()), "wb") as messages:
        server.ls.start_io(sys.stdin.buffer, messages)
    return 0 if server.shut_down else 1
