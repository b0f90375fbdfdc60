"""Methods no object runs: a reset in a base class that is never built and whose every subclass
overrides the method is not reported; any way the base's method may still run keeps it reported."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_runner import write_tree
from fixture_cases import FIXTURES, Case, analyze_case

PROJECT = FIXTURES / "CL003" / "base_reset_every_engine_overrides"
BASE_RESET = "BaseEngine.reset_prefix_cache"


def flagged(project: Path) -> set[str]:
    """The functions holding a CL003 finding."""
    return {finding.function for finding in analyze_case(Case("CL003", project)).findings if finding.code == "CL003"}


def copy_with(tmp_path: Path, old: str = "", new: str = "", extra: dict[str, str] | None = None) -> Path:
    project = tmp_path / "engine"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("*.fixed"))
    engines = project / "engine_rl" / "engines.py"
    source = engines.read_text(encoding="utf-8")
    assert old in source
    engines.write_text(source.replace(old, new), encoding="utf-8")
    write_tree(project, extra or {})
    return project


def test_the_base_reset_is_left_alone_and_the_overrides_are_flagged(tmp_path: Path) -> None:
    assert flagged(copy_with(tmp_path)) == {"SyncEngine.reset_prefix_cache", "AsyncEngine.reset_prefix_cache"}


ABSTRACT_BUILD = '''    def _create_engine(self, **kwargs):
        """Each engine builds its own."""
        raise NotImplementedError("subclasses build the engine")
'''


@pytest.mark.parametrize(
    ("old", "new"),
    [
        pytest.param(
            "class BaseEngine:",
            "from abc import ABC\n\n\nclass BaseEngine(ABC):",
            id="derives-from-ABC",
        ),
        pytest.param(
            ABSTRACT_BUILD,
            "    @abstractmethod\n    def _create_engine(self, **kwargs): ...\n",
            id="declares-an-abstractmethod",
        ),
    ],
)
def test_other_ways_a_base_says_it_is_never_built(tmp_path: Path, old: str, new: str) -> None:
    project = copy_with(tmp_path, old, new)
    engines = project / "engine_rl" / "engines.py"
    engines.write_text("from abc import abstractmethod\n" + engines.read_text(encoding="utf-8"), encoding="utf-8")
    assert flagged(project) == {"SyncEngine.reset_prefix_cache", "AsyncEngine.reset_prefix_cache"}


@pytest.mark.parametrize(
    ("old", "new", "extra"),
    [
        pytest.param(
            ABSTRACT_BUILD,
            "    def _create_engine(self, **kwargs):\n        return LLM(**kwargs)\n",
            None,
            id="the-base-can-be-built",
        ),
        pytest.param(
            "        self.llm.llm_engine.reset_prefix_cache()  # error: CL003\n",
            "        super().reset_prefix_cache()\n",
            None,
            id="an-override-calls-the-base",
        ),
        pytest.param(
            "",
            "",
            {
                "engine_rl/lora.py": (
                    "from engine_rl.engines import BaseEngine, LLM\n\n\n"
                    "class LoraEngine(BaseEngine):\n"
                    "    def _create_engine(self, **kwargs):\n"
                    "        return LLM(enable_lora=True, **kwargs)\n"
                )
            },
            id="a-subclass-in-a-file-no-rule-reads-inherits-it",
        ),
    ],
)
def test_the_base_reset_is_flagged_when_an_object_may_run_it(
    tmp_path: Path, old: str, new: str, extra: dict[str, str] | None
) -> None:
    assert BASE_RESET in flagged(copy_with(tmp_path, old, new, extra))


def test_a_middle_class_never_built_passes_the_question_to_its_subclasses(tmp_path: Path) -> None:
    middle = {
        "engine_rl/vision.py": (
            "from engine_rl.engines import BaseEngine, LLM\n\n\n"
            "class VisionEngine(BaseEngine):\n"
            "    def _create_engine(self, **kwargs):\n"
            '        raise NotImplementedError("a vision engine of each size")\n\n\n'
            "class SmallVisionEngine(VisionEngine):\n"
            "    def _create_engine(self, **kwargs):\n"
            "        return LLM(max_model_len=4096, **kwargs)\n\n"
            "    def reset_prefix_cache(self):\n"
            "        self.llm.llm_engine.reset_prefix_cache()\n"
            "        self.llm.llm_engine.reset_mm_cache()\n"
            "        self.llm.llm_engine.reset_encoder_cache()\n"
        )
    }
    assert BASE_RESET not in flagged(copy_with(tmp_path, extra=middle))
    inherits = {"engine_rl/vision.py": middle["engine_rl/vision.py"].split("\n    def reset_prefix_cache")[0] + "\n"}
    assert BASE_RESET in flagged(copy_with(tmp_path / "inherits", extra=inherits))


CL007_PROJECT = {
    "pyproject.toml": '[project]\nname = "noop-rl"\nversion = "0.1.0"\ndependencies = ["vllm>=0.17,<0.20"]\n',
    "noop_rl/__init__.py": "",
    "noop_rl/servers.py": (
        "from vllm.v1.engine.async_llm import AsyncLLM\n\n\n"
        "class BaseServer:\n"
        "    def __init__(self, config):\n"
        "        self.engine = self._build(config)\n\n"
        "    def _build(self, config):\n"
        '        raise NotImplementedError("each server builds its engine")\n\n'
        "    async def update_weights(self, meta):\n"
        '        await self.engine.collective_rpc("load_new_weights", args=(meta,))\n'
        "        await self.engine.reset_prefix_cache()\n\n\n"
        "class Server(BaseServer):\n"
        "    def _build(self, config) -> AsyncLLM:\n"
        "        return AsyncLLM.from_vllm_config(config)\n\n"
        "    async def update_weights(self, meta):\n"
        "        engine: AsyncLLM = self.engine\n"
        '        await engine.collective_rpc("load_new_weights", args=(meta,))\n'
        "        await engine.reset_prefix_cache()\n"
    ),
}


def test_cl007_leaves_alone_a_reset_no_object_runs(tmp_path: Path) -> None:
    project = write_tree(tmp_path / "noop", CL007_PROJECT)
    findings = analyze_case(Case("CL007", project)).findings
    assert {finding.function for finding in findings if finding.code == "CL007"} == {"Server.update_weights"}
    servers = project / "noop_rl" / "servers.py"
    servers.write_text(
        servers.read_text(encoding="utf-8").replace(
            "    def _build(self, config):\n        raise",
            "    def _build(self, config):\n        return AsyncLLM.from_vllm_config(config)\n        raise",
            1,
        ),
        encoding="utf-8",
    )
    findings = analyze_case(Case("CL007", project)).findings
    assert {finding.function for finding in findings if finding.code == "CL007"} == {
        "BaseServer.update_weights",
        "Server.update_weights",
    }
