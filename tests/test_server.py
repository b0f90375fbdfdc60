"""`cachelint server` end to end: a real LSP client (pytest-lsp) talks to `python -m cachelint server`
over stdio. Every wait is for a notification or a response, with a timeout; none is a guessed sleep."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

from cachelint.docs import page_uri

pytestmark = pytest.mark.asyncio

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TIMEOUT = 60.0  # seconds; an analysis of these projects takes well under one
FIX_ALL = "source.fixAll.cachelint"
# Clients whose recorded capabilities differ where the server's answers do: VS Code (UTF-16, versioned
# document changes, resolves code actions, related information), Neovim 0.11 (UTF-8 positions, plain
# `changes`), Emacs 29 (UTF-32 positions, no code action resolve, no related information).
CLIENTS = ("visual-studio-code", "neovim@v0.11.0", "emacs")

PINS = '[project]\nname = "p"\nversion = "0"\ndependencies = ["vllm>=0.16,<0.22"]\n'
WORKER = """\
class MyWorkerExtension:
    def update_weights(self, weights):
        self.model_runner.model.load_weights(weights)
        label = "é😀"; self.model_runner.reset_encoder_cache()
"""
ROLLOUT = """\
from vllm.v1.engine.async_llm import AsyncLLM


class Rollout:
    def __init__(self, config):
        self.engine = AsyncLLM.from_vllm_config(config)

    async def clear_kv_cache(self):
        await self.engine.reset_prefix_cache()
"""
TRAINER = """\
from rollout import Rollout


class Trainer:
    def __init__(self, config):
        self.rollout = Rollout(config)

    async def update_weights(self):
        pass
"""
SERVER = """\
from vllm.v1.engine.async_llm import AsyncLLM


class Server:
    def __init__(self, config):
        self.engine = AsyncLLM.from_vllm_config(config)

    async def pause(self):
        note = "é😀"; self.engine.pause_generation()

    async def resume(self):
        self.engine.resume_generation()
"""


class RecordingClient(LanguageClient):
    """Keeps every publishDiagnostics in order, so that a test can wait for the next one for a file."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.published: list[types.PublishDiagnosticsParams] = []
        self.arrived = asyncio.Event()
        self.encoding = "utf-16"
        self.versions: dict[str, int] = {}
        self.registrations: list[types.Registration] = []

    def mark(self) -> int:
        return len(self.published)

    async def diagnostics_of(self, path: Path, after: int = 0) -> list[types.Diagnostic]:
        """The diagnostics of the first publication for `path` after the mark `after`."""
        return await asyncio.wait_for(self._first_for(path.as_uri(), after), TIMEOUT)

    async def _first_for(self, uri: str, after: int) -> list[types.Diagnostic]:
        while True:
            for params in self.published[after:]:
                if params.uri == uri:
                    return list(params.diagnostics)
            self.arrived.clear()
            await self.arrived.wait()

    def open(self, path: Path, text: str | None = None) -> None:
        uri = path.as_uri()
        self.versions[uri] = 1
        content = path.read_text(encoding="utf-8") if text is None else text
        self.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, content)))

    def replace(self, path: Path, text: str) -> None:
        """Send the whole new text of an open document."""
        uri = path.as_uri()
        self.versions[uri] += 1
        self.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(self.versions[uri], uri),
                [types.TextDocumentContentChangeWholeDocument(text)],
            )
        )


def record(client: RecordingClient, params: types.PublishDiagnosticsParams) -> None:
    client.published.append(params)
    client.arrived.set()


def accept_registration(client: RecordingClient, params: types.RegistrationParams) -> None:
    client.registrations.extend(params.registrations)


def make_client() -> RecordingClient:
    client = RecordingClient(converter_factory=default_converter)
    register_lsp_features(
        client,
        {
            **DEFAULT_CLIENT_FEATURES,
            types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: record,
            types.CLIENT_REGISTER_CAPABILITY: accept_registration,
        },
    )
    return client


@pytest_lsp.fixture(
    config=ClientServerConfig([sys.executable, "-m", "cachelint", "server"], client_factory=make_client),
    params=CLIENTS,
)
async def client(lsp_client: RecordingClient, request: pytest.FixtureRequest) -> AsyncIterator[None]:
    result = await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities(request.param), initialization_options={"debounceMs": 20}
        )
    )
    lsp_client.encoding = str(result.capabilities.position_encoding or "utf-16")
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(
    config=ClientServerConfig([sys.executable, "-m", "cachelint", "server"], client_factory=make_client)
)
async def vscode(lsp_client: RecordingClient) -> AsyncIterator[None]:
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"), initialization_options={"debounceMs": 20}
        )
    )
    yield
    await lsp_client.shutdown_session()


