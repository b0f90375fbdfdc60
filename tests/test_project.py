"""The project model: summaries survive serialization, and cross-file rules see the whole project."""

from __future__ import annotations

import ast
import json
import os
import random
from pathlib import Path

import pytest
from fixture_cases import FIXTURES

from cachelint.config import Settings
from cachelint.engine import Analyzer, analyze
from cachelint.project import ProjectIndex
from cachelint.summary import FileSummary, summarize

SERVER = FIXTURES / "CL003" / "verl_080_server_handle_clear_kv_cache"
SERVER_WITH_BUG = """\
import vllm


class Server:
    async def update_weights(self, engine, meta):
        await engine.collective_rpc("update_weights_from_ipc", kwargs=meta)
        await engine.collective_rpc("reset_encoder_cache")
        await engine.reset_prefix_cache(reset_running_requests=True)
"""


def test_summary_round_trips_through_json() -> None:
    for path in sorted(FIXTURES.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        summary = summarize(path.name, text, ast.parse(text))
        restored = FileSummary.from_json(json.loads(summary.encode()))
        assert restored == summary, path


@pytest.mark.parametrize("depth", [1, 2, 8])
def test_what_several_roots_reach_is_what_each_reaches(depth: int) -> None:
    """The on-demand search walks from every weight-update function at once: the functions it reaches
    within `depth` calls are those some root reaches within `depth` calls, each once."""
    summaries = []
    for number, path in enumerate(sorted(FIXTURES.rglob("*.py"))):
        text = path.read_text(encoding="utf-8")
        summaries.append(summarize(f"{number}/{path.name}", text, ast.parse(text), module_name=f"m{number}"))
    index = ProjectIndex(summaries)
    functions = sorted(index.functions(), key=lambda ref: ref.key)
    chooser = random.Random(depth)
    for size in (1, 2, 5, 20, len(functions)):
        roots = chooser.sample(functions, min(size, len(functions)))
        together = [reached.ref.key for reached in index.reachable_from(roots, depth)]
        one_by_one = {reached.ref.key for root in roots for reached in index.reachable(root, depth)}
        assert len(together) == len(set(together))
        assert set(together) == one_by_one


def test_checking_one_file_still_indexes_the_project(monkeypatch: object) -> None:
    server = next(SERVER.rglob("vllm_async_server.py"))
    old = Path.cwd()
    os.chdir(SERVER)
    try:
        only_server = analyze([server.relative_to(SERVER)], Settings())
        only_trainer = analyze([next(SERVER.rglob("vllm_rollout.py")).relative_to(SERVER)], Settings())
    finally:
        os.chdir(old)
    assert [f.code for f in only_server.findings] == ["CL003"]
    assert only_server.files_checked == 1
    assert "update_weights (vllm_rollout.py" in only_server.findings[0].message
    assert only_trainer.findings == []


def test_a_target_without_trigger_words_is_checked_without_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No rule can flag a file that holds no trigger word, so a run on such files alone (a pre-commit
    run on a commit that touches none of the refit code) reads nothing else; an unused suppression in
    it is still reported."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\ndependencies = ["vllm>=0.18"]\n', encoding="utf-8")
    (tmp_path / "server.py").write_text(SERVER_WITH_BUG, encoding="utf-8")
    (tmp_path / "util.py").write_text("def f():  # cachelint: ignore[CL001]\n    return 1\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    with_project = analyze([Path("server.py")], Settings())
    assert [finding.code for finding in with_project.findings] == ["CL001"]

    def project_files(*args: object, **kwargs: object) -> list[Path]:
        raise AssertionError("the project was read")

    monkeypatch.setattr(Analyzer, "project_files", project_files)
    alone = analyze([Path("util.py")], Settings())
    assert [finding.code for finding in alone.findings] == ["CL100"]


def test_summary_records_receivers_gates_and_calls() -> None:
    text = (
        "import vllm\n"
        "from packaging import version as pv\n"
        "from vllm.v1.engine.async_llm import AsyncLLM\n"
        "V = pv.parse(vllm.__version__)\n"
        "class Server:\n"
        "    def __init__(self, cfg):\n"
        "        self.engine = AsyncLLM.from_vllm_config(cfg)\n"
        "    async def clear(self):\n"
        "        if V >= pv.parse('0.16.0'):\n"
        "            await self.engine.reset_encoder_cache()\n"
        "        self.handle.clear_kv_cache.remote()\n"
    )
    summary = summarize("server.py", text, ast.parse(text))
    assert summary.engine == "vllm"
    clear = summary.function("Server.clear")
    assert clear is not None and clear.is_async
    (event,) = clear.resets
    assert (event.method, event.receiver, event.receiver_class, event.awaited) == (
        "reset_encoder_cache",
        "self.engine",
        "AsyncLLM",
        True,
    )
    (gate,) = event.gates
    assert (gate.kind, gate.operator, gate.threshold, gate.only_reset, gate.pure) == ("if", ">=", "0.16.0", True, True)
    assert (event.span.line, event.span.col) == (10, 19)
    remote = [call for call in clear.calls if call.via == "remote"]
    assert [(call.name, call.chain) for call in remote] == [("clear_kv_cache", ["self", "handle"])]


def test_a_route_the_project_serves_is_not_a_request_to_it() -> None:
    text = (
        "from fastapi import FastAPI\n"
        "app = FastAPI()\n"
        "@app.post('/bridge/pause')\n"
        "async def pause():\n"
        "    return {}\n"
        "def build(app, client, url):\n"
        "    app.add_api_route('/reset_prefix_cache', pause, methods=['POST'])\n"
        "    client.post(f'{url}/pause')\n"
    )
    summary = summarize("server.py", text, ast.parse(text))
    assert [event.method for function in summary.functions for event in function.resets] == ["pause_generation"]
    build = summary.function("build")
    assert build is not None and [(event.method, event.via, event.span.line) for event in build.resets] == [
        ("pause_generation", "http", 8)
    ]


INSTALLS = """\
import functools
import types


def make_sync(original):
    def patched(self):
        return original(self)

    return patched


def make_nothing():
    return None


def plain_update(self):
    pass


class Patcher:
    def install(self, generation, model):
        def local_sync():
            pass

        generation.sync_weights = make_sync(generation.sync_weights)
        generation.refit = lambda: local_sync()
        generation.update_weight = types.MethodType(plain_update, generation)
        generation.load_states = functools.partial(later, 1)
        generation.broadcast_to_vllm = make_nothing()
        generation.model = model
        generation.plain_update = plain_update


def later(step, self):
    pass
"""


def test_functions_stored_into_attributes_are_installed_under_their_names() -> None:
    summary = summarize("patch.py", INSTALLS, ast.parse(INSTALLS))
    installed = {function.qualname: function.installed_as for function in summary.functions if function.installed_as}
    assert installed == {
        "make_sync.<locals>.patched": ["sync_weights"],
        "Patcher.install.<locals>.local_sync": ["refit"],
        "plain_update": ["update_weight"],
        "later": ["load_states"],
    }
    restored = FileSummary.from_json(json.loads(summary.encode()))
    assert restored == summary


def test_an_installed_function_is_a_refit_root_under_its_installed_name() -> None:
    summary = summarize("patch.py", INSTALLS, ast.parse(INSTALLS))
    index = ProjectIndex([summary])
    assert [ref.function.qualname for ref in index.refit_roots(frozenset({"sync_weights"}))] == [
        "make_sync.<locals>.patched"
    ]
    assert [ref.function.qualname for ref in index.refit_roots(frozenset({"plain_update"}))] == ["plain_update"]
    assert index.refit_roots(frozenset({"broadcast_to_vllm", "model"})) == []
