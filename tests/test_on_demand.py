"""Loading on demand: the files a refit path may reach are summarized, and only those. A name is
resolved through the importing file's imports first, project-wide names in the nearest package
first, another library's object never runs project code; the cost does not grow with files that
cannot matter. `-v` says how many files each stage touched."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from cli_runner import check, write_tree

from cachelint.config import Settings
from cachelint.engine import ON_DEMAND, RunStats, analyze, recording

# The multimodal rules run whatever the project sends: these tests are about which files are loaded.
PYPROJECT = (
    '[project]\nname = "agent"\nversion = "0"\ndependencies = ["vllm>=0.22,<0.30"]\n'
    "[tool.cachelint]\nmultimodal = true\n"
)
TRAINER = """\
from agent.sync.steps import finish_sync


class Trainer:
    def __init__(self, engine):
        self.engine = engine

    async def update_weights(self, weights):
        await finish_sync(self.engine)
"""
STEPS = """\
from agent.engine_ops import clear_prefix


async def finish_sync(engine):
    await clear_prefix(engine)
"""
ENGINE_OPS = """\
from vllm.v1.engine.async_llm import AsyncLLM


async def clear_prefix(engine: AsyncLLM) -> None:
    await engine.reset_prefix_cache()
"""
# What the refit path finds at the end: a prefix reset alone (CL003), with no pause before it (CL007).
REACHED = ["agent/engine_ops.py:5 CL003", "agent/engine_ops.py:5 CL007"]
# Helpers of the same names elsewhere in the project, which no refit path reaches.
DECOY = "def finish_sync(engine):\n    return engine\n\n\ndef clear_prefix(engine):\n    return engine\n"


def project(root: Path, files: dict[str, str]) -> Path:
    return write_tree(root, {"pyproject.toml": PYPROJECT, "agent/__init__.py": "", **files})


def run(root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], RunStats]:
    """`path:line CODE` of each finding, and the run's stats."""
    monkeypatch.chdir(root)
    with recording() as stats:
        analysis = analyze([Path()], Settings(multimodal=True))
    return [f"{finding.path}:{finding.span.line} {finding.code}" for finding in analysis.findings], stats


def on_demand(stats: RunStats) -> int:
    return stats.summarized[ON_DEMAND] + stats.cached[ON_DEMAND]


def test_an_imported_helper_loads_its_module_and_no_other(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = {"agent/trainer.py": TRAINER, "agent/sync/steps.py": STEPS, "agent/engine_ops.py": ENGINE_OPS}
    found, stats = run(project(tmp_path / "one", files), monkeypatch)
    decoys = {f"agent/decoys/helpers_{index}.py": DECOY for index in range(30)}
    with_decoys, more = run(project(tmp_path / "many", {**files, **decoys}), monkeypatch)
    assert found == with_decoys == REACHED
    assert (on_demand(stats), on_demand(more)) == (1, 1)  # agent/sync/steps.py
    assert (stats.trigger, more.trigger) == (2, 2)
    assert more.read == stats.read + 30


def test_a_name_neither_defined_nor_imported_loads_the_nearest_package_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {
        "agent/trainer.py": TRAINER.replace(
            "from agent.sync.steps import finish_sync", "from agent.sync.steps import *"
        ),
        "agent/sync/steps.py": STEPS,
        "agent/engine_ops.py": ENGINE_OPS,
        "tools/steps.py": DECOY,
    }
    found, stats = run(project(tmp_path / "near", files), monkeypatch)
    assert found == REACHED
    assert on_demand(stats) == 1
    # The nearest file defines it as a method, which a bare name cannot call: the next one is loaded.
    method = "class Steps:\n" + "".join(f"    {line}\n" if line else "\n" for line in STEPS.splitlines()[3:])
    found, stats = run(project(tmp_path / "next", {**files, "agent/sync/steps.py": method}), monkeypatch)
    assert found == []
    assert on_demand(stats) == 2


LIBRARY_CALL = """\
import aiohttp


class Trainer:
    async def update_weights(self, session, url):
        response{annotation} = await session.post(url)
        return await response.json()
"""
# A project class with a `json` method that resets the prefix cache: a refit path reaching it is CL003.
CLIENT = """\
from vllm.v1.engine.async_llm import AsyncLLM


class EngineClient:
    def __init__(self, engine: AsyncLLM):
        self.engine = engine

    async def json(self):
        await self.engine.reset_prefix_cache()
"""


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [(": aiohttp.ClientResponse", []), ("", ["agent/client.py:9 CL003", "agent/client.py:9 CL007"])],
    ids=["another library's object", "unknown object"],
)
def test_a_method_of_another_library_s_object_runs_no_project_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, annotation: str, expected: list[str]
) -> None:
    files = {"agent/trainer.py": LIBRARY_CALL.format(annotation=annotation), "agent/client.py": CLIENT}
    found, stats = run(project(tmp_path, files), monkeypatch)
    assert found == expected
    assert on_demand(stats) == 0  # client.py holds a trigger word: it was summarized up front