def units(text: str, encoding: str) -> int:
    """The length of `text` in the client's position units (computed here independently of the server)."""
    if encoding == "utf-8":
        return len(text.encode("utf-8"))
    if encoding == "utf-16":
        return len(text.encode("utf-16-le")) // 2
    return len(text)


def position_of(text: str, needle: str, encoding: str) -> types.Position:
    offset = text.index(needle)
    line = text.count("\n", 0, offset)
    start = text.rfind("\n", 0, offset) + 1
    return types.Position(line, units(text[start:offset], encoding))


def range_of(text: str, needle: str, encoding: str) -> types.Range:
    start = position_of(text, needle, encoding)
    return types.Range(start, types.Position(start.line, start.character + units(needle, encoding)))


def offset_at(text: str, position: types.Position, encoding: str) -> int:
    lines = text.split("\n")
    offset = sum(len(line) + 1 for line in lines[: position.line])
    line = lines[position.line] if position.line < len(lines) else ""
    count = 0
    for index, char in enumerate(line):
        if count >= position.character:
            return offset + index
        count += units(char, encoding)
    return offset + len(line)


def apply_text_edits(text: str, edits: Sequence[types.TextEdit], encoding: str) -> str:
    located = sorted(
        ((offset_at(text, e.range.start, encoding), offset_at(text, e.range.end, encoding), e.new_text) for e in edits),
        reverse=True,
    )
    for start, end, new_text in located:
        text = text[:start] + new_text + text[end:]
    return text


def edits_by_uri(edit: types.WorkspaceEdit) -> dict[str, list[types.TextEdit]]:
    """The edits of a workspace edit, whichever of its two forms the server used."""
    if edit.document_changes is not None:
        found: dict[str, list[types.TextEdit]] = {}
        for change in edit.document_changes:
            assert isinstance(change, types.TextDocumentEdit)
            found.setdefault(change.text_document.uri, []).extend(
                e for e in change.edits if isinstance(e, types.TextEdit)
            )
        return found
    assert edit.changes is not None
    return {uri: list(edits) for uri, edits in edit.changes.items()}


# The project sends images to vLLM, so the multimodal rules (CL003, CL004) apply to it.
IMAGE_PROMPTS = """\
def image_prompt(prompt_ids, image):
    return {"prompt_token_ids": prompt_ids, "multi_modal_data": {"image": image}}
"""


def project(tmp_path: Path, files: dict[str, str], pins: str | None = PINS) -> Path:
    if pins is not None:
        (tmp_path / "pyproject.toml").write_text(pins, encoding="utf-8")
    for name, text in {"prompts.py": IMAGE_PROMPTS, **files}.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


async def test_open_file_gets_its_diagnostic(client: RecordingClient, tmp_path: Path) -> None:
    worker = project(tmp_path, {"worker.py": WORKER}) / "worker.py"
    client.open(worker)
    [diagnostic] = await client.diagnostics_of(worker)
    assert diagnostic.code == "CL001"
    assert diagnostic.source == "cachelint"
    assert diagnostic.severity == types.DiagnosticSeverity.Warning
    assert diagnostic.range == range_of(WORKER, "self.model_runner.reset_encoder_cache()", client.encoding)
    assert diagnostic.message.startswith("`self.model_runner.reset_encoder_cache()` clears only the workers'")
    assert "\nhelp: Reset at engine level" in diagnostic.message
    capabilities = client.capabilities
    assert capabilities is not None and capabilities.text_document is not None
    publish = capabilities.text_document.publish_diagnostics
    if publish is not None and publish.code_description_support:
        assert diagnostic.code_description is not None
        assert diagnostic.code_description.href.endswith("/rules/CL001.md")
    else:  # Neovim and Emacs do not take it
        assert diagnostic.code_description is None


