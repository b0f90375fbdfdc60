"""The language server's parts that need no client: positions and text changes, edits, the bytes of a
buffer, the cache of unsaved buffers, the scheduler; and the command without its extra."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lsprotocol import types

from cachelint.config import Settings
from cachelint.server.actions import smallest_edit
from cachelint.server.analysis import BufferMemory, OpenFile, Snapshot, run_analysis
from cachelint.server.documents import SourceText, buffer_bytes
from cachelint.server.projects import Scope, resolve_scope
from cachelint.server.scheduler import Scheduler
from cachelint.source import decode_source
from cachelint.summary import FileSummary

ROOT = Path(__file__).resolve().parent.parent
WORKER = """\
class MyWorkerExtension:
    def update_weights(self, weights):
        self.model_runner.reset_encoder_cache()
"""


def test_server_without_its_extra_says_how_to_install_it() -> None:
    blocked = "import sys; sys.modules['pygls'] = None; sys.argv = ['cachelint', 'server']; "
    result = subprocess.run(
        [sys.executable, "-c", blocked + "from cachelint.cli import main; main()"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        "cachelint: error: `cachelint server` needs pygls, which the server extra installs: "
        "pip install 'cachelint-rl[server]'\n"
    )


def test_checking_does_not_import_the_server() -> None:
    code = (
        "import sys\n"
        "sys.argv = ['cachelint', 'check', 'fixtures/demo']\n"
        "from cachelint.__main__ import main\n"
        "try:\n    main()\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] in ('pygls', 'lsprotocol')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert "CL003" in result.stdout  # the check ran
    assert result.stdout.splitlines()[-1] == "[]"


@pytest.mark.parametrize(("encoding", "character"), [("utf-8", 14), ("utf-16", 11), ("utf-32", 10)])
def test_positions_count_the_encodings_units(encoding: str, character: int) -> None:
    source = SourceText('x = 1\r\ns = "é😀"; call()\n')
    position = source.position(2, 11, encoding)  # `call` at code point column 11 (1-based)
    assert position == types.Position(1, character)
    assert source.offset(position, encoding) == source.text.index("call")
    assert source.position_at(source.text.index("call"), encoding) == position


def test_lines_break_where_python_breaks_them() -> None:
    # A form feed and U+2028 are no line breaks for Python or LSP (str.splitlines splits at both).
    source = SourceText("a = 1\x0c\nb = '\u2028'\rc = 3\r\nd = 4")
    assert source.position(4, 1, "utf-16") == types.Position(3, 0)
    assert source.offset(types.Position(3, 0), "utf-16") == source.text.index("d")
    assert source.offset(types.Position(2, 2), "utf-16") == source.text.index("= 3")
    assert source.offset(types.Position(9, 0), "utf-16") == len(source.text)


def test_incremental_changes_apply_in_the_clients_units() -> None:
    source = SourceText('s = "😀"\r\nf()\r\n')
    # Replace `f` (line 1, character 0 to 1) and insert after the emoji (UTF-16: two units).
    first = types.TextDocumentContentChangePartial(
        range=types.Range(types.Position(1, 0), types.Position(1, 1)), text="g"
    )
    second = types.TextDocumentContentChangePartial(
        range=types.Range(types.Position(0, 7), types.Position(0, 7)), text="!"
    )
    changed = source.changed(first, "utf-16").changed(second, "utf-16")
    assert changed.text == 's = "😀!"\r\ng()\r\n'
    whole = types.TextDocumentContentChangeWholeDocument(text="new")
    assert changed.changed(whole, "utf-16").text == "new"


def apply(text: str, edit: types.TextEdit) -> str:
    """Apply one edit with positions in UTF-32 (code points), splitting lines at \\r\\n, \\r and \\n."""
    starts = [0]
    index = 0
    while index < len(text):
        if text[index] == "\r" and text[index + 1 : index + 2] == "\n":
            index += 1
        if text[index] in "\r\n":
            starts.append(index + 1)
        index += 1

    def offset(position: types.Position) -> int:
        return starts[position.line] + position.character if position.line < len(starts) else len(text)

    return text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]


@given(st.text(alphabet="ab\r\n "), st.text(alphabet="ab\r\n "))
def test_smallest_edit_turns_one_text_into_the_other(before: str, after: str) -> None:
    edit = smallest_edit(SourceText(before), after, "utf-32")
    assert apply(before, edit) == after


def test_smallest_edit_keeps_what_did_not_change() -> None:
    before = SourceText("a\r\nb\r\nc\r\n")
    edit = smallest_edit(before, "a\r\nB\r\nc\r\n", "utf-16")
    assert edit.range == types.Range(types.Position(1, 0), types.Position(1, 1))
    assert edit.new_text == "B"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x = 'é'\n", "x = 'é'\n".encode()),
        ("# -*- coding: latin-1 -*-\nx = 'é'\n", "# -*- coding: latin-1 -*-\nx = 'é'\n".encode("latin-1")),
        ("# coding: no-such-codec\nx = 'é'\n", "# coding: no-such-codec\nx = 'é'\n".encode()),
    ],
)
def test_buffer_bytes_are_what_the_file_would_hold(text: str, expected: bytes) -> None:
    data = buffer_bytes(text)
    assert data == expected
    if "no-such-codec" not in text:
        assert decode_source(data).text == text


def stored_keys(root: Path) -> set[str]:
    with sqlite3.connect(root / ".cachelint_cache" / "cache.sqlite3") as connection:
        return {key for (key,) in connection.execute("SELECT key FROM entries")}


def test_unsaved_buffers_stay_out_of_the_cache_file(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\n', encoding="utf-8")
    path = tmp_path / "worker.py"
    path.write_bytes(WORKER.encode())
    scope = resolve_scope(path)
    memory = BufferMemory()

    def run(text: str) -> list[str]:
        file = OpenFile(path.as_uri(), path, 1, SourceText(text), text.encode())
        return [finding.code for finding in run_analysis(Snapshot(scope, (file,)), memory).findings[path.as_uri()]]

    assert run(WORKER) == ["CL001"]  # as saved: stored as by `cachelint check`
    saved = stored_keys(tmp_path)
    assert any(key.startswith("run:") for key in saved)
    unsaved = WORKER.replace("weights):", "weights, step):")
    assert run(unsaved) == ["CL001"]
    assert stored_keys(tmp_path) == saved  # nothing of the unsaved text reached the file
    assert len(memory.records) == 1 and len(memory.runs) == 1
    assert run(unsaved) == ["CL001"]  # the same text again: found in memory
    assert len(memory.records) == 1 and len(memory.runs) == 1


TRAINER = """\
from worker import MyWorkerExtension


