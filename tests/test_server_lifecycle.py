"""The language server's lifecycle over a real stdio pipe, message by message as the LSP lays it down:
`initialize`, `shutdown`, `exit` ends with status 0; `exit` without `shutdown` with 1; a request after
`shutdown` is answered with InvalidRequest. pytest-lsp's client cannot send what comes after `exit`."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

pytest.importorskip("pygls")

TIMEOUT = 60  # seconds: starting the server takes about one
INVALID_REQUEST = -32600


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def messages_of(stream: bytes) -> list[dict[str, Any]]:
    """The messages the server wrote, in order."""
    found = []
    while stream:
        header, _, rest = stream.partition(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in header.split(b"\r\n") if line.startswith(b"Content-Length"))
        found.append(json.loads(rest[:length]))
        stream = rest[length:]
    return found


def serve(*messages: dict[str, Any]) -> tuple[int, list[dict[str, Any]], str]:
    """Send `messages` to a new server, then close its stdin; its exit status, replies and stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "cachelint", "server"],
        input=b"".join(frame(message) for message in messages),
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )
    return done.returncode, messages_of(done.stdout), done.stderr.decode()


INITIALIZE = {"id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}}}
INITIALIZED = {"method": "initialized", "params": {}}
SHUTDOWN = {"id": 2, "method": "shutdown"}
EXIT = {"method": "exit"}


def test_exit_after_shutdown_is_status_0() -> None:
    code, replies, stderr = serve(INITIALIZE, INITIALIZED, SHUTDOWN, EXIT)
    assert code == 0, stderr
    assert "error" not in stderr
    assert [reply.get("id") for reply in replies] == [1, 2]
    assert replies[1] == {"id": 2, "jsonrpc": "2.0", "result": None}


def test_exit_without_shutdown_is_status_1() -> None:
    code, replies, stderr = serve(INITIALIZE, INITIALIZED, EXIT)
    assert code == 1, stderr
    assert "internal error" not in stderr
    assert [reply.get("id") for reply in replies] == [1]


def test_a_request_after_shutdown_gets_invalid_request() -> None:
    hover = {
        "id": 3,
        "method": "textDocument/hover",
        "params": {"textDocument": {"uri": "file:///tmp/a.py"}, "position": {"line": 0, "character": 0}},
    }
    code, replies, stderr = serve(INITIALIZE, INITIALIZED, SHUTDOWN, hover, {**SHUTDOWN, "id": 4}, EXIT)
    assert code == 0, stderr
    by_id = {reply["id"]: reply for reply in replies if "id" in reply}
    assert by_id[2]["result"] is None
    assert by_id[3]["error"]["code"] == INVALID_REQUEST
    assert by_id[4]["error"]["code"] == INVALID_REQUEST