async def test_edit_in_one_file_republishes_another(vscode: RecordingClient, tmp_path: Path) -> None:
    root = project(tmp_path, {"rollout.py": ROLLOUT, "trainer.py": TRAINER})
    rollout, trainer = root / "rollout.py", root / "trainer.py"
    vscode.open(rollout)
    assert await vscode.diagnostics_of(rollout) == []
    vscode.open(trainer)
    assert await vscode.diagnostics_of(trainer) == []

    mark = vscode.mark()  # the weight update now reaches the prefix reset, in the unsaved buffer only
    vscode.versions[trainer.as_uri()] += 1
    vscode.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(vscode.versions[trainer.as_uri()], trainer.as_uri()),
            [
                types.TextDocumentContentChangePartial(
                    range=range_of(TRAINER, "pass", "utf-16"), text="await self.rollout.clear_kv_cache()"
                )
            ],
        )
    )
    diagnostics = await vscode.diagnostics_of(rollout, mark)
    [cl003] = [diagnostic for diagnostic in diagnostics if diagnostic.code == "CL003"]
    assert cl003.range == range_of(ROLLOUT, "self.engine.reset_prefix_cache()", "utf-16")
    assert cl003.message.startswith("update_weights (trainer.py:8) -> clear_kv_cache (rollout.py:8) resets")
    related = cl003.related_information
    assert related is not None
    assert [(item.location.uri, item.location.range.start.line, item.message) for item in related] == [
        (trainer.as_uri(), 7, "the weight update starts in `Trainer.update_weights`"),
        (rollout.as_uri(), 7, "`Trainer.update_weights` calls `Rollout.clear_kv_cache`"),
    ]

    actions = await vscode.text_document_code_action_async(
        types.CodeActionParams(
            types.TextDocumentIdentifier(rollout.as_uri()), cl003.range, types.CodeActionContext(diagnostics=[])
        )
    )
    assert actions is not None
    by_title = {action.title: action for action in actions if isinstance(action, types.CodeAction)}
    assert sorted(by_title) == [
        "CL003: Reset the encoder cache after the prefix cache (unsafe)",
        "CL007: Pass `reset_running_requests=True` (unsafe)",
        "Disable CL003 for this line",
        "Disable CL007 for this line",
    ]
    unsafe = by_title["CL003: Reset the encoder cache after the prefix cache (unsafe)"]
    assert not unsafe.is_preferred
    # trainer.py's diagnostics did not change, so they were not published again (the code action's answer
    # came after whatever the analysis published)
    assert [params.uri for params in vscode.published[mark:]] == [rollout.as_uri()]
    assert unsafe.edit is not None and unsafe.edit.document_changes is not None
    [change] = unsafe.edit.document_changes
    assert isinstance(change, types.TextDocumentEdit)
    assert change.text_document.uri == rollout.as_uri()
    assert change.text_document.version == 1
    assert apply_text_edits(ROLLOUT, edits_by_uri(unsafe.edit)[rollout.as_uri()], "utf-16") == ROLLOUT + (
        "        await self.engine.reset_encoder_cache()\n"
    )

    mark = vscode.mark()
    vscode.replace(trainer, TRAINER)
    assert await vscode.diagnostics_of(rollout, mark) == []


async def test_quick_fix_gives_the_fixed_text(client: RecordingClient, tmp_path: Path) -> None:
    server = project(tmp_path, {"server.py": SERVER}) / "server.py"
    client.open(server)
    diagnostics = await client.diagnostics_of(server)
    assert sorted(str(d.code) for d in diagnostics) == ["CL004", "CL005", "CL005"]
    at = range_of(SERVER, "self.engine.pause_generation()", client.encoding)
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            types.TextDocumentIdentifier(server.as_uri()), at, types.CodeActionContext(diagnostics=[])
        )
    )
    assert actions is not None
    by_title = {action.title: action for action in actions if isinstance(action, types.CodeAction)}
    fix = by_title["CL005: Add `await`"]
    assert fix.kind == types.CodeActionKind.QuickFix
    assert fix.is_preferred
    assert [d.code for d in fix.diagnostics or []] == ["CL005"]
    # CL004's fix is unsafe: an action, not the preferred one. Only the findings under the cursor get
    # actions, not the CL005 on line 12.
    assert not by_title["CL004: Call `await self.engine.reset_mm_cache()` right after the pause (unsafe)"].is_preferred
    assert sorted(by_title) == [
        "CL004: Call `await self.engine.reset_mm_cache()` right after the pause (unsafe)",
        "CL005: Add `await`",
        "Disable CL004 for this line",
        "Disable CL005 for this line",
        "cachelint: fix all safe problems",
    ]

    assert fix.edit is not None
    [(uri, edits)] = edits_by_uri(fix.edit).items()
    assert uri == server.as_uri()
    fixed = apply_text_edits(SERVER, edits, client.encoding)
    assert fixed == SERVER.replace('"é😀"; self.engine', '"é😀"; await self.engine')

    mark = client.mark()
    client.replace(server, fixed)
    assert sorted(str(d.code) for d in await client.diagnostics_of(server, mark)) == ["CL004", "CL005"]

    noqa = by_title["Disable CL005 for this line"]
    assert noqa.edit is not None
    [edits] = edits_by_uri(noqa.edit).values()
    with_noqa = apply_text_edits(SERVER, edits, client.encoding)
    assert with_noqa.splitlines()[8] == '        note = "é😀"; self.engine.pause_generation()  # noqa: CL005'