def test_verbose_prints_each_stage(tmp_path: Path) -> None:
    files = {"agent/trainer.py": TRAINER, "agent/sync/steps.py": STEPS, "agent/engine_ops.py": ENGINE_OPS}
    root = project(tmp_path, files)
    cold = check("-v", "--output-format", "concise", cwd=root)
    stages = [line for line in cold.stderr_lines if line.startswith("cachelint: ") and "warning" not in line]
    assert [line.split(":")[1].strip() for line in stages] == [
        "found 4 files to check in 1 project",
        "read 4 files (0.0 MB)",
        "2 files hold a trigger word",
        "summarized up front",
        "summarized on demand",
        "syntax-checked 0 files no rule needs",
        "rules over 3 files",
        "findings from the cache for 0 of 1 project",
    ]
    assert "summarized up front: 2 files (0 from the cache): " in cold.stderr
    assert "summarized on demand: 1 file in 1 round (0 from the cache): " in cold.stderr
    warm = check("-v", "--output-format", "concise", cwd=root)
    assert warm.stdout == cold.stdout
    assert "cachelint: summarized up front: 0 files (0 from the cache): " in warm.stderr
    assert "cachelint: findings from the cache for 1 of 1 project" in warm.stderr_lines
    quiet = check("--output-format", "concise", cwd=root)
    assert quiet.stderr == ""


def test_only_helpers_that_may_lead_to_a_reset_are_summarized(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The refit path calls a metrics helper that leads nowhere (not summarized) and a helper whose
    module imports another helper module that calls the reset wrapper (both summarized: a chain of
    imports is followed two files deep before it reaches a function known to reset)."""
    trainer = (
        "from agent.metrics import log_metrics\n"
        "from agent.sync.steps import finish_sync\n\n\n"
        "class Trainer:\n"
        "    def __init__(self, engine):\n"
        "        self.engine = engine\n\n"
        "    async def update_weights(self, weights):\n"
        "        log_metrics(weights)\n"
        "        await finish_sync(self.engine)\n"
    )
    files = {
        "agent/trainer.py": trainer,
        "agent/metrics.py": "import json\n\n\ndef log_metrics(values):\n    print(json.dumps(values))\n",
        "agent/sync/steps.py": STEPS.replace(
            "agent.engine_ops import clear_prefix", "agent.sync.more import more"
        ).replace("clear_prefix(engine)", "more(engine)"),
        "agent/sync/more.py": STEPS.replace("finish_sync", "more"),
        "agent/engine_ops.py": ENGINE_OPS,
    }
    found, stats = run(project(tmp_path, files), monkeypatch)
    assert found == REACHED
    assert on_demand(stats) == 2  # steps.py and more.py, not metrics.py


ROLLOUT = """\
from vllm.v1.engine.async_llm import AsyncLLM


class Rollout:
    def __init__(self, engine: AsyncLLM):
        self.engine = engine

    async def update_weights(self, weights):
{pause}        await self.engine.reset_prefix_cache()
        await self.engine.reset_mm_cache()
        await self.engine.reset_encoder_cache()
"""
# Starts the refit through Ray (the call graph does not link it to the rollout's), after an abort.
MANAGER = """\
import asyncio


class Manager:
    def __init__(self, replicas):
        self.replicas = replicas

    async def push(self, weights):
{abort}        await asyncio.gather(*[r.update_weights.remote(weights) for r in self.replicas])
"""
ABORT = "        await asyncio.gather(*[r.abort_all_requests.remote() for r in self.replicas])\n"
PAUSE = '        await self.engine.pause_generation(mode="abort")\n'


@pytest.mark.parametrize(
    ("pause", "abort", "found", "loaded"),
    [
        (PAUSE, ABORT, [], 0),  # the refit pauses itself: whatever its callers do, nothing to flag
        ("", ABORT, [], 1),  # CL007 would flag the reset, but the manager aborts first
        ("", "", ["agent/rollout.py:9 CL007"], 0),  # the manager names no pause or abort
    ],
    ids=["paused_in_the_refit", "caller_aborts_first", "no_caller_pauses"],
)
def test_the_callers_of_a_refit_are_summarized_only_when_cl007_would_flag_its_reset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pause: str, abort: str, found: list[str], loaded: int
) -> None:
    files = {"agent/rollout.py": ROLLOUT.format(pause=pause), "agent/manager.py": MANAGER.format(abort=abort)}
    findings, stats = run(project(tmp_path, files), monkeypatch)
    assert findings == found
    assert on_demand(stats) == loaded


def test_a_run_leaves_its_index_to_be_freed_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No reference cycle holds the run's index (nor its summaries): the language server analyses after
    every change, and what a cycle holds waits for the garbage collector's rare full pass."""
    from cachelint.project import ProjectIndex

    files = {"agent/rollout.py": ROLLOUT.format(pause=""), "agent/manager.py": MANAGER.format(abort=ABORT)}
    root = project(tmp_path, files)
    gc.collect()
    gc.disable()
    try:
        findings, stats = run(root, monkeypatch)
        alive = [item for item in gc.get_objects() if isinstance(item, ProjectIndex)]
    finally:
        gc.enable()
    assert on_demand(stats) == 1  # the callers were loaded: the path that kept the index
    assert findings == []
    assert alive == []
