"""The documented Neovim snippets, each run in a real headless Neovim (the one on PATH) that opens a file
with a finding and must show cachelint's diagnostic. A snippet for a newer Neovim than the one installed
is skipped, and every snippet is skipped where Neovim is absent."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import REPO, environment, write_tree

DOCS = REPO / "docs" / "editors.md"
NVIM = shutil.which("nvim")
WORKER = """\
class MyWorkerExtension:
    def update_weights(self, weights):
        self.model_runner.model.load_weights(weights)
        self.model_runner.reset_encoder_cache()
"""
# `Neovim 0.8 and 0.9, ...` (or `**Neovim** 0.11 and later`), then, after a blank line, its Lua block.
PARAGRAPH_AND_SNIPPET = re.compile(r"Neovim\*{0,2} (\d+)\.(\d+)[^\n]*\n(?:[^\n]+\n)*\n```lua\n(.*?)```", re.DOTALL)
# Run after the file is open: wait for the diagnostics, write them down, quit.
DRIVER = """\
vim.wait(60000, function() return #vim.diagnostic.get(0) > 0 end, 100)
local out = io.open(os.getenv("CACHELINT_NVIM_OUT"), "w")
for _, d in ipairs(vim.diagnostic.get(0)) do
  local lsp = d.user_data and d.user_data.lsp or {}
  out:write(string.format("%d:%d:%s:%s\\n", d.lnum + 1, d.col + 1, d.code or lsp.code or "", d.source or ""))
end
out:close()
vim.cmd("qall!")
"""


def snippets() -> list[tuple[tuple[int, int], str]]:
    """Each Lua snippet of the docs, with the oldest Neovim its paragraph names (`Neovim 0.8 and 0.9`)."""
    found = []
    for match in PARAGRAPH_AND_SNIPPET.finditer(DOCS.read_text(encoding="utf-8")):
        found.append(((int(match.group(1)), int(match.group(2))), match.group(3)))
    return found


def nvim_version() -> tuple[int, int] | None:
    if NVIM is None:
        return None
    first = subprocess.run([NVIM, "--version"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
    major, minor = re.match(r"NVIM v(\d+)\.(\d+)", first).groups()  # type: ignore[union-attr]
    return int(major), int(minor)


def run_snippet(tmp_path: Path, snippet: str, source: str) -> list[str]:
    """The diagnostics Neovim shows for `source` (as `line:col:code:source`) with `snippet` as init.lua."""
    root = write_tree(tmp_path / "p", {"pyproject.toml": '[project]\nname = "p"\nversion = "0"\n', "worker.py": source})
    (tmp_path / "init.lua").write_text(snippet, encoding="utf-8")
    (tmp_path / "driver.lua").write_text(DRIVER, encoding="utf-8")
    out = tmp_path / "diagnostics.txt"
    env = environment(
        {
            "CACHELINT_NVIM_OUT": str(out),
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
            "XDG_STATE_HOME": str(tmp_path / "state"),
            "XDG_DATA_HOME": str(tmp_path / "data"),
        }
    )
    assert NVIM is not None
    driver = f"luafile {tmp_path / 'driver.lua'}"
    command = [NVIM, "--headless", "-i", "NONE", "-u", str(tmp_path / "init.lua"), "worker.py", "-c", driver]
    subprocess.run(command, cwd=root, env=env, capture_output=True, timeout=120, check=False)
    return out.read_text(encoding="utf-8").splitlines()


def test_the_docs_have_a_snippet_for_each_neovim_since_0_7() -> None:
    assert sorted(version for version, _ in snippets()) == [(0, 7), (0, 8), (0, 10), (0, 11)]


@pytest.mark.parametrize(
    ("needs", "snippet"), snippets(), ids=lambda value: ".".join(map(str, value)) if isinstance(value, tuple) else ""
)
def test_snippet_shows_diagnostics_in_neovim(tmp_path: Path, needs: tuple[int, int], snippet: str) -> None:
    installed = nvim_version()
    if installed is None:
        pytest.skip("Neovim is not installed")
    if installed < needs:
        pytest.skip(f"the snippet needs Neovim {needs[0]}.{needs[1]}; this one is {installed[0]}.{installed[1]}")
    assert run_snippet(tmp_path, snippet, WORKER) == ["4:9:CL001:cachelint"]


def test_settings_as_init_options(tmp_path: Path) -> None:
    """The docs' way to pass settings in Neovim, on the oldest snippet (the one Debian's Neovim runs)."""
    installed = nvim_version()
    if installed is None:
        pytest.skip("Neovim is not installed")
    [oldest] = [snippet for version, snippet in snippets() if version == (0, 7)]
    configured = oldest.replace(
        'cmd = { "cachelint", "server" }', 'cmd = { "cachelint", "server" }, init_options = { ignore = { "CL001" } }'
    )
    assert configured != oldest
    unawaited = "async def pause(engine: AsyncLLM) -> None:\n    engine.pause_generation()\n"
    source = f"from vllm.v1.engine.async_llm import AsyncLLM\n\n\n{unawaited}\n\n{WORKER}"
    assert run_snippet(tmp_path, oldest, source) == ["5:5:CL005:cachelint", "11:9:CL001:cachelint"]
    assert run_snippet(tmp_path / "configured", configured, source) == ["5:5:CL005:cachelint"]


@pytest.mark.parametrize("snippet", [snippet for _, snippet in snippets()])
def test_every_snippet_compiles_in_the_installed_neovim(tmp_path: Path, snippet: str) -> None:
    """Where the snippet is too new to run here, its Lua is at least compiled by this Neovim's LuaJIT."""
    if NVIM is None:
        pytest.skip("Neovim is not installed")
    script = tmp_path / "snippet.lua"
    script.write_text(snippet, encoding="utf-8")
    check = f"lua local ok, err = loadfile('{script}'); if not ok then io.stderr:write(err); vim.cmd('cquit 3') end"
    result = subprocess.run(
        [NVIM, "--headless", "-u", "NONE", "-i", "NONE", "-c", check, "-c", "qall!"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