async def test_a_fix_that_spans_files_edits_them_all(client: RecordingClient, tmp_path: Path) -> None:
    case = FIXTURES / "CL001" / "worker_extension_driver_side"
    root = tmp_path / case.name
    shutil.copytree(case, root)
    package = root / "rl_sync"
    worker = package / "worker_ext.py"
    client.open(worker)  # only this one: the drivers are edited on disk, where the client reads them
    [diagnostic] = await client.diagnostics_of(worker)
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            types.TextDocumentIdentifier(worker.as_uri()),
            diagnostic.range,
            types.CodeActionContext(diagnostics=[], only=[types.CodeActionKind.QuickFix]),
        )
    )
    assert actions is not None
    [fix] = [a for a in actions if isinstance(a, types.CodeAction) and a.title.startswith("CL001: ")]
    assert fix.title.endswith(" (unsafe)")
    assert fix.edit is not None
    edits = edits_by_uri(fix.edit)
    names = ("worker_ext.py", "async_driver.py", "sync_driver.py")
    assert sorted(edits) == sorted((package / name).as_uri() for name in names)
    for name in names:
        before = (package / name).read_text(encoding="utf-8")
        after = apply_text_edits(before, edits[(package / name).as_uri()], client.encoding)
        assert after == (package / f"{name}.fixed").read_text(encoding="utf-8")
    if fix.edit.document_changes is not None:  # the open file's edit is for the version analysed
        versions = {
            change.text_document.uri: change.text_document.version
            for change in fix.edit.document_changes
            if isinstance(change, types.TextDocumentEdit)
        }
        assert versions == {worker.as_uri(): 1, **{(package / n).as_uri(): None for n in names[1:]}}


@pytest.mark.parametrize("link", ["symbolic link to outside", "hard link"])
async def test_a_fix_whose_other_file_cachelint_must_not_write_is_refused(
    vscode: RecordingClient, tmp_path: Path, link: str
) -> None:
    """CL001's fix edits the drivers too: when one of them is a link to a file outside the workspace
    or has a second name, the quick fix is not offered, as `check --fix` refuses to write it."""
    case = FIXTURES / "CL001" / "worker_extension_driver_side"
    root = tmp_path / case.name
    shutil.copytree(case, root, ignore=shutil.ignore_patterns("*.fixed"))
    driver = root / "rl_sync" / "async_driver.py"
    outside = tmp_path / "elsewhere.py"
    if link == "hard link":
        os.link(driver, outside)
    else:
        driver.rename(outside)
        driver.symlink_to(outside)
    worker = root / "rl_sync" / "worker_ext.py"
    vscode.open(worker)
    [diagnostic] = await vscode.diagnostics_of(worker)
    actions = await vscode.text_document_code_action_async(
        types.CodeActionParams(
            types.TextDocumentIdentifier(worker.as_uri()),
            diagnostic.range,
            types.CodeActionContext(diagnostics=[], only=[types.CodeActionKind.QuickFix]),
        )
    )
    titles = [action.title for action in actions or [] if isinstance(action, types.CodeAction)]
    assert titles == ["Disable CL001 for this line"]