class Trainer:
    def __init__(self, engine):
        self.engine = engine

    def update_weights(self, weights):
        self.engine.collective_rpc("update_weights", args=(weights,))
"""


def test_an_analysis_takes_the_summaries_the_last_one_decoded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\n', encoding="utf-8")
    (tmp_path / "worker.py").write_text(WORKER, encoding="utf-8")
    path = tmp_path / "trainer.py"
    path.write_text(TRAINER, encoding="utf-8")
    scope = resolve_scope(path)
    memory = BufferMemory()
    decoded: list[str] = []
    from_json = FileSummary.from_json

    def counted(data: dict[str, Any]) -> FileSummary:
        decoded.append(data["module"])
        return from_json(data)

    monkeypatch.setattr(FileSummary, "from_json", counted)

    def run(text: str) -> list[str]:
        file = OpenFile(path.as_uri(), path, 1, SourceText(text), text.encode())
        found = run_analysis(Snapshot(scope, (file,)), memory).findings[path.as_uri()]
        return [f"{finding.span.line} {finding.code}" for finding in found]

    first = run(TRAINER)  # as saved: both files summarized, nothing decoded
    assert decoded == [] and memory.summaries == {}
    assert run(TRAINER + "# 1\n") == first  # the worker's summary comes from the cache
    assert decoded == ["worker"] and [summary.module for summary in memory.summaries.values()] == ["worker"]
    kept = next(iter(memory.summaries.values()))
    assert run(TRAINER + "# 2\n") == first  # and then from memory
    assert decoded == ["worker"] and list(memory.summaries.values()) == [kept]


def test_buffer_memory_keeps_the_most_recent() -> None:
    memory = BufferMemory(size=2)
    for key in ("a", "b", "c"):
        memory.put(memory.runs, key, [])
    memory.get(memory.runs, "b")
    memory.put(memory.runs, "d", [])
    assert list(memory.runs) == ["b", "d"]


def test_scope_is_the_projects_root_and_settings(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.cachelint]\nignore = ['CL004']\n", encoding="utf-8")
    (tmp_path / "pkg").mkdir()
    scope = resolve_scope(tmp_path / "pkg" / "not_saved.py")
    assert scope == Scope(tmp_path, Settings(ignore=("CL004",)))


async def run_scheduler(events: list[str]) -> None:
    """Requests while a job runs make its result stale: it is dropped, and the job runs again once."""
    loop = asyncio.get_running_loop()
    release = threading.Event()
    started = asyncio.Event()
    delivered = asyncio.Event()
    runs = 0

    def prepare(key: str) -> Callable[[], int]:
        nonlocal runs
        runs += 1
        number = runs
        events.append(f"prepare {number}")

        def job() -> int:
            loop.call_soon_threadsafe(started.set)
            if number == 1:
                release.wait(30)
            return number

        return job

    def deliver(key: str, result: int) -> None:
        events.append(f"deliver {result}")
        delivered.set()

    with ThreadPoolExecutor(max_workers=1) as executor:
        scheduler: Scheduler[str, int] = Scheduler(executor, prepare, deliver, lambda key, error: None)
        scheduler.request("scope", 0)
        await asyncio.wait_for(started.wait(), 30)
        for _ in range(3):  # three changes while the first job runs, each resetting the debounce
            scheduler.request("scope", 0.01)
        waiting = asyncio.ensure_future(scheduler.settled("scope", 30))
        release.set()
        await asyncio.wait_for(delivered.wait(), 30)
        await asyncio.wait_for(waiting, 30)


def test_scheduler_drops_stale_results_and_coalesces_requests() -> None:
    events: list[str] = []
    asyncio.run(run_scheduler(events))
    assert events == ["prepare 1", "prepare 2", "deliver 2"]


async def run_after_quiet_spell(events: list[str]) -> None:
    """A request after a quiet spell starts at once, whatever the debounce."""
    delivered = asyncio.Event()

    def deliver(key: str, result: str) -> None:
        events.append(result)
        delivered.set()

    with ThreadPoolExecutor(max_workers=1) as executor:
        scheduler: Scheduler[str, str] = Scheduler(executor, lambda key: lambda: key, deliver, lambda k, e: None)
        scheduler.request("scope", 3600)
        await asyncio.wait_for(delivered.wait(), 30)


def test_scheduler_starts_at_once_after_a_quiet_spell() -> None:
    events: list[str] = []
    asyncio.run(run_after_quiet_spell(events))
    assert events == ["scope"]


@given(
    st.lists(st.sampled_from(["a", "é", "😀", "\n", "\r", "\r\n", " "]), max_size=12).map("".join),
    st.integers(0, 6),
    st.integers(0, 4),
    st.integers(0, 3),
    st.integers(0, 4),
    st.lists(st.sampled_from(["b", "\n", "\r", "\r\n"]), max_size=4).map("".join),
)
def test_a_change_moves_the_line_starts_as_splitting_the_new_text_would(
    text: str, line: int, character: int, more_lines: int, end_character: int, inserted: str
) -> None:
    start = types.Position(line, character)
    end = types.Position(line + more_lines, end_character if more_lines else max(character, end_character))
    change = types.TextDocumentContentChangePartial(range=types.Range(start, end), text=inserted)
    before = SourceText(text)
    after = before.changed(change, "utf-16")
    assert after.starts == SourceText(after.text).starts
    assert after.line_count == len(SourceText(after.text).lines)
    assert [after.line(index) for index in range(after.line_count)] == SourceText(after.text).lines


def test_keystrokes_in_a_ten_megabyte_document_do_not_walk_all_its_lines() -> None:
    # Each new text took the line starts and lines of the whole document again: 165 ms a keystroke.
    text = "".join(f"def helper_{index}(x):\n    return x + {index}  # a comment\n" for index in range(180_000))
    assert len(text) > 10_000_000
    source = SourceText(text)
    source.starts  # noqa: B018 (the document as opened)
    started = time.process_time()
    for key in range(100):
        position = types.Position(100_001 + 2 * key, 4)  # in a `return` line
        change = types.TextDocumentContentChangePartial(range=types.Range(position, position), text="x")
        source = source.changed(change, "utf-16")
        source.position_at(source.offset(position, "utf-16"), "utf-16")
    assert time.process_time() - started < 10.0  # about 4 s of line splitting before, per 25 keys
    assert source.text.count("    xreturn") == 100


def test_a_burst_of_project_file_changes_reloads_the_settings_once(tmp_path: Path) -> None:
    from cachelint.server.app import CachelintServer

    server = CachelintServer()
    reloads: list[None] = []
    server.reload = lambda: reloads.append(None)  # type: ignore[method-assign]
    uri = (tmp_path / "pyproject.toml").as_uri()
    params = types.DidChangeWatchedFilesParams([types.FileEvent(uri, types.FileChangeType.Changed)])

    async def burst() -> None:
        server.debounce = 0.05
        for _ in range(2_000):
            server.did_change_watched_files(params)
        await asyncio.sleep(0.3)

    asyncio.run(burst())
    assert len(reloads) == 1
    server.executor.shutdown()
