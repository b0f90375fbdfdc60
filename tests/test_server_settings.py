"""Settings from the editor (initializationOptions, workspace/didChangeConfiguration): select, ignore,
the vLLM and SGLang ranges, checked as the command line's flags are."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from cli_runner import check, write_tree
from lsprotocol import types
from pytest_lsp import ClientServerConfig, client_capabilities
from test_server import PINS, SERVER, TIMEOUT, WORKER, RecordingClient, make_client

# CL002: AsyncLLM has reset_encoder_cache since 0.16.0, so the gate skips it on 0.16.x, where supported.
GATE = """\
import vllm
from packaging import version

_VLLM_VERSION = version.parse(vllm.__version__)


async def clear(engine: AsyncLLM) -> None:
    if _VLLM_VERSION >= version.parse("0.17.0"):
        await engine.reset_encoder_cache()
"""

pytestmark = pytest.mark.asyncio

SETTINGS = [
    {"select": ["CL005"], "debounceMs": 20},
    {"cachelint": {"ignore": ["CL005"]}, "debounceMs": 20},
    {"select": ["CL999"], "debounceMs": 20},
    {"vllm": ">=0.22", "debounceMs": 20},
]


@pytest_lsp.fixture(
    config=ClientServerConfig([sys.executable, "-m", "cachelint", "server"], client_factory=make_client),
    params=SETTINGS,
    ids=["select", "ignore under cachelint", "unknown selector", "vllm"],
)
async def configured(lsp_client: RecordingClient, request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """The client (pytest-lsp hands the test its client), initialized with `lsp_client.sent`."""
    lsp_client.sent = request.param  # type: ignore[attr-defined]
    await lsp_client.initialize_session(
        types.InitializeParams(capabilities=client_capabilities("neovim@v0.11.0"), initialization_options=request.param)
    )
    yield
    await lsp_client.shutdown_session()


def project(tmp_path: Path) -> Path:
    """One file with findings of CL005 (unawaited engine calls), CL001 (a worker-only reset) and CL002."""
    return write_tree(tmp_path / "p", {"pyproject.toml": PINS, "server.py": f"{SERVER}\n\n{WORKER}\n\n{GATE}"})


async def codes(client: RecordingClient, path: Path, after: int) -> set[str]:
    return {str(diagnostic.code) for diagnostic in await client.diagnostics_of(path, after)}


async def test_settings_from_initialization_options(configured: RecordingClient, tmp_path: Path) -> None:
    lsp_client = configured
    sent: dict[str, Any] = lsp_client.sent  # type: ignore[attr-defined]
    root = project(tmp_path)
    all_codes = {str(f.split()[1]) for f in check("--output-format", "concise", "-q", cwd=root).stdout.splitlines()}
    assert "CL005" in all_codes and len(all_codes) > 1  # what the command line reports without settings
    mark = lsp_client.mark()
    lsp_client.open(root / "server.py")
    found = await codes(lsp_client, root / "server.py", mark)
    if sent.get("select") == ["CL005"]:
        assert found == {"CL005"}
    elif "cachelint" in sent:
        assert found == all_codes - {"CL005"}
    elif "select" in sent:  # refused: the settings stay the configuration files', and the user is told
        assert found == all_codes
        cli = check("--select", "CL999", cwd=root).stderr.strip().removeprefix("cachelint: error: --select ")
        shown = [message.message for message in lsp_client.messages]
        assert f"cachelint: the editor's `select` {cli}" in shown, shown
    else:  # the range the project pins (0.16-0.21) replaced: CL002 no longer speaks of 0.16.x
        assert found == all_codes
        [gate] = [d.message for d in await lsp_client.diagnostics_of(root / "server.py", mark) if d.code == "CL002"]
        assert "0.16.x" not in gate and "(vLLM 0.22.0-" in gate, gate
        assert "skips the reset on 0.16.x" in check("--select", "CL002", cwd=root).stdout


@pytest_lsp.fixture(
    config=ClientServerConfig([sys.executable, "-m", "cachelint", "server"], client_factory=make_client)
)
async def plain(lsp_client: RecordingClient) -> AsyncIterator[None]:
    await lsp_client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"), initialization_options={"debounceMs": 20}
        )
    )
    yield
    await lsp_client.shutdown_session()


async def test_changed_configuration_rechecks_open_files(plain: RecordingClient, tmp_path: Path) -> None:
    lsp_client = plain
    root = project(tmp_path)
    mark = lsp_client.mark()
    lsp_client.open(root / "server.py")
    before = await codes(lsp_client, root / "server.py", mark)
    assert "CL005" in before

    mark = lsp_client.mark()
    lsp_client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"cachelint": {"ignore": ["CL005"]}})
    )
    assert await codes(lsp_client, root / "server.py", mark) == before - {"CL005"}

    # A bad value is refused with the command line's words; the last good settings stay.
    lsp_client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"cachelint": {"vllm": ">=banana"}})
    )
    cli = check("--vllm", ">=banana", cwd=root).stderr.strip().removeprefix("cachelint: error: --vllm ")

    async def refused() -> None:
        while f"cachelint: the editor's `vllm` {cli}" not in [message.message for message in lsp_client.messages]:
            await asyncio.sleep(0.05)

    await asyncio.wait_for(refused(), TIMEOUT)

    mark = lsp_client.mark()
    lsp_client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"cachelint": {}}))
    assert await codes(lsp_client, root / "server.py", mark) == before