async def test_fix_all_leaves_a_document_linked_from_outside(vscode: RecordingClient, tmp_path: Path) -> None:
    """The open document is a symbolic link to a file outside its project: no fix edits it."""
    (tmp_path / "project").mkdir()
    root = project(tmp_path / "project", {})
    outside = tmp_path / "shared.py"
    outside.write_text(SERVER, encoding="utf-8")
    server = root / "server.py"
    server.symlink_to(outside)
    vscode.open(server)
    await vscode.diagnostics_of(server)
    everywhere = types.Range(types.Position(0, 0), types.Position(0, 0))
    actions = await vscode.text_document_code_action_async(
        types.CodeActionParams(
            types.TextDocumentIdentifier(server.as_uri()), everywhere, types.CodeActionContext(diagnostics=[])
        )
    )
    assert actions is not None
    [action] = actions  # offered, as the findings have safe fixes
    assert isinstance(action, types.CodeAction) and action.kind == FIX_ALL
    resolved = await vscode.code_action_resolve_async(action)
    assert resolved.edit is None
    at = range_of(SERVER, "self.engine.pause_generation()", "utf-16")
    actions = await vscode.text_document_code_action_async(
        types.CodeActionParams(types.TextDocumentIdentifier(server.as_uri()), at, types.CodeActionContext([]))
    )
    titles = [action.title for action in actions or [] if isinstance(action, types.CodeAction)]
    assert not [title for title in titles if title.startswith("CL")], titles


async def test_fix_all_applies_every_safe_fix(client: RecordingClient, tmp_path: Path) -> None:
    server = project(tmp_path, {"server.py": SERVER}) / "server.py"
    client.open(server)
    await client.diagnostics_of(server)
    everywhere = types.Range(types.Position(0, 0), types.Position(0, 0))
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            types.TextDocumentIdentifier(server.as_uri()),
            everywhere,
            types.CodeActionContext(diagnostics=[], only=[FIX_ALL]),
        )
    )
    assert actions is not None
    [action] = actions
    assert isinstance(action, types.CodeAction)
    assert action.kind == FIX_ALL
    if action.edit is None:  # a client that resolves code actions gets the edit when it asks
        action = await client.code_action_resolve_async(action)
    assert action.edit is not None
    [edits] = edits_by_uri(action.edit).values()
    fixed = apply_text_edits(SERVER, edits, client.encoding)
    assert fixed == SERVER.replace("; self.engine", "; await self.engine").replace(
        "        self.engine.resume", "        await self.engine.resume"
    )
    assert server.read_text(encoding="utf-8") == SERVER  # the server never writes the file


async def test_syntax_error_gives_one_diagnostic(vscode: RecordingClient, tmp_path: Path) -> None:
    broken = project(tmp_path, {"broken.py": WORKER + "def f(:\n"}) / "broken.py"
    vscode.open(broken)
    [diagnostic] = await vscode.diagnostics_of(broken)
    assert diagnostic.code == "invalid-syntax"
    assert diagnostic.severity == types.DiagnosticSeverity.Error
    assert diagnostic.range.start.line == 4

    mark = vscode.mark()  # the server is still there and analyses the repaired text
    vscode.replace(broken, WORKER)
    assert [d.code for d in await vscode.diagnostics_of(broken, mark)] == ["CL001"]


async def test_file_outside_any_project(vscode: RecordingClient, tmp_path: Path) -> None:
    loose = tmp_path / "scratch" / "worker.py"
    loose.parent.mkdir()
    loose.write_text(WORKER, encoding="utf-8")
    vscode.open(loose)
    assert [d.code for d in await vscode.diagnostics_of(loose)] == ["CL001"]
    unsaved = tmp_path / "scratch" / "not_saved_yet.py"  # open in the editor, not on disk
    vscode.open(unsaved, WORKER)
    assert [d.code for d in await vscode.diagnostics_of(unsaved)] == ["CL001"]
    nowhere = tmp_path / "no" / "such" / "folder.py"  # its folders are not on disk either
    vscode.open(nowhere, WORKER)
    assert [d.code for d in await vscode.diagnostics_of(nowhere)] == ["CL001"]
    device = Path("/dev/zero")  # a device, never read (it never ends), and no cache beside it
    vscode.open(device, WORKER)
    assert [d.code for d in await vscode.diagnostics_of(device)] == ["CL001"]
    # A file in no project is analysed without a cache: none is created in its folder or above.
    assert not (tmp_path / "scratch" / ".cachelint_cache").exists()
    assert not any(path.name == ".cachelint_cache" for path in tmp_path.rglob("*"))
    assert not Path("/dev/.cachelint_cache").exists()


async def test_hover_names_the_rule_and_the_releases(vscode: RecordingClient, tmp_path: Path) -> None:
    root = project(tmp_path, {"server.py": SERVER, "worker.py": WORKER})
    vscode.open(root / "server.py")
    await vscode.diagnostics_of(root / "server.py")
    hover = await vscode.text_document_hover_async(
        types.HoverParams(
            types.TextDocumentIdentifier((root / "server.py").as_uri()),
            position_of(SERVER, "pause_generation()", "utf-16"),
        )
    )
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    text = hover.contents.value
    assert "**CL004** `mm-processor-cache-desync`" in text
    # The pin's file is named as the range names it: relative to the server's working folder when below it.
    assert re.search(r"Checked against vLLM 0\.16\.0\u20130\.21\.0 \(\S*pyproject\.toml, dependencies\)\.", text), text
    assert "**CL005** `unawaited-engine-coroutine`: Flags a call to a coroutine method" in text
    assert text.count("Checked against") == 1  # CL005 does not depend on the releases
    # The page of the cachelint the server runs (installed, or the checkout's when it starts there).
    link = re.search(r"\(\[rule page\]\((file://\S+/CL005\.md)\)\)", text)
    assert link is not None, text
    linked = Path(unquote(urlparse(link[1]).path))
    assert linked.read_bytes() == Path(unquote(urlparse(page_uri("CL005")).path)).read_bytes()

    nothing = await vscode.text_document_hover_async(
        types.HoverParams(types.TextDocumentIdentifier((root / "server.py").as_uri()), types.Position(0, 0))
    )
    assert nothing is None


async def test_invalid_configuration_is_reported_then_reloaded(vscode: RecordingClient, tmp_path: Path) -> None:
    root = project(tmp_path, {"worker.py": WORKER}, pins=PINS + "\n[tool.cachelint]\nselct = ['CL']\n")
    config = root / "pyproject.toml"
    vscode.open(root / "worker.py")
    [problem] = await vscode.diagnostics_of(config)
    assert problem.severity == types.DiagnosticSeverity.Error
    assert problem.message == f"{config}: unknown key `selct` in [tool.cachelint]; did you mean `select`?"
    assert [message.message for message in vscode.messages] == [f"cachelint: {problem.message}"]

    mark = vscode.mark()
    config.write_text(PINS + "\n[tool.cachelint]\nselect = ['CL']\n", encoding="utf-8")
    vscode.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams([types.FileEvent(config.as_uri(), types.FileChangeType.Changed)])
    )
    assert await vscode.diagnostics_of(config, mark) == []
    assert [d.code for d in await vscode.diagnostics_of(root / "worker.py", mark)] == ["CL001"]

    mark = vscode.mark()  # saving a configuration file reloads it too
    config.write_text(PINS + "\n[tool.cachelint]\nignore = ['CL001']\n", encoding="utf-8")
    vscode.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(config.as_uri())))
    assert await vscode.diagnostics_of(root / "worker.py", mark) == []


async def test_closing_a_file_clears_its_diagnostics(vscode: RecordingClient, tmp_path: Path) -> None:
    worker = project(tmp_path, {"worker.py": WORKER}) / "worker.py"
    vscode.open(worker)
    assert [d.code for d in await vscode.diagnostics_of(worker)] == ["CL001"]
    mark = vscode.mark()
    vscode.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(worker.as_uri())))
    assert await vscode.diagnostics_of(worker, mark) == []


async def test_watches_project_files(vscode: RecordingClient, tmp_path: Path) -> None:
    root = project(tmp_path, {"rollout.py": ROLLOUT, "trainer.py": TRAINER})
    rollout, trainer = root / "rollout.py", root / "trainer.py"
    vscode.open(rollout)
    assert await vscode.diagnostics_of(rollout) == []
    [registration] = vscode.registrations
    assert registration.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES
    patterns = {watcher["globPattern"] for watcher in registration.register_options["watchers"]}
    assert {"**/pyproject.toml", "**/cachelint.toml", "**/.cachelint.toml", "**/*.py"} <= patterns

    mark = vscode.mark()  # a file that is not open changes on disk (a checkout, another tool's fix)
    trainer.write_text(TRAINER.replace("pass", "await self.rollout.clear_kv_cache()"), encoding="utf-8")
    vscode.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams([types.FileEvent(trainer.as_uri(), types.FileChangeType.Changed)])
    )
    assert "CL003" in [d.code for d in await vscode.diagnostics_of(rollout, mark)]
